"""Exact 1-D DTW with absolute cost (SPEC §7)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from speecheq_metric import dtw_distance, dtw_many, dtw_python, fastdtw_distance
from speecheq_metric import dtw as dtw_module


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ([1.0], [1.0], 0.0),
        ([1.0], [4.0], 3.0),
        ([0.0], [1.0, 2.0, 3.0], 6.0),  # one frame against three: the path visits all three
        ([0.0, 1.0, 2.0], [0.0, 2.0], 1.0),  # 0-0, 1-0 or 1-2 (cost 1), 2-2
        ([0.0, 0.0, 1.0, 1.0], [0.0, 1.0], 0.0),  # pure time stretch costs nothing
        ([1.0, 2.0, 3.0], [3.0, 2.0, 1.0], 4.0),  # reversed: 1-3 is forced, then best is |2-2| ... see below
        ([0.0, 5.0], [0.0, 0.0, 5.0, 5.0], 0.0),
        ([-1.0, 1.0], [1.0, -1.0], 4.0),
    ],
)
def test_known_pairs(a, b, expected):
    # [1,2,3] vs [3,2,1]: corners (0,0)=2 and (2,2)=2 are forced; (1,1)=0 between them -> 4.
    assert dtw_distance(a, b) == pytest.approx(expected)
    assert dtw_python(a, b) == pytest.approx(expected)


def test_cost_is_absolute_not_squared():
    # Squared-Euclidean DTW with a final sqrt (dtaidistance's default) would give sqrt(4+4) here.
    assert dtw_distance([0.0, 0.0], [2.0, 2.0]) == 4.0


def test_backend_is_numba_here():
    assert dtw_module.BACKEND == "numba"


def test_dtw_many_matches_single_calls():
    rng = np.random.default_rng(0)
    xs = [rng.random(rng.integers(1, 40)) for _ in range(50)]
    ys = [rng.random(rng.integers(1, 40)) for _ in range(50)]
    out = dtw_many(xs, ys)
    assert out.tolist() == [dtw_distance(x, y) for x, y in zip(xs, ys)]
    assert dtw_many([], []).shape == (0,)


@pytest.mark.parametrize(
    ("a", "b", "match"),
    [
        ([], [1.0], "a is empty"),
        ([1.0], [], "b is empty"),
        ([1.0, float("nan")], [1.0], "non-finite value nan at frame 1"),
        ([[1.0, 2.0]], [1.0], "1-D"),
    ],
)
def test_bad_series_are_clear_errors(a, b, match):
    with pytest.raises(ValueError, match=match):
        dtw_distance(a, b)


def test_fastdtw_is_opt_in_and_never_below_exact():
    rng = np.random.default_rng(1)
    for _ in range(20):
        a, b = rng.random(25), rng.random(31)
        assert fastdtw_distance(a, b) >= dtw_distance(a, b) - 1e-12
    assert fastdtw_distance([0.0, 1.0, 2.0], [0.0, 2.0]) == 1.0


def test_fastdtw_missing_is_a_clear_error(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_fastdtw(name, *args, **kwargs):
        if name == "fastdtw":
            raise ImportError("no module named fastdtw")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_fastdtw)
    with pytest.raises(ImportError, match="pip install fastdtw"):
        fastdtw_distance([1.0], [1.0])


series = st.lists(st.floats(-2.0, 2.0, allow_nan=False, allow_infinity=False), min_size=1, max_size=12)


@settings(max_examples=150, deadline=None)
@given(series, series)
def test_dtw_properties(a, b):
    d = dtw_distance(a, b)
    assert d >= 0.0
    assert d == pytest.approx(dtw_distance(b, a), abs=1e-12)  # symmetric
    assert dtw_distance(a, a) == 0.0  # zero on identical input
    assert d == pytest.approx(dtw_python(a, b), abs=1e-9)  # equals the plain-Python programme
    # bounded by the lock-step path when lengths agree
    if len(a) == len(b):
        assert d <= float(np.abs(np.subtract(a, b)).sum()) + 1e-9


def test_pure_python_fallback_without_numba():
    """With numba unavailable the same functions run as plain Python and give the same numbers."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    from speecheq_metric import ers_turns

    rng = np.random.default_rng(5)
    users = [{k: rng.uniform(-0.3, 0.7, 7).tolist() for k in ("valence", "arousal", "dominance")} for _ in range(4)]
    models = [{k: rng.uniform(-0.3, 0.7, 5).tolist() for k in ("valence", "arousal", "dominance")} for _ in range(4)]
    code = (
        "import json, sys\n"
        "sys.modules['numba'] = None  # makes `import numba` fail\n"
        "from speecheq_metric import dtw_distance, dtw_many, ers_turns\n"
        "from speecheq_metric import dtw\n"
        "assert dtw.BACKEND == 'python'\n"
        "data = json.loads(sys.stdin.read())\n"
        "print(json.dumps({'backend': dtw.BACKEND, 'dtw': dtw_distance([0, 1, 2], [0, 2]),\n"
        "    'many': dtw_many([[0, 1, 2], [1.0]], [[0, 2], [3.0, 3.0]]).tolist(),\n"
        "    'ers': [t.ers for t in ers_turns(data['u'], data['m'], variant='reference')]}))\n"
    )
    root = Path(__file__).resolve().parents[1]
    proc = subprocess.run(
        [sys.executable, "-c", code], input=json.dumps({"u": users, "m": models}), cwd=root, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout)
    assert out["dtw"] == 1.0 and out["many"] == [1.0, 4.0]
    expected = [t.ers for t in ers_turns(users, models, variant="reference")]
    assert out["ers"] == pytest.approx(expected, abs=1e-12)
