"""The interactive track: `accelerate launch eval_scripts/interact.py --model NAME ...` (or plain `python`, or `speecheq interact`).

A simulated user (profile, user LLM, emotional TTS) talks with a speech-output
model for up to --max-turns turns; judges decide when to stop and rate every
spoken reply and the whole dialogue. Writes DIR/dialogues/<id>.json (+ audio
under DIR/dialogues/<id>/), DIR/samples.jsonl and DIR/results.json.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

# Launched as a script, Python puts eval_scripts/ first on sys.path (see run.py): put the folder above it there instead
# (the checkout, or site-packages when installed), so our modules are importable only under their package.
if sys.path and Path(sys.path[0] or ".").resolve() == Path(__file__).resolve().parent:
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from eval_scripts.cli_common import add_run_flags  # noqa: E402
from eval_scripts.cli_common import finish_cli  # noqa: E402
from eval_scripts.cli_common import start_cli  # noqa: E402
from eval_scripts.cli_common import track_parser  # noqa: E402
from eval_scripts.cli_common import with_weight_flags  # noqa: E402
from eval_scripts.interactive.track import InteractConfig  # noqa: E402
from speecheq_dataset.files import USER_MISTAKES  # noqa: E402
from speecheq_dataset.files import one_line  # noqa: E402
from eval_scripts.run import parse_model_args  # noqa: E402


def build_parser() -> argparse.ArgumentParser:
    from eval_scripts.interactive.agents import BACKENDS
    from eval_scripts.interactive.agents import ROLES
    from eval_scripts.responders import known_responders
    from speecheq_dataset.tts_backends import TTS_BACKENDS

    p = track_parser("speecheq interact",
                     "Multi-Bench's interactive track (SPEC §8): a simulated user talks with a speech-output model; judges rate it.",
                     model_help=f"speech-output model under test: {', '.join(known_responders())}",
                     output_help="run directory (dialogues/, samples.jsonl, results.json); re-running resumes")
    p.add_argument("--user-llm", choices=BACKENDS, default=InteractConfig.user_llm, help="who plays the user: scripted (offline) or an LLM API")
    p.add_argument("--user-llm-args", default="", help="k=v,k=v: model, base_url, api_key_env, temperature, concurrency, max_attempts, timeout, ...")
    p.add_argument("--tts", default=InteractConfig.tts, help=f"TTS of the user's lines: {', '.join(TTS_BACKENDS)} or package.module:Class")
    p.add_argument("--tts-args", default="", help="TTS kwargs k=v,k=v (e.g. model=..., base_url=...)")
    p.add_argument("--judge", choices=BACKENDS, default=InteractConfig.judge, help="the stop, turn (audio) and dialogue judges")
    p.add_argument("--judge-args", default="", help="k=v,k=v: model (text judges), audio_model (turn judge), base_url, api_key_env, audio_sr, ...")
    p.add_argument("--profiles", default=None, help="user profiles JSONL (default: the project's 12 profiles, en and zh)")
    p.add_argument("--prompt", action="append", default=[], metavar="ROLE=FILE", help=f"replace a role's prompt file ({', '.join(ROLES)})")
    p.add_argument("--limit", type=int, default=None, help="only the first N profiles")
    p.add_argument("--max-turns", type=int, default=InteractConfig.max_turns, help="turn cap of a dialogue")
    p.add_argument("--seed", type=int, default=InteractConfig.seed, help="seed of every per-turn seed")
    p.add_argument("--batch-size", "--batch_size", dest="batch_size", type=int, default=InteractConfig.batch_size,
                   help="dialogues advanced together (per process)")
    p.add_argument("--mos", default=InteractConfig.mos, help="speech quality of the replies: auto (utmos when installed), none, utmos, or package.module:Class")
    p.add_argument("--n-bootstrap", type=int, default=InteractConfig.n_bootstrap, help="bootstrap resamples of the 95%% intervals")
    add_run_flags(p)
    return p


def config_from_args(args: argparse.Namespace) -> InteractConfig:
    model_args = with_weight_flags(args, parse_model_args(args.model_args))
    prompts = {}
    for item in args.prompt:
        role, sep, path = item.partition("=")
        if not sep or not path:
            raise ValueError(f"--prompt {item!r} is not ROLE=FILE")
        prompts[role.strip()] = path.strip()
    return InteractConfig(model=args.model, output_dir=args.output_dir, model_args=model_args, user_llm=args.user_llm,
                          user_llm_args=parse_model_args(args.user_llm_args), tts=args.tts, tts_args=parse_model_args(args.tts_args),
                          judge=args.judge, judge_args=parse_model_args(args.judge_args), profiles=args.profiles, prompts=prompts,
                          limit=args.limit, max_turns=args.max_turns, seed=args.seed, batch_size=args.batch_size, mos=args.mos,
                          n_bootstrap=args.n_bootstrap, overwrite=args.overwrite)


def main(argv: list[str] | None = None) -> int:
    """CLI entry point; 0 ok, 1 no dialogue completed, 2 bad options."""
    from eval_scripts.interactive.track import interact

    args = build_parser().parse_args(argv)
    command = start_cli("speecheq interact", argv)
    try:
        config = config_from_args(args)
        results = interact(config, progress=not args.no_progress, command=command)
    except USER_MISTAKES as exc:
        print(f"speecheq interact: error: {one_line(exc)}", file=sys.stderr)
        return 2
    m = results["metrics"] if results else None
    shown = {k: m[k] for k in ("turn_score", "turn_score_ci95", "dialogue_score", "mean_turns", "stop_reasons", "turn_judge_missing", "mos")} if m else {}
    return finish_cli("speecheq interact", results, config.output_dir, summary=("interactive", shown), failed_key="failed_dialogues",
                      noun="dialogue", wrote="samples.jsonl and dialogues/")

if __name__ == "__main__":
    sys.exit(main())
