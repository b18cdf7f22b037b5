"""The interactive track's user LLM and judges over an API, against a loopback server speaking the OpenAI and Gemini wire formats:
success (request shapes, audio parts, keys), 429 then success, 500 until the attempts run out, malformed bodies, and a judge
answer that cannot be read recorded as missing, never as a score."""

from __future__ import annotations

import base64
import io
import json
import wave

import numpy as np
import pytest

from eval_scripts import store
from eval_scripts.interactive.agents import ROLES
from eval_scripts.interactive.agents import build_agents
from eval_scripts.interactive.agents import load_prompt
from eval_scripts.interactive.profiles import load_profiles
from eval_scripts.interactive.track import InteractConfig
from eval_scripts.interactive.track import interact
from test_api_adapters import SENTINEL
from test_api_adapters import FakeApi
from test_api_adapters import json_answer
from test_interactive import CARING
from test_interactive import _profiles
from test_interactive import _Scripted

FAST = dict(backoff_base=0.001, backoff_max=0.002, max_attempts=3, timeout=10)
PROMPTS = {role: load_prompt(role) for role in ROLES}


def _chat(text: str):
    return json_answer({"choices": [{"message": {"role": "assistant", "content": text}}], "usage": {"prompt_tokens": 50, "completion_tokens": 10}})


def _role(body: dict) -> str:
    system = body["messages"][0]["content"]
    for start, role in (("You play a person", "user"), ("You watch a conversation", "stop"),
                        ("You are an expert judge of emotional intelligence in spoken", "turn"), ("You are an expert judge", "dialogue")):
        if system.startswith(start):
            return role
    raise AssertionError(system)


def openai_agents_server(unreadable_turn: int | None = None):
    """Answers each role as an LLM would; the turn judge answers prose for one turn."""

    def respond(record):
        body = record["body"]
        role = _role(body)
        if role == "user":
            turn = sum(1 for m in body["messages"] if m["role"] == "assistant") + 1
            return _chat(json.dumps({"line": f"Line {turn}: I still feel awful about it.", "emotion": "sadness"}))
        if role == "stop":
            return _chat('{"decision": "continue", "reason": "still open"}')
        if role == "turn":
            turn = body["messages"][1]["content"][0]["text"].count("User (") + 1  # the transcript ends before the rated turn
            if turn == unreadable_turn:
                return _chat("It was a lovely, caring reply; I'd say very good overall.")
            return _chat(f'```json\n{{"reason": "kind words, calm voice", "score": {min(5, turn + 2)}}}\n```')
        return _chat('{"reason": "helpful overall", "score": 4}')

    return FakeApi(respond)


@pytest.fixture
def key(monkeypatch):
    monkeypatch.setenv("SPEECHEQ_TEST_JUDGE_KEY", SENTINEL)


def test_an_api_user_and_api_judges_run_the_loop_and_an_unreadable_rating_is_missing(tmp_path, key):
    fake = openai_agents_server(unreadable_turn=2)
    args = {"base_url": f"{fake.url}/v1", "api_key_env": "SPEECHEQ_TEST_JUDGE_KEY", **FAST}
    try:
        config = InteractConfig(model="x", output_dir=str(tmp_path / "run"), profiles=str(_profiles(tmp_path, ["en-support-exam"])),
                                max_turns=3, mos="none", user_llm="openai", user_llm_args={"model": "user-llm", **args},
                                judge="openai", judge_args={"model": "text-judge", "audio_model": "audio-judge", **args})
        results = interact(config, model=_Scripted({"en-support-exam": CARING}), progress=False)
    finally:
        fake.close()
    (record,) = store.read_sample_lines(tmp_path / "run")
    assert [t["user_text"] for t in record["turns"]][1:] == ["Line 2: I still feel awful about it.", "Line 3: I still feel awful about it."]
    assert [t["judge_score"] for t in record["turns"]] == [3, None, 5]
    missing = record["turns"][1]
    assert missing["judge_status"] == "invalid" and "no JSON object" in missing["judge_detail"] and missing["judge_raw"].startswith("It was")
    m = results["metrics"]
    assert m["turn_score"] == 4.0 and m["n_rated_turns"] == 2 and m["turn_judge_missing"] == 1 and m["turn_judge_errors"] == 0
    assert (record["stop_reason"], record["dialogue_score"]) == ("turn_cap", 4)
    by_model = {}
    for request in fake.requests:
        by_model.setdefault(request["body"]["model"], []).append(request)
        assert request["headers"]["authorization"] == f"Bearer {SENTINEL}" and request["path"] == "/v1/chat/completions"
    assert {k: len(v) for k, v in by_model.items()} == {"user-llm": 2, "text-judge": 3 + 1, "audio-judge": 3}
    last = max(by_model["audio-judge"], key=lambda r: len(r["body"]["messages"][1]["content"][0]["text"]))  # requests run concurrently
    parts = last["body"]["messages"][1]["content"]
    audio = [p["input_audio"] for p in parts if p["type"] == "input_audio"]
    assert [p["type"] for p in parts] == ["text", "input_audio", "text", "input_audio", "text"] and all(a["format"] == "wav" for a in audio)
    with wave.open(io.BytesIO(base64.b64decode(audio[1]["data"]))) as clip:  # the reply, resampled to the judge's 16 kHz
        assert clip.getframerate() == 16_000 and clip.getnframes() == 16_000
    assert "Line 2: I still feel awful" in parts[0]["text"]  # the transcript before the rated exchange
    written = "".join(p.read_text(encoding="utf-8") for p in (tmp_path / "run").rglob("*.json*"))
    assert SENTINEL not in written and results["usage"]["judge"]["calls"] == 7


