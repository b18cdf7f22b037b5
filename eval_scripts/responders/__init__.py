"""Speech-output models for the generative track (`speecheq respond`): they answer the catalyst out loud.

A responder takes a batch of requests (the conversation so far: the catalyst's
turns as audio, its own earlier replies as text) and returns one spoken reply
per request, in the same order. Registered names (`build_responder`):
- `qwen2.5-omni`: Qwen2.5-Omni with its talker (transformers); `pretrained=tiny-random` runs offline;
- `openai`: an OpenAI audio model (or a compatible server) through chat
  completions with audio output (`speecheq_dataset.chat.ChatClient`).
"""

from __future__ import annotations

import abc
import importlib
from dataclasses import dataclass
from dataclasses import field

import numpy as np

# name -> "module:class"; modules are imported when a responder is built (torch/transformers only then)
RESPONDERS: dict[str, str] = {
    "qwen2.5-omni": "eval_scripts.responders.qwen_omni:QwenOmniResponder",
    "openai": "eval_scripts.responders.openai_audio:OpenAIAudioResponder",
}


@dataclass(frozen=True)
class Exchange:
    """One earlier turn: the catalyst's (role "user", audio) or the responder's own (role "assistant", text + audio)."""

    role: str
    text: str = ""
    audio: np.ndarray | None = None
    sampling_rate: int = 16_000


@dataclass
class ReplyRequest:
    """What a responder answers: the scene instructions and the conversation, ending with the catalyst's turn."""

    uid: str  # "<dialogue id>/turn<k>"
    instructions: str
    conversation: list[Exchange]
    seed: int = 0
    meta: dict = field(default_factory=dict)


@dataclass
class SpokenReply:
    """One reply: its words and its audio (mono float32 at `sampling_rate`), or the error that prevented it."""

    text: str | None = None
    audio: np.ndarray | None = None
    sampling_rate: int = 24_000
    input_tokens: int | None = None
    output_tokens: int | None = None
    latency_s: float = 0.0
    cost_usd: float | None = None
    error: str | None = None


class SpeechResponder(abc.ABC):
    """Batch of requests in, one spoken reply per request out, same order."""

    name: str = "responder"
    sampling_rate: int = 16_000  # the rate the catalyst's clips are decoded at for this model

    @abc.abstractmethod
    def respond(self, requests: list[ReplyRequest]) -> list[SpokenReply]:
        """Answer each request out loud."""

    def describe(self) -> dict:
        """Configuration recorded in results.json (never secrets)."""
        return {"name": self.name}


def known_responders() -> list[str]:
    return sorted(RESPONDERS)


def build_responder(name: str, **kwargs) -> SpeechResponder:
    """A registered responder; unknown names fail with the list of known ones."""
    if name not in RESPONDERS:
        raise ValueError(f"unknown speech-output model {name!r}; known: {', '.join(known_responders())}")
    module, cls = RESPONDERS[name].split(":")
    return getattr(importlib.import_module(module), cls)(**kwargs)
