"""SEQ within a cohort (SPEC §6) and Spearman ρ with ties."""

from __future__ import annotations

import math
import warnings

import pytest
import scipy.stats
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from speecheq_metric import (
    ReferenceCohort,
    freeze_cohort,
    rank_agreement,
    seq_per_subscale,
    seq_report,
    seq_scores,
    spearman_rho,
)


def test_seq_of_a_small_cohort_by_hand():
    # X = 0.30, 0.40, 0.50, 0.60, 0.90 -> median 0.50
    # |X - median| = 0.20, 0.10, 0.00, 0.10, 0.40 -> MAD = 0.10, k*MAD = 0.14826
    # Z: -1.34898, -0.67449, 0, 0.67449, 2.69796
    # SEQ = 100 + 15 Z: 79.7653, 89.8826, 100, 110.1174, 140.4694
    cohort = {"a": 0.30, "b": 0.40, "c": 0.50, "d": 0.60, "e": 0.90}
    seq = seq_scores(cohort)
    expected = {"a": 79.7653, "b": 89.8826, "c": 100.0, "d": 110.1174, "e": 140.4694}
    assert seq == pytest.approx(expected, abs=1e-4)


def test_seq_is_capped_at_four_sigma():
    # median 0.5, MAD 0.01 -> k*MAD = 0.014826; 0.0 is Z = -33.7 -> 40, 1.0 -> 160
    seq = seq_scores({"low": 0.0, "a": 0.49, "mid": 0.5, "b": 0.51, "high": 1.0})
    assert seq["low"] == 40.0 and seq["high"] == 160.0
    assert seq["a"] == pytest.approx(100 - 15 / 1.4826, abs=1e-9)


@pytest.mark.parametrize(
    ("cohort", "expected"),
    [
        # all equal: everybody is at the median
        ({"a": 0.4, "b": 0.4, "c": 0.4}, {"a": 100.0, "b": 100.0, "c": 100.0}),
        # majority at the median -> MAD = 0: above is 160, below is 40
        ({"a": 0.4, "b": 0.4, "c": 0.4, "d": 0.7, "e": 0.1}, {"a": 100.0, "b": 100.0, "c": 100.0, "d": 160.0, "e": 40.0}),
        ({"a": 0.2, "b": 0.5, "c": 0.5}, {"a": 40.0, "b": 100.0, "c": 100.0}),
    ],
)
def test_mad_zero_rule(cohort, expected):
    assert seq_scores(cohort) == expected


def test_fewer_than_three_models_warns_but_computes():
    with pytest.warns(UserWarning, match="fewer than 3"):
        seq = seq_scores({"a": 0.2, "b": 0.6})
    # median 0.4, MAD 0.2 -> Z = ∓0.6745
    assert seq["a"] == pytest.approx(100 - 15 / 1.4826)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        seq_scores({"a": 0.2, "b": 0.6, "c": 0.3})  # three models: no warning


def test_frozen_reference_cohort_scores_a_new_model_and_round_trips():
    ref = freeze_cohort({"a": 0.30, "b": 0.40, "c": 0.50, "d": 0.60, "e": 0.90})
    assert (ref.median, ref.n_models) == (0.5, 5)
    assert ref.mad == pytest.approx(0.1)
    # a new model alone: scored against the frozen median/MAD, no small-cohort warning
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        new = seq_scores({"new": 0.65}, reference=ref)
    assert new["new"] == pytest.approx(100 + 15 * 0.15 / (1.4826 * 0.1))
    report = seq_report({"new": 0.65}, reference=ref)
    assert report["reference"] == ref.to_dict() and report["frozen_reference"] is True
    assert seq_scores({"new": 0.65}, reference=report["reference"]) == new
    assert ReferenceCohort.from_dict(ref.to_dict()) == ref
    # the cohort's own report stores the median and MAD it used
    own = seq_report({"a": 0.30, "b": 0.40, "c": 0.50})
    assert own["reference"]["median"] == 0.4 and own["frozen_reference"] is False


