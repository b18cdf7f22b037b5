"""Qwen2.5-Omni with its talker: the thinker writes the reply, the talker and token2wav speak it (24 kHz).

`pretrained=` a Hub id (default Qwen/Qwen2.5-Omni-7B), a local folder, or
`tiny-random` (the full architecture at toy sizes with random weights, built
offline: eval_scripts/components/tiny.py). The released model speaks only with
its own system prompt (`QWEN_SYSTEM_PROMPT`, the text its model card requires
for audio output), so the scene instructions open the first user turn. The
catalyst's turns go in as audio, the model's own earlier replies as text.
Batches are left-padded; the thinker decodes greedily, the talker samples with
the released defaults, seeded per batch from the first request's seed.

Model args: pretrained, speaker (default Chelsie), dtype, device_map,
trust_remote_code, max_new_tokens (thinker; default 256, tiny 16),
talker_max_new_tokens (default 4096, tiny 50), talker_min_new_tokens (tiny 25:
random weights may otherwise stop at once), system_prompt, seed.
"""

from __future__ import annotations

import logging
import time

import numpy as np
import torch

from eval_scripts.models.tiny import TINY
from eval_scripts.responders import ReplyRequest
from eval_scripts.responders import SpeechResponder
from eval_scripts.responders import SpokenReply

logger = logging.getLogger(__name__)

DEFAULT_HUB_ID = "Qwen/Qwen2.5-Omni-7B"
QWEN_SYSTEM_PROMPT = (
    "You are Qwen, a virtual human developed by the Qwen Team, Alibaba Group, capable of perceiving auditory and visual inputs, "
    "as well as generating text and speech."
)
OUTPUT_RATE = 24_000  # token2wav's BigVGAN output rate


