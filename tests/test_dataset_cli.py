"""Issue 8 on `speecheq dataset`: nothing the user did not ask to delete is deleted, and a failed write is one line."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from builders import cli
from conftest import PROJECT_ROOT


@pytest.fixture(scope="module")
def small_raw(real_raw_dir, tmp_path_factory, copy_dialogue) -> Path:
    """Two real dialogues as a raw folder (read-only use)."""
    root = tmp_path_factory.mktemp("small") / "raw"
    for metadata in sorted(real_raw_dir.glob("*/*/metadata.json"))[:2]:
        copy_dialogue(metadata.parent, root)
    return root


def run_cli(argv: list[str], capsys) -> tuple[int, str, str]:
    status = cli.main(argv)
    out, err = capsys.readouterr()
    return status, out, err


def one_line_error(err: str, command: str) -> str:
    lines = [line for line in err.strip().splitlines() if line.startswith(f"speecheq dataset {command}:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_build_never_deletes_a_folder_that_only_looks_like_an_export(small_raw, tmp_path, capsys):
    # 8.1: exit 0 and both files gone.
    target = tmp_path / "P"
    (target / "data").mkdir(parents=True)
    (target / "README.md").write_text("notes")
    (target / "data" / "important.csv").write_text("a,b")
    for extra in ([], ["--overwrite"]):
        status, _, err = run_cli(["build", str(small_raw), str(target), *extra], capsys)
        assert status == 2
        assert "did not write (README.md, data/important.csv)" in one_line_error(err, "build")
    assert (target / "README.md").read_text() == "notes" and (target / "data" / "important.csv").read_text() == "a,b"


def test_build_refuses_a_raw_folder_inside_the_destination(small_raw, tmp_path, capsys):
    # 8.2: the raw dialogues were replaced by parquet.
    import shutil

    shutil.copytree(small_raw, tmp_path / "P2" / "data")
    (tmp_path / "P2" / "README.md").write_text("x")
    before = sorted(p.relative_to(tmp_path) for p in (tmp_path / "P2").rglob("*"))
    status, _, err = run_cli(["build", str(tmp_path / "P2" / "data"), str(tmp_path / "P2"), "--overwrite"], capsys)
    assert status == 2 and "contains the source folder" in one_line_error(err, "build")
    assert sorted(p.relative_to(tmp_path) for p in (tmp_path / "P2").rglob("*")) == before


def test_replacing_an_export_needs_overwrite(small_raw, tmp_path, capsys):
    # 8.3 (for build; `sample` shares the same export path and flag).
    out = tmp_path / "export"
    assert run_cli(["build", str(small_raw), str(out)], capsys)[0] == 0
    shard = next((out / "data").glob("*.parquet"))
    stamp = shard.stat().st_mtime_ns
    status, _, err = run_cli(["build", str(small_raw), str(out)], capsys)
    assert status == 2 and "pass --overwrite" in one_line_error(err, "build")
    assert shard.stat().st_mtime_ns == stamp
    assert run_cli(["build", str(small_raw), str(out), "--overwrite"], capsys)[0] == 0


def test_sample_refuses_to_replace_an_existing_export_without_overwrite(small_raw, tmp_path, capsys):
    # 8.3: `dataset sample OUT` silently replaced even a real export.
    out = tmp_path / "real"
    assert run_cli(["build", str(small_raw), str(out)], capsys)[0] == 0
    status, _, err = run_cli(["sample", str(out)], capsys)
    assert status == 2 and "pass --overwrite" in one_line_error(err, "sample")
    assert "2 dialogues" in (out / "README.md").read_text()


def test_the_build_summary_lists_stray_files_and_hidden_folders(small_raw, tmp_path, capsys):
    # 8.16
    import shutil

    raw = tmp_path / "raw"
    shutil.copytree(small_raw, raw)
    (raw / "notes.txt").write_text("x")
    (raw / ".cache").mkdir()
    status, out, _ = run_cli(["build", str(raw), str(tmp_path / "out")], capsys)
    assert status == 0
    assert "passed over in the raw folder: 2" in out
    assert "notes.txt: a file where a <subscale_slug>/<dataset_id>/ folder belongs; skipped" in out
    assert ".cache: hidden, skipped" in out


def _limit_file_size(limit_bytes: int):
    def apply():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))

    return apply


@pytest.mark.slow
def test_a_full_disk_is_one_line_naming_the_cause_and_the_path(small_raw, tmp_path):
    # 8.8: `ulimit -f` during a build surfaced as a raw traceback.
    env = {**os.environ, "HF_HOME": str(tmp_path / "hf")}
    done = subprocess.run([sys.executable, "-m", "speecheq_cli.main", "dataset", "build", str(small_raw), str(tmp_path / "out")],
                          cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=300,
                          preexec_fn=_limit_file_size(300 * 1024))
    assert done.returncode == 1, done.stderr[-2000:]
    line = one_line_error(done.stderr, "build")
    assert line.startswith("speecheq dataset build: error: File too large: ")
    assert Path(line.rsplit(": ", 1)[1]).name.startswith("speecheq-build-")
    assert not (tmp_path / "out").exists()
