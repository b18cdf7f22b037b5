"""Multi-Bench's utterance tasks: the data layout, every task end to end on its tiny example set (hand-worked scores through a model
that answers set texts, the real tiny Qwen2.5-Omni adapter), the semi-open judge (scripted, and an API judge whose unreadable answer is
missing), resume, and the CLI."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from eval_scripts import store
from eval_scripts.models.base import ChoiceModel
from eval_scripts.models.base import ModelOutput
from eval_scripts.multibench.examples import example_data
from eval_scripts.multibench.judge import scripted_rating
from eval_scripts.multibench.run import MultibenchConfig
from eval_scripts.multibench.run import run_task
from eval_scripts.multibench.tasks import TASKS
from eval_scripts.multibench.tasks import load_items
from test_api_adapters import FakeApi
from test_api_adapters import json_answer


class _Answers(ChoiceModel):
    """Answers each item with set text; records what it was asked."""

    name = "set-answers"
    sampling_rate = 16_000

    def __init__(self, answers: dict[str, str]):
        self.answers, self.asked = answers, []

    def generate(self, queries):
        self.asked += [q.uid for q in queries]
        return [ModelOutput(text=self.answers[q.meta["item_id"]]) for q in queries]


@pytest.fixture(scope="module")
def examples():
    return example_data()


def _run(tmp_path, task, answers, **overrides):
    model = _Answers(answers)
    config = MultibenchConfig(task=task, model="set-answers", output_dir=str(tmp_path / task), **overrides)
    return run_task(config, model=model, progress=False), model


def test_the_example_sets_are_in_the_documented_layout(examples):
    for name, task in TASKS.items():
        items = load_items(examples, task)
        assert len(items) >= 3 and all((examples / i["audio"]).is_file() and i["audio"].startswith(f"audio/{name}/") for i in items)


def test_paralinguistic_recognition_easy_and_hard_by_hand(tmp_path, examples):
    # pr-01 exact (fast + loud = A, C); pr-02 partial (slow only); pr-03 a wrong extra option; pr-04 no answer
    answers = {"pr-01": '{"selected": ["A", "C"]}', "pr-02": "B", "pr-03": "E and F", "pr-04": "I am not sure."}
    results, model = _run(tmp_path, "paralinguistic_recognition", answers)
    assert results["metrics"] == {"acc_easy": 0.5, "acc_hard": 0.25, "invalid_rate": 0.25, "n_items": 4}
    records = {r["id"]: r for r in store.read_sample_lines(tmp_path / "paralinguistic_recognition")}
    assert records["pr-01"]["prediction_letters"] == ["A", "C"] and records["pr-04"]["parse_status"] == "invalid"
    assert records["pr-02"]["reference"] == [1, 3]
    prompt = records["pr-01"]["prompt"]["parts"]
    assert prompt[1] == {"audio": "audio/paralinguistic_recognition/pr-01.wav"} and "A. fast speech\nB. slow speech" in prompt[2]["text"]
    assert results["parse_status"] == {"json": 1, "bare": 2, "invalid": 1} and results["prompts"]["judge"] is None


def test_style_inference_single_choice_by_hand(tmp_path, examples):
    answers = {"si-01": "A", "si-02": '{"selected": "A"}', "si-03": "**B**", "si-04": '{"selected": ["A", "B"]}'}
    results, _ = _run(tmp_path, "style_inference", answers)
    assert results["metrics"] == {"accuracy": 0.5, "invalid_rate": 0.25, "n_items": 4}


def test_emotion_recognition_with_the_scripted_judge_by_hand(tmp_path, examples):
    answers = {"er-01": "The speaker sounds happy.", "er-02": "Sad, or maybe angry.", "er-03": "Calm and relaxed.", "er-04": "  ",
               "er-05": "她听起来很开心。"}
    results, _ = _run(tmp_path, "emotion_recognition", answers)
    records = {r["id"]: r for r in store.read_sample_lines(tmp_path / "emotion_recognition")}
    assert {i: r["judge_score"] for i, r in records.items()} == {"er-01": 5, "er-02": 3, "er-03": 1, "er-04": 1, "er-05": 5}
    assert records["er-04"]["judge_status"] == "no_answer"
    m = results["metrics"]
    assert (m["accuracy"], m["mean_score"], m["n_missing"]) == (0.4, 3.0, 0)
    assert set(results["per_language"]) == {"en", "zh"} and results["per_language"]["zh"]["accuracy"] == 1.0


@pytest.mark.parametrize("answer, reference, score", [
    ("happy", "happy", 5), ("joyful and excited", "happy", 5), ("nervous", "fearful", 5), ("sad", "disappointed", 5),
    ("angry", "sad", 3), ("angry or sad", "sad", 3), ("calm", "angry", 1), ("no idea", "happy", 1), ("伤心", "难过", 5),
])
def test_scripted_semi_open_judge(answer, reference, score):
    assert scripted_rating(answer, reference)["score"] == score


ANSWERS = {"ei-01": "Disappointed and hurt.", "ei-02": "Quite nervous.", "ei-03": "Tired."}


def test_an_api_judge_answer_that_cannot_be_read_is_missing_never_a_score(tmp_path, examples, monkeypatch):
    monkeypatch.setenv("SPEECHEQ_TEST_JUDGE_KEY", "sk-test-judge-key-123456")

    def respond(record):
        text = record["body"]["messages"][1]["content"]
        reply = {"ei-01": '{"reason": "same feeling", "score": 5}', "ei-02": "Pretty close, I think.",
                 "ei-03": '{"reason": "another emotion", "score": 2}'}[next(k for k in ("ei-01", "ei-02", "ei-03") if ANSWERS[k] in text)]
        return json_answer({"choices": [{"message": {"role": "assistant", "content": reply}}]})

    fake = FakeApi(respond)
    try:
        results, _ = _run(tmp_path, "emotion_inference", ANSWERS, judge="openai",
                          judge_args={"base_url": f"{fake.url}/v1", "api_key_env": "SPEECHEQ_TEST_JUDGE_KEY", "model": "judge-llm",
                                      "max_attempts": 2, "backoff_base": 0.001})
    finally:
        fake.close()
    records = {r["id"]: r for r in store.read_sample_lines(tmp_path / "emotion_inference")}
    assert records["ei-02"]["judge_score"] is None and records["ei-02"]["judge_status"] == "invalid"
    assert records["ei-02"]["judge_raw"] == "Pretty close, I think."
    m = results["metrics"]
    assert (m["accuracy"], m["mean_score"], m["n_missing"], m["n_items"]) == (0.5, 3.5, 1, 3)
    asked = [r["body"]["messages"][1]["content"] for r in fake.requests]
    assert len(asked) == 3 and any("Reference answer: disappointed\nAnswer to grade: Disappointed and hurt." in text for text in asked)
    assert results["prompts"]["judge"]["name"] == "multibench_semi_open_judge_v1" and results["judge"]["model"] == "judge-llm"



def test_resume_answers_only_the_items_not_done(tmp_path, examples):
    answers = {"si-01": "A", "si-02": "B", "si-03": "B", "si-04": "A"}
    first, _ = _run(tmp_path, "style_inference", answers, limit=2)
    assert first["metrics"]["n_items"] == 2
    results, model = _run(tmp_path, "style_inference", answers)
    assert model.asked == ["style_inference/si-03", "style_inference/si-04"] and results["metrics"]["accuracy"] == 1.0


def test_the_tiny_qwen_adapter_answers_a_task(tmp_path, examples):
    from eval_scripts.models.base import build_model

    model = build_model("qwen2.5-omni", pretrained="tiny-random", max_new_tokens=8)
    config = MultibenchConfig(task="style_inference", model="qwen2.5-omni", output_dir=str(tmp_path / "q"), batch_size=2)
    results = run_task(config, model=model, progress=False)
    records = store.read_sample_lines(tmp_path / "q")
    assert [r["status"] for r in records] == ["ok"] * 4 and all(isinstance(r["raw"], str) for r in records)
    assert results["metrics"]["n_items"] == 4 and results["label"].startswith("qwen2.5-omni")


@pytest.mark.parametrize("edit, message", [
    (lambda item: item.pop("reference"), "missing field\\(s\\) reference"),
    (lambda item: item.update(audio="../x.wav"), "must be a path inside"),
    (lambda item: item.update(audio="audio/none.wav"), "not found"),
    (lambda item: item.update(extra=1), "unknown field\\(s\\) extra"),
])
def test_a_bad_item_is_named_by_file_line_and_field(tmp_path, examples, edit, message):
    data = tmp_path / "data"
    shutil.copytree(examples, data)
    path = data / "emotion_recognition.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines()
    item = json.loads(lines[1])
    edit(item)
    lines[1] = json.dumps(item)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=f"emotion_recognition.jsonl:2: .*{message}"):
        load_items(data, TASKS["emotion_recognition"])


def test_choice_items_need_answers_among_their_options(tmp_path, examples):
    data = tmp_path / "data"
    shutil.copytree(examples, data)
    path = data / "style_inference.jsonl"
    item = json.loads(path.read_text().splitlines()[0])
    path.write_text(json.dumps({**item, "answer": "Something else"}) + "\n")
    with pytest.raises(ValueError, match="style_inference.jsonl:1: answer must be one of the options"):
        load_items(data, TASKS["style_inference"])


@pytest.mark.parametrize("argv, message", [
    (["style_inference", "--model", "random"], "forced-choice baseline"),
    (["style_inference", "--model", "nope"], "unknown model 'nope'"),
    (["emotion_recognition", "--model", "qwen2.5-omni", "--data", "/nonexistent"], "no emotion_recognition.jsonl"),
])
def test_cli_mistakes_end_in_one_line_and_exit_2(tmp_path, capsys, argv, message):
    from speecheq_cli.main import main

    assert main(["multibench", *argv, "--output-dir", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("speecheq multibench: error: ") and message in err[0]


def test_cli_writes_the_example_layout(tmp_path, capsys):
    from speecheq_cli.main import main

    assert main(["multibench", "emotion_recognition", "--write-examples", str(tmp_path / "ex")]) == 0
    assert {p.name for p in (tmp_path / "ex").glob("*.jsonl")} == {f"{t}.jsonl" for t in TASKS}
    assert load_items(tmp_path / "ex", TASKS["paralinguistic_recognition"])[0]["answer"] == ["fast speech", "loud voice"]
