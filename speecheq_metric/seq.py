"""SEQ: an IQ-style score of a model within a cohort of models (SPEC §6), and Spearman ρ.

X_i = Acc_traj of model i; Z_i = (X_i - median X) / (k * MAD X), k = 1.4826;
SEQ_i = clip(100 + 15 Z_i, 40, 160), i.e. Z capped at ±4 σ. MAD is the
unscaled median absolute deviation; k makes k * MAD estimate σ for normal data.
"""

from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

import numpy as np

K_MAD = 1.4826  # 1 / Φ⁻¹(0.75)
SEQ_MEAN = 100.0
SEQ_SD = 15.0
Z_CAP = 4.0
SEQ_MIN = SEQ_MEAN - Z_CAP * SEQ_SD  # 40
SEQ_MAX = SEQ_MEAN + Z_CAP * SEQ_SD  # 160
MIN_COHORT = 3


@dataclass(frozen=True)
class ReferenceCohort:
    """A frozen cohort: later models are scored against this median and MAD."""

    median: float
    mad: float
    n_models: int
    k: float = K_MAD

    def to_dict(self) -> dict:
        """Plain dict, to store beside results."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping) -> ReferenceCohort:
        """Inverse of to_dict."""
        return cls(float(data["median"]), float(data["mad"]), int(data["n_models"]), float(data.get("k", K_MAD)))


def _checked_scores(cohort: Mapping[str, float], *, name: str = "cohort") -> dict[str, float]:
    """Model -> finite float in [0, 1]; ValueError naming the bad entry."""
    if not isinstance(cohort, Mapping) or not cohort:
        raise ValueError(f"{name} must be a non-empty mapping model -> Acc_traj, got {cohort!r:.200}")
    out = {}
    for model, value in cohort.items():
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
            raise ValueError(f"{name}[{model!r}] = {value!r} is not a finite number")
        if not 0.0 <= float(value) <= 1.0:
            raise ValueError(f"{name}[{model!r}] = {value!r} is not an accuracy in [0, 1]")
        out[str(model)] = float(value)
    return out


def freeze_cohort(cohort: Mapping[str, float], *, k: float = K_MAD) -> ReferenceCohort:
    """Median and (unscaled) MAD of a cohort's Acc_traj values, to score later models against.

    >>> freeze_cohort({"a": 0.2, "b": 0.4, "c": 0.5, "d": 0.9})
    ReferenceCohort(median=0.45, mad=0.15, n_models=4, k=1.4826)
    """
    return _frozen(_checked_scores(cohort), k)


def _frozen(scores: dict[str, float], k: float) -> ReferenceCohort:
    """freeze_cohort of an already validated cohort."""
    values = np.array(list(scores.values()))
    median = float(np.median(values))
    mad = float(np.median(np.abs(values - median)))
    return ReferenceCohort(median=median, mad=mad, n_models=len(values), k=k)


def _reference_for(scores: dict[str, float], reference: ReferenceCohort | Mapping | None, k: float) -> ReferenceCohort:
    """The cohort's own median/MAD, or the frozen `reference` (a ReferenceCohort or its dict)."""
    if reference is None:
        return _frozen(scores, k)
    if isinstance(reference, ReferenceCohort):
        return reference
    return ReferenceCohort.from_dict(reference)


def _scored(scores: dict[str, float], ref: ReferenceCohort) -> dict[str, float]:
    """SEQ of each validated score against `ref`; a small-cohort warning points at the line calling seq_scores/seq_report."""
    if ref.n_models < MIN_COHORT:
        warnings.warn(
            f"SEQ from a cohort of {ref.n_models} model(s): median and MAD of fewer than {MIN_COHORT} models are not meaningful",
            UserWarning,
            stacklevel=3,
        )
    return {model: _seq_of(x, ref) for model, x in scores.items()}


def _seq_of(x: float, ref: ReferenceCohort) -> float:
    """SEQ of one Acc_traj against a reference median/MAD, with the MAD = 0 rule."""
    if ref.mad == 0.0:
        # Our rule (SPEC §6): no spread means any difference is "infinitely" far.
        if math.isclose(x, ref.median, abs_tol=1e-12):
            return SEQ_MEAN
        return SEQ_MAX if x > ref.median else SEQ_MIN
    z = (x - ref.median) / (ref.k * ref.mad)
    return float(min(max(SEQ_MEAN + SEQ_SD * z, SEQ_MIN), SEQ_MAX))


def seq_scores(
    cohort: Mapping[str, float],
    *,
    reference: ReferenceCohort | Mapping | None = None,
    k: float = K_MAD,
) -> dict[str, float]:
    """SEQ of every model of `cohort` (model -> Acc_traj), within it or against a frozen `reference`.

    Warns (UserWarning) when the cohort that sets the median/MAD has fewer than 3 models.

    >>> {m: round(s, 2) for m, s in seq_scores({"a": 0.2, "b": 0.4, "c": 0.5, "d": 0.9}).items()}
    {'a': 83.14, 'b': 96.63, 'c': 103.37, 'd': 130.35}
    >>> s = seq_scores({"a": 0.0, "b": 0.49, "c": 0.5, "d": 0.51, "e": 1.0})  # |Z| > 4 is capped
    >>> {m: round(v, 2) for m, v in s.items()}
    {'a': 40.0, 'b': 89.88, 'c': 100.0, 'd': 110.12, 'e': 160.0}
    """
    scores = _checked_scores(cohort)
    return _scored(scores, _reference_for(scores, reference, k))


