"""The `scripted` text backend: deterministic, offline answers to every text stage, from our own templates.

It stands in for the LLM so the pipeline runs with no network and no weights
(tests, the offline demo). It reads the structured inputs of a request, never
the prompt text, and answers the same JSON a model would, which then goes
through the same parsing and rule checks. Choices are seeded by the item and
the attempt, so a retry gives a different answer and a re-run the same one.

- scenario/dialogue: a cell template per subscale x valence (scripted_v1.json),
  filled with a setting, names, roles and stakes of the scenario type;
- tones: phrase banks per delivery family; for test turns it searches the
  combinations whose delivery (read through the espeak-ng keyword table of
  speecheq_dataset.tts) meets the item's balance targets against both
  distractors (SPEC §9: pace, loudness and pitch vary independently of the label);
- filter and oracle: a keyword judge that scores each instruction's fit to the
  valence and prefers an actively wrong delivery over a flat one.
"""

from __future__ import annotations

import functools
import itertools
import json
import random
import re
from importlib import resources

from speecheq_dataset.chat import ChatReply
from speecheq_dataset.taxonomy import subscale as subscale_by_slug
from speecheq_dataset.tts import Prosody
from speecheq_dataset.tts import prosody_for

from .checks import INSTRUCTION_WORDS
from .checks import word_count
from .llm import TextRequest
from .matrix import stable_seed

TEMPLATES_FILE = "scripted_v1.json"
# Minimum differences for a balance target to count as met, in espeak-ng units.
MARGINS = {"duration": 1.06, "loudness": 8, "pitch": 3, "pitch_range": 15}
FLAT_FAILURE = "apathetic_wall"  # SPEC §3: used sparingly
FLAT_WEIGHT = 0.35


@functools.lru_cache(maxsize=1)
def load_templates() -> dict:
    """The packaged template data."""
    path = resources.files("builders.generation") / TEMPLATES_FILE
    return json.loads(path.read_text(encoding="utf-8"))


def _sentence_case(text: str) -> str:
    """Capitalise the first letter of every sentence (a slot such as "the report" may open one)."""
    text = text[:1].upper() + text[1:]
    # ... is a trailing thought, not a sentence end: "Okay... what's wrong?" stays as it is.
    return re.sub(r"(?<!\.)([.!?]\s+)([a-z])", lambda m: m.group(1) + m.group(2).upper(), text)


def _fill(template: str, slots: dict) -> str:
    return _sentence_case(template.format(**slots))


def _seconds_per_word(p: Prosody) -> float:
    return 60.0 / p.rate + 0.01 * p.word_gap


def _met(attribute: str, sign: int, resonant: Prosody, dissonant: Prosody) -> bool:
    """Does the resonant delivery stand to the dissonant one as the target says (+1: larger), by the margin?"""
    if attribute == "duration":
        ratio = _seconds_per_word(resonant) / _seconds_per_word(dissonant)
        return ratio >= MARGINS["duration"] if sign > 0 else ratio <= 1 / MARGINS["duration"]
    value = {"loudness": "amplitude", "pitch": "pitch", "pitch_range": "pitch_range"}[attribute]
    gap = getattr(resonant, value) - getattr(dissonant, value)
    return gap >= MARGINS[attribute] if sign > 0 else gap <= -MARGINS[attribute]


def _instructions(bank: dict) -> list[str]:
    """Every "<voice>, <pace>, <intent>." of a phrase bank that has 8-15 words."""
    low, high = INSTRUCTION_WORDS
    out = []
    for voice, pace, intent in itertools.product(bank["voice"], bank["pace"], bank["intent"]):
        text = f"{voice}, {pace}, {intent}."
        if low <= word_count(text) <= high:
            out.append(text)
    return out


def _hits(text: str, words: list[str]) -> int:
    lowered = text.lower()
    return sum(1 for w in words if re.search(r"\b" + re.escape(w), lowered))


