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

The other readers here apply rules 2-4 and 6 unchanged to another key (every
such key in every top-level object, fenced or not, counts; all must agree; a
pair is recovered only inside a broken object's braces), with their own value
rule, and never raise:

7. `parse_judge_score` (a judge's rating, key `score`): the value is a whole
   number on the scale (1-5 by default): a JSON integer, an integral JSON
   number (4.0), or a string holding only such ASCII digits. "4/5", "four",
   3.5 or 6 name no score. The judge must also give a reason: a non-empty
   `reason` string (the first one found); without it the answer is invalid.
   There are no bare answers: a lone number in prose is not a rating. An
   invalid rating is *missing*: it is counted and reported, never scored.
8. `parse_label` (a decision from a fixed list, e.g. the stop judge's
   `decision`): the value is one of the labels, up to case and blanks.
   `parse_text_value` reads a free-text field the same way (e.g. the
   simulated user's `line`): every value must be the same non-empty text.
9. `parse_option_set` (the utterance tasks' lettered options, key
   `selected`): the value is a letter (A, B, ...; "Option B" too), a list of
   letters, or a string of letters separated by commas or blanks; every
   letter must name an offered option. With `single=True` exactly one letter
   is an answer. An answer that is nothing but letters ("B", "A, C") is
   accepted as bare, as in rule 5.
"""

from __future__ import annotations

import ast
import functools
import json
import re
from dataclasses import dataclass

# "Option 1", "option1", "option_1", "OPTION-2", "1", "2" (after trimming); ASCII digits only.
_OPTION_VALUE = re.compile(r"^(?:option[\s_\-]*)?([12])$", re.IGNORECASE | re.ASCII)
# A whole answer that is only the option, optionally quoted or punctuated.
_BARE_ANSWER = re.compile(r"^[\s\"'`*(\[]*(?:option[\s_\-]*)?([12])[\s\"'`*)\].!]*$", re.IGNORECASE | re.ASCII)
# An explicit `"<key>": value` pair inside an object that is not valid JSON: a quoted string, a list, a number, or a bare word.
_PAIR_VALUE = r"""\s*["']\s*:\s*(?:"([^"\n]*)"|'([^'\n]*)'|\[([^\]\n]*)\]|(-?[0-9]{1,6}(?:\.[0-9]{1,6})?)(?![0-9.])|([^\s,}]+))"""
_SELECTED_PAIR = re.compile(r"""["']\s*selected""" + _PAIR_VALUE, re.IGNORECASE | re.ASCII)
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
    values, recovered = _key_values(text, "selected")
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


def _key_values(text: str, key: str) -> tuple[list, list]:
    """(values of `key` in every decodable top-level object, values recovered from broken objects' `key` pairs), rules 2 and 4."""
    decoded, undecodable = _scan_objects(text)
    values = [value for pairs in decoded for name, value in pairs if _is_key(name, key)]
    pattern = _SELECTED_PAIR if key == "selected" else _pair_pattern(key)
    recovered = [_pair_value(match) for span in undecodable for match in pattern.finditer(span)]
    return values, recovered


@functools.lru_cache(maxsize=16)
def _pair_pattern(key: str) -> re.Pattern:
    return re.compile(r"""["']\s*""" + re.escape(key) + _PAIR_VALUE, re.IGNORECASE | re.ASCII)


def _is_key(name: object, key: str) -> bool:
    return isinstance(name, str) and name.strip().lower() == key


def _pair_value(match: re.Match) -> object:
    double, single, listed, number, other = match.groups()
    if number is not None:
        return float(number) if "." in number else int(number)
    if listed is not None:
        return [item.strip().strip("\"'") for item in listed.split(",") if item.strip()]
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


# ---------------------------------------------------------------- judges and lettered options (rules 7-9)


def _framed(text: object, missing, read):
    """The frame every reader below shares: no text is "empty", a non-string "invalid", and `read` never lets an error out.

    `missing(status, detail)` builds the reader's no-answer result; `read(text)` reads a string, cut at MAX_ANSWER_CHARS.
    """
    if text is None or (isinstance(text, str) and not text.strip()):
        return missing("empty", "no text")
    if not isinstance(text, str):
        return missing("invalid", f"answer is a {type(text).__name__}, not text")
    try:
        return read(text[:MAX_ANSWER_CHARS])
    except Exception as exc:  # the rules are meant never to raise; this makes it a guarantee
        return missing("invalid", f"unreadable answer ({type(exc).__name__})")


def _agreed(found: list, value_of, what: str, key: str) -> tuple[object, str | None]:
    """(the one value every occurrence names, None) or (None, why not): a conflict or a value naming nothing (rule 3)."""
    named = {value_of(v) for v in found}
    if len(named) == 1 and None not in named:
        return named.pop(), None
    why = "conflicting" if len(named - {None}) > 1 else what
    return None, f"{key} = {', '.join(_short(v) for v in found)} ({why})"


@dataclass(frozen=True)
class ParsedScore:
    """A judge's rating: `score` on the scale or None (missing), its reason, and how it was read."""

    score: int | None
    reason: str | None
    status: str  # "json", "recovered", "invalid", "empty"
    detail: str = ""

    @property
    def valid(self) -> bool:
        return self.score is not None


def score_value(value: object, scale: tuple[int, int]) -> int | None:
    """The whole number on `scale` that a `score` value names, or None (rule 7)."""
    low, high = scale
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, str) and re.fullmatch(r"\s*[0-9]{1,3}\s*", value, re.ASCII):
        value = int(value)
    return value if isinstance(value, int) and low <= value <= high else None


def parse_judge_score(text: str | None, *, scale: tuple[int, int] = (1, 5), key: str = "score", reason_key: str = "reason") -> ParsedScore:
    """A judge's rating and reason by rule 7; returns for any input, never raises."""

    def read(text: str) -> ParsedScore:
        values, recovered = _key_values(text, key)
        if not values and not recovered:
            return ParsedScore(None, None, "invalid", f"no JSON object with a {key!r} key")
        score, why = _agreed(values + recovered, lambda v: score_value(v, scale), f"not a whole number in {scale[0]}-{scale[1]}", key)
        if why:
            return ParsedScore(None, None, "invalid", why)
        reasons = [r.strip() for r in sum(_key_values(text, reason_key), []) if isinstance(r, str) and r.strip()]
        if not reasons:
            return ParsedScore(None, None, "invalid", f"{key} without a {reason_key!r} (the judge must give one)")
        return ParsedScore(score, reasons[0], "recovered" if recovered else "json")

    return _framed(text, lambda status, detail: ParsedScore(None, None, status, detail), read)


@dataclass(frozen=True)
class ParsedLabel:
    """A decision from a fixed list, or a free text (`label` None when there is none), and how it was read."""

    label: str | None
    status: str  # "json", "recovered", "invalid", "empty"
    detail: str = ""


def _read_value(text: object, key: str, value_of, what: str) -> ParsedLabel:
    def read(text: str) -> ParsedLabel:
        values, recovered = _key_values(text, key)
        if not values and not recovered:
            return ParsedLabel(None, "invalid", f"no JSON object with a {key!r} key")
        value, why = _agreed(values + recovered, value_of, what, key)
        return ParsedLabel(None, "invalid", why) if why else ParsedLabel(value, "recovered" if recovered else "json")

    return _framed(text, lambda status, detail: ParsedLabel(None, status, detail), read)


def parse_label(text: str | None, key: str, labels: tuple[str, ...]) -> ParsedLabel:
    """The label `key` names, one of `labels` up to case and blanks (rule 8); never raises."""
    known = {label.lower(): label for label in labels}
    return _read_value(text, key, lambda v: known.get(v.strip().lower()) if isinstance(v, str) else None, f"not one of {', '.join(labels)}")


def parse_text_value(text: str | None, key: str) -> ParsedLabel:
    """The non-empty text `key` holds, every occurrence agreeing (rule 8's reading for free text); never raises."""
    return _read_value(text, key, lambda v: v.strip() if isinstance(v, str) and v.strip() else None, "not non-empty text")


@dataclass(frozen=True)
class ParsedOptions:
    """Lettered options chosen (0-based indices, sorted) or None, and how they were read."""

    options: tuple[int, ...] | None
    status: str  # "json", "recovered", "bare", "invalid", "empty"
    detail: str = ""

    @property
    def valid(self) -> bool:
        return self.options is not None


_LETTER = re.compile(r"^(?:option[\s_\-]*)?([A-Z])$", re.IGNORECASE | re.ASCII)
_LETTER_SEPARATORS = re.compile(r"[,;\s]+(?:and\s+)?", re.IGNORECASE)
_OPTION_WORD = re.compile(r"\boption[\s_\-]*(?=[A-Z]\b)", re.IGNORECASE | re.ASCII)
# Letters each standing alone (a separator between any two), so "I think A" is not the letters I, t, h, ...
_BARE_LETTERS = re.compile(r"^[\s\"'`*(\[]*((?:option[\s_\-]*)?[A-Z](?:(?:\s*[,;]\s*|\s+)(?:and\s+)?(?:option[\s_\-]*)?[A-Z])*)"
                           r"[\s\"'`*)\].!]*$", re.IGNORECASE | re.ASCII)


def option_letters(value: object, n_options: int) -> tuple[int, ...] | None:
    """The 0-based options a `selected` value names (rule 9), or None when any item names none."""
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    if not items:
        return None
    chosen = set()
    for item in items:
        if not isinstance(item, str):
            return None
        for word in [w for w in _LETTER_SEPARATORS.split(_OPTION_WORD.sub("", item).strip().strip(".")) if w] or [""]:
            match = _LETTER.match(word)
            if match is None:
                return None
            index = ord(match.group(1).upper()) - ord("A")
            if index >= n_options:
                return None
            chosen.add(index)
    return tuple(sorted(chosen)) if chosen else None


def parse_option_set(text: str | None, n_options: int, *, single: bool = False) -> ParsedOptions:
    """The lettered options an answer selects by rule 9 (`single`: exactly one); never raises."""

    def read(text: str) -> ParsedOptions:
        values, recovered = _key_values(text, "selected")
        found, status = values + recovered, "recovered" if recovered else "json"
        if not found:
            bare = _BARE_LETTERS.match(text)
            if not bare:
                return ParsedOptions(None, "invalid", "no JSON object with a 'selected' key and no bare letters")
            found, status = [bare.group(1)], "bare"
        letters = ", ".join(chr(ord("A") + k) for k in range(n_options))
        chosen, why = _agreed(found, lambda v: option_letters(v, n_options), f"not among the options {letters}", "selected")
        if why:
            return ParsedOptions(None, "invalid", why)
        if single and len(chosen) != 1:
            return ParsedOptions(None, "invalid", f"{len(chosen)} options selected where one is asked")
        return ParsedOptions(chosen, status)

    return _framed(text, lambda status, detail: ParsedOptions(None, status, detail), read)
