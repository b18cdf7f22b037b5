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


def _dtw2_kernel(a1: np.ndarray, b1: np.ndarray, a2: np.ndarray, b2: np.ndarray, row1: np.ndarray, row2: np.ndarray) -> tuple[float, float]:
    """Two exact DTWs of equal shapes in lock-step.

    Each cell waits on its left neighbour (add + min latency); interleaving two
    independent programmes keeps the CPU busy during that wait (~1.8x faster).
    """
    n = a1.shape[0]
    m = b1.shape[0]
    acc1 = 0.0
    acc2 = 0.0
    for j in range(m):
        acc1 += abs(a1[0] - b1[j])
        acc2 += abs(a2[0] - b2[j])
        row1[j] = acc1
        row2[j] = acc2
    for i in range(1, n):
        x1 = a1[i]
        x2 = a2[i]
        diag1 = row1[0]
        diag2 = row2[0]
        row1[0] = diag1 + abs(x1 - b1[0])
        row2[0] = diag2 + abs(x2 - b2[0])
        for j in range(1, m):
            up1 = row1[j]
            up2 = row2[j]
            best1 = diag1
            if up1 < best1:
                best1 = up1
            if row1[j - 1] < best1:
                best1 = row1[j - 1]
            best2 = diag2
            if up2 < best2:
                best2 = up2
            if row2[j - 1] < best2:
                best2 = row2[j - 1]
            diag1 = up1
            diag2 = up2
            row1[j] = best1 + abs(x1 - b1[j])
            row2[j] = best2 + abs(x2 - b2[j])
    return row1[m - 1], row2[m - 1]


def _dtw_many_kernel(flat_a: np.ndarray, off_a: np.ndarray, flat_b: np.ndarray, off_b: np.ndarray, out: np.ndarray) -> None:
    """DTW of pair p = flat_a[off_a[p]:off_a[p+1]] vs flat_b[off_b[p]:off_b[p+1]] into out[p]."""
    longest = 1
    for p in range(out.shape[0]):
        if off_b[p + 1] - off_b[p] > longest:
            longest = off_b[p + 1] - off_b[p]
    row = np.empty(longest, dtype=np.float64)
    row2 = np.empty(longest, dtype=np.float64)
    p = 0
    while p < out.shape[0]:
        a = flat_a[off_a[p] : off_a[p + 1]]
        b = flat_b[off_b[p] : off_b[p + 1]]
        if p + 1 < out.shape[0] and off_a[p + 2] - off_a[p + 1] == a.shape[0] and off_b[p + 2] - off_b[p + 1] == b.shape[0]:
            # next pair has the same shape: run both together
            out[p], out[p + 1] = _dtw2_kernel(a, b, flat_a[off_a[p + 1] : off_a[p + 2]], flat_b[off_b[p + 1] : off_b[p + 2]], row, row2)
            p += 2
        else:
            out[p] = _dtw_kernel(a, b, row)
            p += 1


try:
    import numba
except ImportError:  # pragma: no cover - exercised only without numba
    numba = None



def jit(fn):
    """numba.njit when numba is installed (disk cache only under NUMBA_CACHE_DIR), else the function itself."""
    if numba is None:
        return fn
    return numba.njit(cache=_USE_DISK_CACHE, nogil=True)(fn)


_dtw_kernel = jit(_dtw_kernel)
_dtw2_kernel = jit(_dtw2_kernel)
_dtw_many_kernel = jit(_dtw_many_kernel)
BACKEND = "numba" if numba is not None else "python"
if numba is None:
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


def _flat_series(series: Sequence, label: str) -> tuple[np.ndarray, np.ndarray]:
    """Validate many series in bulk: one concatenated float64 array, offsets, one NaN check."""
    arrays = [np.asarray(x, dtype=np.float64) for x in series]
    for i, arr in enumerate(arrays):
        if arr.ndim != 1 or arr.size == 0:
            as_trajectory(arr, name=f"{label}[{i}]")  # raises with the reason
    offsets = np.zeros(len(arrays) + 1, dtype=np.int64)
    np.cumsum([arr.shape[0] for arr in arrays], out=offsets[1:])
    flat = np.concatenate(arrays) if arrays else np.zeros(0)
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
    if numba is None:
        for p in range(len(out)):
            out[p] = dtw_python(flat_a[off_a[p] : off_a[p + 1]].tolist(), flat_b[off_b[p] : off_b[p + 1]].tolist())
        return out
    _dtw_many_kernel(flat_a, off_a, flat_b, off_b, out)
    return out


def dtw_many_checked(xs: list[np.ndarray], ys: list[np.ndarray]) -> np.ndarray:
    """dtw_many for series already validated as non-empty finite 1-D float64 arrays (no re-checking)."""
    if not xs:
        return np.zeros(0)
    off_a = np.zeros(len(xs) + 1, dtype=np.int64)
    off_b = np.zeros(len(ys) + 1, dtype=np.int64)
    np.cumsum([len(x) for x in xs], out=off_a[1:])
    np.cumsum([len(y) for y in ys], out=off_b[1:])
    return _many_from_flat(np.concatenate(xs), off_a, np.concatenate(ys), off_b)


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
