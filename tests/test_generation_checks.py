"""Rule checks of the text stages: each crafted bad output is rejected with its reason; bounded retries with feedback."""

from __future__ import annotations

import copy
import json

import pytest

from builders.generation import checks
from builders.generation.llm import TextRequest
from builders.generation.matrix import plan_items
from builders.generation.scripted import ScriptedBackend
from builders.generation.stages import Asker
from builders.generation.stages import run_text_stage
from builders.generation.store import StageStore
from generation_helpers import AnswersBackend
from speecheq_dataset.taxonomy import subscale

ITEM = next(i for i in plan_items(1, 0, subscales=("interpersonal_empathy",)) if i.valence == "Negative")
EQ_SCALE = subscale(ITEM.subscale).eq_scale


def _scripted(stage: str, **inputs) -> dict:
    reply = ScriptedBackend().complete(TextRequest(stage, [], {"item": ITEM.as_dict(), **inputs}, seed=1))
    return json.loads(reply.text)


@pytest.fixture(scope="module")
def good():
    scenario = _scripted("scenario")
    dialogue = _scripted("dialogue", scenario=scenario)
    test = _scripted("tones_test", scenario=scenario, conversation=dialogue["conversation"])
    context = _scripted("tones_context", scenario=scenario, conversation=dialogue["conversation"])
    return {"scenario": scenario, "dialogue": dialogue, "test": test, "context": context,
            "lines": {t["sentence_number"]: t["text"] for t in dialogue["conversation"]}}


def test_the_scripted_answers_pass_every_check(good):
    assert checks.check_scenario(good["scenario"], "Negative", EQ_SCALE) == []
    assert checks.check_dialogue(good["dialogue"]) == []
    assert checks.check_context_tones(good["context"]) == []
    assert checks.check_test_tones(good["test"], good["lines"]) == []


def _mutate(value: dict, path: tuple, new) -> dict:
    out = copy.deepcopy(value)
    target = out
    for key in path[:-1]:
        target = target[key]
    if new is KeyError:
        del target[path[-1]]
    else:
        target[path[-1]] = new
    return out


SCENARIO_CASES = [
    (("title",), KeyError, "missing or empty 'title'"),
    (("scenario_valence",), "Positive", "scenario_valence 'Positive', requested 'Negative'"),
    (("eq_skill_tested",), "Interpersonal - Social Responsibility", "eq_skill_tested"),
    (("speaker1_gender",), "Robot", "speaker1_gender 'Robot' is not one of"),
    (("speaker2_failure_types",), ["toxic_optimist", "toxic_optimist"], "must fail differently"),
    (("speaker2_failure_types",), ["toxic_optimist", "grumpy"], "must list two of"),
]


@pytest.mark.parametrize("path, value, reason", SCENARIO_CASES)
def test_scenario_check_rejects_with_its_reason(good, path, value, reason):
    assert any(reason in r for r in checks.check_scenario(_mutate(good["scenario"], path, value), "Negative", EQ_SCALE))


DIALOGUE_CASES = [
    (lambda d: d["conversation"].pop(), "5 turns, needs exactly 6"),
    (lambda d: d["conversation"][3].update(speaker="speaker1"), "turn 4 is spoken by 'speaker1', needs 'speaker2'"),
    (lambda d: d["conversation"][2].update(sentence_number=7), "turn 3 has sentence_number 7"),
    (lambda d: d["conversation"][4].update(text="Say it in a softer tone, please."), "talks about 'tone'"),
    (lambda d: d["conversation"][1].update(text=""), "turn 2 has no text"),
]


@pytest.mark.parametrize("damage, reason", DIALOGUE_CASES)
def test_dialogue_check_rejects_with_its_reason(good, damage, reason):
    bad = copy.deepcopy(good["dialogue"])
    damage(bad)
    assert any(reason in r for r in checks.check_dialogue(bad)), checks.check_dialogue(bad)


TONE_CASES = [
    (("turn4", "line"), "Completely different words.", "candidate text 'Completely different words.' differs from the line"),
    (("turn4", "resonant"), "Warm voice.", "instruction has 2 words, needs 8-15"),
    (("turn6", "resonant"), "Warm and " + "very " * 14 + "slow.", "instruction has 17 words"),
    (("turn4", "resonant"), "A nice, gentle voice, steady pace, staying close and present.", "banned bland word(s) ['nice']"),
    (("turn6", "dissonant", 1, "type"), None, "unknown distractor type(s) [None]"),
]


@pytest.mark.parametrize("path, value, reason", TONE_CASES)
def test_test_tone_check_rejects_with_its_reason(good, path, value, reason):
    reasons = checks.check_test_tones(_mutate(good["test"], path, value), good["lines"])
    assert any(reason in r for r in reasons), reasons


