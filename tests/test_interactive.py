"""The interactive track (`speecheq interact`): the loop offline with the tiny speech-output model, espeak and the scripted user and
judges; every stop branch; resume after a crash and after SIGKILL; 1 vs 2 processes; the API judges against a loopback server."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from eval_scripts import store
from eval_scripts.interactive.agents import DEFAULT_PROMPTS
from eval_scripts.interactive.profiles import USER_EMOTIONS
from eval_scripts.interactive.profiles import load_profiles
from eval_scripts.interactive.track import VOLATILE_KEYS
from eval_scripts.interactive.track import InteractConfig
from eval_scripts.interactive.track import interact
from eval_scripts.responders import SpokenReply
from eval_scripts.responders import build_responder
from speecheq_dataset.audio import decode_audio
from test_api_adapters import SENTINEL
from test_api_adapters import FakeApi
from test_api_adapters import json_answer

pytestmark = pytest.mark.usefixtures("one_torch_thread")
ROOT = Path(__file__).resolve().parents[1]
TINY = dict(model="qwen2.5-omni", model_args={"pretrained": "tiny-random"}, limit=2, max_turns=3, mos="none")


def _stable(results: dict) -> dict:
    """results.json without what describes one invocation rather than the dialogues."""
    out = {k: v for k, v in results.items() if k not in VOLATILE_KEYS}
    out["config"] = {k: v for k, v in out["config"].items() if k != "output_dir"}
    return out


def _dialogues_without_timing(run_dir: Path) -> dict:
    return {p.name: [{k: v for k, v in t.items() if k != "latency_s"} for t in json.loads(p.read_text())["turns"]]
            for p in sorted((run_dir / "dialogues").glob("*.json"))}


@pytest.fixture(scope="module")
def tiny_omni():
    return build_responder("qwen2.5-omni", pretrained="tiny-random")


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory, tiny_omni):
    out = tmp_path_factory.mktemp("interact")
    results = interact(InteractConfig(output_dir=str(out), **TINY), model=tiny_omni, progress=False)
    return out, results


@pytest.mark.slow
def test_the_whole_loop_runs_offline_with_the_tiny_model_espeak_and_the_scripted_user_and_judges(tiny_run):
    out, results = tiny_run
    records = store.read_sample_lines(out)
    assert [r["id"] for r in records] == ["en-everyday-parcel", "en-conflict-neighbour"] and all(r["status"] == "ok" for r in records)
    # The tiny model's replies are noise: the everyday user keeps pushing back until the cap, the conflict user gives up at turn 3.
    assert {r["id"]: (r["stop_reason"], r["n_turns"]) for r in records} == {"en-everyday-parcel": ("turn_cap", 3),
                                                                            "en-conflict-neighbour": ("user_ends", 3)}
    for record in records:
        assert json.loads((out / "dialogues" / f"{record['id']}.json").read_text()) == record
        assert record["profile"]["id"] == record["id"] and record["dialogue_score"] in range(1, 6) and record["dialogue_reason"]
        for turn in record["turns"]:
            assert turn["user_emotion"] in USER_EMOTIONS and turn["user_tone"] == USER_EMOTIONS[turn["user_emotion"]]
            assert turn["user_audio"] == f"dialogues/{record['id']}/user_{turn['turn']:02d}.wav"
            assert turn["model_audio"] == f"dialogues/{record['id']}/model_{turn['turn']:02d}.wav"
            user, _ = decode_audio(out / turn["user_audio"])
            reply, rate = decode_audio(out / turn["model_audio"])
            assert len(user) > 0 and rate == 24_000 and len(reply) == round(turn["model_audio_s"] * rate)
            assert turn["judge_score"] in range(1, 6) and turn["judge_reason"] and turn["judge_status"] == "json"
            assert turn["stop_decision"] in ("continue", "user_ends")
        assert record["turns"][0]["user_text"] == record["profile"]["first_line"]
    goodbye = records[1]["turns"][-1]
    assert goodbye["stop_decision"] == "user_ends" and goodbye["user_emotion"] in ("disappointment", "anger")
    m = results["metrics"]
    scores = [t["judge_score"] for r in records for t in r["turns"]]
    assert m["turn_score"] == np.mean(scores) and m["n_rated_turns"] == 6 and m["turn_judge_missing"] == 0
    assert m["dialogue_score"] == np.mean([r["dialogue_score"] for r in records]) and m["mean_turns"] == 3.0
    assert m["stop_reasons"] == {"user_ends": 1, "relief": 0, "stagnation": 0, "turn_cap": 1}
    assert set(results["judge_checks"]) == {"score_vs_reply_seconds", "score_vs_reply_words", "score_vs_turn_index"}
    assert results["mos"]["predictor"] is None and results["metrics"]["mos"] is None
    for role, info in results["prompts"].items():
        assert info["sha256"] == hashlib.sha256(DEFAULT_PROMPTS[role].read_bytes()).hexdigest()
    assert results["label"] == "qwen2.5-omni:tiny-random" and set(results["per_category"]) == {"everyday", "conflict"}


class _Scripted:
    """A speech-output stand-in that answers each profile with set words (a varying tail) and a 1-s tone (for the stop branches)."""

    name = "scripted-replies"
    sampling_rate = 16_000

    def __init__(self, words: dict[str, str], amplitude: float = 0.1, crash_on: str | None = None):
        self.words, self.amplitude, self.crash_on, self.calls = words, amplitude, crash_on, []

    def respond(self, requests):
        out = []
        for request in requests:
            dialogue = request.meta["dialogue_id"]
            self.calls.append(request.uid)
            if dialogue == self.crash_on:
                raise KeyboardInterrupt("killed")  # not an Exception: escapes like a kill would
            tone = (self.amplitude * np.sin(2 * np.pi * 200 * np.arange(24_000) / 24_000)).astype(np.float32)
            words = self.words[dialogue]
            tail = ("", "嗯。", "好的。") if "\u4e00" <= words[0] <= "\u9fff" else ("", " Right.", " Well.")
            # A model that says the very same thing twice makes the talk stagnate; these vary by turn.
            out.append(SpokenReply(text=words + tail[(request.meta["turn"] - 1) % 3], audio=tone, sampling_rate=24_000))
        return out

    def describe(self):
        return {"name": self.name}


CARING = "I am so sorry, that sounds really stressful. Let's work out what you can do."
PLAIN = "Okay then, the weather is nice today."
DISMISSIVE = "Calm down, it is not a big deal."


def _profiles(tmp_path: Path, ids: list[str]) -> Path:
    by_id = {p.id: p for p in load_profiles()}
    path = tmp_path / "profiles.jsonl"
    path.write_text("".join(json.dumps(by_id[i].as_dict(), ensure_ascii=False) + "\n" for i in ids), encoding="utf-8")
    return path


@pytest.mark.parametrize("profile, words, reason, turns", [
    ("en-everyday-parcel", CARING, "relief", 3),        # mood -1 +1 +1: softens, then relieved
    ("en-everyday-parcel", PLAIN, "stagnation", 3),     # neither help nor harm: the user repeats twice
    ("en-conflict-neighbour", DISMISSIVE, "user_ends", 3),  # two brush-offs in a row exhaust a conflict user's patience
    ("en-support-exam", DISMISSIVE, "turn_cap", 3),     # a support user has more patience than three turns
    ("zh-support-job", "我理解你的感受，我们可以一起想办法。", "turn_cap", 3),  # mood -2 +1 +1 = 0: softening only
    ("zh-everyday-train", "我理解，别担心，我们可以一起想办法。", "relief", 3),
])
def test_every_stop_branch_of_the_scripted_user_and_judge(tmp_path, profile, words, reason, turns):
    model = _Scripted({profile: words})
    results = interact(InteractConfig(model="x", output_dir=str(tmp_path / "run"), profiles=str(_profiles(tmp_path, [profile])),
                                      max_turns=3, mos="none"), model=model, progress=False)
    (record,) = store.read_sample_lines(tmp_path / "run")
    assert (record["stop_reason"], record["n_turns"]) == (reason, turns)
    assert results["metrics"]["stop_reasons"][reason] == 1
    if reason == "relief":
        assert record["turns"][-1]["user_emotion"] in ("relief", "gratitude") and record["turns"][-1]["judge_score"] >= 4


@pytest.mark.slow
def test_a_crash_mid_run_resumes_to_the_same_results(tmp_path):
    profiles = _profiles(tmp_path, ["en-everyday-parcel", "en-conflict-neighbour", "en-support-exam"])
    words = {"en-everyday-parcel": CARING, "en-conflict-neighbour": DISMISSIVE, "en-support-exam": PLAIN}
    config = dict(model="x", profiles=str(profiles), max_turns=3, mos="none")
    reference = interact(InteractConfig(output_dir=str(tmp_path / "ref"), **config), model=_Scripted(words), progress=False)
    with pytest.raises(KeyboardInterrupt):
        interact(InteractConfig(output_dir=str(tmp_path / "run"), **config), model=_Scripted(words, crash_on="en-conflict-neighbour"),
                 progress=False)
    assert [r["id"] for r in store.read_shard_lines(tmp_path / "run")] == ["en-everyday-parcel"]
    model = _Scripted(words)
    resumed = interact(InteractConfig(output_dir=str(tmp_path / "run"), batch_size=2, **config), model=model, progress=False)
    assert not any(uid.startswith("en-everyday-parcel/") for uid in model.calls)  # the finished dialogue was not redone
    resumed["config"]["batch_size"] = 1  # may change on resume (dialogues advance together; their words do not change)
    assert _stable(resumed) == _stable(reference)
    assert _dialogues_without_timing(tmp_path / "run") == _dialogues_without_timing(tmp_path / "ref")
    with pytest.raises(ValueError, match="holds a different run.*max_turns"):
        interact(InteractConfig(output_dir=str(tmp_path / "run"), **{**config, "max_turns": 4}), model=model, progress=False)


def _cli(out: Path, *extra: str) -> list[str]:
    return [*extra, str(ROOT / "eval_scripts" / "interact.py"), "--model", "qwen2.5-omni", "--model-args", "pretrained=tiny-random",
            "--limit", "2", "--max-turns", "3", "--mos", "none", "--output-dir", str(out), "--no-progress"]


ENV = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}


@pytest.mark.slow
def test_sigkill_and_resume_give_the_same_results_json(tmp_path, tiny_run):
    _, reference = tiny_run
    out = tmp_path / "killed"
    process = subprocess.Popen([sys.executable, *_cli(out)], env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    shard = out / "shards" / "rank0.jsonl"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and process.poll() is None and not (shard.is_file() and shard.read_bytes().count(b"\n") >= 1):
        time.sleep(0.05)
    assert process.poll() is None, "the run ended before it could be killed"
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert not (out / "results.json").exists() and len(store.read_jsonl(shard)) == 1
    done = subprocess.run([sys.executable, *_cli(out)], env=ENV, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "qwen2.5-omni:tiny-random (interactive)" in done.stdout
    assert _stable(json.loads((out / "results.json").read_text())) == _stable(reference)


@pytest.mark.slow
def test_two_processes_give_the_same_dialogues_and_results_as_one(tmp_path, tiny_run):
    single, reference = tiny_run
    out = tmp_path / "two"
    launcher = [str(Path(sys.executable).with_name("accelerate")), "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
                "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port", str(29800 + os.getpid() % 1000)]
    done = subprocess.run(_cli(out, *launcher), env=ENV, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert [len(store.read_jsonl(out / "shards" / f"rank{k}.jsonl")) for k in (0, 1)] == [1, 1]
    results = json.loads((out / "results.json").read_text())
    assert results["num_processes"] == 2 and _stable(results) == _stable(reference)
    assert _dialogues_without_timing(out) == _dialogues_without_timing(single)
    wavs = sorted(single.glob("dialogues/*/*.wav"))
    assert len(wavs) == 12 and all(w.read_bytes() == (out / w.relative_to(single)).read_bytes() for w in wavs)


@pytest.mark.parametrize("line, message", [
    ('{"id": "a"}', "missing field"),
    ('{"id": "a", "language": "fr", "category": "support", "scenario": "s", "goal": "g", "character": "c", "first_line": "f", '
     '"first_emotion": "sadness", "topic": "t"}', "language 'fr' is not one of en, zh"),
    ('{"id": "a", "language": "en", "category": "support", "scenario": "s", "goal": "g", "character": "c", "first_line": "f", '
     '"first_emotion": "glee", "topic": "t"}', "first_emotion 'glee'"),
    ('{"id": "a/b", "language": "en", "category": "support", "scenario": "s", "goal": "g", "character": "c", "first_line": "f", '
     '"first_emotion": "sadness", "topic": "t"}', "cannot name a file"),
    ("not json", "not JSON"),
])
def test_a_bad_profile_is_named_by_file_line_and_field(tmp_path, line, message):
    path = tmp_path / "p.jsonl"
    path.write_text("\n" + line + "\n")
    with pytest.raises(ValueError, match=f"p.jsonl:2: .*{message}"):
        load_profiles(path)


def test_the_default_profiles_cover_every_category_in_both_languages():
    profiles = load_profiles()
    assert {(p.language, p.category) for p in profiles} == {(lang, cat) for lang in ("en", "zh") for cat in ("everyday", "support", "conflict")}


@pytest.mark.parametrize("argv, message", [
    (["--mos", "best"], "--mos must be one of auto, none, utmos"),
    (["--judge-args", "model=x"], "the scripted backend takes no args"),
    (["--prompt", "judge=x.json"], "--prompt judge: no such role"),
    (["--max-turns", "0"], "--max-turns must be >= 1"),
    (["--profiles", "/nonexistent.jsonl"], "cannot read"),
])
def test_cli_mistakes_end_in_one_line_and_exit_2(tmp_path, capsys, argv, message):
    from speecheq_cli.main import main

    assert main(["interact", "--model", "qwen2.5-omni", "--output-dir", str(tmp_path / "o"), *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("speecheq interact: error: ") and message in err[0]


class _Loudness:
    """A MOS predictor plugged in by name (package.module:Class): the reply's RMS level stands in for a quality score."""

    name = "loudness-test"

    def score(self, audio, sampling_rate):
        return float(np.sqrt(np.mean(np.square(audio))))


def test_a_mos_predictor_scores_every_reply_and_is_named(tmp_path):
    profiles = _profiles(tmp_path, ["en-support-exam"])
    results = interact(InteractConfig(model="x", output_dir=str(tmp_path / "run"), profiles=str(profiles), max_turns=2,
                                      mos="test_interactive:_Loudness"), model=_Scripted({"en-support-exam": CARING}), progress=False)
    assert results["mos"]["predictor"] == "loudness-test" and results["mos"]["n"] == 2
    assert results["metrics"]["mos"] == pytest.approx(0.1 / np.sqrt(2), rel=1e-3)