class QwenOmniResponder(SpeechResponder):
    """Qwen2_5OmniForConditionalGeneration: text and speech out."""

    name = "qwen2.5-omni"
    sampling_rate = 16_000

    def __init__(self, pretrained: str | None = None, speaker: str | None = None, dtype: str | None = None, device_map: str | None = None,
                 trust_remote_code: bool = False, max_new_tokens: int | None = None, talker_max_new_tokens: int | None = None,
                 talker_min_new_tokens: int | None = None, system_prompt: str | None = None, seed: int = 0) -> None:
        self.pretrained = pretrained or DEFAULT_HUB_ID
        tiny = self.pretrained == TINY
        self.max_new_tokens = int(max_new_tokens or (16 if tiny else 256))
        self.talker_max_new_tokens = int(talker_max_new_tokens or (50 if tiny else 4096))
        self.talker_min_new_tokens = talker_min_new_tokens if talker_min_new_tokens is not None else (25 if tiny else None)
        self.system_prompt = system_prompt or QWEN_SYSTEM_PROMPT
        if tiny:
            from eval_scripts.components.tiny import TINY_SPEAKER
            from eval_scripts.components.tiny import build_tiny_omni_talker

            built = build_tiny_omni_talker(seed=int(seed))
            self.model, self.processor = built.model, built.processor
            self._describe = dict(built.description)
            self.speaker = speaker or TINY_SPEAKER
        else:
            from transformers import Qwen2_5OmniForConditionalGeneration

            from eval_scripts.models.hf_audio_lm import load_audio_processor

            kwargs = {"dtype": dtype or "auto", "trust_remote_code": bool(trust_remote_code)}
            if device_map is not None:
                kwargs["device_map"] = device_map
            logger.info("loading Qwen2.5-Omni (thinker + talker) from %s", self.pretrained)
            self.model = Qwen2_5OmniForConditionalGeneration.from_pretrained(self.pretrained, **kwargs).eval()
            self.processor = load_audio_processor(self.pretrained, "Qwen2_5OmniProcessor", bool(trust_remote_code))
            self._describe = {"pretrained": self.pretrained, "dtype": dtype or "auto"}
            self.speaker = speaker or "Chelsie"
        if not self.model.has_talker:
            raise ValueError(f"{self.pretrained}: the checkpoint has no talker (enable_audio_output is off)")
        if self.speaker not in self.model.speaker_map:
            raise ValueError(f"speaker {self.speaker!r} not in {self.pretrained}; available: {', '.join(self.model.speaker_map)}")
        if device_map is None:
            from accelerate import PartialState

            self.model.to(PartialState().device)
        self.processor.tokenizer.padding_side = "left"
        talker = self.model.config.talker_config
        self.talker_eos = [talker.tts_codec_pad_token_id, talker.tts_codec_end_token_id]

    def describe(self) -> dict:
        return {"name": self.name, "label": f"{self.name}:{self.pretrained}", "speaker": self.speaker, "max_new_tokens": self.max_new_tokens,
                "talker_max_new_tokens": self.talker_max_new_tokens, "output_rate": OUTPUT_RATE, **self._describe}

    def messages(self, request: ReplyRequest) -> tuple[list[dict], list[np.ndarray]]:
        """The chat (system prompt; instructions + first catalyst turn; then turns in order) and its audio in order."""
        messages = [{"role": "system", "content": [{"type": "text", "text": self.system_prompt}]}]
        audio, instructed = [], False
        for turn in request.conversation:
            if turn.role == "user":
                content = [] if instructed else [{"type": "text", "text": request.instructions}]
                instructed = True
                if turn.audio is None or turn.sampling_rate != self.sampling_rate:
                    raise ValueError(f"{request.uid}: the catalyst's turns must be audio at {self.sampling_rate} Hz")
                content.append({"type": "audio", "audio": turn.audio})
                audio.append(turn.audio)
                messages.append({"role": "user", "content": content})
            else:
                messages.append({"role": "assistant", "content": [{"type": "text", "text": turn.text}]})
        return messages, audio

    def respond(self, requests: list[ReplyRequest]) -> list[SpokenReply]:
        began = time.perf_counter()
        texts, audio = [], []
        for request in requests:
            messages, clips = self.messages(request)
            texts.append(self.processor.apply_chat_template(messages, tokenize=False, add_generation_prompt=True))
            audio += clips
        inputs = self.processor(text=texts, audio=audio, sampling_rate=self.sampling_rate, return_tensors="pt", padding=True)
        device, dtype = self.model.device, self.model.thinker.dtype
        inputs = {k: (v.to(device=device, dtype=dtype) if v.is_floating_point() else v.to(device)) for k, v in inputs.items()}
        extra = {"talker_min_new_tokens": int(self.talker_min_new_tokens)} if self.talker_min_new_tokens else {}
        torch.manual_seed(requests[0].seed % (2**63))  # the talker samples and token2wav starts from noise
        with torch.inference_mode():
            sequences, wavs = self.model.generate(**inputs, speaker=self.speaker, thinker_max_new_tokens=self.max_new_tokens,
                                                  thinker_do_sample=False, talker_max_new_tokens=self.talker_max_new_tokens,
                                                  talker_eos_token_id=self.talker_eos, **extra)
        wavs = [wavs] if isinstance(wavs, torch.Tensor) else list(wavs)
        elapsed = time.perf_counter() - began
        prompt_len = inputs["input_ids"].shape[1]
        tokenizer = self.processor.tokenizer
        stops = {tokenizer.eos_token_id, tokenizer.pad_token_id}
        replies = []
        for row, request in enumerate(requests):
            tokens = sequences[row, prompt_len:].tolist()
            ended = next((k for k, tok in enumerate(tokens) if tok in stops), len(tokens))
            wav = wavs[row].float().cpu().numpy().astype(np.float32).reshape(-1)
            reply = SpokenReply(text=tokenizer.decode(tokens[:ended], skip_special_tokens=True), audio=wav, sampling_rate=OUTPUT_RATE,
                                input_tokens=int(inputs["attention_mask"][row].sum()), output_tokens=min(ended + 1, len(tokens)),
                                latency_s=elapsed)
            if wav.size == 0 or not np.isfinite(wav).all():
                reply.error = f"{request.uid}: the talker produced {'no' if wav.size == 0 else 'non-finite'} audio"
            replies.append(reply)
        return replies
