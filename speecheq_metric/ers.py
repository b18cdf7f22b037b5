"""Continuous EMO-Reasoning scores (SPEC §7): ECS, EBS, ESS, ERS of a turn and CT-* of a dialogue.

Inputs are per-second VAD turns (vad.py); the categorical and perceptual
scores are in ers_discrete.py. Read this file against SPEC §7, top to bottom:

- which dimensions the user is extreme on (`extreme_flags`);
- the raw costs of a turn (`_turn_costs`): ECS cost DTW(V_m, V_u) + DTW(A_m, A_u),
  EBS cost Σ over extreme E of DTW(E_u + δ_E, E_m), ESS cost the model's
  frame-to-frame jumps above δ = 0.04;
- costs to scores, in two variants:
  - `paper` (`_paper_scores`): min-max normalisation of −cost over the turns (or
    dialogues) scored together, so a score is relative to its batch unless
    `norm_bounds` freezes the range; ERS = mean of ECS, ESS and the active EBS;
  - `reference` (`_reference_scores`): the published evaluator's fixed scaling
    (K = 5, not clipped) and weighted ERS, to compare with published numbers;
- the cross-turn scores (`ers_dialogues`): CT-ECS and CT-EBS are turn means,
  CT-ESS compares consecutive model turns, CT-ERS combines them.

EBS is "inert" for a turn in which the user is not extreme on any dimension;
an inert EBS is `None` with `ebs_active=False`, never a number, so it cannot
be mistaken for a perfect 1.0 (the published evaluator writes 1.0 there).

DTW is exact by default. `dtw="fastdtw"` reproduces the published evaluator,
whose approximation is not symmetric, so every DTW is called with the
published argument order: (user side, model side) for ECS and EBS, (earlier,
later model turn) for CT-ESS. A callable backend is called the same way.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np

from .dtw import dtw_many_checked
from .dtw import fastdtw_distance
from .kernels import turn_costs_kernel
from .vad import DIMENSIONS
from .vad import TurnBatch
from .vad import TurnInput
from .vad import collect_turns
from .vad import paired_turns

VARIANTS: tuple[str, ...] = ("paper", "reference")
_V, _A, _D = 0, 1, 2


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


# ----------------------------------------------------------------- the user's state


def extreme_flags(users: TurnBatch, params: ERSParams = DEFAULT_PARAMS) -> np.ndarray:
    """(turns, 3) bool in VAD order: is the user's mean over the turn beyond the dimension's threshold?

    SPEC §7: valence < −0.07, arousal > 0.345, dominance < 0.210. The mean is
    compared with the threshold exactly, as real numbers, so neither the
    summation order nor rounding can tip a mean that lies on a threshold (a
    constant series at a threshold is never extreme) and every DTW backend
    sees the same flags.
    """
    n = len(users)
    if n == 0:
        return np.zeros((0, 3), dtype=np.bool_)
    limits = np.array([params.valence_extreme_below, params.arousal_extreme_above, params.dominance_extreme_below])
    seconds = users.lengths
    starts = users.offsets[:-1]
    # Σ x − T·limit has the sign of (mean − limit). A float sum has the right sign
    # unless it lies within its rounding error bound (generous here) of zero.
    excess = np.add.reduceat(users.flat, starts, axis=1) - seconds * limits[:, None]
    magnitude = np.add.reduceat(np.abs(users.flat), starts, axis=1) + seconds * np.abs(limits)[:, None]
    unsure = np.abs(excess) <= 4.0 * (seconds + 2.0) * np.finfo(np.float64).eps * magnitude
    for d, i in zip(*np.nonzero(unsure)):
        series = users[i][d]
        # fsum rounds the exact Σ x − T·limit once, which keeps its sign (and zero)
        excess[d, i] = math.fsum(np.concatenate([series, np.full(series.size, -limits[d])]))
    return np.stack([excess[_V] < 0.0, excess[_A] > 0.0, excess[_D] < 0.0], axis=1)


# ----------------------------------------------------------------- raw costs of a turn


def _distances(jobs_a: list[np.ndarray], jobs_b: list[np.ndarray], dtw: str | Callable) -> np.ndarray:
    """DTW(jobs_a[p], jobs_b[p]) for every p with the chosen backend, arguments in that order."""
    if dtw == "exact":
        return dtw_many_checked(jobs_a, jobs_b)
    if dtw == "fastdtw":
        return np.array([fastdtw_distance(a, b) for a, b in zip(jobs_a, jobs_b)], dtype=np.float64)
    if callable(dtw):
        return np.array([float(dtw(a, b)) for a, b in zip(jobs_a, jobs_b)], dtype=np.float64)
    raise ValueError(f"dtw must be 'exact', 'fastdtw' or a callable, got {dtw!r}")


def _turn_costs(users: TurnBatch, models: TurnBatch, params: ERSParams, dtw: str | Callable) -> dict[str, np.ndarray]:
    """Raw per-turn costs and the extreme flags; the exact backend runs in one compiled call, others pair by pair.

    dtw_v, dtw_a: DTW of valence and arousal between user and model (ECS cost);
    ebs_dtw: Σ over extreme E of DTW(E_u + δ_E, E_m); jump_sum, jump_n: sum and
    count of the model's frame-to-frame changes above the jump threshold (V, A, D pooled).
    """
    n = len(users)
    deltas = np.array(params.deltas)
    out = {
        "dtw_v": np.empty(n),
        "dtw_a": np.empty(n),
        "ebs_dtw": np.empty(n),
        "extreme": extreme_flags(users, params),
        "jump_sum": np.empty(n),
        "jump_n": np.empty(n, dtype=np.int64),
    }
    if dtw == "exact":  # exact DTW is symmetric: the kernel's argument order does not matter
        turn_costs_kernel(users.flat, users.offsets, models.flat, models.offsets, out["extreme"], deltas, float(params.jump_threshold),
                          out["dtw_v"], out["dtw_a"], out["ebs_dtw"], out["jump_sum"], out["jump_n"])
        return out
    # Other backends: the same quantities, DTW pair by pair, (user side, model side) as published.
    jobs_a: list[np.ndarray] = []
    jobs_b: list[np.ndarray] = []
    for i in range(n):
        u, m = users[i], models[i]
        jobs_a += [u[_V], u[_A]]
        jobs_b += [m[_V], m[_A]]
        for d in np.flatnonzero(out["extreme"][i]):
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


# ----------------------------------------------------------------- costs to scores


def _reference_scores(c: dict[str, np.ndarray], len_u: np.ndarray, len_m: np.ndarray, active: np.ndarray, params: ERSParams) -> tuple:
    """ECS, EBS (read where active), ESS, ERS with the published evaluator's fixed scaling K (not clipped)."""
    n = len(len_u)
    K = params.scale
    n_extreme = c["extreme"].sum(axis=1)
    # ECS = 1 − K·(DTW_V + DTW_A) / (4·L), L = max(len user, len model)
    ecs = 1.0 - K * (c["dtw_v"] + c["dtw_a"]) / (4.0 * np.maximum(len_u, len_m))
    # EBS = 1 − (K / n_extreme)·Σ_extreme DTW / L_user
    ebs = np.zeros(n)
    ebs[active] = 1.0 - K * c["ebs_dtw"][active] / (n_extreme[active] * len_u[active])
    # ESS = 1 − K·mean of the jumps above the threshold (1.0 when there is none or T < 2)
    mean_jump = np.divide(c["jump_sum"], c["jump_n"], out=np.zeros(n), where=c["jump_n"] > 0)
    ess = 1.0 - K * mean_jump
    # ERS = 0.4·ECS + 0.4·EBS + 0.2·ESS when EBS is active, else 0.7·ECS + 0.3·ESS
    w_ecs, w_ebs, w_ess = params.ers_weights
    i_ecs, i_ess = params.ers_weights_inert
    ers = np.where(active, w_ecs * ecs + w_ebs * ebs + w_ess * ess, i_ecs * ecs + i_ess * ess)
    return ecs, ebs, ess, ers


