"""An audio emotion classifier mapped onto the categorical-ERS labels (neutral, happy, angry, sad; SPEC §7).

Any transformers audio-classification checkpoint works when its label names
map onto the four categories (`LABEL_ALIASES`, matched case-insensitively: e.g.
the SUPERB ER labels neu/hap/ang/sad, or neutral/happiness/anger/sadness).
Classes with no category (fear, surprise, ...) are left out: a clip gets the
most probable of the mapped classes. A checkpoint with fewer than two mapped
classes is refused, naming its labels.
"""

from __future__ import annotations

import logging

import numpy as np
import torch

from speecheq_metric.ers_discrete import CATEGORICAL_LABELS

logger = logging.getLogger(__name__)

LABEL_ALIASES: dict[str, str] = {
    "neutral": "neutral", "neu": "neutral", "calm": "neutral",
    "happy": "happy", "hap": "happy", "happiness": "happy", "joy": "happy",
    "angry": "angry", "ang": "angry", "anger": "angry",
    "sad": "sad", "sadness": "sad",
}


class EmotionLabeller:
    """Clips (16 kHz) in, one of neutral/happy/angry/sad per clip out."""

    def __init__(self, pretrained: str, *, seed: int = 0, device: str | None = None) -> None:
        self.pretrained = pretrained
        from eval_scripts.components.tiny import build_tiny_emotion_classifier
        from eval_scripts.components.tiny import load_component

        def load(name: str):
            from transformers import AutoFeatureExtractor
            from transformers import AutoModelForAudioClassification

            return AutoModelForAudioClassification.from_pretrained(name), AutoFeatureExtractor.from_pretrained(name)

        self.model, self.feature_extractor, self._tiny = load_component(pretrained, tiny=build_tiny_emotion_classifier, load=load,
                                                                        seed=seed, device=device)
        self.classes = {int(i): LABEL_ALIASES[str(n).strip().lower()] for i, n in self.model.config.id2label.items()
                        if str(n).strip().lower() in LABEL_ALIASES}
        if len(set(self.classes.values())) < 2:
            raise ValueError(f"{pretrained}: labels {sorted(self.model.config.id2label.values())} map to fewer than two of {CATEGORICAL_LABELS}")

    def describe(self) -> dict:
        mapping = {str(self.model.config.id2label[i]): c for i, c in sorted(self.classes.items())}
        return {"kind": "audio-classification", "label_map": mapping, **(self._tiny or {"pretrained": self.pretrained})}

    def labels(self, clips: list[np.ndarray]) -> list[str]:
        """The category of each clip (one clip per forward pass, so no padding effects)."""
        out = []
        keep = sorted(self.classes)
        for clip in clips:
            inputs = self.feature_extractor(np.asarray(clip, dtype=np.float32), sampling_rate=16_000, return_tensors="pt")
            inputs = {k: v.to(self.model.device) for k, v in inputs.items()}
            with torch.inference_mode():
                logits = self.model(**inputs).logits[0].float().cpu().numpy()
            out.append(self.classes[keep[int(np.argmax(logits[keep]))]])
        return out
