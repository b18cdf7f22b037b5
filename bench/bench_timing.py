"""Timing helpers the runner benches share: a method wrapped to report its calls' durations, and the wait on an iterator."""

from __future__ import annotations

import time
from collections.abc import Callable
from collections.abc import Iterator


def time_calls(owner, name: str, record: Callable[[float], None], clock: Callable[[], float] = time.perf_counter) -> None:
    """Replace `owner.name` by a wrapper that passes each call's duration (by `clock`) to `record`, also when it raises."""
    inner = getattr(owner, name)

    def timed(*args, **kwargs):
        began = clock()
        try:
            return inner(*args, **kwargs)
        finally:
            record(clock() - began)

    setattr(owner, name, timed)


def time_waits(items: Iterator, record: Callable[[int, float], None]) -> Iterator:
    """The items of `items`, passing (index, seconds the caller waited for it) to `record`; closing this closes `items`."""
    index = 0
    try:
        while True:
            began = time.perf_counter()
            try:
                item = next(items)
            except StopIteration:
                return
            finally:
                record(index, time.perf_counter() - began)
            index += 1
            yield item
    finally:
        items.close()
