"""`speecheq publish RAW_DIR EXPORT_DIR --repo-id owner/name`: validate, export (card + parquet) and push; a dry run unless --push.

Before exporting, dialogues are left out when a test pair scores below the
contrast_v1 pass mark (unless --keep-low-contrast) or when the human check
failed them (--exclusions); the shortcut audit of what remains goes into the
dataset card. The export is the dataset builder's (builders.export), and the
push is builders.push (token from HF_TOKEN only).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path

from speecheq_dataset.acoustics import CONTRAST_V1
from speecheq_dataset.files import exit_status

from .audit import DEFAULT_BOUND
from .audit import audit_markdown
from .audit import audit_table
from .audit import load_pairs
from .audit import passes_bound
from .audit import raw_dialogue_clips

logger = logging.getLogger(__name__)


@dataclass
class PublishPlan:
    kept: list[str]
    excluded: dict[str, list[str]] = field(default_factory=dict)
    audit_rows: list = field(default_factory=list)


def plan_publication(raw_dir: Path | str, *, exclusions: dict[str, list[str]] | None = None, keep_low_contrast: bool = False,
                     cache=None) -> PublishPlan:
    """Which dialogues to publish (and why others are left out), with the audit of the kept ones."""
    from speecheq_dataset.acoustics import contrast_score

    pairs = load_pairs(raw_dir, cache)
    excluded: dict[str, list[str]] = {k: [f"human check: {r}" for r in v] for k, v in (exclusions or {}).items()}
    if not keep_low_contrast:
        for p in pairs:
            result = contrast_score(p.high, p.low)
            if not result.passed:
                excluded.setdefault(p.dialogue_id, []).append(f"turn {p.turn}: {result.version} {result.score:.2f} < {CONTRAST_V1.pass_score:g}")
    ids = sorted({p.dialogue_id for p in pairs})
    kept = [i for i in ids if i not in excluded]
    if not kept:
        raise ValueError(f"{raw_dir}: nothing left to publish after exclusions")
    rows = audit_table([p for p in pairs if p.dialogue_id in set(kept)])
    return PublishPlan(kept, {k: v for k, v in excluded.items() if k in set(ids)}, rows)


def card_section(plan: PublishPlan, bound: float = DEFAULT_BOUND) -> str:
    """The Markdown the card gets about validation and the shortcut audit (passed to the export as its source note)."""
    lines = ["", "## Generation checks", "",
             f"Every test pair passed the acoustic contrast check `{CONTRAST_V1.version}` (score >= {CONTRAST_V1.pass_score:g} of "
             f"{CONTRAST_V1.max_score:g}); {len(plan.excluded)} dialogue(s) were left out by the contrast or human checks.", "",
             "### Shortcut audit", "",
             "How often one delivery feature alone picks the resonant clip (chance: 0.5 per pair, 0.25 per trajectory). "
             "The published SpeechEQ data leaks the label this way (\"slower\" is right on about 80 % of v1 pairs); "
             "this set was balanced so that no rule exceeds the bound.", "",
             audit_markdown(plan.audit_rows, bound=bound), ""]
    return "\n".join(lines)


def filtered_view(raw_dir: Path, keep: set[str], where: Path) -> Path:
    """A raw layout of symbolic links to the kept dialogue folders only."""
    for dataset_id, (subscale, _), paths in raw_dialogue_clips(raw_dir):
        if dataset_id in keep:
            folder = next(iter(paths.values())).parent.parent
            target = where / folder.parent.name / folder.name
            target.parent.mkdir(parents=True, exist_ok=True)
            os.symlink(folder.resolve(), target, target_is_directory=True)
    return where


def main(argv: list[str] | None = None) -> int:
    """Entry point of `speecheq publish`."""
    parser = argparse.ArgumentParser(prog="speecheq publish", description="Validate, export and push a generated folder (dry run by default).")
    parser.add_argument("raw_dir", metavar="RAW_DIR", help="validated generator output (e.g. from speecheq generate)")
    parser.add_argument("export_dir", metavar="EXPORT_DIR", help="where the Hub folder (README.md + data/*.parquet) is written")
    parser.add_argument("--repo-id", required=True, help="Hub dataset repo, e.g. owner/SpeechEQ-extended")
    parser.add_argument("--push", action="store_true", help="really upload (default: dry run, no network)")
    parser.add_argument("--private", action="store_true")
    parser.add_argument("--exclusions", default=None, metavar="EXCLUDE.json", help="from `speecheq human-check import`")
    parser.add_argument("--keep-low-contrast", action="store_true", help="publish pairs below the contrast pass mark too")
    parser.add_argument("--bound", type=float, default=DEFAULT_BOUND)
    parser.add_argument("--allow-over-bound", action="store_true", help="publish even if a shortcut rule exceeds the bound")
    parser.add_argument("--pretty-name", default="SpeechEQ (generated)")
    parser.add_argument("--license", default=None, help="Hub license id for the card (default cc-by-4.0, which the card says was a default)")
    parser.add_argument("--overwrite", action="store_true", help="replace an earlier SpeechEQ export at EXPORT_DIR (nothing else is ever replaced)")
    parser.add_argument("--cache", default=None, help="feature cache file")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    from .export import build_export
    from .export import check_destination
    from .export import summarize
    from .features import FeatureCache
    from .features import default_cache_path
    from .human_check import load_exclusions
    from .push import push_folder

    try:
        # Before the (long) checks: the export may neither replace what it did not write nor sit in the raw data.
        check_destination(Path(args.export_dir), overwrite=args.overwrite, sources=(Path(args.raw_dir),))
        exclusions = load_exclusions(args.exclusions) if args.exclusions else {}
        plan = plan_publication(args.raw_dir, exclusions=exclusions, keep_low_contrast=args.keep_low_contrast,
                                cache=FeatureCache(args.cache or default_cache_path()))
        for dataset_id, reasons in sorted(plan.excluded.items()):
            print(f"left out {dataset_id}: {'; '.join(reasons)}")
        if not passes_bound(plan.audit_rows, args.bound) and not args.allow_over_bound:
            print(audit_markdown(plan.audit_rows, bound=args.bound), file=sys.stderr)
            raise ValueError(f"a shortcut rule exceeds the {args.bound:.0%} bound (see the table); rebalance, or pass --allow-over-bound")
        with tempfile.TemporaryDirectory(prefix="speecheq-publish-") as tmp:
            source = Path(args.raw_dir)
            if plan.excluded:
                source = filtered_view(source, set(plan.kept), Path(tmp) / "raw")
            result = build_export(source, args.export_dir, strict=True, overwrite=args.overwrite, pretty_name=args.pretty_name,
                                  license=args.license, source_note=card_section(plan, args.bound))
        print(summarize(result))
        files = push_folder(args.export_dir, args.repo_id, dry_run=not args.push, private=args.private)
        verb = "Uploaded" if args.push else "Dry run: would upload"
        print(f"{verb} {len(files)} files ({sum(f.size_bytes for f in files) / 1e6:.1f} MB) to datasets/{args.repo_id}")
        for f in files:
            print(f"  {f.path_in_repo}")
    except (OSError, ValueError, RuntimeError) as exc:
        print(f"speecheq publish: error: {exc}", file=sys.stderr)
        return exit_status(exc)
    return 0
