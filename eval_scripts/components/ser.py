"""Utterance-level dimensional speech-emotion regression: the audeering wav2vec2 model of SPEC §5.

`audeering/wav2vec2-large-robust-12-ft-emotion-msp-dim` is a wav2vec2 encoder
(mean-pooled over time) with a small regression head; it predicts arousal,
dominance and valence, roughly in [0, 1], in that output order. Its head is
not a transformers class, so we implement it here as a `PreTrainedModel`
whose parameter names match the checkpoint (`wav2vec2.*`,
`classifier.dense.*`, `classifier.out_proj.*`): `from_pretrained` loads the
published weights, and our own checkpoints save and load bit-exactly.

Outputs are always read by name through `config.id2label`, never by position
(the CSER model of SPEC §7 orders the same three dimensions differently).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from transformers import Wav2Vec2Model
from transformers import Wav2Vec2PreTrainedModel
from transformers.utils import ModelOutput


logger = logging.getLogger(__name__)

AUDEERING_SER = "audeering/wav2vec2-large-robust-12-ft-emotion-msp-dim"
SAMPLING_RATE = 16_000
DIMENSIONS = ("valence", "arousal", "dominance")
AUDEERING_ORDER = ("arousal", "dominance", "valence")  # the published model's output order (SPEC §5)
SER_VERSION = 1  # bump when what a prediction is changes (cache key)


@dataclass
class VadRegressionOutput(ModelOutput):
    """`logits`: (batch, labels) regression outputs in `config.id2label` order; `pooled`: the mean encoder state."""

    logits: torch.FloatTensor | None = None
    pooled: torch.FloatTensor | None = None


class VadRegressionHead(nn.Module):
    """Dropout, dense + tanh, dropout, projection to the labels (the checkpoint's `classifier.*`)."""

    def __init__(self, config) -> None:
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.dropout = nn.Dropout(config.final_dropout)
        self.out_proj = nn.Linear(config.hidden_size, config.num_labels)

    def forward(self, pooled: torch.Tensor) -> torch.Tensor:
        hidden = torch.tanh(self.dense(self.dropout(pooled)))
        return self.out_proj(self.dropout(hidden))


class Wav2Vec2ForVadRegression(Wav2Vec2PreTrainedModel):
    """wav2vec2 encoder, mean over time (valid frames only when padded), regression head."""

    def __init__(self, config) -> None:
        super().__init__(config)
        self.wav2vec2 = Wav2Vec2Model(config)
        self.classifier = VadRegressionHead(config)
        self.post_init()

    def forward(self, input_values: torch.Tensor, attention_mask: torch.Tensor | None = None, **kwargs) -> VadRegressionOutput:
        hidden = self.wav2vec2(input_values, attention_mask=attention_mask).last_hidden_state
        if attention_mask is None:
            pooled = hidden.mean(dim=1)
        else:
            frames = self.wav2vec2._get_feature_vector_attention_mask(hidden.shape[1], attention_mask)
            weights = frames.to(hidden.dtype).unsqueeze(-1)
            pooled = (hidden * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1.0)
        return VadRegressionOutput(logits=self.classifier(pooled), pooled=pooled)


def label_columns(id2label: dict, expected: int = 3) -> dict[str, int]:
    """Dimension name -> output index, from a config's `id2label`; ValueError names what is missing.

    A config whose labels are the generic LABEL_0..2 (no names saved) falls back to the
    audeering order of SPEC §5, with a warning.
    """
    names = {str(label).strip().lower(): int(index) for index, label in id2label.items()}
    if all(d in names for d in DIMENSIONS):
        return {d: names[d] for d in DIMENSIONS}
    if len(names) == expected and all(n.startswith("label_") for n in names):
        logger.warning("emotion model config has no label names; assuming the audeering order %s", AUDEERING_ORDER)
        return {d: AUDEERING_ORDER.index(d) for d in DIMENSIONS}
    raise ValueError(f"emotion model labels {sorted(names)} do not name valence, arousal and dominance")


class UtteranceSER:
    """The audeering-style regressor: one named V/A/D triple per 16 kHz clip (or per window)."""

    def __init__(self, pretrained: str = AUDEERING_SER, *, dtype: str | None = None, device: str | None = None, seed: int = 0,
                 batch_size: int = 16) -> None:
        self.pretrained = pretrained
        self.batch_size = max(1, int(batch_size))
        from eval_scripts.components.tiny import build_tiny_vad_regressor
        from eval_scripts.components.tiny import load_component

        def load(name: str):
            from transformers import AutoFeatureExtractor

            logger.info("loading the V/A/D regressor from %s", name)
            return Wav2Vec2ForVadRegression.from_pretrained(name, dtype=dtype or "float32"), AutoFeatureExtractor.from_pretrained(name)

        self.model, self.feature_extractor, self._tiny = load_component(pretrained, tiny=build_tiny_vad_regressor, load=load, seed=seed,
                                                                        device=device)
        self.columns = label_columns(self.model.config.id2label)

    def describe(self) -> dict:
        from eval_scripts.components.cache import checkpoint_stamp

        out = {"kind": "wav2vec2-vad-regression", "version": SER_VERSION, "label_columns": self.columns}
        out.update(self._tiny or {"pretrained": self.pretrained, "checkpoint": checkpoint_stamp(self.pretrained)})
        return out

    def predict(self, clips: list[np.ndarray]) -> list[dict[str, float]]:
        """{valence, arousal, dominance} of each clip, in input order.

        Clips of equal length are batched (no padding, so a clip's values do not depend
        on its batch-mates); others run one at a time, exactly as the published model's card does.
        """
        out: list[dict[str, float] | None] = [None] * len(clips)
        by_length: dict[int, list[int]] = {}
        for i, clip in enumerate(clips):
            by_length.setdefault(len(clip), []).append(i)
        for indices in by_length.values():
            for start in range(0, len(indices), self.batch_size):
                idx = indices[start : start + self.batch_size]
                values = self._forward([clips[i] for i in idx])
                for i, row in zip(idx, values):
                    out[i] = {d: float(row[self.columns[d]]) for d in DIMENSIONS}
        return out  # type: ignore[return-value]

    def _forward(self, clips: list[np.ndarray]) -> np.ndarray:
        inputs = self.feature_extractor([np.asarray(c, dtype=np.float32) for c in clips], sampling_rate=SAMPLING_RATE,
                                        return_tensors="pt")
        values = inputs["input_values"].to(device=self.model.device, dtype=self.model.dtype)
        with torch.inference_mode():
            logits = self.model(values).logits
        return logits.float().cpu().numpy()
