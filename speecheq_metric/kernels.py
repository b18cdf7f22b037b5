"""The numba kernels of the metric: exact DTW (single, paired, batched) and the per-turn ERS costs.

They live in one file on purpose: numba's disk cache only notices a change to
the file of the function it caches, so a kernel that calls a kernel in another
file could keep stale machine code. The disk cache is used only when
NUMBA_CACHE_DIR is set, so nothing is ever written next to an installed
package or under ~. Without numba the same functions run as plain Python.
"""

from __future__ import annotations

import logging
import os

import numpy as np

logger = logging.getLogger(__name__)

_USE_DISK_CACHE = bool(os.environ.get("NUMBA_CACHE_DIR"))

try:
    import numba
except ImportError:  # pragma: no cover - exercised only without numba
    numba = None

BACKEND = "numba" if numba is not None else "python"
if numba is None:
    logger.info("numba is not installed: exact DTW runs in pure Python (slow)")


def jit(fn):
    """numba.njit (disk cache only under NUMBA_CACHE_DIR) when numba is installed, else the function itself."""
    if numba is None:
        return fn
    return numba.njit(cache=_USE_DISK_CACHE, nogil=True)(fn)


@jit
def dtw_kernel(a: np.ndarray, b: np.ndarray, row: np.ndarray) -> float:
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


@jit
def dtw2_kernel(a1: np.ndarray, b1: np.ndarray, a2: np.ndarray, b2: np.ndarray, row1: np.ndarray, row2: np.ndarray) -> tuple[float, float]:
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


@jit
def dtw_many_kernel(flat_a: np.ndarray, off_a: np.ndarray, flat_b: np.ndarray, off_b: np.ndarray, out: np.ndarray) -> None:
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
            out[p], out[p + 1] = dtw2_kernel(a, b, flat_a[off_a[p + 1] : off_a[p + 2]], flat_b[off_b[p + 1] : off_b[p + 2]], row, row2)
            p += 2
        else:
            out[p] = dtw_kernel(a, b, row)
            p += 1


@jit
def turn_costs_kernel(U, off_u, M, off_m, extreme, deltas, jump, out_dtw_v, out_dtw_a, out_ebs, out_jump_sum, out_jump_n):
    """Raw costs of every turn (numba-compiled): DTW_V, DTW_A, Σ EBS DTW over the extreme dimensions, model jumps.

    extreme: (turns, 3) bool, VAD order (decided by the caller); deltas = (δ_V, δ_A, δ_D).
    """
    longest = 1
    for i in range(off_m.shape[0] - 1):
        if off_m[i + 1] - off_m[i] > longest:
            longest = off_m[i + 1] - off_m[i]
    longest_u = 1
    for i in range(off_u.shape[0] - 1):
        if off_u[i + 1] - off_u[i] > longest_u:
            longest_u = off_u[i + 1] - off_u[i]
    row = np.empty(max(longest, longest_u), dtype=np.float64)
    row2 = np.empty(max(longest, longest_u), dtype=np.float64)
    shifted = np.empty((3, longest_u), dtype=np.float64)
    dims = np.empty(3, dtype=np.int64)
    for i in range(off_u.shape[0] - 1):
        u0, u1, m0, m1 = off_u[i], off_u[i + 1], off_m[i], off_m[i + 1]
        nu = u1 - u0
        # DTW(E_m, E_u) as written in the paper (exact DTW is symmetric); V and A have equal shapes, so together
        out_dtw_v[i], out_dtw_a[i] = dtw2_kernel(M[0, m0:m1], U[0, u0:u1], M[1, m0:m1], U[1, u0:u1], row, row2)
        n_ext = 0
        for d in range(3):
            if extreme[i, d]:
                # target: the user's level shifted by δ_E; DTW(E_u + δ_E, E_m)
                for t in range(nu):
                    shifted[d, t] = U[d, u0 + t] + deltas[d]
                dims[n_ext] = d
                n_ext += 1
        ebs = 0.0
        k = 0
        if n_ext >= 2:
            d1, d2 = dims[0], dims[1]
            e1, e2 = dtw2_kernel(shifted[d1, :nu], M[d1, m0:m1], shifted[d2, :nu], M[d2, m0:m1], row, row2)
            ebs += e1 + e2
            k = 2
        for j in range(k, n_ext):
            d = dims[j]
            ebs += dtw_kernel(shifted[d, :nu], M[d, m0:m1], row)
        out_ebs[i] = ebs
        total = 0.0
        count = 0
        for d in range(3):
            for t in range(m0, m1 - 1):
                step = abs(M[d, t + 1] - M[d, t])
                if step > jump:
                    total += step
                    count += 1
        out_jump_sum[i] = total
        out_jump_n[i] = count
