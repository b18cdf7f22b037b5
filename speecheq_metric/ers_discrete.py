"""EMO-Reasoning scores from discrete judgements (SPEC §7): categorical ERS (emotion labels) and perceptual ERS (1-5 ratings)."""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence

import numpy as np

CATEGORICAL_LABELS: tuple[str, ...] = ("neutral", "happy", "angry", "sad")
# rows: user label, columns: model label (SPEC §7)
CATEGORICAL_MATRIX: dict[str, dict[str, float]] = {
    "neutral": {"neutral": 0.9, "happy": 0.6, "angry": 0.3, "sad": 0.4},
    "happy": {"neutral": 0.5, "happy": 1.0, "angry": 0.2, "sad": 0.2},
    "angry": {"neutral": 0.8, "happy": 0.1, "angry": 0.4, "sad": 0.5},
    "sad": {"neutral": 0.6, "happy": 0.2, "angry": 0.4, "sad": 0.9},
}


def _label(value: object, what: str) -> str:
    """The label in lower case; ValueError naming `what` and the value when it is not one of CATEGORICAL_LABELS."""
    if not isinstance(value, str) or value.strip().lower() not in CATEGORICAL_MATRIX:
        raise ValueError(f"{what}: unknown emotion label {value!r}; expected one of {CATEGORICAL_LABELS} (any case)")
    return value.strip().lower()


def categorical_ers(user_labels: Sequence[str], model_labels: Sequence[str]) -> float:
    """Mean over turns of the SPEC §7 matrix cell (user label, model label); labels are case-insensitive.

    >>> round(categorical_ers(["Sad", "angry"], ["sad", "NEUTRAL"]), 6)
    0.85
    """
    if isinstance(user_labels, str) or isinstance(model_labels, str):
        raise ValueError("categorical_ers takes lists of labels, one per turn, not a single string")
    if len(user_labels) != len(model_labels):
        raise ValueError(f"{len(user_labels)} user labels but {len(model_labels)} model labels")
    if len(user_labels) == 0:
        raise ValueError("categorical_ers needs at least one turn")
    cells = [
        CATEGORICAL_MATRIX[_label(u, f"user_labels[{i}]")][_label(m, f"model_labels[{i}]")]
        for i, (u, m) in enumerate(zip(user_labels, model_labels))
    ]
    return float(np.mean(cells))


PERCEPTUAL_CRITERIA: tuple[str, ...] = ("rationality", "naturalness", "relevance")


def perceptual_ers(ratings: Sequence[Sequence[float]] | Sequence[Mapping[str, float]]) -> float:
    """Human 1-5 ratings (rationality, naturalness, relevance) per response -> mean of (r - 1) / 4 in [0, 1].

    Each item is a triple in that order or a mapping with those keys.

    >>> perceptual_ers([[5, 4, 3], {"rationality": 1, "naturalness": 1, "relevance": 1}])
    0.375
    """
    if isinstance(ratings, (str, bytes)) or len(ratings) == 0:
        raise ValueError("perceptual_ers needs at least one rated response")
    values = []
    for i, item in enumerate(ratings):
        if isinstance(item, Mapping):
            missing = [c for c in PERCEPTUAL_CRITERIA if c not in item]
            if missing:
                raise ValueError(f"ratings[{i}] lacks {missing}")
            triple = [item[c] for c in PERCEPTUAL_CRITERIA]
        else:
            triple = list(item)
            if len(triple) != 3:
                raise ValueError(f"ratings[{i}] = {item!r}: expected 3 ratings {PERCEPTUAL_CRITERIA}")
        for c, r in zip(PERCEPTUAL_CRITERIA, triple):
            if isinstance(r, bool) or not isinstance(r, numbers.Real) or not math.isfinite(r) or not 1 <= r <= 5:
                raise ValueError(f"ratings[{i}][{c!r}] = {r!r} is not a rating in [1, 5]")
            values.append((float(r) - 1.0) / 4.0)
    return float(np.mean(values))


__all__ = ["CATEGORICAL_LABELS", "CATEGORICAL_MATRIX", "PERCEPTUAL_CRITERIA", "categorical_ers", "perceptual_ers"]
