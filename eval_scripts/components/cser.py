"""The continuous speech-emotion regressor (CSER) of SPEC §7, as a transformers PreTrainedModel.

A speech encoder (WavLM-Large in the paper; any transformers audio encoder
whose config names its `model_type`) turns 16 kHz audio into frames; the
frames of each second are averaged (`vad.second_bounds`: second k = frames of
[k, k + 1) s, the last second running to the clip's end); a 2-layer
bidirectional LSTM (hidden 512, dropout 0.5) runs over the seconds and a
linear layer gives three outputs per second. The published model orders them
arousal, valence, dominance; ours name them in `config.id2label` and every
reader maps by name. Trained with a concordance-correlation loss
(`ccc_loss`), see eval_scripts/train_cser.py.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from transformers import AutoConfig
from transformers import AutoModel
from transformers import PretrainedConfig
from transformers import PreTrainedModel
from transformers.utils import ModelOutput

from eval_scripts.components.ser import label_columns
from eval_scripts.components.vad import SAMPLING_RATE
from eval_scripts.components.vad import VadExtractor
from eval_scripts.components.vad import VadTrajectory
from eval_scripts.components.vad import second_bounds

logger = logging.getLogger(__name__)

PUBLISHED_ORDER = ("arousal", "valence", "dominance")  # the EMO-Reasoning CSER's output order (SPEC §7)
DEFAULT_ENCODER = "microsoft/wavlm-large"


class CSERConfig(PretrainedConfig):
    """Encoder config (a dict with `model_type`) + the BiLSTM head's sizes + named outputs."""

    model_type = "speecheq_cser"

    def __init__(self, encoder_config: dict | None = None, lstm_hidden_size: int = 512, lstm_layers: int = 2, dropout: float = 0.5,
                 feature_layer: int = -1, initializer_range: float = 0.02, **kwargs) -> None:
        kwargs.setdefault("id2label", dict(enumerate(PUBLISHED_ORDER)))
        self.encoder_config = dict(encoder_config or {"model_type": "wavlm"})
        self.lstm_hidden_size = int(lstm_hidden_size)
        self.lstm_layers = int(lstm_layers)
        self.dropout = float(dropout)
        self.feature_layer = int(feature_layer)  # which encoder hidden state is pooled (-1: the last)
        self.initializer_range = float(initializer_range)
        super().__init__(**kwargs)

    def build_encoder_config(self):
        settings = dict(self.encoder_config)
        return AutoConfig.for_model(settings.pop("model_type"), **settings)


@dataclass
class CSEROutput(ModelOutput):
    """`logits`: (batch, seconds, labels) in `config.id2label` order; `seconds_mask`: valid seconds; `loss`: 1 - mean CCC."""

    loss: torch.FloatTensor | None = None
    logits: torch.FloatTensor | None = None
    seconds_mask: torch.BoolTensor | None = None


