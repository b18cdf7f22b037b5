"""EMO-Reasoning scores (SPEC §7): reference and paper variants, CT-*, categorical and perceptual ERS."""

from __future__ import annotations

import itertools
import warnings
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from speecheq_metric import (
    CATEGORICAL_MATRIX,
    ERSParams,
    as_vad,
    categorical_ers,
    dtw_python,
    ers_dialogues,
    ers_summary,
    ers_table,
    ers_turns,
    fastdtw_distance,
    perceptual_ers,
    read_vad_csv,
)
from conftest import PROJECT_ROOT
from speecheq_metric.ers_discrete import CATEGORICAL_LABELS

SPEC_PATH = PROJECT_ROOT.parent / "shared" / "docs" / "SPEC.md"
METRIC_CARD = PROJECT_ROOT / "speecheq_metric" / "README.md"


def vad(v, a, d) -> dict:
    return {"valence": v, "arousal": a, "dominance": d}


# A two-turn dialogue worked by hand in the reference variant (K = 5).
USER_1 = vad([0.0, 0.0], [0.5, 0.5], [0.3, 0.3])  # mean arousal 0.5 > 0.345: extreme on arousal only
MODEL_1 = vad([0.1, 0.1, 0.1], [0.4, 0.4, 0.4], [0.3, 0.3, 0.4])
USER_2 = vad([0.2], [0.2], [0.5])  # one second, nothing extreme: EBS inert
MODEL_2 = vad([0.2, 0.3], [0.2, 0.2], [0.5, 0.5])


def test_reference_variant_worked_by_hand():
    s1, s2 = ers_turns([USER_1, USER_2], [MODEL_1, MODEL_2], variant="reference")
    # Turn 1. DTW(V_m, V_u): every cell costs 0.1, the shortest path has 3 cells -> 0.3.
    #         DTW(A_m, A_u): every cell costs 0.1 -> 0.3.   L = max(2, 3) = 3.
    #         ECS = 1 - 5 * (0.3 + 0.3) / (4 * 3) = 1 - 0.25 = 0.75
    #         EBS: target A_u + δ_A = 0.5 - 0.105 = 0.395; |0.395 - 0.4| = 0.005 over 3 cells = 0.015;
    #              one extreme dimension, L_user = 2 -> EBS = 1 - 5 * 0.015 / 2 = 0.9625
    #         ESS: model jumps: D 0.3 -> 0.4 (0.1 > 0.04), nothing else -> mean 0.1 -> 1 - 5 * 0.1 = 0.5
    #         ERS = 0.4 * 0.75 + 0.4 * 0.9625 + 0.2 * 0.5 = 0.785
    assert s1.extreme_dims == ("arousal",) and s1.ebs_active
    assert s1.ecs == pytest.approx(0.75)
    assert s1.ebs == pytest.approx(0.9625)
    assert s1.ess == pytest.approx(0.5)
    assert s1.ers == pytest.approx(0.785)
    # Turn 2. DTW(V): [0.2, 0.3] vs [0.2] = 0 + 0.1 = 0.1; DTW(A) = 0; L = 2.
    #         ECS = 1 - 5 * 0.1 / 8 = 0.9375; ESS: V jumps 0.1 -> 0.5
    #         EBS inert -> ERS = 0.7 * 0.9375 + 0.3 * 0.5 = 0.80625
    assert s2.ebs is None and not s2.ebs_active and s2.extreme_dims == ()
    assert s2.ecs == pytest.approx(0.9375)
    assert s2.ess == pytest.approx(0.5)
    assert s2.ers == pytest.approx(0.80625)

    (dialogue,) = ers_dialogues([([USER_1, USER_2], [MODEL_1, MODEL_2])], variant="reference")
    # CT-ECS = (0.75 + 0.9375) / 2 = 0.84375 ; CT-EBS = 0.9625 (the inert turn is skipped)
    # CT-ESS between model turns 1 and 2 (L = 3):
    #   DTW(V) [.1,.1,.1] vs [.2,.3] = 0.1 + 0.1 + 0.2 = 0.4
    #   DTW(A) [.4,.4,.4] vs [.2,.2] = 3 * 0.2 = 0.6
    #   DTW(D) [.3,.3,.4] vs [.5,.5] = 0.2 + 0.2 + 0.1 = 0.5
    #   CT-ESS = 1 - 5 * (0.4 + 0.6 + 0.5) / (6 * 3) = 1 - 5/12 = 0.583333
    # CT-ERS = 0.35 * 0.84375 + 0.35 * 0.9625 + 0.30 * 0.583333 = 0.8071875
    assert dialogue.ct_ecs == pytest.approx(0.84375)
    assert dialogue.ct_ebs == pytest.approx(0.9625) and dialogue.ct_ebs_active
    assert dialogue.ct_ess == pytest.approx(7 / 12)
    assert dialogue.ct_ers == pytest.approx(0.8071875)
    assert [t.ers for t in dialogue.turns] == pytest.approx([0.785, 0.80625])


