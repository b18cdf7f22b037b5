"""Parsing and rule checks of every text stage's output (SPEC §3).

Each check returns a list of reasons (empty: the output passes). A stage
retries an item whose output fails, up to its bound, then rejects it with the
last reasons, so every rejection says why.
"""

from __future__ import annotations

import json
import re

from speecheq_dataset.taxonomy import VALENCES

SCENARIO_KEYS: tuple[str, ...] = (
    "title", "context", "description", "scenario_valence",
    "speaker1_name", "speaker1_role", "speaker1_gender", "speaker1_persona",
    "speaker2_name", "speaker2_role", "speaker2_gender",
    "speaker2_persona_1", "speaker2_persona_2", "speaker2_persona_3",
    "eq_skill_tested", "target_social_intent",
)  # fmt: skip
GENDERS = ("Female", "Male")
# The active failures of SPEC §3 stage 1; the dissonant tone families of stage 4 are the same six.
FAILURE_TYPES: tuple[str, ...] = (
    "toxic_optimist", "defensive_snappy", "condescending_explainer", "impatient_evader", "anxious_spiraler", "apathetic_wall",
)  # fmt: skip
INSTRUCTION_WORDS = (8, 15)
# Bland words (SPEC §3 stage 3) and the minimising ones that soften an instruction into nothing.
BANNED_WORDS: tuple[str, ...] = ("nice", "nicely", "polite", "politely", "mild", "mildly", "calm", "calmly", "pleasant", "neutral")
_BANNED = re.compile(r"\b(" + "|".join(BANNED_WORDS) + r")\b", re.IGNORECASE)
# A dialogue never talks about tone or psychology (SPEC §3 stage 2).
META_TALK = re.compile(r"\b(tone of voice|tones?|EQ|emotional intelligence|psycholog\w*|resonan\w*|dissonan\w*|persona|subscale)\b",
                       re.IGNORECASE)
TURN_WORDS = (2, 60)
SPEAKERS = {1: "speaker1", 2: "speaker2", 3: "speaker1", 4: "speaker2", 5: "speaker1", 6: "speaker2"}
CONTEXT_TONE_TURNS = (1, 2, 3, 5)
TEST_TURNS = (4, 6)


def parse_json_object(text: str | None) -> tuple[dict | None, str | None]:
    """(object, None) from a model's answer, tolerating a ```json fence or prose around one object; else (None, reason)."""
    if text is None or not text.strip():
        return None, "empty answer"
    candidate = text.strip()
    fence = re.search(r"```(?:json)?\s*(.*?)```", candidate, re.DOTALL)
    if fence:
        candidate = fence.group(1).strip()
    try:
        value = json.loads(candidate)
    except ValueError:
        start, end = candidate.find("{"), candidate.rfind("}")
        if start < 0 or end <= start:
            return None, "answer is not JSON"
        try:
            value = json.loads(candidate[start : end + 1])
        except ValueError as exc:
            return None, f"answer is not valid JSON ({exc.msg} at char {exc.pos})"
    if not isinstance(value, dict):
        return None, f"answer is JSON {type(value).__name__}, not an object"
    return value, None


def word_count(text: str) -> int:
    return len(re.findall(r"[A-Za-z0-9][A-Za-z0-9'’-]*", text))


def check_instruction(where: str, text) -> list[str]:
    """A TTS instruction: a string of 8-15 words without banned bland words."""
    if not isinstance(text, str) or not text.strip():
        return [f"{where}: instruction missing or not text"]
    reasons = []
    n = word_count(text)
    low, high = INSTRUCTION_WORDS
    if not low <= n <= high:
        reasons.append(f"{where}: instruction has {n} words, needs {low}-{high}: {text!r}")
    banned = sorted({m.lower() for m in _BANNED.findall(text)})
    if banned:
        reasons.append(f"{where}: banned bland word(s) {banned} in {text!r}")
    return reasons


def _text(value) -> bool:
    return isinstance(value, str) and bool(value.strip())


def check_scenario(output: dict, valence: str, eq_scale: str) -> list[str]:
    """Stage 1: every SPEC key as text, the requested valence and skill, two speakers, two different failure types."""
    reasons = [f"scenario: missing or empty {key!r}" for key in SCENARIO_KEYS if not _text(output.get(key))]
    if output.get("scenario_valence") not in (None, valence) and valence in VALENCES:
        reasons.append(f"scenario: scenario_valence {output.get('scenario_valence')!r}, requested {valence!r}")
    if _text(output.get("eq_skill_tested")) and output["eq_skill_tested"].strip().lower() != eq_scale.lower():
        reasons.append(f"scenario: eq_skill_tested {output['eq_skill_tested']!r}, requested {eq_scale!r}")
    for key in ("speaker1_gender", "speaker2_gender"):
        if _text(output.get(key)) and output[key] not in GENDERS:
            reasons.append(f"scenario: {key} {output[key]!r} is not one of {GENDERS}")
    if _text(output.get("speaker1_name")) and output.get("speaker1_name") == output.get("speaker2_name"):
        reasons.append(f"scenario: both speakers are called {output['speaker1_name']!r}")
    failures = output.get("speaker2_failure_types")
    if not (isinstance(failures, list) and len(failures) == 2 and all(f in FAILURE_TYPES for f in failures)):
        reasons.append(f"scenario: speaker2_failure_types must list two of {FAILURE_TYPES}, got {failures!r}")
    elif failures[0] == failures[1]:
        reasons.append(f"scenario: personas 2 and 3 must fail differently, both are {failures[0]!r}")
    if _text(output.get("speaker2_persona_2")) and output.get("speaker2_persona_2") == output.get("speaker2_persona_3"):
        reasons.append("scenario: speaker2_persona_2 and speaker2_persona_3 are the same text")
    return reasons


