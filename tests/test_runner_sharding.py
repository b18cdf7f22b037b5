"""Real processes: `accelerate launch` with 1 and 2 CPU processes agree; SIGKILL + resume loses nothing.

All runs use the tiny random-weight Qwen2.5-Omni thinker on real dialogues, as a user would run it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from eval_scripts import store

pytestmark = pytest.mark.slow  # seconds per test: left out of the quick `-m "not slow"` loop

ROOT = Path(__file__).resolve().parents[1]
RUN_PY = ROOT / "eval_scripts" / "run.py"
ACCELERATE = Path(sys.executable).with_name("accelerate")
N = 6  # dialogues (three chunks of two at batch size 1: a kill lands between chunks)


def _args(dataset: Path, out: Path, *extra: str) -> list[str]:
    return [
        "--model", "qwen2.5-omni",
        "--model-args", "pretrained=tiny-random,max_new_tokens=48",
        "--dataset", str(dataset),
        "--output-dir", str(out),
        "--limit", str(N),
        "--batch-size", "1",
        "--n-bootstrap", "100",
        "--no-progress",
        *extra,
    ]  # fmt: skip


def _launch(num_processes: int) -> list[str]:
    return [
        str(ACCELERATE), "launch",
        *(["--multi_gpu"] if num_processes > 1 else []),
        "--num_processes", str(num_processes),
        "--num_machines", "1",
        "--mixed_precision", "no",
        "--dynamo_backend", "no",
        "--main_process_port", str(29500 + num_processes + os.getpid() % 1000),
        str(RUN_PY),
    ]  # fmt: skip


def _env() -> dict:
    env = dict(os.environ)  # conftest put HF_HOME and offline flags here
    env["PYTHONPATH"] = str(ROOT)
    env["OMP_NUM_THREADS"] = "1"  # two processes on two cores
    return env


def _answers(out: Path) -> list[tuple]:
    return [
        (record.id, r.uid, r.levels, r.turn4_in_context, r.raw, r.choice, r.input_tokens, r.output_tokens)
        for record, r in store.iter_rounds(store.read_samples(out))
    ]


def _stable(results: dict) -> dict:
    """results.json without what legitimately varies between runs (timings, process count, paths)."""
    drop = {"deployment", "num_processes", "git_hash", "timestamp_utc", "command"}
    out = {k: v for k, v in results.items() if k not in drop}
    out["config"] = {k: v for k, v in results["config"].items() if k not in ("output_dir", "prefetch")}
    return out


@pytest.fixture(scope="module")
def single_process_run(real_raw_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("one") / "run"
    proc = subprocess.run(_launch(1) + _args(real_raw_dir, out), env=_env(), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


def test_two_cpu_processes_split_the_work_and_match_one(real_raw_dir, tmp_path, single_process_run):
    out = tmp_path / "two"
    # with the GPU default of loading the next chunk in a background thread in each process
    proc = subprocess.run(_launch(2) + _args(real_raw_dir, out, "--prefetch", "1"), env=_env(), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    shards = {p.name: len(p.read_text().splitlines()) for p in (out / "shards").glob("rank*.jsonl")}
    assert shards == {"rank0.jsonl": N // 2, "rank1.jsonl": N - N // 2}  # each process did half, not all
    assert _answers(out) == _answers(single_process_run)
    two = json.loads((out / "results.json").read_text())
    one = json.loads((single_process_run / "results.json").read_text())
    assert two["num_processes"] == 2 and one["num_processes"] == 1
    assert _stable(two) == _stable(one)


def test_sigkill_mid_run_then_resume_equals_an_uninterrupted_run(real_raw_dir, tmp_path, single_process_run):
    out = tmp_path / "killed"
    cmd = [sys.executable, str(RUN_PY), *_args(real_raw_dir, out, "--prefetch", "1")]  # killed with the loader thread busy too
    proc = subprocess.Popen(cmd, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    shard = out / "shards" / "rank0.jsonl"
    deadline = time.monotonic() + 300
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            if shard.is_file() and shard.read_bytes().count(b"\n") >= 1:
                break
            time.sleep(0.01)
        assert proc.poll() is None, "the run ended before it could be killed: " + proc.stderr.read().decode()[-2000:]
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=60)
    done_before = shard.read_bytes().count(b"\n")
    assert 1 <= done_before < N
    assert not (out / "results.json").exists()
    # a kill in the middle of a write leaves half a line: add one, as the worst case
    with open(shard, "ab") as handle:
        handle.write(b'{"id": "torn-by-sigkill", "status": "ok", "trajec')

    resumed = subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"{done_before} of {N} dialogues already done" in resumed.stderr
    lines = shard.read_text().splitlines()
    assert len(lines) == N  # nothing lost, nothing duplicated, torn line gone
    assert len({json.loads(line)["id"] for line in lines}) == N
    assert _answers(out) == _answers(single_process_run)
    assert _stable(json.loads((out / "results.json").read_text())) == _stable(json.loads((single_process_run / "results.json").read_text()))

    again = subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=600)  # all done: nothing to redo
    assert again.returncode == 0 and f"all {N} dialogues already done" in again.stdout
    assert len(shard.read_text().splitlines()) == N