def test_ebs_inert_turn_is_never_a_number():
    # user calm on every dimension: valence 0.1 (not < -0.07), arousal 0.2 (not > 0.345), dominance 0.5 (not < 0.21)
    user = vad([0.1, 0.1], [0.2, 0.2], [0.5, 0.5])
    model = vad([0.1, 0.1], [0.2, 0.2], [0.5, 0.5])
    for variant in ("reference", "paper"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a one-turn paper batch has no min-max range
            (s,) = ers_turns([user], [model], variant=variant)
        assert s.ebs is None and s.ebs_active is False
        assert s.to_dict()["ebs"] is None and s.costs["ebs_dtw"] is None
    # the reference variant uses the inert weights, not a pretend EBS of 1.0
    (s,) = ers_turns([user], [model], variant="reference")
    assert (s.ecs, s.ess, s.ers) == (1.0, 1.0, 1.0)
    summary = ers_summary([s])
    assert summary["ebs"] is None and summary["ebs_active_turns"] == 0
    (d,) = ers_dialogues([([user], [model])], variant="reference")
    assert d.ct_ebs is None and not d.ct_ebs_active
    assert d.ct_ess == 1.0  # one model turn: no consecutive pair, documented as no change
    assert d.ct_ers == pytest.approx(0.6 * 1.0 + 0.4 * 1.0)


@pytest.mark.parametrize(
    ("means", "expected"),
    [
        ((-0.08, 0.2, 0.5), ("valence",)),
        ((-0.07, 0.2, 0.5), ()),  # strictly below the threshold
        ((0.0, 0.35, 0.5), ("arousal",)),
        ((0.0, 0.345, 0.5), ()),
        ((0.0, 0.2, 0.2), ("dominance",)),
        ((-0.5, 0.9, 0.0), ("valence", "arousal", "dominance")),
    ],
)
def test_extreme_thresholds(means, expected):
    v, a, d = means
    (s,) = ers_turns([vad([v], [a], [d])], [vad([0.0], [0.0], [0.0])], variant="reference")
    assert s.extreme_dims == expected


def test_paper_variant_min_max_over_the_batch():
    calm = vad([0.0, 0.0], [0.2, 0.2], [0.5, 0.5])
    models = [
        vad([0.0, 0.0], [0.2, 0.2], [0.5, 0.5]),  # ECS cost 0, no jump
        vad([0.2, 0.2], [0.2, 0.2], [0.5, 0.5]),  # ECS cost 0.2 + 0.2 = 0.4, no jump
        vad([0.1, 0.1], [0.2, 0.2], [0.5, 0.6]),  # ECS cost 0.2, one jump of 0.1
    ]
    scores = ers_turns([calm] * 3, models, variant="paper")
    # ECS = (max - cost) / (max - min) over costs [0, 0.4, 0.2] -> [1, 0, 0.5]
    assert [s.ecs for s in scores] == pytest.approx([1.0, 0.0, 0.5])
    # ESS costs [0, 0, 0.1] -> [1, 1, 0]
    assert [s.ess for s in scores] == pytest.approx([1.0, 1.0, 0.0])
    # all EBS inert -> ERS = mean(ECS, ESS)
    assert [s.ers for s in scores] == pytest.approx([1.0, 0.5, 0.25])
    # frozen bounds make a single turn meaningful, clipped to [0, 1]
    (single,) = ers_turns([calm], [models[2]], variant="paper", norm_bounds={"ecs": (0.0, 0.8), "ess": (0.0, 0.05)})
    assert single.ecs == pytest.approx(0.75) and single.ess == 0.0


def test_paper_variant_ebs_normalises_active_turns_only():
    excited = vad([0.0, 0.0], [0.6, 0.6], [0.5, 0.5])  # arousal extreme; target 0.6 - 0.105 = 0.495
    calm = vad([0.0, 0.0], [0.2, 0.2], [0.5, 0.5])
    models = [vad([0.0, 0.0], [0.495, 0.495], [0.5, 0.5]), vad([0.0, 0.0], [0.6, 0.6], [0.5, 0.5]), calm]
    s = ers_turns([excited, excited, calm], models, variant="paper")
    assert s[0].ebs == pytest.approx(1.0) and s[1].ebs == pytest.approx(0.0)
    assert s[2].ebs is None
    assert s[0].ers == pytest.approx((s[0].ecs + 1.0 + s[0].ess) / 3)


def test_paper_single_turn_without_bounds_warns():
    with pytest.warns(UserWarning, match="no range"):
        (s,) = ers_turns([USER_1], [MODEL_1], variant="paper")
    assert s.ecs == 1.0
    # all-zero costs are simply the best score, no warning
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        (s,) = ers_turns([USER_2], [USER_2], variant="paper")
    assert (s.ecs, s.ess, s.ers) == (1.0, 1.0, 1.0)


@pytest.mark.filterwarnings("ignore:paper EBS")  # a single active EBS turn has no min-max range
def test_cross_turn_paper_variant():
    # Dialogue costs for CT-ESS: steady model (0) and the hand-worked one (1.5) -> scores 1 and 0.
    steady = vad([0.1, 0.1], [0.2, 0.2], [0.5, 0.5])
    ds = ers_dialogues(
        [([USER_1, USER_2], [MODEL_1, MODEL_2]), ([USER_2, USER_2], [steady, steady])],
        variant="paper",
    )
    assert ds[0].ct_ess == pytest.approx(0.0) and ds[1].ct_ess == pytest.approx(1.0)
    for d in ds:
        parts = [d.ct_ecs, d.ct_ess] + ([d.ct_ebs] if d.ct_ebs_active else [])
        assert d.ct_ers == pytest.approx(np.mean(parts))
    assert ds[0].ct_ebs_active and not ds[1].ct_ebs_active


def test_fastdtw_opt_in_and_callable_backend():
    rng = np.random.default_rng(0)
    users = [vad(*(rng.uniform(-0.3, 0.7, 12) for _ in range(3))) for _ in range(5)]
    models = [vad(*(rng.uniform(-0.3, 0.7, 9) for _ in range(3))) for _ in range(5)]
    exact = ers_turns(users, models, variant="reference")
    approx = ers_turns(users, models, variant="reference", dtw="fastdtw")
    plain = ers_turns(users, models, variant="reference", dtw=dtw_python)
    for e, a, p in zip(exact, approx, plain):
        assert a.ecs <= e.ecs + 1e-12  # fastdtw never finds a cheaper path than the exact DP
        assert p.ecs == pytest.approx(e.ecs, abs=1e-12) and p.ers == pytest.approx(e.ers, abs=1e-12)
    with pytest.raises(ValueError, match="dtw must be"):
        ers_turns(users, models, dtw="approx")
    with pytest.raises(ValueError, match="variant must be"):
        ers_turns(users, models, variant="published")


# The EMO-Reasoning authors' evaluator passes (user, model) to fastdtw, which is not symmetric:
# on this pair their ECS is 0.78125; the opposite order gives 0.6875.
ASYM_USER = vad([0.4, 0.9, 0.9, 0.0, 0.4, 0.1, 0.3, 0.3], [0.1] * 8, [0.5] * 8)
ASYM_MODEL = vad([0.4, 0.2, 0.1, 0.8, 0.2], [0.1] * 5, [0.5] * 5)


def test_fastdtw_takes_user_then_model_as_the_published_evaluator():
    (s,) = ers_turns([ASYM_USER], [ASYM_MODEL], variant="reference", dtw="fastdtw")
    # DTW_V(user, model) = 1.4 with fastdtw radius 1 (arousal and dominance cost 0); L = 8
    # ECS = 1 - 5 * 1.4 / (4 * 8) = 0.78125
    assert s.ecs == pytest.approx(0.78125, abs=1e-12)
    assert s.costs["ecs_dtw"] == pytest.approx(1.4, abs=1e-12)
    # the order matters on this pair: (model, user) would cost 2.0 and give ECS 0.6875
    assert fastdtw_distance(ASYM_MODEL["valence"], ASYM_USER["valence"]) == pytest.approx(2.0, abs=1e-12)


def test_custom_backends_are_called_user_side_first():
    calls = []

    def spy(a, b):
        calls.append((len(a), len(b)))
        return 0.0

    user = vad([0.0] * 4, [0.6] * 4, [0.5] * 4)  # arousal extreme: one EBS job
    model = vad([0.0] * 3, [0.6] * 3, [0.5] * 3)
    ers_dialogues([([user, user], [model, vad([0.0] * 2, [0.6] * 2, [0.5] * 2)])], variant="reference", dtw=spy)
    # per turn: V, A (user, model), then EBS arousal (shifted user, model); then CT-ESS (model n, model n+1) x 3
    assert calls == [(4, 3), (4, 3), (4, 3), (4, 2), (4, 2), (4, 2), (3, 2), (3, 2), (3, 2)]


@pytest.mark.parametrize("dtw", ["exact", "fastdtw"])
@pytest.mark.parametrize(
    ("dimension", "threshold", "seconds"),
    [
        # each mean rounded in floats lands on the extreme side: exact comparison needed
        ("valence", -0.07, 16),  # in-order sum / 16: -0.07000000000000003 (numpy.mean: -0.07)
        ("valence", -0.07, 473),  # math.fsum / 473: -0.07000000000000002
        ("arousal", 0.345, 7),  # in-order sum and math.fsum / 7: 0.34500000000000003
        ("dominance", 0.21, 77),  # math.fsum / 77: 0.20999999999999996
    ],
)
def test_a_constant_user_turn_at_a_threshold_is_never_extreme(dtw, dimension, threshold, seconds):
    user = vad([0.0] * seconds, [0.1] * seconds, [0.5] * seconds)
    user[dimension] = [threshold] * seconds
    (s,) = ers_turns([user], [user], variant="reference", dtw=dtw)
    assert s.extreme_dims == () and not s.ebs_active
    # one step past the threshold on the extreme side is extreme, in both modes
    past = np.nextafter(threshold, 1.0 if dimension == "arousal" else -1.0)
    user[dimension] = [past] * seconds
    (s,) = ers_turns([user], [user], variant="reference", dtw=dtw)
    assert s.extreme_dims == (dimension,)


THRESHOLD_NEIGHBOURS = st.sampled_from([-0.07, 0.345, 0.21]).flatmap(
    lambda c: st.floats(c - 1e-12, c + 1e-12) | st.just(c) | st.just(float(np.nextafter(c, 1.0))) | st.just(float(np.nextafter(c, -1.0)))
)


@given(st.lists(st.tuples(THRESHOLD_NEIGHBOURS, THRESHOLD_NEIGHBOURS, THRESHOLD_NEIGHBOURS), min_size=1, max_size=40))
@pytest.mark.slow
def test_extreme_is_decided_on_the_exact_mean_in_every_mode(frames):
    """Property: the flags equal the comparison of the exact (rational) mean with each threshold, exact DTW or not."""
    v, a, d = (list(col) for col in zip(*frames))
    turn = vad(v, a, d)
    expected = (
        Fraction(sum(Fraction(x) for x in v), len(v)) < Fraction(-0.07),
        Fraction(sum(Fraction(x) for x in a), len(a)) > Fraction(0.345),
        Fraction(sum(Fraction(x) for x in d), len(d)) < Fraction(0.21),
    )
    for dtw in ("exact", dtw_python):
        flags = ers_table([turn], [turn], variant="reference", dtw=dtw)["extreme"][0]
        assert tuple(flags.tolist()) == expected


def test_hyper_parameters_are_arguments():
    params = ERSParams(arousal_extreme_above=0.6, scale=10.0)
    (s,) = ers_turns([USER_1], [MODEL_1], variant="reference", params=params)
    assert not s.ebs_active  # arousal 0.5 is no longer extreme
    assert s.ecs == pytest.approx(1 - 10 * 0.6 / 12)


def test_csv_layout_maps_columns_by_name(tmp_path):
    path = tmp_path / "turn.csv"
    # columns in the CSER output order (arousal, valence, dominance) plus a time column, mixed case
    path.write_text("second,Arousal,valence,DOMINANCE\n0,0.5,0.0,0.3\n1,0.5,0.0,0.3\n", encoding="utf-8")
    arr = read_vad_csv(path)
    np.testing.assert_array_equal(arr, as_vad(USER_1))
    from_csv = ers_turns([path], [MODEL_1], variant="reference")[0]
    from_dict = ers_turns([USER_1], [MODEL_1], variant="reference")[0]
    assert from_csv.to_dict() == from_dict.to_dict()
    frame = pd.DataFrame({"dominance": [0.3, 0.3], "valence": [0.0, 0.0], "arousal": [0.5, 0.5]})
    assert ers_turns([frame], [MODEL_1], variant="reference")[0].to_dict() == from_dict.to_dict()


@pytest.mark.parametrize(
    ("content", "match"),
    [
        ("valence,arousal\n0.1,0.2\n", r"missing column\(s\) \['dominance'\]"),
        ("valence,arousal,dominance\n", "no rows"),
        ("valence,arousal,dominance\n0.1,abc,0.2\n", "line 2"),
        ("valence,arousal,dominance\n0.1,nan,0.2\n", "arousal is nan at second 0"),
    ],
)
def test_csv_errors_name_file_and_problem(tmp_path, content, match):
    path = tmp_path / "bad.csv"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ValueError, match=match) as err:
        read_vad_csv(path)
    assert "bad.csv" in str(err.value)


