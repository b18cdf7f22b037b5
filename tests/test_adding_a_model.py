"""docs/adding-a-model.md cannot rot: its worked adapter is imported from the page, registered, and run on the embedded sample."""

from __future__ import annotations

import re

import numpy as np
import pytest

from conftest import PROJECT_ROOT
from eval_scripts import store
from eval_scripts.models import base

GUIDE = PROJECT_ROOT / "docs" / "adding-a-model.md"


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", GUIDE.read_text(encoding="utf-8"), re.DOTALL)


@pytest.mark.slow
def isolate_registry(monkeypatch) -> None:
    """Register the guide's adapter in a copy of the registry, so its name leaves no trace in other tests."""
    base.known_models()  # our own adapters register into the real registry first
    monkeypatch.setattr(base, "_REGISTRY", dict(base._REGISTRY))


@pytest.mark.slow
def test_the_guides_adapter_registers_and_runs_on_the_embedded_sample(tmp_path, monkeypatch):
    adapter_code, usage_code = python_blocks()
    isolate_registry(monkeypatch)
    namespace: dict = {}
    exec(compile(adapter_code, str(GUIDE), "exec"), namespace)
    assert "duration" in base.known_models()
    monkeypatch.chdir(tmp_path)
    exec(compile(usage_code.replace('print(results["label"]', 'usage_label = (results["label"]'), str(GUIDE), "exec"), namespace)
    results = namespace["results"]
    assert results["label"] == "duration:longer" and results["metrics"]["n_dialogues"] == 15
    records = store.read_samples(tmp_path / "runs" / "duration")
    rounds = [rnd for _, rnd in store.iter_rounds(records)]
    assert rounds and all(rnd.parse_status == "json" for rnd in rounds)
    # The adapter really picks the longer option, in both modes.
    short, long_ = (base.Clip(np.zeros(n, dtype=np.float32), 16_000, "turn4_audio_high") for n in (16_000, 32_000))
    query = base.ChoiceQuery(uid="d/r1/generate/random/run0", system="", parts=[], options=(short, long_))
    model = base.build_model("duration", prefer="longer")
    assert model.generate([query])[0].text == '{"selected": "Option 2"}' and model.score([query])[0].choice == 2


def test_the_guides_adapter_refuses_a_bad_argument_by_name(monkeypatch):
    isolate_registry(monkeypatch)
    namespace: dict = {}
    exec(compile(python_blocks()[0], str(GUIDE), "exec"), namespace)
    with pytest.raises(ValueError, match="'middle'"):
        base.build_model("duration", prefer="middle")
