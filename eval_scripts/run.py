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

from eval_scripts import protocol  # noqa: E402
from eval_scripts.batching import parse_batch_size  # noqa: E402
from eval_scripts.runner import RunConfig  # noqa: E402
from eval_scripts.scoring import FLAT_KEYS  # noqa: E402
from speecheq_dataset.files import USER_MISTAKES  # noqa: E402
from speecheq_dataset.files import one_line  # noqa: E402

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
            raise ValueError(f"--model-args item {item!r} is not key=value (e.g. pretrained=Qwen/Qwen2.5-Omni-7B)")
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
    # The underscore spellings are lm-evaluation-harness's and lmms-eval's, for fingers used to them.
    p.add_argument("--model", required=True, help="registered adapter name (random, prosody, qwen2.5-omni, qwen3-omni, qwen2-audio, openai, gemini)")
    p.add_argument("--model-args", "--model_args", dest="model_args", default="", help="adapter kwargs k=v,k=v (e.g. pretrained=Qwen/Qwen2.5-Omni-7B)")
    p.add_argument("--tasks", "--preset", dest="preset", choices=sorted(protocol.PRESETS), default=None,
                   help="a named protocol setting: " + "; ".join(f"{name} = {text}" for name, (text, _) in protocol.PRESETS.items()))
    p.add_argument("--dataset", default=None, help="raw generator folder, exported dataset folder or Hub id; default: the embedded sample")
    p.add_argument("--output-dir", "--output_path", dest="output_dir", required=True, help="run directory (samples.jsonl, results.json); re-running resumes")
    p.add_argument("--limit", type=int, default=None, help="evaluate only the first N dialogues")
    p.add_argument("--seed", type=int, default=RunConfig.seed, help="seed of option orders and per-query seeds")
    p.add_argument("--batch-size", "--batch_size", dest="batch_size", type=parse_batch_size, default=RunConfig.batch_size,
                   help="queries per model call (per process), or auto: the largest that fits, halved on out-of-memory")
    p.add_argument("--prefetch", type=int, default=RunConfig.prefetch, help="chunks of dialogues decoded ahead in a background thread (default: 1 on a GPU, 0 on CPU)")
    p.add_argument("--loader-workers", type=int, default=RunConfig.loader_workers,
                   help="processes that decode clips and compute log-mels ahead of the model (default: up to 4 on a GPU, 0 on CPU)")
    # No defaults here: a --tasks preset fills them, and a flag that contradicts the preset is an error.
    p.add_argument("--inference", choices=protocol.INFERENCES, default=None, help=f"round 2 hears the model's own turn-4 pick, or the resonant one (default {RunConfig.inference})")
    p.add_argument("--history", choices=protocol.HISTORIES, default=None, help=f"history turns as clips or as transcripts (default {RunConfig.history})")
    p.add_argument("--orders", choices=protocol.ORDERS, default=RunConfig.orders, help="random option order per dialogue/round/run, or every dialogue in both orders")
    p.add_argument("--num-runs", type=int, default=RunConfig.num_runs, help="runs per item, majority-voted")
    p.add_argument("--persona", choices=persona_names(), default=None, help="replace the system prompt by a persona (SPEC §5)")
    p.add_argument("--prompt-file", default=None, help="another prompt template JSON (same keys as eval_scripts/prompts/forced_choice_v1.json)")
    p.add_argument("--choice-mode", choices=protocol.CHOICE_MODES, default=RunConfig.choice_mode, help="JSON answer, or score the two answers in one forward pass")
    p.add_argument("--oracle", action="store_true", default=None, help="replace each candidate clip by its tone instruction as text (scenario sanity check)")
    p.add_argument("--dtype", default=None, help="HF models: torch dtype (auto, bfloat16, float16, float32)")
    p.add_argument("--device-map", default=None, help="HF models: from_pretrained device_map (e.g. auto); default: this process's device")
    p.add_argument("--trust-remote-code", action="store_true", help="HF models: allow code from the model repository")
    p.add_argument("--max-new-tokens", type=int, default=None, help="generation budget (HF default 512; API models: max_tokens)")
    p.add_argument("--price-in", type=float, default=None, help="USD per million input tokens (cost per 100 queries)")
    p.add_argument("--price-out", type=float, default=None, help="USD per million output tokens")
    p.add_argument("--n-bootstrap", type=int, default=RunConfig.n_bootstrap, help="bootstrap resamples of the 95%% intervals")
    p.add_argument("--overwrite", action="store_true", help="discard what the output dir holds and start over")
    p.add_argument("--wandb-args", default=None, help="log the results to Weights & Biases (needs wandb installed): k=v,k=v for wandb.init, e.g. project=speecheq")
    p.add_argument("--tensorboard-dir", default=None, help="log the results to TensorBoard event files in this folder (needs tensorboard installed)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p


def config_from_args(args: argparse.Namespace) -> RunConfig:
    """The RunConfig of parsed flags; ValueError naming the flag or model arg that cannot work (nothing is loaded)."""
    from eval_scripts.preflight import WEIGHT_FLAGS
    from eval_scripts.preflight import check_model_args

    model_args = parse_model_args(args.model_args)
    flags = {key: getattr(args, key) for key in WEIGHT_FLAGS}
    check_model_args(args.model, model_args, flags=flags)
    for key, value in {**flags, "max_new_tokens": args.max_new_tokens}.items():
        if value is not None and value is not False:
            model_args.setdefault(key, value)
    settings = protocol.preset_settings(args.preset, {name: getattr(args, name) for name in ("inference", "history", "oracle")})
    # Every other RunConfig field has a flag of the same name.
    given = {name: getattr(args, name) for name in vars(args)}
    fields = {f.name: given[f.name] for f in dataclasses.fields(RunConfig) if f.name in given and f.name not in ("model_args", *settings)}
    return RunConfig(**fields, **settings, model_args=model_args)


def main(argv: list[str] | None = None) -> int:
    """CLI entry point; returns the exit status (0 ok, 1 no dialogue scored, 2 bad options)."""
    from eval_scripts.runner import run

    args = build_parser().parse_args(argv)
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    from speecheq_dataset.secrecy import install_log_scrubber

    install_log_scrubber()  # no key the process reads may reach a log line
    command = [sys.argv[0] if argv is None else "speecheq eval", *(sys.argv[1:] if argv is None else argv)]
    try:
        config = config_from_args(args)
        loggers = result_loggers(args)
        results = run(config, progress=not args.no_progress, command=command)
    except USER_MISTAKES as exc:
        print(f"speecheq eval: error: {one_line(exc)}", file=sys.stderr)
        return 2
    if results is None:  # not the main process
        return 0
    for log in loggers:
        log(results)
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


def result_loggers(args: argparse.Namespace) -> list:
    """The optional experiment trackers asked for; checked up front, so a missing package fails before the run."""
    from eval_scripts import trackers

    loggers = []
    if args.wandb_args is not None:
        loggers.append(trackers.wandb_logger(parse_model_args(args.wandb_args)))
    if args.tensorboard_dir is not None:
        loggers.append(trackers.tensorboard_logger(args.tensorboard_dir))
    return loggers


if __name__ == "__main__":
    sys.exit(main())
