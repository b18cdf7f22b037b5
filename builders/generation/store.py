"""Resumable stage outputs: one append-only JSONL file per stage, one record per item attempt-run.

A record is written only when an item is finished with (`ok`), rejected with
its reasons after its bounded retries (`rejected`), or stopped by an error that
a re-run should retry (`failed`). Reading takes the last record per item, so a
re-run skips `ok`/`rejected` items and redoes `failed` ones; a line cut short
by a crash is ignored. Files that records point to are written atomically first.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from pathlib import Path

from speecheq_dataset.secrecy import scrub_bytes

logger = logging.getLogger(__name__)

OK, REJECTED, FAILED = "ok", "rejected", "failed"
FINISHED = frozenset({OK, REJECTED})


class StageStore:
    """The JSONL record file of one stage (thread-safe appends)."""

    def __init__(self, work_dir: Path | str, stage: str):
        self.path = Path(work_dir) / f"{stage}.jsonl"
        self.stage = stage
        self._lock = threading.Lock()

    def load(self) -> dict[str, dict]:
        """item_id -> its last record (a truncated or corrupt line is skipped with a warning)."""
        records: dict[str, dict] = {}
        if not self.path.is_file():
            return records
        with self.path.open("r", encoding="utf-8") as lines:
            for number, line in enumerate(lines, start=1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                    records[record["item_id"]] = record
                except (ValueError, KeyError, TypeError):
                    logger.warning("%s line %d: unreadable record skipped (interrupted write?)", self.path, number)
        return records

    def append(self, record: dict) -> None:
        """Append one record and make it durable before returning."""
        if record.get("status") not in (OK, REJECTED, FAILED) or not record.get("item_id"):
            raise ValueError(f"{self.stage}: a record needs item_id and status ok/rejected/failed, got {record!r:.200}")
        line = scrub_bytes(json.dumps(record, ensure_ascii=False, sort_keys=True).encode("utf-8")) + b"\n"  # no key reaches a file
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("ab") as out:
                out.write(line)
                out.flush()
                os.fsync(out.fileno())
