"""The shortcut audit and the contrast report: hand-worked tables, the authors' real pairs, and the CLI outputs."""

from __future__ import annotations

import csv
import math

import pytest

from builders.audit import AuditPair
from builders.audit import audit_table
from builders.audit import load_pairs
from builders.audit import main as audit_main
from builders.audit import passes_bound
from builders.audit import rule_outcome
from builders.features import FeatureCache
from builders.validate import distribution
from builders.validate import main as validate_main
from builders.validate import pair_contrasts
from generation_helpers import real_features_file  # noqa: F401 (fixture)
from generation_helpers import small_generated  # noqa: F401 (fixture)
from eval_scripts.models.prosody import choose_option
from speecheq_dataset.acoustics import ClipFeatures
from speecheq_dataset.delivery_rules import RULES


def clip(duration=2.0, rms=-20.0, pitch=200.0, spread=4.0, centroid=1000.0) -> ClipFeatures:
    return ClipFeatures(duration, pitch, 0.5, rms, 0.1, centroid, (0.0,) * 12, spread)


def test_hand_worked_audit_with_ties_as_half_and_trajectories_as_both_right():
    pairs = [
        # d1: the resonant clip is longer at both turns; quieter at turn 4 only
        AuditPair("d1", 4, clip(duration=3.0, rms=-25.0), clip(), clip()),
        AuditPair("d1", 6, clip(duration=2.5), clip(), clip()),
        # d2: shorter at turn 4, longer at turn 6; the pitch of turn 6's low clip is unvoiced (undecidable)
        AuditPair("d2", 4, clip(duration=1.0, pitch=180.0), clip(), clip()),
        AuditPair("d2", 6, clip(duration=2.2), clip(pitch=float("nan")), clip()),
    ]
    rows = {r.rule: r for r in audit_table(pairs)}
    assert rows["slower"].pair_accuracy == 0.75 and rows["slower"].traj_accuracy == 0.5  # d1 both right, d2 one
    assert rows["faster"].pair_accuracy == 0.25 and rows["faster"].traj_accuracy == 0.0
    # quieter: right on d1 turn 4; equal levels elsewhere count a half each -> (1 + 0.5 * 3) / 4
    assert rows["quieter"].pair_accuracy == pytest.approx(0.625) and rows["quieter"].undecided == 3
    # lower pitch: right on d2 turn 4 (180 < 200), unvoiced and equal pitches are halves -> (1 + 0.5 * 3) / 4
    assert rows["lower_pitch"].pair_accuracy == pytest.approx(0.625)
    assert rows["quieter"].traj_accuracy == pytest.approx((1 * 0.5 + 0.5 * 0.5) / 2)
    assert set(rows) == set(RULES) and all(r.n_pairs == 4 and r.n_dialogues == 2 for r in rows.values())


def test_closest_to_catalyst_uses_the_delivery_distance():
    catalyst = clip(pitch=300.0, rms=-10.0)
    near, far = clip(pitch=290.0, rms=-12.0), clip(pitch=150.0, rms=-30.0)
    rows = {r.rule: r for r in audit_table([AuditPair("d", 4, near, far, catalyst), AuditPair("d", 6, far, near, catalyst)])}
    assert rows["closest_to_catalyst"].pair_accuracy == 0.5 and rows["closest_to_catalyst"].traj_accuracy == 0.0
    assert rows["closest_to_catalyst"].undecided == 0


def test_without_a_catalyst_the_catalyst_rules_cannot_decide():
    rows = {r.rule: r for r in audit_table([AuditPair("d", 4, clip(pitch=300.0), clip(), None)])}
    assert rows["closest_to_catalyst"].pair_accuracy == 0.5 and rows["closest_to_catalyst"].undecided == 1
    assert math.isnan(rows["slower"].traj_accuracy)


@pytest.fixture(scope="module")
def real_pairs(real_raw_dir, real_features_file):
    return load_pairs(real_raw_dir, FeatureCache(real_features_file))


