"""The shared OpenAI-compatible chat client against a loopback server: success, retries, exhaustion, malformed bodies, usage tally, keys."""

from __future__ import annotations

import json

import pytest

from speecheq_dataset.chat import ChatClient
from test_api_adapters import SENTINEL, FakeApi, json_answer

FAST = dict(backoff_base=0.001, backoff_max=0.002, max_attempts=3, timeout=10)


def answer(text: str, tokens=(100, 20)):
    return json_answer({"choices": [{"message": {"role": "assistant", "content": text}}],
                        "usage": {"prompt_tokens": tokens[0], "completion_tokens": tokens[1]}})


@pytest.fixture
def server(monkeypatch):
    monkeypatch.setenv("SPEECHEQ_TEST_CHAT_KEY", SENTINEL)
    fake = FakeApi(lambda record: answer('{"ok": true}'))
    yield fake
    fake.close()


def client(fake, **kwargs) -> ChatClient:
    return ChatClient("test-llm", base_url=f"{fake.url}/v1", api_key_env="SPEECHEQ_TEST_CHAT_KEY", price_in=1.0, price_out=4.0,
                      **{**FAST, **kwargs})


def test_success_sends_the_openai_wire_format_and_tallies_usage(server):
    chat = client(server)
    reply = chat.complete([{"role": "user", "content": "hi"}], seed=3, json_mode=True)
    assert reply.ok and reply.text == '{"ok": true}' and (reply.input_tokens, reply.output_tokens) == (100, 20)
    assert reply.cost_usd == pytest.approx((100 * 1.0 + 20 * 4.0) / 1e6)
    request = server.requests[0]
    assert request["path"] == "/v1/chat/completions" and request["headers"]["authorization"] == f"Bearer {SENTINEL}"
    assert request["body"] == {"model": "test-llm", "messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": 2048,
                               "temperature": 0.0, "seed": 3, "response_format": {"type": "json_object"}}
    assert chat.usage.as_dict() == {"calls": 1, "failed": 0, "input_tokens": 100, "output_tokens": 20, "cost_usd": 0.00018}


def test_429_then_success_and_500_exhausted(server):
    chat = client(server)
    server.script.extend([json_answer({}, status=429, headers={"Retry-After": "0"}), answer("second try")])
    assert chat.complete([{"role": "user", "content": "a"}]).text == "second try"
    server.script.extend([(500, {}, f"boom {SENTINEL}".encode())] * 3)
    failed = chat.complete([{"role": "user", "content": "b"}], label="stage x")
    assert failed.text is None and "stage x: gave up after 3 attempts" in failed.error
    assert SENTINEL not in failed.error and "***" in failed.error
    assert chat.usage.calls == 2 and chat.usage.failed == 1 and len(server.requests) == 2 + 3


@pytest.mark.parametrize("payload", [b"not json", b"[1, 2]", json.dumps({"choices": []}).encode(), json.dumps({"error": "x"}).encode()])
def test_malformed_bodies_fail_the_call_with_a_reason(server, payload):
    server.script.append((200, {"Content-Type": "application/json"}, payload))
    reply = client(server).complete([{"role": "user", "content": "c"}])
    assert reply.text is None and "malformed response body" in reply.error


def test_many_conversations_come_back_in_input_order(server):
    server.responder = lambda record: answer(record["body"]["messages"][0]["content"].upper())
    replies = client(server, concurrency=3).complete_many([[{"role": "user", "content": f"m{i}"}] for i in range(9)])
    assert [r.text for r in replies] == [f"M{i}" for i in range(9)]


def test_the_official_endpoint_needs_a_key_a_local_one_does_not(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ValueError, match="OPENAI_API_KEY"):
        ChatClient("gpt-4o")
    assert ChatClient("local", base_url="http://127.0.0.1:9/v1").describe()["base_url"] == "http://127.0.0.1:9/v1"
