"""The Gemini generateContent wire format, and a client for it with ChatClient's retries, deadline, concurrency and tally.

One home for what the runner's `gemini` adapter and the judges both need:
the request body (`generate_content_body`), the reply reader
(`generate_content_reply`: thought parts left out, thinking tokens counted as
output), and `GeminiClient`, which takes OpenAI-style chat messages (system,
user and assistant turns with text and `input_audio` parts) and sends them as
Gemini contents, so a caller writes its messages once for either API. The key
comes from GEMINI_API_KEY (or the variable named by `api_key_env`) and travels
in the x-goog-api-key header, never in the URL.
"""

from __future__ import annotations

from .chat import ChatClient
from .chat import token_count

GEMINI_BASE_URL = "https://generativelanguage.googleapis.com/v1beta"
_AUDIO_MIME = {"wav": "audio/wav", "mp3": "audio/mp3", "flac": "audio/flac"}


def generate_content_url(base_url: str, model: str) -> str:
    """The generateContent endpoint of `model`."""
    return f"{base_url.rstrip('/')}/models/{model}:generateContent"


def auth_headers(api_key: str | None) -> dict[str, str]:
    """The key in Gemini's header (never in the URL); none without a key."""
    return {"x-goog-api-key": api_key} if api_key else {}


def generate_content_body(contents: list[dict], *, system: str | None = None, max_tokens: int = 8192,
                          temperature: float | None = None, seed: int | None = None) -> dict:
    """A generateContent request: contents, an optional system instruction and the generation config."""
    config: dict = {"maxOutputTokens": int(max_tokens)}
    if temperature is not None:
        config["temperature"] = temperature
    if seed is not None:
        config["seed"] = int(seed)
    body: dict = {"contents": contents, "generationConfig": config}
    if system:
        body["systemInstruction"] = {"parts": [{"text": system}]}
    return body


def generate_content_reply(body: dict) -> tuple[str, int | None, int | None]:
    """(answer text, input tokens, output tokens incl. thinking) of a generateContent body; ValueError/KeyError on another shape."""
    candidates = body.get("candidates")
    if not candidates:
        reason = (body.get("promptFeedback") or {}).get("blockReason")
        raise ValueError(f"no candidates (prompt blocked: {reason})" if reason else "no candidates")
    candidate = candidates[0]
    parts = (candidate.get("content") or {}).get("parts") or []
    text = "".join(part["text"] for part in parts if isinstance(part, dict) and "text" in part and not part.get("thought"))
    if not text and candidate.get("finishReason") not in (None, "STOP", "MAX_TOKENS"):
        raise ValueError(f"no text (finishReason {candidate.get('finishReason')})")
    usage = body.get("usageMetadata") or {}
    tokens_in = token_count(usage.get("promptTokenCount"))
    answer, thoughts = token_count(usage.get("candidatesTokenCount")), token_count(usage.get("thoughtsTokenCount"))
    tokens_out = None if answer is None and thoughts is None else (answer or 0) + (thoughts or 0)
    return text, tokens_in, tokens_out


def contents_from_messages(messages: list[dict]) -> tuple[str | None, list[dict]]:
    """(system text, Gemini contents) of OpenAI-style chat messages; text and input_audio parts map one to one."""
    system, contents = [], []
    for k, message in enumerate(messages):
        role, content = message.get("role"), message.get("content")
        parts = [{"text": content}] if isinstance(content, str) else [_part(p, k) for p in content or []]
        if role == "system":
            system += [p["text"] for p in parts if "text" in p]
        elif role in ("user", "assistant"):
            contents.append({"role": "user" if role == "user" else "model", "parts": parts})
        else:
            raise ValueError(f"message {k}: role {role!r} has no Gemini counterpart")
    return ("\n\n".join(system) or None), contents


def _part(part: dict, k: int) -> dict:
    if part.get("type") == "text":
        return {"text": part["text"]}
    if part.get("type") == "input_audio":
        audio = part["input_audio"]
        return {"inline_data": {"mime_type": _AUDIO_MIME.get(audio.get("format", "wav"), "audio/wav"), "data": audio["data"]}}
    raise ValueError(f"message {k}: part of type {part.get('type')!r} has no Gemini counterpart")


class GeminiClient(ChatClient):
    """generateContent with ChatClient's machinery; `complete(messages)` takes OpenAI-style messages."""

    official_base_url = GEMINI_BASE_URL

    def __init__(self, model: str = "gemini-2.5-pro", *, base_url: str = GEMINI_BASE_URL, api_key_env: str = "GEMINI_API_KEY",
                 max_tokens: int = 8192, **options):
        # Thinking models spend output tokens before answering: a larger default budget.
        super().__init__(model, base_url=base_url, api_key_env=api_key_env, max_tokens=max_tokens, **options)

    def endpoint(self) -> str:
        return generate_content_url(self.base_url, self.model)

    def auth_headers(self) -> dict[str, str]:
        return auth_headers(self._api_key)

    def body(self, messages: list[dict], *, seed: int | None = None, json_mode: bool = False, **extra) -> dict:
        system, contents = contents_from_messages(messages)
        body = generate_content_body(contents, system=system, max_tokens=self.max_tokens, temperature=self.temperature, seed=seed)
        if json_mode:
            body["generationConfig"]["responseMimeType"] = "application/json"
        body.update(extra)
        return body

    def parse(self, body: dict) -> tuple[str, int | None, int | None, bytes | None, str | None]:
        return (*generate_content_reply(body), None, None)