@pytest.mark.slow
def test_the_authors_real_pairs_leak_the_label_and_fail_the_bound(real_pairs):
    rows = {r.rule: r for r in audit_table(real_pairs)}
    assert rows["slower"].n_pairs == 90 and rows["slower"].n_dialogues == 45
    # SPEC §9, v1: "slower" right on 80 % of pairs; the runner's prosody baseline gives Acc_traj 0.644 on these 45
    assert rows["slower"].pair_accuracy == pytest.approx(0.80, abs=0.005)
    assert rows["slower"].traj_accuracy == pytest.approx(0.644, abs=0.005)
    assert rows["quieter"].pair_accuracy == pytest.approx(0.767, abs=0.005)
    assert not passes_bound(list(rows.values()), 0.6)


@pytest.mark.slow
def test_the_prosody_baseline_answers_as_the_audit_scores_on_every_real_pair(real_pairs):
    """One rule table: on each of the 90 real pairs, every rule picks in the baseline what the audit counts."""
    assert len(RULES) == 10
    for rule in RULES:
        for pair in real_pairs:
            choice, by_seed = choose_option(rule, (pair.high, pair.low), pair.catalyst, seed=0)
            outcome = rule_outcome(rule, pair)
            assert by_seed == (outcome == 0.5), (rule, pair.dialogue_id, pair.turn)
            assert by_seed or (choice == 1) == (outcome == 1.0), (rule, pair.dialogue_id, pair.turn)


@pytest.mark.slow
def test_contrast_v1_on_the_real_pairs_matches_the_calibration_numbers(real_pairs):
    scores = [r.result.score for r in pair_contrasts(real_pairs)]
    stats = distribution(scores)
    assert stats["n"] == 90 and stats["pass_rate"] == pytest.approx(83 / 90)  # 7 real pairs fall below 4 (docs/generation.md)
    assert stats["median"] == pytest.approx(6.14, abs=0.01) and sum(stats["histogram"].values()) == 90


@pytest.mark.slow
def test_audit_and_validate_commands_write_their_csvs(small_generated, tmp_path, capsys):
    raw, _ = small_generated
    cache = str(tmp_path / "features.jsonl")
    assert audit_main([str(raw), "--report", str(tmp_path / "audit.csv"), "--cache", cache, "--fail-over-bound"]) == 0
    rows = list(csv.DictReader((tmp_path / "audit.csv").open()))
    assert [r["rule"] for r in rows] == list(RULES) and {"rule", "pair_accuracy", "traj_accuracy", "n_pairs"} <= set(rows[0])
    assert validate_main([str(raw), "--report", str(tmp_path / "contrast.csv"), "--cache", cache, "--oracle-llm", "scripted"]) == 0
    contrast = list(csv.DictReader((tmp_path / "contrast.csv").open()))
    assert len(contrast) == 12 and {"dataset_id", "turn", "contrast_score"} <= set(contrast[0])
    assert all(float(r["contrast_score"]) >= 4 for r in contrast)
    out = capsys.readouterr().out
    assert "oracle (scripted): accuracy 1.000 over 6 dialogues" in out
    assert (tmp_path / "contrast-oracle.csv").is_file()
    assert len(FeatureCache(cache)) == 36  # every measured clip cached once, by hash
    # a second run replaces its own earlier reports (same header), and only those
    assert audit_main([str(raw), "--report", str(tmp_path / "audit.csv"), "--cache", cache]) == 0
    assert validate_main([str(raw), "--report", str(tmp_path / "contrast.csv"), "--cache", cache]) == 0


@pytest.mark.parametrize("command", [audit_main, validate_main], ids=["audit", "validate"])
def test_a_report_path_holding_something_else_is_refused_before_any_work(command, tmp_path, capsys, monkeypatch):
    from builders import audit

    def no_work(*args, **kwargs):
        raise AssertionError("the data was read before the report path was checked")

    monkeypatch.setattr(audit, "load_pairs", no_work)
    mine = tmp_path / "results.csv"
    mine.write_text("participant,score\n1,0.5\n")
    assert command([str(tmp_path), "--report", str(mine)]) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "exists and is not a report of this kind" in error[0]
    assert mine.read_text() == "participant,score\n1,0.5\n"

