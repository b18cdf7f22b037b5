"""From finished dialogue records to the numbers of results.json (pure functions).

Choices are folded into a canonical frame before voting and scoring: 1 = the
resonant (high-EQ) clip was picked, 2 = the dissonant one, 0 = no valid answer.
Option positions differ between runs and orders, so only this frame can be
voted on; the reference of every decision is then 1.
"""

from __future__ import annotations

from collections import Counter

from eval_scripts.records import DialogueRecord
from eval_scripts.store import iter_rounds
from speecheq_dataset.http_api import cost_usd
from speecheq_metric import forced_choice_metrics
from speecheq_metric import majority_vote

CANONICAL = {"high": 1, "low": 2, None: 0}
FLAT_KEYS = ("acc_turn4", "acc_turn6", "acc_all", "acc_traj", "invalid_rate", "n_dialogues")


def canonical(level: str | None) -> int:
    """1 for a pick of the resonant clip, 2 for the dissonant one, 0 for none."""
    return CANONICAL[level]


def voted_level(vote: int) -> str | None:
    """The level a canonical vote stands for: "high", "low", or None for no majority."""
    return {1: "high", 2: "low"}.get(vote)


def dialogue_prediction(record: DialogueRecord, mode: str, order: str | None = None) -> list[int]:
    """[turn4, turn6] majority votes of one dialogue over its runs (of one order, when given)."""
    votes = []
    for round_ in (1, 2):
        levels = [
            rnd.selected_level
            for traj in record.trajectories
            if traj.mode == mode and (order is None or traj.order == order)
            for rnd in traj.rounds
            if rnd.round == round_
        ]
        if not levels:
            raise ValueError(f"dialogue {record.id}: no round-{round_} answers in mode {mode!r}, order {order!r}")
        votes.append(majority_vote([canonical(level) for level in levels]))
    return votes


def metrics_for(records: list[DialogueRecord], mode: str, order: str | None = None, *, n_bootstrap: int, seed: int) -> dict:
    """forced_choice_metrics over the voted predictions of finished dialogues."""
    predictions = [dialogue_prediction(r, mode, order) for r in records]
    references = [[1, 1] for _ in records]
    subscales = [r.subscale for r in records]
    return forced_choice_metrics(predictions, references, subscales, n_bootstrap=n_bootstrap, seed=seed)


def position_bias(records: list[DialogueRecord], mode: str) -> dict:
    """Share of paired decisions (same dialogue, round, run; both orders) answered with the same position.

    A model that judges the clips picks different positions when the order is
    flipped; one that follows the slot picks the same position. 0 = never, 1 = always.
    Pairs with an invalid answer on either side are left out and counted.
    """
    same = total = skipped = 0
    for record in records:
        by_key: dict[tuple[int, int], dict[str, int | None]] = {}
        for traj in record.trajectories:
            if traj.mode != mode or traj.order not in ("high_first", "low_first"):
                continue
            for rnd in traj.rounds:
                by_key.setdefault((traj.run, rnd.round), {})[traj.order] = rnd.choice
        for pair in by_key.values():
            if len(pair) != 2:
                continue
            a, b = pair["high_first"], pair["low_first"]
            if a not in (1, 2) or b not in (1, 2):
                skipped += 1
                continue
            total += 1
            same += int(a == b)
    return {"position_bias_rate": same / total if total else None, "pairs": total, "pairs_with_invalid": skipped}


def deployment(records: list[DialogueRecord], price_in: float | None = None, price_out: float | None = None) -> dict:
    """Mean latency per query, tokens/s, queries/s, and cost per 100 queries (USD; prices per million tokens).

    A query costs what its adapter reported, else its tokens at the run's prices; one unpriced query leaves the total unknown.
    """
    rounds = [rnd for _, rnd in iter_rounds(records)]
    if not rounds:
        return {"queries": 0, "mean_latency_s": None, "tokens_per_s": None, "queries_per_s": None, "cost_per_100_queries": None}
    compute = sum(rnd.compute_s or 0.0 for rnd in rounds)
    out_tokens = [rnd.output_tokens for rnd in rounds]
    in_tokens = [rnd.input_tokens for rnd in rounds]
    total_out = sum(t for t in out_tokens if t)
    costs = [rnd.cost_usd if rnd.cost_usd is not None else cost_usd(rnd.input_tokens, rnd.output_tokens, price_in, price_out)
             for rnd in rounds]
    cost = sum(costs) if all(c is not None for c in costs) else None
    return {
        "queries": len(rounds),
        "mean_latency_s": sum(rnd.latency_s or 0.0 for rnd in rounds) / len(rounds),
        "tokens_per_s": total_out / compute if compute > 0 and total_out else None,
        "queries_per_s": len(rounds) / compute if compute > 0 else None,
        "input_tokens": sum(t for t in in_tokens if t) if any(t is not None for t in in_tokens) else None,
        "output_tokens": total_out if any(t is not None for t in out_tokens) else None,
        "cost_per_100_queries": 100.0 * cost / len(rounds) if cost is not None else None,
    }


def parse_summary(records: list[DialogueRecord]) -> dict[str, int]:
    """How often each parse status occurred, over every query of finished dialogues."""
    counts = Counter(rnd.parse_status for _, rnd in iter_rounds(records))
    return dict(sorted(counts.items()))


def summarise(
    records: list[DialogueRecord],
    *,
    modes: list[str],
    orders: str,
    seed: int,
    n_bootstrap: int = 1000,
    price_in: float | None = None,
    price_out: float | None = None,
) -> dict:
    """The metric part of results.json from finished (status ok) records, first mode primary."""
    ok = [r for r in records if r.ok]
    out: dict = {"n_dialogues_ok": len(ok), "n_dialogues_failed": len(records) - len(ok)}
    if not ok:  # every dialogue failed: the same keys, nothing to score
        out.update(metrics=None, per_subscale={}, per_composite={}, parse_status={}, deployment=deployment([], price_in, price_out))
        return out
    by_mode = {}
    for mode in modes:
        full = metrics_for(ok, mode, n_bootstrap=n_bootstrap, seed=seed)
        by_mode[mode] = full
    primary = dict(by_mode[modes[0]])
    out["per_subscale"] = primary.pop("per_subscale", {})
    out["per_composite"] = primary.pop("per_composite", {})
    out["metrics"] = primary
    if len(modes) > 1:
        out["by_choice_mode"] = {m: {k: v for k, v in by_mode[m].items() if k not in ("per_subscale", "per_composite")} for m in modes}
    if orders == "both":
        out["by_order"] = {}
        for order in ("high_first", "low_first"):
            m = metrics_for(ok, modes[0], order, n_bootstrap=0, seed=seed)
            out["by_order"][order] = {k: m[k] for k in FLAT_KEYS}
        bias = position_bias(ok, modes[0])
        out["position_bias_rate"] = bias["position_bias_rate"]
        out["position_bias"] = bias
    out["parse_status"] = parse_summary(ok)
    out["deployment"] = deployment(ok, price_in, price_out)
    return out
