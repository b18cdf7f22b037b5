"""The evaluate module: loading offline (checkout and installed copy), doctests, stand-alone imports, Space dry-run."""

from __future__ import annotations

import ast
import doctest
import json
import os
import re
import stat
import subprocess
import sys
import types
from pathlib import Path

import pytest

import speecheq_metric
from speecheq_dataset import taxonomy as dataset_taxonomy
from speecheq_metric import accuracy, dtw, ers, ers_discrete, multibench, seq, vad
from speecheq_metric import taxonomy as metric_taxonomy

PROJECT_ROOT = Path(__file__).resolve().parents[1]
METRIC_DIR = PROJECT_ROOT / "speecheq_metric"


def test_metric_taxonomy_equals_dataset_taxonomy():
    expected = {c.slug: tuple(s.slug for s in dataset_taxonomy.SUBSCALES if s.composite.slug == c.slug) for c in dataset_taxonomy.COMPOSITES}
    assert metric_taxonomy.COMPOSITE_SUBSCALES == expected
    assert metric_taxonomy.SUBSCALE_SLUGS == dataset_taxonomy.SUBSCALE_SLUGS
    for slug in dataset_taxonomy.SUBSCALE_SLUGS:
        assert metric_taxonomy.composite_of_subscale(slug) == dataset_taxonomy.composite_of(slug)


