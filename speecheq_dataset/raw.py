"""Read and validate the authors' raw generator output (SPEC §2.1), one dialogue folder at a time.

Layout: `<subscale_slug>/<dataset_id>/metadata.json` + `audio/01..08.<ext>`.
Clips are located by folder and index, never by the metadata's `audio_path`
(an absolute path of the authors' machine in v2). Every fault raises a
`RawDialogueError` whose message names the folder, the fault code and the bad value;
values of the wrong type are rejected, never coerced.
"""

from __future__ import annotations

import errno
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path

from .audio import AudioDecodeError
from .audio import EmptyAudioError
from .audio import decode_audio
from .columns import CLIP_COLUMNS
from .columns import TEXT_COLUMNS
from .columns import TONE_COLUMNS
from .schema import SCENARIO_FIELDS
from .taxonomy import check_valence
from .taxonomy import subscale as subscale_by_slug
from .taxonomy import subscale_from_eq_scale

logger = logging.getLogger(__name__)

# Raw clip file stem -> (sentence number, eq level); same order as columns.CLIP_COLUMNS.
CLIP_SLOTS: tuple[tuple[str, int, str], ...] = (
    ("01", 1, "high"),
    ("02", 2, "high"),
    ("03", 3, "high"),
    ("04", 4, "high"),
    ("05", 4, "low"),
    ("06", 5, "high"),
    ("07", 6, "high"),
    ("08", 6, "low"),
)
AUDIO_EXTENSIONS: tuple[str, ...] = (".mp3", ".wav", ".flac", ".ogg", ".m4a")
METADATA_FILE = "metadata.json"


# Fault codes of a rejected folder (docs/dataset.md explains each).
FAULT_CODES: dict[str, str] = {
    "bad_metadata": "metadata.json is missing, not JSON, lacks a required field, or holds a value of the wrong type",
    "missing_clip": "one of the eight clips 01..08 is absent",
    "extra_clip": "audio/ holds a file that is not one of the eight clips (or a clip twice)",
    "unreadable_clip": "a clip path that cannot be read as a file (a broken or looping symbolic link, a folder, no permission)",
    "undecodable_clip": "a clip's bytes cannot be decoded as audio",
    "empty_clip": "a clip has zero bytes or decodes to no samples",
    "candidate_text_mismatch": "the high and low candidates of a test turn carry different texts",
    "turn_text_mismatch": "a clip's text in audio_files disagrees with the turn's text in conversation",
    "unknown_subscale": "the subscale (folder slug, subscale_slug or eq_scale) is not one of the 15, or they disagree",
    "duplicate_id": "two folders carry the same dataset_id",
    "invalid_dialogue": "any other fault found while reading the folder",
}


class RawDialogueError(ValueError):
    """A raw dialogue folder that cannot become a row: `code` (one of FAULT_CODES) names the fault kind, `detail` the bad value."""

    def __init__(self, folder: Path | str, code: str, detail: str):
        if code not in FAULT_CODES:
            raise ValueError(f"unknown fault code {code!r}; known: {', '.join(FAULT_CODES)}")
        self.folder = Path(folder)
        self.code = code
        self.detail = detail
        super().__init__(f"{self.folder}: {code}: {detail}")


@dataclass(frozen=True)
class Rejection:
    """A folder left out of a build, with its fault."""

    folder: Path
    code: str
    message: str

    @property
    def detail(self) -> str:
        """The fault alone: the message without the `<folder>: <code>: ` that RawDialogueError puts first."""
        return self.message.removeprefix(f"{self.folder}: {self.code}: ")


@dataclass(frozen=True)
class RawScan:
    """What a raw folder holds: candidate dialogue folders, and what was passed over (reported, never silently)."""

    folders: list[Path]
    stray_files: list[Path]  # files where a subscale or dialogue folder belongs
    hidden: list[Path]  # hidden entries (".name"), skipped

    def warnings(self) -> list[str]:
        """One line per thing passed over."""
        lines = [f"{path}: a file where a <subscale_slug>/<dataset_id>/ folder belongs; skipped" for path in self.stray_files]
        lines += [f"{path}: hidden, skipped" for path in self.hidden]
        return lines


@dataclass(frozen=True)
class RawDialogue:
    """One validated dialogue folder: its row (without audio bytes) and clip files."""

    folder: Path
    fields: dict  # every non-audio column of schema.FEATURES
    clip_paths: tuple[Path, ...]  # in CLIP_COLUMNS order
    clip_durations: tuple[float, ...]  # decoded seconds, same order

    @property
    def id(self) -> str:
        """The raw `dataset_id`."""
        return self.fields["id"]

    def row(self) -> dict:
        """The full row for schema.FEATURES, audio as original encoded bytes (read now)."""
        row = dict(self.fields)
        for column, path in zip(CLIP_COLUMNS, self.clip_paths):
            # The cell path names dialogue and clip so a decoded error points back to the source.
            row[column] = {"bytes": path.read_bytes(), "path": f"{self.id}/{path.name}"}
        return row


