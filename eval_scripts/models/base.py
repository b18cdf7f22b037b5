"""The one interface every model adapter implements, and the registry of adapters.

An adapter takes a batch of forced-choice queries and returns one output per
query, in the same order (lm-evaluation-harness style). Baselines read the
structured fields of a query (the option clips, the catalyst's preceding turn);
language models read `system` and `parts`.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

import numpy as np


@dataclass(frozen=True)
class Clip:
    """A decoded mono clip: float32 samples in [-1, 1] at `sampling_rate`."""

    array: np.ndarray
    sampling_rate: int
    column: str  # the dataset column it came from, e.g. "turn4_audio_high"
    text: str = ""  # transcript (history=text, oracle mode)
    tone: str = ""  # TTS tone instruction (oracle mode)

    @property
    def duration_s(self) -> float:
        return len(self.array) / self.sampling_rate


@dataclass(frozen=True)
class Part:
    """One piece of a user message: text, or an audio clip."""

    kind: Literal["text", "audio"]
    text: str = ""
    clip: Clip | None = None


@dataclass
class ChoiceQuery:
    """One forced-choice question (one dialogue, one round, one run, one order)."""

    uid: str  # "<dialogue_id>/r<round>/<mode>/<order>/run<k>", unique within a run
    system: str  # system prompt (persona or default)
    parts: list[Part]  # user message: text and audio interleaved
    options: tuple[Clip, Clip]  # Option 1, Option 2 as presented
    preceding: Clip | None = None  # the catalyst's turn right before the test turn
    seed: int = 0  # per-query seed, derived from the run seed
    meta: dict = field(default_factory=dict)


@dataclass
class ModelOutput:
    """What an adapter returns for one query."""

    text: str | None = None  # raw generated text (generate mode)
    choice: int | None = None  # 1 or 2 when the adapter chose directly (baselines, logprob)
    option_logprobs: tuple[float, float] | None = None  # logprob mode
    input_tokens: int | None = None
    output_tokens: int | None = None
    latency_s: float = 0.0  # wall time of the call that produced it, per query
    cost_usd: float | None = None  # what the call cost when the adapter knows it; else priced from tokens by the runner
    error: str | None = None  # set when the call failed for this query
    # What the adapter gave its model beyond the query, for the record (JSON-ready), e.g. the cascade's
    # transcripts and V/A/D values of each clip; the runner writes it into the round's samples.jsonl entry.
    details: dict | None = None


class ChoiceModel(abc.ABC):
    """Base class of model adapters: batch in, list out, same order."""

    name: str = "base"
    modes: frozenset[str] = frozenset({"generate"})  # "generate" and/or "logprob"
    needs_text_parts: bool = False  # True for text-only backends (oracle mode required)
    reads_prompt: bool = True  # False for baselines that only compare the two option clips (no use for other questions)
    sampling_rate: int | None = None  # the runner decodes clips at this rate (None: each file's own rate)
    requires: tuple[str, ...] = ()  # modules the adapter imports when built; checked before a run starts
    requires_extra: str | None = None  # the speecheq extra that installs them

    @abc.abstractmethod
    def generate(self, queries: list[ChoiceQuery]) -> list[ModelOutput]:
        """Answer each query (generate mode: free text with the JSON answer)."""

    def score(self, queries: list[ChoiceQuery]) -> list[ModelOutput]:
        """Logprob mode: score the two possible answers in one forward pass per query."""
        raise NotImplementedError(f"model {self.name!r} has no logprob mode")

    def prepare_clips(self, clips: list[Clip]) -> None:
        """Work on a dialogue's clips that can be done ahead of the queries (the runner calls it in its loader thread).

        Must be thread-safe and must not change any answer; the default does nothing.
        """

    def clip_preparer(self) -> Callable[[Clip], object] | None:
        """`prepare_clips`'s work on one clip as a picklable function, run in the runner's loader worker processes.

        The runner hands each result back through `adopt_prepared(clip, result)` in the model's
        process. None (the default): nothing to prepare there.
        """
        return None

    def adopt_prepared(self, clip: Clip, prepared: object) -> None:
        """Take what `clip_preparer()` computed for `clip` in a worker process; the default ignores it."""

    def describe(self) -> dict:
        """Adapter configuration recorded in results.json (never secrets)."""
        return {"name": self.name}


_REGISTRY: dict[str, Callable[..., ChoiceModel]] = {}


def register(name: str) -> Callable[[Callable[..., ChoiceModel]], Callable[..., ChoiceModel]]:
    """Class decorator adding an adapter factory under `name`; duplicates are an error."""

    def add(factory: Callable[..., ChoiceModel]) -> Callable[..., ChoiceModel]:
        if name in _REGISTRY:
            raise ValueError(f"model name {name!r} is registered twice")
        _REGISTRY[name] = factory
        return factory

    return add


def known_models() -> list[str]:
    """Registered adapter names (importing the adapter modules first)."""
    _import_adapters()
    return sorted(_REGISTRY)


def model_factory(name: str) -> Callable[..., ChoiceModel]:
    """The registered adapter class (or factory) of `name`; unknown names fail with the list of known ones."""
    _import_adapters()
    if name not in _REGISTRY:
        raise ValueError(f"unknown model {name!r}; known models: {', '.join(sorted(_REGISTRY))}")
    return _REGISTRY[name]


def build_model(name: str, **kwargs) -> ChoiceModel:
    """Instantiate a registered adapter; unknown names fail with the list of known ones."""
    return model_factory(name)(**kwargs)


def _import_adapters() -> None:
    # Adapter modules register themselves on import; heavy deps (torch,
    # transformers, httpx) are imported inside the adapters' constructors.
    import importlib
    import pkgutil

    import eval_scripts.models as pkg

    for info in pkgutil.iter_modules(pkg.__path__):
        if info.name != "base":
            importlib.import_module(f"{pkg.__name__}.{info.name}")
