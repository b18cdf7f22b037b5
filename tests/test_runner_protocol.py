"""The runner's protocol on real clips: prompt assembly, option orders, votes, run directory, failures."""

from __future__ import annotations

import json

import datasets
import numpy as np
import pytest

from eval_scripts import protocol
from eval_scripts import runner
from eval_scripts import store
from eval_scripts.models.base import ChoiceModel
from eval_scripts.models.base import ModelOutput
from eval_scripts.models.base import build_model
from eval_scripts.models.base import known_models
from eval_scripts.prompts import load_template
from eval_scripts.prompts import persona_names
from eval_scripts.prompts import persona_text
from speecheq_dataset.columns import CLIP_COLUMNS

N_DIALOGUES = 4  # the conftest's real_rows


def settings(**kw) -> protocol.ProtocolSettings:
    template = load_template()
    return protocol.ProtocolSettings(template=template, system=template["system"], **kw)


def audio_columns(query) -> list[str]:
    return [p.clip.column for p in query.parts if p.kind == "audio"]


TRAJ = protocol.Trajectory("generate", "random", 0)


# ------------------------------------------------------------ prompt assembly


@pytest.mark.parametrize("levels_traj", [protocol.Trajectory("generate", "high_first", 0), protocol.Trajectory("generate", "low_first", 0)])
def test_round1_interleaves_turns_1_to_3_then_the_two_turn4_options(dialogues, levels_traj):
    d = dialogues[0]
    q = protocol.build_query(settings(), d, 1, levels_traj)
    first, second = ("high", "low") if levels_traj.order == "high_first" else ("low", "high")
    assert audio_columns(q) == ["turn1_audio", "turn2_audio", "turn3_audio", f"turn4_audio_{first}", f"turn4_audio_{second}"]
    assert q.meta["levels"] == [first, second]
    # text and audio alternate: every clip is introduced by text naming its turn or option
    kinds = [p.kind for p in q.parts]
    assert kinds[0] == "text" and kinds[-1] == "text"
    assert all(a != b or a == "text" for a, b in zip(kinds, kinds[1:]))
    texts = [p.text for p in q.parts]
    for k, part in enumerate(q.parts):
        if part.kind == "audio":
            label = texts[k - 1]
            if part.clip.column.startswith("turn4"):
                assert label.rstrip().endswith(("Option 1:", "Option 2:"))
            else:
                assert label.rstrip().endswith(f"Turn {part.clip.column[4]}, {d.fields['speaker1_name' if part.clip.column[4] in '13' else 'speaker2_name']}:")
    # the clips are the decoded real audio, unchanged
    for part in q.parts:
        if part.kind == "audio":
            assert part.clip is d.clips[part.clip.column] and part.clip.sampling_rate == 16000
    assert q.options[0].column == f"turn4_audio_{first}" and q.preceding.column == "turn3_audio"
    prompt = "".join(texts)
    assert d.fields["turn4_text"] in prompt and d.fields["description"] in prompt
    for key in ("acoustic_profile_1", "acoustic_profile_2", "situational_demand", "reasoning", "selected"):
        assert f'"{key}"' in prompt


@pytest.mark.parametrize("turn4", ["high", "low"])
def test_round2_hears_turns_1_to_5_with_the_given_turn4_then_turn6_options(dialogues, turn4):
    q = protocol.build_query(settings(), dialogues[1], 2, TRAJ, turn4)
    cols = audio_columns(q)
    assert cols[:5] == ["turn1_audio", "turn2_audio", "turn3_audio", f"turn4_audio_{turn4}", "turn5_audio"]
    assert sorted(cols[5:]) == ["turn6_audio_high", "turn6_audio_low"]
    assert q.preceding.column == "turn5_audio" and q.meta["turn"] == 6


def test_history_text_gives_transcripts_and_keeps_only_the_options_as_audio(dialogues):
    d = dialogues[0]
    q = protocol.build_query(settings(history="text"), d, 2, TRAJ, "low")
    assert sorted(audio_columns(q)) == ["turn6_audio_high", "turn6_audio_low"]
    prompt = "".join(p.text for p in q.parts)
    for t in range(1, 6):
        assert d.fields[f"turn{t}_text"] in prompt


