"""Issue 11 on `speecheq eval`: every user mistake is one line and exit 2 before anything heavy; lm-eval conventions; provenance."""

from __future__ import annotations

import importlib.util
import json
import logging
import sys
import types

import pytest

from eval_scripts import runner
from eval_scripts import sharded
from eval_scripts import store
from eval_scripts.run import build_parser
from eval_scripts.run import config_from_args
from eval_scripts.run import main as run_main


def fails_in_one_line(argv: list[str], capsys, *words: str) -> str:
    status = run_main(argv + (["--output-dir", "/nonexistent/never-written"] if "--output-dir" not in argv else []))
    err = capsys.readouterr().err
    lines = [line for line in err.strip().splitlines() if line.startswith("speecheq eval: error:")]
    assert status == 2 and len(lines) == 1 and "Traceback" not in err, err
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


@pytest.fixture
def no_weights(monkeypatch):
    """Fail the test if anything tries to build a model (every check must come first)."""
    def refuse(*args, **kwargs):
        raise AssertionError("the model was built before the mistake was reported")

    monkeypatch.setattr(runner, "build_model", refuse)


MISTAKES = [
    (["--model", "random", "--dataset", "/no/such/dataset"], ["--dataset '/no/such/dataset'", "no such folder"]),
    (["--model", "random", "--dataset", "SpeechEQ/does-not-exist"], ["--dataset 'SpeechEQ/does-not-exist'", "cannot load it"]),
    (["--model", "qwen2.5-omni", "--model-args", "pretrained"], ["'pretrained' is not key=value"]),
    (["--model", "qwen2.5-omni", "--model-args", "pretrained=tiny-random,max_new_tokens=abc"], ["max_new_tokens='abc'", "must be an int"]),
    (["--model", "prosody", "--model-args", "rule=slower,temprature=0"], ["temprature", "it accepts: rule"]),
    (["--model", "qwen2.5-omni", "--model-args", "pretrained=/no/such/weights"], ["pretrained='/no/such/weights'", "no such folder"]),
    (["--model", "qwen2.5-omni", "--model-args", "pretrained=Qwen/Not-Cached-7B"], ["not in the local Hugging Face cache"]),
    (["--model", "random", "--dtype", "bfloat16"], ["--dtype applies to models with weights", "'random' takes none"]),
    (["--model", "random", "--device-map", "auto"], ["--device-map applies to models with weights"]),
    (["--model", "nosuchmodel"], ["unknown model 'nosuchmodel'", "known models:"]),
    (["--model", "random", "--tasks", "speecheq_direct", "--inference", "sequential"], ["--tasks speecheq_direct sets inference='direct'"]),
]


@pytest.mark.parametrize("argv, words", MISTAKES, ids=[" ".join(m[0][1:4]) for m in MISTAKES])
def test_each_mistake_is_one_line_and_exit_2_before_any_weights(argv, words, capsys, no_weights):
    fails_in_one_line(argv, capsys, *words)


def test_a_broken_parquet_shard_is_named(tmp_path, capsys, no_weights):
    export = tmp_path / "export"
    (export / "data").mkdir(parents=True)
    (export / "README.md").write_text("---\nconfigs: []\n---\n")
    (export / "data" / "test-00000-of-00001.parquet").write_bytes(b"junk")  # shorter than a parquet footer
    fails_in_one_line(["--model", "random", "--dataset", str(export)], capsys,
                      f"{export / 'data' / 'test-00000-of-00001.parquet'}: not a readable parquet file")


def test_an_api_model_without_the_api_extra_fails_up_front(capsys, monkeypatch, no_weights):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "httpx" else real(name, *a))
    fails_in_one_line(["--model", "openai", "--model-args", "base_url=http://127.0.0.1:9/v1"], capsys,
                      "needs httpx", "pip install 'speecheq[api]'")


def test_lm_eval_spellings_are_aliases():
    dashed = build_parser().parse_args(["--model", "random", "--model-args", "seed=3", "--batch-size", "4", "--output-dir", "d"])
    underscored = build_parser().parse_args(["--model", "random", "--model_args", "seed=3", "--batch_size", "4", "--output_path", "d"])
    assert vars(dashed) == vars(underscored)


@pytest.mark.parametrize("preset, expected", [("speecheq", ("sequential", "audio", False)), ("speecheq_direct", ("direct", "audio", False)),
                                              ("speecheq_text_history", ("sequential", "text", False)),
                                              ("speecheq_oracle", ("sequential", "text", True)), (None, ("sequential", "audio", False))])
