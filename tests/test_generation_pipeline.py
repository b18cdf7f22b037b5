"""The pipeline end to end offline (scripted LLM + espeak-ng): generate -> dataset build -> load_dataset -> a prosody run; resume.

A small set (two subscales x three valences) keeps the suite fast; the full
45-dialogue set (`--per-cell 1`) and its audit are in bench/bench_generation.py.
"""

from __future__ import annotations

import json

import pytest

from builders.audit import load_pairs
from builders.audit import audit_table
from builders.audit import passes_bound
from builders.generation.matrix import plan_items
from builders.generation.pipeline import work_dir_of
from builders.generation.scripted import ScriptedBackend
from builders.generation.stages import TEXT_STAGES
from builders.generation.stages import run_text_stage
from builders.generation.store import StageStore
from speecheq_dataset.tts_backends import EspeakTts
from generation_helpers import SMALL_SUBSCALES
from generation_helpers import CountingBackend
from generation_helpers import metadata_of
from generation_helpers import small_generated  # noqa: F401 (fixture)
from speecheq_dataset.raw import iter_dialogues

pytestmark = pytest.mark.slow  # a whole track or pipeline run per module: left out of the quick `-m "not slow"` loop


def test_generated_set_is_valid_raw_output_with_one_dialogue_per_cell(small_generated):
    raw, summary = small_generated
    dialogues = list(iter_dialogues(raw, strict=True))  # the dataset reader accepts every folder
    assert len(dialogues) == 6 and summary.written == 6
    assert sorted((d.fields["subscale"], d.fields["scenario_valence"]) for d in dialogues) == sorted(
        (s, v) for s in SMALL_SUBSCALES for v in ("Positive", "Negative", "Conflict"))
    for d in dialogues:
        assert d.fields["turn4_tone_high"] != d.fields["turn4_tone_low"] and all(x > 0.3 for x in d.clip_durations)
    metadata = metadata_of(raw)[0]
    gen = metadata["generation_metadata"]
    assert gen["generation_version"] == "v2" and gen["generator"]["llm"] == "scripted" and gen["audio_files_count"] == 8
    assert metadata["scenario"]["speaker1_voice"].startswith("en-us") and set(gen["synthesis"]) == {f"0{n}" for n in range(1, 9)}
    assert [s.stage for s in summary.stages] == ["scenario", "dialogue", "tones", "filter", "speech"]
    assert summary.oracle["accuracy"] == 1.0 and summary.oracle["flagged"] == []


def test_every_pair_passes_contrast_and_the_measured_audit_meets_the_bound(small_generated):
    raw, summary = small_generated
    from speecheq_dataset.acoustics import contrast_score

    pairs = load_pairs(raw)  # measured again from the written clips
    assert len(pairs) == 12 and all(contrast_score(p.high, p.low).passed for p in pairs)
    rows = audit_table(pairs)
    assert passes_bound(rows, 0.6), rows
    # the pipeline's own audit (from features adjusted for the chosen gains) equals the re-measured one
    ours = {r.rule: r.pair_accuracy for r in summary.audit_rows}
    assert {r.rule: r.pair_accuracy for r in rows} == pytest.approx(ours, abs=1e-9)
    report = json.loads((work_dir_of(raw) / "report.json").read_text())
    assert report["audit_passes_bound"] is True and (work_dir_of(raw) / "audit.csv").is_file()


def test_generate_then_dataset_build_then_load_dataset_then_a_prosody_run(small_generated, tmp_path):
    from datasets import load_dataset

    from builders.cli import main as dataset_main
    from eval_scripts.run import main as eval_main

    raw, _ = small_generated
    export = tmp_path / "export"
    assert dataset_main(["build", str(raw), str(export), "--strict"]) == 0
    ds = load_dataset(str(export), split="test")
    assert len(ds) == 6 and ds[0]["turn4_text"] and ds.features["turn4_audio_high"].__class__.__name__ == "Audio"
    runs = tmp_path / "run"
    assert eval_main(["--model", "prosody", "--dataset", str(export), "--output-dir", str(runs)]) == 0
    metrics = json.loads((runs / "results.json").read_text())["metrics"]
    assert metrics["n_dialogues"] == 6 and metrics["invalid_rate"] == 0.0


