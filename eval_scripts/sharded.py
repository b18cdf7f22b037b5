"""The sharded, resumable loop of the tracks whose records are plain JSON objects (respond, interact, multibench).

The same contract as the forced-choice runner: every rank reads the shards
first; each process takes a contiguous slice of the pending items
(accelerate `split_between_processes`), works through it in chunks and
appends one fsynced line per finished item to its own `shards/rank<k>.jsonl`;
the main process gathers what every rank did and keeps, per item, the record
that stands (`store.latest_records`: a failure never replaces a success).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from eval_scripts import store

logger = logging.getLogger(__name__)


@dataclass
class ShardedResult:
    """What the main process gets back: every item's standing record in id order, how many this session did, its wall time."""

    records: list[dict]
    new: int
    wall_s: float


def run_pending(accelerator, run_dir: Path, ids: list[str], process_chunk: Callable[[list[int]], list[dict]], *, chunk_size: int,
                progress: bool, desc: str, unit: str = "dlg") -> ShardedResult | None:
    """Run `process_chunk(indices)` (one record per index, in order) over the pending items of every rank; None off the main process."""
    from tqdm.auto import tqdm

    is_main = accelerator.is_main_process
    previous = store.latest_records(store.read_shard_lines(run_dir), ids)
    done = {i for i, r in previous.items() if r["status"] == "ok"}
    pending = [k for k, i in enumerate(ids) if i not in done]
    if is_main and done:
        logger.info("resuming %s: %d of %d already done", run_dir, len(done), len(ids))
    accelerator.wait_for_everyone()  # every rank reads the shards before any rank appends

    new_records: list[dict] = []
    began = time.perf_counter()
    with accelerator.split_between_processes(pending) as mine:
        mine = list(mine)
        bar = tqdm(total=len(mine), disable=not (is_main and progress), unit=unit, desc=desc, dynamic_ncols=True)
        with store.ShardWriter(store.shard_path(run_dir, accelerator.process_index)) as writer:
            for start in range(0, len(mine), chunk_size):
                chunk = mine[start : start + chunk_size]
                for record in process_chunk(chunk):
                    writer.append(record)  # the commit point: an item is done once its line is in the shard
                    new_records.append(record)
                bar.update(len(chunk))
        bar.close()
    ordered, new = gather_standing(accelerator, previous, new_records, ids)
    wall = time.perf_counter() - began
    return None if ordered is None else ShardedResult(ordered, new, wall)


def gather_standing(accelerator, previous: dict, new_records: list, ids: list[str]) -> tuple[list | None, int]:
    """After every rank's loop: (the standing record of each id, in id order, on the main process, else None; how many records
    all ranks wrote this session). Earlier records are `previous` (id -> record, read from the shards before the loop)."""
    from accelerate.utils import gather_object

    gathered = gather_object(new_records) if accelerator.num_processes > 1 else new_records
    accelerator.wait_for_everyone()
    if not accelerator.is_main_process:
        return None, len(gathered)
    final = store.latest_records([*previous.values(), *gathered], ids)
    return [final[i] for i in ids if i in final], len(gathered)