def test_a_preset_names_the_protocol_settings(preset, expected):
    argv = ["--model", "random", "--output-dir", "d"] + (["--tasks", preset] if preset else [])
    config = config_from_args(build_parser().parse_args(argv))
    assert (config.inference, config.history, config.oracle) == expected and config.preset == preset


def test_a_flag_agreeing_with_its_preset_is_fine():
    config = config_from_args(build_parser().parse_args(["--model", "random", "--output-dir", "d", "--tasks", "speecheq_oracle", "--oracle"]))
    assert config.oracle and config.history == "text"


@pytest.mark.slow
def test_results_record_time_accelerator_command_and_preset(tmp_path, capsys):
    out = tmp_path / "run"
    argv = ["--model", "random", "--tasks", "speecheq_direct", "--limit", "2", "--output-dir", str(out), "--no-progress", "--n-bootstrap", "0"]
    assert run_main(argv) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["timestamp_utc"].endswith("+00:00") and results["accelerator"]["type"] == "cpu"
    assert results["command"].startswith("'speecheq eval' --model random --tasks speecheq_direct")
    assert results["config"]["preset"] == "speecheq_direct" and results["config"]["inference"] == "direct"
    for key in ("metrics", "config", "dataset_fingerprint", "versions", "git_hash"):  # the existing keys stay
        assert key in results
    # Run again: nothing is pending, and it says so instead of drawing an empty bar.
    assert run_main(argv) == 0
    assert f"{out}: all 2 dialogues already done" in capsys.readouterr().out


def test_the_launcher_losing_processes_is_warned_about(tmp_path, monkeypatch, caplog):
    # `accelerate launch --num_processes 2` on CPU without --multi_gpu: one process, MASTER_ADDR set, no WORLD_SIZE.
    monkeypatch.setenv("ACCELERATE_USE_CPU", "False")
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    caplog.set_level(logging.WARNING)
    runner.warn_if_processes_were_lost(1)
    assert "needs --multi_gpu" in caplog.text
    caplog.clear()
    monkeypatch.setenv("WORLD_SIZE", "2")
    runner.warn_if_processes_were_lost(2)
    assert caplog.text == ""


def test_the_progress_bar_counts_every_ranks_records(tmp_path):
    from eval_scripts.records import DialogueRecord

    with store.ShardWriter(store.shard_path(tmp_path, 1)) as other:
        other.append(DialogueRecord("old", "empathy", "ok"))  # written before this session: not counted
        progress = sharded.RunProgress(tmp_path, total=5, enabled=True, desc="t")
        with store.ShardWriter(store.shard_path(tmp_path, 0)) as mine:
            mine.append(DialogueRecord("a", "empathy", "ok"))
            for name in ("b", "c"):
                other.append(DialogueRecord(name, "empathy", "ok"))
            progress.refresh(1)
            assert progress.bar.n == 3
            mine.append(DialogueRecord("d", "empathy", "ok"))
            progress.refresh(1)
            assert progress.bar.n == 4
    progress.close()


def test_wandb_logging_sends_the_metrics_and_config(tmp_path, monkeypatch):
    calls = {}

    class FakeRun:
        summary: dict = {}

        def log(self, values):
            calls["log"] = values

        def finish(self):
            calls["finished"] = True

    fake = types.ModuleType("wandb")
    fake.init = lambda **kwargs: calls.setdefault("init", kwargs) and FakeRun()
    fake.__spec__ = importlib.util.spec_from_loader("wandb", loader=None)
    monkeypatch.setitem(sys.modules, "wandb", fake)
    out = tmp_path / "run"
    assert run_main(["--model", "random", "--limit", "2", "--output-dir", str(out), "--no-progress", "--n-bootstrap", "0",
                     "--wandb-args", "project=speecheq-test,mode=offline"]) == 0
    assert calls["init"]["project"] == "speecheq-test" and calls["init"]["config"]["model"] == "random"
    assert calls["log"]["speecheq/n_dialogues"] == 2 and "speecheq/acc_traj" in calls["log"] and calls["finished"]


def test_a_tracker_that_is_not_installed_fails_before_the_run(capsys, monkeypatch, no_weights):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name in ("tensorboard", "wandb") else real(name, *a))
    fails_in_one_line(["--model", "random", "--tensorboard-dir", "/tmp/tb"], capsys, "--tensorboard-dir needs the tensorboard package")
    fails_in_one_line(["--model", "random", "--wandb-args", "project=x"], capsys, "--wandb-args needs the wandb package")
