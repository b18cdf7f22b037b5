"""Forced-choice accuracies and majority vote (SPEC §5-6), by hand and on the authors' recorded outputs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from speecheq_metric import forced_choice_metrics, majority_vote, score_choices

# ---------------------------------------------------------------- hand-worked values


def test_hand_worked_accuracies():
    # dialogue: (pred, ref)            turn4  turn6  both
    #  A: [1, 2] vs [1, 2]            right  right  yes
    #  B: [2, 2] vs [1, 2]            wrong  right  no
    #  C: [0, 1] vs [2, 1]            invalid (wrong) right  no
    #  D: [1, 1] vs [1, 2]            right  wrong  no
    # Acc1 = 2/4, Acc2 = 3/4, Acc_all = 5/8, Acc_traj = 1/4, invalid = 1/8
    m = forced_choice_metrics([[1, 2], [2, 2], [0, 1], [1, 1]], [[1, 2], [1, 2], [2, 1], [1, 2]], n_bootstrap=0)
    assert m["acc_turn4"] == 0.5
    assert m["acc_turn6"] == 0.75
    assert m["acc_all"] == 0.625
    assert m["acc_traj"] == 0.25
    assert m["invalid_rate"] == 0.125
    assert m["n_dialogues"] == 4
    assert "ci95" not in m


def test_none_is_an_invalid_prediction_and_counts_as_wrong():
    m = forced_choice_metrics([[None, 2]], [[1, 2]], n_bootstrap=0)
    assert (m["acc_turn4"], m["acc_turn6"], m["acc_traj"], m["invalid_rate"]) == (0.0, 1.0, 0.0, 0.5)


def test_breakdown_per_subscale_and_composite():
    preds = [[1, 2], [2, 2], [1, 1], [2, 1]]
    refs = [[1, 2], [1, 2], [1, 1], [2, 2]]
    subs = ["interpersonal_empathy", "interpersonal_empathy", "interpersonal_social_responsibility", "stress_management_optimism"]
    m = forced_choice_metrics(preds, refs, subs, n_bootstrap=0)
    assert m["per_subscale"]["interpersonal_empathy"]["acc_traj"] == 0.5
    assert m["per_subscale"]["interpersonal_empathy"]["n_dialogues"] == 2
    assert m["per_subscale"]["interpersonal_social_responsibility"]["acc_traj"] == 1.0
    # interpersonal = first three dialogues: 2 of 3 trajectories right, 5 of 6 decisions
    assert m["per_composite"]["interpersonal"]["acc_traj"] == pytest.approx(2 / 3)
    assert m["per_composite"]["interpersonal"]["acc_all"] == pytest.approx(5 / 6)
    assert m["per_composite"]["stress_management"]["acc_turn6"] == 0.0
    assert set(m["per_composite"]) == {"interpersonal", "stress_management"}


def test_bootstrap_is_seeded_and_brackets_the_estimate():
    rng = np.random.default_rng(3)
    preds = rng.integers(0, 3, size=(40, 2)).tolist()
    refs = rng.integers(1, 3, size=(40, 2)).tolist()
    a = forced_choice_metrics(preds, refs, n_bootstrap=500, seed=7)
    b = forced_choice_metrics(preds, refs, n_bootstrap=500, seed=7)
    c = forced_choice_metrics(preds, refs, n_bootstrap=500, seed=8)
    assert a["ci95"] == b["ci95"]
    assert a["ci95"] != c["ci95"]
    for name in ("acc_turn4", "acc_turn6", "acc_all", "acc_traj", "invalid_rate"):
        lo, hi = a["ci95"][name]
        assert 0.0 <= lo <= a[name] <= hi <= 1.0
        assert hi > lo  # 40 mixed dialogues: the interval is not degenerate


@pytest.mark.parametrize(
    ("predictions", "references", "named"),
    [
        ([[1, 1.5]], [[1, 2]], "1.5"),
        ([["1", 2]], [[1, 2]], "'1'"),
        ([[True, 2]], [[1, 2]], "True"),
        ([[3, 1]], [[1, 2]], "3"),
        ([[1, 2, 1]], [[1, 2]], "[1, 2, 1]"),
        ([[1, 2]], [[0, 2]], "references[0][0]"),  # a reference must be a real option
        ([[1, 2]], [[1, 2], [1, 2]], "1 dialogues but references has 2"),
        ("12", [[1, 2]], "str"),
    ],
)
def test_bad_inputs_name_the_value(predictions, references, named):
    with pytest.raises(ValueError, match=named.replace("[", r"\[").replace("]", r"\]")):
        forced_choice_metrics(predictions, references)


def test_unknown_subscale_and_wrong_subscale_count():
    with pytest.raises(ValueError, match="'empathy'"):
        forced_choice_metrics([[1, 2]], [[1, 2]], ["empathy"])
    with pytest.raises(ValueError, match="one per dialogue"):
        forced_choice_metrics([[1, 2]], [[1, 2]], ["interpersonal_empathy"] * 2)
    with pytest.raises(ValueError, match="no dialogues"):
        forced_choice_metrics([], [])


@pytest.mark.parametrize(
    ("runs", "expected"),
    [
        ([1, 1, 1], 1),
        ([1, 2, 1], 1),
        ([2, 2, 1], 2),
        ([2, 0, 2], 2),  # one unparsed run, still a strict majority
        ([1, 0, 0], 0),  # 1 of 3 is no majority: wrong, like the authors' 1 correct vs 2 wrong
        ([1, 2, 0], 0),  # tie among valid runs
        ([1, 2], 0),  # even N tie
        ([1, 1, 2, 2], 0),
        ([0], 0),
        ([None, 2, 2], 2),
        ([2], 2),
    ],
)
def test_majority_vote_table(runs, expected):
    assert majority_vote(runs) == expected


@pytest.mark.parametrize("runs", [[], [3], ["1", 1], [1.0, 1], "11"])
def test_majority_vote_rejects_non_choices(runs):
    with pytest.raises(ValueError):
        majority_vote(runs)


pairs = st.lists(st.tuples(st.integers(0, 2), st.integers(0, 2), st.integers(1, 2), st.integers(1, 2)), min_size=1, max_size=30)


@settings(max_examples=60, deadline=None)
@given(pairs, st.randoms())
def test_accuracies_invariant_to_dialogue_order(rows, rnd):
    preds = [[a, b] for a, b, _, _ in rows]
    refs = [[c, d] for _, _, c, d in rows]
    order = list(range(len(rows)))
    rnd.shuffle(order)
    m1 = forced_choice_metrics(preds, refs, n_bootstrap=0)
    m2 = forced_choice_metrics([preds[i] for i in order], [refs[i] for i in order], n_bootstrap=0)
    for name in ("acc_turn4", "acc_turn6", "acc_all", "acc_traj", "invalid_rate"):
        assert m1[name] == pytest.approx(m2[name], abs=1e-12)
    # Acc_traj can never exceed either single-turn accuracy.
    assert m1["acc_traj"] <= min(m1["acc_turn4"], m1["acc_turn6"]) + 1e-12


# ---------------------------------------------------------------- the authors' recorded outputs

MODEL_FILES = ["gpt-audio-1.5.json", "qwen2.5-omni-7b_001.json", "qwen3-omni-30b-a3b-instruct_001_ser_llm.json"]
TURN_KEYS = ("sentence_4", "sentence_6")


def _option(value: str) -> int:
    """"option1" -> 1, "option2" -> 2; anything else ("error": the answer was not parsed) -> 0."""
    return {"option1": 1, "option2": 2}.get(value, 0)


def _runs_in_common_frame(turn: dict) -> tuple[int, list[int]]:
    """Reference and per-run choices in run 0's option numbering.

    The authors shuffled the two clips per run (high_eq_option differs between
    runs), so a run's choice is first read as "picked the high-EQ clip or not",
    then written in run 0's numbering. An unparsed run stays 0 (invalid).
    """
    runs = turn["individual_results"]
    ref = _option(runs[0]["high_eq_option"])
    choices = []
    for run in runs:
        selected = _option(run["selected_option"])
        if selected == 0:
            choices.append(0)
        else:
            choices.append(ref if selected == _option(run["high_eq_option"]) else 3 - ref)
    return ref, choices


@pytest.fixture(scope="module", params=MODEL_FILES)
def recorded(request, model_responses_dir: Path) -> dict:
    path = model_responses_dir / request.param
    return json.loads(path.read_text(encoding="utf-8"))


def test_recorded_runs_match_per_run_correct_fields(recorded):
    """Each run scored in its own option frame reproduces the authors' per-run `correct`."""
    responses = recorded["responses"]
    n_runs = len(responses[0]["sentence_4"]["individual_results"])
    assert n_runs == 3
    for r in range(n_runs):
        preds, refs, expected = [], [], []
        for resp in responses:
            runs = [resp[k]["individual_results"][r] for k in TURN_KEYS]
            preds.append([_option(run["selected_option"]) for run in runs])
            refs.append([_option(run["high_eq_option"]) for run in runs])
            expected.append([run["correct"] for run in runs])
        correct, invalid = score_choices(preds, refs)
        assert correct.tolist() == expected
        m = forced_choice_metrics(preds, refs, n_bootstrap=0)
        assert m["acc_turn4"] == pytest.approx(np.mean([e[0] for e in expected]))
        assert m["acc_turn6"] == pytest.approx(np.mean([e[1] for e in expected]))
        assert m["invalid_rate"] == pytest.approx(invalid.mean())


