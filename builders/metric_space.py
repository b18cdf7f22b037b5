"""`speecheq metric publish OUT_DIR [--repo-id ID] [--dry-run] [--overwrite]`: the metric module as a Hub Space.

The Space is the evaluate layout: `<repo name>.py` (the evaluate module, named
after the repository so `evaluate.load("<owner>/<name>")` finds it; the
default SpeechEQ/speecheq gives `speecheq.py`), the core files it imports, and
the files checked in beside the module for the Space: the metric card as
README.md (its YAML header configures the Space), `app.py` (a gradio
form over the module) and `requirements.txt`. A dry run assembles and checks the
folder offline and uploads nothing; a real run needs a Hugging Face token.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import shutil
import sys
from pathlib import Path

import speecheq_metric
from speecheq_dataset.files import USER_MISTAKES

logger = logging.getLogger(__name__)

DEFAULT_REPO_ID = "SpeechEQ/speecheq"
MODULE_FILE = "speecheq_metric.py"
# Copied as they are from the module folder (requirements.txt: pins checked against setup.cfg by a test).
SPACE_FILES = ("README.md", "app.py", "requirements.txt")


def core_files() -> list[Path]:
    """The module's own files: the evaluate script and every core file it imports."""
    root = Path(speecheq_metric.MODULE_PATH)
    return sorted(p for p in root.glob("*.py") if p.name not in ("__init__.py", *SPACE_FILES))


def _script_name(repo_id: str) -> str:
    """`<name>.py` for repo `owner/name`; ValueError when evaluate could not import it."""
    if repo_id.count("/") != 1:
        raise ValueError(f"--repo-id must be 'owner/name', got {repo_id!r}")
    name = repo_id.split("/")[1]
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise ValueError(f"--repo-id name {name!r} must be a Python identifier: evaluate imports <name>.py as a module")
    taken = ({p.stem for p in core_files()} - {Path(MODULE_FILE).stem}) | {Path(f).stem for f in SPACE_FILES if f.endswith(".py")}
    if name in taken:
        raise ValueError(f"--repo-id name {name!r} clashes with the Space's file {name}.py; choose another name")
    return f"{name}.py"


def assemble_space(out_dir: Path, repo_id: str = DEFAULT_REPO_ID, *, overwrite: bool = False) -> list[Path]:
    """Write the Space files into `out_dir` and return them.

    out_dir must be new or empty, or (with `overwrite`) hold only an earlier Space's files.
    """
    script = _script_name(repo_id)
    if out_dir.exists() and any(out_dir.iterdir()):
        ours = {script, *SPACE_FILES} | {p.name for p in core_files() if p.name != MODULE_FILE}
        present = sorted(p.name for p in out_dir.iterdir())
        foreign = [name for name in present if name not in ours or not (out_dir / name).is_file()]
        if foreign:
            raise ValueError(f"{out_dir} holds files a Space of this metric does not have ({', '.join(foreign[:5])}); "
                             "choose an empty or new folder")
        if not overwrite:
            raise ValueError(f"{out_dir} already holds a Space folder; pass --overwrite to replace it")
        for name in present:
            (out_dir / name).unlink()
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for src in core_files():
        dest = out_dir / (script if src.name == MODULE_FILE else src.name)
        shutil.copyfile(src, dest)
        written.append(dest)
    for name in SPACE_FILES:
        shutil.copyfile(Path(speecheq_metric.MODULE_PATH) / name, out_dir / name)
        written.append(out_dir / name)
    return sorted(written)


def check_space(out_dir: Path, repo_id: str = DEFAULT_REPO_ID) -> dict:
    """Load the assembled module with evaluate (offline, from the folder) and score the card's example."""
    import evaluate

    module = evaluate.load(str(out_dir / _script_name(repo_id)))
    result = module.compute(predictions=[[1, 2], [2, 1]], references=[[1, 2], [1, 1]], n_bootstrap=0)
    expected = {"acc_turn4": 0.5, "acc_turn6": 1.0, "acc_all": 0.75, "acc_traj": 0.5, "invalid_rate": 0.0}
    wrong = {k: (result.get(k), v) for k, v in expected.items() if result.get(k) != v}
    if wrong:
        raise RuntimeError(f"the assembled Space module computes wrong values (got, expected): {wrong}")
    return result


def hub_token() -> str:
    """The Hugging Face token from huggingface_hub's usual places (HF_TOKEN, or `hf auth login`); ValueError without one."""
    from huggingface_hub import get_token

    token = get_token()
    if not token:
        raise ValueError("no Hugging Face token: set HF_TOKEN or run `hf auth login` to publish (or pass --dry-run)")
    return token


def upload_space(out_dir: Path, repo_id: str, token: str) -> str:
    """Create (if needed) the gradio Space and upload the folder; returns the commit URL."""
    from huggingface_hub import HfApi

    api = HfApi(token=token)
    api.create_repo(repo_id, repo_type="space", space_sdk="gradio", exist_ok=True)
    info = api.upload_folder(folder_path=str(out_dir), repo_id=repo_id, repo_type="space", commit_message="Publish the SpeechEQ metric")
    return str(getattr(info, "commit_url", info))


def main(argv: list[str] | None = None) -> int:
    """Entry point of `speecheq metric ...`; a user mistake is one line on stderr and exit status 2."""
    parser = argparse.ArgumentParser(prog="speecheq metric", description="Publish the SpeechEQ metric module as a Hub Space.")
    sub = parser.add_subparsers(dest="command", required=True)
    pub = sub.add_parser("publish", help="assemble the Space folder and upload it (or only check it with --dry-run)")
    pub.add_argument("out_dir", type=Path, help="empty or new folder for the Space files")
    pub.add_argument("--repo-id", default=DEFAULT_REPO_ID,
                     help=f"Space id owner/name; the module file is <name>.py (default {DEFAULT_REPO_ID}: evaluate.load('{DEFAULT_REPO_ID}'))")
    pub.add_argument("--dry-run", action="store_true", help="assemble and check offline; upload nothing (no token needed)")
    pub.add_argument("--overwrite", action="store_true", help="replace an earlier Space folder at OUT_DIR (nothing else)")
    args = parser.parse_args(argv)
    try:
        token = None if args.dry_run else hub_token()  # up front: nothing is written without a way to upload it
        files = assemble_space(args.out_dir, args.repo_id, overwrite=args.overwrite)
        result = check_space(args.out_dir, args.repo_id)
    except USER_MISTAKES as err:
        print(f"speecheq metric {args.command}: error: {err}", file=sys.stderr)
        raise SystemExit(2) from None
    logger.info("assembled %d files in %s; module loads and scores the example: %s", len(files), args.out_dir, result)
    plan = {"repo_id": args.repo_id, "repo_type": "space", "files": [p.name for p in files], "dry_run": args.dry_run}
    if args.dry_run:
        print(json.dumps(plan, indent=2))
        return 0
    try:
        url = upload_space(args.out_dir, args.repo_id, token)
    except OSError as err:  # huggingface_hub's HTTP and offline errors are OSErrors
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        print(f"speecheq metric {args.command}: error: uploading to spaces/{args.repo_id} failed: {first}", file=sys.stderr)
        return 1
    print(f"uploaded {args.repo_id}: {url}")
    return 0
