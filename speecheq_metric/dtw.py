"""1-D dynamic time warping with absolute-difference cost (SPEC §7).

DTW(a, b) = min over monotone warping paths with steps (1,0), (0,1), (1,1)
from (0,0) to (n-1,m-1) of the SUM of |a_i - b_j| along the path (no square,
no square root). The exact O(nm) dynamic programme runs under numba when it is
installed (it comes with librosa); otherwise a pure-Python loop is used.

numba's on-disk compile cache is only used when NUMBA_CACHE_DIR is set, so
importing this module never writes next to an installed package or in ~.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Sequence

import numpy as np

logger = logging.getLogger(__name__)

_USE_DISK_CACHE = bool(os.environ.get("NUMBA_CACHE_DIR"))


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


def _dtw_kernel(a: np.ndarray, b: np.ndarray, row: np.ndarray) -> float:
    """One exact DTW with a caller-provided work row of length len(b) (single rolling row)."""
    n = a.shape[0]
    m = b.shape[0]
    # Row 0: only horizontal steps are possible.
    acc = 0.0
    for j in range(m):
        acc += abs(a[0] - b[j])
        row[j] = acc
    for i in range(1, n):
        ai = a[i]
        diag = row[0]  # D[i-1, 0]
        row[0] = diag + abs(ai - b[0])
        for j in range(1, m):
            up = row[j]  # D[i-1, j]
            best = diag
            if up < best:
                best = up
            if row[j - 1] < best:  # D[i, j-1]
                best = row[j - 1]
            diag = up
            row[j] = best + abs(ai - b[j])
    return row[m - 1]


def _dtw_many_kernel(flat_a: np.ndarray, off_a: np.ndarray, flat_b: np.ndarray, off_b: np.ndarray, out: np.ndarray) -> None:
    """DTW of pair p = flat_a[off_a[p]:off_a[p+1]] vs flat_b[off_b[p]:off_b[p+1]] into out[p]."""
    longest = 1
    for p in range(out.shape[0]):
        if off_b[p + 1] - off_b[p] > longest:
            longest = off_b[p + 1] - off_b[p]
    row = np.empty(longest, dtype=np.float64)
    for p in range(out.shape[0]):
        out[p] = _dtw_kernel(flat_a[off_a[p] : off_a[p + 1]], flat_b[off_b[p] : off_b[p + 1]], row)


try:
    import numba
except ImportError:  # pragma: no cover - exercised only without numba
    numba = None

if numba is not None:
    _dtw_kernel = numba.njit(cache=_USE_DISK_CACHE, nogil=True)(_dtw_kernel)
    _dtw_many_kernel = numba.njit(cache=_USE_DISK_CACHE, nogil=True)(_dtw_many_kernel)
    BACKEND = "numba"
else:
    BACKEND = "python"
    logger.info("numba is not installed: exact DTW runs in pure Python (slow)")


def as_trajectory(x: Sequence[float] | np.ndarray, *, name: str = "series") -> np.ndarray:
    """A contiguous 1-D float64 array with at least one finite frame; ValueError naming `name` otherwise."""
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
    if numba is None:
        return float(dtw_python(x.tolist(), y.tolist()))
    return float(_dtw_kernel(x, y, np.empty(len(y), dtype=np.float64)))


def dtw_many(pairs_a: Sequence[np.ndarray], pairs_b: Sequence[np.ndarray]) -> np.ndarray:
    """Exact DTW of many pairs in one compiled call (what the batch ERS uses).

    >>> dtw_many([[0, 1, 2], [1.0]], [[0, 2], [3.0, 3.0]]).tolist()
    [1.0, 4.0]
    """
    if len(pairs_a) != len(pairs_b):
        raise ValueError(f"dtw_many: {len(pairs_a)} first series but {len(pairs_b)} second series")
    if len(pairs_a) == 0:
        return np.zeros(0)
    xs = [as_trajectory(s, name=f"pairs_a[{i}]") for i, s in enumerate(pairs_a)]
    ys = [as_trajectory(s, name=f"pairs_b[{i}]") for i, s in enumerate(pairs_b)]
    if numba is None:
        return np.array([dtw_python(x.tolist(), y.tolist()) for x, y in zip(xs, ys)])
    off_a = np.zeros(len(xs) + 1, dtype=np.int64)
    off_b = np.zeros(len(ys) + 1, dtype=np.int64)
    np.cumsum([len(x) for x in xs], out=off_a[1:])
    np.cumsum([len(y) for y in ys], out=off_b[1:])
    out = np.empty(len(xs), dtype=np.float64)
    _dtw_many_kernel(np.concatenate(xs), off_a, np.concatenate(ys), off_b, out)
    return out


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
