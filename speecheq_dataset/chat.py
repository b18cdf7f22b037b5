"""A client for any OpenAI-compatible chat-completions endpoint (OpenAI, a vLLM server, a local server).

One home for "send these messages, get the text back", shared by the
generation pipeline's LLM stages, the cascade's text LLM and the judges:
keys from the environment only, bounded retries with backoff, a deadline per
attempt (speecheq_dataset.http_api), ordered concurrency, and a thread-safe
tally of calls, tokens and cost.
"""

from __future__ import annotations

import base64
import binascii
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from dataclasses import field

from .http_api import ApiCallError
from .http_api import RetryPolicy
from .http_api import cost_usd
from .http_api import map_in_order
from .http_api import post_json
from .http_api import read_api_key
from .http_api import redact_url
from .secrecy import scrub

logger = logging.getLogger(__name__)

OPENAI_BASE_URL = "https://api.openai.com/v1"


@dataclass(frozen=True)
class ChatReply:
    """One completion, or the error that ended its attempts (`text` None then)."""

    text: str | None
    input_tokens: int | None = None
    output_tokens: int | None = None
    latency_s: float = 0.0
    cost_usd: float | None = None
    error: str | None = None
    audio: bytes | None = None  # the encoded audio of a spoken reply (audio output requested), else None

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass
class Usage:
    """Calls, failures, tokens and cost so far (thread-safe; `add` is the only writer)."""

    calls: int = 0
    failed: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, reply: ChatReply) -> None:
        with self._lock:
            self.calls += 1
            self.failed += reply.error is not None
            self.input_tokens += reply.input_tokens or 0
            self.output_tokens += reply.output_tokens or 0
            self.cost_usd += reply.cost_usd or 0.0

    def as_dict(self) -> dict:
        with self._lock:
            return {"calls": self.calls, "failed": self.failed, "input_tokens": self.input_tokens,
                    "output_tokens": self.output_tokens, "cost_usd": round(self.cost_usd, 6)}