def test_recorded_majority_votes_match_authors(recorded):
    """Majority of 3 runs per turn reproduces `correct`, `selected_eq_level` and the vote breakdown."""
    preds, refs, subscales = [], [], []
    for resp in recorded["responses"]:
        pair_pred, pair_ref = [], []
        for key in TURN_KEYS:
            turn = resp[key]
            ref, choices = _runs_in_common_frame(turn)
            voted = majority_vote(choices)
            assert (voted == ref) is turn["correct"], (resp["dataset_id"], key, choices)
            assert turn["selected_eq_level"] == ("high" if voted == ref else "low")
            votes = turn["vote_breakdown"]
            assert votes["correct_votes"] == sum(c == ref for c in choices)
            assert votes["wrong_votes"] == votes["total_runs"] - votes["correct_votes"] == len(choices) - votes["correct_votes"]
            pair_pred.append(voted)
            pair_ref.append(ref)
        preds.append(pair_pred)
        refs.append(pair_ref)
        subscales.append(resp["subscale_slug"])
    m = forced_choice_metrics(preds, refs, subscales, n_bootstrap=200, seed=0)
    responses = recorded["responses"]
    assert m["n_dialogues"] == len(responses) == 15
    assert m["acc_turn4"] == pytest.approx(np.mean([r["sentence_4"]["correct"] for r in responses]))
    assert m["acc_turn6"] == pytest.approx(np.mean([r["sentence_6"]["correct"] for r in responses]))
    assert m["acc_traj"] == pytest.approx(np.mean([r["sample_level"]["correct"] for r in responses]))
    assert m["acc_all"] == pytest.approx(np.mean([r["overall"]["accuracy"] for r in responses]))
    # 15 dialogues, one per subscale: every subscale breakdown is a single trajectory.
    assert len(m["per_subscale"]) == 15 and len(m["per_composite"]) == 5
    for resp in responses:
        assert m["per_subscale"][resp["subscale_slug"]]["acc_traj"] == float(resp["sample_level"]["correct"])


def test_recorded_unparsed_runs_are_invalid_and_wrong(model_responses_dir: Path):
    """qwen2.5-omni has two unparsed runs ("Neither"): recorded as "error", correct=False; we score them 0."""
    data = json.loads((model_responses_dir / "qwen2.5-omni-7b_001.json").read_text(encoding="utf-8"))
    unparsed = [
        run
        for resp in data["responses"]
        for key in TURN_KEYS
        for run in resp[key]["individual_results"]
        if run["selected_option"] not in ("option1", "option2")
    ]
    assert len(unparsed) == 2
    assert all(run["correct"] is False and _option(run["selected_option"]) == 0 for run in unparsed)
    # Within each run, the invalid rate counts exactly those runs.
    invalid_total = 0
    for r in range(3):
        preds = [[_option(resp[k]["individual_results"][r]["selected_option"]) for k in TURN_KEYS] for resp in data["responses"]]
        refs = [[_option(resp[k]["individual_results"][r]["high_eq_option"]) for k in TURN_KEYS] for resp in data["responses"]]
        invalid_total += round(forced_choice_metrics(preds, refs, n_bootstrap=0)["invalid_rate"] * 30)
    assert invalid_total == 2
