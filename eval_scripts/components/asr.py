"""Speech recognition with Whisper through transformers (the cascade's first stage).

`pretrained` is a Hub id (default `openai/whisper-large-v3`, SPEC §5), a local
folder, or `tiny-random`. Clips of up to 30 s are transcribed in batches
(the processor pads each to Whisper's 30-s window, so a clip's transcript does
not depend on its batch-mates); longer clips go one at a time through
Whisper's sequential long-form decoding. Decoding is greedy. Clips arrive as
16 kHz mono float32 arrays.
"""

from __future__ import annotations

import logging

import numpy as np
import torch

from eval_scripts.models.tiny import TINY

logger = logging.getLogger(__name__)

DEFAULT_ASR = "openai/whisper-large-v3"
SAMPLING_RATE = 16_000
WINDOW_S = 30.0  # Whisper's input window
DEFAULT_MAX_NEW_TOKENS = 440  # a full 30-s window of speech fits (Whisper's decoder holds 448 positions)
TINY_MAX_NEW_TOKENS = 24  # random weights never stop on their own
ASR_VERSION = 1  # bump when what a transcript is changes (cache key)


class WhisperTranscriber:
    """Whisper ASR: a batch of 16 kHz clips in, one transcript per clip out, same order."""

    def __init__(
        self,
        pretrained: str = DEFAULT_ASR,
        *,
        language: str | None = "en",
        task: str = "transcribe",
        batch_size: int = 8,
        max_new_tokens: int | None = None,
        dtype: str | None = None,
        device: str | None = None,
        seed: int = 0,
    ) -> None:
        self.pretrained = pretrained
        self.language = language
        self.task = task
        self.batch_size = max(1, int(batch_size))
        if max_new_tokens is None:
            max_new_tokens = TINY_MAX_NEW_TOKENS if pretrained == TINY else DEFAULT_MAX_NEW_TOKENS
        self.max_new_tokens = int(max_new_tokens)
        from eval_scripts.components.tiny import build_tiny_whisper
        from eval_scripts.components.tiny import load_component

        def load(name: str):
            from transformers import AutoProcessor
            from transformers import WhisperForConditionalGeneration

            logger.info("loading Whisper from %s", name)
            return WhisperForConditionalGeneration.from_pretrained(name, dtype=dtype or "auto"), AutoProcessor.from_pretrained(name)

        self.model, self.processor, self._tiny = load_component(pretrained, tiny=build_tiny_whisper, load=load, seed=seed, device=device)
        self.dtype = next(self.model.parameters()).dtype

    def describe(self) -> dict:
        """Identity and settings (the cache key is derived from it)."""
        from eval_scripts.components.cache import checkpoint_stamp

        out = {"kind": "whisper", "version": ASR_VERSION, "language": self.language, "task": self.task,
               "max_new_tokens": self.max_new_tokens}
        out.update(self._tiny or {"pretrained": self.pretrained, "checkpoint": checkpoint_stamp(self.pretrained)})
        return out

    def transcribe(self, clips: list[np.ndarray]) -> list[str]:
        """Transcripts of 16 kHz mono clips, in input order."""
        out: list[str | None] = [None] * len(clips)
        window = int(WINDOW_S * SAMPLING_RATE)
        short = [i for i, clip in enumerate(clips) if len(clip) <= window]
        for start in range(0, len(short), self.batch_size):
            idx = short[start : start + self.batch_size]
            for i, text in zip(idx, self._decode([clips[i] for i in idx], long_form=False)):
                out[i] = text
        for i, clip in enumerate(clips):
            if len(clip) > window:
                out[i] = self._decode([clip], long_form=True)[0]
        return [text or "" for text in out]  # type: ignore[misc]

    def _decode(self, clips: list[np.ndarray], long_form: bool) -> list[str]:
        arrays = [np.asarray(c, dtype=np.float32) for c in clips]
        if long_form:
            inputs = self.processor(arrays, sampling_rate=SAMPLING_RATE, return_tensors="pt", truncation=False,
                                    padding="longest", return_attention_mask=True)
        else:
            inputs = self.processor(arrays, sampling_rate=SAMPLING_RATE, return_tensors="pt")
        features = inputs["input_features"].to(device=self.model.device, dtype=self.dtype)
        kwargs = {"max_new_tokens": self.max_new_tokens, "task": self.task}
        if self.language:
            kwargs["language"] = self.language
        if long_form:
            kwargs.update(attention_mask=inputs["attention_mask"].to(self.model.device), return_timestamps=True)
        with torch.inference_mode():
            tokens = self.model.generate(features, **kwargs)
        if not isinstance(tokens, torch.Tensor):
            tokens = tokens["sequences"]
        return [text.strip() for text in self.processor.batch_decode(tokens, skip_special_tokens=True)]
