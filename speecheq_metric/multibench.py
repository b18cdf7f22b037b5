"""Multi-Bench scores (SPEC §8): the utterance tasks' three answer formats and the interactive track's judge ratings.

Answer formats of the utterance tasks:
- multi-choice (paralinguistic recognition): a set of option indices per item.
  *hard* counts an item right only when the chosen set equals the reference
  set; *easy* also accepts a partially correct set: a non-empty set whose
  every option is right, though some right ones may be missing (one wrong
  option makes it wrong). The paper names the two modes without defining
  "partially correct"; this is our rule.
- single choice (style inference): one option index per item.
- semi-open (emotion recognition and inference): a judge rates each answer
  against the reference on a scale (1-5 by default); an item is right when its
  rating reaches the pass mark (4: the answer names the reference emotion or
  a close synonym).
For the choice formats a missing or unparseable answer (None) is wrong and
counted in `invalid_rate`, as in the forced-choice metric. For judge ratings a
missing rating (the *judge* gave no usable answer) is not a score at all: it
is left out of every mean and counted in `n_missing`.

Interactive track: per-turn alignment ratings grouped by dialogue give the
mean over rated turns with a bootstrap interval that resamples whole
dialogues (turns of one dialogue are not independent); `score_length_correlation`
is the verbosity check (does the judge reward longer replies?).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence

import numpy as np

DEFAULT_SCALE = (1, 5)
DEFAULT_PASS_MARK = 4


def _option_set(value: object, what: str, *, allow_invalid: bool) -> frozenset[int] | None:
    """A validated set of non-negative option indices (None for an invalid answer when allowed)."""
    if value is None and allow_invalid:
        return None
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence | set | frozenset | np.ndarray):
        raise ValueError(f"{what}: {value!r} is not a list of option indices")
    items = list(value)
    for item in items:
        if isinstance(item, bool) or not isinstance(item, numbers.Integral) or int(item) < 0:
            raise ValueError(f"{what}: {item!r} is not an option index (0, 1, 2, ...)")
    if not items:
        if allow_invalid:
            return None  # choosing nothing is no answer
        raise ValueError(f"{what}: a reference needs at least one option")
    return frozenset(int(i) for i in items)


def _check_lengths(predictions: Sequence, references: Sequence) -> None:
    if isinstance(predictions, (str, bytes)) or isinstance(references, (str, bytes)):
        raise ValueError("predictions and references must be lists, one entry per item")
    if len(predictions) != len(references):
        raise ValueError(f"predictions has {len(predictions)} items but references has {len(references)}")
    if len(predictions) == 0:
        raise ValueError("no items: predictions and references are empty")


def multi_choice_scores(predictions: Sequence, references: Sequence) -> dict:
    """Easy and hard accuracy of multi-choice answers (sets of option indices; None or [] = invalid).

    >>> m = multi_choice_scores([[0, 2], [0], [0, 1], None], [[0, 2], [0, 2], [0, 2], [1]])
    >>> m["acc_hard"], m["acc_easy"], m["invalid_rate"], m["n_items"]
    (0.25, 0.5, 0.25, 4)
    """
    _check_lengths(predictions, references)
    hard, easy, invalid = [], [], []
    for i, (p, r) in enumerate(zip(predictions, references)):
        chosen = _option_set(p, f"predictions[{i}]", allow_invalid=True)
        right = _option_set(r, f"references[{i}]", allow_invalid=False)
        invalid.append(chosen is None)
        hard.append(chosen is not None and chosen == right)
        easy.append(chosen is not None and chosen <= right)
    return {"acc_easy": float(np.mean(easy)), "acc_hard": float(np.mean(hard)), "invalid_rate": float(np.mean(invalid)),
            "n_items": len(hard)}


def single_choice_scores(predictions: Sequence, references: Sequence) -> dict:
    """Accuracy of single-choice answers (an option index per item; None = invalid, hence wrong).

    >>> single_choice_scores([1, 0, None, 2], [1, 1, 0, 2])
    {'accuracy': 0.5, 'invalid_rate': 0.25, 'n_items': 4}
    """
    _check_lengths(predictions, references)
    right, invalid = [], []
    for i, (p, r) in enumerate(zip(predictions, references)):
        if isinstance(r, bool) or not isinstance(r, numbers.Integral) or int(r) < 0:
            raise ValueError(f"references[{i}]: {r!r} is not an option index")
        if p is not None and (isinstance(p, bool) or not isinstance(p, numbers.Integral) or int(p) < 0):
            raise ValueError(f"predictions[{i}]: {p!r} is not an option index (or None for an invalid answer)")
        invalid.append(p is None)
        right.append(p is not None and int(p) == int(r))
    return {"accuracy": float(np.mean(right)), "invalid_rate": float(np.mean(invalid)), "n_items": len(right)}


def _ratings(scores: Sequence, scale: tuple[int, int], what: str = "scores") -> list[int | None]:
    """Validated ratings: whole numbers on the scale, or None for a missing rating."""
    low, high = scale
    if isinstance(scores, (str, bytes)) or not isinstance(scores, Sequence | np.ndarray):
        raise ValueError(f"{what} must be a list of ratings (None for a missing one)")
    out = []
    for i, s in enumerate(scores):
        if s is None:
            out.append(None)
            continue
        if isinstance(s, bool) or not isinstance(s, numbers.Real) or not math.isfinite(s) or s != int(s) or not low <= s <= high:
            raise ValueError(f"{what}[{i}] = {s!r} is not a whole-number rating in [{low}, {high}] (None for a missing one)")
        out.append(int(s))
    return out


def semi_open_scores(judge_scores: Sequence, *, scale: tuple[int, int] = DEFAULT_SCALE, pass_mark: int = DEFAULT_PASS_MARK) -> dict:
    """Judge-scored semi-open answers: accuracy (rating >= pass mark) and mean rating over the rated items; missing ones counted.

    `mean_normalised` maps the mean rating onto [0, 1] ((mean - low) / (high - low)).

    >>> m = semi_open_scores([5, 4, 2, None, 1])
    >>> m["accuracy"], m["mean_score"], m["mean_normalised"], m["n_items"], m["n_missing"]
    (0.5, 3.0, 0.5, 5, 1)
    """
    low, high = scale
    if not low <= pass_mark <= high:
        raise ValueError(f"pass mark {pass_mark} is not on the scale {scale}")
    ratings = _ratings(judge_scores, scale, "judge_scores")
    if not ratings:
        raise ValueError("no items: judge_scores is empty")
    rated = [s for s in ratings if s is not None]
    return {
        "accuracy": float(np.mean([s >= pass_mark for s in rated])) if rated else None,
        "mean_score": float(np.mean(rated)) if rated else None,
        "mean_normalised": (float(np.mean(rated)) - low) / (high - low) if rated else None,
        "n_items": len(ratings),
        "n_missing": len(ratings) - len(rated),
        "missing_rate": (len(ratings) - len(rated)) / len(ratings),
    }


def grouped_mean_ci(groups: Sequence[Sequence], *, scale: tuple[int, int] = DEFAULT_SCALE, n_bootstrap: int = 1000,
                    seed: int = 0) -> dict:
    """Mean rating over every rated item of every group, with a 95 % bootstrap interval that resamples whole groups.

    One group per dialogue: its turns' ratings (None = missing, left out). The
    interval is the 2.5/97.5 percentile of the mean over B resamples of the
    groups with replacement (resamples with no rated item are skipped); None
    with fewer than two groups holding a rating, or n_bootstrap = 0.

    >>> m = grouped_mean_ci([[5, 4], [2, None], [None]], n_bootstrap=0)
    >>> m["mean"], m["n_rated"], m["n_missing"], m["n_groups"], m["ci95"]
    (3.6666666666666665, 3, 2, 3, None)
    """
    if isinstance(n_bootstrap, bool) or not isinstance(n_bootstrap, numbers.Integral) or n_bootstrap < 0:
        raise ValueError(f"n_bootstrap must be a non-negative integer, got {n_bootstrap!r}")
    if isinstance(groups, (str, bytes)):
        raise ValueError("groups must be a list of lists of ratings")
    ratings = [_ratings(g, scale, f"groups[{k}]") for k, g in enumerate(groups)]
    sums = np.array([sum(s for s in g if s is not None) for g in ratings], dtype=float)
    counts = np.array([sum(s is not None for s in g) for g in ratings], dtype=float)
    n_rated = int(counts.sum())
    result = {"mean": float(sums.sum() / n_rated) if n_rated else None, "n_rated": n_rated,
              "n_missing": int(sum(len(g) for g in ratings) - n_rated), "n_groups": len(ratings), "ci95": None}
    if n_bootstrap and int((counts > 0).sum()) >= 2:
        rng = np.random.default_rng(seed)
        idx = rng.integers(0, len(ratings), size=(int(n_bootstrap), len(ratings)))
        total, count = sums[idx].sum(axis=1), counts[idx].sum(axis=1)
        means = total[count > 0] / count[count > 0]
        result["ci95"] = [float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))]
    return result


def _pearson(x: np.ndarray, y: np.ndarray) -> float | None:
    x, y = x - x.mean(), y - y.mean()
    denom = math.sqrt(float((x * x).sum()) * float((y * y).sum()))
    return float((x * y).sum() / denom) if denom > 0 else None


def _ranks(values: np.ndarray) -> np.ndarray:
    """Average ranks (ties share their mean rank)."""
    order = np.argsort(values, kind="mergesort")
    ranks = np.empty(len(values), dtype=float)
    ranks[order] = np.arange(len(values), dtype=float)
    for value in np.unique(values):
        tied = values == value
        ranks[tied] = ranks[tied].mean()
    return ranks


def score_length_correlation(scores: Sequence, lengths: Sequence) -> dict:
    """Pearson and Spearman correlation of ratings with reply length over the rated items (None ratings left out).

    A strong positive value warns that the judge may reward verbosity. Each
    coefficient is None when fewer than 3 pairs are rated or either side is constant.

    >>> c = score_length_correlation([1, 2, 3, None, 5], [10, 20, 30, 99, 40])
    >>> round(c["pearson"], 4), c["spearman"], c["n"]
    (0.9827, 1.0, 4)
    """
    if len(scores) != len(lengths):
        raise ValueError(f"{len(scores)} scores but {len(lengths)} lengths")
    pairs = []
    for i, (s, n) in enumerate(zip(scores, lengths)):
        if s is None:
            continue
        if isinstance(n, bool) or not isinstance(n, numbers.Real) or not math.isfinite(n) or n < 0:
            raise ValueError(f"lengths[{i}] = {n!r} is not a length")
        if isinstance(s, bool) or not isinstance(s, numbers.Real) or not math.isfinite(s):
            raise ValueError(f"scores[{i}] = {s!r} is not a rating")
        pairs.append((float(s), float(n)))
    if len(pairs) < 3:
        return {"pearson": None, "spearman": None, "n": len(pairs)}
    x, y = np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs])
    return {"pearson": _pearson(x, y), "spearman": _pearson(_ranks(x), _ranks(y)), "n": len(pairs)}


__all__ = ["grouped_mean_ci", "multi_choice_scores", "score_length_correlation", "semi_open_scores", "single_choice_scores"]
