"""Crash safety of the run directory's files: torn lines, repair, atomic writes."""

from __future__ import annotations

import json

import pytest

from eval_scripts import store
from eval_scripts.records import DialogueRecord
from eval_scripts.records import PromptRecord
from eval_scripts.records import RoundRecord
from eval_scripts.records import SchemaVersionError
from eval_scripts.records import TrajectoryRecord


def _records(n):
    return [{"id": f"d{i}", "status": "ok", "text": "é" * i} for i in range(n)]


def test_every_cut_of_the_last_line_loses_only_that_line(tmp_path):
    path = tmp_path / "rank0.jsonl"
    with store.ShardWriter(path) as writer:
        for record in _records(3):
            writer.append(record)
    full = path.read_bytes()
    last_start = full[:-1].rfind(b"\n") + 1
    for cut in range(last_start + 1, len(full) - 1):  # every torn state of the third line
        path.write_bytes(full[:cut])
        assert store.read_jsonl(path) == _records(2)
        with store.ShardWriter(path) as writer:  # reopening cuts the torn tail before appending
            writer.append({"id": "d2", "status": "ok", "text": "éé"})
        assert store.read_jsonl(path) == _records(3)


def test_a_bad_line_in_the_middle_is_damage_not_a_torn_tail(tmp_path):
    path = tmp_path / "rank0.jsonl"
    path.write_bytes(b'{"id": "a"}\n{"id": \n{"id": "c"}\n')
    with pytest.raises(ValueError, match="line 2"):
        store.read_jsonl(path)


def test_read_shards_merges_all_ranks(tmp_path):
    for rank in (0, 1, 2):
        with store.ShardWriter(store.shard_path(tmp_path, rank)) as writer:
            writer.append(DialogueRecord(f"r{rank}", "empathy", "failed", "clip"))
    assert [r.id for r in store.read_shards(tmp_path)] == ["r0", "r1", "r2"]
    assert store.read_shards(tmp_path / "nothing") == []


def test_a_record_round_trips_through_its_line():
    rnd = RoundRecord(uid="d/r1/generate/random/run0", round=1, turn=4, levels=["low", "high"], turn4_in_context=None,
                      raw='{"selected": 2}', parse_status="json", parse_detail="", choice=2, selected_level="high", correct=True,
                      prompt=PromptRecord("sys", ({"text": "Option 1:"}, {"audio": "turn4_audio_low"})))
    record = DialogueRecord("d", "empathy", "ok", None, [TrajectoryRecord("generate", "random", 0, [rnd])], {"generate": {"turn4": "high"}})
    assert DialogueRecord.from_json(json.loads(store.jsonl_line(record))) == record


@pytest.mark.parametrize("version", [None, 1, 3])
def test_a_run_written_under_another_schema_is_not_resumed(tmp_path, version):
    line = {"id": "d", "subscale": "empathy", "status": "ok", "error": None, "trajectories": []}
    if version is not None:
        line["schema_version"] = version
    shard = store.shard_path(tmp_path, 0)
    shard.parent.mkdir(parents=True)
    shard.write_text(json.dumps(line) + "\n")
    with pytest.raises(SchemaVersionError, match=f"rank0.jsonl: record 'd' has samples schema {version or 1}; this toolkit reads 2"):
        store.read_shards(tmp_path)


def test_atomic_json_write_replaces_whole_files_and_leaves_no_temp(tmp_path):
    target = tmp_path / "results.json"
    store.write_json_atomic(target, {"a": 1})
    store.write_json_atomic(target, {"b": [1, 2]})
    assert json.loads(target.read_text()) == {"b": [1, 2]}
    assert [p.name for p in tmp_path.iterdir()] == ["results.json"]
    with pytest.raises(TypeError):
        store.write_json_atomic(target, {"bad": object()})
    assert json.loads(target.read_text()) == {"b": [1, 2]}  # a failed write keeps the old file
    assert [p.name for p in tmp_path.iterdir()] == ["results.json"]


@pytest.mark.parametrize("variable", ["OPENAI_API_KEY", "GEMINI_API_KEY", "HF_TOKEN", "MY_SERVER_KEY"])
def test_no_secret_the_process_read_reaches_a_file(variable, tmp_path, monkeypatch):
    # Issue 8.14: raw outputs, errors and configs are scrubbed of every secret value, whichever field holds it.
    from speecheq_dataset.http_api import read_api_key

    secret = f"sk-{variable.lower()}-7f3a9c"
    monkeypatch.setenv(variable, secret)
    read_api_key("MY_SERVER_KEY", required=False)  # a key read through api_key_env= joins the secret set
    record = {"id": "d0", "raw": f"echo: Bearer {secret}", "error": f"HTTP 401 {secret}", "config": {"note": secret}}
    with store.ShardWriter(tmp_path / "rank0.jsonl") as writer:
        writer.append(record)
    store.write_jsonl_atomic(tmp_path / "samples.jsonl", [record])
    store.write_json_atomic(tmp_path / "results.json", {"failed": [record]})
    for name in ("rank0.jsonl", "samples.jsonl", "results.json"):
        text = (tmp_path / name).read_text()
        assert secret not in text and "Bearer ***" in text


def test_log_lines_are_scrubbed(monkeypatch):
    import logging

    from speecheq_dataset.secrecy import ScrubbingFilter

    monkeypatch.setenv("HF_TOKEN", "hf_abcdefghijklmnop")
    record = logging.LogRecord("x", logging.ERROR, __file__, 1, "token %s leaked", ("hf_abcdefghijklmnop",), None)
    ScrubbingFilter().filter(record)
    assert record.getMessage() == "token *** leaked"
