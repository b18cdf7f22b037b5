"""EMO-Reasoning scores (SPEC §7): continuous ECS/EBS/ESS/ERS and CT-*, categorical and perceptual ERS.

A turn is a per-second valence/arousal/dominance (VAD) trajectory, given by
column NAME (a mapping, a pandas DataFrame or a CSV file with columns
`valence, arousal, dominance`), never by position: emotion models disagree on
the order of their outputs.

Two variants:
- `paper`: the formulas of the EMO-Reasoning paper. Costs are turned into
  scores by min-max normalisation over the turns (or dialogues) scored
  together, so a score is relative to its batch unless `norm_bounds` freezes
  the range.
- `reference`: the published evaluator's fixed scaling (K = 5, not clipped)
  and weighted ERS, to compare with published numbers.

EBS is "inert" for a turn in which the user is not extreme on any dimension;
an inert EBS is `None` with `ebs_active=False`, never a number, so it cannot
be mistaken for a perfect 1.0 (the published evaluator writes 1.0 there).
"""

from __future__ import annotations

import csv
import math
import numbers
import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from .dtw import dtw_many_checked
from .dtw import fastdtw_distance
from .kernels import turn_costs_kernel

DIMENSIONS: tuple[str, ...] = ("valence", "arousal", "dominance")
VARIANTS: tuple[str, ...] = ("paper", "reference")
_V, _A, _D = 0, 1, 2

TurnInput = Mapping | str | os.PathLike | object  # mapping / DataFrame / CSV path


@dataclass(frozen=True)
class ERSParams:
    """Hyper-parameters of SPEC §7 (MSP-Conversation percentiles) and of the reference scaling."""

    arousal_extreme_above: float = 0.345
    valence_extreme_below: float = -0.07
    dominance_extreme_below: float = 0.210
    delta_valence: float = 0.211
    delta_arousal: float = -0.105
    delta_dominance: float = 0.098
    jump_threshold: float = 0.04
    scale: float = 5.0  # K of the reference variant
    ers_weights: tuple[float, float, float] = (0.4, 0.4, 0.2)  # ECS, EBS, ESS (reference, EBS active)
    ers_weights_inert: tuple[float, float] = (0.7, 0.3)  # ECS, ESS (reference, EBS inert)
    ct_weights: tuple[float, float, float] = (0.35, 0.35, 0.30)  # CT-ECS, CT-EBS, CT-ESS
    ct_weights_inert: tuple[float, float] = (0.6, 0.4)  # CT-ECS, CT-ESS

    @property
    def deltas(self) -> tuple[float, float, float]:
        """Target offsets δ_V, δ_A, δ_D in VAD order."""
        return (self.delta_valence, self.delta_arousal, self.delta_dominance)

    def extreme_dims(self, user_means: np.ndarray) -> tuple[int, ...]:
        """VAD indices on which the user's mean over the turn is extreme."""
        dims = []
        if user_means[_V] < self.valence_extreme_below:
            dims.append(_V)
        if user_means[_A] > self.arousal_extreme_above:
            dims.append(_A)
        if user_means[_D] < self.dominance_extreme_below:
            dims.append(_D)
        return tuple(dims)


DEFAULT_PARAMS = ERSParams()


@dataclass(slots=True)
class TurnScores:
    """Scores of one (user turn, model turn) pair; `ebs` is None when `ebs_active` is False."""

    ecs: float
    ebs: float | None
    ess: float
    ers: float
    ebs_active: bool
    extreme_dims: tuple[str, ...]
    costs: dict[str, float | None] = field(default_factory=dict)

    def to_dict(self) -> dict:
        """Plain dict (JSON-ready)."""
        return asdict(self)


@dataclass(slots=True)
class DialogueScores:
    """Cross-turn scores of one dialogue; `ct_ebs` is None when no turn had an active EBS."""

    ct_ecs: float
    ct_ebs: float | None
    ct_ess: float
    ct_ers: float
    ct_ebs_active: bool
    turns: list[TurnScores]

    def to_dict(self) -> dict:
        """Plain dict (JSON-ready)."""
        return asdict(self)