def token_count(value) -> int | None:
    """A token count from a usage field (None when absent or not a finite number)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value or value in (float("inf"), float("-inf")):
        return None
    return int(value)


def reply_text(body: dict) -> tuple[str, int | None, int | None]:
    """(text, input tokens, output tokens) of a chat-completions body; ValueError/KeyError/TypeError on another shape."""
    if "error" in body and "choices" not in body:
        raise ValueError(f"error object in a 200 response: {body['error']}")
    message = body["choices"][0]["message"]
    content = message.get("content")
    if isinstance(content, list):  # some compatible servers return content parts
        content = "".join(part.get("text", "") for part in content if isinstance(part, dict))
    if content is None:
        if message.get("refusal"):
            raise ValueError(f"refusal: {message['refusal']}")
        content = ""
    if not isinstance(content, str):
        raise TypeError(f"message content is {type(content).__name__}")
    usage = body.get("usage") or {}
    return content, token_count(usage.get("prompt_tokens")), token_count(usage.get("completion_tokens"))


def reply_audio(body: dict) -> tuple[bytes | None, str | None]:
    """(encoded audio, its transcript) of a chat-completions reply with audio output; (None, None) without.

    Audio output puts base64 audio and its transcript in `message.audio`; ValueError on a malformed one.
    """
    audio = body["choices"][0]["message"].get("audio")
    if not audio:
        return None, None
    if not isinstance(audio, dict) or not isinstance(audio.get("data"), str):
        raise ValueError("message.audio has no base64 `data`")
    try:
        data = base64.b64decode(audio["data"], validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("message.audio.data is not base64") from None
    transcript = audio.get("transcript")
    return data, transcript if isinstance(transcript, str) else None


class ChatClient:
    """Chat completions against `base_url` with model `model`; the key comes from the variable `api_key_env`.

    The official OpenAI endpoint needs a key; a local or self-hosted server
    (vLLM without --api-key) does not, unless `key_required=True`. Another
    wire format (speecheq_dataset.gemini) overrides `endpoint`, `auth_headers`,
    `body` and `parse`, and keeps the rest.
    """

    official_base_url = OPENAI_BASE_URL  # the endpoint that always needs a key

    def __init__(
        self,
        model: str,
        *,
        base_url: str = OPENAI_BASE_URL,
        api_key_env: str = "OPENAI_API_KEY",
        key_required: bool | None = None,
        concurrency: int = 4,
        max_attempts: int = 6,
        backoff_base: float = 1.0,
        backoff_max: float = 60.0,
        retry_after_max: float = 300.0,
        timeout: float = 180.0,
        temperature: float | None = 0.0,
        max_tokens: int = 2048,
        price_in: float | None = None,
        price_out: float | None = None,
    ):
        if int(concurrency) < 1 or int(max_attempts) < 1:
            raise ValueError(f"chat client: concurrency and max_attempts must be >= 1, got {concurrency}, {max_attempts}")
        self.model = str(model)
        self.base_url = str(base_url).rstrip("/")
        self.api_key_env = api_key_env
        required = self.base_url == self.official_base_url if key_required is None else key_required
        self._api_key = read_api_key(api_key_env, required=required)
        self.concurrency = int(concurrency)
        self.policy = RetryPolicy(int(max_attempts), float(backoff_base), float(backoff_max), float(retry_after_max))
        self.timeout = float(timeout)
        self.temperature = temperature
        self.max_tokens = int(max_tokens)
        self.price_in, self.price_out = price_in, price_out
        self.usage = Usage()
        self._client = None
        self._client_lock = threading.Lock()
        self.sleep: Callable[[float], None] = time.sleep  # tests may replace it

    def describe(self) -> dict:
        """What results record of this client (the key variable's name, never its value)."""
        return {"model": self.model, "base_url": redact_url(self.base_url), "api_key_env": self.api_key_env,
                "temperature": self.temperature, "max_tokens": self.max_tokens}

    def _http(self):
        with self._client_lock:
            if self._client is None:
                import httpx

                self._client = httpx.Client(timeout=self.timeout, limits=httpx.Limits(max_connections=self.concurrency))
            return self._client

    def close(self) -> None:
        with self._client_lock:
            if self._client is not None:
                self._client.close()
                self._client = None

    def body(self, messages: list[dict], *, seed: int | None = None, json_mode: bool = False, **extra) -> dict:
        """The request body for `messages` (OpenAI wire format)."""
        body: dict = {"model": self.model, "messages": messages, "max_completion_tokens": self.max_tokens}
        if self.temperature is not None:
            body["temperature"] = self.temperature
        if seed is not None:
            body["seed"] = int(seed)
        if json_mode:
            body["response_format"] = {"type": "json_object"}
        body.update(extra)
        return body

    def endpoint(self) -> str:
        """The URL a completion is posted to."""
        return f"{self.base_url}/chat/completions"

    def auth_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}

    def parse(self, body: dict) -> tuple[str, int | None, int | None, bytes | None, str | None]:
        """(text, input tokens, output tokens, audio, audio transcript) of a response body; raises on another shape."""
        return (*reply_text(body), *reply_audio(body))

    def complete(self, messages: list[dict], *, label: str = "chat", **options) -> ChatReply:
        """One completion; never raises for a failed call (the reply's `error` says why, scrubbed)."""
        start = time.perf_counter()
        secrets = [self._api_key]
        try:
            body, latency = post_json(self._http(), self.endpoint(), headers=self.auth_headers(),
                                      body=self.body(messages, **options), policy=self.policy, timeout_s=self.timeout,
                                      secrets=secrets, label=label, sleep=self.sleep)
            try:
                text, tokens_in, tokens_out, audio, transcript = self.parse(body)
            except (KeyError, IndexError, TypeError, ValueError) as exc:
                raise ApiCallError(scrub(f"{label}: malformed response body ({type(exc).__name__}: {exc}): {str(body)[:200]}",
                                         secrets)) from None
            if not text and transcript:  # a spoken reply carries its words as the audio's transcript
                text = transcript
            reply = ChatReply(scrub(text, secrets), tokens_in, tokens_out, latency,
                              cost_usd(tokens_in, tokens_out, self.price_in, self.price_out), audio=audio)
        except ApiCallError as exc:
            reply = ChatReply(None, latency_s=time.perf_counter() - start, error=str(exc))
        except Exception as exc:  # anything unexpected fails this call only, and never leaks the key
            reply = ChatReply(None, latency_s=time.perf_counter() - start,
                              error=scrub(f"{label}: {type(exc).__name__}: {exc}", secrets))
        self.usage.add(reply)
        return reply

    def complete_many(self, conversations: list[list[dict]], *, progress: str | None = None, **options) -> list[ChatReply]:
        """`complete` for each message list, `concurrency` at a time; replies in input order."""
        return map_in_order(lambda messages: self.complete(messages, **options), conversations, self.concurrency,
                            progress=progress)
