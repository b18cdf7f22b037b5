"""`speecheq dataset build|sample|push`: raw generator output -> Hub folder -> the Hub."""

from __future__ import annotations

import argparse
import logging
import sys

logger = logging.getLogger(__name__)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="speecheq dataset", description="Build, sample and push the SpeechEQ dataset.")
    sub = parser.add_subparsers(dest="command", required=True)
    build = sub.add_parser("build", help="raw generator output -> Hub dataset repository folder")
    build.add_argument("raw_dir", metavar="RAW_DIR", help="folder of <subscale_slug>/<dataset_id>/metadata.json + audio/01..08")
    build.add_argument("out_dir", metavar="OUT_DIR", help="export folder (README.md + data/*.parquet): new or empty, or an earlier export with --overwrite")
    build.add_argument("--strict", action="store_true", help="fail on the first faulty dialogue folder instead of skipping it")
    build.add_argument("--overwrite", action="store_true", help="replace an earlier SpeechEQ export at OUT_DIR (nothing else is ever replaced)")
    build.add_argument("--max-shard-mb", type=int, default=256, help="upper bound of one parquet shard (MB, default 256)")
    for command in (build,):
        _card_options(command)
    sample = sub.add_parser("sample", help="render the embedded sample (espeak-ng, offline) and export it")
    sample.add_argument("out_dir", metavar="OUT_DIR")
    sample.add_argument("--overwrite", action="store_true", help="replace an earlier SpeechEQ export at OUT_DIR (nothing else is ever replaced)")
    _card_options(sample, pretty_default="SpeechEQ embedded sample")
    push = sub.add_parser("push", help="check an exported folder and upload it to a Hub dataset repo (token: HF_TOKEN or `hf auth login`)")
    push.add_argument("out_dir", metavar="OUT_DIR")
    push.add_argument("--repo-id", required=True, help="e.g. SpeechEQ/SpeechEQ")
    push.add_argument("--dry-run", action="store_true", help="check the folder and list what would be uploaded; no network")
    push.add_argument("--license", default=None, help="refuse to push unless the card carries this license id")
    push.add_argument("--pretty-name", default=None, help="refuse to push unless the card carries this pretty name")
    push.add_argument("--private", action="store_true", help="create the repo as private")
    return parser


def _card_options(parser: argparse.ArgumentParser, pretty_default: str = "SpeechEQ") -> None:
    parser.add_argument("--license", default=None, help="Hub license id written into the card (default cc-by-4.0, which the card says was a default)")
    parser.add_argument("--pretty-name", default=pretty_default, help=f"the card's title and pretty_name (default {pretty_default!r})")


def _rejection_report(rejected) -> str:
    lines = [f"Rejected {len(rejected)} dialogue folder(s):"]
    width = max(len(r.code) for r in rejected)
    lines += [f"  {r.code:<{width}}  {r.folder}\n  {'':<{width}}  {r.detail}" for r in rejected]
    return "\n".join(lines)


def _one_line(exc: BaseException, args) -> str:
    """The error as one line: a full disk or file-size limit named with its path, else the message's first line."""
    from speecheq_dataset.files import describe_write_error
    from speecheq_dataset.files import one_line

    return describe_write_error(exc, getattr(args, "out_dir", None)) or one_line(exc)


def main(argv: list[str] | None = None) -> int:
    """Entry point of `speecheq dataset ...`; returns the exit status."""
    args = _parser().parse_args(sys.argv[1:] if argv is None else argv)
    from speecheq_dataset.files import describe_write_error
    from speecheq_dataset.files import exit_status
    from speecheq_dataset.raw import RawDialogueError

    from .export import build_export
    from .export import export_sample
    from .export import summarize
    from .push import push_folder

    try:
        if args.command == "build":
            if args.max_shard_mb <= 0:
                raise ValueError(f"--max-shard-mb must be positive, got {args.max_shard_mb}")
            result = build_export(args.raw_dir, args.out_dir, strict=args.strict, overwrite=args.overwrite,
                                  max_shard_bytes=args.max_shard_mb * 2**20, license=args.license, pretty_name=args.pretty_name)
            print(summarize(result))
            if result.rejected:
                print(_rejection_report(result.rejected), file=sys.stderr)
        elif args.command == "sample":
            print(summarize(export_sample(args.out_dir, overwrite=args.overwrite, license=args.license, pretty_name=args.pretty_name)))
        elif args.command == "push":
            plan = push_folder(args.out_dir, args.repo_id, dry_run=args.dry_run, private=args.private, license=args.license,
                               pretty_name=args.pretty_name)
            verb = "Checked the card, schema and shards; would upload" if args.dry_run else "Uploaded"
            total = sum(f.size_bytes for f in plan)
            print(f"{verb} {len(plan)} files ({total / 1e6:.1f} MB) to https://huggingface.co/datasets/{args.repo_id}:")
            for f in plan:
                print(f"  {f.path_in_repo}  ({f.size_bytes / 1e6:.2f} MB)")
    except RawDialogueError as exc:
        print(f"speecheq dataset {args.command}: rejected (strict): {exc}", file=sys.stderr)
        return 1
    except (OSError, ValueError, RuntimeError) as exc:
        print(f"speecheq dataset {args.command}: error: {_one_line(exc, args)}", file=sys.stderr)
        return exit_status(exc)
    except Exception as exc:  # e.g. datasets' DatasetGenerationError around a failed write
        reason = describe_write_error(exc, args.out_dir)
        if reason is None:
            raise
        print(f"speecheq dataset {args.command}: error: {reason}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
