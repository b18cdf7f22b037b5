"""The generative track (`speecheq respond`): a speech-output model answers the catalyst; ERS of its replies from the trajectory files.

The tiny random-weight Qwen2.5-Omni with its talker and token2wav, the tiny
V/A/D regressor and the tiny emotion classifier (all built offline from
configs) answer real dialogues from ../shared/data; an OpenAI-compatible
loopback server stands in for an audio model with audio output.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from eval_scripts import store
from eval_scripts.components.vad import n_seconds
from eval_scripts.generative import RespondConfig
from eval_scripts.generative import respond
from eval_scripts.responders import SpokenReply
from eval_scripts.responders import build_responder
from speecheq_dataset.audio import decode_audio
from speecheq_dataset.audio import encode_wav
from speecheq_dataset.audio import resample
from speecheq_metric import CATEGORICAL_MATRIX
from speecheq_metric import categorical_ers
from speecheq_metric import ers_dialogues
from test_api_adapters import SENTINEL
from test_api_adapters import FakeApi
from test_api_adapters import json_answer

# One torch thread, and slow: a whole generative run per module is left out of the quick `-m "not slow"` loop.
pytestmark = [pytest.mark.usefixtures("one_torch_thread"), pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[1]
TINY_OMNI = {"pretrained": "tiny-random"}


def _config(out: Path, dataset, **overrides) -> RespondConfig:
    settings = dict(model="qwen2.5-omni", model_args=dict(TINY_OMNI), output_dir=str(out), dataset=str(dataset), limit=2,
                    emotion_classifier="tiny-random")
    settings.update(overrides)
    return RespondConfig(**settings)


@pytest.fixture(scope="module")
def tiny_omni():
    return build_responder("qwen2.5-omni", **TINY_OMNI)


@pytest.fixture(scope="module")
def run(tmp_path_factory, real_raw_dir, tiny_omni):
    out = tmp_path_factory.mktemp("respond")
    results = respond(_config(out, real_raw_dir), model=tiny_omni, progress=False)
    return out, results, store.read_sample_lines(out)


def _track(path: Path) -> dict[str, np.ndarray]:
    """A trajectory CSV read independently of our reader: named columns via numpy."""
    table = np.genfromtxt(path, delimiter=",", names=True)
    return {d: np.atleast_1d(table[d]) for d in ("valence", "arousal", "dominance")}


@pytest.mark.slow
def test_replies_and_trajectories_are_written_per_dialogue_and_turn(run, dialogues):
    out, results, records = run
    assert [r["status"] for r in records] == ["ok", "ok"] and results["n_scored"] == 2
    for record, dialogue in zip(records, dialogues):
        assert record["id"] == dialogue.id and [t["turn"] for t in record["turns"]] == [2, 4, 6]
        for entry in record["turns"]:
            assert entry["reply_wav"] == f"replies/{record['id']}/{entry['turn']}.wav"
            audio, rate = decode_audio(out / entry["reply_wav"])
            assert rate == 24_000 and len(audio) == round(entry["reply_duration_s"] * rate) > 0
            for who in ("user", "model"):
                path = out / f"trajectories/{record['id']}/{entry['turn']}_{who}.csv"
                assert entry[f"{who}_csv"] == str(path.relative_to(out))
                assert path.read_text().splitlines()[0] == "second,valence,arousal,dominance"
            user_clip = dialogue.clips[entry["user_column"]].array
            assert entry["user_seconds"] == n_seconds(len(user_clip)) == len(_track(out / entry["user_csv"])["valence"])
            assert entry["model_seconds"] == n_seconds(len(resample(audio, rate, 16_000)))
            assert entry["user_label"] in CATEGORICAL_MATRIX and entry["model_label"] in CATEGORICAL_MATRIX
    assert results["label"] == "qwen2.5-omni:tiny-random" and results["model"]["talker"] is True
    assert results["config"]["vad_args"]["pretrained"] == "tiny-random"  # a tiny responder defaults to a tiny extractor: offline


@pytest.mark.parametrize("variant", ["reference", "paper"])
def test_ers_from_the_trajectory_files_matches_the_metric_module_on_the_same_arrays(run, variant):
    out, results, records = run
    pairs = [([_track(out / t["user_csv"]) for t in r["turns"]], [_track(out / t["model_csv"]) for t in r["turns"]]) for r in records]
    scores = ers_dialogues(pairs, variant=variant)
    turns = [t for d in scores for t in d.turns]
    active = [t.ebs for t in turns if t.ebs_active]
    overall = results["ers"][variant]["overall"]
    expected = {"ecs": np.mean([t.ecs for t in turns]), "ess": np.mean([t.ess for t in turns]), "ers": np.mean([t.ers for t in turns]),
                "ebs": np.mean(active) if active else None, "ct_ecs": np.mean([d.ct_ecs for d in scores]),
                "ct_ess": np.mean([d.ct_ess for d in scores]), "ct_ers": np.mean([d.ct_ers for d in scores]), "n_turns": 6, "n_dialogues": 2}
    for key, value in expected.items():
        assert overall[key] == pytest.approx(value, rel=1e-12, abs=1e-12) if value is not None else overall[key] is None
    assert results["metrics"] == results["ers"]["reference"]["overall"]
    groups = results["ers"][variant]
    assert set(groups["per_subscale"]) == {r["subscale"] for r in records} and list(groups["per_valence"]) == ["unknown"]  # v1 data
    assert sum(g["n_dialogues"] for g in groups["per_subscale"].values()) == 2


def test_categorical_ers_uses_the_classifier_labels_of_both_voices(run):
    _, results, records = run
    turns = [t for r in records for t in r["turns"]]
    assert results["categorical_ers"]["overall"] == categorical_ers([t["user_label"] for t in turns], [t["model_label"] for t in turns])
    assert set(results["emotion_classifier"]["label_map"].values()) == {"neutral", "happy", "angry", "sad"}


def test_rerunning_resumes_without_redoing_anything_and_a_changed_setting_is_refused(run, real_raw_dir, tiny_omni):
    out, results, _ = run
    stamps = {p: p.stat().st_mtime_ns for p in out.rglob("*.wav")}
    again = respond(_config(out, real_raw_dir, batch_size=2), model=tiny_omni, progress=False)  # batch size may change
    assert {p: p.stat().st_mtime_ns for p in out.rglob("*.wav")} == stamps
    assert again["ers"] == results["ers"] and again["categorical_ers"] == results["categorical_ers"]
    with pytest.raises(ValueError, match="holds a different run.*vad"):
        respond(_config(out, real_raw_dir, vad="cser"), model=tiny_omni, progress=False)


class _Flaky:
    """Wraps a responder; fails every request of one dialogue."""

    name = "flaky"
    sampling_rate = 16_000

    def __init__(self, inner, bad_id: str):
        self.inner, self.bad_id = inner, bad_id

    def respond(self, requests):
        if any(r.meta["dialogue_id"] == self.bad_id for r in requests):
            raise RuntimeError(f"boom on {self.bad_id}")
        return self.inner.respond(requests)

    def describe(self):
        return {"name": self.name}


@pytest.mark.slow
def test_a_failing_dialogue_is_recorded_and_retried_on_resume(tmp_path, real_raw_dir, tiny_omni, dialogues):
    config = _config(tmp_path, real_raw_dir, emotion_classifier=None, batch_size=2)
    results = respond(config, model=_Flaky(tiny_omni, dialogues[0].id), progress=False)
    records = {r["id"]: r for r in store.read_sample_lines(tmp_path)}
    assert records[dialogues[0].id]["status"] == "failed" and "boom on" in records[dialogues[0].id]["error"]
    assert records[dialogues[1].id]["status"] == "ok" and results["n_scored"] == 1 and results["categorical_ers"] is None
    results = respond(config, model=tiny_omni, progress=False)
    assert results["n_scored"] == 2 and not results["failed_dialogues"]


@pytest.mark.slow
def test_the_cli_runs_offline_on_the_embedded_sample(tmp_path, capsys):
    from speecheq_cli.main import main

    out = tmp_path / "respond"
    assert main(["respond", "--model", "qwen2.5-omni", "--model-args", "pretrained=tiny-random", "--output-dir", str(out),
                 "--limit", "2", "--no-progress"]) == 0
    assert "qwen2.5-omni:tiny-random (ERS, reference variant)" in capsys.readouterr().out
    results = json.loads((out / "results.json").read_text())
    assert set(results["ers"]["reference"]["per_valence"]) <= {"Positive", "Negative", "Conflict"}  # the sample is v2: valences known
    assert len(list(out.glob("replies/*/*.wav"))) == 6 and len(list(out.glob("trajectories/*/*.csv"))) == 12


# ---------------------------------------------------------------- an OpenAI audio model over the wire


def _audio_reply(record):
    tone = (0.3 * np.sin(2 * np.pi * 220 * np.arange(24_000) / 24_000)).astype(np.float32)
    turn = sum(1 for m in record["body"]["messages"] if m["role"] == "user")
    return json_answer({"choices": [{"message": {"role": "assistant", "content": None, "audio": {
        "id": "audio_1", "data": base64.b64encode(encode_wav(tone, 24_000)).decode(), "transcript": f"reply {turn}", "expires_at": 0}}}],
        "usage": {"prompt_tokens": 500, "completion_tokens": 120}})


def test_an_openai_audio_model_answers_out_loud(tmp_path, real_raw_dir, monkeypatch):
    monkeypatch.setenv("SPEECHEQ_TEST_AUDIO_KEY", SENTINEL)
    fake = FakeApi(_audio_reply)
    try:
        model = build_responder("openai", model="audio-test", base_url=f"{fake.url}/v1", api_key_env="SPEECHEQ_TEST_AUDIO_KEY",
                                max_attempts=2, concurrency=2, voice="verse")
        results = respond(_config(tmp_path, real_raw_dir, model="openai", model_args={}, limit=1, emotion_classifier=None,
                                  vad_args={"pretrained": "tiny-random"}), model=model, progress=False)
    finally:
        fake.close()
    (record,) = store.read_sample_lines(tmp_path)
    assert [t["reply_text"] for t in record["turns"]] == ["reply 1", "reply 2", "reply 3"]
    assert all(t["reply_sampling_rate"] == 24_000 and t["reply_duration_s"] == 1.0 for t in record["turns"])
    last = fake.requests[-1]["body"]
    assert last["modalities"] == ["text", "audio"] and last["audio"] == {"voice": "verse", "format": "wav"}
    assert [m["role"] for m in last["messages"]] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert last["messages"][2]["content"] == "reply 1" and last["messages"][1]["content"][0]["type"] == "input_audio"
    assert "Role-play this situation" in last["messages"][0]["content"]
    assert results["n_scored"] == 1 and SENTINEL not in json.dumps(results)


def test_an_audio_reply_without_audio_fails_that_dialogue(tmp_path, real_raw_dir, monkeypatch):
    monkeypatch.setenv("SPEECHEQ_TEST_AUDIO_KEY", SENTINEL)
    fake = FakeApi(lambda record: json_answer({"choices": [{"message": {"role": "assistant", "content": "text only"}}]}))
    try:
        model = build_responder("openai", model="text-model", base_url=f"{fake.url}/v1", api_key_env="SPEECHEQ_TEST_AUDIO_KEY", max_attempts=1)
        reply = model.respond([_request()])[0]
    finally:
        fake.close()
    assert isinstance(reply, SpokenReply) and "has no audio" in reply.error


def _request():
    from eval_scripts.responders import Exchange
    from eval_scripts.responders import ReplyRequest

    tone = np.zeros(24_000, dtype=np.float32)
    return ReplyRequest(uid="d/turn2", instructions="Be kind.", conversation=[Exchange("user", audio=tone, sampling_rate=24_000)])


def test_unknown_responder_names_the_known_ones():
    with pytest.raises(ValueError, match="unknown speech-output model 'gpt-4o-tts'; known: openai, qwen2.5-omni"):
        build_responder("gpt-4o-tts")


# ---------------------------------------------------------------- checkpoint folder and processes


@pytest.mark.slow
def test_a_saved_checkpoint_folder_loads_like_a_released_one(tmp_path, dialogues, tiny_omni):
    from eval_scripts.components.tiny import save_tiny_omni_talker
    from eval_scripts.responders import Exchange
    from eval_scripts.responders import ReplyRequest

    folder = save_tiny_omni_talker(tmp_path / "omni")
    loaded = build_responder("qwen2.5-omni", pretrained=str(folder), max_new_tokens=8, talker_max_new_tokens=30, talker_min_new_tokens=20)
    clip = dialogues[0].clips["turn1_audio"]
    request = ReplyRequest(uid="x/turn2", instructions="Answer.", conversation=[Exchange("user", audio=clip.array)], seed=5)
    (reply,) = loaded.respond([request])
    assert reply.error is None and reply.sampling_rate == 24_000 and len(reply.audio) >= 20 * 480  # 20+ codes x 480 samples
    assert loaded.speaker == "Chelsie" and "spk_dict.pt" in os.listdir(folder)


@pytest.mark.slow
def test_two_processes_give_the_same_replies_and_scores_as_one(tmp_path, real_raw_dir, run):
    """`accelerate launch` with 2 CPU processes: each answers its share; replies and ERS equal the one-process run's."""
    single, single_results, _ = run
    out = tmp_path / "two"
    command = [str(Path(sys.executable).with_name("accelerate")), "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
               "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port", str(29700 + os.getpid() % 1000),
               str(ROOT / "eval_scripts" / "respond.py"), "--model", "qwen2.5-omni", "--model-args", "pretrained=tiny-random",
               "--dataset", str(real_raw_dir), "--limit", "2", "--output-dir", str(out), "--no-progress"]
    done = subprocess.run(command, env={**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert [len(store.read_jsonl(out / "shards" / f"rank{k}.jsonl")) for k in (0, 1)] == [1, 1]
    assert json.loads((out / "results.json").read_text())["ers"] == single_results["ers"]
    wavs = sorted(single.glob("replies/*/*.wav"))
    assert len(wavs) == 6 and all(w.read_bytes() == (out / w.relative_to(single)).read_bytes() for w in wavs)


@pytest.mark.parametrize(
    "statuses, kept",
    [(["failed"], 0), (["failed", "ok"], 1), (["ok", "failed"], 0), (["ok", "ok"], 1), (["failed", "failed"], 1)],
)
def test_latest_records_prefer_a_later_record_but_never_lose_a_success(statuses, kept):
    records = [{"id": "a", "status": s, "n": k} for k, s in enumerate(statuses)] + [{"id": "unknown", "status": "ok"}]
    assert store.latest_records(records, ["a", "b"]) == {"a": records[kept]}
