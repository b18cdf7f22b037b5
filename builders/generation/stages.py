"""The four text stages (SPEC §3 stages 1-5 up to the tone filter), each a resumable step over items.

`run_text_stage` skips items finished in an earlier run, asks the backend
once per item (with bounded retries when the answer fails its checks, each
retry told why), and appends one record per item: `ok` with the output,
`rejected` with the reasons of its last attempt, or `failed` when the backend
itself failed (a re-run retries those).
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from dataclasses import field

from speecheq_dataset.http_api import map_in_order
from speecheq_dataset.taxonomy import subscale as subscale_by_slug

from . import checks
from .llm import TextRequest
from .matrix import Item
from .matrix import stable_seed
from .prompts import load_prompt
from .store import FAILED
from .store import FINISHED
from .store import OK
from .store import REJECTED
from .store import StageStore

logger = logging.getLogger(__name__)

TEXT_STAGES: tuple[str, ...] = ("scenario", "dialogue", "tones", "filter")
UPSTREAM: dict[str, tuple[str, ...]] = {
    "scenario": (),
    "dialogue": ("scenario",),
    "tones": ("scenario", "dialogue"),
    "filter": ("scenario", "dialogue", "tones"),
    "speech": ("scenario", "dialogue", "tones", "filter"),
}
ATTRIBUTE_WORDS = {
    "duration": ("slower and longer", "faster and shorter"),
    "loudness": ("louder", "quieter"),
    "pitch": ("higher-pitched", "lower-pitched"),
    "pitch_range": ("with a wider pitch range", "with a narrower pitch range"),
}


class Rejected(Exception):
    """An item whose answers failed the checks on every allowed attempt."""

    def __init__(self, reasons: list[str]):
        super().__init__("; ".join(reasons))
        self.reasons = reasons


class BackendFailed(Exception):
    """The backend could not answer (after its own retries): the item is retried on the next run."""


@dataclass
class StageStats:
    """What one stage did in this run."""

    stage: str
    done: int = 0
    rejected: int = 0
    failed: int = 0
    retried: int = 0
    skipped: int = 0
    reasons: dict[str, list[str]] = field(default_factory=dict)

    def line(self) -> str:
        return (f"{self.stage:<8} produced {self.done:>4}, rejected {self.rejected:>3}, failed {self.failed:>3}, "
                f"retried {self.retried:>3}, already done {self.skipped:>4}")


class Asker:
    """Bounded retries of one item's prompt: render, call, parse, check; feedback on each retry."""

    def __init__(self, backend, item: Item, max_attempts: int):
        self.backend, self.item, self.max_attempts = backend, item, max_attempts
        self.attempts: dict[str, int] = {}
        self.prompts: dict[str, str] = {}

    def __call__(self, prompt: str, values: dict, inputs: dict, check: Callable[[dict], list[str]]) -> dict:
        template = load_prompt(prompt)
        self.prompts[prompt] = template.describe()["prompt_sha256"]
        messages = template.render(**values)
        reasons: list[str] = []
        for attempt in range(1, self.max_attempts + 1):
            self.attempts[prompt] = attempt
            request = TextRequest(prompt, messages, {**inputs, "item": self.item.as_dict()}, stable_seed(self.item.seed, prompt), attempt,
                                  label=f"{prompt} {self.item.item_id}")
            reply = self.backend.complete(request)
            if not reply.ok:
                raise BackendFailed(reply.error)
            answer, problem = checks.parse_json_object(reply.text)
            reasons = [f"{prompt}: {problem}"] if answer is None else check(answer)
            if not reasons:
                return answer
            logger.debug("%s attempt %d failed: %s", request.label, attempt, reasons)
            messages = [*messages, {"role": "assistant", "content": reply.text or ""},
                        {"role": "user", "content": "Your answer failed these checks:\n- " + "\n- ".join(reasons)
                                                    + "\nAnswer again with one corrected JSON object."}]
        raise Rejected(reasons)


def _scenario_for_prompt(scenario: dict) -> dict:
    return {k: v for k, v in scenario.items() if k != "speaker2_failure_types"}


def stage_scenario(item: Item, ask: Asker) -> dict:
    sub = subscale_by_slug(item.subscale)
    from .scripted import load_templates

    hints = load_templates()
    values = {"eq_scale": sub.eq_scale, "skill_hint": hints["skills"][item.subscale], "valence": item.valence,
              "valence_hint": hints["valences"][item.valence]["valence_hint"], "scenario_type": item.scenario_type.replace("_", " ")}
    return ask("scenario", values, {}, lambda out: checks.check_scenario(out, item.valence, sub.eq_scale))


def stage_dialogue(item: Item, scenario: dict, ask: Asker) -> dict:
    from .scripted import load_templates

    values = {"scenario": _scenario_for_prompt(scenario), "speaker1_name": scenario["speaker1_name"],
              "speaker2_name": scenario["speaker2_name"], "valence": item.valence,
              "sustain_hint": load_templates()["valences"][item.valence]["sustain_hint"]}
    answer = ask("dialogue", values, {"scenario": scenario}, checks.check_dialogue)
    return {"conversation": answer["conversation"]}


def targets_text(targets: dict[str, int]) -> str:
    """The balance targets of one test turn in words, for the prompt."""
    parts = [ATTRIBUTE_WORDS[a][0 if sign > 0 else 1] for a, sign in targets.items() if a in ATTRIBUTE_WORDS]
    return "make the resonant delivery " + ", ".join(parts) if parts else "no constraint"


