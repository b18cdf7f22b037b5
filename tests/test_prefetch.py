"""Loading ahead (eval_scripts/prefetch.py): same items, same order, bounded look-ahead, errors where they belong."""

from __future__ import annotations

import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eval_scripts.prefetch import prefetched


class Loads:
    """A load function that records which item it loaded, from which thread, and when compared with consumption."""

    def __init__(self, fail_on: int | None = None, delay_s: float = 0.0) -> None:
        self.started: list[int] = []
        self.threads: set[str] = set()
        self.consumed = 0
        self.ahead_seen: list[int] = []  # at each load: how many items beyond the consumed ones had started
        self.fail_on, self.delay_s = fail_on, delay_s

    def __call__(self, item: int) -> str:
        self.started.append(item)
        self.threads.add(threading.current_thread().name)
        self.ahead_seen.append(len(self.started) - self.consumed)
        time.sleep(self.delay_s)
        if item == self.fail_on:
            raise ValueError(f"cannot load item {item}")
        return f"loaded {item}"


@pytest.mark.parametrize("depth", [0, 1, 3])
@pytest.mark.parametrize("n", [0, 1, 7])
def test_every_item_once_in_order(depth, n):
    loads = Loads()
    out = []
    for value in prefetched(range(n), loads, depth=depth):
        loads.consumed += 1
        out.append(value)
    assert out == [f"loaded {i}" for i in range(n)]
    assert loads.started == list(range(n))


@pytest.mark.parametrize("depth", [1, 2])
def test_loads_run_ahead_in_a_background_thread_by_at_most_depth(depth):
    loads = Loads(delay_s=0.002)
    for _ in prefetched(range(10), loads, depth=depth):
        time.sleep(0.01)  # the consumer is slower: the loader runs as far ahead as allowed
        loads.consumed += 1
    assert loads.threads and threading.current_thread().name not in loads.threads
    # the item being consumed plus `depth` more, never further
    assert max(loads.ahead_seen) == depth + 1


def test_depth_zero_loads_in_the_callers_thread():
    loads = Loads()
    assert list(prefetched(range(3), loads, depth=0)) == ["loaded 0", "loaded 1", "loaded 2"]
    assert loads.threads == {threading.current_thread().name}


@pytest.mark.parametrize("depth", [0, 1, 2])
def test_a_load_error_surfaces_at_its_own_position(depth):
    loads = Loads(fail_on=2)
    got = []
    with pytest.raises(ValueError, match="cannot load item 2"):
        for value in prefetched(range(6), loads, depth=depth):
            got.append(value)
    assert got == ["loaded 0", "loaded 1"]


def test_closing_early_stops_loading_and_leaves_no_thread():
    loads = Loads(delay_s=0.005)
    before = threading.active_count()
    items = prefetched(range(100), loads, depth=2)
    assert next(items) == "loaded 0"
    items.close()
    assert threading.active_count() == before
    assert len(loads.started) <= 4  # what was running or queued, not the remaining 96


@given(n=st.integers(0, 12), depth=st.integers(0, 4), fail_at=st.one_of(st.none(), st.integers(0, 12)))
@settings(max_examples=40)
def test_loading_ahead_is_invisible_to_the_consumer(n, depth, fail_at):
    """Whatever the depth: the same values in the same order as a plain loop, and a failure at the same place."""
    loads = Loads(fail_on=fail_at)
    got, error = [], None
    try:
        for value in prefetched(range(n), loads, depth=depth):
            got.append(value)
    except ValueError as exc:
        error = str(exc)
    stop = fail_at if fail_at is not None and fail_at < n else n
    assert got == [f"loaded {i}" for i in range(stop)]
    assert error == (f"cannot load item {fail_at}" if stop < n else None)
