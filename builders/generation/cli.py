"""`speecheq generate OUT_DIR --llm {scripted,openai} --tts {espeak,piper,openai,...} --per-cell N --seed S`."""

from __future__ import annotations

import argparse
import logging
import sys

from speecheq_dataset.files import exit_status
from speecheq_dataset.taxonomy import VALENCES
from speecheq_dataset.tts_backends import TTS_BACKENDS

from ..audit import DEFAULT_BOUND
from .llm import TEXT_BACKENDS
from .matrix import SCENARIO_TYPES

logger = logging.getLogger(__name__)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="speecheq generate",
        description="Generate SpeechEQ dialogues (scenario -> dialogue -> tones -> filter -> speech) into the raw layout; resumable.")
    parser.add_argument("out_dir", metavar="OUT_DIR", help="raw output folder (<subscale_slug>/<dataset_id>/...); work files in OUT_DIR/.speecheq-generate")
    parser.add_argument("--llm", default="scripted", choices=sorted(TEXT_BACKENDS), help="text backend (scripted: offline, deterministic)")
    parser.add_argument("--tts", default="espeak", help=f"TTS backend: {', '.join(TTS_BACKENDS)}, or package.module:ClassName")
    parser.add_argument("--per-cell", type=int, default=1, help="dialogues per subscale x valence cell (15 x 3 cells)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--base-url", default=None, help="OpenAI-compatible endpoint of --llm openai (default: OpenAI)")
    parser.add_argument("--llm-model", default=None, help="model name of --llm openai (default gpt-4o-2024-11-20)")
    parser.add_argument("--llm-concurrency", type=int, default=4, help="parallel requests of --llm openai")
    parser.add_argument("--price-in", type=float, default=None, help="USD per 1M input tokens of --llm openai (cost tally)")
    parser.add_argument("--price-out", type=float, default=None, help="USD per 1M output tokens of --llm openai")
    parser.add_argument("--tts-model", default=None, help="model of --tts openai (default gpt-4o-mini-tts-2025-03-20)")
    parser.add_argument("--tts-base-url", default=None, help="OpenAI-compatible speech endpoint of --tts openai (default: OpenAI)")
    parser.add_argument("--subscales", default=None, help="comma-separated subscale slugs (default: all 15)")
    parser.add_argument("--valences", default=",".join(VALENCES), help="comma-separated valences (default: all three)")
    parser.add_argument("--scenario-types", default=",".join(SCENARIO_TYPES), help="comma-separated scenario types")
    parser.add_argument("--max-attempts", type=int, default=3, help="attempts per text prompt before an item is rejected")
    parser.add_argument("--max-syntheses", type=int, default=4, help="renderings per test pair (first + regenerations)")
    parser.add_argument("--refill-rounds", type=int, default=2, help="rounds of replacements for rejected items")
    parser.add_argument("--bound", type=float, default=DEFAULT_BOUND, help="highest allowed single-feature pair accuracy")
    parser.add_argument("--no-oracle", action="store_true", help="skip the oracle text check")
    parser.add_argument("--exclusions", default=None, metavar="EXCLUDE.json",
                        help="leave out the dialogues a human check failed (speecheq human-check import) and rebalance the rest")
    parser.add_argument("--fail-over-bound", action="store_true", help="exit 1 when the audit exceeds the bound")
    return parser


def _csv(value: str | None) -> tuple[str, ...] | None:
    return tuple(v.strip() for v in value.split(",") if v.strip()) if value else None


def main(argv: list[str] | None = None) -> int:
    """Entry point of `speecheq generate`."""
    args = _parser().parse_args(sys.argv[1:] if argv is None else argv)
    from .pipeline import GenerateConfig
    from .pipeline import run_pipeline

    config = GenerateConfig(
        out_dir=args.out_dir, llm=args.llm, tts=args.tts, per_cell=args.per_cell, seed=args.seed, base_url=args.base_url,
        llm_model=args.llm_model, tts_model=args.tts_model, subscales=_csv(args.subscales), valences=_csv(args.valences) or VALENCES,
        scenario_types=_csv(args.scenario_types) or SCENARIO_TYPES, max_attempts=args.max_attempts, max_syntheses=args.max_syntheses,
        refill_rounds=args.refill_rounds, bound=args.bound, oracle=not args.no_oracle,
        exclusions=args.exclusions, llm_concurrency=args.llm_concurrency, tts_base_url=args.tts_base_url, price_in=args.price_in, price_out=args.price_out)
    try:
        summary = run_pipeline(config)
    except (OSError, ValueError, RuntimeError) as exc:
        print(f"speecheq generate: error: {exc}", file=sys.stderr)
        return exit_status(exc)
    print(summary.text())
    print(f"\nnext: speecheq dataset build {args.out_dir} EXPORT_DIR")
    return 1 if args.fail_over_bound and not summary.audit_ok else 0
