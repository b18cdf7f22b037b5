"""`speecheq report`: leaderboard values, SEQ cohort rules, figures, and the skipped-figure paths, on hand-built results.json files."""

from __future__ import annotations

import csv
import json
import logging
from pathlib import Path

import pytest

from eval_scripts import report
from speecheq_dataset.taxonomy import SUBSCALES

SLUGS = [s.slug for s in SUBSCALES]


def write_run(root: Path, name: str, *, model: str, acc: tuple[float, float, float, float], label: str | None = None,
              inference: str = "sequential", subscale_shift: float = 0.0, invalid: float = 0.0, persona: str | None = None) -> Path:
    """A results.json as eval_scripts/run.py writes it (only the keys the report reads, plus a few others)."""
    acc1, acc2, acc_all, traj = acc
    per_subscale = {
        slug: {"acc_turn4": acc1, "acc_turn6": min(1.0, acc2 + subscale_shift * (i % 3)), "acc_all": acc_all,
               "acc_traj": min(1.0, max(0.0, traj + 0.02 * (i - 7))), "invalid_rate": invalid, "n_dialogues": 3}
        for i, slug in enumerate(SLUGS)
    }
    results = {
        "model": {"name": model, **({"label": label} if label else {})},
        "label": label or model,
        "config": {"model": model, "output_dir": str(root / name), "dataset": "/data/x", "model_args": {}, "limit": None, "seed": 0,
                   "batch_size": 1, "inference": inference, "history": "audio", "orders": "random", "num_runs": 1,
                   "persona": persona, "prompt_file": None, "choice_mode": "generate", "oracle": False},
        "metrics": {"acc_turn4": acc1, "acc_turn6": acc2, "acc_all": acc_all, "acc_traj": traj, "invalid_rate": invalid, "n_dialogues": 45},
        "per_subscale": per_subscale,
        "per_composite": {},
        "deployment": {"mean_latency_s": 1.0},
        "failed_dialogues": [],
    }
    extras = [f"persona={persona}"] * bool(persona) + [inference] * (inference != "sequential")
    results["label"] += f" [{', '.join(extras)}]" if extras else ""  # as the runner's model_label does
    run_dir = root / name
    run_dir.mkdir(parents=True)
    (run_dir / "results.json").write_text(json.dumps(results))
    return run_dir


@pytest.fixture
def cohort(tmp_path):
    """Three models (Acc_traj 0.40, 0.50, 0.70), a direct twin of model B, a prosody and a random baseline, a persona ablation."""
    runs = tmp_path / "runs"
    return [
        write_run(runs, "a", model="qwen2.5-omni", label="Model A", acc=(0.60, 0.55, 0.575, 0.40), invalid=0.1),
        write_run(runs, "b", model="qwen3-omni", label="Model B", acc=(0.70, 0.65, 0.675, 0.50)),
        write_run(runs, "b-direct", model="qwen3-omni", label="Model B", acc=(0.70, 0.75, 0.725, 0.55), inference="direct", subscale_shift=0.05),
        write_run(runs, "c", model="openai", label="Model C", acc=(0.80, 0.85, 0.825, 0.70)),
        write_run(runs, "slower", model="prosody", label="prosody:slower", acc=(0.778, 0.822, 0.8, 0.644)),
        write_run(runs, "random", model="random", acc=(0.5, 0.5, 0.5, 0.25)),
        write_run(runs, "persona", model="qwen3-omni", label="Model B", acc=(0.6, 0.6, 0.6, 0.4), persona="global_deficit"),
    ]


def rows_by_label(out: Path) -> dict[str, dict]:
    with (out / "leaderboard.csv").open() as handle:
        return {row["label"]: row for row in csv.DictReader(handle)}


