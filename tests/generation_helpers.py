"""Shared pieces of the generation tests: a small offline generated set, counting and scripted-failure backends."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from speecheq_dataset.chat import ChatReply

# Two subscales x three valences, one dialogue per cell: 6 dialogues, 12 test pairs (a few seconds with espeak-ng).
SMALL_SUBSCALES = ("interpersonal_empathy", "stress_management_optimism")


class CountingBackend:
    """Wraps a text backend; counts calls per stage and item; can stop the run after `stop_after` calls."""

    def __init__(self, inner, stop_after: int | None = None):
        self.inner, self.stop_after = inner, stop_after
        self.calls: list[tuple[str, str]] = []
        self.concurrency = 1

    def complete(self, request):
        if self.stop_after is not None and len(self.calls) >= self.stop_after:
            raise KeyboardInterrupt("simulated interruption")
        self.calls.append((request.stage, request.inputs["item"]["item_id"] if "item" in request.inputs else request.label))
        return self.inner.complete(request)

    def usage(self):
        return self.inner.usage()


class AnswersBackend:
    """Answers each call with the next scripted text (then the last one again); records the requests."""

    concurrency = 1

    def __init__(self, *answers: str | None):
        self.answers = list(answers)
        self.requests = []

    def complete(self, request):
        self.requests.append(request)
        text = self.answers[min(len(self.requests), len(self.answers)) - 1]
        return ChatReply(text) if text is not None else ChatReply(None, error="backend down")


def generate_small(out_dir: Path, **overrides):
    from builders.generation.pipeline import GenerateConfig
    from builders.generation.pipeline import run_pipeline

    config = GenerateConfig(out_dir=str(out_dir), subscales=SMALL_SUBSCALES, **overrides)
    return run_pipeline(config, progress=False)


# Test modules import these fixtures, and each import registers its own copy with pytest: the memo below
# makes every copy return the same object, so each is built once per session.
_SESSION: dict[str, object] = {}


@pytest.fixture(scope="session")
def small_generated(tmp_path_factory):
    """(raw folder, summary) of a small offline generated set (scripted LLM + espeak-ng), made once per session."""
    if "small" not in _SESSION:
        out = tmp_path_factory.mktemp("generated") / "raw"
        _SESSION["small"] = (out, generate_small(out))
    return _SESSION["small"]


def metadata_of(raw_dir: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(raw_dir.glob("*/*/metadata.json"))]


@pytest.fixture(scope="session")
def real_features_file(tmp_path_factory):
    """A feature-cache file shared by the tests that measure the authors' real clips (measured once per session)."""
    if "real" not in _SESSION:
        _SESSION["real"] = tmp_path_factory.mktemp("features") / "real-features.jsonl"
    return _SESSION["real"]