def test_the_command_line_runs_the_same_pipeline(tmp_path, capsys):
    from speecheq_cli.main import main

    out = tmp_path / "cli"
    args = ["generate", str(out), "--llm", "scripted", "--tts", "espeak", "--per-cell", "1", "--seed", "0",
            "--subscales", "interpersonal_empathy", "--valences", "Negative"]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "speech   produced    1" in printed and "Shortcut audit" in printed
    assert len(list(out.glob("*/*/metadata.json"))) == 1
    assert main(args) == 0  # resumed: nothing left to do
    assert "already done    1" in capsys.readouterr().out
    other_seed = [a if a != "0" else "1" for a in args]  # same folder, another plan: refused rather than mixed
    assert main(other_seed) == 2 and "holds a generation with other settings" in capsys.readouterr().err


def test_a_folder_generate_did_not_make_is_refused_and_left_as_it_was(tmp_path, capsys):
    from speecheq_cli.main import main

    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "thesis.tex").write_text("mine")
    (tmp_path / "notes" / "interpersonal_empathy").mkdir()  # even one that looks like a subscale folder
    args = ["generate", str(tmp_path / "notes"), "--llm", "scripted", "--tts", "espeak", "--per-cell", "1", "--subscales", "interpersonal_empathy"]
    assert main(args) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "is not empty (interpersonal_empathy, thesis.tex)" in error[0] and "pick a new or empty folder" in error[0]
    assert sorted(p.name for p in (tmp_path / "notes").iterdir()) == ["interpersonal_empathy", "thesis.tex"]
    assert (tmp_path / "notes" / "thesis.tex").read_text() == "mine"


def test_resume_after_an_interruption_redoes_nothing_finished(tmp_path):
    items = plan_items(1, 0, subscales=("interpersonal_empathy",))
    interrupted = CountingBackend(ScriptedBackend(), stop_after=2)
    with pytest.raises(KeyboardInterrupt):
        run_text_stage("scenario", items, tmp_path, interrupted, progress=False)
    finished = {k for k, r in StageStore(tmp_path, "scenario").load().items() if r["status"] == "ok"}
    assert len(finished) == 2
    resumed = CountingBackend(ScriptedBackend())
    for stage in TEXT_STAGES:
        run_text_stage(stage, items, tmp_path, resumed, progress=False)
    scenario_calls = [item for stage, item in resumed.calls if stage == "scenario"]
    assert scenario_calls == [i.item_id for i in items if i.item_id not in finished]  # only the unfinished one
    again = CountingBackend(ScriptedBackend())
    for stage in TEXT_STAGES:
        assert run_text_stage(stage, items, tmp_path, again, progress=False).skipped == 3
    assert again.calls == []


class CountingTts(EspeakTts):
    def __init__(self):
        self.count = 0

    def synthesize(self, *args, **kwargs):
        self.count += 1
        return super().synthesize(*args, **kwargs)


def test_a_rerun_of_a_finished_generation_synthesises_and_rewrites_nothing(small_generated):
    from builders.generation.pipeline import GenerateConfig
    from builders.generation.pipeline import run_pipeline

    raw, _ = small_generated
    before = {p: p.stat().st_mtime_ns for p in raw.glob("*/*/metadata.json")}
    tts, llm = CountingTts(), CountingBackend(ScriptedBackend())
    summary = run_pipeline(GenerateConfig(out_dir=str(raw), subscales=SMALL_SUBSCALES, oracle=False), text_backend=llm, tts=tts,
                           progress=False)
    assert tts.count == 0 and llm.calls == [] and summary.written == 0 and summary.unchanged == 6
    assert {p: p.stat().st_mtime_ns for p in raw.glob("*/*/metadata.json")} == before


