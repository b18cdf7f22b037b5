"""Selection: choose one rendering and plain gains per test pair so that no delivery feature carries the label (SPEC §9).

For each test pair the options are: a candidate rendering that passes the
contrast check (speech stage), an attenuation of the resonant or the
dissonant clip (0, 3 or 6 dB; a plain gain, never a pitch shift or time
stretch), and an attenuation of the catalyst's turn just before it (0, 3 or
6 dB). Each option fixes, per balanced feature (duration, level, mean pitch,
pitch range, delivery distance to the catalyst), whether the resonant clip is
the larger one. The choice minimises, per feature, the squared distance from
an even split over the whole set, of the two turns of a dialogue from
agreeing a quarter of the time each way (so no rule gains on trajectories),
plus a weaker term per valence x composite group and a small cost per dB of gain, by coordinate descent (each pair in
turn takes its best option given the others) until nothing improves.
Attenuation changes only the level of a clip (acoustics.ClipFeatures.with_gain),
so options are scored without rendering anything.
"""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from speecheq_dataset.acoustics import CONTRAST_V1
from speecheq_dataset.acoustics import ClipFeatures
from speecheq_dataset.acoustics import ContrastConstants
from speecheq_dataset.acoustics import contrast_score

from ..audit import BALANCED_FEATURES
from ..audit import AuditPair
from ..audit import high_larger

PAIR_GAINS: tuple[tuple[float, float], ...] = ((0.0, 0.0), (-3.0, 0.0), (-6.0, 0.0), (0.0, -3.0), (0.0, -6.0))
CATALYST_GAINS: tuple[float, ...] = (0.0, -3.0, -6.0)
GROUP_WEIGHT = 0.25
GAIN_COST = 0.02  # per dB: a gain is used only where it buys balance
CANDIDATE_COST = 0.05  # per later rendering: prefer the first that works
MAX_SWEEPS = 50


@dataclass(frozen=True)
class PairChoices:
    """The selectable options of one test pair."""

    key: tuple[str, int]  # (item_id, turn)
    group: tuple[str, str]
    candidates: list[tuple[ClipFeatures, ClipFeatures]]  # (high, low) per passing rendering
    candidate_ids: list[int]  # index of each in the speech record's candidate list
    catalyst: ClipFeatures


@dataclass(frozen=True)
class Choice:
    """The chosen option of a pair: which rendering, and the gains of the resonant, dissonant and catalyst clips."""

    candidate: int  # index into the speech record's candidate list
    gain_high: float
    gain_low: float
    gain_catalyst: float


def _options(pair: PairChoices, constants: ContrastConstants) -> list[tuple[Choice, np.ndarray, float, AuditPair]]:
    """(choice, balanced-feature outcomes, cost, audit pair) of every option that still passes the contrast check."""
    out = []
    for index, (high, low) in enumerate(pair.candidates):
        for gain_high, gain_low in PAIR_GAINS:
            h, lo = high.with_gain(gain_high), low.with_gain(gain_low)
            if not contrast_score(h, lo, constants).passed:
                continue
            for gain_c in CATALYST_GAINS:
                audit = AuditPair(pair.key[0], pair.key[1], h, lo, pair.catalyst.with_gain(gain_c), pair.group)
                vector = np.array([high_larger(audit, f) for f in BALANCED_FEATURES])
                cost = GAIN_COST * (abs(gain_high) + abs(gain_low) + abs(gain_c)) + CANDIDATE_COST * index
                out.append((Choice(pair.candidate_ids[index], gain_high, gain_low, gain_c), vector, cost, audit))
    return out


