"""An OpenAI audio model (e.g. gpt-audio) answering out loud: chat completions with audio output.

Requests go through `speecheq_dataset.chat.ChatClient` (retries, deadline,
ordered concurrency, usage tally; the key only from the environment) with
`modalities: ["text", "audio"]` and `audio: {voice, format: "wav"}`. The
catalyst's turns are sent as `input_audio` WAV parts, the model's own earlier
replies as assistant text (their transcripts); the scene instructions are the
system message. Any server that speaks this wire format works (`base_url=`).

Model args: model (default gpt-audio), voice (default alloy), base_url,
api_key_env (default OPENAI_API_KEY), concurrency, max_attempts, timeout,
temperature, max_tokens, price_in, price_out, audio_sr (rate of the WAV sent; default 24000).
"""

from __future__ import annotations

import base64
import logging

from eval_scripts.responders import ReplyRequest
from eval_scripts.responders import SpeechResponder
from eval_scripts.responders import SpokenReply
from speecheq_dataset.audio import decode_audio
from speecheq_dataset.audio import encode_wav
from speecheq_dataset.chat import OPENAI_BASE_URL

logger = logging.getLogger(__name__)


class OpenAIAudioResponder(SpeechResponder):
    """Chat completions with audio in and audio out."""

    name = "openai"
    sampling_rate = 24_000  # the published clips' rate: sent without resampling

    def __init__(self, model: str = "gpt-audio", voice: str = "alloy", base_url: str = OPENAI_BASE_URL, audio_sr: int = 24_000,
                 temperature: float | None = None, **client_options) -> None:
        from speecheq_dataset.chat import ChatClient

        if "api_key" in client_options or "key" in client_options:
            raise ValueError("openai: API keys are never passed as arguments; set OPENAI_API_KEY (or api_key_env=NAME) in the environment")
        client_options.pop("seed", None)  # per-request seeds come from the requests
        self.voice = str(voice)
        self.audio_sr = int(audio_sr)
        self.client = ChatClient(str(model), base_url=base_url, temperature=temperature, **client_options)

    def describe(self) -> dict:
        return {"name": self.name, "label": f"{self.name}:{self.client.model}", "voice": self.voice, "audio_sr": self.audio_sr,
                **self.client.describe()}

    def messages(self, request: ReplyRequest) -> list[dict]:
        messages = [{"role": "system", "content": request.instructions}]
        for turn in request.conversation:
            if turn.role == "user":
                wav = base64.b64encode(encode_wav(turn.audio, turn.sampling_rate, self.audio_sr)).decode("ascii")
                messages.append({"role": "user", "content": [{"type": "input_audio", "input_audio": {"data": wav, "format": "wav"}}]})
            else:
                messages.append({"role": "assistant", "content": turn.text})
        return messages

    def _one(self, request: ReplyRequest) -> SpokenReply:
        reply = self.client.complete(self.messages(request), seed=request.seed, label=f"respond {request.uid}",
                                     modalities=["text", "audio"], audio={"voice": self.voice, "format": "wav"})
        out = SpokenReply(text=reply.text, input_tokens=reply.input_tokens, output_tokens=reply.output_tokens, latency_s=reply.latency_s,
                          cost_usd=reply.cost_usd, error=reply.error)
        if reply.error is None:
            if not reply.audio:
                out.error = f"{request.uid}: the reply has no audio (does the model support audio output?)"
            else:
                try:
                    out.audio, out.sampling_rate = decode_audio(reply.audio, name=f"reply to {request.uid}")
                except ValueError as exc:
                    out.error = str(exc)
        return out

    def respond(self, requests: list[ReplyRequest]) -> list[SpokenReply]:
        from speecheq_dataset.http_api import map_in_order

        return map_in_order(self._one, requests, self.client.concurrency)