def _paper_scores(c: dict[str, np.ndarray], active: np.ndarray, norm_bounds: Mapping[str, tuple[float, float]] | None) -> tuple:
    """ECS, EBS (read where active), ESS, ERS of the paper: norm(−cost) over the batch, ERS the mean of the parts."""
    bounds = norm_bounds or {}
    ecs = _minmax_scores(c["dtw_v"] + c["dtw_a"], bounds.get("ecs"), "ECS")
    ess = _minmax_scores(c["jump_sum"], bounds.get("ess"), "ESS")
    ebs = np.zeros(len(ecs))
    ebs[active] = _minmax_scores(c["ebs_dtw"][active], bounds.get("ebs"), "EBS")  # over active turns only
    ers = np.where(active, (ecs + ebs + ess) / 3.0, (ecs + ess) / 2.0)
    return ecs, ebs, ess, ers


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
            stacklevel=4,
        )
        return np.ones_like(costs)
    return (hi - costs) / (hi - lo)


def _check_variant(variant: str) -> None:
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")


def _turn_arrays(
    users: TurnBatch,
    models: TurnBatch,
    *,
    variant: str,
    dtw: str | Callable,
    params: ERSParams,
    norm_bounds: Mapping[str, tuple[float, float]] | None,
) -> dict[str, np.ndarray]:
    """Scores of aligned batches of validated user and model turns, as arrays (the single scoring path)."""
    c = _turn_costs(users, models, params, dtw)
    active = c["extreme"].any(axis=1)
    if variant == "reference":
        ecs, ebs, ess, ers = _reference_scores(c, users.lengths, models.lengths, active, params)
    else:
        ecs, ebs, ess, ers = _paper_scores(c, active, norm_bounds)
    ebs[~active] = np.nan  # under the mask only: a careless `.data.mean()` turns loud (NaN), never a fake 1.0
    return {
        "ecs": ecs,
        "ebs": np.ma.masked_array(ebs, mask=~active),
        "ess": ess,
        "ers": ers,
        "ebs_active": active,
        "extreme": c["extreme"],
        "ecs_dtw": c["dtw_v"] + c["dtw_a"],
        "ebs_dtw": np.ma.masked_array(c["ebs_dtw"], mask=~active),
        "ess_jumps": c["jump_sum"],
    }


