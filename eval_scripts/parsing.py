"""Read the forced choice out of a model's raw answer, without ever guessing.

The rule set (the one place it is written down; docs/runner.md points here):

1. An option is named only by "Option 1", "option1", "option_1", "option-1",
   "1" or the JSON number 1 (same for 2), case and surrounding blanks or a
   final period aside. Only the ASCII digits 1 and 2 count: "١" or "１" name
   nothing.
2. The answer is read from every top-level JSON object in the text: inside
   Markdown code fences *and* outside them. Strict JSON first, then a
   Python-style literal (single quotes). Each `selected` key counts, up to
   case and blanks ("selected", "Selected", "selected "), duplicates included.
3. If every `selected` value names the same option, that is the answer
   (status "json"). Any disagreement (two keys, two objects, a fenced and an
   unfenced object) or any value that names no option makes the answer
   invalid: a conflict is never settled by position.
4. A `"selected": value` pair is also read from an object that is not valid
   JSON (an unescaped quote in the reasoning, or output cut off after the
   key), but only inside such an object's braces; the pair merely quoted in
   prose is not an answer. Status "recovered", same agreement rule.
5. An answer that is nothing but the option ("Option 1", "2", "**Option 2**")
   is accepted (status "bare"). Prose that mentions options is not an answer.
6. Anything else is invalid (status "invalid"; "empty" for no text), with a
   detail saying why. `parse_answer` returns for every string and never raises.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass

# "Option 1", "option1", "option_1", "OPTION-2", "1", "2" (after trimming); ASCII digits only.
_OPTION_VALUE = re.compile(r"^(?:option[\s_\-]*)?([12])$", re.IGNORECASE | re.ASCII)
# A whole answer that is only the option, optionally quoted or punctuated.
_BARE_ANSWER = re.compile(r"^[\s\"'`*(\[]*(?:option[\s_\-]*)?([12])[\s\"'`*)\].!]*$", re.IGNORECASE | re.ASCII)
# An explicit `"selected": ...` pair inside an object that is not valid JSON.
_SELECTED_PAIR = re.compile(
    r"""["']\s*selected\s*["']\s*:\s*(?:"([^"\n]*)"|'([^'\n]*)'|([0-9]{1,6})(?![0-9])|([^\s,}]+))""", re.IGNORECASE | re.ASCII
)
_FENCE = re.compile(r"```[a-zA-Z0-9_-]*\s*\n?(.*?)```", re.DOTALL)
MAX_ANSWER_CHARS = 200_000  # longer answers are scanned only up to here (a runaway generation is no answer)


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
    """Parse a raw answer by the module's rule set; returns for any input, never raises."""
    if text is None or (isinstance(text, str) and not text.strip()):
        return ParsedChoice(None, "empty", "no text")
    if not isinstance(text, str):
        return ParsedChoice(None, "invalid", f"answer is a {type(text).__name__}, not text")
    try:
        return _parse(text[:MAX_ANSWER_CHARS])
    except Exception as exc:  # the rules are meant never to raise; this makes it a guarantee
        return ParsedChoice(None, "invalid", f"unreadable answer ({type(exc).__name__})")


def _parse(text: str) -> ParsedChoice:
    decoded, undecodable = _scan_objects(text)
    values = [value for pairs in decoded for key, value in pairs if _is_selected_key(key)]
    recovered = [_pair_value(match) for span in undecodable for match in _SELECTED_PAIR.finditer(span)]
    if values or recovered:
        found = values + recovered
        choices = {option_value(v) for v in found}
        if len(choices) == 1 and None not in choices:
            return ParsedChoice(choices.pop(), "recovered" if recovered else "json")
        why = "conflicting" if len(choices - {None}) > 1 else "not an option"
        return ParsedChoice(None, "invalid", f"selected = {', '.join(_short(v) for v in found)} ({why})")
    bare = _BARE_ANSWER.match(text)
    if bare:
        return ParsedChoice(int(bare.group(1)), "bare")
    return ParsedChoice(None, "invalid", "no JSON object with a 'selected' key and no bare option")


def _is_selected_key(key: object) -> bool:
    return isinstance(key, str) and key.strip().lower() == "selected"


def _pair_value(match: re.Match) -> object:
    double, single, number, other = match.groups()
    if number is not None:
        return int(number)
    return next(v for v in (double, single, other) if v is not None)


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _scan_objects(text: str) -> tuple[list[list[tuple]], list[str]]:
    """(key/value pairs of each decodable top-level object, spans of the undecodable ones), fences and outside alike."""
    sources = [m.group(1) for m in _FENCE.finditer(text)]
    sources.append(_FENCE.sub("\n", text))  # the text outside every fence
    decoded, undecodable = [], []
    for source in sources:
        spans, tail = _balanced_objects(source)
        for span in spans:
            pairs = _decode_pairs(span)
            if pairs is None:
                undecodable.append(span)
            else:
                decoded.append(pairs)
        if tail:
            undecodable.append(tail)  # an object cut off before its closing brace
    return decoded, undecodable


def _decode_pairs(candidate: str) -> list[tuple] | None:
    """The top-level (key, value) pairs of an object, duplicates kept: strict JSON, then a Python literal; None if neither."""
    try:
        pairs = json.loads(candidate, object_pairs_hook=_Pairs)
    except (ValueError, RecursionError):
        pairs = _literal_pairs(candidate)
    return list(pairs) if isinstance(pairs, _Pairs) else None


class _Pairs(list):
    """A JSON object as its list of (key, value) pairs, so a repeated key is not lost to the last one."""


def _literal_pairs(candidate: str) -> _Pairs | None:
    try:
        node = ast.parse(candidate.strip(), mode="eval").body
        if not isinstance(node, ast.Dict) or any(key is None for key in node.keys):
            return None
        return _Pairs((ast.literal_eval(key), ast.literal_eval(value)) for key, value in zip(node.keys, node.values))
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None


def _balanced_objects(text: str) -> tuple[list[str], str]:
    """Top-level brace-balanced spans (braces in quoted strings skipped), and an unclosed last object's text."""
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
    return spans, (text[start:] if depth > 0 else "")


def _opens_single_quoted(text: str, i: int) -> bool:
    """True when the ' at i follows `{`, `,`, `:` or `[` (ignoring blanks): a Python string opener."""
    j = i - 1
    while j >= 0 and text[j].isspace():
        j -= 1
    return j >= 0 and text[j] in "{,:["
