"""parse_choice: the answer forms SPEC §5 models produce, and never a guess."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from eval_scripts.parsing import parse_answer
from eval_scripts.parsing import parse_choice

ACCEPTED = [
    ('{"selected": "Option 1"}', 1),
    ('{"selected": "Option 2"}', 2),
    ('{"selected": "option1"}', 1),
    ('{"selected": "option_2"}', 2),
    ('{"selected": "OPTION 2"}', 2),
    ('{"selected": "1"}', 1),
    ('{"selected": 2}', 2),
    ('{"Selected": "Option 1."}', 1),
    ("{'selected': 'Option 2'}", 2),  # Python-style single quotes
    ("{'reasoning': \"it's calmer\", 'selected': 'option1'}", 1),
    ('```json\n{"reasoning": "warm", "selected": "Option 2"}\n```', 2),  # code fence
    ('```\n{"selected": "Option 1"}\n```\nI hope this helps.', 1),  # fence + trailing prose
    ('Here is my answer: {"acoustic_profile_1": "fast {tense}", "selected": "Option 1"} Thanks!', 1),  # braces in strings
    ('{"selected": "Option 2"}\n\nOption 1 was too loud.', 2),  # prose mentioning the other option
    ("Option 1", 1),
    ("option2", 2),
    ("1", 1),
    ('"2"', 2),
    ("**Option 2**", 2),
    ("Option 1.", 1),
    ('{"reasoning": "he said "stop" loudly", "selected": "Option 2"}', 2),  # broken JSON, explicit key
]

INVALID = [
    "",
    "   ",
    None,
    '{"selected": "Neither"}',
    '{"selected": "Option 1 or Option 2"}',  # the authors' unparsed case
    '{"selected": "Option 3"}',
    '{"selected": ""}',
    '{"selected": null}',
    '{"selected": true}',
    '{"reasoning": "Option 1 is better"}',  # no selected key
    "I think Option 1 is better.",  # prose is not an answer
    "Option 1 or Option 2",
    "12",
    '{"selected": "Option 1"} {"selected": "Option 2"}',  # contradicting objects
    '```json\n{"selected": "1"}\n```\n```json\n{"selected": "2"}\n```',
    "The answer is 2 because option 1 is loud",
]


@pytest.mark.parametrize("text, expected", ACCEPTED)
def test_accepted_answer_forms(text, expected):
    assert parse_choice(text) == expected


@pytest.mark.parametrize("text", INVALID)
def test_invalid_answers_are_never_guessed(text):
    parsed = parse_answer(text)
    assert parsed.choice is None
    assert parsed.status in ("invalid", "empty")


def _authors_items(model_responses_dir):
    """(model file, raw_response, authors' selected_option) for every recorded run with raw text."""
    items = []
    for path in sorted(model_responses_dir.glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        for response in data["responses"]:
            for sentence in ("sentence_4", "sentence_6"):
                for run in response[sentence]["individual_results"]:
                    if run.get("raw_response") is not None:
                        items.append((path.name, run["raw_response"], run["selected_option"]))
    return items


def test_parser_agrees_with_the_authors_on_every_real_output(model_responses_dir):
    items = _authors_items(model_responses_dir)
    assert len(items) >= 150  # gpt-audio-1.5 and Qwen2.5-Omni-7B: 90 runs each
    parsed_by_authors = {"option1": 1, "option2": 2}
    disagreements = []
    unparsed = 0
    for name, raw, selected in items:
        ours = parse_choice(raw)
        if selected in parsed_by_authors:
            if ours != parsed_by_authors[selected]:
                disagreements.append((name, selected, ours, raw[-120:]))
        else:
            # The authors record an unparsed answer as "error"; we must not invent a choice for it either.
            assert selected == "error", f"unexpected authors' label {selected!r}"
            unparsed += 1
            assert ours is None, f"{name}: authors could not parse, we guessed {ours}: {raw[-200:]!r}"
    assert not disagreements, disagreements[:3]
    assert unparsed == 2  # Qwen2.5-Omni answered "Neither" and "Option 1 or Option 2" once each


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_characters="12"), max_size=200))
def test_text_without_an_option_digit_never_yields_a_choice(text):
    assert parse_choice(text) is None