def fit_scores(instruction: str, valence: str) -> tuple[int, int, int]:
    """(resonant-word hits for the valence, actively-wrong hits, flat hits) of an instruction."""
    lexicon = load_templates()["judge_lexicon"]
    # Without a valence (v1 data) any valence's resonant words count.
    resonant = lexicon["resonant"].get(valence) or [w for words in lexicon["resonant"].values() for w in words]
    return (_hits(instruction, resonant), _hits(instruction, lexicon["dissonant"]["active"]),
            _hits(instruction, lexicon["dissonant"]["flat"]))


def resonance(instruction: str, valence: str) -> int:
    """How well an instruction fits the valence's resonant delivery (higher: better)."""
    good, active, flat = fit_scores(instruction, valence)
    return good - active - flat


class ScriptedBackend:
    """Deterministic offline answers for every text stage (see the module docstring)."""

    name = "scripted"
    concurrency = 1

    def __init__(self):
        self.templates = load_templates()
        self.calls = 0

    def describe(self) -> dict:
        return {"backend": self.name, "templates": self.templates["version"]}

    def usage(self) -> dict:
        return {"calls": self.calls, "failed": 0, "input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0}

    def close(self) -> None:
        pass

    def complete(self, request: TextRequest) -> ChatReply:
        handlers = {"scenario": self.scenario, "dialogue": self.dialogue, "tones_context": self.tones_context,
                    "tones_test": self.tones_test, "filter": self.judge, "oracle": self.oracle}
        if request.stage not in handlers:
            return ChatReply(None, error=f"scripted backend: no answer for stage {request.stage!r}")
        self.calls += 1
        rng = random.Random(stable_seed("scripted", request.stage, request.seed, request.attempt))
        return ChatReply(json.dumps(handlers[request.stage](request.inputs, rng), ensure_ascii=False), 0, 0)

    # -- stage 1 and 2 -------------------------------------------------------------------------

    def slots(self, item: dict) -> dict:
        """Setting, roles and stakes of an item: a function of the item's seed only, so every stage sees the same."""
        kind = self.templates["scenario_types"][item["scenario_type"]]
        rng = random.Random(stable_seed("slots", item["seed"]))
        slots = {key: rng.choice(kind[key]) for key in ("event", "thing", "group", "authority")}
        slots["context"] = rng.choice(kind["contexts"])
        slots["roles"] = rng.choice(kind["roles"])
        return slots

    def scenario(self, inputs: dict, rng: random.Random) -> dict:
        item, valence = inputs["item"], inputs["item"]["valence"]
        cell = self.templates["cells"][item["subscale"]][valence]
        slots = self.slots(item)
        genders = [rng.choice(("Female", "Male")), rng.choice(("Female", "Male"))]
        names = [rng.choice(self.templates["names"][genders[0]])]
        names.append(rng.choice([n for n in self.templates["names"][genders[1]] if n != names[0]]))
        fit = self.templates["failure_fit"][valence]
        weights = [FLAT_WEIGHT if kind == FLAT_FAILURE else 1.0 for kind in fit]
        first = rng.choices(fit, weights)[0]
        rest = [kind for kind in fit if kind != first]
        second = rng.choices(rest, [FLAT_WEIGHT if k == FLAT_FAILURE else 1.0 for k in rest])[0]
        fill = {**slots, "s1": names[0], "s2": names[1]}
        failure = self.templates["failure_personas"]
        return {
            "title": cell["title"],
            "context": slots["context"],
            "description": _fill(cell["description"], fill),
            "scenario_valence": valence,
            "speaker1_name": names[0],
            "speaker1_role": slots["roles"][0],
            "speaker1_gender": genders[0],
            "speaker1_persona": _fill(rng.choice(self.templates["valences"][valence]["catalyst_persona"]), fill),
            "speaker2_name": names[1],
            "speaker2_role": slots["roles"][1],
            "speaker2_gender": genders[1],
            "speaker2_persona_1": _fill(cell["persona_1"], fill),
            "speaker2_persona_2": _fill(failure[first], fill),
            "speaker2_persona_3": _fill(failure[second], fill),
            "speaker2_failure_types": [first, second],
            "eq_skill_tested": subscale_by_slug(item["subscale"]).eq_scale,
            "target_social_intent": cell["intent"],
        }

    def dialogue(self, inputs: dict, rng: random.Random) -> dict:
        item, scenario = inputs["item"], inputs["scenario"]
        cell = self.templates["cells"][item["subscale"]][item["valence"]]
        fill = {**self.slots(item), "s1": scenario["speaker1_name"], "s2": scenario["speaker2_name"]}
        opener = rng.choice(self.templates["valences"][item["valence"]]["openers"])
        lines = [*opener, *cell["lines"]]
        return {"conversation": [{"speaker": "speaker1" if n % 2 else "speaker2", "sentence_number": n, "text": _fill(line, fill)}
                                 for n, line in enumerate(lines, start=1)]}

    # -- stage 3 and 4 -------------------------------------------------------------------------

    def tones_context(self, inputs: dict, rng: random.Random) -> dict:
        valence = inputs["item"]["valence"]
        bank = self.templates["tones"]["context"]
        return {"turn1": rng.choice(bank[valence]["turn1"]) + ".", "turn2": rng.choice(bank["turn2"]) + ".",
                "turn3": rng.choice(bank[valence]["turn3"]) + ".", "turn5": rng.choice(bank[valence]["turn5"]) + "."}

    def tones_test(self, inputs: dict, rng: random.Random) -> dict:
        item, conversation = inputs["item"], inputs["conversation"]
        kinds = inputs["scenario"]["speaker2_failure_types"]
        lines = {t["sentence_number"]: t["text"] for t in conversation}
        out = {}
        for turn in (4, 6):
            targets = item["targets"].get(str(turn), {})
            resonant, dissonant = self._balanced_tones(item["valence"], kinds, targets, rng)
            out[f"turn{turn}"] = {"line": lines[turn], "resonant": resonant,
                                  "dissonant": [{"type": kind, "instruction": text} for kind, text in zip(kinds, dissonant)]}
        return out

    def _balanced_tones(self, valence: str, kinds: list[str], targets: dict, rng: random.Random) -> tuple[str, list[str]]:
        """A resonant and one instruction per distractor type that meet as many balance targets as possible, seeded among ties."""
        tones = self.templates["tones"]
        resonant = _instructions(tones["resonant"][valence])
        rng.shuffle(resonant)
        pools = []
        for kind in kinds:
            pool = _instructions(tones["dissonant"][kind])
            rng.shuffle(pool)
            pools.append([(text, prosody_for(text)) for text in pool])

        def met(r: Prosody, d: Prosody) -> int:
            return sum(_met(attribute, sign, r, d) for attribute, sign in targets.items())

        best, best_score = None, -1
        for text in resonant:
            r = prosody_for(text)
            picks = [max(pool, key=lambda entry: met(r, entry[1])) for pool in pools]
            score = sum(met(r, p[1]) for p in picks)
            if score > best_score:
                best, best_score = (text, [p[0] for p in picks]), score
            if best_score == 2 * len(targets):
                break
        return best

    # -- stage 5 and the oracle ------------------------------------------------------------------

    def judge(self, inputs: dict, rng: random.Random) -> dict:
        valence = inputs["item"]["valence"]
        out = {}
        for turn in (4, 6):
            options = inputs["options"][str(turn)]
            scores = [fit_scores(text, valence) for text in options]
            best = max(range(3), key=lambda i: (scores[i][0] - scores[i][1] - scores[i][2], -i))
            # Actively wrong beats flat (SPEC §3 stage 5): active hits count double.
            worst = max((i for i in range(3) if i != best), key=lambda i: (2 * scores[i][1] + scores[i][2] - scores[i][0], -i))
            out[f"turn{turn}"] = {
                "best_resonant": best + 1,
                "most_dissonant": worst + 1,
                "reasoning": f"Option {best + 1} carries the {valence.lower()} scenario's fitting delivery; option {worst + 1} "
                             f"is the most actively wrong for it.",
            }
        return out

    def oracle(self, inputs: dict, rng: random.Random) -> dict:
        valence = inputs["valence"]
        out = {}
        for turn in (4, 6):
            first, second = inputs["options"][str(turn)]
            a, b = resonance(first, valence), resonance(second, valence)
            out[f"turn{turn}"] = "Option 1" if a > b or (a == b and rng.random() < 0.5) else "Option 2"
        return out
