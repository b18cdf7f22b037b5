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
def test_json_answer_survives_surrounding_prose(choice, form, before, after, reasoning):
    answer = json.dumps({"reasoning": reasoning, "selected": form.format(choice)})
    assert parse_choice(f"{before}\n{answer}\n{after}") == choice