def test_oracle_replaces_candidate_clips_by_their_tone_instructions(dialogues):
    d = dialogues[2]
    q = protocol.build_query(settings(history="text", oracle=True), d, 1, protocol.Trajectory("generate", "low_first", 0))
    assert audio_columns(q) == []
    prompt = "".join(p.text for p in q.parts)
    low, high = d.clips["turn4_audio_low"].tone, d.clips["turn4_audio_high"].tone
    assert low and high and prompt.index(low) < prompt.index(high)  # Option 1 = low here


@pytest.mark.parametrize(
    "history, oracle, expected",
    [
        ("audio", False, list(CLIP_COLUMNS)),
        ("audio", True, list(CLIP_COLUMNS)),
        ("text", False, ["turn4_audio_high", "turn4_audio_low", "turn6_audio_high", "turn6_audio_low"]),
        ("text", True, []),
    ],
)
def test_heard_clips_cover_every_clip_any_query_plays(dialogues, history, oracle, expected):
    s = settings(history=history, oracle=oracle)
    d = dialogues[1]
    heard = protocol.heard_clips(s, d)
    assert [c.column for c in heard] == expected
    played = set()
    for order in ("high_first", "low_first"):
        traj = protocol.Trajectory("generate", order, 0)
        played |= set(audio_columns(protocol.build_query(s, d, 1, traj)))
        for turn4 in ("high", "low"):
            played |= set(audio_columns(protocol.build_query(s, d, 2, traj, turn4)))
    assert played <= set(expected)


def test_option_order_is_seeded_per_dialogue_round_and_run_and_roughly_balanced(dialogues):
    flips = [protocol.option_levels(0, f"d{i}", r, protocol.Trajectory("generate", "random", k)) for i in range(200) for r in (1, 2) for k in range(2)]
    share_high_first = sum(lv == ("high", "low") for lv in flips) / len(flips)
    assert 0.4 < share_high_first < 0.6
    again = [protocol.option_levels(0, f"d{i}", r, protocol.Trajectory("logprob", "random", k)) for i in range(200) for r in (1, 2) for k in range(2)]
    assert again == flips  # same presentations for both choice modes
    other_seed = [protocol.option_levels(1, f"d{i}", r, protocol.Trajectory("generate", "random", k)) for i in range(200) for r in (1, 2) for k in range(2)]
    assert other_seed != flips


@pytest.mark.parametrize(
    "inference, round1_level, expected",
    [("sequential", "high", "high"), ("sequential", "low", "low"), ("sequential", None, "low"), ("direct", "low", "high"), ("direct", None, "high")],
)
def test_round2_context_follows_the_inference_mode(inference, round1_level, expected):
    assert protocol.context_level(settings(inference=inference), round1_level) == expected


def test_personas_are_the_seven_of_the_spec():
    assert persona_names() == [
        "adaptive",
        "global_deficit",
        "self_perception_deficit",
        "self_expression_deficit",
        "interpersonal_deficit",
        "decision_making_deficit",
        "stress_management_deficit",
    ]
    assert len({persona_text(n) for n in persona_names()}) == 7
    with pytest.raises(ValueError, match="known personas"):
        persona_text("villain")


def test_prompt_file_missing_a_key_is_rejected_by_name(tmp_path):
    bad = tmp_path / "p.json"
    bad.write_text(json.dumps({"system": "x", "round1": "y"}))
    with pytest.raises(ValueError, match="round2"):
        load_template(bad)


# ------------------------------------------------------------ registry


def test_registry_fails_loudly_on_unknown_names():
    with pytest.raises(ValueError, match="unknown model 'gpt-7'.*known models:.*qwen2.5-omni.*random"):
        build_model("gpt-7")
    assert {"random", "qwen2.5-omni", "qwen3-omni", "qwen2-audio"} <= set(known_models())


# ------------------------------------------------------------ whole runs (cheap adapters)


