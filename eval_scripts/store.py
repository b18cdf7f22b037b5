"""Crash-safe files of a run directory: per-rank append-only JSONL and atomic JSON writes.

A finished dialogue is one JSON line appended to `shards/rank<k>.jsonl`, flushed
and fsynced before the next one starts, so a SIGKILL loses at most the dialogue
in flight. A torn last line (killed mid-write) is ignored on reading and cut off
before the rank appends again. Everything written passes through
`speecheq_dataset.secrecy.scrub_bytes`, so no key the process read reaches a file.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

from speecheq_dataset.secrecy import scrub_bytes

logger = logging.getLogger(__name__)

SHARDS_DIR = "shards"
RUN_CONFIG = "run_config.json"
SAMPLES_FILE = "samples.jsonl"


def jsonl_line(record: dict) -> bytes:
    """One record as a JSONL line; shards and samples.jsonl share it, so their lines are byte-identical."""
    return scrub_bytes(json.dumps(record, ensure_ascii=False, sort_keys=True).encode("utf-8")) + b"\n"


def shard_path(run_dir: Path, rank: int) -> Path:
    return Path(run_dir) / SHARDS_DIR / f"rank{rank}.jsonl"


def read_jsonl(path: Path) -> list[dict]:
    """Complete records of a JSONL file; a torn (unterminated, unparsable) last line is skipped."""
    path = Path(path)
    if not path.is_file():
        return []
    data = path.read_bytes()
    records = []
    lines = data.split(b"\n")
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except ValueError:
            if i == len(lines) - 1:
                logger.warning("%s: ignoring a torn last line (%d bytes) left by an interrupted run", path, len(line))
            else:
                raise ValueError(f"{path}: line {i + 1} is not JSON; the run directory is damaged") from None
    return records


def read_shards(run_dir: Path) -> list[dict]:
    """Records of every rank file of a run directory, rank files in name order."""
    folder = Path(run_dir) / SHARDS_DIR
    if not folder.is_dir():
        return []
    records: list[dict] = []
    for path in sorted(folder.glob("rank*.jsonl")):
        records.extend(read_jsonl(path))
    return records


def latest_records(records: Iterable[dict], ids: Iterable[str]) -> dict[str, dict]:
    """Per known id, the record that stands: a later one replaces an earlier one, except that a failure never replaces a success."""
    known = set(ids)
    kept: dict[str, dict] = {}
    for record in records:
        key = record["id"]
        if key in known and (record["status"] == "ok" or kept.get(key, {}).get("status") != "ok"):
            kept[key] = record
    return kept


def read_samples(run_dir: Path) -> list[dict]:
    """The dialogue records of a finished run's samples.jsonl, in dataset order."""
    path = Path(run_dir) / SAMPLES_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no samples file (the run has not finished)")
    return read_jsonl(path)


def iter_rounds(records: Iterable[dict]) -> Iterator[tuple[dict, dict]]:
    """(dialogue record, round entry) for every answered query of the records, in file order."""
    for record in records:
        for trajectory in record["trajectories"]:
            for entry in trajectory["rounds"]:
                yield record, entry


def repair_tail(path: Path) -> None:
    """Cut a torn last line off so the next append starts on a fresh line."""
    path = Path(path)
    if not path.is_file():
        return
    data = path.read_bytes()
    if not data or data.endswith(b"\n"):
        return
    keep = data.rfind(b"\n") + 1
    with open(path, "r+b") as handle:
        handle.truncate(keep)
        handle.flush()
        os.fsync(handle.fileno())


class ShardWriter:
    """Appends one JSON line per finished dialogue, durable before returning."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        repair_tail(self.path)
        self._handle = open(self.path, "ab")

    def append(self, record: dict) -> None:
        self._handle.write(jsonl_line(record))
        self._handle.flush()
        os.fsync(self._handle.fileno())

    def close(self) -> None:
        self._handle.close()

    def __enter__(self) -> ShardWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def write_json_atomic(path: Path, obj: object) -> None:
    """Write JSON through a temp file + fsync + rename: readers see the old or the new file, never half."""
    write_bytes_atomic(Path(path), scrub_bytes((json.dumps(obj, indent=2, ensure_ascii=False, sort_keys=False) + "\n").encode("utf-8")))


def write_jsonl_atomic(path: Path, records: list[dict]) -> None:
    """Write a whole JSONL file atomically."""
    data = b"".join(jsonl_line(r) for r in records)
    write_bytes_atomic(Path(path), data)


def write_bytes_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
