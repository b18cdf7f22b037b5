"""Multi-Bench scoring in the metric module by hand-worked values: multi-choice easy/hard, single choice, judge-scored semi-open,
grouped judge ratings with a dialogue bootstrap, and the verbosity correlation."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from speecheq_metric import grouped_mean_ci
from speecheq_metric import multi_choice_scores
from speecheq_metric import score_length_correlation
from speecheq_metric import semi_open_scores
from speecheq_metric import single_choice_scores


@pytest.mark.parametrize("chosen, right, easy, hard", [
    ([0, 2], [0, 2], True, True),      # the exact set
    ([2, 0], [0, 2], True, True),      # order does not matter
    ([0], [0, 2], True, False),        # partially correct: every chosen option right, one missing
    ([0, 1], [0, 2], False, False),    # one wrong option spoils even easy
    ([1], [0, 2], False, False),       # wrong
    ([0, 1, 2], [0, 2], False, False), # a superset is not easy either
    (None, [0], False, False),         # invalid answer
    ([], [0], False, False),           # choosing nothing is no answer
])
def test_multi_choice_easy_and_hard_item_by_item(chosen, right, easy, hard):
    m = multi_choice_scores([chosen], [right])
    assert (m["acc_easy"], m["acc_hard"]) == (float(easy), float(hard))
    assert m["invalid_rate"] == float(not chosen)


def test_multi_choice_over_a_set_by_hand():
    # items: exact, partial, wrong extra, invalid -> hard 1/4, easy 2/4, invalid 1/4
    m = multi_choice_scores([[1, 3], [3], [1, 2], None], [[1, 3], [1, 3], [1], [0]])
    assert m == {"acc_easy": 0.5, "acc_hard": 0.25, "invalid_rate": 0.25, "n_items": 4}


@given(st.lists(st.tuples(st.sets(st.integers(0, 4)), st.sets(st.integers(0, 4), min_size=1)), min_size=1, max_size=20))
def test_hard_never_exceeds_easy(items):
    m = multi_choice_scores([sorted(p) or None for p, _ in items], [sorted(r) for _, r in items])
    assert 0 <= m["acc_hard"] <= m["acc_easy"] <= 1 - m["invalid_rate"] + 1e-12


def test_single_choice_by_hand():
    assert single_choice_scores([2, 0, None, 1, 1], [2, 1, 0, 1, 0]) == {"accuracy": 0.4, "invalid_rate": 0.2, "n_items": 5}


@pytest.mark.parametrize("bad", [[True], ["1"], [1.5], [-1]])
def test_single_choice_rejects_values_that_are_not_options(bad):
    with pytest.raises(ValueError, match="predictions\\[0\\]"):
        single_choice_scores(bad, [0])


def test_semi_open_by_hand_missing_ratings_are_counted_never_scored():
    # rated 5, 4, 3, 1 (two pass the mark 4); two missing
    m = semi_open_scores([5, None, 4, 3, None, 1])
    assert m["accuracy"] == 0.5 and m["mean_score"] == 13 / 4 and m["mean_normalised"] == pytest.approx((13 / 4 - 1) / 4)
    assert (m["n_items"], m["n_missing"], m["missing_rate"]) == (6, 2, 2 / 6)
    assert semi_open_scores([None, None])["accuracy"] is None
    assert semi_open_scores([3, 2], pass_mark=2)["accuracy"] == 1.0


@pytest.mark.parametrize("bad", [[0], [6], [3.5], [True], ["4"]])
def test_semi_open_rejects_ratings_off_the_scale(bad):
    with pytest.raises(ValueError, match="judge_scores\\[0\\]"):
        semi_open_scores(bad)


def test_grouped_mean_resamples_whole_dialogues():
    groups = [[5, 5, 5], [1], [None, 3]]
    m = grouped_mean_ci(groups, n_bootstrap=2000, seed=3)
    assert m["mean"] == (15 + 1 + 3) / 5 and (m["n_rated"], m["n_missing"], m["n_groups"]) == (5, 1, 3)
    low, high = m["ci95"]
    # every resample's mean lies between the lowest and highest dialogue mean
    assert 1.0 <= low <= m["mean"] <= high <= 5.0
    assert grouped_mean_ci(groups, n_bootstrap=2000, seed=3) == m  # seeded
    assert grouped_mean_ci([[4, 4]], n_bootstrap=100)["ci95"] is None  # one dialogue: no interval
    assert grouped_mean_ci([[None]], n_bootstrap=100)["mean"] is None


def test_grouped_mean_interval_matches_a_plain_loop():
    groups = [[5, 4], [2], [3, 3, 1], [4]]
    m = grouped_mean_ci(groups, n_bootstrap=500, seed=7)
    rng = np.random.default_rng(7)
    idx = rng.integers(0, 4, size=(500, 4))
    means = [np.mean([s for k in row for s in groups[k]]) for row in idx]
    assert m["ci95"] == pytest.approx([np.percentile(means, 2.5), np.percentile(means, 97.5)])


def test_score_length_correlation_by_hand():
    c = score_length_correlation([1, 3, 2, None], [5.0, 15.0, 10.0, 100.0])
    assert c["pearson"] == pytest.approx(1.0) and c["spearman"] == pytest.approx(1.0) and c["n"] == 3
    c = score_length_correlation([5, 4, 4, 1], [1, 2, 2, 9])
    # ranks: scores (4, 2.5, 2.5, 1), lengths (1, 2.5, 2.5, 4) -> perfectly reversed
    assert c["spearman"] == pytest.approx(-1.0) and c["pearson"] < -0.9
    assert score_length_correlation([3, 3, 3], [1, 2, 3])["pearson"] is None  # constant ratings
    assert score_length_correlation([3, 4], [1, 2]) == {"pearson": None, "spearman": None, "n": 2}
