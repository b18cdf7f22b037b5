"""Publish an exported SpeechEQ folder to the Hugging Face Hub (token from the environment only)."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger(__name__)

# What a dataset repository of ours holds; anything else in the folder stays local.
UPLOAD_PATTERNS: tuple[str, ...] = ("README.md", "data/*.parquet", ".gitattributes")


@dataclass(frozen=True)
class PlannedFile:
    """One file an upload would send: its path in the repo and its size."""

    path_in_repo: str
    size_bytes: int


def plan_upload(folder: str | os.PathLike) -> list[PlannedFile]:
    """The files of an exported folder that a push uploads; errors name what is missing."""
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"export folder not found: {folder}")
    if not (folder / "README.md").is_file():
        raise FileNotFoundError(f"{folder}: no README.md card (export it with `speecheq dataset build`)")
    if not any((folder / "data").glob("*.parquet")):
        raise FileNotFoundError(f"{folder}: no data/*.parquet shards (export it with `speecheq dataset build`)")
    # The same patterns upload_folder is given, so the plan lists exactly what a push sends.
    files = [path for pattern in UPLOAD_PATTERNS for path in sorted(folder.glob(pattern)) if path.is_file()]
    return [PlannedFile(f.relative_to(folder).as_posix(), f.stat().st_size) for f in files]


def push_folder(
    folder: str | os.PathLike,
    repo_id: str,
    *,
    dry_run: bool = False,
    private: bool = False,
    revision: str | None = None,
    commit_message: str = "Upload SpeechEQ dataset",
) -> list[PlannedFile]:
    """Upload the export to the dataset repo `repo_id` (created if absent); dry_run only plans.

    The token comes from the environment (HF_TOKEN) or the user's huggingface-cli login;
    it is never logged or written.
    """
    if "/" not in repo_id or repo_id.count("/") != 1 or not all(repo_id.split("/")):
        raise ValueError(f"repo id {repo_id!r} must look like 'owner/name'")
    plan = plan_upload(folder)
    if dry_run:
        return plan
    from huggingface_hub import HfApi
    from huggingface_hub import get_token

    token = get_token()
    if not token:
        raise PermissionError("no Hugging Face token: set HF_TOKEN (or run `hf auth login`) to push")
    api = HfApi(token=token)
    api.create_repo(repo_id, repo_type="dataset", private=private, exist_ok=True)
    logger.info("uploading %d files to datasets/%s", len(plan), repo_id)
    api.upload_folder(
        folder_path=os.fspath(folder),
        repo_id=repo_id,
        repo_type="dataset",
        revision=revision,
        commit_message=commit_message,
        allow_patterns=list(UPLOAD_PATTERNS),
    )
    return plan