def _imports(path: Path) -> list[tuple[int, str]]:
    """(level, module) of every import statement in a file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(0, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            found.append((node.level, node.module or ""))
    return found


@pytest.mark.parametrize("path", sorted(METRIC_DIR.glob("*.py")), ids=lambda p: p.name)
@pytest.mark.slow
def test_metric_files_import_nothing_of_ours_and_one_module_per_line(path):
    ours = ("speecheq_dataset", "speecheq_metric", "builders", "eval_scripts", "speecheq_cli")
    for level, module in _imports(path):
        assert level == 0 or level == 1, f"{path.name}: only same-folder relative imports survive evaluate's copy"
        if level == 0:
            assert module.split(".")[0] not in ours, f"{path.name} imports {module}"
    # evaluate's import scanner reads `import a, b` wrongly
    for line in path.read_text(encoding="utf-8").splitlines():
        assert not re.match(r"^import\s+\S+\s*,", line), f"{path.name}: {line!r}"


def test_evaluate_script_imports_every_core_file_directly():
    """evaluate copies only the files the script itself imports (one level), so all must be named there."""
    script_imports = {m for level, m in _imports(METRIC_DIR / "speecheq_metric.py") if level == 1}
    core = {p.stem for p in METRIC_DIR.glob("*.py")} - {"__init__", "speecheq_metric", "app"}
    assert core <= script_imports


@pytest.mark.parametrize("module", [accuracy, seq, dtw, ers, ers_discrete, multibench, vad, metric_taxonomy], ids=lambda m: m.__name__)
def test_core_doctests(module):
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    """The module loaded by name from the checkout root, as the README says."""
    import evaluate

    cwd = os.getcwd()
    os.chdir(PROJECT_ROOT)
    try:
        metric = evaluate.load("speecheq_metric")
    finally:
        os.chdir(cwd)
    return metric


def test_load_from_checkout_uses_the_copied_stand_alone_module(loaded):
    module_name = type(loaded).__module__
    assert module_name.startswith("evaluate_modules.metrics.speecheq_metric.")
    copied = Path(sys.modules[module_name].__file__).parent
    core = [p.name for p in METRIC_DIR.glob("*.py") if p.name not in ("__init__.py", "app.py")]  # app.py is the Space's, not evaluate's
    assert sorted(p.name for p in copied.glob("*.py")) == sorted(["__init__.py", *core])


def _run_examples(text: str, globs: dict, name: str) -> doctest.TestResults:
    test = doctest.DocTestParser().get_doctest(text, globs, name, None, 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    runner.run(test)
    return runner.summarize(verbose=False)


def test_kwargs_description_examples_run(loaded, monkeypatch):
    monkeypatch.chdir(PROJECT_ROOT)
    text = sys.modules[type(loaded).__module__]._KWARGS_DESCRIPTION
    result = _run_examples(text, {}, "kwargs description")
    assert result.attempted >= 6 and result.failed == 0


def test_metric_card_examples_run(loaded):
    text = (METRIC_DIR / "README.md").read_text(encoding="utf-8")
    blocks = "\n".join(re.findall(r"```python\n(.*?)```", text, flags=re.S))
    result = _run_examples(blocks, {"speecheq": loaded}, "README")
    assert result.attempted >= 6 and result.failed == 0


def test_compute_through_evaluate(loaded):
    subs = ["interpersonal_empathy", "interpersonal_empathy", "stress_management_optimism"]
    out = loaded.compute(predictions=[[1, 2], [2, 2], [0, 1]], references=[[1, 2], [1, 2], [2, 1]], subscales=subs, n_bootstrap=50)
    direct = speecheq_metric.forced_choice_metrics([[1, 2], [2, 2], [0, 1]], [[1, 2], [1, 2], [2, 1]], subs, n_bootstrap=50)
    assert out == direct
    assert set(out["per_composite"]) == {"interpersonal", "stress_management"}


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"predictions": [[1, 1.5]], "references": [[1, 2]]}, "1.5"),
        ({"predictions": [["2", 1]], "references": [[1, 2]]}, "'2'"),
        ({"predictions": [[1, 2]], "references": [[1, 2]], "subscales": ["optimism"]}, "'optimism'"),
        ({"predictions": [[1, 2], [1, 2]], "references": [[1, 2]]}, "2 dialogues but references has 1"),
    ],
)
def test_evaluate_errors_name_the_value(loaded, kwargs, named):
    with pytest.raises(ValueError, match=re.escape(named)):
        loaded.compute(**kwargs)


@pytest.mark.slow
def test_add_and_add_batch_validate_too(loaded):
    with pytest.raises(ValueError, match="1.5"):
        loaded.add(prediction=[1, 1.5], reference=[1, 2])
    with pytest.raises(ValueError, match="'x'"):
        loaded.add_batch(predictions=[["x", 1]], references=[[1, 2]])
    loaded.add(prediction=[1, 2], reference=[1, 2])
    loaded.add_batch(predictions=[[2, 2], [0, 1]], references=[[1, 2], [2, 1]])
    out = loaded.compute(n_bootstrap=0)
    assert (out["acc_traj"], out["invalid_rate"], out["n_dialogues"]) == (pytest.approx(1 / 3), pytest.approx(1 / 6), 3)


def test_categorical_config(monkeypatch):
    import evaluate

    monkeypatch.chdir(PROJECT_ROOT)
    metric = evaluate.load("speecheq_metric", "categorical_ers")
    assert metric.compute(predictions=["NEUTRAL", "sad"], references=["angry", "sad"]) == {"categorical_ers": pytest.approx(0.85)}
    with pytest.raises(ValueError, match="'bored'"):
        metric.compute(predictions=["bored"], references=["sad"])


def _read_only(tree: Path) -> None:
    for p in [tree, *tree.rglob("*")]:
        p.chmod(p.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


@pytest.mark.slow
def test_installed_copy_loads_offline_with_a_fresh_hf_home(tmp_path):
    """A read-only copy of the package (as in site-packages), empty HF_HOME and HOME, offline, no numba cache dir."""
    site = tmp_path / "site"
    (site / "speecheq_metric").mkdir(parents=True)
    for src in METRIC_DIR.iterdir():
        if src.is_file():
            (site / "speecheq_metric" / src.name).write_bytes(src.read_bytes())
    _read_only(site)
    home, hf_home, work = tmp_path / "home", tmp_path / "hf", tmp_path / "work"
    for d in (home, hf_home, work):
        d.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "PYTHONPATH")}
    env.update(HOME=str(home), HF_HOME=str(hf_home), HF_HUB_OFFLINE="1", HF_EVALUATE_OFFLINE="1", HF_DATASETS_OFFLINE="1", PYTHONDONTWRITEBYTECODE="1")
    code = (
        "import json, sys\n"
        f"sys.path.insert(0, {str(site)!r})\n"
        "import evaluate, speecheq_metric\n"
        f"assert speecheq_metric.__file__.startswith({str(site)!r}), speecheq_metric.__file__\n"
        "m = evaluate.load(speecheq_metric.MODULE_PATH)\n"
        "out = m.compute(predictions=[[1, 2], [2, 1]], references=[[1, 2], [1, 1]], n_bootstrap=0)\n"
        "out['dtw'] = speecheq_metric.dtw_distance([0, 1, 2], [0, 2])\n"
        "print(json.dumps(out))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=work, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out == {"acc_turn4": 0.5, "acc_turn6": 1.0, "acc_all": 0.75, "acc_traj": 0.5, "invalid_rate": 0.0, "n_dialogues": 2, "dtw": 1.0}
    assert (hf_home / "modules" / "evaluate_modules" / "metrics" / "speecheq_metric").is_dir()
    assert list(home.rglob("*")) == []  # nothing written under ~ (no ~/.cache)
    assert list(work.iterdir()) == []


@pytest.mark.slow
def test_space_dry_run(tmp_path, capsys):
    from builders import metric_space

    out_dir = tmp_path / "space"
    assert metric_space.main(["publish", str(out_dir), "--repo-id", "someone/speecheq", "--dry-run"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["repo_id"] == "someone/speecheq" and plan["dry_run"] is True
    names = {p.name for p in out_dir.iterdir()}
    assert names == {"speecheq.py", "accuracy.py", "seq.py", "dtw.py", "ers.py", "ers_discrete.py", "vad.py", "kernels.py", "taxonomy.py", "multibench.py", "README.md", "app.py", "requirements.txt"}
    assert set(plan["files"]) == names
    card = (out_dir / "README.md").read_text(encoding="utf-8")
    header = card.split("---")[1]
    assert "sdk: gradio" in header and "app_file: app.py" in header and "- evaluate" in header
    for name in ("README.md", "app.py", "requirements.txt"):  # the files checked in beside the module, as they are
        assert (out_dir / name).read_bytes() == (METRIC_DIR / name).read_bytes()
    # a second publish into the same (now full) folder is refused without --overwrite, as are bad repo ids
    with pytest.raises(SystemExit):
        metric_space.main(["publish", str(out_dir), "--repo-id", "someone/speecheq", "--dry-run"])
    assert "pass --overwrite" in capsys.readouterr().err
    assert metric_space.main(["publish", str(out_dir), "--repo-id", "someone/speecheq", "--dry-run", "--overwrite"]) == 0
    capsys.readouterr()
    (out_dir / "thesis.tex").write_text("mine")  # a file the Space does not have is never deleted
    with pytest.raises(SystemExit):
        metric_space.main(["publish", str(out_dir), "--repo-id", "someone/speecheq", "--dry-run", "--overwrite"])
    assert "thesis.tex" in capsys.readouterr().err and (out_dir / "thesis.tex").read_text() == "mine"
    for bad in ("no-slash", "me/speecheq-metric", "me/ers"):
        with pytest.raises(SystemExit):
            metric_space.main(["publish", str(tmp_path / bad.replace("/", "_")), "--repo-id", bad, "--dry-run"])


@pytest.mark.slow
def test_cli_front_door_dispatches_metric(tmp_path):
    from speecheq_cli.main import main

    assert main(["metric", "publish", str(tmp_path / "s"), "--dry-run"]) == 0
    assert (tmp_path / "s" / "speecheq.py").is_file()  # the default repo id SpeechEQ/speecheq


def _setup_cfg_pins() -> dict[str, str]:
    """{package: version} of every `name==version` in setup.cfg's install_requires and `metric` extra."""
    import configparser

    cfg = configparser.ConfigParser()
    cfg.read(PROJECT_ROOT / "setup.cfg", encoding="utf-8")
    lines = cfg["options"]["install_requires"].splitlines() + cfg["options.extras_require"]["metric"].splitlines()
    return dict(line.strip().split("==") for line in lines if "==" in line)


