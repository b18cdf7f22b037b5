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
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TypeVar

from eval_scripts.records import DialogueRecord
from eval_scripts.records import RoundRecord
from eval_scripts.records import SchemaVersionError
from speecheq_dataset.files import stale_temporaries
from speecheq_dataset.files import write_bytes_atomic
from speecheq_dataset.secrecy import scrub_bytes

logger = logging.getLogger(__name__)
T = TypeVar("T")

SHARDS_DIR = "shards"
RUN_CONFIG = "run_config.json"
SAMPLES_FILE = "samples.jsonl"
RESULTS_FILE = "results.json"
# Files written whole through write_bytes_atomic (a kill mid-write can leave their temporaries).
ATOMIC_FILES = (SAMPLES_FILE, RESULTS_FILE, RUN_CONFIG)


def jsonl_line(record: DialogueRecord | dict) -> bytes:
    """One record as a JSONL line; shards and samples.jsonl share it, so their lines are byte-identical."""
    data = record.to_json() if isinstance(record, DialogueRecord) else record
    return scrub_bytes(json.dumps(data, ensure_ascii=False, sort_keys=True).encode("utf-8")) + b"\n"


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


def load_json_items(path: Path, check: Callable[[object, str], T], key: Callable[[T], str]) -> list[T]:
    """The items of an input JSONL file (profiles, task items), each checked by `check(data, "file:line")`; ids unique.

    Unlike a shard, every line must be JSON: an error names the file and the line.
    """
    items, seen = [], set()
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            data = json.loads(line)
        except ValueError as exc:
            raise ValueError(f"{where}: not JSON ({exc})") from None
        item = check(data, where)
        if key(item) in seen:
            raise ValueError(f"{where}: id {key(item)!r} appears twice")
        seen.add(key(item))
        items.append(item)
    return items


def read_records(path: Path) -> list[DialogueRecord]:
    """The DialogueRecords of a shard or samples file (a torn last line skipped); a record of another schema is refused."""
    records = []
    for data in read_jsonl(path):
        try:
            records.append(DialogueRecord.from_json(data))
        except SchemaVersionError as exc:
            raise SchemaVersionError(f"{path}: {exc}; use another --output-dir, or --overwrite to start over") from None
    return records


def shard_files(run_dir: Path) -> list[Path]:
    """The rank files of a run directory, in name order."""
    folder = Path(run_dir) / SHARDS_DIR
    return sorted(folder.glob("rank*.jsonl")) if folder.is_dir() else []


def read_shards(run_dir: Path) -> list[DialogueRecord]:
    """The runner's records in every rank file of a run directory, rank files in name order."""
    return [record for path in shard_files(run_dir) for record in read_records(path)]


def read_shard_lines(run_dir: Path) -> list[dict]:
    """The plain JSON records of every rank file (for run directories of other record types, such as the generative track's)."""
    return [record for path in shard_files(run_dir) for record in read_jsonl(path)]


def latest_records(records: Iterable, ids: Iterable[str]) -> dict:
    """Per known id, the record that stands: a later one replaces an earlier one, except that a failure never replaces a success.

    Records are DialogueRecords (the runner) or dicts with "id" and "status" (the generative track).
    """
    known = set(ids)
    kept: dict = {}
    for record in records:
        key, ok = _id_and_ok(record)
        if key in known and (ok or key not in kept or not _id_and_ok(kept[key])[1]):
            kept[key] = record
    return kept


def _id_and_ok(record) -> tuple[str, bool]:
    if isinstance(record, dict):
        return record["id"], record["status"] == "ok"
    return record.id, record.ok


def read_samples(run_dir: Path) -> list[DialogueRecord]:
    """The dialogue records of a finished run's samples.jsonl, in dataset order."""
    path = Path(run_dir) / SAMPLES_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no samples file (the run has not finished)")
    return read_records(path)


def read_sample_lines(run_dir: Path) -> list[dict]:
    """The plain JSON records of a finished run's samples.jsonl (for run directories of other record types)."""
    path = Path(run_dir) / SAMPLES_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no samples file (the run has not finished)")
    return read_jsonl(path)


def iter_rounds(records: Iterable[DialogueRecord]) -> Iterator[tuple[DialogueRecord, RoundRecord]]:
    """(dialogue record, round record) for every answered query of the records, in file order."""
    for record in records:
        for entry in record.rounds():
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
        self._handle = open(self.path, "ab")  # plain open(): the usual mode under the umask

    def append(self, record: DialogueRecord) -> None:
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


def write_jsonl_atomic(path: Path, records: list[DialogueRecord] | list[dict]) -> None:
    """Write a whole JSONL file atomically."""
    data = b"".join(jsonl_line(r) for r in records)
    write_bytes_atomic(Path(path), data)


def remove_stale_temporaries(run_dir: Path) -> list[Path]:
    """Delete the temporaries an interrupted atomic write left in a run directory; returns them."""
    stale = stale_temporaries(run_dir, ATOMIC_FILES)
    for path in stale:
        path.unlink(missing_ok=True)
        logger.info("removed %s, left by an interrupted write", path)
    return stale
