"""Read the forced choice out of a model's raw answer, without ever guessing.

Accepted answers (SPEC §5): a JSON object with a `selected` key, with or without
Markdown code fences, followed or preceded by prose, in strict JSON or with
Python-style single quotes; or an answer that is nothing but the option itself
("Option 1", "option2", "1"). The value of `selected` must name exactly one
option: "Option 1", "option1", "option 1", "1" or the number 1 (same for 2).
Anything else ("Neither", "Option 1 or Option 2", two objects that disagree,
prose that merely mentions an option) is invalid, and the raw text is kept by
the caller.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass

# "Option 1", "option1", "option_1", "OPTION-2", "1", "2" (after trimming).
_OPTION_VALUE = re.compile(r"^(?:option[\s_\-]*)?([12])$", re.IGNORECASE)
# A whole answer that is only the option, optionally quoted or punctuated.
_BARE_ANSWER = re.compile(r"^[\s\"'`*(\[]*(?:option[\s_\-]*)?([12])[\s\"'`*)\].!]*$", re.IGNORECASE)
# An explicit `"selected": "..."` pair inside text that is not valid JSON
# (e.g. an unescaped quote in the reasoning, or output cut off after the key).
_SELECTED_PAIR = re.compile(r"""["']selected["']\s*:\s*(?:"([^"\n]*)"|'([^'\n]*)'|(\d+)\b)""", re.IGNORECASE)
_FENCE = re.compile(r"```[a-zA-Z0-9_-]*\s*\n?(.*?)```", re.DOTALL)


@dataclass(frozen=True)
class ParsedChoice:
    """A parse result: `choice` is 1, 2 or None; `status` says how it was read."""

    choice: int | None
    status: str  # "json", "recovered", "bare", "invalid", "empty"
    detail: str = ""  # why an answer is invalid

    @property
    def valid(self) -> bool:
        return self.choice is not None


def parse_choice(text: str | None) -> int | None:
    """Raw model text -> 1, 2, or None when the answer does not name exactly one option."""
    return parse_answer(text).choice


def option_value(value: object) -> int | None:
    """The option a `selected` value names (1 or 2), or None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value in (1, 2) else None
    if isinstance(value, str):
        match = _OPTION_VALUE.match(value.strip().strip(".").strip())
        return int(match.group(1)) if match else None
    return None


def parse_answer(text: str | None) -> ParsedChoice:
    """Parse a raw answer; see the module docstring for what is accepted."""
    if text is None or not text.strip():
        return ParsedChoice(None, "empty", "no text")
    objects = [obj for obj in _json_objects(text) if _selected_key(obj) is not None]
    if objects:
        values = [obj[_selected_key(obj)] for obj in objects]
        choices = {option_value(v) for v in values}
        if len(choices) == 1 and None not in choices:
            return ParsedChoice(choices.pop(), "json")
        return ParsedChoice(None, "invalid", f"selected = {', '.join(repr(v) for v in values)}")
    bare = _BARE_ANSWER.match(text)
    if bare:
        return ParsedChoice(int(bare.group(1)), "bare")
    pairs = _SELECTED_PAIR.findall(text)
    if pairs:
        raw_values = [next(v for v in pair if v) if any(pair) else "" for pair in pairs]
        choices = {option_value(int(v) if v.isdigit() else v) for v in raw_values}
        if len(choices) == 1 and None not in choices:
            return ParsedChoice(choices.pop(), "recovered")
        return ParsedChoice(None, "invalid", f"selected = {', '.join(repr(v) for v in raw_values)}")
    return ParsedChoice(None, "invalid", "no JSON object with a 'selected' key and no bare option")


def _selected_key(obj: dict) -> str | None:
    """The key of `obj` that is 'selected' up to case and surrounding blanks."""
    for key in obj:
        if isinstance(key, str) and key.strip().lower() == "selected":
            return key
    return None


def _json_objects(text: str) -> list[dict]:
    """Every top-level {...} in the text (fenced blocks first) that decodes to a dict."""
    sources = [m.group(1) for m in _FENCE.finditer(text)] or [text]
    found: list[dict] = []
    for source in sources:
        for candidate in _balanced_objects(source):
            obj = _decode_object(candidate)
            if obj is not None:
                found.append(obj)
    return found


def _decode_object(candidate: str) -> dict | None:
    """Strict JSON first, then a Python literal (single quotes); None when neither is a dict."""
    try:
        obj = json.loads(candidate)
    except ValueError:
        try:
            obj = ast.literal_eval(candidate)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return None
    return obj if isinstance(obj, dict) else None


def _balanced_objects(text: str) -> list[str]:
    """Top-level brace-balanced spans, skipping braces inside quoted strings."""
    spans: list[str] = []
    depth = 0
    start = -1
    quote: str | None = None
    escaped = False
    for i, ch in enumerate(text):
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = None
            continue
        if ch in "\"'" and depth > 0:
            # An apostrophe inside prose ("don't") is not a string opener at depth 0;
            # inside an object we only treat it as one right after a structural char.
            if ch == "'" and not _opens_single_quoted(text, i):
                continue
            quote = ch
        elif ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}" and depth > 0:
            depth -= 1
            if depth == 0:
                spans.append(text[start : i + 1])
    return spans


def _opens_single_quoted(text: str, i: int) -> bool:
    """True when the ' at i follows `{`, `,`, `:` or `[` (ignoring blanks): a Python string opener."""
    j = i - 1
    while j >= 0 and text[j].isspace():
        j -= 1
    return j >= 0 and text[j] in "{,:["