@pytest.mark.parametrize(
    ("turn", "match"),
    [
        (vad([], [], []), "empty trajectory"),
        (vad([0.1, float("nan")], [0.1, 0.1], [0.1, 0.1]), "valence is nan at second 1"),
        (vad([0.1], [0.1, 0.2], [0.1]), "different lengths"),
        ({"valence": [0.1], "arousal": [0.1]}, "missing column"),
        (np.zeros((3, 4)), "no column names"),
    ],
)
def test_bad_trajectories_are_clear_errors(turn, match):
    with pytest.raises(ValueError, match=match):
        ers_turns([turn], [MODEL_1], variant="reference")


def test_length_one_trajectories_are_defined():
    one = vad([0.2], [0.3], [0.4])
    (s,) = ers_turns([one], [one], variant="reference")
    assert (s.ecs, s.ess, s.ers) == (1.0, 1.0, 1.0)  # identical, no jump possible
    assert all(np.isfinite([s.ecs, s.ess, s.ers]))


def test_mismatched_turn_lists():
    with pytest.raises(ValueError, match="2 user turns but 1 model turns"):
        ers_turns([USER_1, USER_2], [MODEL_1])
    with pytest.raises(ValueError, match="no turns"):
        ers_turns([], [])


# ---------------------------------------------------------------- categorical ERS

