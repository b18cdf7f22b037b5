"""What the track command lines share: start-up (logging, the secret scrubber, the recorded command), the weight flags, the last lines."""

from __future__ import annotations

import argparse
import logging
import sys


def start_cli(prog: str, argv: list[str] | None) -> list[str]:
    """Log to stderr (unless the caller configured logging), scrub secrets from log lines; the command line to record."""
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    from speecheq_dataset.secrecy import install_log_scrubber

    install_log_scrubber()  # no key the process reads may reach a log line
    return [sys.argv[0] if argv is None else prog, *(sys.argv[1:] if argv is None else argv)]


def track_parser(prog: str, description: str, *, model_help: str, output_help: str, required: bool = True) -> argparse.ArgumentParser:
    """A track's parser with the flags every track has first: --model, --model-args, --output-dir (and lm-eval's spellings)."""
    p = argparse.ArgumentParser(prog=prog, description=description, formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--model", required=required, help=model_help)
    p.add_argument("--model-args", "--model_args", dest="model_args", default="", help="model kwargs k=v,k=v (e.g. pretrained=tiny-random)")
    p.add_argument("--output-dir", "--output_path", dest="output_dir", required=required, help=output_help)
    return p


def add_run_flags(parser: argparse.ArgumentParser) -> None:
    """The flags every track has last: the weight flags, --overwrite and --no-progress."""
    parser.add_argument("--dtype", default=None, help="HF models: torch dtype")
    parser.add_argument("--device-map", default=None, help="HF models: from_pretrained device_map")
    parser.add_argument("--trust-remote-code", action="store_true", help="HF models: allow code from the model repository")
    parser.add_argument("--overwrite", action="store_true", help="discard what the output dir holds and start over")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def with_weight_flags(args: argparse.Namespace, model_args: dict) -> dict:
    """The model args plus the weight flags that were given (a model arg of the same name wins)."""
    for key in ("dtype", "device_map"):
        if getattr(args, key) is not None:
            model_args.setdefault(key, getattr(args, key))
    if args.trust_remote_code:
        model_args.setdefault("trust_remote_code", True)
    return model_args


def finish_cli(prog: str, results: dict | None, output_dir: str, *, summary: tuple[str, dict], failed_key: str, noun: str, wrote: str) -> int:
    """Print a finished run's summary line, its failures and what it wrote; the exit status (0, or 1 when nothing was scored)."""
    import json
    from pathlib import Path

    if results is None:  # not the main process
        return 0
    out = Path(output_dir)
    failed = results[failed_key]
    if results["metrics"] is None:
        first = failed[0]["error"][:200] if failed else "nothing to do"
        print(f"{prog}: error: no {noun} could be scored (first failure: {first}); see {out / 'results.json'} ({failed_key})", file=sys.stderr)
        return 1
    print(f"{results['label']} ({summary[0]}): {json.dumps(summary[1], ensure_ascii=False)}")
    if failed:
        print(f"{len(failed)} {noun}(s) failed; see results.json {failed_key}", file=sys.stderr)
    print(f"wrote {out / 'results.json'}, {wrote}")
    return 0