def _turn_item():
    profile = load_profiles()[0]
    tone = (0.1 * np.sin(np.arange(16_000) / 5)).astype(np.float32)
    turns = [{"turn": 1, "user_text": profile.first_line, "user_emotion": profile.first_emotion, "model_text": "I see."}]
    return {"uid": profile.id, "profile": profile, "turns": turns, "user_audio": (tone, 16_000), "reply_audio": tone, "reply_sr": 16_000}


@pytest.mark.parametrize("script, error", [
    ([json_answer({}, status=429, headers={"Retry-After": "0"})], None),
    ([(500, {}, b"overloaded")] * 3, "gave up after 3 attempts"),
    ([(200, {"Content-Type": "application/json"}, b"not json")], "malformed response body"),
    ([json_answer({"choices": []})], "malformed response body"),
])
def test_judge_client_retries_and_failures(key, script, error):
    fake = FakeApi(lambda record: _chat('{"reason": "fits", "score": 4}'))
    fake.script.extend(script)
    try:
        agents = build_agents("openai", PROMPTS, base_url=f"{fake.url}/v1", api_key_env="SPEECHEQ_TEST_JUDGE_KEY", **FAST)
        (reply,) = agents.answer("turn", [_turn_item()], [7])
    finally:
        fake.close()
    if error is None:
        assert reply.error is None and reply.text == '{"reason": "fits", "score": 4}' and len(fake.requests) == 2
    else:
        assert reply.text is None and error in reply.error and SENTINEL not in reply.error


def test_a_failed_judge_call_is_a_missing_rating_in_the_record(tmp_path, key):
    fake = FakeApi(lambda record: (500, {}, b"down"))
    try:
        config = InteractConfig(model="x", output_dir=str(tmp_path / "run"), profiles=str(_profiles(tmp_path, ["en-support-exam"])),
                                max_turns=1, mos="none", judge="openai",
                                judge_args={"base_url": f"{fake.url}/v1", "api_key_env": "SPEECHEQ_TEST_JUDGE_KEY", **FAST})
        results = interact(config, model=_Scripted({"en-support-exam": CARING}), progress=False)
    finally:
        fake.close()
    (record,) = store.read_sample_lines(tmp_path / "run")
    turn = record["turns"][0]
    assert record["status"] == "ok" and turn["judge_score"] is None and turn["judge_status"] == "error" and turn["stop_status"] == "error"
    assert record["stop_reason"] == "turn_cap" and record["dialogue_score"] is None
    m = results["metrics"]
    assert m["turn_score"] is None and m["turn_judge_missing"] == 1 and m["turn_judge_errors"] == 1 and m["stop_judge_missing"] == 1


def test_gemini_judges_speak_generate_content_with_inline_audio(monkeypatch):
    monkeypatch.setenv("GEMINI_API_KEY", SENTINEL)

    def respond(record):
        return json_answer({"candidates": [{"content": {"role": "model", "parts": [{"text": "thinking", "thought": True},
                           {"text": '{"reason": "calm and warm", "score": 5}'}]}, "finishReason": "STOP"}],
                           "usageMetadata": {"promptTokenCount": 900, "candidatesTokenCount": 20, "thoughtsTokenCount": 30}})

    fake = FakeApi(respond)
    try:
        agents = build_agents("gemini", PROMPTS, base_url=f"{fake.url}/v1beta", **FAST)
        (reply,) = agents.answer("turn", [_turn_item()], [7])
    finally:
        fake.close()
    assert reply.text == '{"reason": "calm and warm", "score": 5}' and (reply.input_tokens, reply.output_tokens) == (900, 50)
    request = fake.requests[0]
    assert request["path"] == "/v1beta/models/gemini-2.5-pro:generateContent" and request["headers"]["x-goog-api-key"] == SENTINEL
    body = request["body"]
    assert body["systemInstruction"]["parts"][0]["text"].startswith("You are an expert judge")
    kinds = [next(iter(p)) for p in body["contents"][0]["parts"]]
    assert body["contents"][0]["role"] == "user" and kinds == ["text", "inline_data", "text", "inline_data", "text"]
    assert body["contents"][0]["parts"][1]["inline_data"]["mime_type"] == "audio/wav" and body["generationConfig"]["seed"] == 7


@pytest.mark.parametrize("backend, args, message", [
    ("scripted", {"model": "x"}, "takes no args"),
    ("claude", {}, "unknown agent backend 'claude'; known: scripted, openai, gemini"),
    ("openai", {"api_key": "x"}, "never passed as arguments"),
])
def test_agent_backends_fail_loudly(backend, args, message):
    with pytest.raises(ValueError, match=message):
        build_agents(backend, PROMPTS, **args)