# ----------------------------------------------------------------- inputs


def read_vad_csv(path: str | os.PathLike) -> np.ndarray:
    """A (3, T) VAD array from a CSV with `valence, arousal, dominance` columns (any order, any case).

    Other columns (time, speaker, ...) are ignored. ValueError naming the file
    and row for a missing column or a value that is not a number.
    """
    path = Path(path)
    with path.open(newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        header = {name.strip().lower(): name for name in (reader.fieldnames or [])}
        missing = [d for d in DIMENSIONS if d not in header]
        if missing:
            raise ValueError(f"{path}: missing column(s) {missing}; found {reader.fieldnames}")
        rows = []
        for line_no, row in enumerate(reader, start=2):
            try:
                rows.append([float(row[header[d]]) for d in DIMENSIONS])
            except (TypeError, ValueError):
                raise ValueError(f"{path}: line {line_no} has a non-numeric value in {[row.get(header[d]) for d in DIMENSIONS]}") from None
    if not rows:
        raise ValueError(f"{path}: no rows (a turn needs at least one second of VAD)")
    return _checked_vad(np.asarray(rows, dtype=np.float64).T, name=str(path))


def _checked_vad(arr: np.ndarray, *, name: str, finite: bool = True) -> np.ndarray:
    """A non-empty (3, T) array, finite unless the caller checks finiteness in bulk (finite=False)."""
    if arr.shape[1] == 0:
        raise ValueError(f"{name}: empty trajectory (a turn needs at least one second of VAD)")
    if finite and not np.isfinite(arr).all():
        dim, t = (int(v[0]) for v in np.nonzero(~np.isfinite(arr)))
        raise ValueError(f"{name}: {DIMENSIONS[dim]} is {float(arr[dim, t])!r} at second {t}; drop or interpolate such frames first")
    return np.ascontiguousarray(arr)


def as_vad(turn: TurnInput, *, name: str = "turn", finite: bool = True) -> np.ndarray:
    """A validated (3, T) VAD array from a mapping/DataFrame with named columns or a CSV path.

    finite=False leaves the NaN/infinity check to the caller (`_paired` checks a whole batch at once).
    """
    if isinstance(turn, (str, os.PathLike)):
        return read_vad_csv(turn)
    if type(turn) is dict and "valence" in turn and "arousal" in turn and "dominance" in turn:
        # fast path for the common case: a plain dict with lower-case names and equal 1-D columns
        try:
            arr = np.array((turn["valence"], turn["arousal"], turn["dominance"]), dtype=np.float64)
        except (TypeError, ValueError):
            arr = None  # ragged or odd content: the general path below names the problem
        if arr is not None and arr.ndim == 2:
            return _checked_vad(arr, name=name, finite=finite)
    if isinstance(turn, np.ndarray) and turn.dtype.names is None:
        raise ValueError(f"{name}: a plain array has no column names; pass a mapping {{'valence': ..., 'arousal': ..., 'dominance': ...}}")
    columns = getattr(turn, "columns", None)
    keys = list(columns) if columns is not None else (list(turn.keys()) if isinstance(turn, Mapping) else None)
    if keys is None and isinstance(turn, np.ndarray):
        keys = list(turn.dtype.names)
    if keys is None:
        raise ValueError(f"{name}: expected a mapping/DataFrame with valence, arousal, dominance columns or a CSV path, got {type(turn).__name__}")
    by_lower = {str(k).strip().lower(): k for k in keys}
    missing = [d for d in DIMENSIONS if d not in by_lower]
    if missing:
        raise ValueError(f"{name}: missing column(s) {missing}; found {keys}")
    cols = []
    for d in DIMENSIONS:
        col = np.asarray(turn[by_lower[d]], dtype=np.float64)
        if col.ndim != 1:
            raise ValueError(f"{name}: column {d} must be 1-D (one value per second), got shape {col.shape}")
        cols.append(col)
    lengths = {len(c) for c in cols}
    if len(lengths) != 1:
        raise ValueError(f"{name}: columns have different lengths {[len(c) for c in cols]}")
    return _checked_vad(np.vstack(cols), name=name, finite=finite)


# ----------------------------------------------------------------- DTW backends


def _distances(jobs_a: list[np.ndarray], jobs_b: list[np.ndarray], dtw: str | Callable) -> np.ndarray:
    """DTW of every job pair with the chosen backend."""
    if dtw == "exact":
        return dtw_many_checked(jobs_a, jobs_b)
    if dtw == "fastdtw":
        return np.array([fastdtw_distance(a, b) for a, b in zip(jobs_a, jobs_b)], dtype=np.float64)
    if callable(dtw):
        return np.array([float(dtw(a, b)) for a, b in zip(jobs_a, jobs_b)], dtype=np.float64)
    raise ValueError(f"dtw must be 'exact', 'fastdtw' or a callable, got {dtw!r}")


def _check_variant(variant: str) -> None:
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")


# ----------------------------------------------------------------- normalisation (paper)


def _minmax_scores(costs: np.ndarray, bounds: tuple[float, float] | None, what: str) -> np.ndarray:
    """norm(-cost) of the paper: 1 at the lowest cost of the batch, 0 at the highest.

    With frozen `bounds` (lowest, highest cost) the score is clipped to [0, 1].
    A batch whose costs are all equal has no range: every score is 1.0 (with a
    warning unless all costs are 0; pass `norm_bounds` to score single turns).
    """
    if costs.size == 0:
        return costs
    if bounds is not None:
        lo, hi = float(bounds[0]), float(bounds[1])
        if not hi > lo:
            raise ValueError(f"norm_bounds[{what!r}] = {bounds!r}: need lowest < highest cost")
        return np.clip((hi - costs) / (hi - lo), 0.0, 1.0)
    lo, hi = float(costs.min()), float(costs.max())
    if hi == lo == 0.0:
        return np.ones_like(costs)  # nothing to penalise anywhere: every turn is at the best score
    if hi == lo:
        warnings.warn(
            f"paper {what}: all {costs.size} costs are equal ({lo}), min-max normalisation has no range; scores set to 1.0",
            UserWarning,
            stacklevel=3,
        )
        return np.ones_like(costs)
    return (hi - costs) / (hi - lo)


# ----------------------------------------------------------------- turn-level scores


class _Batch:
    """Validated turns stored flat: one C-contiguous (3, ΣT) array and the turn offsets into it."""

    __slots__ = ("flat", "offsets")

    def __init__(self, flat: np.ndarray, offsets: np.ndarray):
        self.flat = flat
        self.offsets = offsets

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, i: int) -> np.ndarray:
        return self.flat[:, self.offsets[i] : self.offsets[i + 1]]

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets).astype(np.float64)