def _turn_objects(a: dict[str, np.ndarray]) -> list[TurnScores]:
    """One TurnScores per turn from the arrays of `_turn_arrays`."""
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


# ----------------------------------------------------------------- single-turn scores


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
    callable (a, b) -> float, called as in the module doc.

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
    users, models = paired_turns(user_turns, model_turns)
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

    all_users = collect_turns(user_inputs, name_of("user"))
    all_models = collect_turns(model_inputs, name_of("model"))
    turn_scores = _turn_objects(_turn_arrays(all_users, all_models, variant=variant, dtw=dtw, params=params, norm_bounds=norm_bounds))
    ct_ess = _ct_ess(all_models, spans, variant=variant, dtw=dtw, params=params, norm_bounds=norm_bounds)
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


def _ct_ess(
    models: TurnBatch,
    spans: list[tuple[int, int]],
    *,
    variant: str,
    dtw: str | Callable,
    params: ERSParams,
    norm_bounds: Mapping[str, tuple[float, float]] | None,
) -> np.ndarray:
    """CT-ESS of each dialogue (model turns spans[k]) from DTW(E_n, E_n+1) of consecutive model turns, per dimension.

    paper: norm(−Σ_n Σ_E DTW(E_n, E_n+1)) over the dialogues; reference:
    1 − K·mean over consecutive pairs of (DTW_V + DTW_A + DTW_D) / (6·L), L the longer turn.
    """
    jobs_a, jobs_b, owners = [], [], []
    for k, (start, end) in enumerate(spans):
        for t in range(start, end - 1):
            for d in range(3):
                jobs_a.append(models[t][d])
                jobs_b.append(models[t + 1][d])
                owners.append((k, max(models[t].shape[1], models[t + 1].shape[1])))
    dist = _distances(jobs_a, jobs_b, dtw) if jobs_a else np.zeros(0)
    ct_cost = np.zeros(len(spans))  # paper: sum over pairs and dimensions
    ct_ref_terms: list[list[float]] = [[] for _ in spans]  # reference: per pair (V+A+D)/(6L)
    for j in range(0, len(dist), 3):
        k, length = owners[j]
        triple = float(dist[j] + dist[j + 1] + dist[j + 2])
        ct_cost[k] += triple
        ct_ref_terms[k].append(triple / (6.0 * length))
    if variant == "reference":
        return np.array([1.0 - params.scale * float(np.mean(t)) if t else 1.0 for t in ct_ref_terms])
    return _minmax_scores(ct_cost, (norm_bounds or {}).get("ct_ess"), "CT-ESS")


__all__ = [
    "DialogueScores",
    "ERSParams",
    "TurnScores",
    "ers_dialogues",
    "ers_summary",
    "ers_table",
    "ers_turns",
]