@settings(max_examples=200, deadline=None)
@given(
    choice=st.sampled_from([1, 2]),
    form=st.sampled_from(["Option {}", "option{}", "{}", "OPTION {}"]),
    before=st.text(alphabet=st.characters(blacklist_characters="{}'\"`12"), max_size=60),
    after=st.text(alphabet=st.characters(blacklist_characters="{}'\"`12"), max_size=60),
    reasoning=st.text(max_size=80),
)
@pytest.mark.slow
def test_json_answer_survives_surrounding_prose(choice, form, before, after, reasoning):
    answer = json.dumps({"reasoning": reasoning, "selected": form.format(choice)})
    assert parse_choice(f"{before}\n{answer}\n{after}") == choice


# Issue 8, items 4 and 9-13: inputs that used to raise or to be guessed.
NEVER_RAISE = [
    '{{"selected": "Option 1"}}',  # TypeError from ast.literal_eval (a dict inside a set)
    "{{}}",
    "{[]: 1}",
    '{"selected": ' + "[" * 2000 + "]" * 2000 + "}",  # RecursionError in the JSON decoder
    '{"a": ' + "{" * 2000 + "}" * 2000 + "}",
    '{"selected": 1' + "7" * 5000 + "}",  # more digits than int() converts
    '"selected": 1' + "7" * 5000,
    "{" * 5000,
    "\x00{\ud800}",
]


@pytest.mark.parametrize("text", NEVER_RAISE)
def test_hostile_answers_return_instead_of_raising(text):
    from eval_scripts.parsing import _parse

    parsed = _parse(text)  # the rules themselves, not parse_answer's safety net
    assert parsed.choice in (1, 2, None) and parsed.status in ("json", "recovered", "bare", "invalid", "empty")


AMBIGUOUS = [
    ('{"selected": "Option 1", "selected": "Option 2"}', "conflicting"),  # 8.9: the last duplicate used to win
    ('{"selected": "Option 1", "SELECTED": "Option 2"}', "conflicting"),  # 8.10: the first spelling used to win
    ('{"selected": "Option 1", "selected ": "Option 2"}', "conflicting"),
    ('```json\n{"selected": "Option 1"}\n```\nActually, on reflection: {"selected": "Option 2"}', "conflicting"),  # 8.11
    ('If I answered "selected": "Option 1" that would be wrong. I choose Option 2.', "no JSON object"),  # 8.12
    ('{"selected": ١}', "not an option"),  # 8.13: non-ASCII digits name nothing, quoted or not
    ('{"selected": "١"}', "not an option"),
    ('{"selected": "１"}', "not an option"),
    ("{'selected': '٢'}", "not an option"),
    ('{"reasoning": "cut off "here", "selected": ٢', "not an option"),
]


@pytest.mark.parametrize("text, why", AMBIGUOUS)
def test_ambiguous_answers_are_never_guessed_and_say_why(text, why):
    parsed = parse_answer(text)
    assert parsed.choice is None and parsed.status == "invalid"
    assert why in parsed.detail


@pytest.mark.parametrize("text, expected", [
    ('{"selected": "Option 2", "SELECTED": "option2"}', 2),  # repeated keys that agree are no conflict
    ('```json\n{"selected": "Option 1"}\n```\nSo: {"selected": "1"}', 1),  # a fenced and an unfenced object that agree
    ('{"reasoning": "the "firm" one", "selected": "Option 1"', 1),  # cut off before the closing brace
])
def test_agreeing_or_cut_off_answers_are_still_read(text, expected):
    assert parse_choice(text) == expected