def _collect(turns: Sequence[TurnInput], name_of: Callable[[int], str]) -> _Batch:
    """Validate and flatten turns in bulk: per turn only name lookups, one NaN check for the batch."""
    cols: tuple[list, list, list] = ([], [], [])
    lengths = np.empty(len(turns), dtype=np.int64)
    for i, turn in enumerate(turns):
        if type(turn) is dict:
            try:
                v, a, d = turn["valence"], turn["arousal"], turn["dominance"]
                n = len(v)
                fast = n > 0 and len(a) == n and len(d) == n
            except (KeyError, TypeError):
                fast = False
            if fast:
                cols[0].append(v)
                cols[1].append(a)
                cols[2].append(d)
                lengths[i] = n
                continue
        arr = as_vad(turn, name=name_of(i), finite=False)
        for k in range(3):
            cols[k].append(arr[k])
        lengths[i] = arr.shape[1]
    offsets = np.zeros(len(turns) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    if len(turns) == 0:
        return _Batch(np.zeros((3, 0)), offsets)
    try:
        flat = np.ascontiguousarray(np.stack([np.concatenate(c).astype(np.float64, copy=False) for c in cols]))
        ok = flat.shape == (3, int(offsets[-1]))
    except (TypeError, ValueError):
        ok = False
    if not ok:  # some column is not a flat list of numbers: let the per-turn path name it
        for i, turn in enumerate(turns):
            as_vad(turn, name=name_of(i))
        raise ValueError("VAD columns could not be combined into one batch")  # pragma: no cover - as_vad raises first
    if not np.isfinite(flat).all():
        bad = int(np.flatnonzero(~np.isfinite(flat).all(axis=0))[0])
        i = int(np.searchsorted(offsets, bad, side="right") - 1)
        _checked_vad(flat[:, offsets[i] : offsets[i + 1]], name=name_of(i))
    return _Batch(flat, offsets)


def _turn_costs(users: _Batch, models: _Batch, params: ERSParams, dtw: str | Callable) -> dict[str, np.ndarray]:
    """Raw per-turn costs; the exact backend runs in one compiled call, others pair by pair."""
    n = len(users)
    limits = np.array([params.valence_extreme_below, params.arousal_extreme_above, params.dominance_extreme_below])
    deltas = np.array(params.deltas)
    out = {
        "dtw_v": np.empty(n),
        "dtw_a": np.empty(n),
        "ebs_dtw": np.empty(n),
        "extreme": np.zeros((n, 3), dtype=np.bool_),
        "jump_sum": np.empty(n),
        "jump_n": np.empty(n, dtype=np.int64),
    }
    if dtw == "exact":
        turn_costs_kernel(users.flat, users.offsets, models.flat, models.offsets, limits, deltas, float(params.jump_threshold), out["dtw_v"], out["dtw_a"], out["ebs_dtw"], out["extreme"], out["jump_sum"], out["jump_n"])
        return out
    # Other backends: the same quantities, DTW pair by pair.
    jobs_a: list[np.ndarray] = []
    jobs_b: list[np.ndarray] = []
    for i in range(n):
        u, m = users[i], models[i]
        jobs_a += [m[_V], m[_A]]
        jobs_b += [u[_V], u[_A]]
        dims = params.extreme_dims(u.mean(axis=1))
        out["extreme"][i, list(dims)] = True
        for d in dims:
            jobs_a.append(u[d] + deltas[d])
            jobs_b.append(m[d])
        steps = np.abs(np.diff(m, axis=1)).ravel()
        steps = steps[steps > params.jump_threshold]
        out["jump_sum"][i] = float(steps.sum())
        out["jump_n"][i] = steps.size
    dist = _distances(jobs_a, jobs_b, dtw)
    pos = 0
    for i in range(n):
        out["dtw_v"][i], out["dtw_a"][i] = dist[pos], dist[pos + 1]
        k = int(out["extreme"][i].sum())
        out["ebs_dtw"][i] = float(dist[pos + 2 : pos + 2 + k].sum())
        pos += 2 + k
    return out


def _turn_arrays(
    users: _Batch,
    models: _Batch,
    *,
    variant: str,
    dtw: str | Callable,
    params: ERSParams,
    norm_bounds: Mapping[str, tuple[float, float]] | None,
) -> dict[str, np.ndarray]:
    """Scores of aligned lists of validated (3, T) user and model turns, as arrays."""
    c = _turn_costs(users, models, params, dtw)
    n = len(users)
    len_u = users.lengths
    len_m = models.lengths
    n_extreme = c["extreme"].sum(axis=1)
    active = n_extreme > 0
    ecs_cost = c["dtw_v"] + c["dtw_a"]
    ess_cost = c["jump_sum"]
    K = params.scale
    ebs = np.zeros(n)  # read only where active
    if variant == "reference":
        ecs = 1.0 - K * ecs_cost / (4.0 * np.maximum(len_u, len_m))
        ebs[active] = 1.0 - K * c["ebs_dtw"][active] / (n_extreme[active] * len_u[active])
        mean_jump = np.divide(c["jump_sum"], c["jump_n"], out=np.zeros(n), where=c["jump_n"] > 0)
        ess = 1.0 - K * mean_jump  # 1.0 when no jump / T < 2
        w_ecs, w_ebs, w_ess = params.ers_weights
        i_ecs, i_ess = params.ers_weights_inert
        ers = np.where(active, w_ecs * ecs + w_ebs * ebs + w_ess * ess, i_ecs * ecs + i_ess * ess)
    else:
        bounds = norm_bounds or {}
        ecs = _minmax_scores(ecs_cost, bounds.get("ecs"), "ECS")
        ess = _minmax_scores(ess_cost, bounds.get("ess"), "ESS")
        ebs[active] = _minmax_scores(c["ebs_dtw"][active], bounds.get("ebs"), "EBS")
        ers = np.where(active, (ecs + ebs + ess) / 3.0, (ecs + ess) / 2.0)
    ebs[~active] = np.nan  # under the mask only: a careless `.data.mean()` turns loud (NaN), never a fake 1.0
    return {
        "ecs": ecs,
        "ebs": np.ma.masked_array(ebs, mask=~active),
        "ess": ess,
        "ers": ers,
        "ebs_active": active,
        "extreme": c["extreme"],
        "ecs_dtw": ecs_cost,
        "ebs_dtw": np.ma.masked_array(c["ebs_dtw"], mask=~active),
        "ess_jumps": ess_cost,
    }


def _turn_objects(a: dict[str, np.ndarray]) -> list[TurnScores]:
    """One TurnScores per turn from the arrays of `_turn_arrays` (the single scoring path)."""
    names = [tuple(DIMENSIONS[d] for d in range(3) if row[d]) for row in a["extreme"].tolist()]
    out = []
    for i, (on, e_ecs, e_ebs, e_ess, e_ers, ecs_c, ebs_c, ess_c) in enumerate(
        zip(
            a["ebs_active"].tolist(),
            a["ecs"].tolist(),
            a["ebs"].data.tolist(),
            a["ess"].tolist(),
            a["ers"].tolist(),
            a["ecs_dtw"].tolist(),
            a["ebs_dtw"].data.tolist(),
            a["ess_jumps"].tolist(),
        )
    ):
        out.append(
            TurnScores(
                ecs=e_ecs,
                ebs=e_ebs if on else None,
                ess=e_ess,
                ers=e_ers,
                ebs_active=on,
                extreme_dims=names[i],
                costs={"ecs_dtw": ecs_c, "ebs_dtw": ebs_c if on else None, "ess_jumps": ess_c},
            )
        )
    return out


def _paired(user_turns: Sequence, model_turns: Sequence) -> tuple[_Batch, _Batch]:
    """Validated batches of two equal-length lists of turns."""
    for what, turns in (("user_turns", user_turns), ("model_turns", model_turns)):
        if isinstance(turns, (str, bytes, Mapping)) or not isinstance(turns, Sequence):
            raise ValueError(f"{what} must be a list of turns, got {type(turns).__name__}")
    if len(user_turns) != len(model_turns):
        raise ValueError(f"{len(user_turns)} user turns but {len(model_turns)} model turns")
    users = _collect(user_turns, lambda i: f"user turn {i}")
    models = _collect(model_turns, lambda i: f"model turn {i}")
    return users, models


def ers_turns(
    user_turns: Sequence[TurnInput],
    model_turns: Sequence[TurnInput],
    *,
    variant: str = "paper",
    dtw: str | Callable = "exact",
    params: ERSParams = DEFAULT_PARAMS,
    norm_bounds: Mapping[str, tuple[float, float]] | None = None,
) -> list[TurnScores]:
    """Single-turn ECS/EBS/ESS/ERS of each (user turn, model turn) pair.

    `variant="paper"` normalises over the pairs given together (see module doc);
    `dtw` is "exact" (default), "fastdtw" (approximate, as published) or a
    callable (a, b) -> float.

    >>> user = {"valence": [0.1, 0.2, 0.2], "arousal": [0.5, 0.6, 0.6], "dominance": [0.3, 0.3, 0.3]}
    >>> model = {"valence": [0.2, 0.2], "arousal": [0.5, 0.5], "dominance": [0.3, 0.4]}
    >>> s = ers_turns([user], [model], variant="reference")[0]
    >>> round(s.ecs, 6), s.ebs_active, s.extreme_dims, round(s.ebs, 6), round(s.ess, 6), round(s.ers, 6)
    (0.875, True, ('arousal',), 0.808333, 0.5, 0.773333)
    """
    # Same keyword arguments as ers_table, spelled out so they show in help() and the metric card.
    return _turn_objects(ers_table(user_turns, model_turns, variant=variant, dtw=dtw, params=params, norm_bounds=norm_bounds))


def ers_table(
    user_turns: Sequence[TurnInput],
    model_turns: Sequence[TurnInput],
    *,
    variant: str = "paper",
    dtw: str | Callable = "exact",
    params: ERSParams = DEFAULT_PARAMS,
    norm_bounds: Mapping[str, tuple[float, float]] | None = None,
) -> dict[str, np.ndarray]:
    """`ers_turns` as arrays (one entry per turn), for large batches.

    Keys: ecs, ess, ers (float arrays); ebs and ebs_dtw (numpy masked arrays,
    masked where EBS is inert, so `.mean()` averages active turns only);
    ebs_active (bool); extreme ((n, 3) bool, VAD order); ecs_dtw, ess_jumps (raw costs).

    >>> user = {"valence": [0.1, 0.1], "arousal": [0.2, 0.2], "dominance": [0.5, 0.5]}
    >>> t = ers_table([user, user], [user, user], variant="reference")
    >>> t["ers"].tolist(), t["ebs_active"].tolist(), int(t["ebs"].count())
    ([1.0, 1.0], [False, False], 0)
    """
    _check_variant(variant)
    users, models = _paired(user_turns, model_turns)
    if not users:
        raise ValueError("no turns to score")
    return _turn_arrays(users, models, variant=variant, dtw=dtw, params=params, norm_bounds=norm_bounds)


def ers_summary(turns: Sequence[TurnScores]) -> dict:
    """Corpus means: ECS, ESS, ERS over all turns; EBS over active turns only (None if none)."""
    if not turns:
        raise ValueError("no turn scores to summarise")
    ecs, ebs, n_active = _ecs_ebs_means(turns)
    return {
        "ecs": ecs,
        "ebs": ebs,
        "ess": float(np.mean([t.ess for t in turns])),
        "ers": float(np.mean([t.ers for t in turns])),
        "ebs_active_turns": n_active,
        "n_turns": len(turns),
    }


def _ecs_ebs_means(turns: Sequence[TurnScores]) -> tuple[float, float | None, int]:
    """Mean ECS over all turns, mean EBS over active turns only (None if none), and the active count."""
    active = [t.ebs for t in turns if t.ebs_active]
    return float(np.mean([t.ecs for t in turns])), (float(np.mean(active)) if active else None), len(active)


# ----------------------------------------------------------------- cross-turn scores


def ers_dialogues(
    dialogues: Sequence[tuple[Sequence[TurnInput], Sequence[TurnInput]]],
    *,
    variant: str = "paper",
    dtw: str | Callable = "exact",
    params: ERSParams = DEFAULT_PARAMS,
    norm_bounds: Mapping[str, tuple[float, float]] | None = None,
) -> list[DialogueScores]:
    """CT-ECS/CT-EBS/CT-ESS/CT-ERS of each dialogue, given as (user turns, model turns).

    CT-ESS compares consecutive MODEL turns; a dialogue with one model turn has
    no such pair: its CT-ESS cost is 0 (reference score 1.0), which we document
    as "no cross-turn change observed".
    """
    _check_variant(variant)
    if not dialogues:
        raise ValueError("no dialogues to score")
    user_inputs: list = []
    model_inputs: list = []
    spans: list[tuple[int, int]] = []
    for k, pair in enumerate(dialogues):
        if not isinstance(pair, Sequence) or len(pair) != 2:
            raise ValueError(f"dialogue {k}: expected (user_turns, model_turns), got {type(pair).__name__}")
        users_k, models_k = pair
        if len(users_k) != len(models_k):
            raise ValueError(f"dialogue {k}: {len(users_k)} user turns but {len(models_k)} model turns")
        if len(users_k) == 0:
            raise ValueError(f"dialogue {k}: no turns")
        spans.append((len(user_inputs), len(user_inputs) + len(users_k)))
        user_inputs += list(users_k)
        model_inputs += list(models_k)

    def name_of(role: str) -> Callable[[int], str]:
        def name(i: int) -> str:
            k = next(j for j, (a, b) in enumerate(spans) if a <= i < b)
            return f"dialogue {k}: {role} turn {i - spans[k][0]}"

        return name

    all_users = _collect(user_inputs, name_of("user"))
    all_models = _collect(model_inputs, name_of("model"))
    turn_scores = _turn_objects(_turn_arrays(all_users, all_models, variant=variant, dtw=dtw, params=params, norm_bounds=norm_bounds))
    # Cross-turn stability: DTW of each dimension between consecutive model turns.
    jobs_a, jobs_b, owners = [], [], []
    for k, (start, end) in enumerate(spans):
        for t in range(start, end - 1):
            for d in range(3):
                jobs_a.append(all_models[t][d])
                jobs_b.append(all_models[t + 1][d])
                owners.append((k, max(all_models[t].shape[1], all_models[t + 1].shape[1])))
    dist = _distances(jobs_a, jobs_b, dtw) if jobs_a else np.zeros(0)
    ct_cost = np.zeros(len(spans))  # paper: sum over pairs and dimensions
    ct_ref_terms: list[list[float]] = [[] for _ in spans]  # reference: per pair (V+A+D)/(6L)
    for j in range(0, len(dist), 3):
        k, length = owners[j]
        triple = float(dist[j] + dist[j + 1] + dist[j + 2])
        ct_cost[k] += triple
        ct_ref_terms[k].append(triple / (6.0 * length))
    K = params.scale
    if variant == "reference":
        ct_ess = np.array([1.0 - K * float(np.mean(t)) if t else 1.0 for t in ct_ref_terms])
    else:
        ct_ess = _minmax_scores(ct_cost, (norm_bounds or {}).get("ct_ess"), "CT-ESS")
    out = []
    for k, (start, end) in enumerate(spans):
        turns = turn_scores[start:end]
        ct_ecs, ct_ebs, _ = _ecs_ebs_means(turns)  # CT-ECS / CT-EBS: the turn means, as in ers_summary
        if variant == "reference":
            if ct_ebs is not None:
                w1, w2, w3 = params.ct_weights
                ct_ers = w1 * ct_ecs + w2 * ct_ebs + w3 * float(ct_ess[k])
            else:
                w1, w3 = params.ct_weights_inert
                ct_ers = w1 * ct_ecs + w3 * float(ct_ess[k])
        else:
            parts = [ct_ecs, float(ct_ess[k])] + ([ct_ebs] if ct_ebs is not None else [])
            ct_ers = float(np.mean(parts))
        out.append(DialogueScores(ct_ecs, ct_ebs, float(ct_ess[k]), float(ct_ers), ct_ebs is not None, list(turns)))
    return out


# ----------------------------------------------------------------- categorical and perceptual ERS

CATEGORICAL_LABELS: tuple[str, ...] = ("neutral", "happy", "angry", "sad")
# rows: user label, columns: model label (SPEC §7)
CATEGORICAL_MATRIX: dict[str, dict[str, float]] = {
    "neutral": {"neutral": 0.9, "happy": 0.6, "angry": 0.3, "sad": 0.4},
    "happy": {"neutral": 0.5, "happy": 1.0, "angry": 0.2, "sad": 0.2},
    "angry": {"neutral": 0.8, "happy": 0.1, "angry": 0.4, "sad": 0.5},
    "sad": {"neutral": 0.6, "happy": 0.2, "angry": 0.4, "sad": 0.9},
}


def _label(value: object, what: str) -> str:
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


__all__ = [
    "CATEGORICAL_MATRIX",
    "DIMENSIONS",
    "DialogueScores",
    "ERSParams",
    "TurnScores",
    "as_vad",
    "categorical_ers",
    "ers_dialogues",
    "ers_summary",
    "ers_table",
    "ers_turns",
    "perceptual_ers",
    "read_vad_csv",
]