def test_two_distractors_of_one_type_are_rejected(good):
    bad = copy.deepcopy(good["test"])
    bad["turn4"]["dissonant"][1]["type"] = bad["turn4"]["dissonant"][0]["type"]
    assert any("the two distractors must differ in type" in r for r in checks.check_test_tones(bad, good["lines"]))


def test_context_tones_need_all_four_turns_without_bland_words(good):
    reasons = checks.check_context_tones(_mutate(good["context"], ("turn3",), "Calm, polite and mild, at an easy pace, friendly."))
    assert any("banned bland word(s) ['calm', 'mild', 'polite']" in r for r in reasons)
    assert any("tones turn 5: instruction missing" in r for r in checks.check_context_tones(_mutate(good["context"], ("turn5",), KeyError)))


SHOWN = {4: ["dissonant", "resonant", "dissonant"], 6: ["resonant", "dissonant", "dissonant"]}


@pytest.mark.parametrize("verdict, reason", [
    ({"turn4": {"best_resonant": 1, "most_dissonant": 3, "reasoning": "x"}}, "took a dissonant instruction (1) for the resonant one"),
    ({"turn4": {"best_resonant": 2, "most_dissonant": 2, "reasoning": "x"}}, "is both best resonant and most dissonant"),
    ({"turn4": {"best_resonant": 2, "most_dissonant": 4, "reasoning": "x"}}, "must be 1, 2 or 3"),
    ({"turn4": {"best_resonant": 2, "most_dissonant": 1, "reasoning": ""}}, "no reasoning"),
])
def test_filter_check_rejects_a_judge_that_cannot_tell(verdict, reason):
    full = {"turn6": {"best_resonant": 1, "most_dissonant": 2, "reasoning": "fine"}, **verdict}
    assert any(reason in r for r in checks.check_filter(full, SHOWN))
    assert checks.check_filter({"turn4": {"best_resonant": 2, "most_dissonant": 3, "reasoning": "ok"}, "turn6": full["turn6"]}, SHOWN) == []


@pytest.mark.parametrize("text, expected", [
    ('{"a": 1}', {"a": 1}),
    ('```json\n{"a": 1}\n```', {"a": 1}),
    ('Sure! Here it is: {"a": {"b": 2}} Hope it helps.', {"a": {"b": 2}}),
])
def test_json_answers_are_parsed_from_fences_and_prose(text, expected):
    assert checks.parse_json_object(text) == (expected, None)


@pytest.mark.parametrize("text, reason", [("", "empty answer"), ("no json here", "not JSON"), ("[1, 2]", "JSON list, not an object"),
                                          ('{"a": 1,}', "not valid JSON")])
def test_malformed_answers_name_the_fault(text, reason):
    value, problem = checks.parse_json_object(text)
    assert value is None and reason in problem


def test_a_failed_check_is_retried_with_feedback_then_accepted(good):
    bad = json.dumps(_mutate(good["scenario"], ("speaker2_failure_types",), ["toxic_optimist", "toxic_optimist"]))
    backend = AnswersBackend("not json at all", bad, json.dumps(good["scenario"]))
    ask = Asker(backend, ITEM, max_attempts=3)
    answer = ask("scenario", {"eq_scale": EQ_SCALE, "skill_hint": "-", "valence": "Negative", "valence_hint": "-", "scenario_type": "x"}, {},
                 lambda out: checks.check_scenario(out, "Negative", EQ_SCALE))
    assert answer == good["scenario"] and ask.attempts == {"scenario": 3}
    retry = backend.requests[2].messages
    assert retry[-1]["role"] == "user" and "must fail differently" in retry[-1]["content"]  # told why
    assert backend.requests[1].messages[-1]["content"].startswith("Your answer failed these checks:\n- scenario: answer is not JSON")


def test_an_item_that_keeps_failing_is_rejected_with_its_reasons_and_a_backend_error_is_retried_later(tmp_path):
    items = [ITEM]
    stats = run_text_stage("scenario", items, tmp_path, AnswersBackend('{"title": "only this"}'), max_attempts=2, progress=False)
    record = StageStore(tmp_path, "scenario").load()[ITEM.item_id]
    assert (stats.rejected, record["status"], record["attempts"]) == (1, "rejected", {"scenario": 2})
    assert any("missing or empty 'context'" in r for r in record["reasons"])
    # rejected is finished: a re-run does not ask again
    again = AnswersBackend('{"title": "x"}')
    assert run_text_stage("scenario", items, tmp_path, again, progress=False).skipped == 1 and again.requests == []
    # a backend failure is recorded as failed, and a re-run redoes it
    other = tmp_path / "other"
    run_text_stage("scenario", items, other, AnswersBackend(None), progress=False)
    assert StageStore(other, "scenario").load()[ITEM.item_id]["status"] == "failed"
    run_text_stage("scenario", items, other, ScriptedBackend(), progress=False)
    assert StageStore(other, "scenario").load()[ITEM.item_id]["status"] == "ok"