class Recorder(ChoiceModel):
    """Answers from a fixed rule and keeps every query it saw (to check what round 2 heard)."""

    name = "recorder"
    modes = frozenset({"generate", "logprob"})
    sampling_rate = 16000

    def __init__(self, answer=lambda q: 1):
        self.answer = answer
        self.seen = []

    def generate(self, queries):
        self.seen += queries
        return [ModelOutput(text=json.dumps({"selected": f"Option {self.answer(q)}"}) if self.answer(q) else "no idea") for q in queries]

    def score(self, queries):
        self.seen += queries
        return [ModelOutput(choice=self.answer(q), option_logprobs=(-0.1, -2.0)) for q in queries]


def run_with(model, rows, tmp_path, name="run", **kw):
    config = runner.RunConfig(model=model.name, output_dir=str(tmp_path / name), n_bootstrap=50, **kw)
    return runner.run(config, model=model, dataset=rows, progress=False), tmp_path / name


@pytest.mark.parametrize("inference", ["sequential", "direct"])
def test_round2_hears_the_model_own_pick_or_the_resonant_clip(real_rows, tmp_path, inference):
    model = Recorder(answer=lambda q: 1)  # always Option 1, whatever it is
    results, run_dir = run_with(model, real_rows, tmp_path, inference=inference)
    by_uid = {q.uid: q for q in model.seen}
    for record in store.read_samples(run_dir):
        r1, r2 = record.trajectories[0].rounds
        picked = r1.levels[0]
        heard = by_uid[r2.uid]
        expected = picked if inference == "sequential" else "high"
        assert f"turn4_audio_{expected}" in audio_columns(heard)
        assert r2.turn4_in_context == expected
        assert r2.prompt.audio_columns == audio_columns(heard)  # the record names the clips the model heard
    assert results["metrics"]["invalid_rate"] == 0


def test_random_run_writes_the_contract_files(real_rows, tmp_path):
    results, run_dir = run_with(build_model("random"), real_rows, tmp_path, num_runs=3)
    on_disk = json.loads((run_dir / "results.json").read_text())
    assert on_disk == json.loads(json.dumps(results))
    for key in ("acc_turn4", "acc_turn6", "acc_all", "acc_traj", "invalid_rate", "n_dialogues", "ci95"):
        assert key in results["metrics"]
    for key in ("model", "label", "config", "per_subscale", "per_composite", "prompt_hash", "dataset_fingerprint", "versions", "git_hash", "deployment", "failed_dialogues", "seed"):
        assert key in results
    assert results["config"]["num_runs"] == 3 and results["metrics"]["n_dialogues"] == N_DIALOGUES
    samples = store.read_samples(run_dir)
    assert [s.id for s in samples] == list(real_rows["id"])
    for s in samples:
        assert [(t.run, [r.round for r in t.rounds]) for t in s.trajectories] == [(0, [1, 2]), (1, [1, 2]), (2, [1, 2])]
        # the recorded vote is the majority of the three runs' picked levels
        for rnd, turn in ((0, "turn4"), (1, "turn6")):
            levels = [t.rounds[rnd].selected_level for t in s.trajectories]
            assert s.votes["generate"][turn] == max(set(levels), key=levels.count)
        for t in s.trajectories:
            for r in t.rounds:
                assert r.parse_status == "json" and r.raw and r.latency_s >= 0


def test_both_orders_report_accuracy_per_order_and_position_bias(real_rows, tmp_path):
    always_first = Recorder(answer=lambda q: 1)
    results, _ = run_with(always_first, real_rows, tmp_path, "first", orders="both")
    assert results["position_bias_rate"] == 1.0  # picks the slot, not the clip
    assert results["by_order"]["high_first"]["acc_all"] == 1.0
    assert results["by_order"]["low_first"]["acc_all"] == 0.0
    assert results["metrics"]["acc_all"] == 0.0  # 1 of 2 votes is no majority: wrong

    knows = Recorder(answer=lambda q: q.meta["levels"].index("high") + 1)
    results, _ = run_with(knows, real_rows, tmp_path, "knows", orders="both")
    assert results["position_bias_rate"] == 0.0
    assert results["metrics"]["acc_traj"] == 1.0


