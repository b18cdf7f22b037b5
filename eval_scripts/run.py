"""Score a model on SpeechEQ: `accelerate launch eval_scripts/run.py --model NAME ...` (or plain `python`).

Also reached as `speecheq eval ...`. Writes DIR/samples.jsonl and DIR/results.json.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import sys
from pathlib import Path

# Launched as a script (`python eval_scripts/run.py`, `accelerate launch ...`), Python puts
# eval_scripts/ itself first on sys.path, which would make our modules importable under bare
# names; drop it, and add the checkout root only when the package is not installed.
if sys.path and sys.path[0] and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path.pop(0)
try:
    import eval_scripts  # noqa: F401
except ImportError:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from eval_scripts import runner  # noqa: E402
from eval_scripts.batching import parse_batch_size  # noqa: E402
from eval_scripts.runner import RunConfig  # noqa: E402
from eval_scripts.scoring import FLAT_KEYS  # noqa: E402

logger = logging.getLogger("eval_scripts.run")


def parse_model_args(text: str | None) -> dict:
    """`k=v,k=v` -> dict; values that look like int/float/bool/None become them."""
    out: dict = {}
    if not text:
        return out
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        if "=" not in item:
            raise ValueError(f"--model-args item {item!r} is not key=value")
        key, value = item.split("=", 1)
        out[key.strip()] = _typed(value.strip())
    return out


def _typed(value: str):
    lowered = value.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered in ("none", "null"):
        return None
    for cast in (int, float):
        try:
            return cast(value)
        except ValueError:
            pass
    return value


def build_parser() -> argparse.ArgumentParser:
    from eval_scripts.prompts import persona_names

    p = argparse.ArgumentParser(
        prog="speecheq eval",
        description="Run a model on the SpeechEQ two-round forced-choice protocol (SPEC §5).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--model", required=True, help="registered adapter name (random, prosody, qwen2.5-omni, qwen3-omni, qwen2-audio, openai, gemini)")
    p.add_argument("--model-args", default="", help="adapter kwargs k=v,k=v (e.g. pretrained=Qwen/Qwen2.5-Omni-7B)")
    p.add_argument("--dataset", default=None, help="raw generator folder, exported dataset folder or Hub id; default: the embedded sample")
    p.add_argument("--output-dir", required=True, help="run directory (samples.jsonl, results.json); re-running resumes")
    p.add_argument("--limit", type=int, default=None, help="evaluate only the first N dialogues")
    p.add_argument("--seed", type=int, default=RunConfig.seed, help="seed of option orders and per-query seeds")
    p.add_argument("--batch-size", type=parse_batch_size, default=RunConfig.batch_size,
                   help="queries per model call (per process), or auto: the largest that fits, halved on out-of-memory")
    p.add_argument("--prefetch", type=int, default=RunConfig.prefetch, help="chunks of dialogues decoded ahead in a background thread (default: 1 on a GPU, 0 on CPU)")
    p.add_argument("--loader-workers", type=int, default=RunConfig.loader_workers,
                   help="processes that decode clips and compute log-mels ahead of the model (default: up to 4 on a GPU, 0 on CPU)")
    p.add_argument("--inference", choices=runner.INFERENCES, default=RunConfig.inference, help="round 2 hears the model's own turn-4 pick, or the resonant one")
    p.add_argument("--history", choices=runner.HISTORIES, default=RunConfig.history, help="history turns as clips or as transcripts")
    p.add_argument("--orders", choices=runner.ORDERS, default=RunConfig.orders, help="random option order per dialogue/round/run, or every dialogue in both orders")
    p.add_argument("--num-runs", type=int, default=RunConfig.num_runs, help="runs per item, majority-voted")
    p.add_argument("--persona", choices=persona_names(), default=None, help="replace the system prompt by a persona (SPEC §5)")
    p.add_argument("--prompt-file", default=None, help="another prompt template JSON (same keys as eval_scripts/prompts/forced_choice_v1.json)")
    p.add_argument("--choice-mode", choices=runner.CHOICE_MODES, default=RunConfig.choice_mode, help="JSON answer, or score the two answers in one forward pass")
    p.add_argument("--oracle", action="store_true", help="replace each candidate clip by its tone instruction as text (scenario sanity check)")
    p.add_argument("--dtype", default=None, help="HF models: torch dtype (auto, bfloat16, float16, float32)")
    p.add_argument("--device-map", default=None, help="HF models: from_pretrained device_map (e.g. auto); default: this process's device")
    p.add_argument("--trust-remote-code", action="store_true", help="HF models: allow code from the model repository")
    p.add_argument("--max-new-tokens", type=int, default=None, help="HF models: generation budget (default 512)")
    p.add_argument("--price-in", type=float, default=None, help="USD per million input tokens (cost per 100 queries)")
    p.add_argument("--price-out", type=float, default=None, help="USD per million output tokens")
    p.add_argument("--n-bootstrap", type=int, default=RunConfig.n_bootstrap, help="bootstrap resamples of the 95%% intervals")
    p.add_argument("--overwrite", action="store_true", help="discard what the output dir holds and start over")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p


def config_from_args(args: argparse.Namespace) -> RunConfig:
    model_args = parse_model_args(args.model_args)
    for flag, key in (("dtype", "dtype"), ("device_map", "device_map"), ("max_new_tokens", "max_new_tokens")):
        value = getattr(args, flag)
        if value is not None:
            model_args.setdefault(key, value)
    if args.trust_remote_code:
        model_args.setdefault("trust_remote_code", True)
    # Every other RunConfig field has a flag of the same name.
    fields = {f.name: getattr(args, f.name) for f in dataclasses.fields(RunConfig) if f.name != "model_args"}
    return RunConfig(**fields, model_args=model_args)


def main(argv: list[str] | None = None) -> int:
    """CLI entry point; returns the exit status (0 ok, 1 no dialogue scored, 2 bad options)."""
    from eval_scripts.runner import run

    args = build_parser().parse_args(argv)
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    from speecheq_dataset.secrecy import install_log_scrubber

    install_log_scrubber()  # no key the process reads may reach a log line
    config = config_from_args(args)
    try:
        results = run(config, progress=not args.no_progress)
    except ValueError as exc:
        print(f"speecheq eval: error: {exc}", file=sys.stderr)
        return 2
    if results is None:  # not the main process
        return 0
    metrics = results["metrics"]
    if metrics is None:
        first = results["failed_dialogues"][0]["error"] if results["failed_dialogues"] else "no dialogues"
        print(f"speecheq eval: error: no dialogue could be scored (first failure: {first[:200]}); "
              f"see {Path(config.output_dir) / 'results.json'} (failed_dialogues)", file=sys.stderr)
        return 1
    shown = {k: metrics[k] for k in FLAT_KEYS}
    print(f"{results['label']}: {json.dumps(shown)}")
    if results["failed_dialogues"]:
        print(f"{len(results['failed_dialogues'])} dialogue(s) failed; see results.json failed_dialogues", file=sys.stderr)
    print(f"wrote {Path(config.output_dir) / 'results.json'} and samples.jsonl")
    return 0


if __name__ == "__main__":
    sys.exit(main())