def test_per_subscale_seq():
    cohort = {
        "m1": {"interpersonal_empathy": 0.2, "stress_management_optimism": 0.5},
        "m2": {"interpersonal_empathy": 0.4, "stress_management_optimism": 0.5},
        "m3": {"interpersonal_empathy": 0.6, "stress_management_optimism": 0.8},
    }
    per = seq_per_subscale(cohort)
    assert per["interpersonal_empathy"]["m2"] == 100.0
    assert per["interpersonal_empathy"]["m3"] == pytest.approx(100 + 15 / 1.4826)
    assert per["stress_management_optimism"] == {"m1": 100.0, "m2": 100.0, "m3": 160.0}


@pytest.mark.parametrize("bad", [{}, {"a": float("nan")}, {"a": 1.5}, {"a": "0.5"}, {"a": True}])
def test_seq_rejects_bad_cohorts(bad):
    with pytest.raises(ValueError):
        seq_scores(bad)


accuracies = st.floats(0.0, 1.0, allow_nan=False)


@settings(max_examples=80, deadline=None)
@given(st.lists(accuracies, min_size=3, max_size=12), st.data())
def test_seq_monotone_and_bounded(values, data):
    cohort = {f"m{i}": v for i, v in enumerate(values)}
    seq = seq_scores(cohort)
    assert all(40.0 <= s <= 160.0 for s in seq.values())
    # non-decreasing in Acc_traj within the cohort
    ordered = sorted(cohort, key=cohort.get)
    for lo, hi in zip(ordered, ordered[1:]):
        assert seq[lo] <= seq[hi] + 1e-9
    # and against a frozen reference: a better new model never scores lower
    ref = freeze_cohort(cohort)
    x = data.draw(accuracies)
    y = data.draw(accuracies)
    sx = seq_scores({"x": x}, reference=ref)["x"]
    sy = seq_scores({"y": y}, reference=ref)["y"]
    if x <= y:
        assert sx <= sy + 1e-9


def test_spearman_by_hand_with_ties():
    # a ranks: 0.1->1, 0.3,0.3 -> 2.5,2.5, 0.5->4 ; b ranks: 1, 2, 3, 4
    # centred: a = -1.5, 0, 0, 1.5 (order 0.1,0.3,0.3,0.5 as given: -1.5, 1.5, 0, 0)
    a = [0.1, 0.5, 0.3, 0.3]
    b = [1, 4, 2, 3]
    # Σ(ra - 2.5)(rb - 2.5) = (-1.5)(-1.5) + (1.5)(1.5) + 0 + 0 = 4.5 ; Σ ra² = 4.5 ; Σ rb² = 5
    assert spearman_rho(a, b) == pytest.approx(4.5 / math.sqrt(4.5 * 5))


def test_rank_agreement_with_human_ranks_where_one_is_best():
    seq = {"a": 140.0, "b": 95.0, "c": 120.0, "d": 60.0}
    human = {"a": 1, "b": 3, "c": 2, "d": 4}
    assert rank_agreement(seq, human) == pytest.approx(1.0)
    assert rank_agreement(seq, {"a": 4, "b": 2, "c": 3, "d": 1}) == pytest.approx(-1.0)


def test_spearman_errors():
    with pytest.raises(ValueError, match="all values equal"):
        spearman_rho([1, 1, 1], [1, 2, 3])
    with pytest.raises(ValueError, match="keys differ"):
        spearman_rho({"a": 1, "b": 2}, {"a": 1, "c": 2})
    with pytest.raises(ValueError, match="lengths"):
        spearman_rho([1, 2, 3], [1, 2])
    with pytest.raises(ValueError, match="at least 2"):
        spearman_rho([1], [2])


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5)), min_size=2, max_size=15))
def test_spearman_equals_scipy_with_ties(rows):
    a = [r[0] for r in rows]
    b = [r[1] for r in rows]
    assume(len(set(a)) > 1 and len(set(b)) > 1)
    expected = scipy.stats.spearmanr(a, b).statistic
    assert spearman_rho(a, b) == pytest.approx(expected, abs=1e-12)
