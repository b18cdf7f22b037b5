"""The `prosody` shortcut baselines: each rule on synthetic clips, seed tie-breaks, the adapter interface."""

from __future__ import annotations

import json

import numpy as np
import pytest

from eval_scripts.models.base import ChoiceQuery, Clip, build_model
from eval_scripts.models.prosody import RULES, ProsodyBaseline, choose_option, measure_rule, seed_tiebreak
from speecheq_dataset.acoustics import ClipFeatures

SR = 16_000


def tone(freq: float = 200.0, seconds: float = 1.0, amplitude: float = 0.3, column: str = "x") -> Clip:
    t = np.arange(int(seconds * SR)) / SR
    return Clip((amplitude * np.sin(2 * np.pi * freq * t)).astype(np.float32), SR, column)


def glide(low: float = 150.0, high: float = 300.0, seconds: float = 1.0) -> Clip:
    """A tone whose pitch rises exponentially from `low` to `high` Hz: one octave of pitch range for the default."""
    t = np.arange(int(seconds * SR)) / SR
    phase = 2 * np.pi * low * seconds / np.log(high / low) * ((high / low) ** (t / seconds) - 1)
    return Clip((0.3 * np.sin(phase)).astype(np.float32), SR, "x")


def query(option1: Clip, option2: Clip, preceding: Clip | None = None, seed: int = 0) -> ChoiceQuery:
    return ChoiceQuery(uid=f"d/r1/generate/random/run{seed}", system="", parts=[], options=(option1, option2), preceding=preceding, seed=seed)


def feats(**overrides) -> ClipFeatures:
    base = dict(duration_s=2.0, pitch_hz=200.0, voiced_fraction=0.5, rms_db=-20.0, zcr=0.1, centroid_hz=1000.0, mfcc=(0.0,) * 12)
    base.update(overrides)
    return ClipFeatures(**base)


# (rule, option 1, option 2, expected choice): option 2 differs in the one feature the rule reads.
SYNTHETIC = [
    ("slower", tone(seconds=1.0), tone(seconds=1.5), 2),
    ("faster", tone(seconds=1.0), tone(seconds=1.5), 1),
    ("quieter", tone(amplitude=0.3), tone(amplitude=0.1), 2),
    ("louder", tone(amplitude=0.3), tone(amplitude=0.1), 1),
    ("lower_pitch", tone(freq=300), tone(freq=150), 2),
    ("higher_pitch", tone(freq=300), tone(freq=150), 1),
    ("wider_pitch_range", tone(freq=212), glide(150, 300), 2),
    ("narrower_pitch_range", tone(freq=212), glide(150, 300), 1),
]


@pytest.mark.parametrize("rule, first, second, expected", SYNTHETIC)
def test_each_feature_rule_picks_by_its_feature_in_either_order(rule, first, second, expected):
    model = ProsodyBaseline(rule=rule)
    swapped = 3 - expected
    outputs = model.generate([query(first, second), query(second, first)])
    assert [o.choice for o in outputs] == [expected, swapped]
    assert [json.loads(o.text)["selected"] for o in outputs] == [f"Option {expected}", f"Option {swapped}"]
    assert all(o.error is None and o.latency_s >= 0 for o in outputs)


def test_catalyst_rules_compare_delivery_with_the_preceding_turn():
    catalyst = tone(freq=220, amplitude=0.1)
    similar, different = tone(freq=230, amplitude=0.1, seconds=2.0), tone(freq=440, amplitude=0.4)
    closest, farthest = ProsodyBaseline(rule="closest_to_catalyst"), ProsodyBaseline(rule="farthest_from_catalyst")
    assert [o.choice for o in closest.generate([query(similar, different, catalyst), query(different, similar, catalyst)])] == [1, 2]
    assert [o.choice for o in farthest.generate([query(similar, different, catalyst), query(different, similar, catalyst)])] == [2, 1]


def test_identical_options_are_decided_by_the_query_seed_deterministically():
    model = ProsodyBaseline(rule="slower")
    clip = tone()
    seeds = list(range(40))
    choices = [o.choice for o in model.generate([query(clip, clip, seed=s) for s in seeds])]
    assert choices == [seed_tiebreak(s) for s in seeds]
    assert choices == [o.choice for o in ProsodyBaseline(rule="slower").generate([query(clip, clip, seed=s) for s in seeds])]
    assert set(choices) == {1, 2}  # the seed really decides, not a fixed side
    assert "seed tie-break" in json.loads(model.generate([query(clip, clip)])[0].text)["reasoning"]


@pytest.mark.parametrize(
    "rule, options, preceding",
    [
        ("lower_pitch", (feats(pitch_hz=float("nan")), feats(pitch_hz=150.0)), None),  # an unvoiced option
        ("closest_to_catalyst", (feats(), feats(rms_db=-10.0)), None),  # no catalyst turn
        ("quieter", (feats(), feats()), None),  # equal values
    ],
)
def test_undecidable_cases_fall_back_to_the_seed(rule, options, preceding):
    for seed in range(6):
        assert choose_option(rule, options, preceding, seed) == (seed_tiebreak(seed), True)


def test_unknown_rule_and_unknown_args_fail_with_the_known_rules():
    with pytest.raises(ValueError, match="known rules: slower, faster"):
        ProsodyBaseline(rule="smarter")
    with pytest.raises(ValueError, match="unknown model args"):
        ProsodyBaseline(rule="slower", temperature=0.7)


def test_registry_builds_it_and_describe_records_the_rule():
    model = build_model("prosody", rule="closest_to_catalyst")
    assert isinstance(model, ProsodyBaseline)
    described = model.describe()
    assert described["rule"] == "closest_to_catalyst" and described["label"] == "prosody:closest_to_catalyst"
    assert build_model("prosody").describe()["rule"] == "slower"
    assert set(RULES) == {"slower", "faster", "quieter", "louder", "lower_pitch", "higher_pitch", "wider_pitch_range", "narrower_pitch_range",
                          "closest_to_catalyst", "farthest_from_catalyst"}


def test_logprob_mode_gives_the_same_choice():
    model = ProsodyBaseline(rule="slower")
    queries = [query(tone(seconds=1.0), tone(seconds=1.3))]
    assert [o.choice for o in model.score(queries)] == [o.choice for o in model.generate(queries)] == [2]


def test_measure_rule_counts_pairs_and_trajectories_by_hand():
    longer, shorter = feats(duration_s=3.0), feats(duration_s=2.0)
    dialogues = [
        {"turn4": (longer, shorter, None), "turn6": (longer, shorter, None)},  # both right
        {"turn4": (longer, shorter, None), "turn6": (shorter, longer, None)},  # turn 6 wrong
        {"turn4": (shorter, longer, None), "turn6": (longer, shorter, None)},  # turn 4 wrong
        {"turn4": (shorter, longer, None), "turn6": (shorter, longer, None)},  # both wrong
    ]
    assert measure_rule("slower", dialogues) == {"acc_turn4": 0.5, "acc_turn6": 0.5, "acc_all": 0.5, "acc_traj": 0.25, "ties": 0, "n_dialogues": 4}
    assert measure_rule("faster", dialogues)["acc_traj"] == 0.25
    assert measure_rule("slower", dialogues[:1])["acc_traj"] == 1.0
