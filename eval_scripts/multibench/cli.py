"""`speecheq multibench TASK --data DIR --model NAME ...` (also `accelerate launch -m eval_scripts.multibench.cli ...`).

TASK: emotion_recognition, paralinguistic_recognition, style_inference,
emotion_inference. Without --data the tiny example sets are used (rendered
with espeak-ng into the cache); `--write-examples DIR` writes them as a data
folder and exits. Writes DIR/samples.jsonl and DIR/results.json.
"""

from __future__ import annotations

import argparse
import sys

from eval_scripts.cli_common import add_run_flags
from eval_scripts.cli_common import finish_cli
from eval_scripts.cli_common import start_cli
from eval_scripts.cli_common import track_parser
from eval_scripts.multibench.run import MultibenchConfig
from eval_scripts.multibench.tasks import TASKS
from speecheq_dataset.files import USER_MISTAKES
from speecheq_dataset.files import one_line
from eval_scripts.run import parse_model_args


def build_parser() -> argparse.ArgumentParser:
    p = track_parser("speecheq multibench", "Multi-Bench utterance tasks (SPEC §8) on a local JSONL + audio folder.", required=False,
                     model_help="registered adapter (as in speecheq eval): qwen2.5-omni, qwen3-omni, qwen2-audio, openai, gemini, cascade",
                     output_help="run directory (samples.jsonl, results.json); re-running resumes")
    p.add_argument("task", choices=list(TASKS), help="the utterance task")
    p.add_argument("--data", default=None, help="data folder (<task>.jsonl + audio; docs/multibench.md); default: the tiny example sets")
    p.add_argument("--write-examples", default=None, metavar="DIR", help="write the example sets of every task into DIR and exit")
    p.add_argument("--judge", choices=("scripted", "openai", "gemini"), default=MultibenchConfig.judge, help="judge of the semi-open tasks")
    p.add_argument("--judge-args", default="", help="k=v,k=v: model, base_url, api_key_env, temperature, concurrency, ...")
    p.add_argument("--limit", type=int, default=None, help="only the first N items")
    p.add_argument("--seed", type=int, default=MultibenchConfig.seed, help="seed of the per-item seeds")
    p.add_argument("--batch-size", "--batch_size", dest="batch_size", type=int, default=MultibenchConfig.batch_size, help="queries per model call")
    p.add_argument("--prompt-file", default=None, help="another task prompt (keys system, question, answer)")
    p.add_argument("--judge-prompt-file", default=None, help="another semi-open judge prompt (keys system, user)")
    p.add_argument("--pass-mark", type=int, default=MultibenchConfig.pass_mark, help="semi-open: a rating at or above it counts as right")
    p.add_argument("--max-new-tokens", type=int, default=None, help="generation budget")
    add_run_flags(p)
    return p


def config_from_args(args: argparse.Namespace) -> MultibenchConfig:
    """The config of parsed flags; a bad model, model arg or flag fails here in one line (nothing is loaded)."""
    from eval_scripts.models.base import model_factory
    from eval_scripts.preflight import WEIGHT_FLAGS
    from eval_scripts.preflight import check_model_args

    if not args.model or not args.output_dir:
        raise ValueError("--model and --output-dir are required (unless --write-examples)")
    model_args = parse_model_args(args.model_args)
    flags = {key: getattr(args, key) for key in WEIGHT_FLAGS}
    check_model_args(args.model, model_args, flags=flags)
    if not getattr(model_factory(args.model), "reads_prompt", True):
        raise ValueError(f"model {args.model!r} is a forced-choice baseline (it compares two clips); Multi-Bench needs a model that answers a prompt")
    for key, value in {**flags, "max_new_tokens": args.max_new_tokens}.items():
        if value is not None and value is not False:
            model_args.setdefault(key, value)
    return MultibenchConfig(task=args.task, model=args.model, output_dir=args.output_dir, data=args.data, model_args=model_args, judge=args.judge,
                            judge_args=parse_model_args(args.judge_args), limit=args.limit, seed=args.seed, batch_size=args.batch_size,
                            prompt_file=args.prompt_file, judge_prompt_file=args.judge_prompt_file, pass_mark=args.pass_mark,
                            overwrite=args.overwrite)


def main(argv: list[str] | None = None) -> int:
    """CLI entry point; 0 ok, 1 nothing answered, 2 bad options."""
    from eval_scripts.multibench.run import run_task

    args = build_parser().parse_args(argv)
    command = start_cli("speecheq multibench", argv)
    try:
        if args.write_examples:
            from eval_scripts.multibench.examples import write_examples

            print(f"wrote the example sets to {write_examples(args.write_examples)}")
            return 0
        config = config_from_args(args)
        results = run_task(config, progress=not args.no_progress, command=command)
    except USER_MISTAKES as exc:
        print(f"speecheq multibench: error: {one_line(exc)}", file=sys.stderr)
        return 2
    return finish_cli("speecheq multibench", results, config.output_dir, summary=(args.task, results["metrics"] if results else None),
                      failed_key="failed_items", noun="item", wrote="samples.jsonl")

if __name__ == "__main__":
    sys.exit(main())
