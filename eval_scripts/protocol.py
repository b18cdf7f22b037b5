"""The two-round forced-choice protocol of SPEC §5: prompts, both rounds, and the record of each answer.

A *trajectory* is one pass through both rounds (one choice mode, one option
order, one run). Round 1 asks for turn 4 given turns 1-3; round 2 asks for
turn 6 given turns 1-5, where turn 4 is the clip the model chose in round 1
(sequential inference) or the resonant clip (direct inference).

One sample, end to end: `run_rounds` builds each round's queries
(`build_query`), asks the model in batches (`ask`), reads each answer
(`answer_record`: parse, level, correctness) and returns one
DialogueRecord per dialogue. Everything but `ask` is a pure function.
"""

from __future__ import annotations

import hashlib
import logging
import time
from dataclasses import dataclass

from eval_scripts import scoring
from eval_scripts.batching import BatchSize
from eval_scripts.models.base import ChoiceModel
from eval_scripts.models.base import ChoiceQuery
from eval_scripts.models.base import Clip
from eval_scripts.models.base import ModelOutput
from eval_scripts.models.base import Part
from eval_scripts.parsing import parse_answer
from eval_scripts.prompts import PromptTemplate
from eval_scripts.records import DialogueRecord
from eval_scripts.records import PromptRecord
from eval_scripts.records import RoundRecord
from eval_scripts.records import TrajectoryRecord
from speecheq_dataset.columns import audio_column

logger = logging.getLogger(__name__)

# The allowed values of the protocol options (RunConfig validates against them, the CLI offers them).
INFERENCES = ("sequential", "direct")
HISTORIES = ("audio", "text")
ORDERS = ("random", "both")
CHOICE_MODES = ("generate", "logprob", "both")
LEVELS = ("high", "low")
# Named protocol settings (`--tasks NAME`): a leaderboard row is reproducible from one word.
PRESETS: dict[str, tuple[str, dict]] = {
    "speecheq": ("sequential inference, audio history (the main setting)", {"inference": "sequential", "history": "audio", "oracle": False}),
    "speecheq_direct": ("direct inference: round 2 hears the resonant turn 4", {"inference": "direct", "history": "audio", "oracle": False}),
    "speecheq_text_history": ("history turns as transcripts", {"inference": "sequential", "history": "text", "oracle": False}),
    "speecheq_oracle": ("transcripts and the tone instructions instead of clips (SPEC §4 oracle check)",
                        {"inference": "sequential", "history": "text", "oracle": True}),
}
DEFAULT_SETTINGS = PRESETS["speecheq"][1]


def preset_settings(preset: str | None, given: dict) -> dict:
    """inference/history/oracle from a preset (or the defaults) and the flags given (None = not given); a contradiction is a ValueError."""
    if preset is not None and preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}; known: {', '.join(PRESETS)}")
    base = PRESETS[preset][1] if preset else DEFAULT_SETTINGS
    for name, value in given.items():
        if preset and value is not None and value != base[name]:
            raise ValueError(f"--tasks {preset} sets {name}={base[name]!r}; it contradicts the flag giving {value!r}")
    return {name: base[name] if given.get(name) is None else given[name] for name in base}
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

    @property
    def plays_audio(self) -> bool:
        """Whether the queries hold clips at all."""
        return plays_audio(self.history, self.oracle)


def plays_audio(history: str, oracle: bool) -> bool:
    """Whether queries hold clips: always but with text history and oracle options (what text-only models need)."""
    return history == "audio" or not oracle


def plan_trajectories(choice_modes: list[str], orders: str, num_runs: int) -> list[Trajectory]:
    """All trajectories of one dialogue, in a fixed order."""
    if num_runs < 1:
        raise ValueError(f"num_runs must be >= 1, got {num_runs}")
    if orders not in ORDERS:
        raise ValueError(f"orders must be one of {', '.join(ORDERS)}, got {orders!r}")
    order_kinds = ["random"] if orders == "random" else ["high_first", "low_first"]
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
    if settings.inference not in INFERENCES:
        raise ValueError(f"inference must be one of {', '.join(INFERENCES)}, got {settings.inference!r}")
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
            raise ValueError(f"history must be one of {', '.join(HISTORIES)}, got {settings.history!r}")
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
        },
    )