SPEC_MATRIX = {  # SPEC §7, rows = user label, columns = model label
    "neutral": (0.9, 0.6, 0.3, 0.4),
    "happy": (0.5, 1.0, 0.2, 0.2),
    "angry": (0.8, 0.1, 0.4, 0.5),
    "sad": (0.6, 0.2, 0.4, 0.9),
}
COLUMNS = ("neutral", "happy", "angry", "sad")
CELLS = [(u, m, SPEC_MATRIX[u][j]) for u in SPEC_MATRIX for j, m in enumerate(COLUMNS)]


@pytest.mark.parametrize(("user", "model", "expected"), CELLS)
def test_every_categorical_cell(user, model, expected):
    assert categorical_ers([user], [model]) == expected
    assert categorical_ers([user.upper()], [model.title()]) == expected  # case-insensitive
    assert CATEGORICAL_MATRIX[user][model] == expected


def test_categorical_mean_over_turns():
    # happy->happy 1.0, angry->neutral 0.8, sad->happy 0.2: mean 2.0 / 3
    assert categorical_ers(["happy", "angry", "sad"], ["happy", "neutral", "happy"]) == pytest.approx(2.0 / 3)


@pytest.mark.parametrize(
    ("users", "models", "match"),
    [
        (["happy"], ["surprised"], "'surprised'"),
        (["Fear"], ["happy"], "'Fear'"),
        (["happy", "sad"], ["happy"], "2 user labels but 1"),
        ([], [], "at least one"),
        ("happy", "happy", "lists of labels"),
    ],
)
def test_categorical_errors(users, models, match):
    with pytest.raises(ValueError, match=match):
        categorical_ers(users, models)