@pytest.mark.slow
def test_seq_comes_from_the_model_cohort_and_baselines_do_not_move_it(cohort, tmp_path):
    out = tmp_path / "report"
    assert report.main([str(d) for d in cohort] + ["--output-dir", str(out)]) == 0
    rows = rows_by_label(out)
    # Cohort = the three main-setting models: median 0.50, MAD = median(|0.1|, 0, |0.2|) = 0.10.
    # SEQ = 100 + 15 (x - 0.5) / (1.4826 * 0.10)
    assert float(rows["Model B"]["seq"]) == pytest.approx(100.0)
    assert float(rows["Model A"]["seq"]) == pytest.approx(100 - 15 * 0.1 / 0.14826)  # 89.88
    assert float(rows["Model C"]["seq"]) == pytest.approx(100 + 15 * 0.2 / 0.14826)  # 120.24
    assert float(rows["prosody:slower"]["seq"]) == pytest.approx(100 + 15 * 0.144 / 0.14826)  # scored, not in the cohort
    assert float(rows["random"]["seq"]) == pytest.approx(100 - 15 * 0.25 / 0.14826)  # 74.71
    assert rows["prosody:slower"]["kind"] == "baseline" and rows["random"]["kind"] == "baseline"
    assert rows["Model A"]["kind"] == "model"
    # Direct and persona runs are ablations: on the scale, not in the cohort.
    assert rows["Model B [direct]"]["kind"] == "ablation" and rows["Model B [persona=global_deficit]"]["kind"] == "ablation"
    assert float(rows["Model B [direct]"]["seq"]) == pytest.approx(100 + 15 * 0.05 / 0.14826)
    assert float(rows["Model A"]["invalid_rate"]) == pytest.approx(0.1)
    assert [r for r in rows.values() if r["rank"] == "1"][0]["label"] == "Model C"
    report_json = json.loads((out / "report.json").read_text())
    assert report_json["reference_cohort"]["median"] == pytest.approx(0.5) and report_json["reference_cohort"]["mad"] == pytest.approx(0.1)
    assert report_json["chance_seq"] == pytest.approx(100 - 15 * 0.25 / 0.14826)


@pytest.mark.slow
def test_markdown_marks_baselines_and_chance(cohort, tmp_path):
    out = tmp_path / "report"
    report.main([str(d) for d in cohort] + ["--output-dir", str(out)])
    markdown = (out / "leaderboard.md").read_text()
    assert "| *prosody:slower †* | 0.778 | 0.822 | 0.800 | 0.644 | 0.000 | 114.6 | 45 |" in markdown
    assert "| 1 | Model C | 0.800 | 0.850 | 0.825 | 0.700 | 0.000 | 120.2 | 45 |" in markdown
    assert "| | *chance* | 0.500 | 0.500 | 0.500 | 0.250 | | 74.7 | |" in markdown
    assert "shortcut baseline" in markdown and "direct inference changes Acc2 by +0.100" in markdown