def prompt_record(query: ChoiceQuery) -> PromptRecord:
    """What a query sent, for the record: its system text and its parts, clips named by their dataset column."""
    parts = tuple({"text": p.text} if p.kind == "text" else {"audio": p.clip.column if p.clip else None} for p in query.parts)
    return PromptRecord(query.system, parts)


def answer_record(query: ChoiceQuery, mode: str, output: ModelOutput, compute_s: float) -> RoundRecord:
    """Read one answer: parse it (or take the logprob choice), map it to a level, and score it."""
    if output.error:
        choice, status, detail = None, "error", output.error
    elif mode == "logprob" and output.text is None:
        choice = output.choice if output.choice in (1, 2) else None
        status, detail = ("logprob" if choice else "invalid"), ""
    else:
        parsed = parse_answer(output.text)
        choice, status, detail = parsed.choice, parsed.status, parsed.detail
    levels = query.meta["levels"]
    level = selected_level(levels, choice)
    return RoundRecord(
        uid=query.uid,
        round=query.meta["round"],
        turn=query.meta["turn"],
        levels=list(levels),
        turn4_in_context=query.meta["turn4_in_context"],
        raw=output.text,
        parse_status=status,
        parse_detail=detail,
        choice=choice,
        selected_level=level,
        correct=level == "high",
        option_logprobs=[float(v) for v in output.option_logprobs] if output.option_logprobs else None,
        latency_s=output.latency_s,
        compute_s=compute_s,
        input_tokens=output.input_tokens,
        output_tokens=output.output_tokens,
        cost_usd=output.cost_usd,
        error=output.error,
        prompt=prompt_record(query),
        details=output.details,
    )


def safe_answer_record(query: ChoiceQuery, mode: str, output: ModelOutput, compute_s: float) -> RoundRecord:
    """answer_record, or, if reading this one answer fails in any way, the same record carrying that error."""
    try:
        return answer_record(query, mode, output, compute_s)
    except Exception as exc:
        logger.exception("query %s: cannot read the model's answer", query.uid)
        failed = ModelOutput(text=output.text if isinstance(output.text, str) else None, latency_s=output.latency_s,
                             error=f"cannot read the answer: {type(exc).__name__}: {exc}")
        return answer_record(query, mode, failed, compute_s)


def query_size(query: ChoiceQuery) -> float:
    """Rough prompt length in tokens (audio ~25 tokens/s, text ~4 chars/token), for longest-first batching."""
    audio_s = sum(p.clip.duration_s for p in query.parts if p.kind == "audio" and p.clip is not None)
    chars = len(query.system) + sum(len(p.text) for p in query.parts if p.kind == "text")
    return 25.0 * audio_s + chars / 4.0


