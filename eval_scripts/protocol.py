"""The two-round forced-choice protocol of SPEC §5 as pure functions over dialogues.

A *trajectory* is one pass through both rounds (one choice mode, one option
order, one run). Round 1 asks for turn 4 given turns 1-3; round 2 asks for
turn 6 given turns 1-5, where turn 4 is the clip the model chose in round 1
(sequential inference) or the resonant clip (direct inference).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from eval_scripts.models.base import ChoiceQuery
from eval_scripts.models.base import Clip
from eval_scripts.models.base import Part
from eval_scripts.prompts import PromptTemplate
from speecheq_dataset.columns import audio_column

LEVELS = ("high", "low")
ROUND_TURN = {1: 4, 2: 6}  # round -> test turn
HISTORY_TURNS = {1: (1, 2, 3), 2: (1, 2, 3, 4, 5)}
SCENE_FIELDS = ("title", "context", "description", "speaker1_name", "speaker1_role", "speaker2_name", "speaker2_role")
_SLOT = "\x00"  # marks an audio slot inside rendered text; never occurs in data (stripped)


@dataclass(frozen=True)
class Dialogue:
    """One dialogue ready for prompting: its text fields and its eight decoded clips."""

    id: str
    subscale: str
    fields: dict[str, str]  # scenario fields, turnN_text
    clips: dict[str, Clip]  # audio column -> clip (text and tone filled in)


@dataclass(frozen=True)
class Trajectory:
    """One pass through both rounds: choice mode, option-order kind, run index."""

    mode: str  # "generate" | "logprob"
    order: str  # "random" | "high_first" | "low_first"
    run: int

    @property
    def key(self) -> str:
        return f"{self.mode}/{self.order}/run{self.run}"


@dataclass(frozen=True)
class ProtocolSettings:
    """Everything that shapes the prompts, fixed for a whole run."""

    template: PromptTemplate
    system: str
    seed: int = 0
    inference: str = "sequential"  # or "direct"
    history: str = "audio"  # or "text"
    oracle: bool = False
    extra_meta: dict = field(default_factory=dict)


def plan_trajectories(choice_modes: list[str], orders: str, num_runs: int) -> list[Trajectory]:
    """All trajectories of one dialogue, in a fixed order."""
    if num_runs < 1:
        raise ValueError(f"num_runs must be >= 1, got {num_runs}")
    order_kinds = ["random"] if orders == "random" else ["high_first", "low_first"]
    if orders not in ("random", "both"):
        raise ValueError(f"orders must be 'random' or 'both', got {orders!r}")
    return [Trajectory(mode, order, run) for mode in choice_modes for order in order_kinds for run in range(num_runs)]


def derive_seed(*parts: object) -> int:
    """A stable 63-bit integer from any parts (run seed, dialogue id, round, ...)."""
    digest = hashlib.sha256("\x1f".join(str(p) for p in parts).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def option_levels(seed: int, dialogue_id: str, round_: int, trajectory: Trajectory) -> tuple[str, str]:
    """Levels presented as (Option 1, Option 2); random orders depend on seed, dialogue, round and run only.

    The choice mode is left out on purpose, so generate and logprob answer the same presentations.
    """
    if trajectory.order == "high_first":
        return ("high", "low")
    if trajectory.order == "low_first":
        return ("low", "high")
    flip = derive_seed(seed, "order", dialogue_id, round_, trajectory.run) % 2
    return ("low", "high") if flip else ("high", "low")


def query_seed(seed: int, dialogue_id: str, round_: int, trajectory: Trajectory) -> int:
    """Per-query seed, independent of batching and sharding."""
    return derive_seed(seed, "query", dialogue_id, round_, trajectory.key)


def context_level(settings: ProtocolSettings, round1_level: str | None) -> str:
    """Which turn-4 clip round 2 hears: the model's pick (sequential) or the resonant one (direct).

    An invalid round-1 answer counts as wrong, so sequential inference then continues with the dissonant clip.
    """
    if settings.inference == "direct":
        return "high"
    if settings.inference != "sequential":
        raise ValueError(f"inference must be 'sequential' or 'direct', got {settings.inference!r}")
    return round1_level if round1_level in LEVELS else "low"


def build_query(
    settings: ProtocolSettings,
    dialogue: Dialogue,
    round_: int,
    trajectory: Trajectory,
    turn4_level: str | None = None,
) -> ChoiceQuery:
    """The query of one round of one trajectory; round 2 needs the turn-4 level in context."""
    if round_ not in ROUND_TURN:
        raise ValueError(f"round must be 1 or 2, got {round_!r}")
    if round_ == 2 and turn4_level not in LEVELS:
        raise ValueError(f"round 2 needs the turn-4 level in context ('high' or 'low'), got {turn4_level!r}")
    turn = ROUND_TURN[round_]
    template = settings.template
    levels = option_levels(settings.seed, dialogue.id, round_, trajectory)
    options = tuple(dialogue.clips[audio_column(turn, level)] for level in levels)
    slots: list[Clip] = []

    def slot(clip: Clip) -> str:
        slots.append(clip)
        return f"{_SLOT}{len(slots) - 1}{_SLOT}"

    history_lines = []
    for t in HISTORY_TURNS[round_]:
        clip = dialogue.clips[audio_column(t, turn4_level if t == 4 else None)]
        speaker = _field(dialogue, "speaker1_name" if t % 2 else "speaker2_name")
        if settings.history == "audio":
            line = _fill(template["history_line_audio"], {"turn": t, "speaker_name": speaker, "clip": slot(clip)})
        elif settings.history == "text":
            line = _fill(template["history_line_text"], {"turn": t, "speaker_name": speaker, "text": _field(dialogue, f"turn{t}_text")})
        else:
            raise ValueError(f"history must be 'audio' or 'text', got {settings.history!r}")
        history_lines.append(line)

    def option_text(clip: Clip) -> str:
        if settings.oracle:
            return _fill(template["option_oracle"], {"tone": _clean(clip.tone)})
        return _fill(template["option_audio"], {"clip": slot(clip)})

    values = {name: _field(dialogue, name) for name in SCENE_FIELDS}
    values.update(
        turn=turn,
        reply_text=_field(dialogue, f"turn{turn}_text"),
        history=template["history_separator"].join(history_lines),
        option_1=option_text(options[0]),
        option_2=option_text(options[1]),
    )
    rendered = _fill(template[f"round{round_}"], values)
    parts = _split_parts(rendered, slots)
    return ChoiceQuery(
        uid=f"{dialogue.id}/r{round_}/{trajectory.key}",
        system=settings.system,
        parts=parts,
        options=options,  # type: ignore[arg-type]
        preceding=dialogue.clips[audio_column(turn - 1)],
        seed=query_seed(settings.seed, dialogue.id, round_, trajectory),
        meta={
            "dialogue_id": dialogue.id,
            "round": round_,
            "turn": turn,
            "levels": list(levels),
            "turn4_in_context": turn4_level if round_ == 2 else None,
            "trajectory": trajectory.key,
            "answer_prefix": _fill(template["logprob_prefix"], {}),
            "answer_choices": ["1", "2"],
            **settings.extra_meta,
        },
    )


def heard_clips(settings: ProtocolSettings, dialogue: Dialogue) -> list[Clip]:
    """The clips a dialogue's queries may play as audio: all of them with audio history, else the options unless oracle."""
    if settings.history == "audio":
        return list(dialogue.clips.values())
    if settings.oracle:
        return []
    return [dialogue.clips[audio_column(turn, level)] for turn in ROUND_TURN.values() for level in LEVELS]


