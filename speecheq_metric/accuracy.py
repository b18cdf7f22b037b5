"""Forced-choice accuracies of SpeechEQ (SPEC §6): Acc1, Acc2, Acc_all, Acc_traj.

A dialogue contributes one pair of choices, at turn 4 and at turn 6. Each
choice is the option number 1 or 2; a prediction of 0 (or None) means the
model gave no usable answer: it counts as wrong and is reported in
`invalid_rate`.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence

import numpy as np

from .taxonomy import composite_of_subscale

CHOICES = (1, 2)
INVALID = 0
METRIC_NAMES = ("acc_turn4", "acc_turn6", "acc_all", "acc_traj", "invalid_rate")


def _as_choice(value: object, *, what: str, allow_invalid: bool) -> int:
    """One validated choice; ValueError naming the value otherwise."""
    if value is None and allow_invalid:
        return INVALID
    # bool is an int subclass but True/False are not option numbers.
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{what}: {value!r} is not a choice (expected 1 or 2{', or 0/None for invalid' if allow_invalid else ''})")
    allowed = (INVALID, *CHOICES) if allow_invalid else CHOICES
    if int(value) not in allowed:
        raise ValueError(f"{what}: {value!r} is not a choice (expected one of {allowed})")
    return int(value)


def _as_pairs(rows: Sequence, *, name: str, allow_invalid: bool) -> np.ndarray:
    """An (n, 2) int array of validated [turn4, turn6] choices."""
    if isinstance(rows, (str, bytes)) or not isinstance(rows, Sequence | np.ndarray):
        raise ValueError(f"{name} must be a list of [turn4, turn6] pairs, got {type(rows).__name__}")
    out = np.empty((len(rows), 2), dtype=np.int64)
    for i, row in enumerate(rows):
        if isinstance(row, (str, bytes)) or not isinstance(row, Sequence | np.ndarray) or len(row) != 2:
            raise ValueError(f"{name}[{i}] = {row!r} is not a [turn4, turn6] pair")
        for t, value in enumerate(row):
            out[i, t] = _as_choice(value, what=f"{name}[{i}][{t}]", allow_invalid=allow_invalid)
    return out


def score_choices(predictions: Sequence, references: Sequence) -> tuple[np.ndarray, np.ndarray]:
    """Per-dialogue (correct, invalid) boolean arrays of shape (n, 2), after validation.

    >>> correct, invalid = score_choices([[1, 2], [0, 1]], [[1, 1], [2, 1]])
    >>> correct.tolist(), invalid.tolist()
    ([[True, False], [False, True]], [[False, False], [True, False]])
    """
    pred = _as_pairs(predictions, name="predictions", allow_invalid=True)
    ref = _as_pairs(references, name="references", allow_invalid=False)
    if len(pred) != len(ref):
        raise ValueError(f"predictions has {len(pred)} dialogues but references has {len(ref)}")
    return pred == ref, pred == INVALID


def _rates(correct: np.ndarray, invalid: np.ndarray) -> dict[str, np.ndarray]:
    """The five rates over the dialogues of (..., n, 2) arrays: one value per leading index (a 0-d array for one group)."""
    return {
        "acc_turn4": correct[..., 0].mean(axis=-1),
        "acc_turn6": correct[..., 1].mean(axis=-1),
        "acc_all": correct.mean(axis=(-2, -1)),
        "acc_traj": correct.all(axis=-1).mean(axis=-1),
        "invalid_rate": invalid.mean(axis=(-2, -1)),
    }


def _bootstrap_ci(correct: np.ndarray, invalid: np.ndarray, n_bootstrap: int, seed: int) -> dict[str, list[float]]:
    """Percentile 95 % intervals from resampling dialogues with replacement."""
    n = len(correct)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(n_bootstrap, n))
    per_metric = _rates(correct[idx], invalid[idx])  # (B, n, 2) -> B values per metric
    return {k: [float(np.percentile(v, 2.5)), float(np.percentile(v, 97.5))] for k, v in per_metric.items()}


def _group_metrics(correct: np.ndarray, invalid: np.ndarray, n_bootstrap: int, seed: int) -> dict:
    """Rates, count and (when asked) bootstrap intervals of one group."""
    out: dict = {k: float(v) for k, v in _rates(correct, invalid).items()}
    out["n_dialogues"] = int(len(correct))
    if n_bootstrap > 0:
        out["ci95"] = _bootstrap_ci(correct, invalid, n_bootstrap, seed)
    return out


def _breakdown(labels: Sequence[str], correct: np.ndarray, invalid: np.ndarray, n_bootstrap: int, seed: int) -> dict[str, dict]:
    """`_group_metrics` of each group of dialogues sharing a label, keyed by label in sorted order."""
    label_arr = np.asarray(labels, dtype=object)
    out = {}
    for label in sorted(set(labels)):
        mask = label_arr == label
        out[label] = _group_metrics(correct[mask], invalid[mask], n_bootstrap, seed)
    return out


def forced_choice_metrics(
    predictions: Sequence,
    references: Sequence,
    subscales: Sequence[str] | None = None,
    *,
    n_bootstrap: int = 1000,
    seed: int = 0,
) -> dict:
    """Acc1/Acc2/Acc_all/Acc_traj, invalid rate and seeded bootstrap 95 % intervals.

    With `subscales` (one full slug per dialogue) the same numbers are given per
    subscale and per composite under `per_subscale` and `per_composite`.

    >>> m = forced_choice_metrics([[1, 2], [2, 2], [0, 1]], [[1, 2], [1, 2], [2, 1]], n_bootstrap=0)
    >>> m["acc_turn4"], m["acc_turn6"], m["acc_all"], m["acc_traj"], m["invalid_rate"]
    (0.3333333333333333, 1.0, 0.6666666666666666, 0.3333333333333333, 0.16666666666666666)
    """
    correct, invalid = score_choices(predictions, references)
    if len(correct) == 0:
        raise ValueError("no dialogues: predictions and references are empty")
    if isinstance(n_bootstrap, bool) or not isinstance(n_bootstrap, numbers.Integral) or n_bootstrap < 0:
        raise ValueError(f"n_bootstrap must be a non-negative integer, got {n_bootstrap!r}")
    result = _group_metrics(correct, invalid, int(n_bootstrap), seed)
    if subscales is None:
        return result
    if isinstance(subscales, str) or len(subscales) != len(correct):
        raise ValueError(f"subscales must be a list of {len(correct)} slugs (one per dialogue), got {subscales!r:.200}")
    composites = [composite_of_subscale(s) for s in subscales]
    result["per_subscale"] = _breakdown(subscales, correct, invalid, int(n_bootstrap), seed)
    result["per_composite"] = _breakdown(composites, correct, invalid, int(n_bootstrap), seed)
    return result


def majority_vote(choices: Sequence[int | None]) -> int:
    """Fold N runs of one item into one choice: the option picked by MORE THAN HALF of all runs.

    Tie rule: invalid runs (0/None) count in N but vote for nothing, so an
    option needs a strict majority of all runs; a tie (e.g. 1,2 or 1,2,0) or
    too many invalid runs gives 0 (invalid, hence wrong). With two options this
    is exactly the authors' vote "correct iff correct votes > wrong votes",
    where an unparsed run is a wrong vote.

    >>> majority_vote([1, 2, 1]), majority_vote([2, 0, 2]), majority_vote([1, 2, 0]), majority_vote([1, 2])
    (1, 2, 0, 0)
    """
    if isinstance(choices, (str, bytes)) or not isinstance(choices, Sequence | np.ndarray) or len(choices) == 0:
        raise ValueError(f"majority_vote needs a non-empty list of runs, got {choices!r}")
    votes = [_as_choice(c, what=f"run {i}", allow_invalid=True) for i, c in enumerate(choices)]
    for option in CHOICES:
        if 2 * votes.count(option) > len(votes):
            return option
    return INVALID
