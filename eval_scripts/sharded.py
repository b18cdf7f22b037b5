"""The sharded, resumable loop every track runs: the forced-choice runner, respond, interact and multibench.

Every rank reads the shards first; each process takes a contiguous slice of
the pending items (accelerate `split_between_processes`), works through it in
chunks and appends one fsynced line per finished item to its own
`shards/rank<k>.jsonl`, in dataset order (the commit point: an item is done
once its line is in the shard); the main process gathers what every rank did
and keeps, per item, the record that stands (`store.latest_records`: a
failure never replaces a success). Rank 0's progress bar counts every rank's
shard lines, not only its own share.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from eval_scripts import store

logger = logging.getLogger(__name__)


class RunProgress:
    """The run's progress bar on rank 0, counting the records every rank has appended to its shard since the start."""

    def __init__(self, run_dir: Path, *, total: int, enabled: bool, desc: str, unit: str = "dlg"):
        from tqdm.auto import tqdm

        self.folder = Path(run_dir) / store.SHARDS_DIR
        self.enabled = enabled
        # Complete lines only: a torn last line left by a crash is cut off (store.repair_tail) before appends resume.
        self.offsets = {path: path.read_bytes().rfind(b"\n") + 1 for path in self.folder.glob("rank*.jsonl")} if enabled else {}
        self.written = 0
        self.bar = tqdm(total=total, disable=not enabled, unit=unit, desc=desc, dynamic_ncols=True)

    def refresh(self, own: int) -> None:
        """After rank 0 finished `own` dialogues: move the bar to the number every rank has written."""
        if not self.enabled:
            return
        for path in self.folder.glob("rank*.jsonl"):
            with open(path, "rb") as handle:  # only what was appended since the last look
                handle.seek(self.offsets.get(path, 0))
                appended = handle.read()
            complete = appended.rfind(b"\n") + 1  # a line still being written is counted next time
            self.offsets[path] = self.offsets.get(path, 0) + complete
            self.written += appended[:complete].count(b"\n")
        self.bar.update(max(0, min(self.bar.total, self.written) - self.bar.n))

    def close(self) -> None:
        self.bar.close()


def answer_pending(accelerator, run_dir: Path, ids: list[str], pending: list[int], chunk_size: int,
                   answer_chunks: Callable[[list[list[int]]], Iterator[dict]], progress: Callable[[int], None]) -> list:
    """Each process answers its share of the pending rows, chunk by chunk, and appends every record to its own shard.

    `answer_chunks(chunks)` yields, per chunk of row indices, the chunk's records by dialogue id;
    they are appended in dataset order, each durable before the next. Returns every process's
    new records (gathered), on every process.
    """
    from accelerate.utils import gather_object

    new_records: list = []
    with accelerator.split_between_processes(pending) as mine:
        mine = list(mine)
        chunks = [mine[start : start + chunk_size] for start in range(0, len(mine), chunk_size)]
        with store.ShardWriter(store.shard_path(run_dir, accelerator.process_index)) as writer, \
                contextlib.closing(answer_chunks(chunks)) as answers:
            for chunk, by_id in zip(chunks, answers):
                for k in chunk:  # dataset order within the chunk
                    writer.append(by_id[ids[k]])
                    new_records.append(by_id[ids[k]])
                progress(len(chunk))
    gathered = gather_object(new_records) if accelerator.num_processes > 1 else new_records
    accelerator.wait_for_everyone()
    return gathered


def standing(previous: dict, gathered: list, ids: list[str]) -> list:
    """The record that stands for each id, in id order: `previous` (read before the loop) updated by this session's records."""
    final = store.latest_records([*previous.values(), *gathered], ids)
    return [final[i] for i in ids if i in final]


@dataclass
class ShardedResult:
    """What the main process gets back: every item's standing record in id order, how many this session did, its wall time."""

    records: list[dict]
    new: int
    wall_s: float


def run_pending(accelerator, run_dir: Path, ids: list[str], process_chunk: Callable[[list[int]], list[dict]], *, chunk_size: int,
                progress: bool, desc: str, unit: str = "dlg") -> ShardedResult | None:
    """The loop for tracks whose records are plain JSON objects with "id" and "status": `process_chunk(indices)` gives one
    record per index, in order. Returns the result on the main process, None elsewhere."""
    is_main = accelerator.is_main_process
    previous = store.latest_records(store.read_shard_lines(run_dir), ids)
    done = {i for i, r in previous.items() if r["status"] == "ok"}
    pending = [k for k, i in enumerate(ids) if i not in done]
    if is_main and done:
        logger.info("resuming %s: %d of %d already done", run_dir, len(done), len(ids))
    accelerator.wait_for_everyone()  # every rank reads the shards before any rank appends

    began = time.perf_counter()
    bar = RunProgress(run_dir, total=len(pending), enabled=is_main and progress and bool(pending), desc=desc, unit=unit)

    def answer_chunks(chunks: list[list[int]]) -> Iterator[dict]:
        for chunk in chunks:
            yield {ids[k]: record for k, record in zip(chunk, process_chunk(chunk))}

    gathered = answer_pending(accelerator, run_dir, ids, pending, chunk_size, answer_chunks, bar.refresh)
    bar.close()
    if not is_main:
        return None
    return ShardedResult(standing(previous, gathered, ids), len(gathered), time.perf_counter() - began)
