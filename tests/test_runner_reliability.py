"""Issue 8 on the runner: one answer never stops a run, a run where everything fails still reports, extending a run resumes it,
a kill mid-write leaves nothing behind, and files get the usual permissions."""

from __future__ import annotations

import json
import os
import stat

import pytest

from eval_scripts import protocol
from eval_scripts import store
from eval_scripts.models.base import ModelOutput
from eval_scripts.models.base import build_model
from eval_scripts.run import main as run_main
from test_parsing import NEVER_RAISE
from test_runner_protocol import N_DIALOGUES
from test_runner_protocol import Recorder
from test_runner_protocol import run_with


class Hostile(Recorder):
    """Answers every query with one of the parser's hostile texts (by dialogue), and one answer the runner cannot read."""

    def __init__(self, unreadable_dialogue: str):
        super().__init__()
        self.unreadable = unreadable_dialogue

    def generate(self, queries):
        self.seen += queries
        outputs = []
        for k, query in enumerate(queries):
            if query.meta["dialogue_id"] == self.unreadable and query.meta["round"] == 2:
                # option_logprobs of the wrong type: building the round entry itself raises.
                outputs.append(ModelOutput(text='{"selected": "Option 1"}', option_logprobs=object()))
            else:
                outputs.append(ModelOutput(text=NEVER_RAISE[(len(self.seen) + k) % len(NEVER_RAISE)]))
        return outputs


def test_no_answer_stops_the_run_and_an_unreadable_one_fails_only_its_dialogue(real_rows, tmp_path):
    # Issue 8.4: the record was built outside the try, so one answer killed the run and every resume.
    bad = real_rows[2]["id"]
    results, run_dir = run_with(Hostile(bad), real_rows, tmp_path)
    failed = {f["id"]: f["error"] for f in results["failed_dialogues"]}
    assert list(failed) == [bad] and "cannot read the answer: TypeError" in failed[bad]
    assert results["metrics"]["n_dialogues"] == N_DIALOGUES - 1
    rounds = [rnd for _, rnd in store.iter_rounds(store.read_samples(run_dir))]
    assert all(rnd.choice in (1, 2, None) for rnd in rounds)
    # Deterministic, so a resume meets the same answer: it records the failure again instead of crashing.
    again, _ = run_with(Hostile(bad), real_rows, tmp_path)
    assert [f["id"] for f in again["failed_dialogues"]] == [bad]


def test_an_exception_while_reading_one_answer_becomes_that_query_error(real_rows, tmp_path, monkeypatch):
    real_parse = protocol.parse_answer

    def parse(text):
        if text and "poison" in text:
            raise RecursionError("maximum recursion depth exceeded")
        return real_parse(text)

    monkeypatch.setattr(protocol, "parse_answer", parse)
    poisoned = real_rows[0]["id"]
    model = Recorder()
    model.generate = lambda queries: [ModelOutput(text="poison" if q.meta["dialogue_id"] == poisoned else '{"selected": 2}')
                                      for q in queries]
    results, run_dir = run_with(model, real_rows, tmp_path)
    assert [f["id"] for f in results["failed_dialogues"]] == [poisoned]
    record = store.read_samples(run_dir)[0]
    first = record.trajectories[0].rounds[0]
    assert first.parse_status == "error" and "RecursionError" in first.error and first.raw == "poison"


def test_when_every_dialogue_fails_results_are_still_written(real_rows, tmp_path):
    # Issue 8.5: it ended in KeyError: 'deployment' and wrote no results.json.
    damaged = real_rows.map(lambda row: {**row, "turn1_audio": {"bytes": b"not audio at all" * 8, "path": "01.mp3"}},
                            features=real_rows.features)
    results, run_dir = run_with(build_model("random"), damaged, tmp_path)
    on_disk = json.loads((run_dir / "results.json").read_text())
    assert on_disk["metrics"] is None and len(on_disk["failed_dialogues"]) == N_DIALOGUES
    assert on_disk["deployment"]["queries"] == 0 and on_disk["per_subscale"] == {}


@pytest.mark.slow
def test_the_cli_exits_non_zero_with_one_line_when_nothing_could_be_scored(tmp_path, monkeypatch, capsys):
    from test_api_adapters import FakeApi

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    fake = FakeApi(lambda record: (500, {}, b"overloaded"))
    out = tmp_path / "run"
    try:
        status = run_main(["--model", "openai", "--model-args", f"model=m,base_url={fake.url}/v1,max_attempts=2,backoff_base=0.001,"
                           "backoff_max=0.002", "--limit", "2", "--output-dir", str(out), "--no-progress", "--n-bootstrap", "0"])
    finally:
        fake.close()
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 1 and "Traceback" not in "\n".join(err)
    assert err[-1].startswith("speecheq eval: error: no dialogue could be scored") and str(out / "results.json") in err[-1]
    results = json.loads((out / "results.json").read_text())
    assert results["metrics"] is None and all("HTTP 500" in f["error"] for f in results["failed_dialogues"])


