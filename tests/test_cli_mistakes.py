"""One rule for every `speecheq` command: a user mistake is one line on stderr and exit status 2, never a traceback."""

from __future__ import annotations

import pytest

from speecheq_cli.main import main


def _mistakes(tmp_path) -> list[tuple[list[str], str]]:
    """(argv, words the error line must contain); files the mistakes need are made under tmp_path."""
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    sheet = tmp_path / "sheet.csv"
    sheet.write_text("an annotator's marks")
    return [
        (["dataset", "build", str(tmp_path / "missing"), str(tmp_path / "out")], "not found"),
        (["dataset", "build", str(tmp_path), str(foreign)], "is inside the source folder"),
        (["dataset", "push", str(tmp_path / "missing"), "--repo-id", "a/b", "--dry-run"], "not found"),
        (["audit", str(tmp_path / "missing"), "--report", str(tmp_path / "a.csv")], "no such folder"),
        (["validate", str(tmp_path / "missing"), "--report", str(tmp_path / "v.csv")], "no such folder"),
        (["generate", str(foreign), "--llm", "scripted", "--tts", "espeak", "--per-cell", "1"], "is not empty"),
        (["generate", str(tmp_path / "g"), "--llm", "scripted", "--tts", "espeak", "--per-cell", "0"], "--per-cell must be >= 1"),
        (["human-check", "export", str(tmp_path / "missing"), str(sheet)], "exists (it may hold annotations)"),
        (["publish", str(tmp_path / "missing"), str(tmp_path / "export"), "--repo-id", "a/b"], "no such folder"),
        (["metric", "publish", str(foreign), "--dry-run"], "holds files a Space of this metric does not have (notes.txt)"),
        (["eval", "--model", "random", "--dataset", str(tmp_path / "missing"), "--output-dir", str(tmp_path / "r")], "no such folder"),
        (["respond", "--model", "qwen2.5-omni", "--model-args", "pretrained", "--output-dir", str(tmp_path / "r")], "is not key=value"),
        (["respond", "--model", "qwen2.5-omni", "--model-args", "pretrained=tiny-random", "--dataset", str(tmp_path / "missing"),
          "--output-dir", str(tmp_path / "r")], "no such folder"),  # the data is checked before any weights load
        (["interact", "--model", "qwen2.5-omni", "--model-args", "pretrained=tiny-random", "--user-llm", "scripted", "--tts", "espeak",
          "--judge", "scripted", "--profiles", str(tmp_path / "missing.jsonl"), "--output-dir", str(tmp_path / "i")], "cannot read"),
        (["multibench", "style_inference", "--data", str(tmp_path / "missing"), "--model", "qwen2.5-omni", "--model-args",
          "pretrained=tiny-random", "--output-dir", str(tmp_path / "m")], "no style_inference.jsonl"),
        (["report", str(tmp_path / "missing"), "--output-dir", str(tmp_path / "rep")], "no results.json"),
        (["demo", "--output-dir", str(foreign)], "is not empty"),
    ]


COMMANDS = ["dataset build (missing)", "dataset build (foreign)", "dataset push", "audit", "validate", "generate (foreign)",
            "generate (count)", "human-check", "publish", "metric", "eval", "respond (args)", "respond (data)", "interact", "multibench", "report", "demo"]


@pytest.mark.parametrize("index", range(len(COMMANDS)), ids=COMMANDS)
def test_a_mistake_is_one_line_and_exit_2(index, tmp_path, capsys, monkeypatch):
    from eval_scripts import responders

    def no_weights(*args, **kwargs):
        raise AssertionError("weights were loaded before the mistake was reported")

    monkeypatch.setattr(responders, "build_responder", no_weights)
    argv, words = _mistakes(tmp_path)[index]
    try:
        status = main(argv)
    except SystemExit as exit_:  # argparse-style commands exit instead of returning
        status = exit_.code
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith(f"speecheq {argv[0]}") and "error" in line]
    assert status == 2 and len(errors) == 1 and "Traceback" not in err, err
    assert words in errors[0]
    assert (tmp_path / "foreign" / "notes.txt").read_text() == "mine" and (tmp_path / "sheet.csv").read_text() == "an annotator's marks"
