"""1-D dynamic time warping with absolute-difference cost (SPEC §7).

DTW(a, b) = min over monotone warping paths with steps (1,0), (0,1), (1,1)
from (0,0) to (n-1,m-1) of the SUM of |a_i - b_j| along the path (no square,
no square root). The exact O(nm) dynamic programme runs under numba when it is
installed (it comes with librosa); otherwise a pure-Python loop is used.

The compiled kernels are in kernels.py (numba's disk cache is used only
when NUMBA_CACHE_DIR is set).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from .kernels import BACKEND
from .kernels import dtw_kernel
from .kernels import dtw_many_kernel


def dtw_python(a: Sequence[float], b: Sequence[float]) -> float:
    """Plain-Python exact DTW: the reference the fast kernels are tested against.

    >>> dtw_python([0.0, 1.0, 2.0], [0.0, 2.0])
    1.0
    """
    n, m = len(a), len(b)
    prev = [math.inf] * (m + 1)
    prev[0] = 0.0
    for i in range(1, n + 1):
        cur = [math.inf] * (m + 1)
        ai = a[i - 1]
        for j in range(1, m + 1):
            best = prev[j - 1]
            if prev[j] < best:
                best = prev[j]
            if cur[j - 1] < best:
                best = cur[j - 1]
            cur[j] = abs(ai - b[j - 1]) + best
        prev = cur
    return prev[m]


def as_trajectory(x: Sequence[float] | np.ndarray, *, name: str = "series") -> np.ndarray:
    """A contiguous 1-D float64 array of at least one frame, all finite; ValueError naming `name` otherwise."""
    arr = np.ascontiguousarray(x, dtype=np.float64)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{name} is empty: DTW needs at least one frame")
    if not np.isfinite(arr).all():
        bad = int(np.flatnonzero(~np.isfinite(arr))[0])
        raise ValueError(f"{name} has a non-finite value {float(arr[bad])!r} at frame {bad}")
    return arr


def dtw_distance(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> float:
    """Exact DTW with absolute cost, summed along the best path (symmetric, 0 on identical input).

    >>> dtw_distance([0, 1, 2], [0, 2])
    1.0
    >>> dtw_distance([1, 2, 3], [1, 2, 3])
    0.0
    """
    x = as_trajectory(a, name="a")
    y = as_trajectory(b, name="b")
    if BACKEND == "python":
        return float(dtw_python(x.tolist(), y.tolist()))
    return float(dtw_kernel(x, y, np.empty(len(y), dtype=np.float64)))


def _concat(arrays: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """1-D series laid end to end, and the offsets where each starts (plus the total length)."""
    offsets = np.zeros(len(arrays) + 1, dtype=np.int64)
    np.cumsum([len(arr) for arr in arrays], out=offsets[1:])
    return (np.concatenate(arrays) if arrays else np.zeros(0)), offsets


def _flat_series(series: Sequence, label: str) -> tuple[np.ndarray, np.ndarray]:
    """Validate many series in bulk: one concatenated float64 array, offsets, one NaN check."""
    arrays = [np.asarray(x, dtype=np.float64) for x in series]
    for i, arr in enumerate(arrays):
        if arr.ndim != 1 or arr.size == 0:
            as_trajectory(arr, name=f"{label}[{i}]")  # raises with the reason
    flat, offsets = _concat(arrays)
    if not np.isfinite(flat).all():
        bad = int(np.flatnonzero(~np.isfinite(flat))[0])
        i = int(np.searchsorted(offsets, bad, side="right") - 1)
        as_trajectory(arrays[i], name=f"{label}[{i}]")
    return flat, offsets


def dtw_many(pairs_a: Sequence[Sequence[float]], pairs_b: Sequence[Sequence[float]]) -> np.ndarray:
    """Exact DTW of many pairs (pairs_a[p] vs pairs_b[p]) in one compiled call.

    >>> dtw_many([[0, 1, 2], [1.0]], [[0, 2], [3.0, 3.0]]).tolist()
    [1.0, 4.0]
    """
    if len(pairs_a) != len(pairs_b):
        raise ValueError(f"dtw_many: {len(pairs_a)} first series but {len(pairs_b)} second series")
    if len(pairs_a) == 0:
        return np.zeros(0)
    flat_a, off_a = _flat_series(pairs_a, "pairs_a")
    flat_b, off_b = _flat_series(pairs_b, "pairs_b")
    return _many_from_flat(flat_a, off_a, flat_b, off_b)


def _many_from_flat(flat_a: np.ndarray, off_a: np.ndarray, flat_b: np.ndarray, off_b: np.ndarray) -> np.ndarray:
    """Run the batch kernel (or the pure-Python fallback) on validated flat series."""
    out = np.empty(len(off_a) - 1, dtype=np.float64)
    if BACKEND == "python":
        for p in range(len(out)):
            out[p] = dtw_python(flat_a[off_a[p] : off_a[p + 1]].tolist(), flat_b[off_b[p] : off_b[p + 1]].tolist())
        return out
    dtw_many_kernel(flat_a, off_a, flat_b, off_b, out)
    return out


def dtw_many_checked(xs: list[np.ndarray], ys: list[np.ndarray]) -> np.ndarray:
    """dtw_many for series already validated as non-empty finite 1-D float64 arrays (no re-checking)."""
    if not xs:
        return np.zeros(0)
    return _many_from_flat(*_concat(xs), *_concat(ys))


def fastdtw_distance(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray, radius: int = 1) -> float:
    """Approximate DTW of the `fastdtw` package (radius 1, absolute cost), as the published evaluator used.

    Opt-in only: it can over-estimate the exact DTW. Needs `pip install fastdtw`.
    """
    try:
        from fastdtw import fastdtw
    except ImportError as err:
        raise ImportError("dtw='fastdtw' needs the fastdtw package: pip install fastdtw==0.3.4") from err
    x = as_trajectory(a, name="a")
    y = as_trajectory(b, name="b")
    distance, _ = fastdtw(x, y, radius=radius)  # dist=None: |x_i - y_j| on 1-D input
    return float(distance)
