"""The shortcut audit (SPEC §9): how often does one delivery feature alone pick the resonant clip?

For every test pair (turns 4 and 6) each rule of
`speecheq_dataset.delivery_rules` (the ones the `prosody` baseline answers with)
compares the two same-text clips by one feature and picks one. `pair_accuracy` is the share
of pairs where it picks the resonant clip, `traj_accuracy` the share of
dialogues where it picks both; an undecidable pair (equal values, an unvoiced
clip) counts one half, the expectation of a coin flip. On the authors' data
"slower" is right on ~80 % of v1 pairs; a balanced set keeps every rule near 50 %.

`speecheq audit DATA --report FILE.csv` audits a raw folder, an export or a Hub id.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from speecheq_dataset.acoustics import ClipFeatures
from speecheq_dataset.delivery_rules import RULES
from speecheq_dataset.delivery_rules import RULES_BY_FEATURE
from speecheq_dataset.delivery_rules import first_larger
from speecheq_dataset.delivery_rules import picks_first
from speecheq_dataset.files import exit_status

from .tables import check_replaceable
from .tables import write_csv

logger = logging.getLogger(__name__)

# Every feature is balanced: a rule's mirror scores 1 - it, so one side per feature suffices (SPEC §9).
BALANCED_FEATURES: tuple[str, ...] = tuple(RULES_BY_FEATURE)
DEFAULT_BOUND = 0.60


@dataclass(frozen=True)
class AuditPair:
    """One test pair: its dialogue, turn, the two clips' features and the catalyst turn before it."""

    dialogue_id: str
    turn: int
    high: ClipFeatures
    low: ClipFeatures
    catalyst: ClipFeatures | None = None
    group: tuple[str, ...] = ()


@dataclass(frozen=True)
class AuditRow:
    rule: str
    pair_accuracy: float
    traj_accuracy: float
    n_pairs: int
    n_dialogues: int
    undecided: int


def high_larger(pair: AuditPair, feature: str) -> float:
    """1 if the resonant clip has the larger value, 0 if the smaller, 0.5 when undecidable."""
    return first_larger(pair.high, pair.low, feature, pair.catalyst)


def rule_outcome(rule: str, pair: AuditPair) -> float:
    """1 if the rule picks the resonant clip, 0 if not, 0.5 when it cannot decide."""
    return picks_first(rule, pair.high, pair.low, pair.catalyst)


def audit_table(pairs: list[AuditPair]) -> list[AuditRow]:
    """One row per rule over the pairs (trajectories: dialogues with both test pairs)."""
    if not pairs:
        raise ValueError("shortcut audit: no test pairs")
    rows = []
    for rule in RULES:
        outcomes = [rule_outcome(rule, p) for p in pairs]
        by_dialogue: dict[str, list[float]] = defaultdict(list)
        for pair, outcome in zip(pairs, outcomes):
            by_dialogue[pair.dialogue_id].append(outcome)
        trajectories = [o[0] * o[1] for o in by_dialogue.values() if len(o) == 2]
        rows.append(AuditRow(rule, sum(outcomes) / len(outcomes), sum(trajectories) / len(trajectories) if trajectories else float("nan"),
                             len(pairs), len(trajectories), sum(o == 0.5 for o in outcomes)))
    return rows


def worst_rule(rows: list[AuditRow]) -> AuditRow:
    return max(rows, key=lambda r: r.pair_accuracy)


def passes_bound(rows: list[AuditRow], bound: float = DEFAULT_BOUND) -> bool:
    """True when no single-feature rule is right on more than `bound` of the pairs."""
    return worst_rule(rows).pair_accuracy <= bound


def audit_markdown(rows: list[AuditRow], *, title: str = "", reference: list[AuditRow] | None = None, bound: float = DEFAULT_BOUND) -> str:
    """The audit as a Markdown table (with a reference column, e.g. the authors' data, when given)."""
    ref = {r.rule: r for r in reference or []}
    head = "| rule | pair accuracy | trajectory accuracy | n pairs |" + (" reference pairs | reference trajectories |" if ref else "")
    sep = "|---|---:|---:|---:|" + ("---:|---:|" if ref else "")
    lines = ([f"**{title}**", ""] if title else []) + [head, sep]
    for r in rows:
        line = f"| {r.rule} | {r.pair_accuracy:.3f} | {r.traj_accuracy:.3f} | {r.n_pairs} |"
        if ref:
            other = ref.get(r.rule)
            line += f" {other.pair_accuracy:.3f} | {other.traj_accuracy:.3f} |" if other else " | |"
        lines.append(line)
    worst = worst_rule(rows)
    verdict = "meets" if worst.pair_accuracy <= bound else "EXCEEDS"
    lines += ["", f"Highest single-feature pair accuracy: {worst.rule} {worst.pair_accuracy:.3f} ({verdict} the {bound:.0%} bound; "
                  f"chance 0.5 per pair, 0.25 per trajectory)."]
    return "\n".join(lines)