def ccc(prediction: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Lin's concordance correlation coefficient of two 1-D series."""
    mean_p, mean_t = prediction.mean(), target.mean()
    var_p, var_t = prediction.var(unbiased=False), target.var(unbiased=False)
    covariance = ((prediction - mean_p) * (target - mean_t)).mean()
    return 2.0 * covariance / (var_p + var_t + (mean_p - mean_t) ** 2 + 1e-8)


def ccc_loss(logits: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """1 - the mean over outputs of the CCC over every valid second of the batch."""
    valid = mask.bool()
    scores = [ccc(logits[..., k][valid], labels[..., k][valid]) for k in range(logits.shape[-1])]
    return 1.0 - torch.stack(scores).mean()


class CSERModel(PreTrainedModel):
    """Speech encoder -> per-second mean -> BiLSTM -> linear (SPEC §7)."""

    config_class = CSERConfig
    base_model_prefix = "cser"
    main_input_name = "input_values"

    def __init__(self, config: CSERConfig) -> None:
        super().__init__(config)
        self.encoder = AutoModel.from_config(config.build_encoder_config())
        width = self.encoder.config.hidden_size
        self.lstm = nn.LSTM(width, config.lstm_hidden_size, num_layers=config.lstm_layers, dropout=config.dropout,
                            bidirectional=True, batch_first=True)
        self.dropout = nn.Dropout(config.dropout)
        self.head = nn.Linear(2 * config.lstm_hidden_size, config.num_labels)
        self.post_init()

    @classmethod
    def from_encoder(cls, encoder: str, **head) -> CSERModel:
        """A new CSER on a pretrained encoder (Hub id or folder); the head is freshly initialised."""
        pretrained = AutoModel.from_pretrained(encoder)
        settings = pretrained.config.to_dict()
        model = cls(CSERConfig(encoder_config=settings, **head))
        model.encoder.load_state_dict(pretrained.state_dict())
        return model

    def second_features(self, input_values: torch.Tensor, lengths: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        """(batch, seconds, width) per-second means of the encoder's frames, and the (batch, seconds) valid mask.

        `lengths` are the clips' sample counts (right padding beyond them is ignored).
        """
        attention = None
        # Only a padded batch needs a mask (and only layer-norm encoders may take one, as in wav2vec2/WavLM).
        if min(lengths) < input_values.shape[1] and getattr(self.encoder.config, "feat_extract_norm", "layer") == "layer":
            attention = torch.zeros(input_values.shape, dtype=torch.long, device=input_values.device)
            for row, n in enumerate(lengths):
                attention[row, :n] = 1
        out = self.encoder(input_values, attention_mask=attention,
                           output_hidden_states=self.config.feature_layer != -1)
        hidden = out.last_hidden_state if self.config.feature_layer == -1 else out.hidden_states[self.config.feature_layer]
        frame_counts = self.encoder._get_feat_extract_output_lengths(torch.tensor(lengths)).tolist()
        total_frames = hidden.shape[1]
        spans = [second_bounds(n) for n in lengths]
        width = max(len(s) for s in spans)
        weights = hidden.new_zeros(len(lengths), width, total_frames)
        mask = torch.zeros(len(lengths), width, dtype=torch.bool, device=hidden.device)
        for row, (bounds, frames) in enumerate(zip(spans, frame_counts)):
            frames = min(int(frames), total_frames)
            for k, (start, end) in enumerate(bounds):
                first = min(start * frames // lengths[row], frames - 1)
                last = max(first + 1, end * frames // lengths[row]) if k < len(bounds) - 1 else frames
                weights[row, k, first:last] = 1.0 / (last - first)
                mask[row, k] = True
        return torch.bmm(weights, hidden), mask

    def forward(self, input_values: torch.Tensor | None = None, lengths: list[int] | None = None, features: torch.Tensor | None = None,
                seconds_mask: torch.Tensor | None = None, labels: torch.Tensor | None = None, labels_mask: torch.Tensor | None = None,
                **kwargs) -> CSEROutput:
        """From audio (`input_values` + `lengths`) or from precomputed per-second `features` + `seconds_mask`.

        `labels` (batch, seconds, labels) in `config.id2label` order; the loss covers the valid seconds
        that `labels_mask` marks as labelled (all valid seconds without it).
        """
        if features is None:
            if input_values is None:
                raise ValueError("CSERModel needs input_values (with lengths) or features (with seconds_mask)")
            lengths = lengths or [input_values.shape[1]] * input_values.shape[0]
            features, seconds_mask = self.second_features(input_values, lengths)
        if seconds_mask is None:
            seconds_mask = torch.ones(features.shape[:2], dtype=torch.bool, device=features.device)
        counts = seconds_mask.sum(dim=1).clamp(min=1).cpu()
        packed = nn.utils.rnn.pack_padded_sequence(features, counts, batch_first=True, enforce_sorted=False)
        hidden, _ = self.lstm(packed)
        hidden, _ = nn.utils.rnn.pad_packed_sequence(hidden, batch_first=True, total_length=features.shape[1])
        logits = self.head(self.dropout(hidden))
        loss = None
        if labels is not None:
            scored = seconds_mask if labels_mask is None else seconds_mask & labels_mask.bool()
            loss = ccc_loss(logits, labels, scored)
        return CSEROutput(loss=loss, logits=logits, seconds_mask=seconds_mask)


class CserVad(VadExtractor):
    """Trajectories from a CSER checkpoint (a folder saved by train_cser.py, a Hub id, or `tiny-random`)."""

    name = "cser"

    def __init__(self, pretrained: str | None = None, *, seed: int = 0, device: str | None = None, batch_size: int = 1) -> None:
        from transformers import AutoFeatureExtractor

        if not pretrained:
            raise ValueError("the cser extractor needs pretrained=FOLDER (train one with eval_scripts/train_cser.py) or tiny-random")
        self.pretrained = pretrained
        self.batch_size = max(1, int(batch_size))
        from eval_scripts.components.tiny import build_tiny_cser
        from eval_scripts.components.tiny import load_component

        def load(name: str):
            return CSERModel.from_pretrained(name), AutoFeatureExtractor.from_pretrained(name)

        self.model, self.feature_extractor, self._tiny = load_component(pretrained, tiny=build_tiny_cser, load=load, seed=seed, device=device)
        self.columns = label_columns(self.model.config.id2label)

    def describe(self) -> dict:
        return {"name": self.name, **(self._tiny or {"pretrained": self.pretrained}), "label_columns": self.columns}

    def inputs(self, clips: list[np.ndarray]) -> tuple[torch.Tensor, list[int]]:
        """Normalised, right-padded input values of a batch and the clips' lengths."""
        arrays = [np.asarray(c, dtype=np.float32) for c in clips]
        values = self.feature_extractor(arrays, sampling_rate=SAMPLING_RATE, padding=True, return_tensors="pt")["input_values"]
        return values.to(self.model.device), [len(a) for a in arrays]

    def trajectories(self, clips: list[np.ndarray]) -> list[VadTrajectory]:
        out = []
        for start in range(0, len(clips), self.batch_size):
            values, lengths = self.inputs(clips[start : start + self.batch_size])
            with torch.inference_mode():
                result = self.model(input_values=values, lengths=lengths)
            logits = result.logits.float().cpu().numpy()
            for row, valid in enumerate(result.seconds_mask.cpu().numpy()):
                out.append(VadTrajectory.from_named(logits[row][valid], self.columns))
        return out
