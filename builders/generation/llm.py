"""Text backends of the pipeline's LLM stages: a request/reply contract, the OpenAI-compatible backend and a registry.

A stage builds a TextRequest (rendered chat messages plus the structured
inputs they were rendered from) and gets a ChatReply back. The `openai`
backend sends the messages to any OpenAI-compatible chat endpoint through the
shared speecheq_dataset.chat.ChatClient (retries, backoff, deadline, token and
cost tally); the `scripted` backend (builders.generation.scripted) answers from
the structured inputs, deterministically and offline.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from dataclasses import field

from speecheq_dataset.chat import ChatClient
from speecheq_dataset.chat import ChatReply


@dataclass(frozen=True)
class TextRequest:
    """One call of a text stage for one item."""

    stage: str  # scenario | dialogue | tones_context | tones_test | filter | oracle
    messages: list[dict]
    inputs: dict = field(default_factory=dict)
    seed: int = 0
    attempt: int = 1
    label: str = ""


class OpenAIChatBackend:
    """Any OpenAI-compatible chat-completions endpoint (OpenAI, vLLM, a local server), asked for JSON."""

    name = "openai"

    def __init__(self, model: str = "gpt-4o-2024-11-20", *, base_url: str | None = None, json_mode: bool = True,
                 temperature: float | None = 0.7, **client_options):
        options = dict(client_options)
        if base_url:
            options["base_url"] = base_url
        self.client = ChatClient(model, temperature=temperature, **options)
        self.json_mode = json_mode
        self.concurrency = self.client.concurrency

    def complete(self, request: TextRequest) -> ChatReply:
        # The item's seed makes a server that honours `seed` repeatable; each retry asks again with the feedback.
        return self.client.complete(request.messages, label=request.label or request.stage, seed=request.seed,
                                    json_mode=self.json_mode)

    def describe(self) -> dict:
        return {"backend": self.name, **self.client.describe()}

    def usage(self) -> dict:
        return self.client.usage.as_dict()

    def close(self) -> None:
        self.client.close()


def _scripted(**options):
    from .scripted import ScriptedBackend

    return ScriptedBackend(**options)


TEXT_BACKENDS: dict[str, Callable[..., object]] = {"scripted": _scripted, "openai": OpenAIChatBackend}


def build_text_backend(name: str, **options):
    """A text backend by name; an unknown name fails with the known ones."""
    if name not in TEXT_BACKENDS:
        raise ValueError(f"unknown LLM backend {name!r}; known: {', '.join(TEXT_BACKENDS)}")
    return TEXT_BACKENDS[name](**options)
