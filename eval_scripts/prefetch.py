"""Loading ahead: the next chunks' clips are decoded (and their log-mels computed) while the model answers the current one.

Three ways, one result: in the runner's own thread (depth 0), in one background
thread (`prefetched`), or in worker processes (`load_ahead` with workers > 0),
which keep decoding and log-mels off the interpreter that drives the GPU.
"""

from __future__ import annotations

import atexit
import logging
import os
from collections import deque
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

logger = logging.getLogger(__name__)

Item = TypeVar("Item")
Loaded = TypeVar("Loaded")
MAX_AUTO_WORKERS = 4  # worker processes when none are asked for, on a GPU (each decodes whole dialogues)


def prefetched(items: Iterable[Item], load: Callable[[Item], Loaded], depth: int = 1) -> Iterator[Loaded]:
    """`load(item)` for each item, in order, with up to `depth` items loaded ahead in one background thread.

    Decoding (FFmpeg) and feature extraction release the GIL, so on a GPU they
    overlap the model entirely and on a CPU they fill the cores a decode loop
    leaves idle. depth 0 loads in the caller's thread. An exception raised by
    `load` surfaces where its result would have been yielded. Closing the
    iterator early cancels the loads not yet started and waits for the one running.
    """
    if depth <= 0:
        for item in items:
            yield load(item)
        return
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="speecheq-loader")
    pending = deque()
    try:
        for item in items:
            pending.append(pool.submit(load, item))
            if len(pending) > depth:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    finally:
        for future in pending:
            future.cancel()
        pool.shutdown(wait=True)


def worker_count(requested: int | None, device) -> int:
    """Loader worker processes: as requested, else MAX_AUTO_WORKERS (at most the spare cores) on an accelerator and 0 on CPU.

    On a CPU the model needs every core; on a GPU the interpreter that drives it must not
    also decode MP3s and compute log-mels (the loader thread made the GPU wait ~38 ms
    per query at batch 32 on an H200, issue #13).
    """
    if requested is not None:
        return requested
    if getattr(device, "type", "cpu") == "cpu":
        return 0
    return max(0, min(MAX_AUTO_WORKERS, (os.cpu_count() or 1) - 1))


def load_ahead(chunks: list[list[int]], load, dataset, model, settings, depth: int, workers: int = 0) -> Iterator:
    """`load(dataset, chunk, model, prepare_for)` of each chunk of row indices, in order; see the module docstring.

    With workers > 0 each dialogue is loaded in a worker process by the same `load`, with a
    stand-in for the model that runs `model.clip_preparer()` on the clips; the results
    come back to `model.adopt_prepared`. `load` must then be picklable (a module-level function).
    """
    if workers <= 0:
        prepare_for = settings if depth else None  # in the caller's thread, features are computed when first needed
        return prefetched(chunks, lambda chunk: load(dataset, chunk, model, prepare_for), depth=depth)
    return _in_processes(chunks, load, dataset, model, settings, max(1, depth), workers)


class ClipPreparing:
    """Stands in for the model inside a worker process: its sampling rate, and `prepare_clips` through a picklable preparer."""

    def __init__(self, sampling_rate: int | None, preparer) -> None:
        self.sampling_rate = sampling_rate
        self.preparer = preparer
        self.prepared: list[tuple[object, object]] = []  # (clip, value): pickled together, the clips stay the dialogue's own

    def prepare_clips(self, clips) -> None:
        if self.preparer is not None:
            self.prepared += [(clip, self.preparer(clip)) for clip in clips]


def _load_in_worker(load, rows: dict, stand_in: ClipPreparing, settings):
    dialogues, failed = load(rows, list(rows), stand_in, settings)
    return dialogues, failed, stand_in.prepared


def _worker_setup() -> None:
    # One thread per worker: the workers are the parallelism, and the model process needs the cores.
    try:
        import torch

        torch.set_num_threads(1)
    except ImportError:
        pass


_POOLS: dict[int, object] = {}  # worker count -> its process pool, kept for the life of the process


def worker_pool(workers: int):
    """(the process pool of `workers` loader workers, whether it is new); started once and kept: a spawned worker takes seconds to start."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    pool = _POOLS.get(workers)
    if pool is not None and not getattr(pool, "_broken", False):
        return pool, False
    # spawn, not fork: the parent holds CUDA and torch's thread pools, which a forked child must not touch.
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"), initializer=_worker_setup)
    _POOLS[workers] = pool
    atexit.register(pool.shutdown, wait=False, cancel_futures=True)
    return pool, True


def _in_processes(chunks, load, dataset, model, settings, depth: int, workers: int):
    pool, new = worker_pool(workers)
    stand_in = ClipPreparing(model.sampling_rate, model.clip_preparer())
    if new:  # start every worker now, each importing what a load needs, instead of one by one inside the first chunks
        for _ in range(workers):
            pool.submit(_load_in_worker, load, {}, stand_in, settings)
    pending: deque = deque()

    def submit(chunk):
        # Rows are read here (their audio still encoded); each dialogue is one task, so a chunk spreads over the workers.
        return [pool.submit(_load_in_worker, load, {k: dataset[k]}, stand_in, settings) for k in chunk]

    try:
        for chunk in chunks:
            pending.append(submit(chunk))
            if len(pending) > depth:
                yield _collect(pending.popleft(), model)
        while pending:
            yield _collect(pending.popleft(), model)
    finally:
        for futures in pending:
            for future in futures:
                future.cancel()


def _collect(futures, model):
    dialogues, failed = [], []
    for future in futures:
        loaded, bad, prepared = future.result()
        for clip, value in prepared:
            model.adopt_prepared(clip, value)
        dialogues += loaded
        failed += bad
    return dialogues, failed
