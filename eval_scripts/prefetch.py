"""Loading ahead: the next chunk's clips are decoded while the model answers the current one."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from collections.abc import Iterable
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

Item = TypeVar("Item")
Loaded = TypeVar("Loaded")


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
