"""`openai`: the OpenAI chat completions API with audio input, or any OpenAI-compatible server.

Audio clips go inline as `input_audio` content parts (base64 16-bit WAV),
interleaved with the prompt's text parts in the query's order. With
`base_url=` any server that speaks the same wire format is a backend, e.g. a
vLLM server hosting Qwen3-Omni (see docs/api.md). The key comes from
OPENAI_API_KEY (or the variable named by `api_key_env=`); it is optional for a
non-OpenAI base_url (a local vLLM server without --api-key needs none).

Model args: model, base_url, api_key_env, concurrency, max_attempts,
backoff_base, backoff_max, retry_after_max, timeout, temperature (none = the
server's default), max_tokens, send_seed, audio_sr (default 24000), text_only, modalities (e.g. "text").
"""

from __future__ import annotations

from eval_scripts.models.api_common import HttpChoiceModel, clip_to_base64_wav
from eval_scripts.models.base import ChoiceQuery, register
from speecheq_dataset.chat import OPENAI_BASE_URL
from speecheq_dataset.chat import reply_text


def chat_messages(query: ChoiceQuery, audio_sr: int | None) -> list[dict]:
    """The chat `messages` of one query: optional system message, then one user message with text and audio parts in order."""
    messages = [{"role": "system", "content": query.system}] if query.system else []
    if all(part.kind == "text" for part in query.parts):
        # Text only (oracle mode, history=text): plain string content works with text-only servers too.
        messages.append({"role": "user", "content": "".join(part.text for part in query.parts)})
        return messages
    content = []
    for part in query.parts:
        if part.kind == "text":
            if part.text:
                content.append({"type": "text", "text": part.text})
        elif part.kind == "audio" and part.clip is not None:
            content.append({"type": "input_audio", "input_audio": {"data": clip_to_base64_wav(part.clip, audio_sr), "format": "wav"}})
        else:
            raise ValueError(f"query {query.uid}: part of kind {part.kind!r} without content")
    messages.append({"role": "user", "content": content})
    return messages


@register("openai")
class OpenAIChatModel(HttpChoiceModel):
    """Chat completions with inline audio; OpenAI or any compatible server (`base_url`)."""

    name = "openai"
    provider = "openai-chat-completions"
    default_key_env = "OPENAI_API_KEY"
    default_audio_sr = 24_000  # the rate of the published clips; no resampling for them

    def __init__(self, model: str = "gpt-audio", base_url: str = OPENAI_BASE_URL, modalities: str | None = None, **kwargs):
        official = base_url.rstrip("/") == OPENAI_BASE_URL
        kwargs.setdefault("key_required", official)
        self.modalities = [m for m in str(modalities).split("+") if m] if modalities else None
        super().__init__(model=model, base_url=base_url, **kwargs)

    def endpoint(self) -> str:
        return f"{self.base_url}/chat/completions"

    def auth_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}

    def build_body(self, query: ChoiceQuery) -> dict:
        body: dict = {"model": self.model, "messages": chat_messages(query, self.audio_sr), "max_completion_tokens": self.max_tokens}
        if self.temperature is not None:
            body["temperature"] = self.temperature
        if self.send_seed:
            body["seed"] = int(query.seed)
        if self.modalities:
            body["modalities"] = self.modalities
        return body

    def parse_body(self, body: dict) -> tuple[str, int | None, int | None]:
        return reply_text(body)

    def describe(self) -> dict:
        described = super().describe()
        described["modalities"] = self.modalities
        return described