def seq_report(
    cohort: Mapping[str, float],
    *,
    reference: ReferenceCohort | Mapping | None = None,
    k: float = K_MAD,
) -> dict:
    """SEQ scores plus the median/MAD they were computed against (store this beside results).

    >>> r = seq_report({"a": 0.5, "b": 0.5, "c": 0.7})
    >>> r["seq"], r["reference"]["median"], r["reference"]["mad"]
    ({'a': 100.0, 'b': 100.0, 'c': 160.0}, 0.5, 0.0)
    """
    scores = _checked_scores(cohort)
    ref = _reference_for(scores, reference, k)
    return {"seq": _scored(scores, ref), "reference": ref.to_dict(), "frozen_reference": reference is not None}


def seq_per_subscale(
    cohort: Mapping[str, Mapping[str, float]],
    *,
    references: Mapping[str, ReferenceCohort | Mapping] | None = None,
) -> dict[str, dict[str, float]]:
    """Per-subscale SEQ: {model: {subscale: Acc_traj}} -> {subscale: {model: SEQ}}.

    Each subscale is scored within the models that have it (or against
    `references[subscale]` when given).

    >>> per = seq_per_subscale({"a": {"s": 0.2, "t": 0.5}, "b": {"s": 0.4, "t": 0.5}, "c": {"s": 0.6, "t": 0.9}})
    >>> {slug: {m: round(v, 2) for m, v in seqs.items()} for slug, seqs in per.items()}
    {'s': {'a': 89.88, 'b': 100.0, 'c': 110.12}, 't': {'a': 100.0, 'b': 100.0, 'c': 160.0}}
    """
    by_subscale: dict[str, dict[str, float]] = {}
    for model, per in cohort.items():
        if not isinstance(per, Mapping):
            raise ValueError(f"cohort[{model!r}] must map subscale -> Acc_traj, got {per!r:.200}")
        for slug, value in per.items():
            by_subscale.setdefault(slug, {})[model] = value
    out = {}
    for slug in sorted(by_subscale):
        ref = None if references is None else references.get(slug)
        out[slug] = seq_scores(by_subscale[slug], reference=ref)
    return out


def _average_ranks(values: np.ndarray) -> np.ndarray:
    """Ranks 1..n with ties given the mean of the ranks they span."""
    order = np.argsort(values, kind="mergesort")
    sorted_vals = values[order]
    ranks = np.empty(len(values), dtype=float)
    start = 0
    while start < len(values):
        end = start
        while end + 1 < len(values) and sorted_vals[end + 1] == sorted_vals[start]:
            end += 1
        ranks[order[start : end + 1]] = (start + end) / 2.0 + 1.0
        start = end + 1
    return ranks


def _aligned(a: Sequence[float] | Mapping[str, float], b: Sequence[float] | Mapping[str, float]) -> tuple[np.ndarray, np.ndarray]:
    """Two equal-length float arrays; mappings are aligned by key."""
    if isinstance(a, Mapping) != isinstance(b, Mapping):
        raise ValueError("spearman_rho needs two mappings (aligned by key) or two sequences")
    if isinstance(a, Mapping):
        if set(a) != set(b):
            raise ValueError(f"spearman_rho: keys differ: only in first {sorted(set(a) - set(b))}, only in second {sorted(set(b) - set(a))}")
        keys = sorted(a)
        a, b = [a[k] for k in keys], [b[k] for k in keys]
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.ndim != 1 or x.shape != y.shape:
        raise ValueError(f"spearman_rho: lengths differ ({x.shape} vs {y.shape})")
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        raise ValueError("spearman_rho: inputs contain NaN or infinity")
    return x, y


def spearman_rho(a: Sequence[float] | Mapping[str, float], b: Sequence[float] | Mapping[str, float]) -> float:
    """Spearman's ρ: Pearson correlation of average ranks (ties share their mean rank).

    To compare a metric (higher = better) with a human ranking where 1 = best,
    pass the negated ranks, or use `rank_agreement`. ValueError when either side
    is constant (ρ undefined) or has fewer than 2 items.

    >>> spearman_rho([0.1, 0.5, 0.3, 0.3], [1, 4, 2, 3])
    0.9486832980505138
    """
    x, y = _aligned(a, b)
    if len(x) < 2:
        raise ValueError("spearman_rho needs at least 2 items")
    rx, ry = _average_ranks(x), _average_ranks(y)
    rx, ry = rx - rx.mean(), ry - ry.mean()
    denom = math.sqrt(float((rx * rx).sum()) * float((ry * ry).sum()))
    if denom == 0.0:
        raise ValueError("spearman_rho is undefined: one side has all values equal")
    return float((rx * ry).sum() / denom)


def rank_agreement(metric: Mapping[str, float], human_rank: Mapping[str, float]) -> float:
    """ρ between a metric (higher = better) and a given ranking where 1 = best.

    >>> rank_agreement({"a": 0.9, "b": 0.5, "c": 0.7}, {"a": 1, "b": 3, "c": 2})
    1.0
    """
    return spearman_rho(metric, {k: -float(v) for k, v in human_rank.items()})