def selected_level(levels: list[str] | tuple[str, str], choice: int | None) -> str | None:
    """Level ("high"/"low") of the option chosen (1 or 2), None for no valid choice."""
    return levels[choice - 1] if choice in (1, 2) else None


def _field(dialogue: Dialogue, name: str) -> str:
    return _clean(dialogue.fields.get(name))


def _clean(value: object) -> str:
    return "" if value is None else str(value).replace(_SLOT, "")


class _Values(dict):
    def __missing__(self, key: str) -> str:
        raise ValueError(f"prompt template uses unknown placeholder {{{key}}}")


def _fill(text: str, values: dict) -> str:
    """str.format with an error naming unknown placeholders (values are never re-expanded)."""
    return text.format_map(_Values(values))


def _split_parts(rendered: str, slots: list[Clip]) -> list[Part]:
    """Cut rendered text at audio slots into interleaved text and audio parts."""
    pieces = rendered.split(_SLOT)
    parts: list[Part] = []
    for i, piece in enumerate(pieces):
        if i % 2 == 0:
            if piece:
                parts.append(Part("text", text=piece))
        else:
            parts.append(Part("audio", clip=slots[int(piece)]))
    used = sum(1 for p in parts if p.kind == "audio")
    if used != len(slots):
        raise ValueError(f"prompt template placed {used} of {len(slots)} audio clips (a clip placeholder is missing)")
    return parts