@pytest.mark.slow
def test_all_figures_are_written_as_png(cohort, tmp_path):
    out = tmp_path / "report"
    report.main([str(d) for d in cohort] + ["--output-dir", str(out)])
    for name in (report.FIGURE_SEQ, report.FIGURE_HEATMAP, report.FIGURE_DELTAS):
        data = (out / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000, name


@pytest.mark.slow
def test_runs_sharing_a_label_are_told_apart_by_their_directory(tmp_path):
    runs = [write_run(tmp_path, f"seed{i}", model="m", label="M", acc=(0.6, 0.6, 0.6, traj)) for i, traj in enumerate((0.3, 0.5, 0.4))]
    out = tmp_path / "report"
    assert report.main([str(d) for d in runs] + ["--output-dir", str(out)]) == 0
    assert {label: float(row["seq"]) for label, row in rows_by_label(out).items()} == pytest.approx(
        {"M (seed0)": 100 - 15 / 1.4826, "M (seed1)": 100 + 15 / 1.4826, "M (seed2)": 100.0})


def test_direct_runs_pair_only_with_their_sequential_twin(cohort):
    runs = [report.load_run(d) for d in cohort]
    report._unique_labels(runs)
    pairs = report.direct_pairs(runs)
    assert [(s.run_dir.split("/")[-1], d.run_dir.split("/")[-1]) for s, d in pairs] == [("b", "b-direct")]


@pytest.mark.slow
def test_without_direct_runs_the_delta_figure_is_skipped_with_a_note(cohort, tmp_path, caplog):
    caplog.set_level(logging.INFO)
    out = tmp_path / "report"
    no_direct = [d for d in cohort if d.name != "b-direct"]
    assert report.main([str(d) for d in no_direct] + ["--output-dir", str(out)]) == 0
    assert not (out / report.FIGURE_DELTAS).exists()
    assert "delta figure is skipped" in caplog.text
    assert "delta figure is skipped" in (out / "leaderboard.md").read_text()


@pytest.mark.slow
def test_fewer_than_three_models_still_reports_with_a_warning(tmp_path, caplog):
    runs = [write_run(tmp_path, "a", model="m", label="A", acc=(0.6, 0.6, 0.6, 0.4)),
            write_run(tmp_path, "b", model="m2", label="B", acc=(0.7, 0.7, 0.7, 0.6))]
    out = tmp_path / "report"
    assert report.main([str(d) for d in runs] + ["--output-dir", str(out)]) == 0
    rows = rows_by_label(out)
    # median 0.5, MAD 0.1: A = 100 - 15 * 0.1 / 0.14826
    assert float(rows["A"]["seq"]) == pytest.approx(89.88, abs=0.01) and float(rows["B"]["seq"]) == pytest.approx(110.12, abs=0.01)
    assert "fewer than 3" in (out / "leaderboard.md").read_text()
    assert "fewer than 3" in caplog.text


@pytest.mark.slow
def test_a_single_run_has_mad_zero_and_seq_100(tmp_path):
    out = tmp_path / "report"
    run = write_run(tmp_path, "only", model="prosody", label="prosody:slower", acc=(0.78, 0.82, 0.8, 0.64))
    assert report.main([str(run), "--output-dir", str(out)]) == 0
    assert float(rows_by_label(out)["prosody:slower"]["seq"]) == 100.0
    assert "MAD is 0" in (out / "leaderboard.md").read_text()


@pytest.mark.slow
def test_reference_cohort_file_fixes_the_scale_and_freeze_writes_one(cohort, tmp_path):
    frozen = tmp_path / "cohort.json"
    report.main([str(d) for d in cohort] + ["--output-dir", str(tmp_path / "r1"), "--freeze-cohort", str(frozen)])
    assert json.loads(frozen.read_text())["median"] == pytest.approx(0.5)
    reference = tmp_path / "ref.json"
    reference.write_text(json.dumps({"median": 0.6, "mad": 0.05, "n_models": 8}))
    out = tmp_path / "r2"
    assert report.main([str(cohort[0]), "--output-dir", str(out), "--reference-cohort", str(reference)]) == 0
    # Model A alone against median 0.6 / MAD 0.05: 100 + 15 (0.4 - 0.6) / (1.4826 * 0.05) = 59.53
    assert float(rows_by_label(out)["Model A"]["seq"]) == pytest.approx(100 + 15 * -0.2 / (1.4826 * 0.05))


@pytest.mark.slow
def test_heatmap_can_show_seq_per_subscale(cohort, tmp_path):
    out = tmp_path / "report"
    assert report.main([str(d) for d in cohort] + ["--output-dir", str(out), "--heatmap-metric", "seq"]) == 0
    assert (out / report.FIGURE_HEATMAP).read_bytes()[:4] == b"\x89PNG"
    slugs, matrix = report.subscale_matrix([report.load_run(d) for d in cohort[:2]], "acc_traj")
    assert slugs == SLUGS and matrix[0][7] == pytest.approx(0.40) and matrix[1][0] == pytest.approx(0.50 - 0.14)


@pytest.mark.parametrize("broken, message", [("missing", "no results.json"), ("bad-json", "not valid JSON"), ("no-metrics", "missing key 'metrics'")])
def test_bad_run_directories_fail_naming_the_file(tmp_path, capsys, broken, message):
    run_dir = tmp_path / broken
    run_dir.mkdir()
    if broken == "bad-json":
        (run_dir / "results.json").write_text("{not json")
    elif broken == "no-metrics":
        (run_dir / "results.json").write_text(json.dumps({"config": {}}))
    assert report.main([str(run_dir), "--output-dir", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert message in err and str(run_dir) in err


@pytest.mark.slow
def test_a_run_with_no_scored_dialogue_is_listed_without_seq(cohort, tmp_path):
    empty = write_run(tmp_path / "more", "empty", model="gemini", label="Gemini", acc=(0.5, 0.5, 0.5, 0.25))
    data = json.loads((empty / "results.json").read_text())
    data["metrics"], data["per_subscale"] = None, {}
    (empty / "results.json").write_text(json.dumps(data))
    out = tmp_path / "report"
    assert report.main([str(d) for d in cohort] + [str(empty), "--output-dir", str(out)]) == 0
    row = rows_by_label(out)["Gemini"]
    assert row["seq"] == "" and row["acc_traj"] == ""
    assert float(rows_by_label(out)["Model B"]["seq"]) == pytest.approx(100.0)  # the cohort is unchanged
    assert "Gemini: no dialogue scored" in (out / "leaderboard.md").read_text()


@pytest.mark.slow
def test_replacing_a_report_needs_overwrite_and_leaves_no_stale_figure(cohort, tmp_path, capsys):
    # Issue 8.3: every command that writes a folder replaces nothing without --overwrite.
    out = tmp_path / "report"
    assert report.main([str(d) for d in cohort] + ["--output-dir", str(out)]) == 0
    assert (out / report.FIGURE_DELTAS).exists()
    before = (out / "report.json").read_text()
    assert report.main([str(d) for d in cohort] + ["--output-dir", str(out)]) == 2
    assert "already holds report files" in capsys.readouterr().err and (out / "report.json").read_text() == before
    no_direct = [str(d) for d in cohort if d.name != "b-direct"]
    assert report.main(no_direct + ["--output-dir", str(out), "--overwrite"]) == 0
    assert not (out / report.FIGURE_DELTAS).exists()  # the earlier report's figure did not outlive it


def _with(run_dir: Path, **changes) -> Path:
    """Edit a written results.json (top-level keys, or metrics.* keys)."""
    path = run_dir / "results.json"
    results = json.loads(path.read_text())
    for key, value in changes.items():
        if key.startswith("metrics."):
            results["metrics"][key.split(".", 1)[1]] = value
        else:
            results[key] = value
    path.write_text(json.dumps(results))
    return run_dir


@pytest.mark.slow
def test_runs_on_other_dialogues_are_never_ranked_silently(cohort, tmp_path):
    # Issue 11: an 8-dialogue run must never be ranked silently beside 45-dialogue runs.
    for run_dir in cohort:
        _with(run_dir, dataset_fingerprint="aaaa")
    _with(cohort[0], **{"metrics.n_dialogues": 8})
    _with(cohort[3], dataset_fingerprint="bbbb")
    out = tmp_path / "report"
    assert report.main([str(d) for d in cohort] + ["--output-dir", str(out)]) == 0
    markdown = (out / "leaderboard.md").read_text()
    top = markdown.split("## Models")[0]
    assert "Warning: these runs were not all scored on the same dialogues" in top
    assert "Model A: scored on 8 dialogues of dataset aaaa" in top and "Model C: scored on 45 dialogues of dataset bbbb" in top
    rows = rows_by_label(out)
    assert rows["Model A"]["other_data"] == "True" and rows["Model C"]["other_data"] == "True"
    assert rows["Model B"]["other_data"] == "False"
    assert "| Model A ≠ |" in markdown.replace("*", "")


@pytest.mark.slow
def test_intervals_reach_the_table_the_csv_and_seq(cohort, tmp_path):
    _with(cohort[1], **{"metrics.ci95": {"acc_traj": [0.40, 0.60], "acc_turn4": [0.6, 0.8]}})
    out = tmp_path / "report"
    assert report.main([str(d) for d in cohort] + ["--output-dir", str(out)]) == 0
    row = rows_by_label(out)["Model B"]
    assert (float(row["acc_traj_ci_low"]), float(row["acc_traj_ci_high"])) == (0.40, 0.60)
    assert float(row["seq_ci_low"]) < float(row["seq"]) < float(row["seq_ci_high"])
    assert row["acc_turn6_ci_low"] == ""  # no interval recorded, none invented
    assert "0.500 [0.40, 0.60]" in (out / "leaderboard.md").read_text()


@pytest.mark.slow
def test_baselines_get_their_own_section_and_no_seq_against_a_one_model_cohort(tmp_path):
    runs = tmp_path / "runs"
    dirs = [write_run(runs, "m", model="qwen3-omni", label="Model", acc=(0.6, 0.6, 0.6, 0.4)),
            write_run(runs, "slower", model="prosody", label="prosody:slower", acc=(0.78, 0.82, 0.8, 0.64)),
            write_run(runs, "random", model="random", acc=(0.5, 0.5, 0.5, 0.25))]
    out = tmp_path / "report"
    assert report.main([str(d) for d in dirs] + ["--output-dir", str(out)]) == 0
    rows = rows_by_label(out)
    assert float(rows["Model"]["seq"]) == 100.0
    assert rows["prosody:slower"]["seq"] == "" and rows["random"]["seq"] == ""  # not 160 and 40
    markdown = (out / "leaderboard.md").read_text()
    models, baselines = markdown.split("## Shortcut baselines")
    assert "prosody:slower" not in models.split("## Notes")[0] and "prosody:slower" in baselines
    assert "no SEQ; against a cohort of one model" in markdown


@pytest.mark.slow
def test_the_delta_figure_says_no_change_instead_of_empty_axes(cohort, tmp_path, monkeypatch):
    from eval_scripts import report_figures

    captured = {}
    real = report_figures.plot_deltas
    monkeypatch.setattr(report_figures, "plot_deltas", lambda series, slugs, path: (captured.update(series=series), real(series, slugs, path)))
    direct = json.loads((cohort[2] / "results.json").read_text())
    sequential = json.loads((cohort[1] / "results.json").read_text())
    direct["per_subscale"], direct["metrics"]["acc_turn6"] = sequential["per_subscale"], sequential["metrics"]["acc_turn6"]
    (cohort[2] / "results.json").write_text(json.dumps(direct))
    out = tmp_path / "report"
    assert report.main([str(d) for d in cohort] + ["--output-dir", str(out)]) == 0
    (label, deltas, overall), = captured["series"]
    assert label == "Model B" and overall == 0.0 and all(d == 0.0 for d in deltas)
    assert (out / report.FIGURE_DELTAS).stat().st_size > 0