def test_perceptual_ers():
    # (5, 4, 3) -> (1, 0.75, 0.5); (1, 1, 1) -> 0 ; mean of six values = 2.25 / 6
    assert perceptual_ers([[5, 4, 3], [1, 1, 1]]) == pytest.approx(2.25 / 6)
    assert perceptual_ers([{"rationality": 5, "naturalness": 5, "relevance": 5}]) == 1.0
    for bad in ([[6, 1, 1]], [[0, 1, 1]], [[1, 2]], [{"rationality": 3}], [], [[float("nan"), 1, 1]]):
        with pytest.raises(ValueError):
            perceptual_ers(bad)


def _markdown_matrix(path: Path, header: str) -> dict[str, dict[str, float]]:
    """The 4 x 4 table whose header row starts with `header`, as {row label: {column label: value}}."""
    lines = path.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    columns = [c.strip() for c in lines[start].strip("|").split("|")][1:]
    table = {}
    for line in lines[start + 2 : start + 6]:
        row, *values = (c.strip() for c in line.strip("|").split("|"))
        table[row] = dict(zip(columns, map(float, values)))
    return table


@pytest.mark.parametrize(
    ("document", "header"),
    [(SPEC_PATH, "| user \\ model |"), (METRIC_CARD, "| user \\ reply |")],
    ids=["SPEC §7", "metric card"],
)
def test_categorical_matrix_is_the_documented_table(document, header):
    """The code's matrix has exactly the labels and cells of the table in SPEC §7 and in the metric card."""
    documented = _markdown_matrix(document, header)
    assert documented == CATEGORICAL_MATRIX
    assert tuple(documented) == CATEGORICAL_LABELS and all(tuple(row) == CATEGORICAL_LABELS for row in documented.values())
    assert set(itertools.product(CATEGORICAL_LABELS, CATEGORICAL_LABELS)) == {(u, m) for u, m, _ in CELLS}
