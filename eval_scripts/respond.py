"""The generative track: `accelerate launch eval_scripts/respond.py --model NAME ...` (or plain `python`, or `speecheq respond`).

A speech-output model answers the catalyst's turns out loud; writes
DIR/replies/<id>/<turn>.wav, DIR/trajectories/<id>/<turn>_{user,model}.csv,
DIR/samples.jsonl and DIR/results.json (ERS per valence and subscale).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

# Launched as a script, Python puts eval_scripts/ first on sys.path (see run.py): drop it, add the root if not installed.
if sys.path and sys.path[0] and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path.pop(0)
try:
    import eval_scripts  # noqa: F401
except ImportError:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from eval_scripts.cli_common import add_run_flags  # noqa: E402
from eval_scripts.cli_common import finish_cli  # noqa: E402
from eval_scripts.cli_common import start_cli  # noqa: E402
from eval_scripts.cli_common import track_parser  # noqa: E402
from eval_scripts.cli_common import with_weight_flags  # noqa: E402
from eval_scripts.generative import DTW_BACKENDS  # noqa: E402
from eval_scripts.generative import RespondConfig  # noqa: E402
from eval_scripts.run import parse_model_args  # noqa: E402
from speecheq_dataset.files import USER_MISTAKES  # noqa: E402
from speecheq_dataset.files import one_line  # noqa: E402


def build_parser() -> argparse.ArgumentParser:
    from eval_scripts.components.vad import EXTRACTORS
    from eval_scripts.responders import known_responders

    p = track_parser("speecheq respond",
                     "Generative track (SPEC §7): a speech-output model answers the catalyst out loud; its replies are scored with ERS.",
                     model_help=f"speech-output model: {', '.join(known_responders())}",
                     output_help="run directory (replies/, trajectories/, samples.jsonl, results.json); re-running resumes")
    p.add_argument("--dataset", default=None, help="raw generator folder, exported dataset folder or Hub id; default: the embedded sample")
    p.add_argument("--vad", choices=sorted(EXTRACTORS), default=RespondConfig.vad,
                   help="frame-level V/A/D extractor: windows = the audeering regressor on 1-s windows; cser = a CSER checkpoint")
    p.add_argument("--vad-args", default="", help="extractor kwargs, e.g. pretrained=FOLDER_OR_ID (default: the audeering model; "
                   "tiny-random when the model is tiny-random), window_s=1, hop_s=1")
    p.add_argument("--emotion-classifier", default=None, help="audio emotion classifier for the categorical ERS (Hub id, folder or tiny-random)")
    p.add_argument("--limit", type=int, default=None, help="only the first N dialogues")
    p.add_argument("--seed", type=int, default=RespondConfig.seed, help="seed of the per-reply seeds")
    p.add_argument("--batch-size", type=int, default=RespondConfig.batch_size, help="dialogues answered together (per process)")
    p.add_argument("--dtw", choices=DTW_BACKENDS, default=RespondConfig.dtw, help="DTW of the ERS scores (fastdtw: the published evaluator's)")
    p.add_argument("--prompt-file", default=None, help="another scene-instructions template (same keys as eval_scripts/prompts/respond/respond_v1.json)")
    add_run_flags(p)
    return p


def config_from_args(args: argparse.Namespace) -> RespondConfig:
    model_args = with_weight_flags(args, parse_model_args(args.model_args))
    return RespondConfig(model=args.model, output_dir=args.output_dir, dataset=args.dataset, model_args=model_args, vad=args.vad,
                         vad_args=parse_model_args(args.vad_args), emotion_classifier=args.emotion_classifier, limit=args.limit,
                         seed=args.seed, batch_size=args.batch_size, dtw=args.dtw, prompt_file=args.prompt_file, overwrite=args.overwrite)


def main(argv: list[str] | None = None) -> int:
    """CLI entry point; 0 ok, 1 nothing scored, 2 bad options."""
    from eval_scripts.generative import respond

    args = build_parser().parse_args(argv)
    start_cli("speecheq respond", argv)
    try:
        config = config_from_args(args)
        results = respond(config, progress=not args.no_progress)
    except USER_MISTAKES as exc:
        print(f"speecheq respond: error: {one_line(exc)}", file=sys.stderr)
        return 2
    m = results["metrics"] if results else None
    shown = {k: m[k] for k in ("ecs", "ebs", "ess", "ers", "ct_ecs", "ct_ebs", "ct_ess", "ct_ers")} if m else {}
    return finish_cli("speecheq respond", results, config.output_dir, summary=("ERS, reference variant", shown), failed_key="failed_dialogues",
                      noun="dialogue", wrote="samples.jsonl, replies/ and trajectories/")

if __name__ == "__main__":
    sys.exit(main())