def select(pairs: list[PairChoices], *, seed: int = 0, constants: ContrastConstants = CONTRAST_V1) -> dict[tuple[str, int], tuple[Choice, AuditPair]]:
    """The balanced choice for every pair (see the module docstring); pairs without a passing option are left out."""
    options = {p.key: _options(p, constants) for p in pairs}
    usable = [p for p in pairs if options[p.key]]
    if not usable:
        return {}
    keys = {p.key for p in usable}
    partner = {p.key: (p.key[0], 10 - p.key[1]) for p in usable if (p.key[0], 10 - p.key[1]) in keys}  # turn 4 <-> turn 6
    dialogues = len(partner) // 2
    groups = sorted({p.group for p in usable})
    group_of = {p.key: groups.index(p.group) for p in usable}
    group_sizes = np.bincount([group_of[p.key] for p in usable], minlength=len(groups)).astype(float)
    n = len(usable)
    chosen = {p.key: min(range(len(options[p.key])), key=lambda i: options[p.key][i][2]) for p in usable}  # cheapest first
    vec = {key: options[key][chosen[key]][1] for key in keys}
    total = sum(vec.values())
    by_group = np.zeros((len(groups), len(BALANCED_FEATURES)))
    for key in keys:
        by_group[group_of[key]] += vec[key]
    # Trajectories: per feature, dialogues whose two pairs both have the resonant clip larger (both11) / both smaller (both00).
    both11 = sum(vec[k] * vec[partner[k]] for k in partner if k[1] == 4) if dialogues else np.zeros(len(BALANCED_FEATURES))
    both00 = sum((1 - vec[k]) * (1 - vec[partner[k]]) for k in partner if k[1] == 4) if dialogues else np.zeros(len(BALANCED_FEATURES))

    def objective(t: np.ndarray, g: np.ndarray, b11: np.ndarray, b00: np.ndarray) -> float:
        value = np.sum((t - n / 2) ** 2) + GROUP_WEIGHT * np.sum((g - group_sizes[:, None] / 2) ** 2)
        if dialogues:
            value += np.sum((b11 - dialogues / 4) ** 2) + np.sum((b00 - dialogues / 4) ** 2)
        return float(value)

    order = list(usable)
    random.Random(seed).shuffle(order)
    for _ in range(MAX_SWEEPS):
        improved = False
        for p in order:
            key, g = p.key, group_of[p.key]
            old = vec[key]
            mate = vec[partner[key]] if key in partner else None
            best_i, best_value = chosen[key], None
            for i, (_, v, cost, _) in enumerate(options[key]):
                groups_new = by_group.copy()
                groups_new[g] += v - old
                b11, b00 = both11, both00
                if mate is not None:
                    b11 = both11 + (v - old) * mate
                    b00 = both00 + (old - v) * (1 - mate)
                value = objective(total + v - old, groups_new, b11, b00) + cost
                if best_value is None or value < best_value - 1e-9:
                    best_i, best_value = i, value
            if best_i != chosen[key]:
                v = options[key][best_i][1]
                total = total + v - old
                by_group[g] += v - old
                if mate is not None:
                    both11 = both11 + (v - old) * mate
                    both00 = both00 + (old - v) * (1 - mate)
                chosen[key], vec[key] = best_i, v
                improved = True
        if not improved:
            break
    return {p.key: (options[p.key][chosen[p.key]][0], options[p.key][chosen[p.key]][3]) for p in usable}


def pair_choices_from_speech(item_id: str, group: tuple[str, str], output: dict) -> list[PairChoices]:
    """The PairChoices of one item's speech record (passing candidates only)."""
    out = []
    for turn in (4, 6):
        pair = output["pairs"][str(turn)]
        catalyst = ClipFeatures.from_dict(output["clips"][str(turn - 1)]["features"])
        passing = [(i, c) for i, c in enumerate(pair["candidates"]) if c["passed"]]
        out.append(PairChoices((item_id, turn), group,
                               [(ClipFeatures.from_dict(c["high"]["features"]), ClipFeatures.from_dict(c["low"]["features"])) for _, c in passing],
                               [i for i, _ in passing], catalyst))
    return out


def group_balance(selected: dict[tuple[str, int], tuple[Choice, AuditPair]]) -> dict[tuple[str, str], dict[str, float]]:
    """Share of pairs with the resonant clip larger, per group and balanced feature (for the report)."""
    sums: dict[tuple[str, str], list[np.ndarray]] = defaultdict(list)
    for _, audit in selected.values():
        sums[audit.group].append(np.array([high_larger(audit, f) for f in BALANCED_FEATURES]))
    return {g: dict(zip(BALANCED_FEATURES, np.mean(v, axis=0).round(3).tolist())) for g, v in sorted(sums.items())}