AUDIT_COLUMNS = ["rule", "pair_accuracy", "traj_accuracy", "n_pairs", "n_dialogues", "undecided"]


def write_audit_csv(rows: list[AuditRow], path: Path | str) -> None:
    write_csv(path, AUDIT_COLUMNS,
              ([r.rule, f"{r.pair_accuracy:.4f}", f"{r.traj_accuracy:.4f}", r.n_pairs, r.n_dialogues, r.undecided] for r in rows))


# -- reading pairs from data ---------------------------------------------------------------------

CLIP_STEMS = {"catalyst3": "03", "high4": "04", "low4": "05", "catalyst5": "06", "high6": "07", "low6": "08"}


def raw_dialogue_clips(raw_dir: Path | str) -> list[tuple[str, tuple[str, str], dict[str, Path]]]:
    """(dataset_id, (subscale, valence), {clip stem: path}) for every valid dialogue folder of a raw layout (no decoding)."""
    from speecheq_dataset.raw import RawDialogueError
    from speecheq_dataset.raw import find_dialogue_folders
    from speecheq_dataset.raw import read_dialogue

    out = []
    for folder in find_dialogue_folders(raw_dir):
        try:
            dialogue = read_dialogue(folder, decode=False)
        except RawDialogueError as exc:
            logger.warning("audit: skipped %s", exc)
            continue
        paths = {path.stem: path for path in dialogue.clip_paths}
        out.append((dialogue.id, (dialogue.fields["subscale"], dialogue.fields["scenario_valence"] or ""), paths))
    return out


def load_pairs(data: str | Path, cache=None) -> list[AuditPair]:
    """The test pairs of a raw folder, an exported folder or a Hub id, with features (through a FeatureCache)."""
    from .features import FeatureCache

    cache = cache if cache is not None else FeatureCache()  # an empty cache is falsy (it has a length)
    path = Path(data)
    from speecheq_dataset.raw import looks_like_raw_dir

    pairs = []
    if path.is_dir() and looks_like_raw_dir(path):
        from tqdm.auto import tqdm

        for dataset_id, group, paths in tqdm(raw_dialogue_clips(path), desc="Measuring clips", unit="dialogue"):
            feats = {stem: cache.get(paths[stem].read_bytes(), name=str(paths[stem])) for stem in CLIP_STEMS.values()}
            pairs += [AuditPair(dataset_id, 4, feats["04"], feats["05"], feats["03"], group),
                      AuditPair(dataset_id, 6, feats["07"], feats["08"], feats["06"], group)]
        return pairs
    import datasets

    from speecheq_dataset.loading import load_speecheq

    ds = load_speecheq(str(data))
    columns = ["turn3_audio", "turn4_audio_high", "turn4_audio_low", "turn5_audio", "turn6_audio_high", "turn6_audio_low"]
    for column in columns:
        ds = ds.cast_column(column, datasets.Audio(decode=False))
    for row in ds.select_columns(["id", "subscale", "scenario_valence", *columns]):
        feats = {c: cache.get(row[c]["bytes"], name=f"{row['id']}/{c}") for c in columns}
        group = (row["subscale"], row["scenario_valence"] or "")
        pairs += [AuditPair(row["id"], 4, feats["turn4_audio_high"], feats["turn4_audio_low"], feats["turn3_audio"], group),
                  AuditPair(row["id"], 6, feats["turn6_audio_high"], feats["turn6_audio_low"], feats["turn5_audio"], group)]
    return pairs


def main(argv: list[str] | None = None) -> int:
    """`speecheq audit DATA --report FILE.csv [--bound 0.6] [--fail-over-bound]`."""
    parser = argparse.ArgumentParser(prog="speecheq audit", description="Shortcut audit: accuracy of single-feature delivery rules.")
    parser.add_argument("data", metavar="DATA", help="raw folder, exported folder or Hub id")
    parser.add_argument("--report", required=True, metavar="FILE.csv", help="CSV: rule, pair_accuracy, traj_accuracy, n_pairs, ...")
    parser.add_argument("--bound", type=float, default=DEFAULT_BOUND, help="highest allowed pair accuracy of any rule (default 0.6)")
    parser.add_argument("--fail-over-bound", action="store_true", help="exit 1 when a rule exceeds the bound")
    parser.add_argument("--cache", default=None, help="feature cache file (default: beside the embedded sample's cache)")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    from .features import FeatureCache
    from .features import default_cache_path

    try:
        check_replaceable(args.report, AUDIT_COLUMNS)  # before the work, not after it
        rows = audit_table(load_pairs(args.data, FeatureCache(args.cache or default_cache_path())))
        write_audit_csv(rows, args.report)
    except (OSError, ValueError) as exc:
        print(f"speecheq audit: error: {exc}", file=sys.stderr)
        return exit_status(exc)
    print(audit_markdown(rows, bound=args.bound))
    print(f"\nwritten: {args.report}")
    return 1 if args.fail_over_bound and not passes_bound(rows, args.bound) else 0
