"""`speecheq validate RAW_DIR --report FILE.csv`: contrast_v1 of every test pair (SPEC §4), and optionally the oracle check.

The CSV has one row per test pair: dataset_id, subscale, turn, contrast_score,
passed, the raw gap of each feature and the points it earned. The printout
gives the score distribution and lists the pairs below the pass mark.
"""

from __future__ import annotations

import argparse
import logging
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from speecheq_dataset.acoustics import CONTRAST_V1
from speecheq_dataset.acoustics import ContrastConstants
from speecheq_dataset.acoustics import ContrastResult
from speecheq_dataset.acoustics import contrast_score
from speecheq_dataset.files import exit_status

from .audit import AuditPair
from .tables import check_replaceable
from .tables import write_csv

logger = logging.getLogger(__name__)

GAP_NAMES: tuple[str, ...] = tuple(CONTRAST_V1.weights)


@dataclass(frozen=True)
class PairContrast:
    dataset_id: str
    subscale: str
    turn: int
    result: ContrastResult


def pair_contrasts(pairs: list[AuditPair], constants: ContrastConstants = CONTRAST_V1) -> list[PairContrast]:
    return [PairContrast(p.dialogue_id, p.group[0] if p.group else "", p.turn, contrast_score(p.high, p.low, constants)) for p in pairs]


def distribution(scores: list[float], pass_score: float = CONTRAST_V1.pass_score) -> dict:
    """Summary of a contrast-score distribution: quantiles, pass rate and a histogram over whole points."""
    values = np.asarray(scores, dtype=float)
    if values.size == 0:
        raise ValueError("no contrast scores")
    edges = np.arange(0, 9)
    counts, _ = np.histogram(values, bins=edges)
    return {
        "n": int(values.size), "mean": float(values.mean()), "sd": float(values.std(ddof=1)) if values.size > 1 else 0.0,
        "min": float(values.min()), "p10": float(np.percentile(values, 10)), "median": float(np.median(values)),
        "p90": float(np.percentile(values, 90)), "max": float(values.max()), "pass_rate": float(np.mean(values >= pass_score)),
        "histogram": {f"{lo}-{lo + 1}": int(c) for lo, c in zip(edges[:-1], counts)},
    }


def distribution_text(stats: dict, version: str = CONTRAST_V1.version) -> str:
    lines = [f"{version} over {stats['n']} test pairs: mean {stats['mean']:.2f} (sd {stats['sd']:.2f}), min {stats['min']:.2f}, "
             f"p10 {stats['p10']:.2f}, median {stats['median']:.2f}, p90 {stats['p90']:.2f}, max {stats['max']:.2f}; "
             f"pass (>= {CONTRAST_V1.pass_score:g}) {stats['pass_rate']:.1%}",
             "histogram: " + ", ".join(f"[{k}) {v}" for k, v in stats["histogram"].items())]
    return "\n".join(lines)


def _csv_row(r: PairContrast) -> list:
    gaps = [("" if r.result.gaps.get(g) is None else f"{r.result.gaps[g]:.4f}") for g in GAP_NAMES]
    points = [f"{r.result.points.get(g, 0.0):.4f}" for g in GAP_NAMES]
    return [r.dataset_id, r.subscale, r.turn, f"{r.result.score:.4f}", r.result.passed, r.result.version, *gaps, *points]


CONTRAST_COLUMNS = ["dataset_id", "subscale", "turn", "contrast_score", "passed", "version", *(f"gap_{g}" for g in GAP_NAMES),
                    *(f"points_{g}" for g in GAP_NAMES)]


def write_contrast_csv(rows: list[PairContrast], path: Path | str) -> None:
    write_csv(path, CONTRAST_COLUMNS, (_csv_row(r) for r in rows))


def main(argv: list[str] | None = None) -> int:
    """Entry point of `speecheq validate`."""
    parser = argparse.ArgumentParser(prog="speecheq validate", description="Acoustic contrast (contrast_v1) of every test pair, and the oracle check.")
    parser.add_argument("raw_dir", metavar="RAW_DIR", help="raw folder (or an exported folder)")
    parser.add_argument("--report", required=True, metavar="FILE.csv", help="per-pair CSV: dataset_id, turn, contrast_score, ...")
    parser.add_argument("--cache", default=None, help="feature cache file (default: beside the embedded sample's cache)")
    parser.add_argument("--oracle-llm", default=None, choices=("scripted", "openai"), help="also run the oracle text check with this backend")
    parser.add_argument("--oracle-report", default=None, metavar="FILE.csv", help="oracle CSV (default: next to --report)")
    parser.add_argument("--base-url", default=None, help="endpoint of --oracle-llm openai")
    parser.add_argument("--llm-model", default=None, help="model of --oracle-llm openai")
    parser.add_argument("--seed", type=int, default=0, help="option order of the oracle check")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    from .audit import load_pairs
    from .features import FeatureCache
    from .features import default_cache_path

    try:
        check_replaceable(args.report, CONTRAST_COLUMNS)  # before the work, not after it
        rows = pair_contrasts(load_pairs(args.raw_dir, FeatureCache(args.cache or default_cache_path())))
        write_contrast_csv(rows, args.report)
        print(distribution_text(distribution([r.result.score for r in rows])))
        low = [r for r in rows if not r.result.passed]
        for r in low:
            gaps = ", ".join(f"{k} {v:.2f}" for k, v in r.result.gaps.items() if v is not None)
            print(f"  below pass: {r.dataset_id} turn {r.turn}: {r.result.score:.2f} ({gaps})")
        print(f"written: {args.report}")
        if args.oracle_llm:
            from .generation.llm import build_text_backend
            from .oracle import load_metadatas
            from .oracle import oracle_summary
            from .oracle import run_oracle
            from .oracle import write_oracle_csv

            options = {k: v for k, v in {"base_url": args.base_url, "model": args.llm_model}.items() if v} if args.oracle_llm == "openai" else {}
            results = run_oracle(load_metadatas(args.raw_dir), build_text_backend(args.oracle_llm, **options), seed=args.seed)
            target = args.oracle_report or str(Path(args.report).with_name(Path(args.report).stem + "-oracle.csv"))
            write_oracle_csv(results, target)
            summary = oracle_summary(results)
            print(f"oracle ({args.oracle_llm}): accuracy {summary['accuracy']:.3f} over {summary['n_dialogues']} dialogues; "
                  f"flagged {len(summary['flagged'])}; per subscale: "
                  + ", ".join(f"{s} {a:.2f}" for s, a in summary["per_subscale"].items()))
            print(f"written: {target}")
    except (OSError, ValueError) as exc:
        print(f"speecheq validate: error: {exc}", file=sys.stderr)
        return exit_status(exc)
    return 0