def stage_tones(item: Item, scenario: dict, dialogue: dict, ask: Asker) -> dict:
    from .scripted import load_templates

    conversation = dialogue["conversation"]
    lines = {t["sentence_number"]: t["text"] for t in conversation}
    common = {"scenario": _scenario_for_prompt(scenario), "conversation": conversation, "valence": item.valence}
    inputs = {"scenario": scenario, "conversation": conversation}
    context = ask("tones_context", common, inputs, checks.check_context_tones)
    test_values = {**common, "resonant_hint": load_templates()["valences"][item.valence]["resonant_hint"],
                   "failure_types": ", ".join(scenario["speaker2_failure_types"]),
                   "targets_turn4": targets_text(item.targets.get(4, {})), "targets_turn6": targets_text(item.targets.get(6, {}))}
    test = ask("tones_test", test_values, inputs, lambda out: checks.check_test_tones(out, lines))
    return {"context": {f"turn{n}": context[f"turn{n}"] for n in checks.CONTEXT_TONE_TURNS},
            "test": {f"turn{n}": test[f"turn{n}"] for n in checks.TEST_TURNS}}


def stage_filter(item: Item, scenario: dict, dialogue: dict, tones: dict, ask: Asker) -> dict:
    rng = random.Random(stable_seed("filter-order", item.seed))
    shown, roles, texts, kinds = {}, {}, {}, {}
    for turn in checks.TEST_TURNS:
        entry = tones["test"][f"turn{turn}"]
        options = [("resonant", entry["resonant"], None)] + [("dissonant", d["instruction"], d["type"]) for d in entry["dissonant"]]
        rng.shuffle(options)  # the judge never sees the resonant one in a fixed place
        roles[turn], texts[turn], kinds[turn] = [o[0] for o in options], [o[1] for o in options], [o[2] for o in options]
        shown[turn] = "  ".join(f"{i}. {text}" for i, text in enumerate(texts[turn], start=1))
    values = {"scenario": _scenario_for_prompt(scenario), "conversation": dialogue["conversation"],
              "options_turn4": shown[4], "options_turn6": shown[6]}
    inputs = {"scenario": scenario, "conversation": dialogue["conversation"], "options": {str(t): texts[t] for t in checks.TEST_TURNS}}
    verdict = ask("filter", values, inputs, lambda out: checks.check_filter(out, roles))
    out = {}
    for turn in checks.TEST_TURNS:
        judged = verdict[f"turn{turn}"]
        worst = judged["most_dissonant"] - 1
        out[f"turn{turn}"] = {"high": texts[turn][judged["best_resonant"] - 1], "low": texts[turn][worst], "low_type": kinds[turn][worst],
                              "reasoning": judged.get("reasoning", "")}
    return out


STAGE_FUNCTIONS: dict[str, Callable] = {"scenario": stage_scenario, "dialogue": stage_dialogue, "tones": stage_tones, "filter": stage_filter}


def pending(items: list[Item], store: StageStore, upstream: list[dict[str, dict]], done: dict[str, dict]) -> list[Item]:
    """Items this stage still has to do: unfinished here, and `ok` in every upstream stage."""
    return [item for item in items if done.get(item.item_id, {}).get("status") not in FINISHED
            and all(records.get(item.item_id, {}).get("status") == OK for records in upstream)]


def run_text_stage(stage: str, items: list[Item], work_dir, backend, *, max_attempts: int = 3, progress: bool = True) -> StageStats:
    """Run one text stage over the items (resumable; see the module docstring)."""
    store = StageStore(work_dir, stage)
    done = store.load()
    upstream = [StageStore(work_dir, name).load() for name in UPSTREAM[stage]]
    todo = pending(items, store, upstream, done)
    stats = StageStats(stage, skipped=sum(done.get(i.item_id, {}).get("status") in FINISHED for i in items))
    function = STAGE_FUNCTIONS[stage]

    def process(item: Item) -> str:
        ask = Asker(backend, item, max_attempts)
        record = {"item_id": item.item_id, "stage": stage, "item": item.as_dict(), "time": time.time()}
        try:
            output = function(item, *[records[item.item_id]["output"] for records in upstream], ask)
            record.update(status=OK, output=output)
        except Rejected as exc:
            record.update(status=REJECTED, reasons=exc.reasons)
        except BackendFailed as exc:
            record.update(status=FAILED, reasons=[str(exc)])
        except (KeyError, TypeError, ValueError) as exc:  # an answer that passed checks but still broke us: retry next run
            logger.exception("%s %s: unexpected error", stage, item.item_id)
            record.update(status=FAILED, reasons=[f"{type(exc).__name__}: {exc}"])
        record.update(attempts=dict(ask.attempts), prompts=dict(ask.prompts))
        store.append(record)
        return record["status"]

    statuses = map_in_order(process, todo, getattr(backend, "concurrency", 1), progress=f"{stage:<8}" if progress else None)
    return tally(stats, todo, statuses, store.load(), lambda record: any(n > 1 for n in record.get("attempts", {}).values()))


def tally(stats: StageStats, todo: list[Item], statuses: list[str], records: dict[str, dict], retried: Callable[[dict], bool]) -> StageStats:
    """Count what a stage run did: statuses of the items it ran, the retried ones, and the reasons of the rest."""
    for item, status in zip(todo, statuses):
        record = records.get(item.item_id, {})
        stats.done += status == OK
        stats.rejected += status == REJECTED
        stats.failed += status == FAILED
        stats.retried += bool(retried(record))
        if status in (REJECTED, FAILED):
            stats.reasons[item.item_id] = record.get("reasons", [])
    return stats


def stage_outputs(work_dir, stage: str) -> dict[str, dict]:
    """item_id -> output of the items `ok` in a stage."""
    return {item_id: r["output"] for item_id, r in StageStore(work_dir, stage).load().items() if r.get("status") == OK}
