"""Human check (sheet export/import, Cohen's kappa, exclusions) and publish (validated export + dry-run push), offline."""

from __future__ import annotations

import csv
import json

import pytest

from builders.human_check import CRITERIA
from builders.human_check import cohen_kappa
from builders.human_check import main as human_main
from builders.publish import main as publish_main
from generation_helpers import real_features_file  # noqa: F401 (fixture)
from generation_helpers import small_generated  # noqa: F401 (fixture)


@pytest.mark.parametrize("a, b, expected", [
    # 10 items: both pass 6, both fail 2, disagree 2 -> po 0.8, pe 0.7*0.7 + 0.3*0.3 = 0.58, kappa = 0.22/0.42
    ([1] * 6 + [0] * 2 + [1, 0], [1] * 6 + [0] * 2 + [0, 1], 0.22 / 0.42),
    ([1, 0, 1, 0], [1, 0, 1, 0], 1.0),
    ([1, 0, 1, 0], [0, 1, 0, 1], -1.0),
    ([1, 1, 1], [1, 1, 1], 1.0),  # one constant label, full agreement
])
def test_cohen_kappa_hand_worked(a, b, expected):
    assert cohen_kappa(a, b) == pytest.approx(expected)


def test_kappa_of_opposite_constant_raters_is_zero_and_lengths_must_match():
    assert cohen_kappa([1, 1], [0, 0]) == 0.0  # chance agreement 0, observed 0
    with pytest.raises(ValueError):
        cohen_kappa([1], [1, 0])


def test_stratified_sheet_from_the_real_data(real_raw_dir, tmp_path):
    sheet = tmp_path / "sheet.csv"
    assert human_main(["export", str(real_raw_dir), str(sheet), "--per-subscale", "2"]) == 0
    rows = list(csv.DictReader(sheet.open()))
    assert len(rows) == 30 and all(sum(r["subscale"] == s for r in rows) == 2 for s in {r["subscale"] for r in rows})
    assert all(r[c] == "" for r in rows for c in CRITERIA) and rows[0]["turn4_clip_high"].endswith("04.mp3")
    sheet.write_text("an annotator's marks")  # exporting again must not wipe a filled sheet
    assert human_main(["export", str(real_raw_dir), str(sheet)]) == 2 and sheet.read_text() == "an annotator's marks"
    assert human_main(["export", str(real_raw_dir), str(sheet), "--per-subscale", "1", "--overwrite"]) == 0
    assert len(list(csv.DictReader(sheet.open()))) == 15


def _fill(sheet, target, fails: dict[str, str]):
    rows = list(csv.DictReader(sheet.open()))
    for row in rows:
        for c in CRITERIA:
            row[c] = "0" if fails.get(row["dataset_id"]) == c else "1"
    with target.open("w", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


@pytest.mark.slow
def test_two_sheets_give_kappa_and_exclusions_that_publish_leaves_out(small_generated, tmp_path, capsys):
    raw, _ = small_generated
    sheet = tmp_path / "sheet.csv"
    assert human_main(["export", str(raw), str(sheet)]) == 0  # 5 per subscale asked, 3 exist per subscale here
    ids = [r["dataset_id"] for r in csv.DictReader(sheet.open())]
    assert len(ids) == 6
    _fill(sheet, tmp_path / "a.csv", {ids[0]: "audio_quality"})
    _fill(sheet, tmp_path / "b.csv", {ids[0]: "audio_quality", ids[1]: "answer_correctness"})
    exclusions = tmp_path / "exclude.json"
    assert human_main(["import", str(tmp_path / "a.csv"), str(tmp_path / "b.csv"), "--out", str(exclusions)]) == 0
    result = json.loads(exclusions.read_text())
    assert set(result["excluded"]) == {ids[0], ids[1]}
    assert result["excluded"][ids[1]] == ["answer_correctness (B)"]
    assert result["kappa"]["audio_quality"] == 1.0 and result["kappa"]["answer_correctness"] == 0.0
    assert result["pass_rates"]["answer_correctness"] == [1.0, pytest.approx(5 / 6)]

    export = tmp_path / "export"
    # 4 of 6 dialogues left: 8 pairs cannot all sit within 60 % (steps of 12.5 %), so the bound is waived here
    assert publish_main([str(raw), str(export), "--repo-id", "someone/speecheq-generated", "--exclusions", str(exclusions),
                         "--cache", str(tmp_path / "f.jsonl"), "--allow-over-bound"]) == 0
    printed = capsys.readouterr().out
    assert f"left out {ids[0]}: human check: audio_quality (A+B)" in printed
    assert "Dry run: would upload 2 files" in printed and "README.md" in printed
    from datasets import load_dataset

    ds = load_dataset(str(export), split="test")
    assert len(ds) == 4 and not {ids[0], ids[1]} & set(ds["id"])
    card = (export / "README.md").read_text()
    assert "### Shortcut audit" in card and "| slower |" in card and "the 60% bound" in card

    # the generator itself can leave them out and rebalance what remains
    import shutil

    from generation_helpers import generate_small

    copy = tmp_path / "copy"
    shutil.copytree(raw, copy)
    summary = generate_small(copy, exclusions=str(exclusions), oracle=False)
    remaining = {p.parent.name for p in copy.glob("*/*/metadata.json")}
    assert len(remaining) == 4 and not {ids[0], ids[1]} & remaining and summary.audit_rows[0].n_pairs == 8


@pytest.mark.slow
def test_a_sheet_with_a_blank_criterion_fails_by_row_and_column(small_generated, tmp_path, capsys):
    raw, _ = small_generated
    sheet = tmp_path / "sheet.csv"
    human_main(["export", str(raw), str(sheet)])
    assert human_main(["import", str(sheet), str(sheet), "--out", str(tmp_path / "x.json")]) == 2
    assert "line 2: text_quality is ''; write 1 (pass) or 0 (fail)" in capsys.readouterr().err
    notes = tmp_path / "notes.json"
    notes.write_text('{"my": "notes"}')  # --out never replaces what is not an exclusions file
    assert human_main(["import", str(sheet), str(sheet), "--out", str(notes)]) == 2 and notes.read_text() == '{"my": "notes"}'
    assert "exists and is not an exclusions file" in capsys.readouterr().err


@pytest.mark.slow
def test_publish_refuses_a_set_over_the_bound(real_raw_dir, real_features_file, tmp_path, capsys):
    # The authors' data leaks the label: publishing it as a balanced set is refused unless asked for.
    code = publish_main([str(real_raw_dir), str(tmp_path / "export"), "--repo-id", "a/b", "--cache", str(real_features_file)])
    assert code == 2 and "exceeds the 60% bound" in capsys.readouterr().err
    assert not (tmp_path / "export").exists()