def check_dialogue(output: dict) -> list[str]:
    """Stage 2: six turns, sentence numbers 1..6, speakers alternating catalyst/subject, plain speech without meta talk."""
    turns = output.get("conversation")
    if not isinstance(turns, list):
        return ["dialogue: 'conversation' must be a list of turns"]
    reasons = []
    if len(turns) != 6:
        reasons.append(f"dialogue: {len(turns)} turns, needs exactly 6")
    for position, turn in enumerate(turns, start=1):
        if not isinstance(turn, dict):
            reasons.append(f"dialogue: turn {position} is not an object")
            continue
        number, speaker, text = turn.get("sentence_number"), turn.get("speaker"), turn.get("text")
        if number != position:
            reasons.append(f"dialogue: turn {position} has sentence_number {number!r}")
        if position in SPEAKERS and speaker != SPEAKERS[position]:
            reasons.append(f"dialogue: turn {position} is spoken by {speaker!r}, needs {SPEAKERS[position]!r}")
        if not _text(text):
            reasons.append(f"dialogue: turn {position} has no text")
            continue
        n = word_count(text)
        if not TURN_WORDS[0] <= n <= TURN_WORDS[1]:
            reasons.append(f"dialogue: turn {position} has {n} words, needs {TURN_WORDS[0]}-{TURN_WORDS[1]}")
        meta = META_TALK.search(text)
        if meta:
            reasons.append(f"dialogue: turn {position} talks about {meta.group(0)!r} (no tone or psychology talk)")
    return reasons


def check_context_tones(output: dict) -> list[str]:
    """Stage 3: one instruction each for turns 1, 2, 3 and 5 (8-15 words, no banned words)."""
    reasons = []
    for turn in CONTEXT_TONE_TURNS:
        reasons += check_instruction(f"tones turn {turn}", output.get(f"turn{turn}"))
    return reasons


def _test_turns(output: dict, where: str, reasons: list[str]):
    """(turn, entry) for each test turn whose entry is an object; a missing one adds its reason."""
    for turn in TEST_TURNS:
        entry = output.get(f"turn{turn}")
        if isinstance(entry, dict):
            yield turn, entry
        else:
            reasons.append(f"{where}: 'turn{turn}' missing or not an object")


def check_test_tones(output: dict, lines: dict[int, str]) -> list[str]:
    """Stage 4: per test turn, the line itself (identical for both candidates), a resonant and two different dissonant instructions."""
    reasons: list[str] = []
    for turn, entry in _test_turns(output, "test tones", reasons):
        if " ".join(str(entry.get("line", "")).split()) != " ".join(lines[turn].split()):
            reasons.append(f"test tones turn {turn}: candidate text {entry.get('line')!r} differs from the line {lines[turn]!r}")
        reasons += check_instruction(f"test tones turn {turn} resonant", entry.get("resonant"))
        dissonant = entry.get("dissonant")
        if not isinstance(dissonant, list) or len(dissonant) != 2 or not all(isinstance(d, dict) for d in dissonant):
            reasons.append(f"test tones turn {turn}: 'dissonant' must hold two objects with type and instruction")
            continue
        kinds = [d.get("type") for d in dissonant]
        unknown = [k for k in kinds if k not in FAILURE_TYPES]
        if unknown:
            reasons.append(f"test tones turn {turn}: unknown distractor type(s) {unknown}; known: {FAILURE_TYPES}")
        elif kinds[0] == kinds[1]:
            reasons.append(f"test tones turn {turn}: the two distractors must differ in type, both are {kinds[0]!r}")
        for index, d in enumerate(dissonant, start=1):
            reasons += check_instruction(f"test tones turn {turn} dissonant {index}", d.get("instruction"))
        texts = [entry.get("resonant")] + [d.get("instruction") for d in dissonant]
        if all(isinstance(t, str) for t in texts) and len({t.strip().lower() for t in texts}) < 3:
            reasons.append(f"test tones turn {turn}: the three instructions are not all different")
    return reasons


def check_filter(output: dict, shown: dict[int, list[str]]) -> list[str]:
    """Stage 5: per test turn, `best_resonant` and `most_dissonant` (1-3, different) with reasoning; the judge must find the resonant one.

    `shown[turn]` lists the roles of the instructions in the order the judge saw
    them ("resonant" once, "dissonant" twice).
    """
    reasons: list[str] = []
    for turn, entry in _test_turns(output, "filter", reasons):
        best, worst = entry.get("best_resonant"), entry.get("most_dissonant")
        if not all(isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= 3 for v in (best, worst)):
            reasons.append(f"filter turn {turn}: best_resonant and most_dissonant must be 1, 2 or 3, got {best!r}, {worst!r}")
            continue
        if best == worst:
            reasons.append(f"filter turn {turn}: the same instruction ({best}) is both best resonant and most dissonant")
            continue
        if not _text(entry.get("reasoning")):
            reasons.append(f"filter turn {turn}: no reasoning")
        if shown[turn][best - 1] != "resonant":
            reasons.append(f"filter turn {turn}: the judge took a dissonant instruction ({best}) for the resonant one: ambiguous tones")
        elif shown[turn][worst - 1] != "dissonant":
            reasons.append(f"filter turn {turn}: most_dissonant ({worst}) is not a dissonant instruction")
    return reasons


def check_oracle(output: dict) -> list[str]:
    """Oracle text check: a forced choice "Option 1" / "Option 2" per test turn."""
    reasons = []
    for turn in TEST_TURNS:
        if output.get(f"turn{turn}") not in ("Option 1", "Option 2"):
            reasons.append(f"oracle: turn{turn} must be 'Option 1' or 'Option 2', got {output.get(f'turn{turn}')!r}")
    return reasons
