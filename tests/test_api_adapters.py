"""The `openai` and `gemini` adapters against a local server on 127.0.0.1 that speaks each API's wire format.

Cases: success (request shape: system, text and audio parts in order, WAV
audio, auth header), 429 then success (Retry-After respected), 5xx until the
attempts run out, malformed bodies, connection refused, ordered concurrency,
text-only mode, and the API key never showing in outputs, descriptions or logs.
"""

from __future__ import annotations

import base64
import io
import json
import logging
import socket
import threading
import time
import wave
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from eval_scripts.models.base import ChoiceQuery, Clip, Part, build_model

SENTINEL = "sk-SENTINEL-do-not-leak-8c1f"
FAST = dict(backoff_base=0.001, backoff_max=0.002, max_attempts=3, timeout=10)
MAX_REQUESTS = 200  # the fake server refuses more, so a retry bug cannot loop forever


class FakeApi:
    """A scripted HTTP server: each POST gets the next scripted answer, or the responder's."""

    def __init__(self, responder):
        self.responder = responder  # (path, headers, body) -> (status, headers, bytes)
        self.script: deque = deque()
        self.requests: list[dict] = []
        self.active = 0
        self.peak = 0
        self.lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server API)
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with fake.lock:
                    fake.active += 1
                    fake.peak = max(fake.peak, fake.active)
                    count = len(fake.requests)
                    record = {"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()}, "body": json.loads(raw)}
                    fake.requests.append(record)
                    scripted = fake.script.popleft() if fake.script else None
                try:
                    if count >= MAX_REQUESTS:
                        status, headers, payload = 400, {}, b"too many requests for this test server"
                    else:
                        status, headers, payload = scripted or fake.responder(record)
                finally:
                    with fake.lock:  # before answering: the client may send its next request at once
                        fake.active -= 1
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


def json_answer(payload: dict, status: int = 200, headers: dict | None = None):
    return status, {"Content-Type": "application/json", **(headers or {})}, json.dumps(payload).encode()


def openai_ok(record):
    seed = record["body"].get("seed", 0)
    return json_answer({"choices": [{"message": {"role": "assistant", "content": f'{{"selected": "Option 1", "seed": {seed}}}'}}],
                        "usage": {"prompt_tokens": 1200, "completion_tokens": 80, "total_tokens": 1280}})


def gemini_ok(record):
    seed = record["body"]["generationConfig"].get("seed", 0)
    return json_answer({"candidates": [{"content": {"role": "model", "parts": [
        {"text": "weighing the tones...", "thought": True}, {"text": f'{{"selected": "Option 2", "seed": {seed}}}'}]},
        "finishReason": "STOP"}], "usageMetadata": {"promptTokenCount": 900, "candidatesTokenCount": 40, "thoughtsTokenCount": 60}})


PROVIDERS = {
    "openai": dict(env="OPENAI_API_KEY", ok=openai_ok, base=lambda url: f"{url}/v1", path="/v1/chat/completions", text='{"selected": "Option 1", "seed": 7}', tokens=(1200, 80)),
    "gemini": dict(env="GEMINI_API_KEY", ok=gemini_ok, base=lambda url: f"{url}/v1beta", path="/v1beta/models/test-model:generateContent", text='{"selected": "Option 2", "seed": 7}', tokens=(900, 100)),
}


def tone_clip(seconds: float, column: str, sr: int = 16_000) -> Clip:
    t = np.arange(int(seconds * sr)) / sr
    return Clip((0.2 * np.sin(2 * np.pi * 180 * t)).astype(np.float32), sr, column)


def make_query(seed: int = 7, audio: bool = True) -> ChoiceQuery:
    turn3, option1, option2 = tone_clip(0.5, "turn3_audio"), tone_clip(0.7, "turn4_audio_high"), tone_clip(0.9, "turn4_audio_low")
    if audio:
        parts = [Part("text", "Scenario. Turn 3:"), Part("audio", clip=turn3), Part("text", "Option 1:"), Part("audio", clip=option1),
                 Part("text", "Option 2:"), Part("audio", clip=option2), Part("text", "Answer in JSON.")]
    else:
        parts = [Part("text", "Scenario. Option 1 (tone: calm). "), Part("text", "Option 2 (tone: sharp).")]
    return ChoiceQuery(uid=f"dlg{seed}/r1/run0/ab", system="You judge delivery.", parts=parts, options=(option1, option2),
                       preceding=turn3, seed=seed)


def serve(name: str, monkeypatch):
    spec = PROVIDERS[name]
    monkeypatch.setenv(spec["env"], SENTINEL)
    fake = FakeApi(spec["ok"])
    yield name, spec, fake
    fake.close()


@pytest.fixture(params=["openai", "gemini"])
def provider(request, monkeypatch):
    yield from serve(request.param, monkeypatch)


@pytest.fixture
def openai_server(monkeypatch):
    yield from serve("openai", monkeypatch)


@pytest.fixture
def gemini_server(monkeypatch):
    yield from serve("gemini", monkeypatch)


def build(name: str, spec: dict, fake: FakeApi, **kwargs):
    model = build_model(name, model="test-model", base_url=spec["base"](fake.url), **{**FAST, **kwargs})
    return model


def wav_seconds(b64: str) -> tuple[float, int]:
    with wave.open(io.BytesIO(base64.b64decode(b64))) as w:
        assert (w.getnchannels(), w.getsampwidth()) == (1, 2)
        return w.getnframes() / w.getframerate(), w.getframerate()


def test_success_returns_text_tokens_cost_latency(provider):
    name, spec, fake = provider
    out = build(name, spec, fake).generate([make_query()])[0]
    assert out.error is None and out.text == spec["text"]
    assert (out.input_tokens, out.output_tokens) == spec["tokens"]
    assert out.cost_usd is None  # priced by the runner from the tokens and --price-in/--price-out
    assert out.latency_s > 0
    assert len(fake.requests) == 1 and fake.requests[0]["path"] == spec["path"]


def test_openai_request_interleaves_text_and_wav_audio_in_order(openai_server):
    name, spec, fake = openai_server
    build(name, spec, fake).generate([make_query()])
    request = fake.requests[0]
    assert request["headers"]["authorization"] == f"Bearer {SENTINEL}"
    body = request["body"]
    assert body["model"] == "test-model" and body["seed"] == 7 and body["temperature"] == 0.0
    assert body["max_completion_tokens"] == 1024
    assert body["messages"][0] == {"role": "system", "content": "You judge delivery."}
    content = body["messages"][1]["content"]
    assert [part["type"] for part in content] == ["text", "input_audio", "text", "input_audio", "text", "input_audio", "text"]
    audio = [wav_seconds(part["input_audio"]["data"]) for part in content if part["type"] == "input_audio"]
    assert [part["input_audio"]["format"] for part in content if part["type"] == "input_audio"] == ["wav"] * 3
    assert [round(seconds, 2) for seconds, _ in audio] == [0.5, 0.7, 0.9]  # turn 3, option 1, option 2
    assert {rate for _, rate in audio} == {24_000}
    assert content[2] == {"type": "text", "text": "Option 1:"}


def test_gemini_request_has_inline_wav_parts_in_order_and_key_header(gemini_server):
    name, spec, fake = gemini_server
    build(name, spec, fake).generate([make_query()])
    request = fake.requests[0]
    assert request["headers"]["x-goog-api-key"] == SENTINEL
    assert "key=" not in request["path"]  # never in the URL
    body = request["body"]
    assert body["systemInstruction"] == {"parts": [{"text": "You judge delivery."}]}
    parts = body["contents"][0]["parts"]
    assert [("audio" if "inline_data" in p else "text") for p in parts] == ["text", "audio", "text", "audio", "text", "audio", "text"]
    audio = [wav_seconds(p["inline_data"]["data"]) for p in parts if "inline_data" in p]
    assert [p["inline_data"]["mime_type"] for p in parts if "inline_data" in p] == ["audio/wav"] * 3
    assert [round(s, 2) for s, _ in audio] == [0.5, 0.7, 0.9] and {r for _, r in audio} == {16_000}
    assert body["generationConfig"]["seed"] == 7 and body["generationConfig"]["maxOutputTokens"] == 8192


def test_429_then_success_waits_as_retry_after_says(provider):
    name, spec, fake = provider
    fake.script.append(json_answer({"error": {"message": "rate limited"}}, status=429, headers={"Retry-After": "7"}))
    model = build(name, spec, fake)
    waits = []
    model.sleep = waits.append  # record instead of sleeping 7 s
    out = model.generate([make_query()])[0]
    assert out.error is None and out.text == spec["text"]
    assert waits == [7.0] and len(fake.requests) == 2


def test_5xx_until_attempts_run_out_gives_an_error_output(provider):
    name, spec, fake = provider
    for _ in range(3):
        fake.script.append((500, {}, b"internal error"))
    outputs = build(name, spec, fake).generate([make_query()])
    assert len(outputs) == 1 and outputs[0].text is None and outputs[0].choice is None
    assert "gave up after 3 attempts" in outputs[0].error and "HTTP 500" in outputs[0].error
    assert len(fake.requests) == 3


def test_client_errors_are_not_retried(provider):
    name, spec, fake = provider
    fake.script.append(json_answer({"error": {"message": "bad request"}}, status=400))
    out = build(name, spec, fake).generate([make_query()])[0]
    assert "HTTP 400" in out.error and len(fake.requests) == 1


@pytest.mark.parametrize(
    "payload",
    [b"<html>gateway hiccup</html>", b"[1, 2]", b'{"unexpected": true}', b'{"choices": [], "candidates": []}'],
    ids=["not-json", "not-object", "no-answer-field", "empty-lists"],
)
def test_malformed_bodies_give_an_error_output(provider, payload):
    name, spec, fake = provider
    fake.script.append((200, {"Content-Type": "application/json"}, payload))
    out = build(name, spec, fake).generate([make_query()])[0]
    assert out.text is None and "malformed response body" in out.error
    assert len(fake.requests) == 1


def test_connection_refused_is_retried_then_reported(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SENTINEL)
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    model = build_model("openai", model="m", base_url=f"http://127.0.0.1:{port}/v1", **FAST)
    out = model.generate([make_query()])[0]
    assert "gave up after 3 attempts" in out.error and "ConnectError" in out.error


def test_concurrent_calls_keep_input_order(provider):
    name, spec, fake = provider
    ok = spec["ok"]

    def slow_first(record):
        body = record["body"]
        seed = body["seed"] if "seed" in body else body["generationConfig"]["seed"]
        time.sleep(0.03 * (8 - seed))  # the first queries answer last
        return ok(record)

    fake.responder = slow_first
    outputs = build(name, spec, fake, concurrency=4).generate([make_query(seed=s) for s in range(8)])
    assert [json.loads(o.text)["seed"] for o in outputs] == list(range(8))
    assert 1 < fake.peak <= 4


def test_text_only_queries_send_text_only(provider):
    name, spec, fake = provider
    out = build(name, spec, fake).generate([make_query(audio=False)])[0]
    assert out.error is None
    body = fake.requests[0]["body"]
    if name == "openai":
        assert body["messages"][1] == {"role": "user", "content": "Scenario. Option 1 (tone: calm). Option 2 (tone: sharp)."}
    else:
        assert all(set(part) == {"text"} for part in body["contents"][0]["parts"])


def test_prices_are_run_options_not_model_args(provider):
    name, spec, fake = provider
    with pytest.raises(ValueError, match="--price-in"):
        build(name, spec, fake, price_in=2.0)


def test_the_key_never_appears_in_outputs_descriptions_or_logs(provider, caplog):
    name, spec, fake = provider
    caplog.set_level(logging.DEBUG)
    echo_key = json_answer({"error": {"message": f"Incorrect API key provided: {SENTINEL}"}}, status=401)
    fake.script.extend([(503, {"Retry-After": "0"}, f"upstream saw {SENTINEL}".encode()), echo_key])
    model = build(name, spec, fake)
    outputs = model.generate([make_query(seed=1), make_query(seed=2), make_query(seed=3)])
    assert outputs[0].error is None or "***" in outputs[0].error
    assert any(o.error and "***" in o.error for o in outputs)  # the echoed key was scrubbed, not dropped silently
    everything = json.dumps([o.__dict__ for o in outputs]) + json.dumps(model.describe()) + caplog.text
    assert SENTINEL not in everything
    assert model.describe()["api_key_env"] == spec["env"]


def test_keys_come_only_from_the_environment(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    with pytest.raises(ValueError, match="OPENAI_API_KEY"):
        build_model("openai")  # the official endpoint needs a key
    with pytest.raises(ValueError, match="GEMINI_API_KEY"):
        build_model("gemini")
    with pytest.raises(ValueError, match="never passed as arguments"):
        build_model("openai", base_url="http://127.0.0.1:9/v1", api_key="sk-oops")
    monkeypatch.setenv("MY_VLLM_KEY", SENTINEL)
    model = build_model("openai", base_url="http://127.0.0.1:9/v1", api_key_env="MY_VLLM_KEY")
    assert model.auth_headers() == {"Authorization": f"Bearer {SENTINEL}"}
    assert SENTINEL not in json.dumps(model.describe())


def test_a_local_compatible_server_needs_no_key(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    fake = FakeApi(openai_ok)
    try:
        model = build_model("openai", model="Qwen/Qwen3-Omni-30B-A3B-Instruct", base_url=f"{fake.url}/v1", temperature=None,
                            max_new_tokens=300, **FAST)
        out = model.generate([make_query()])[0]
        assert out.error is None and out.cost_usd is None  # no prices given
        assert "authorization" not in fake.requests[0]["headers"]
        assert "temperature" not in fake.requests[0]["body"]
        assert fake.requests[0]["body"]["max_completion_tokens"] == 300  # --max-new-tokens reaches the API
        assert model.describe()["label"] == "openai:Qwen/Qwen3-Omni-30B-A3B-Instruct"
    finally:
        fake.close()


class DrippingServer:
    """A loopback server that answers one byte every `interval` seconds: in the status line (`where="head"`) or the body."""

    def __init__(self, where: str, interval: float = 0.3):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.where, self.interval, self.stop = where, interval, threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._drip, args=(conn,), daemon=True).start()

    def _drip(self, conn):
        head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 4000\r\n\r\n"
        try:
            conn.recv(1 << 20)
            if self.where == "body":
                conn.sendall(head)
            for byte in (head if self.where == "head" else b"{" + b" " * 3999):
                if self.stop.is_set():
                    break
                conn.sendall(bytes([byte]))
                time.sleep(self.interval)
        except OSError:
            pass
        finally:
            conn.close()

    def close(self):
        self.stop.set()
        self.sock.close()


@pytest.mark.parametrize("where", ["head", "body"])
@pytest.mark.slow
def test_timeout_is_a_deadline_for_the_whole_attempt(where, monkeypatch):
    # Issue 8.6: a server dripping a byte every 0.3 s used to hold one attempt ~25 s with timeout=2.
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    server = DrippingServer(where)
    try:
        model = build_model("openai", model="m", base_url=f"{server.url}/v1", max_attempts=2, backoff_base=0.001,
                            backoff_max=0.002, timeout=1.0)
        began = time.perf_counter()
        out = model.generate([make_query(audio=False)])[0]  # text only: no resampler warm-up inside the timing
        elapsed = time.perf_counter() - began
    finally:
        server.close()
    assert out.text is None and "AttemptDeadlineError" in out.error and "gave up after 2 attempts" in out.error
    assert elapsed < 2 * 1.0 + 1.0  # two attempts of one second each, plus slack


def test_a_key_echoed_inside_a_200_answer_is_scrubbed_from_the_text(openai_server):
    # Issue 8.14: a server that echoes the Authorization header in its reply.
    name, spec, fake = openai_server
    fake.script.append(json_answer({"choices": [{"message": {"content": f'You sent "Bearer {SENTINEL}". {{"selected": 1}}'}}]}))
    out = build(name, spec, fake).generate([make_query()])[0]
    assert out.error is None and SENTINEL not in out.text and "Bearer ***" in out.text
