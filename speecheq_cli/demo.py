"""`speecheq demo`: the offline main job on the embedded sample.

Builds and exports the embedded sample dataset, scores the shortcut baselines and
a tiny random-weight Qwen2.5-Omni thinker on it with the real runner, then writes
the cohort report. Needs no GPU, no network and no weights; every step is the
same code a researcher runs on the published data.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

logger = logging.getLogger("speecheq_cli.demo")

# (run directory name, runner arguments). The tiny model is labelled as random
# weights in its results; its scores measure the pipeline, not a model.
_TINY = ("--model", "qwen2.5-omni", "--model-args", "pretrained=tiny-random", "--batch-size", "8")
DEMO_RUNS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("random", ("--model", "random")),
    ("prosody-slower", ("--model", "prosody", "--model-args", "rule=slower")),
    ("prosody-closest", ("--model", "prosody", "--model-args", "rule=closest_to_catalyst")),
    # Logprob mode: one forward pass scores "Option 1" vs "Option 2", so even random
    # weights give a choice; sequential and direct make the delta figure.
    ("tiny-qwen2.5-omni-logprob", (*_TINY, "--choice-mode", "logprob")),
    ("tiny-qwen2.5-omni-logprob-direct", (*_TINY, "--choice-mode", "logprob", "--inference", "direct")),
    # Generate mode: the JSON answer path end to end; random weights emit no JSON, so
    # every answer is (correctly) parsed as invalid and counted wrong.
    ("tiny-qwen2.5-omni-generate", (*_TINY, "--choice-mode", "generate", "--max-new-tokens", "32")),
)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="speecheq demo", description=__doc__.splitlines()[0])
    p.add_argument("--output-dir", default="runs/demo", help="where the dataset export, runs and report go")
    p.add_argument("--limit", type=int, default=None, help="score only the first N dialogues")
    p.add_argument("--skip-tiny", action="store_true", help="baselines only (skip the tiny random-weight model)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace an earlier demo's export and report in --output-dir (its finished runs are resumed)")
    return p


def main(argv: list[str] | None = None) -> int:
    """Run the whole offline pipeline; returns 0 when every step succeeded."""
    from builders.export import export_sample
    from builders.export import summarize
    from eval_scripts import report
    from eval_scripts import run

    args = build_parser().parse_args(argv)
    out = Path(args.output_dir)
    started = time.perf_counter()
    if out.is_dir() and any(out.iterdir()) and not args.overwrite:
        print(f"speecheq demo: error: {out} is not empty (an earlier demo?); pass --overwrite to replace its export and report",
              file=sys.stderr)
        return 2

    print("== 1/3 embedded sample: render (espeak-ng), build, export ==", flush=True)
    try:
        exported = export_sample(out / "dataset", overwrite=args.overwrite)
    except ValueError as exc:  # the destination holds something the demo did not write
        print(f"speecheq demo: error: {exc}", file=sys.stderr)
        return 2
    print(summarize(exported), flush=True)

    print("\n== 2/3 models on the sample (eval_scripts/run.py) ==", flush=True)
    run_dirs = []
    for name, run_args in DEMO_RUNS:
        if args.skip_tiny and "tiny-random" in " ".join(run_args):
            continue
        run_dir = out / "runs" / name
        argv_run = [*run_args, "--dataset", str(exported.out_dir), "--output-dir", str(run_dir), "--no-progress"]
        if args.limit:
            argv_run += ["--limit", str(args.limit)]
        status = run.main(argv_run)
        if status != 0:
            print(f"speecheq demo: run {name!r} failed with status {status}", file=sys.stderr)
            return status
        run_dirs.append(str(run_dir))

    print("\n== 3/3 report: cohort SEQ leaderboard and figures ==", flush=True)
    status = report.main([*run_dirs, "--output-dir", str(out / "report"), *(["--overwrite"] if args.overwrite else [])])
    if status != 0:
        return status
    print(f"demo finished in {time.perf_counter() - started:.0f} s; everything is under {out}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