def test_extending_a_limited_run_resumes_it(real_rows, tmp_path):
    # Issue 8.15: --limit 2 then --limit 4 (or none) was refused as a different dataset fingerprint.
    model = Recorder(answer=lambda q: 1)
    first, run_dir = run_with(model, real_rows, tmp_path, limit=2)
    assert first["metrics"]["n_dialogues"] == 2 and len(model.seen) == 2 * 2
    extended, _ = run_with(model, real_rows, tmp_path)
    assert extended["metrics"]["n_dialogues"] == N_DIALOGUES
    assert len(model.seen) == N_DIALOGUES * 2  # only the two new dialogues were asked
    assert extended["dataset_fingerprint"] == first["dataset_fingerprint"]
    whole, _ = run_with(Recorder(answer=lambda q: 1), real_rows, tmp_path, "whole")
    assert whole["metrics"] == extended["metrics"]


@pytest.mark.parametrize("theirs", ["results.json", "samples.jsonl", "shards/rank0.jsonl"])
def test_outputs_no_run_of_ours_wrote_are_never_written_over(real_rows, tmp_path, theirs):
    # Issue 8's rule for run folders: a results.json someone else put in --output-dir was replaced silently.
    run_dir = tmp_path / "run"
    (run_dir / theirs).parent.mkdir(parents=True)
    (run_dir / theirs).write_text("mine")
    with pytest.raises(ValueError, match=rf"already has {theirs.split('/')[0]} but no run_config.json.*--overwrite to replace them"):
        run_with(build_model("random"), real_rows, tmp_path)
    assert (run_dir / theirs).read_text() == "mine" and not (run_dir / store.RUN_CONFIG).exists()
    results, _ = run_with(build_model("random"), real_rows, tmp_path, overwrite=True)  # asked for: replaced
    assert results["metrics"]["n_dialogues"] == N_DIALOGUES and (run_dir / store.RUN_CONFIG).is_file()


def test_a_track_folder_no_run_of_ours_wrote_is_never_written_over(tmp_path):
    from eval_scripts import runner

    (tmp_path / "dialogues").mkdir()
    (tmp_path / "dialogues" / "mine.json").write_text("{}")
    with pytest.raises(ValueError, match="already has dialogues but no run_config.json"):
        runner.prepare_run_dir(tmp_path, {"config": {}}, overwrite=False, is_main=True, extra_outputs=("dialogues",))
    runner.prepare_run_dir(tmp_path, {"config": {}}, overwrite=False, is_main=True)  # a folder this track does not write
    assert (tmp_path / "dialogues" / "mine.json").is_file()
    runner.prepare_run_dir(tmp_path, {"config": {}}, overwrite=True, is_main=True, extra_outputs=("dialogues",))
    assert not (tmp_path / "dialogues").exists() and (tmp_path / store.RUN_CONFIG).is_file()


def test_temporaries_left_by_a_kill_during_the_final_write_are_removed_on_resume(real_rows, tmp_path):
    # Issue 8.18.
    _, run_dir = run_with(build_model("random"), real_rows, tmp_path)
    leftovers = [run_dir / ".samples.jsonl.k1ll3d.tmp", run_dir / ".results.json.abc.tmp"]
    for path in leftovers:
        path.write_bytes(b'{"id": "half')
    keep = run_dir / "notes.tmp"
    keep.write_text("mine")
    run_with(build_model("random"), real_rows, tmp_path)
    assert not any(path.exists() for path in leftovers) and keep.read_text() == "mine"


def test_run_files_get_the_usual_permissions(real_rows, tmp_path):
    # Issue 8.19: results were 0600 (tempfile's mode), so a shared results folder was unreadable to the team.
    old = os.umask(0o022)
    try:
        _, run_dir = run_with(build_model("random"), real_rows, tmp_path)
    finally:
        os.umask(old)
    for name in ("samples.jsonl", "results.json", "run_config.json", "shards/rank0.jsonl"):
        assert stat.S_IMODE((run_dir / name).stat().st_mode) == 0o644, name


@pytest.mark.parametrize("umask, mode", [(0o077, 0o600), (0o002, 0o664)])
def test_atomic_writes_follow_the_umask(tmp_path, umask, mode):
    from speecheq_dataset.files import write_bytes_atomic

    old = os.umask(umask)
    try:
        write_bytes_atomic(tmp_path / "x.json", b"{}")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "x.json").stat().st_mode) == mode