def test_invalid_answers_count_as_wrong_and_keep_the_raw_text(real_rows, tmp_path):
    results, run_dir = run_with(Recorder(answer=lambda q: None), real_rows, tmp_path)
    assert results["metrics"]["invalid_rate"] == 1.0 and results["metrics"]["acc_all"] == 0.0
    record = store.read_samples(run_dir)[0]
    r1, r2 = record.trajectories[0].rounds
    assert r1.raw == "no idea" and r1.parse_status == "invalid" and r1.choice is None
    assert r2.turn4_in_context == "low"  # an invalid pick continues with the dissonant clip


def test_choice_mode_both_reports_each_mode(real_rows, tmp_path):
    results, _ = run_with(build_model("random"), real_rows, tmp_path, choice_mode="both")
    assert set(results["by_choice_mode"]) == {"generate", "logprob"}
    assert results["metrics"] == results["by_choice_mode"]["generate"]


@pytest.mark.parametrize("prefetch", [0, 1])
def test_corrupt_or_missing_clip_fails_only_that_dialogue_naming_it(real_rows, tmp_path, prefetch):
    broken_id = real_rows[1]["id"]
    missing_id = real_rows[2]["id"]

    def damage(row):
        if row["id"] == broken_id:
            row["turn5_audio"] = {"bytes": b"ID3 this is not an mp3 at all" * 10, "path": "06.mp3"}
        if row["id"] == missing_id:
            row["turn6_audio_low"] = None
        return row

    damaged = real_rows.map(damage, features=real_rows.features)
    results, run_dir = run_with(build_model("random"), damaged, tmp_path, batch_size=1, prefetch=prefetch)
    failed = {f["id"]: f["error"] for f in results["failed_dialogues"]}
    assert set(failed) == {broken_id, missing_id}
    assert "turn5_audio" in failed[broken_id] and broken_id in failed[broken_id]
    assert "turn6_audio_low" in failed[missing_id]
    assert results["metrics"]["n_dialogues"] == N_DIALOGUES - 2
    statuses = [record.status for record in store.read_samples(run_dir)]
    assert statuses == ["ok", "failed", "failed", "ok"]


def test_a_different_config_is_not_resumed_into_and_overwrite_starts_over(real_rows, tmp_path):
    run_with(build_model("random"), real_rows, tmp_path)
    with pytest.raises(ValueError, match="different run.*seed: 0 before, 5 now"):
        run_with(build_model("random"), real_rows, tmp_path, seed=5)
    results, run_dir = run_with(build_model("random"), real_rows, tmp_path, seed=5, overwrite=True)
    assert results["config"]["seed"] == 5
    # batch size does not change answers, so it may change on resume
    again, _ = run_with(build_model("random"), real_rows, tmp_path, seed=5, batch_size=3)
    assert again["metrics"] == results["metrics"]


def test_text_only_models_need_oracle_and_text_history(real_rows, tmp_path):
    model = Recorder()
    model.needs_text_parts = True
    with pytest.raises(ValueError, match="--oracle --history text"):
        run_with(model, real_rows, tmp_path)
    results, _ = run_with(model, real_rows, tmp_path, "oracle", oracle=True, history="text")
    assert all(p.kind == "text" for q in model.seen for p in q.parts)
    assert results["label"].endswith("[history=text, oracle]")


@pytest.mark.slow
def test_persona_and_prompt_file_change_the_prompt_hash(real_rows, tmp_path):
    base, _ = run_with(build_model("random"), real_rows, tmp_path, "a")
    persona, _ = run_with(build_model("random"), real_rows, tmp_path, "b", persona="global_deficit")
    template = json.loads(open(load_template().path, encoding="utf-8").read())
    template["system"] = "You judge voices."
    other = tmp_path / "mine.json"
    other.write_text(json.dumps(template))
    custom, _ = run_with(build_model("random"), real_rows, tmp_path, "c", prompt_file=str(other))
    assert len({base["prompt_hash"], persona["prompt_hash"], custom["prompt_hash"]}) == 3
    assert custom["prompt_template"]["path"] == str(other)