def test_counter_steered_renderings_flip_the_majority_side_of_a_feature(small_generated, tmp_path):
    import shutil

    from builders.features import FeatureCache
    from builders.generation.pipeline import load_or_create_plan
    from builders.generation.speech import add_counter_renderings
    from builders.generation.pipeline import GenerateConfig

    raw, _ = small_generated
    copy = tmp_path / "copy"
    shutil.copytree(raw, copy)
    work = work_dir_of(copy)
    items, _ = load_or_create_plan(GenerateConfig(out_dir=str(copy), subscales=SMALL_SUBSCALES), work)
    before = StageStore(work, "speech").load()
    # pretend every selected resonant clip is the longer one: the rule "slower" would be right on all pairs
    sides = {(i.item_id, t): 1.0 for i in items for t in (4, 6)}
    added = add_counter_renderings(work, {i.item_id: i for i in items}, sides, "duration_s", EspeakTts(), FeatureCache(), seed=0)
    after = StageStore(work, "speech").load()
    # a pair whose resonant clip is already the shorter one by the margin needs no counter-rendering
    import math

    from builders.generation.speech import DURATION_MARGIN

    def already_shorter(candidate):
        return math.log(candidate["high"]["features"]["duration_s"] / candidate["low"]["features"]["duration_s"]) <= -DURATION_MARGIN

    expected = sum(not already_shorter(before[i.item_id]["output"]["pairs"][str(t)]["candidates"][-1]) for i in items for t in (4, 6))
    assert 0 < added <= expected  # fewer where the rate control is already at its limit
    grown = [(k, t) for k in after for t in ("4", "6")
             if len(after[k]["output"]["pairs"][t]["candidates"]) > len(before[k]["output"]["pairs"][t]["candidates"])]
    assert len(grown) == added
    for item_id, turn in grown:
        old = before[item_id]["output"]["pairs"][turn]["candidates"][-1]
        newer = after[item_id]["output"]["pairs"][turn]["candidates"][-1]
        # steered to make the resonant clip shorter: it speeds up, the dissonant one slows down (within the limits)
        assert newer["high"]["controls"]["rate"] >= old["high"]["controls"]["rate"]
        assert newer["low"]["controls"]["rate"] <= old["low"]["controls"]["rate"]
        assert newer["high"]["controls"] != old["high"]["controls"] or newer["low"]["controls"] != old["low"]["controls"]
    assert add_counter_renderings(work, {}, sides, "rms_db", EspeakTts(), FeatureCache(), seed=0) == 0  # level: gains do that


class RejectOneItem:
    """The scripted backend, except that one item's scenario answers always fail their checks."""

    concurrency = 1

    def __init__(self, item_id: str):
        self.item_id, self.inner = item_id, ScriptedBackend()

    def complete(self, request):
        if request.stage == "scenario" and request.inputs["item"]["item_id"] == self.item_id:
            from speecheq_dataset.chat import ChatReply

            return ChatReply('{"title": "no other keys"}')
        return self.inner.complete(request)

    def usage(self):
        return self.inner.usage()


def test_a_rejected_item_is_replaced_in_its_cell_with_its_targets(tmp_path):
    from builders.generation.pipeline import GenerateConfig
    from builders.generation.pipeline import run_pipeline

    config = GenerateConfig(out_dir=str(tmp_path / "raw"), subscales=("interpersonal_empathy",), valences=("Negative",), oracle=False,
                            max_attempts=2)
    original = plan_items(1, 0, subscales=config.subscales, valences=config.valences)[0]
    summary = run_pipeline(config, text_backend=RejectOneItem(original.item_id), tts=EspeakTts(), progress=False)
    assert list(summary.rejected) == [original.item_id] and "missing or empty 'context'" in summary.rejected[original.item_id][0]
    plan = json.loads((work_dir_of(tmp_path / "raw") / "plan.json").read_text())
    replacement = plan["replacements"][original.item_id]
    assert replacement == "interpersonal_empathy.negative.001"
    new = next(i for i in plan["items"] if i["item_id"] == replacement)
    assert new["targets"] == original.as_dict()["targets"] and new["scenario_type"] == original.scenario_type
    assert summary.written == 1 and summary.per_cell == {"interpersonal_empathy/Negative": 1}