def _module_level_imports(path: Path) -> set[str]:
    """Top-level packages imported when the file is imported (not inside functions, which import lazily)."""
    found, todo = set(), list(ast.parse(path.read_text(encoding="utf-8")).body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            found.add(node.module.split(".")[0])
        elif isinstance(node, (ast.Try, ast.If)):
            todo += [*node.body, *node.orelse, *getattr(node, "handlers", []), *getattr(node, "finalbody", [])]
        elif isinstance(node, ast.ExceptHandler):
            todo += node.body
    return found


def test_space_requirements_are_pinned_as_in_setup_cfg():
    """requirements.txt: every line pinned exactly as setup.cfg pins it, and every package the Space imports listed."""
    pins = _setup_cfg_pins()
    lines = [line.strip() for line in (METRIC_DIR / "requirements.txt").read_text(encoding="utf-8").splitlines() if line.strip()]
    listed = {}
    for line in lines:
        name, _, version = line.partition("==")
        assert version, f"requirements.txt: {line!r} is not pinned"
        assert pins.get(name) == version, f"requirements.txt pins {line!r}, setup.cfg pins {name}=={pins.get(name)}"
        listed[name] = version
    third_party = set()
    for path in METRIC_DIR.glob("*.py"):
        third_party |= {m for m in _module_level_imports(path) if m not in sys.stdlib_module_names and m != "__future__"}
    assert third_party == {"datasets", "evaluate", "gradio", "numba", "numpy"}
    assert third_party - {"gradio"} <= set(listed)  # gradio comes with the Space's SDK (sdk_version in the card)
    header = (METRIC_DIR / "README.md").read_text(encoding="utf-8").split("---")[1]
    # app.py uses gradio 6's Dataframe(column_count=...); numpy 2.4 needs Python 3.11, and Spaces default to 3.10
    assert re.search(r"^sdk_version: 6\.\d+\.\d+$", header, re.M) and 'python_version: "3.11"' in header


class _FakeGradio(types.ModuleType):
    """The part of gradio's API the Space's app.py uses, recording what it was given (gradio is not a dependency)."""

    def __init__(self):
        super().__init__("gradio")
        self.launched = []
        recorder = self

        class Component:
            def __init__(self, value=None, **kwargs):
                self.value, self.kwargs = value, kwargs

        class Interface:
            def __init__(self, fn, inputs, outputs, **kwargs):
                self.fn, self.inputs, self.outputs, self.kwargs = fn, inputs, outputs, kwargs

            def launch(self):
                recorder.launched.append(self)

        self.Dataframe = self.JSON = Component
        self.Interface = Interface


def _run_app(folder: Path, monkeypatch) -> object:
    """Run a Space's app.py as the Space does (`python app.py`), with a recording gradio; returns the form it launched."""
    import runpy

    gradio = _FakeGradio()
    monkeypatch.setitem(sys.modules, "gradio", gradio)
    runpy.run_path(str(folder / "app.py"), run_name="__main__")
    assert len(gradio.launched) == 1
    return gradio.launched[0]


def _metric_of(form) -> object:
    """The evaluate module behind a launched form (its compute closure holds it)."""
    return next(c.cell_contents for c in form.fn.__closure__ if hasattr(c.cell_contents, "compute"))


@pytest.mark.slow
def test_space_form_scores_its_own_example_table(monkeypatch):
    """The form has one column per feature, starts filled with a worked example, and submitting it scores that table."""
    import pandas as pd

    form = _run_app(METRIC_DIR, monkeypatch)
    table = form.inputs
    assert table.kwargs["headers"] == ["predictions", "references"] and table.kwargs["column_count"] == 2
    assert table.kwargs["datatype"] == ["str", "str"] and table.kwargs["type"] == "pandas"
    # what gradio hands the function on submit: the table's cells as text, one dialogue per row
    scores = form.fn(pd.DataFrame(table.value, columns=table.kwargs["headers"]))
    assert (scores["acc_turn4"], scores["acc_turn6"], scores["acc_traj"], scores["n_dialogues"]) == (2 / 3, 1.0, 2 / 3, 3)
    assert "SpeechEQ" in form.kwargs["article"] and "---" not in form.kwargs["article"][:10]  # the card, without its YAML


@pytest.mark.slow
def test_published_space_loads_by_folder_name_like_the_hub(tmp_path, monkeypatch, capsys):
    """The default repo SpeechEQ/speecheq gives speecheq.py, so evaluate.load(<folder named speecheq>) finds it."""
    import evaluate

    from builders import metric_space

    monkeypatch.chdir(tmp_path)  # nothing named speecheq_metric in the working directory
    space = tmp_path / "speecheq"
    assert metric_space.main(["publish", str(space), "--dry-run"]) == 0
    assert json.loads(capsys.readouterr().out)["repo_id"] == "SpeechEQ/speecheq"
    metric = evaluate.load(str(space))
    assert type(metric).__module__.startswith("evaluate_modules.metrics.speecheq.")
    out = metric.compute(predictions=[[1, 2], [2, 1]], references=[[1, 2], [1, 1]], n_bootstrap=0)
    assert (out["acc_traj"], out["acc_turn6"]) == (0.5, 1.0)
    assert evaluate.load(str(space), "categorical_ers").compute(predictions=["happy"], references=["happy"]) == {"categorical_ers": 1.0}
    # the Space's app.py finds speecheq.py there, and speecheq_metric.py in the checkout
    assert type(_metric_of(_run_app(space, monkeypatch))).__module__.startswith("evaluate_modules.metrics.speecheq.")
    assert type(_metric_of(_run_app(METRIC_DIR, monkeypatch))).__module__.startswith("evaluate_modules.metrics.speecheq_metric.")


@pytest.mark.slow
def test_publish_needs_a_token_up_front(tmp_path):
    """Without a token a real publish is one line and exit 2, before anything is written or loaded."""
    env = {k: v for k, v in os.environ.items() if k not in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_TOKEN_PATH")}
    env["HF_HOME"] = str(tmp_path / "empty_hf_home")  # no stored login either
    out_dir = tmp_path / "space"
    proc = subprocess.run([sys.executable, "-m", "speecheq_cli.main", "metric", "publish", str(out_dir)],
                          cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "speecheq metric publish: error: no Hugging Face token: set HF_TOKEN or run `hf auth login` to publish (or pass --dry-run)"
    ]
    assert not out_dir.exists()


@pytest.mark.slow
def test_publish_uploads_the_checked_folder_with_the_token(tmp_path, monkeypatch, capsys):
    import huggingface_hub

    from builders import metric_space

    calls = []

    class FakeApi:
        def __init__(self, token=None):
            calls.append(("token", token))

        def create_repo(self, repo_id, **kwargs):
            calls.append(("create", repo_id, kwargs["repo_type"], kwargs["space_sdk"]))

        def upload_folder(self, *, folder_path, repo_id, repo_type, **kwargs):
            calls.append(("upload", sorted(p.name for p in Path(folder_path).iterdir()), repo_id, repo_type))
            return type("Info", (), {"commit_url": "https://huggingface.co/spaces/SpeechEQ/speecheq/commit/1"})()

    monkeypatch.setattr(huggingface_hub, "get_token", lambda: "hf_not_a_real_token")
    monkeypatch.setattr(huggingface_hub, "HfApi", FakeApi)
    assert metric_space.main(["publish", str(tmp_path / "space")]) == 0
    assert calls[:2] == [("token", "hf_not_a_real_token"), ("create", "SpeechEQ/speecheq", "space", "gradio")]
    assert calls[2][0] == "upload" and "speecheq.py" in calls[2][1] and calls[2][2:] == ("SpeechEQ/speecheq", "space")
    assert capsys.readouterr().out.strip() == "uploaded SpeechEQ/speecheq: https://huggingface.co/spaces/SpeechEQ/speecheq/commit/1"
