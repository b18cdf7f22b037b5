"""Benchmark: single-turn ERS (reference variant) with our exact numba DTW vs plain Python and dtaidistance.

Workloads (issue 3): 10,000 turn pairs of 30 frames and 2,000 of 300 frames,
one run each. For each workload it prints
- the ERS time with our exact DTW (numba compile time reported separately),
- the same ERS with dtaidistance's C DTW (absolute cost: inner_dist="euclidean"
  on 1-D series sums |a_i - b_j|; its default is squared differences with a
  final square root, which is a different distance) and the ratio,
- the same ERS with the plain-Python DTW, timed on a subset of turns and
  extrapolated linearly to the full workload (said so in the output),
- DTW-only times over exactly the DTW calls the ERS makes,
and checks that all three DTWs agree on every (or every subset) pair.

Goals: >= 50x faster than plain Python; no more than 2x slower than dtaidistance.

Run: NUMBA_CACHE_DIR=.cache/numba .venv/bin/python bench/bench_metric.py [--quick]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from speecheq_metric import dtw_many, dtw_python, ers_table, ers_turns  # noqa: E402
from speecheq_metric import dtw as dtw_module  # noqa: E402


def make_turns(n: int, frames: int, seed: int) -> tuple[list[dict], list[dict]]:
    """Smooth random VAD trajectories; about half the user turns are extreme on some dimension."""
    rng = np.random.default_rng(seed)

    def walk(level: float) -> np.ndarray:
        return level + np.cumsum(rng.normal(0.0, 0.03, frames))

    users, models = [], []
    for _ in range(n):
        users.append({"valence": walk(rng.uniform(-0.3, 0.4)), "arousal": walk(rng.uniform(0.0, 0.7)), "dominance": walk(rng.uniform(0.0, 0.6))})
        models.append({"valence": walk(rng.uniform(-0.2, 0.4)), "arousal": walk(rng.uniform(0.0, 0.6)), "dominance": walk(rng.uniform(0.0, 0.6))})
    return users, models


def dtai_absolute(a: np.ndarray, b: np.ndarray) -> float:
    """dtaidistance's C DTW with absolute cost (see module doc)."""
    from dtaidistance import dtw

    return dtw.distance_fast(a, b, inner_dist="euclidean", use_pruning=False)


def timed(fn, *args, **kwargs) -> tuple[float, object]:
    start = time.perf_counter()
    out = fn(*args, **kwargs)
    return time.perf_counter() - start, out


def run_workload(n: int, frames: int, python_subset: int, seed: int) -> dict:
    users, models = make_turns(n, frames, seed)
    # The exact DTW calls the ERS makes, recorded once with a do-nothing backend.
    jobs: list[tuple[np.ndarray, np.ndarray]] = []
    ers_table(users, models, variant="reference", dtw=lambda a, b: jobs.append((a, b)) or 0.0)
    xs, ys = [a for a, _ in jobs], [b for _, b in jobs]
    out: dict = {"workload": f"{n:,} turn pairs x {frames} frames", "dtw_calls": len(jobs), "python_subset": python_subset}
    sub_u, sub_m = users[:python_subset], models[:python_subset]
    for api, fn in (("ers_table", ers_table), ("ers_turns", ers_turns)):
        t_ours, ours = timed(fn, users, models, variant="reference")
        t_dtai, dtai = timed(fn, users, models, variant="reference", dtw=dtai_absolute)
        t_py_sub, py = timed(fn, sub_u, sub_m, variant="reference", dtw=dtw_python)
        ers = (lambda r: np.asarray(r["ers"])) if api == "ers_table" else (lambda r: np.array([t.ers for t in r]))
        out[api] = {
            "ours_s": t_ours,
            "dtai_s": t_dtai,
            "python_s": t_py_sub * n / python_subset,  # extrapolated from the subset
            "max_abs_diff_ers": float(max(np.abs(ers(ours) - ers(dtai)).max(), np.abs(ers(ours)[:python_subset] - ers(py)).max())),
        }
    n_py_pairs = max(1, len(jobs) * python_subset // n)  # the same share of calls as the ERS subset
    t_dtw_ours, d_ours = timed(dtw_many, xs, ys)
    t_dtw_dtai, d_dtai = timed(lambda: np.array([dtai_absolute(a, b) for a, b in zip(xs, ys)]))
    t_dtw_py_sub, d_py = timed(lambda: np.array([dtw_python(a.tolist(), b.tolist()) for a, b in jobs[:n_py_pairs]]))
    out["dtw"] = {
        "ours_s": t_dtw_ours,
        "dtai_s": t_dtw_dtai,
        "python_s": t_dtw_py_sub * len(jobs) / n_py_pairs,
        "n_py_pairs": n_py_pairs,
        "max_abs_diff_dtai": float(np.max(np.abs(d_ours - d_dtai))),
        "max_abs_diff_python": float(np.max(np.abs(d_ours[:n_py_pairs] - d_py))),
    }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a tenth of each workload (smoke run)")
    args = parser.parse_args(argv)
    scale = 10 if args.quick else 1
    print(f"DTW backend: {dtw_module.BACKEND}")
    warm_u, warm_m = make_turns(2, 5, seed=9)
    t_compile, _ = timed(lambda: (dtw_many([np.zeros(3), np.zeros(3)], [np.ones(4), np.ones(4)]), ers_table(warm_u, warm_m, variant="reference")))
    print(f"first calls (numba compile or cache load): {t_compile:.2f} s, not included below")
    results = [
        run_workload(10_000 // scale, 30, python_subset=500 // scale, seed=0),
        run_workload(2_000 // scale, 300, python_subset=20 // scale, seed=1),
    ]
    ok = True
    for r in results:
        print(f"\n== {r['workload']} ({r['dtw_calls']:,} DTW calls); plain Python timed on {r['python_subset']} turns and extrapolated")
        print(f"{'':34} {'ours':>9} {'dtaidistance':>13} {'plain Python':>13} {'ours/dtai':>10} {'Python/ours':>12}")
        for api, label in (("ers_table", "ERS, batch arrays (ers_table)"), ("ers_turns", "ERS, per-turn objects (ers_turns)"), ("dtw", "DTW calls only (dtw_many)")):
            row = r[api]
            vs_dtai = row["ours_s"] / row["dtai_s"]
            vs_py = row["python_s"] / row["ours_s"]
            print(f"{label:34} {row['ours_s']:8.3f}s {row['dtai_s']:12.3f}s {row['python_s']:12.2f}s {vs_dtai:9.2f}x {vs_py:11.0f}x")
        d = r["dtw"]
        print(
            f"agreement: max |DTW ours - dtaidistance| = {d['max_abs_diff_dtai']:.1e}, max |DTW ours - Python| = {d['max_abs_diff_python']:.1e} "
            f"(on {d['n_py_pairs']} calls), max |ERS difference| = {max(r['ers_table']['max_abs_diff_ers'], r['ers_turns']['max_abs_diff_ers']):.1e}"
        )
        main_row = r["ers_table"]
        ok &= main_row["python_s"] / main_row["ours_s"] >= 50 and main_row["ours_s"] / main_row["dtai_s"] <= 2
        ok &= d["max_abs_diff_dtai"] < 1e-9 and d["max_abs_diff_python"] < 1e-9
    print("\ngoals (ERS batch: >= 50x plain Python, <= 2x dtaidistance time; DTWs agree):", "met" if ok else "NOT met")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
