"""`gemini`: the Gemini generateContent REST API with inline WAV audio parts.

The key comes from GEMINI_API_KEY (or the variable named by `api_key_env=`) and
travels in the x-goog-api-key header, never in the URL. Thinking tokens
(usageMetadata.thoughtsTokenCount) are billed as output and counted as such;
thought parts are left out of the answer text.

Model args: as for `openai` (model, base_url, api_key_env, concurrency,
max_attempts, backoff_base, backoff_max, retry_after_max, timeout, temperature,
max_tokens, send_seed, audio_sr (default 16000), text_only).
"""

from __future__ import annotations

from eval_scripts.models.api_common import HttpChoiceModel, clip_to_base64_wav
from eval_scripts.models.base import ChoiceQuery, register
from speecheq_dataset.chat import token_count

GEMINI_BASE_URL = "https://generativelanguage.googleapis.com/v1beta"


def gemini_parts(query: ChoiceQuery, audio_sr: int | None) -> list[dict]:
    """The user turn's parts: text and inline audio in the query's order."""
    parts = []
    for part in query.parts:
        if part.kind == "text":
            if part.text:
                parts.append({"text": part.text})
        elif part.kind == "audio" and part.clip is not None:
            parts.append({"inline_data": {"mime_type": "audio/wav", "data": clip_to_base64_wav(part.clip, audio_sr)}})
        else:
            raise ValueError(f"query {query.uid}: part of kind {part.kind!r} without content")
    return parts


@register("gemini")
class GeminiModel(HttpChoiceModel):
    """Gemini generateContent with inline audio."""

    name = "gemini"
    provider = "gemini-generate-content"
    default_key_env = "GEMINI_API_KEY"
    default_audio_sr = 16_000  # Gemini analyses audio at 16 kHz

    def __init__(self, model: str = "gemini-2.5-pro", base_url: str = GEMINI_BASE_URL, max_tokens: int = 8192, **kwargs):
        # Thinking models spend output tokens before answering: a larger default budget.
        super().__init__(model=model, base_url=base_url, max_tokens=max_tokens, **kwargs)

    def endpoint(self) -> str:
        return f"{self.base_url}/models/{self.model}:generateContent"

    def auth_headers(self) -> dict[str, str]:
        return {"x-goog-api-key": self._api_key} if self._api_key else {}

    def build_body(self, query: ChoiceQuery) -> dict:
        config: dict = {"maxOutputTokens": self.max_tokens}
        if self.temperature is not None:
            config["temperature"] = self.temperature
        if self.send_seed:
            config["seed"] = int(query.seed)
        body: dict = {"contents": [{"role": "user", "parts": gemini_parts(query, self.audio_sr)}], "generationConfig": config}
        if query.system:
            body["systemInstruction"] = {"parts": [{"text": query.system}]}
        return body

    def parse_body(self, body: dict) -> tuple[str, int | None, int | None]:
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
