"""The generative track: `accelerate launch eval_scripts/respond.py --model NAME ...` (or plain `python`, or `speecheq respond`).

A speech-output model answers the catalyst's turns out loud; writes
DIR/replies/<id>/<turn>.wav, DIR/trajectories/<id>/<turn>_{user,model}.csv,
DIR/samples.jsonl and DIR/results.json (ERS per valence and subscale).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

# Launched as a script, Python puts eval_scripts/ first on sys.path (see run.py): drop it, add the root if not installed.
if sys.path and sys.path[0] and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path.pop(0)
try:
    import eval_scripts  # noqa: F401
except ImportError:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from eval_scripts.generative import DTW_BACKENDS  # noqa: E402
from eval_scripts.generative import RespondConfig  # noqa: E402
from eval_scripts.run import parse_model_args  # noqa: E402


def build_parser() -> argparse.ArgumentParser:
    from eval_scripts.components.vad import EXTRACTORS
    from eval_scripts.responders import known_responders

    p = argparse.ArgumentParser(
        prog="speecheq respond",
        description="Generative track (SPEC §7): a speech-output model answers the catalyst out loud; its replies are scored with ERS.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--model", required=True, help=f"speech-output model: {', '.join(known_responders())}")
    p.add_argument("--model-args", default="", help="model kwargs k=v,k=v (e.g. pretrained=Qwen/Qwen2.5-Omni-7B or pretrained=tiny-random)")
    p.add_argument("--dataset", default=None, help="raw generator folder, exported dataset folder or Hub id; default: the embedded sample")
    p.add_argument("--output-dir", required=True, help="run directory (replies/, trajectories/, samples.jsonl, results.json); re-running resumes")
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
    p.add_argument("--dtype", default=None, help="HF models: torch dtype")
    p.add_argument("--device-map", default=None, help="HF models: from_pretrained device_map")
    p.add_argument("--trust-remote-code", action="store_true", help="HF models: allow code from the model repository")
    p.add_argument("--overwrite", action="store_true", help="discard what the output dir holds and start over")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p


def config_from_args(args: argparse.Namespace) -> RespondConfig:
    model_args = parse_model_args(args.model_args)
    for key in ("dtype", "device_map"):
        if getattr(args, key) is not None:
            model_args.setdefault(key, getattr(args, key))
    if args.trust_remote_code:
        model_args.setdefault("trust_remote_code", True)
    return RespondConfig(model=args.model, output_dir=args.output_dir, dataset=args.dataset, model_args=model_args, vad=args.vad,
                         vad_args=parse_model_args(args.vad_args), emotion_classifier=args.emotion_classifier, limit=args.limit,
                         seed=args.seed, batch_size=args.batch_size, dtw=args.dtw, prompt_file=args.prompt_file, overwrite=args.overwrite)


def main(argv: list[str] | None = None) -> int:
    """CLI entry point; 0 ok, 1 nothing scored, 2 bad options."""
    from eval_scripts.generative import respond

    args = build_parser().parse_args(argv)
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    from speecheq_dataset.secrecy import install_log_scrubber

    install_log_scrubber()
    config = config_from_args(args)
    try:
        results = respond(config, progress=not args.no_progress)
    except ValueError as exc:
        print(f"speecheq respond: error: {exc}", file=sys.stderr)
        return 2
    if results is None:
        return 0
    if results["metrics"] is None:
        print(f"no dialogue could be scored; see {Path(config.output_dir) / 'results.json'} (failed_dialogues)", file=sys.stderr)
        return 1
    shown = {k: results["metrics"][k] for k in ("ecs", "ebs", "ess", "ers", "ct_ecs", "ct_ebs", "ct_ess", "ct_ers")}
    print(f"{results['label']} (ERS, reference variant): {json.dumps(shown)}")
    if results["failed_dialogues"]:
        print(f"{len(results['failed_dialogues'])} dialogue(s) failed; see results.json failed_dialogues", file=sys.stderr)
    print(f"wrote {Path(config.output_dir) / 'results.json'}, samples.jsonl, replies/ and trajectories/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