def scan_raw_dir(raw_dir: Path | str) -> RawScan:
    """The candidate dialogue folders `<slug>/<id>/` under raw_dir (sorted), and the files and hidden entries passed over."""
    raw_dir = Path(raw_dir)
    if not raw_dir.is_dir():
        raise FileNotFoundError(f"raw dataset folder not found: {raw_dir}")
    folders: list[Path] = []
    stray: list[Path] = []
    hidden: list[Path] = []
    for slug_dir in sorted(raw_dir.iterdir()):
        if slug_dir.name.startswith("."):
            hidden.append(slug_dir)
        elif not slug_dir.is_dir():
            stray.append(slug_dir)
        else:
            for folder in sorted(slug_dir.iterdir()):
                if folder.name.startswith("."):
                    hidden.append(folder)
                elif not folder.is_dir():
                    stray.append(folder)
                else:
                    folders.append(folder)
    if not folders:
        raise FileNotFoundError(f"{raw_dir}: no dialogue folders (<subscale_slug>/<dataset_id>/metadata.json)")
    return RawScan(folders, stray, hidden)


def find_dialogue_folders(raw_dir: Path | str) -> list[Path]:
    """Candidate dialogue folders `<slug>/<id>/` under raw_dir, sorted (hidden entries and stray files skipped)."""
    return scan_raw_dir(raw_dir).folders


def looks_like_raw_dir(path: Path | str) -> bool:
    """True if path holds raw generator output (some `<slug>/<id>/metadata.json`)."""
    path = Path(path)
    return path.is_dir() and next(path.glob(f"*/*/{METADATA_FILE}"), None) is not None


def _same_text(a: str, b: str) -> bool:
    # Whitespace layout is not a disagreement between two copies of a line.
    return " ".join(a.split()) == " ".join(b.split())


def _bad(folder: Path, detail: str) -> RawDialogueError:
    return RawDialogueError(folder, "bad_metadata", detail)


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _text(folder: Path, where: str, value, *, optional: bool = False) -> str | None:
    """A metadata value that must be a string (or None when optional); never coerced."""
    if value is None and optional:
        return None
    if not isinstance(value, str):
        kind = "a string or null" if optional else "a string"
        raise _bad(folder, f"{where} must be {kind}, got {type(value).__name__} {_short(value)}")
    return value