def test_audio_cells_decode_to_the_model_rate(real_rows):
    d16 = runner.dialogue_from_row(real_rows[0], 16000)
    native = runner.dialogue_from_row(real_rows[0], None)
    for col in CLIP_COLUMNS:
        assert d16.clips[col].sampling_rate == 16000
        assert abs(d16.clips[col].duration_s - native.clips[col].duration_s) < 0.05
        assert np.isfinite(d16.clips[col].array).all()
    assert isinstance(real_rows.features["turn1_audio"], datasets.Audio)


class Fragile(Recorder):
    """Raises on any batch holding the query of one dialogue's round 2; answers the rest."""

    def __init__(self, bad_dialogue):
        super().__init__(answer=lambda q: 1)
        self.bad = bad_dialogue

    def generate(self, queries):
        if any(q.meta["dialogue_id"] == self.bad and q.meta["round"] == 2 for q in queries):
            raise RuntimeError("CUDA error: device-side assert (simulated)")
        return super().generate(queries)


def test_a_failing_query_fails_only_its_dialogue_whatever_the_batch(real_rows, tmp_path):
    bad = real_rows[0]["id"]
    outcomes = []
    for batch in (1, 4):
        results, run_dir = run_with(Fragile(bad), real_rows, tmp_path, f"b{batch}", batch_size=batch)
        assert [f["id"] for f in results["failed_dialogues"]] == [bad]
        assert "simulated" in results["failed_dialogues"][0]["error"] and "/r2/" in results["failed_dialogues"][0]["error"]
        outcomes.append((results["metrics"], (run_dir / "samples.jsonl").read_text().count('"status": "ok"')))
    assert outcomes[0] == outcomes[1] and outcomes[0][1] == N_DIALOGUES - 1


from hypothesis import given  # noqa: E402
from hypothesis import settings as hyp_settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@hyp_settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**31),
    order=st.sampled_from(["random", "high_first", "low_first"]),
    run=st.integers(0, 4),
    index=st.integers(0, N_DIALOGUES - 1),
    turn4=st.sampled_from(["high", "low"]),
    history=st.sampled_from(["audio", "text"]),
)
def test_every_query_presents_both_candidates_of_its_test_turn_once(dialogues, seed, order, run, index, turn4, history):
    s = settings(history=history)
    s = protocol.ProtocolSettings(template=s.template, system=s.system, seed=seed, history=history)
    d = dialogues[index]
    for round_ in (1, 2):
        q = protocol.build_query(s, d, round_, protocol.Trajectory("generate", order, run), turn4)
        turn = 4 if round_ == 1 else 6
        cols = audio_columns(q)
        assert cols[-2:] == [o.column for o in q.options]
        assert sorted(cols[-2:]) == [f"turn{turn}_audio_high", f"turn{turn}_audio_low"]
        assert len(cols) == (2 if history == "text" else 2 + (3 if round_ == 1 else 5))
        assert q.meta["levels"] == [c.rsplit("_", 1)[1] for c in cols[-2:]]
        assert q.seed == protocol.query_seed(seed, d.id, round_, protocol.Trajectory("generate", order, run))


@pytest.mark.parametrize(
    "prefetch, device, expected",
    [(None, "cpu", 0), (None, "cuda", 1), (None, "xpu", 1), (0, "cuda", 0), (2, "cpu", 2)],
)
def test_loading_ahead_defaults_to_accelerators_only(prefetch, device, expected):
    import torch

    config = runner.RunConfig(model="random", output_dir="unused", prefetch=prefetch)
    assert runner.loading_depth(config, torch.device(device)) == expected


def test_negative_prefetch_is_rejected_by_name():
    with pytest.raises(ValueError, match="--prefetch must be >= 0, got -1"):
        runner.RunConfig(model="random", output_dir="unused", prefetch=-1).validate()
