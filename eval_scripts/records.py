"""The records of samples.jsonl: one DialogueRecord per line, holding its trajectories of RoundRecords.

This is the runner's central contract (docs/runner.md › samples.jsonl documents
every field once). Scoring, the store, the report and the benchmarks read these
fields, never string keys. Each line carries `schema_version`; a run directory
written under another version is not resumed.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from dataclasses import field

SCHEMA_VERSION = 2  # 1: the unversioned dict records written before the typed ones (no prompt)


class SchemaVersionError(ValueError):
    """A record written under another samples.jsonl schema version."""


@dataclass(frozen=True)
class PromptRecord:
    """The prompt actually sent: the system text, and the user message as text parts and clips in order.

    `parts` holds {"text": "..."} and {"audio": "<dataset column>"} items, so a reader sees which
    clip stood at each audio position without the audio itself.
    """

    system: str
    parts: tuple[dict, ...]

    @property
    def audio_columns(self) -> list[str]:
        """The dataset columns of the clips, in the order the model heard them."""
        return [part["audio"] for part in self.parts if "audio" in part]

    @property
    def text(self) -> str:
        """The user message's text with each clip shown as [audio: column]."""
        return "".join(part["text"] if "text" in part else f"[audio: {part['audio']}]" for part in self.parts)


@dataclass
class RoundRecord:
    """One answered query: what was asked, what came back, how it was read, what it cost."""

    uid: str  # "<dialogue_id>/r<round>/<mode>/<order>/run<k>"
    round: int  # 1 (picks turn 4) or 2 (picks turn 6)
    turn: int  # the test turn: 4 or 6
    levels: list[str]  # levels shown as [Option 1, Option 2], e.g. ["low", "high"]
    turn4_in_context: str | None  # round 2: the turn-4 clip heard ("high"/"low"); None in round 1
    raw: str | None  # the model's raw text (None in logprob mode)
    parse_status: str  # "json", "recovered", "bare", "invalid", "empty", "logprob" or "error"
    parse_detail: str  # why an answer is invalid, or the error
    choice: int | None  # 1, 2, or None for no valid answer
    selected_level: str | None  # the level of the chosen option, None for no valid answer
    correct: bool  # the resonant ("high") clip was chosen
    option_logprobs: list[float] | None = None  # logprob mode: log P("1"), log P("2")
    latency_s: float = 0.0  # wall time of the call that produced the answer
    compute_s: float = 0.0  # this query's share of its batch's wall time
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None
    error: str | None = None  # the model or reading error that failed this query
    prompt: PromptRecord | None = None
    details: dict | None = None  # adapter-specific facts about the answer (e.g. a cascade's transcripts)


@dataclass
class TrajectoryRecord:
    """One pass through both rounds: choice mode, option-order kind and run index, and its rounds in order."""

    mode: str  # "generate" or "logprob"
    order: str  # "random", "high_first" or "low_first"
    run: int
    rounds: list[RoundRecord] = field(default_factory=list)


@dataclass
class DialogueRecord:
    """Everything a run recorded about one dialogue."""

    id: str
    subscale: str
    status: str  # "ok" or "failed"
    error: str | None = None  # why the dialogue failed (a clip, a model error, a query that could not be built)
    trajectories: list[TrajectoryRecord] = field(default_factory=list)
    votes: dict[str, dict[str, str | None]] | None = None  # mode -> {"turn4"/"turn6": voted level}
    schema_version: int = SCHEMA_VERSION

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def rounds(self):
        """Every RoundRecord of the dialogue, trajectory by trajectory."""
        for trajectory in self.trajectories:
            yield from trajectory.rounds

    def to_json(self) -> dict:
        """The record as a JSON-ready dict (the samples.jsonl line)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> DialogueRecord:
        """A record from its samples.jsonl line; SchemaVersionError when it was written under another schema."""
        version = data.get("schema_version", 1)
        if version != SCHEMA_VERSION:
            raise SchemaVersionError(f"record {data.get('id')!r} has samples schema {version}; this toolkit reads {SCHEMA_VERSION}")
        trajectories = [
            TrajectoryRecord(t["mode"], t["order"], t["run"], [_round_from_json(r) for r in t["rounds"]]) for t in data["trajectories"]
        ]
        return cls(data["id"], data["subscale"], data["status"], data.get("error"), trajectories, data.get("votes"), version)


def _round_from_json(data: dict) -> RoundRecord:
    prompt = data.get("prompt")
    fields = {**data, "prompt": PromptRecord(prompt["system"], tuple(prompt["parts"])) if prompt else None}
    return RoundRecord(**fields)
