"""`gemini`: the Gemini generateContent REST API with inline WAV audio parts.

The key comes from GEMINI_API_KEY (or the variable named by `api_key_env=`) and
travels in the x-goog-api-key header, never in the URL. The wire format
(request body, reply reader: thought parts left out, thinking tokens counted
as output) is speecheq_dataset.gemini's, shared with the judges.

Model args: as for `openai` (model, base_url, api_key_env, concurrency,
max_attempts, backoff_base, backoff_max, retry_after_max, timeout, temperature,
max_tokens, send_seed, audio_sr (default 16000), text_only).
"""

from __future__ import annotations

from eval_scripts.models.api_common import HttpChoiceModel, clip_to_base64_wav
from eval_scripts.models.base import ChoiceQuery, register
from speecheq_dataset.gemini import GEMINI_BASE_URL
from speecheq_dataset.gemini import auth_headers as gemini_auth_headers
from speecheq_dataset.gemini import generate_content_body
from speecheq_dataset.gemini import generate_content_reply
from speecheq_dataset.gemini import generate_content_url


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
        return generate_content_url(self.base_url, self.model)

    def auth_headers(self) -> dict[str, str]:
        return gemini_auth_headers(self._api_key)

    def build_body(self, query: ChoiceQuery) -> dict:
        return generate_content_body([{"role": "user", "parts": gemini_parts(query, self.audio_sr)}], system=query.system or None,
                                     max_tokens=self.max_tokens, temperature=self.temperature,
                                     seed=query.seed if self.send_seed else None)

    def parse_body(self, body: dict) -> tuple[str, int | None, int | None]:
        return generate_content_reply(body)
