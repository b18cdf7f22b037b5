"""How far delivery alone solves the real data (SPEC §9): the prosody rules on the 45 real dialogues, without the runner.

The exact figures are printed by bench/bench_prosody.py; here only weak,
honest bounds are asserted (SPEC §9 measured 75 % of pairs / 58 % of
trajectories for "slower" on 60 dialogues; we have 45 of them).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from eval_scripts.models.prosody import RULES, measure_rule
from speecheq_dataset.acoustics import ANALYSIS_SR, ClipFeatures, clip_features, contrast_score
from speecheq_dataset.audio import decode_audio

pytestmark = pytest.mark.slow  # seconds per test: left out of the quick `-m "not slow"` loop

# Raw clip files (SPEC §2.1): 04/05 = T4 high/low, 07/08 = T6 high/low. The catalyst turns are
# left out to keep this test short; bench/bench_prosody.py measures the catalyst rules too.
CLIPS = ("04", "05", "07", "08")
FEATURE_RULES = [rule for rule in RULES if "catalyst" not in rule]


def load_real_dialogues(raw_dir: Path) -> list[dict[str, tuple[ClipFeatures, ClipFeatures, None]]]:
    """Features of the two test pairs of every raw dialogue folder (decoded straight to the analysis rate)."""
    dialogues = []
    for folder in sorted(p.parent for p in raw_dir.glob("*/*/metadata.json")):
        f = {n: clip_features(*decode_audio(folder / "audio" / f"{n}.mp3", ANALYSIS_SR)) for n in CLIPS}
        dialogues.append({"turn4": (f["04"], f["05"], None), "turn6": (f["07"], f["08"], None)})
    return dialogues


@pytest.fixture(scope="module")
def real_dialogues(real_raw_dir):
    dialogues = load_real_dialogues(real_raw_dir)
    assert len(dialogues) == 45
    return dialogues


def test_the_high_eq_clip_is_longer_in_most_real_pairs(real_dialogues):
    slower = measure_rule("slower", real_dialogues)
    assert slower["acc_all"] > 0.55  # SPEC §9: 75 % on 60 dialogues
    assert slower["acc_traj"] > 0.30  # chance is 25 %
    assert slower["ties"] == 0
    faster = measure_rule("faster", real_dialogues)
    assert faster["acc_all"] == pytest.approx(1 - slower["acc_all"])  # opposite rules, no ties


def test_every_feature_rule_gives_a_full_table_on_real_data(real_dialogues):
    for rule in FEATURE_RULES:
        result = measure_rule(rule, real_dialogues)
        assert result["n_dialogues"] == 45
        assert 0 <= result["acc_traj"] <= min(result["acc_turn4"], result["acc_turn6"])


def test_real_pairs_have_measurable_contrast(real_dialogues):
    scores = [contrast_score(d[turn][0], d[turn][1]).score for d in real_dialogues for turn in ("turn4", "turn6")]
    assert all(0.0 <= s <= 8.0 for s in scores)
    # The published pairs were kept by the authors' own contrast check (threshold 4/8).
    assert sum(s >= 4.0 for s in scores) / len(scores) > 0.5
