"""Publish an exported SpeechEQ folder to the Hugging Face Hub, after checking offline that it is what it claims to be.

The token comes from huggingface_hub's usual places (HF_TOKEN, or `hf auth login`).
"""

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


def check_export(folder: str | os.PathLike) -> dict:
    """Everything a push would send, checked offline; returns the card's YAML header. ValueError names each problem.

    The card's YAML parses and has `configs` and `dataset_info`; its features are the parquet
    shards' schema; every shard opens and the row counts add up to the card's; the folder holds
    nothing but what an export writes (the local export marker is never sent).
    """
    import datasets
    import pyarrow.parquet as pq
    import yaml

    from .export import MARKER_FILE

    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"export folder not found: {folder}")
    card = folder / "README.md"
    if not card.is_file():
        raise FileNotFoundError(f"{folder}: no README.md card (export it with `speecheq dataset build`)")
    shards = sorted((folder / "data").glob("*.parquet"))
    if not shards:
        raise FileNotFoundError(f"{folder}: no data/*.parquet shards (export it with `speecheq dataset build`)")
    sendable = {p for pattern in UPLOAD_PATTERNS for p in folder.glob(pattern) if p.is_file()}
    stray = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*")
                   if p.is_file() and p not in sendable and p.name != MARKER_FILE)
    if stray:
        raise ValueError(f"{folder}: holds files that are not part of a dataset export ({', '.join(stray[:5])}); remove them first")
    text = card.read_text(encoding="utf-8")
    parts = text.split("---", 2)
    try:
        if not text.startswith("---") or len(parts) < 3:
            raise ValueError("no YAML header between '---' lines")
        header = yaml.safe_load(parts[1])
        if not isinstance(header, dict):
            raise ValueError("the header is not a mapping")
        configs, info = header["configs"], header["dataset_info"]
        features = datasets.Features._from_yaml_list(info["features"])
        expected_rows = sum(split["num_examples"] for split in info["splits"])
        patterns = [f["path"] for config in configs for f in config["data_files"]]
    except (yaml.YAMLError, KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{card}: the card's YAML is not usable ({type(exc).__name__}: {exc})") from None
    unmatched = [s.relative_to(folder).as_posix() for s in shards if not any(Path(s.relative_to(folder).as_posix()).match(p) for p in patterns)]
    if unmatched:
        raise ValueError(f"{card}: configs.data_files ({', '.join(patterns)}) do not cover {', '.join(unmatched)}")
    expected_schema = features.arrow_schema
    rows = 0
    for shard in shards:
        try:
            parquet = pq.ParquetFile(shard)
        except Exception as exc:  # pyarrow raises ArrowInvalid/OSError variants for a damaged file
            raise ValueError(f"{shard}: not a readable parquet file ({exc})") from None
        schema = parquet.schema_arrow
        if not schema.remove_metadata().equals(expected_schema.remove_metadata()):
            differing = sorted(set(map(str, schema)) ^ set(map(str, expected_schema)))
            raise ValueError(f"{shard}: its columns do not match the card's features ({'; '.join(differing[:4])})")
        rows += parquet.metadata.num_rows
    if rows != expected_rows:
        raise ValueError(f"{card}: the card says {expected_rows} rows, the shards hold {rows}")
    return header


def plan_upload(folder: str | os.PathLike) -> list[PlannedFile]:
    """The files of an exported folder that a push uploads, after check_export; errors name what is wrong."""
    folder = Path(folder)
    check_export(folder)
    # The same patterns upload_folder is given, so the plan lists exactly what a push sends.
    files = [path for pattern in UPLOAD_PATTERNS for path in sorted(folder.glob(pattern)) if path.is_file()]
    return [PlannedFile(f.relative_to(folder).as_posix(), f.stat().st_size) for f in files]


def check_card_matches(folder: str | os.PathLike, *, license: str | None, pretty_name: str | None) -> None:
    """A --license / --pretty-name given to push must be what the card says (push never edits the card)."""
    header = check_export(folder)
    for flag, key, value in (("--license", "license", license), ("--pretty-name", "pretty_name", pretty_name)):
        if value is not None and header.get(key) != value:
            raise ValueError(f"{flag} {value!r}, but the card says {header.get(key)!r}; export again with {flag} {value!r}")


def push_folder(
    folder: str | os.PathLike,
    repo_id: str,
    *,
    dry_run: bool = False,
    private: bool = False,
    revision: str | None = None,
    commit_message: str = "Upload SpeechEQ dataset",
    license: str | None = None,
    pretty_name: str | None = None,
) -> list[PlannedFile]:
    """Upload the export to the dataset repo `repo_id` (created if absent); dry_run checks and plans only.

    The token comes from huggingface_hub's usual places (HF_TOKEN, or `hf auth login`);
    it is never logged or written.
    """
    if "/" not in repo_id or repo_id.count("/") != 1 or not all(repo_id.split("/")):
        raise ValueError(f"repo id {repo_id!r} must look like 'owner/name'")
    check_card_matches(folder, license=license, pretty_name=pretty_name)
    plan = plan_upload(folder)
    if dry_run:
        return plan
    from huggingface_hub import HfApi
    from huggingface_hub import get_token

    token = get_token()
    if not token:
        raise PermissionError("no Hugging Face token: set HF_TOKEN or run `hf auth login` to push")
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