def ask(model: ChoiceModel, mode: str, queries: list[ChoiceQuery], batch_size: int | BatchSize) -> list[tuple[ModelOutput, float]]:
    """Outputs in input order, batched longest-first; each with its share of the batch's wall time.

    An adapter exception on a batch is retried query by query; a query that still fails gets its
    error recorded. With `--batch-size auto` (a BatchSize), a batch that ran out of memory is asked
    again in halves, and the smaller size is kept.
    """
    order = sorted(range(len(queries)), key=lambda i: (-query_size(queries[i]), i))
    results: list[tuple[ModelOutput, float] | None] = [None] * len(queries)
    sizer = batch_size if isinstance(batch_size, BatchSize) else BatchSize(batch_size)
    start = 0
    while start < len(order):
        idx = order[start : start + sizer.size]
        batch = [queries[i] for i in idx]
        began = time.perf_counter()
        try:
            outputs = _call(model, mode, batch)
        except Exception as exc:
            if sizer.shrink(exc, len(idx)):  # out of memory under --batch-size auto: the same queries, smaller batches
                continue
            # Retry one by one, so one bad query fails alone and results stay batch-independent.
            logger.exception("model %s failed on a batch of %d (%s ...); retrying one query at a time", model.name, len(batch), batch[0].uid)
            outputs = []
            for query in batch:
                try:
                    outputs += _call(model, mode, [query])
                except Exception as exc:
                    logger.error("model %s failed on %s: %s: %s", model.name, query.uid, type(exc).__name__, exc)
                    outputs.append(ModelOutput(error=f"{type(exc).__name__}: {exc}"))
        share = (time.perf_counter() - began) / len(batch)
        for i, output in zip(idx, outputs):
            if not output.latency_s:
                output.latency_s = share * len(batch)
            results[i] = (output, share)
        start += len(idx)
    return results  # type: ignore[return-value]


def _call(model: ChoiceModel, mode: str, batch: list[ChoiceQuery]) -> list[ModelOutput]:
    outputs = model.generate(batch) if mode == "generate" else model.score(batch)
    if len(outputs) != len(batch):
        raise RuntimeError(f"adapter {model.name!r} returned {len(outputs)} outputs for {len(batch)} queries")
    return outputs


def run_rounds(
    model: ChoiceModel,
    settings: ProtocolSettings,
    dialogues: list[Dialogue],
    trajectories: list[Trajectory],
    *,
    batch_size: int | BatchSize = 1,
) -> list[DialogueRecord]:
    """Both rounds of every trajectory of a chunk of dialogues; one DialogueRecord per dialogue, in input order.

    Nothing that goes wrong with one query (building it, the model, reading its answer)
    escapes: it becomes that query's recorded error, and its dialogue fails by name.
    """
    rounds: dict[tuple[str, str], list[RoundRecord]] = {(d.id, t.key): [] for d in dialogues for t in trajectories}
    broken: dict[str, str] = {}  # dialogue id -> why its queries could not be built
    for round_ in (1, 2):
        for mode in sorted({t.mode for t in trajectories}):
            queries = []
            for dialogue in (d for d in dialogues if d.id not in broken):
                try:
                    queries += [
                        build_query(settings, dialogue, round_, traj,
                                    context_level(settings, rounds[(dialogue.id, traj.key)][0].selected_level) if round_ == 2 else None)
                        for traj in trajectories if traj.mode == mode
                    ]
                except Exception as exc:
                    logger.exception("dialogue %s: cannot build its round-%d queries", dialogue.id, round_)
                    broken[dialogue.id] = f"cannot build round {round_}: {type(exc).__name__}: {exc}"
            for query, (output, share) in zip(queries, ask(model, mode, queries, batch_size)):
                key = (query.meta["dialogue_id"], query.meta["trajectory"])
                rounds[key].append(safe_answer_record(query, mode, output, share))
    return [_dialogue_record(dialogue, trajectories, rounds, broken.get(dialogue.id)) for dialogue in dialogues]


def _dialogue_record(dialogue: Dialogue, trajectories: list[Trajectory], rounds: dict, broken: str | None) -> DialogueRecord:
    if broken:
        return DialogueRecord(dialogue.id, dialogue.subscale, "failed", broken)
    record = DialogueRecord(dialogue.id, dialogue.subscale, "ok", None,
                            [TrajectoryRecord(t.mode, t.order, t.run, rounds[(dialogue.id, t.key)]) for t in trajectories])
    errors = [rnd for rnd in record.rounds() if rnd.error]
    if errors:
        record.status, record.error = "failed", f"model error on {errors[0].uid}: {errors[0].error}"
        return record
    record.votes = {
        mode: dict(zip(("turn4", "turn6"), (scoring.voted_level(v) for v in scoring.dialogue_prediction(record, mode))))
        for mode in sorted({t.mode for t in trajectories})
    }
    return record


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
