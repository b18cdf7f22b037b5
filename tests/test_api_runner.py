"""End to end: the runner drives the API adapters against a local fake server; the key appears in no file, log or output."""

from __future__ import annotations

import json
import logging

import pytest

from eval_scripts.run import main as run_main
from test_api_adapters import PROVIDERS, SENTINEL, FakeApi, json_answer


@pytest.mark.parametrize("name", ["openai", "gemini"])
@pytest.mark.slow
def test_runner_end_to_end_never_writes_the_key(name, real_raw_dir, tmp_path, monkeypatch, caplog, capsys):
    caplog.set_level(logging.DEBUG)
    spec = PROVIDERS[name]
    monkeypatch.setenv(spec["env"], SENTINEL)
    fake = FakeApi(spec["ok"])
    # A rate limit, a server error echoing the key, and a client error echoing it too: the run goes on.
    fake.script.extend([
        json_answer({"error": {"message": "slow down"}}, status=429, headers={"Retry-After": "0"}),
        (500, {}, f"upstream rejected {SENTINEL}".encode()),
        json_answer({"error": {"message": f"Incorrect API key provided: {SENTINEL}"}}, status=401),
    ])
    out = tmp_path / "run"
    args = f"model=test-model,base_url={spec['base'](fake.url)},backoff_base=0.001,backoff_max=0.002,max_attempts=3,concurrency=2"
    try:
        status = run_main(["--model", name, "--model-args", args, "--dataset", str(real_raw_dir), "--limit", "2",
                           "--output-dir", str(out), "--no-progress", "--n-bootstrap", "0", "--price-in", "2", "--price-out", "10"])
    finally:
        fake.close()
    assert status == 0
    results = json.loads((out / "results.json").read_text())
    assert results["model"]["name"] == name and results["model"]["api_key_env"] == spec["env"]
    # 2 dialogues x 2 rounds = 4 queries. The 429 and 500 were retried; the 401 failed its dialogue
    # (the runner reports it and a resumed run retries it) with the echoed key scrubbed.
    assert results["metrics"]["n_dialogues"] == 1 and len(results["failed_dialogues"]) == 1
    assert "HTTP 401" in results["failed_dialogues"][0]["error"] and "***" in results["failed_dialogues"][0]["error"]
    assert results["deployment"]["cost_per_100_queries"] is not None
    assert len(fake.requests) == 4 + 2  # four queries, plus one retry after the 429 and one after the 500
    # Each request carried the clips of its round as inline audio.
    audio_counts = [json.dumps(r["body"]).count('"format": "wav"') + json.dumps(r["body"]).count('"mime_type": "audio/wav"') for r in fake.requests]
    assert min(audio_counts) >= 5
    written = "".join(p.read_text(errors="replace") for p in out.rglob("*") if p.is_file())
    captured = capsys.readouterr()
    assert SENTINEL not in written + caplog.text + captured.out + captured.err
    assert "***" in written  # the echoed key was scrubbed where the error was recorded
