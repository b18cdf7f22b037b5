"""`speecheq metric publish OUT_DIR [--repo-id ID] [--dry-run]`: the metric module as a Hub Space.

The Space is the evaluate layout: `<repo name>.py` (the evaluate module, named
after the repository so `evaluate.load("<owner>/<name>")` finds it), the core
files it imports, the metric card as README.md (its YAML header configures the
Space), `app.py` (the evaluate gradio widget) and `requirements.txt`.
A dry run assembles and checks the folder offline and uploads nothing.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import shutil
from pathlib import Path

import speecheq_metric

logger = logging.getLogger(__name__)

DEFAULT_REPO_ID = "SpeechEQ/speecheq_metric"
MODULE_FILE = "speecheq_metric.py"
# Pinned like setup.cfg's `metric` extra; numba is optional (exact DTW falls back to pure Python).
REQUIREMENTS = ("evaluate==0.4.6", "numpy==2.4.6", "numba==0.68.1", "fastdtw==0.3.4")

_APP = '''"""Hub Space entry point: the evaluate widget of the SpeechEQ metric."""

from pathlib import Path

import evaluate
from evaluate.utils import launch_gradio_widget

module = evaluate.load(str(Path(__file__).with_name("{script}")))
launch_gradio_widget(module)
'''


def core_files() -> list[Path]:
    """The module's own files: the evaluate script and every core file it imports."""
    root = Path(speecheq_metric.MODULE_PATH)
    return sorted(p for p in root.glob("*.py") if p.name != "__init__.py")


def _script_name(repo_id: str) -> str:
    """`<name>.py` for repo `owner/name`; ValueError when evaluate could not import it."""
    if repo_id.count("/") != 1:
        raise ValueError(f"--repo-id must be 'owner/name', got {repo_id!r}")
    name = repo_id.split("/")[1]
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise ValueError(f"--repo-id name {name!r} must be a Python identifier: evaluate imports <name>.py as a module")
    taken = {p.stem for p in core_files()} - {Path(MODULE_FILE).stem}
    if name in taken:
        raise ValueError(f"--repo-id name {name!r} clashes with the core file {name}.py; choose another name")
    return f"{name}.py"


def assemble_space(out_dir: Path, repo_id: str = DEFAULT_REPO_ID, *, overwrite: bool = False) -> list[Path]:
    """Write the Space files into `out_dir` and return them.

    out_dir must be new or empty, or (with `overwrite`) hold only an earlier Space's files.
    """
    script = _script_name(repo_id)
    if out_dir.exists() and any(out_dir.iterdir()):
        ours = {script, "README.md", "app.py", "requirements.txt"} | {p.name for p in core_files() if p.name != MODULE_FILE}
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
    card = Path(speecheq_metric.MODULE_PATH) / "README.md"
    shutil.copyfile(card, out_dir / "README.md")
    (out_dir / "app.py").write_text(_APP.format(script=script), encoding="utf-8")
    (out_dir / "requirements.txt").write_text("\n".join(REQUIREMENTS) + "\n", encoding="utf-8")
    written += [out_dir / "README.md", out_dir / "app.py", out_dir / "requirements.txt"]
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


def upload_space(out_dir: Path, repo_id: str) -> str:
    """Create (if needed) the gradio Space and upload the folder; the token comes from the environment."""
    from huggingface_hub import HfApi

    api = HfApi()
    api.create_repo(repo_id, repo_type="space", space_sdk="gradio", exist_ok=True)
    info = api.upload_folder(folder_path=str(out_dir), repo_id=repo_id, repo_type="space", commit_message="Publish the SpeechEQ metric")
    return str(getattr(info, "commit_url", info))


def main(argv: list[str] | None = None) -> int:
    """Entry point of `speecheq metric ...`."""
    parser = argparse.ArgumentParser(prog="speecheq metric", description="Publish the SpeechEQ metric module as a Hub Space.")
    sub = parser.add_subparsers(dest="command", required=True)
    pub = sub.add_parser("publish", help="assemble the Space folder and upload it (or only check it with --dry-run)")
    pub.add_argument("out_dir", type=Path, help="empty or new folder for the Space files")
    pub.add_argument("--repo-id", default=DEFAULT_REPO_ID, help=f"Space id owner/name (default {DEFAULT_REPO_ID})")
    pub.add_argument("--dry-run", action="store_true", help="assemble and check offline; upload nothing")
    pub.add_argument("--overwrite", action="store_true", help="replace an earlier Space folder at OUT_DIR (nothing else)")
    args = parser.parse_args(argv)
    try:
        files = assemble_space(args.out_dir, args.repo_id, overwrite=args.overwrite)
        result = check_space(args.out_dir, args.repo_id)
    except ValueError as err:
        parser.error(str(err))
    logger.info("assembled %d files in %s; module loads and scores the example: %s", len(files), args.out_dir, result)
    plan = {"repo_id": args.repo_id, "repo_type": "space", "files": [p.name for p in files], "dry_run": args.dry_run}
    if args.dry_run:
        print(json.dumps(plan, indent=2))
        return 0
    print(f"uploaded {args.repo_id}: {upload_space(args.out_dir, args.repo_id)}")
    return 0