def _number(folder: Path, where: str, value) -> int:
    """A sentence number: a JSON integer 1..6 (not a bool, a float or a list)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 6:
        raise _bad(folder, f"{where} must be an integer 1..6, got {type(value).__name__} {_short(value)}")
    return value


def _load_metadata(folder: Path) -> dict:
    path = folder / METADATA_FILE
    if not path.is_file():
        raise _bad(folder, f"no {METADATA_FILE}")
    try:
        metadata = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
        raise _bad(folder, f"{METADATA_FILE} is not valid JSON ({exc})") from None
    if not isinstance(metadata, dict):
        raise _bad(folder, f"{METADATA_FILE} must hold a JSON object")
    for key, kind in (("scenario", dict), ("conversation", list), ("audio_files", list), ("generation_metadata", dict)):
        if key not in metadata:
            raise _bad(folder, f"{METADATA_FILE} lacks {key!r}")
        if not isinstance(metadata[key], kind):
            raise _bad(folder, f"{key!r} must be a JSON {'object' if kind is dict else 'list'}, got {type(metadata[key]).__name__}")
    if not metadata["generation_metadata"].get("dataset_id"):
        raise _bad(folder, "generation_metadata lacks 'dataset_id'")
    _text(folder, "generation_metadata.dataset_id", metadata["generation_metadata"]["dataset_id"])
    return metadata


def _resolve_subscale(folder: Path, metadata: dict):
    generation = metadata["generation_metadata"]
    slugs = {"folder": folder.parent.name}
    if generation.get("subscale_slug") is not None:
        slugs["generation_metadata.subscale_slug"] = _text(folder, "generation_metadata.subscale_slug", generation["subscale_slug"])
    found = {}
    for where, slug in slugs.items():
        try:
            found[where] = subscale_by_slug(slug)
        except ValueError:
            raise RawDialogueError(folder, "unknown_subscale", f"{where} {slug!r} is not one of the 15 subscales") from None
    eq_scale = metadata.get("eq_scale")
    where = "eq_scale"
    if eq_scale is None:
        eq_scale, where = metadata["scenario"].get("eq_skill_tested"), "scenario.eq_skill_tested"
    if not eq_scale:
        raise _bad(folder, "no 'eq_scale'")
    _text(folder, where, eq_scale)
    try:
        found["eq_scale"] = subscale_from_eq_scale(eq_scale)
    except ValueError:
        raise RawDialogueError(folder, "unknown_subscale", f"eq_scale {eq_scale!r} is not '<Composite> - <Subscale>' of the 15") from None
    if len({s.slug for s in found.values()}) != 1:
        listing = ", ".join(f"{where}={s.slug}" for where, s in found.items())
        raise RawDialogueError(folder, "unknown_subscale", f"subscale disagrees between sources: {listing}")
    return found["eq_scale"], eq_scale


def _turn_texts(folder: Path, metadata: dict) -> dict[int, str]:
    texts: dict[int, str] = {}
    for k, turn in enumerate(metadata["conversation"]):
        if not isinstance(turn, dict):
            raise _bad(folder, f"conversation[{k}] must be an object, got {_short(turn)}")
        number = _number(folder, f"conversation[{k}].sentence_number", turn.get("sentence_number"))
        if number in texts:
            raise _bad(folder, f"conversation has turn {number} twice")
        texts[number] = _text(folder, f"conversation[{k}].text", turn.get("text"))
    if sorted(texts) != list(range(1, 7)):
        raise _bad(folder, f"conversation has turns {sorted(texts)}, expected 1..6")
    return texts


def _clip_entries(folder: Path, metadata: dict, texts: dict[int, str]) -> list[dict]:
    """audio_files entries in CLIP_SLOTS order, after the type and text checks."""
    by_slot: dict[tuple[int, str], dict] = {}
    for k, entry in enumerate(metadata["audio_files"]):
        where = f"audio_files[{k}]"
        if not isinstance(entry, dict):
            raise _bad(folder, f"{where} must be an object, got {_short(entry)}")
        number = _number(folder, f"{where}.sentence_number", entry.get("sentence_number"))
        level = _text(folder, f"{where}.eq_level", entry.get("eq_level", "high"))
        _text(folder, f"{where}.text", entry.get("text"))
        _text(folder, f"{where}.tone_description", entry.get("tone_description"), optional=True)
        key = (number, level)
        if key in by_slot:
            raise _bad(folder, f"audio_files lists turn {number} level {level!r} twice")
        by_slot[key] = entry
    expected = [(number, level) for _, number, level in CLIP_SLOTS]
    if sorted(by_slot) != sorted(expected):
        raise _bad(folder, f"audio_files has slots {sorted(by_slot)}, expected {expected}")
    for turn in (4, 6):
        high, low = by_slot[(turn, "high")]["text"], by_slot[(turn, "low")]["text"]
        if not _same_text(high, low):
            raise RawDialogueError(folder, "candidate_text_mismatch", f"turn {turn} high text {high!r} differs from low text {low!r}")
    for number, level in expected:
        clip_text = by_slot[(number, level)]["text"]
        if not _same_text(clip_text, texts[number]):
            raise RawDialogueError(
                folder, "turn_text_mismatch",
                f"turn {number} ({level}) audio_files text {clip_text!r} != conversation text {texts[number]!r}",
            )
    return [by_slot[slot] for slot in expected]


def _unreadable_reason(path: Path) -> str | None:
    """Why a clip path cannot be read as a file (a looping or broken link, a folder, no permission), or None."""
    if path.is_symlink():
        try:
            path.resolve(strict=True)
        except RuntimeError:  # Python 3.11 reports a symlink loop this way
            return "is a symbolic link that loops"
        except FileNotFoundError:
            return f"is a symbolic link to a missing file ({os.readlink(path)})"
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                return "is a symbolic link that loops"
            return f"cannot be resolved ({exc.strerror})"
    if path.is_dir():
        return "is a folder, not a file"
    if not path.is_file():
        return "is not a regular file"
    if not os.access(path, os.R_OK):
        return "cannot be read (permission denied)"
    return None


def _clip_files(folder: Path) -> list[Path]:
    audio_dir = folder / "audio"
    if not audio_dir.is_dir():
        raise RawDialogueError(folder, "missing_clip", "no audio/ folder")
    wanted = {stem for stem, _, _ in CLIP_SLOTS}
    found: dict[str, Path] = {}
    for path in sorted(audio_dir.iterdir()):
        if path.name.startswith("."):
            continue
        if path.stem not in wanted or path.suffix.lower() not in AUDIO_EXTENSIONS:
            raise RawDialogueError(folder, "extra_clip", f"unexpected file audio/{path.name} (expected 01..08 with {AUDIO_EXTENSIONS})")
        reason = _unreadable_reason(path)
        if reason:
            raise RawDialogueError(folder, "unreadable_clip", f"audio/{path.name} {reason}")
        if path.stem in found:
            raise RawDialogueError(folder, "extra_clip", f"clip {path.stem} present twice: {found[path.stem].name}, {path.name}")
        found[path.stem] = path
    missing = [stem for stem, _, _ in CLIP_SLOTS if stem not in found]
    if missing:
        raise RawDialogueError(folder, "missing_clip", f"missing clip(s) audio/{', '.join(missing)}")
    return [found[stem] for stem, _, _ in CLIP_SLOTS]


def _clip_duration(folder: Path, path: Path) -> float:
    # decode_audio itself tells an empty clip (0 bytes or no samples) from an undecodable one.
    try:
        samples, sampling_rate = decode_audio(path, name=f"audio/{path.name}")
    except EmptyAudioError as exc:
        raise RawDialogueError(folder, "empty_clip", str(exc)) from None
    except AudioDecodeError as exc:
        raise RawDialogueError(folder, "undecodable_clip", str(exc)) from None
    return len(samples) / sampling_rate


def read_dialogue(folder: Path | str, *, decode: bool = True) -> RawDialogue:
    """Validate one `<slug>/<id>/` folder and return it; raises a RawDialogueError naming the fault.

    decode=False is for readers that decode every clip themselves anyway (the audit, the human
    check): no undecodable/empty-content check here, and the durations are NaN.
    """
    folder = Path(folder)
    metadata = _load_metadata(folder)
    scenario, generation = metadata["scenario"], metadata["generation_metadata"]
    sub, eq_scale = _resolve_subscale(folder, metadata)
    texts = _turn_texts(folder, metadata)
    entries = _clip_entries(folder, metadata, texts)
    clips = _clip_files(folder)
    durations = tuple(_clip_duration(folder, p) if decode else float("nan") for p in clips)

    valence = _text(folder, "scenario.scenario_valence", scenario.get("scenario_valence"), optional=True)
    if valence is not None:
        try:
            check_valence(valence)
        except ValueError as exc:
            raise _bad(folder, str(exc)) from None
    version = _text(folder, "generation_metadata.generation_version", generation.get("generation_version"), optional=True)
    fields = {
        "id": generation["dataset_id"],
        "subscale": sub.slug,
        "subscale_name": sub.name,
        "composite": sub.composite.slug,
        "composite_name": sub.composite.name,
        "eq_scale": eq_scale,
        "scenario_valence": valence,
        "target_social_intent": _text(folder, "scenario.target_social_intent", scenario.get("target_social_intent"), optional=True),
        "generation_version": version or ("v2" if "scenario_valence" in scenario else "v1"),
        "timestamp": _text(folder, "generation_metadata.timestamp", generation.get("timestamp"), optional=True),
        **{name: _text(folder, f"scenario.{name}", scenario.get(name), optional=True) for name in SCENARIO_FIELDS},
        **{column: texts[n] for n, column in enumerate(TEXT_COLUMNS, start=1)},
        **{column: entry.get("tone_description") for column, entry in zip(TONE_COLUMNS, entries)},
        "duration_s": float(sum(durations)),
    }
    return RawDialogue(folder, fields, tuple(clips), durations)


def iter_dialogues(raw_dir: Path | str, *, strict: bool = False, rejected: list[Rejection] | None = None):
    """Yield validated RawDialogues of raw_dir in folder order.

    A faulty folder raises its RawDialogueError when strict; otherwise it is logged,
    appended to `rejected` (when given) and skipped. Whatever goes wrong while reading
    one folder is that folder's fault: it never stops the build of the others.
    """
    seen: dict[str, Path] = {}
    for folder in find_dialogue_folders(raw_dir):
        try:
            try:
                dialogue = read_dialogue(folder)
            except RawDialogueError:
                raise
            except (OSError, ValueError, TypeError, KeyError, AttributeError, RecursionError) as exc:
                raise RawDialogueError(folder, "invalid_dialogue", f"{type(exc).__name__}: {exc}") from exc
            if dialogue.id in seen:
                raise RawDialogueError(folder, "duplicate_id", f"dataset_id {dialogue.id!r} already used by {seen[dialogue.id]}")
        except RawDialogueError as exc:
            if strict:
                raise
            logger.warning("rejected %s", exc)
            if rejected is not None:
                rejected.append(Rejection(folder, exc.code, str(exc)))
            continue
        seen[dialogue.id] = folder
        yield dialogue