@settings(max_examples=500, deadline=None)
@given(st.text(max_size=300) | st.text(alphabet='{}[]"\':,12 selectedOption\\`\n', max_size=300))
@pytest.mark.slow
def test_any_text_parses_to_one_two_or_none_without_raising(text):
    from eval_scripts.parsing import ParsedChoice
    from eval_scripts.parsing import _parse

    parsed = _parse(text) if text.strip() else parse_answer(text)  # the rules themselves, not the safety net
    assert isinstance(parsed, ParsedChoice) and parsed.choice in (1, 2, None)


# ---------------------------------------------------------------- judge ratings, labels and lettered options (rules 7-9)

from eval_scripts.parsing import parse_judge_score  # noqa: E402
from eval_scripts.parsing import parse_label  # noqa: E402
from eval_scripts.parsing import parse_option_set  # noqa: E402


@pytest.mark.parametrize("text, score, reason, status", [
    ('{"score": 4, "reason": "warm and calm"}', 4, "warm and calm", "json"),
    ('```json\n{"score": "2", "reason": "too cheerful"}\n```', 2, "too cheerful", "json"),
    ('{"Score ": 5.0, "Reason": "fits"}', 5, "fits", "json"),
    ('Here: {"score": 3, "reason": "said "fine" flatly"}', 3, "said", "recovered"),
    ('{"score": 1, "reason": "shouts"} and again {"score": 1, "reason": "still"}', 1, "shouts", "json"),
])
def test_judge_scores_that_are_read(text, score, reason, status):
    parsed = parse_judge_score(text)
    assert (parsed.score, parsed.reason, parsed.status) == (score, reason, status)


@pytest.mark.parametrize("text, why", [
    ('{"score": 4}', "without a 'reason'"),
    ('{"score": 4, "reason": "  "}', "without a 'reason'"),
    ('{"score": 3.5, "reason": "x"}', "not a whole number in 1-5"),
    ('{"score": 6, "reason": "x"}', "not a whole number in 1-5"),
    ('{"score": "4/5", "reason": "x"}', "not a whole number"),
    ('{"score": "٤", "reason": "x"}', "not a whole number"),
    ('{"score": true, "reason": "x"}', "not a whole number"),
    ('```json\n{"score": 4, "reason": "a"}\n``` but {"score": 2, "reason": "b"}', "conflicting"),
    ("I would give it a 4 out of 5.", "no JSON object with a 'score' key"),
    ("4", "no JSON object"),
    ("", "no text"),
])
def test_judge_answers_that_are_missing_never_scores(text, why):
    parsed = parse_judge_score(text)
    assert parsed.score is None and not parsed.valid and why in parsed.detail


@given(st.text(max_size=300))
@settings(max_examples=300)
def test_any_judge_text_gives_a_score_on_the_scale_or_none(text):
    parsed = parse_judge_score(text)
    assert parsed.score is None or (1 <= parsed.score <= 5 and parsed.reason)


@pytest.mark.parametrize("text, label", [
    ('{"decision": "Relief"}', "relief"), ('{"decision": " user_ends "}', "user_ends"), ('{"decision": "maybe"}', None),
    ('{"decision": "continue"} {"decision": "stagnation"}', None), ("continue", None), ('{"decision": "stagnation", "why": "x', "stagnation"),
])
def test_labels_come_from_the_fixed_list_only(text, label):
    assert parse_label(text, "decision", ("continue", "user_ends", "relief", "stagnation")).label == label


@pytest.mark.parametrize("text, options, single", [
    ('{"selected": ["A", "C"]}', (0, 2), None), ('{"selected": "A, C"}', (0, 2), None), ("A and C", (0, 2), None),
    ("**Option B**", (1,), (1,)), ("b.", (1,), (1,)), ('{"selected": "Option A and option C"}', (0, 2), None),
    ('{"selected": ["C", "A", "C"]}', (0, 2), None),
    ('{"selected": ["E"]}', None, None), ('{"selected": []}', None, None), ("I think A", None, None), ("AB", None, None),
    ('{"selected": "B"} {"selected": "C"}', None, None), ('{"selected": 2}', None, None),
])
def test_lettered_options(text, options, single):
    assert parse_option_set(text, 4).options == options
    assert parse_option_set(text, 4, single=True).options == single
