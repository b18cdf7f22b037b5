"""Read and validate the authors' raw generator output (SPEC §2.1), one dialogue folder at a time.

Layout: `<subscale_slug>/<dataset_id>/metadata.json` + `audio/01..08.<ext>`.
Clips are located by folder and index, never by the metadata's `audio_path`
(an absolute path of the authors' machine in v2). Every fault raises a
`RawDialogueError` subclass whose message names the folder and the fault.
"""

from __future__ import annotations

import json
import logging
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


class RawDialogueError(ValueError):
    """A raw dialogue folder that cannot become a row; `code` names the fault kind."""

    code = "invalid_dialogue"

    def __init__(self, folder: Path | str, detail: str):
        self.folder = Path(folder)
        self.detail = detail
        super().__init__(f"{self.folder}: {self.code}: {detail}")


class MetadataError(RawDialogueError):
    """metadata.json is missing, not JSON, or lacks a required field."""

    code = "bad_metadata"


class MissingClipError(RawDialogueError):
    """One of the eight clips 01..08 is absent."""

    code = "missing_clip"


class ExtraClipError(RawDialogueError):
    """audio/ holds a file that is not one of the eight clips (or a clip twice)."""

    code = "extra_clip"


class UndecodableClipError(RawDialogueError):
    """A clip's bytes cannot be decoded as audio."""

    code = "undecodable_clip"


class EmptyClipError(RawDialogueError):
    """A clip has zero bytes or decodes to no samples."""

    code = "empty_clip"


class CandidateTextMismatchError(RawDialogueError):
    """The high and low candidates of a test turn carry different texts."""

    code = "candidate_text_mismatch"


class TurnTextMismatchError(RawDialogueError):
    """A clip's text in `audio_files` disagrees with the turn's text in `conversation`."""

    code = "turn_text_mismatch"


class UnknownSubscaleError(RawDialogueError):
    """The subscale (folder slug, `subscale_slug` or `eq_scale`) is not one of SPEC §1's 15, or they disagree."""

    code = "unknown_subscale"


class DuplicateIdError(RawDialogueError):
    """Two folders carry the same `dataset_id`."""

    code = "duplicate_id"


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


def find_dialogue_folders(raw_dir: Path | str) -> list[Path]:
    """Candidate dialogue folders `<slug>/<id>/` under raw_dir, sorted (hidden entries skipped)."""
    raw_dir = Path(raw_dir)
    if not raw_dir.is_dir():
        raise FileNotFoundError(f"raw dataset folder not found: {raw_dir}")
    folders = [
        folder
        for slug_dir in sorted(raw_dir.iterdir())
        if slug_dir.is_dir() and not slug_dir.name.startswith(".")
        for folder in sorted(slug_dir.iterdir())
        if folder.is_dir() and not folder.name.startswith(".")
    ]
    if not folders:
        raise FileNotFoundError(f"{raw_dir}: no dialogue folders (<subscale_slug>/<dataset_id>/metadata.json)")
    return folders


def looks_like_raw_dir(path: Path | str) -> bool:
    """True if path holds raw generator output (some `<slug>/<id>/metadata.json`)."""
    path = Path(path)
    return path.is_dir() and next(path.glob(f"*/*/{METADATA_FILE}"), None) is not None


def _same_text(a: str, b: str) -> bool:
    # Whitespace layout is not a disagreement between two copies of a line.
    return " ".join(a.split()) == " ".join(b.split())


def _load_metadata(folder: Path) -> dict:
    path = folder / METADATA_FILE
    if not path.is_file():
        raise MetadataError(folder, f"no {METADATA_FILE}")
    try:
        metadata = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise MetadataError(folder, f"{METADATA_FILE} is not valid JSON ({exc})") from None
    if not isinstance(metadata, dict):
        raise MetadataError(folder, f"{METADATA_FILE} must hold a JSON object")
    for key in ("scenario", "conversation", "audio_files", "generation_metadata"):
        if key not in metadata:
            raise MetadataError(folder, f"{METADATA_FILE} lacks {key!r}")
    if not isinstance(metadata["scenario"], dict) or not isinstance(metadata["generation_metadata"], dict):
        raise MetadataError(folder, "'scenario' and 'generation_metadata' must be objects")
    if not metadata["generation_metadata"].get("dataset_id"):
        raise MetadataError(folder, "generation_metadata lacks 'dataset_id'")
    return metadata


def _resolve_subscale(folder: Path, metadata: dict):
    slugs = {"folder": folder.parent.name}
    if metadata["generation_metadata"].get("subscale_slug"):
        slugs["generation_metadata.subscale_slug"] = metadata["generation_metadata"]["subscale_slug"]
    found = {}
    for where, slug in slugs.items():
        try:
            found[where] = subscale_by_slug(slug)
        except ValueError:
            raise UnknownSubscaleError(folder, f"{where} {slug!r} is not one of the 15 subscales") from None
    eq_scale = metadata.get("eq_scale") or metadata["scenario"].get("eq_skill_tested")
    if not eq_scale:
        raise MetadataError(folder, "no 'eq_scale'")
    try:
        found["eq_scale"] = subscale_from_eq_scale(eq_scale)
    except ValueError:
        raise UnknownSubscaleError(folder, f"eq_scale {eq_scale!r} is not '<Composite> - <Subscale>' of the 15") from None
    if len({s.slug for s in found.values()}) != 1:
        listing = ", ".join(f"{where}={s.slug}" for where, s in found.items())
        raise UnknownSubscaleError(folder, f"subscale disagrees between sources: {listing}")
    return found["eq_scale"], eq_scale


def _turn_texts(folder: Path, metadata: dict) -> dict[int, str]:
    conversation = metadata["conversation"]
    if not isinstance(conversation, list):
        raise MetadataError(folder, "'conversation' must be a list")
    texts: dict[int, str] = {}
    for turn in conversation:
        number = turn.get("sentence_number") if isinstance(turn, dict) else None
        if number not in range(1, 7) or number in texts or not isinstance(turn.get("text"), str):
            raise MetadataError(folder, f"bad conversation entry {turn!r} (need sentence_number 1..6 once, text)")
        texts[number] = turn["text"]
    if sorted(texts) != list(range(1, 7)):
        raise MetadataError(folder, f"conversation has turns {sorted(texts)}, expected 1..6")
    return texts


def _clip_entries(folder: Path, metadata: dict, texts: dict[int, str]) -> list[dict]:
    """audio_files entries in CLIP_SLOTS order, after the text checks."""
    by_slot: dict[tuple[int, str], dict] = {}
    for entry in metadata["audio_files"] if isinstance(metadata["audio_files"], list) else []:
        if not isinstance(entry, dict):
            raise MetadataError(folder, f"bad audio_files entry {entry!r}")
        key = (entry.get("sentence_number"), entry.get("eq_level", "high"))
        if key in by_slot:
            raise MetadataError(folder, f"audio_files lists turn {key[0]} level {key[1]!r} twice")
        by_slot[key] = entry
    expected = [(number, level) for _, number, level in CLIP_SLOTS]
    if sorted(by_slot, key=str) != sorted(expected, key=str):
        raise MetadataError(folder, f"audio_files has slots {sorted(by_slot, key=str)}, expected {expected}")
    for turn in (4, 6):
        high, low = by_slot[(turn, "high")].get("text", ""), by_slot[(turn, "low")].get("text", "")
        if not _same_text(high, low):
            raise CandidateTextMismatchError(folder, f"turn {turn} high text {high!r} differs from low text {low!r}")
    for number, level in expected:
        clip_text = by_slot[(number, level)].get("text", "")
        if not _same_text(clip_text, texts[number]):
            raise TurnTextMismatchError(
                folder, f"turn {number} ({level}) audio_files text {clip_text!r} != conversation text {texts[number]!r}"
            )
    return [by_slot[slot] for slot in expected]


def _clip_files(folder: Path) -> list[Path]:
    audio_dir = folder / "audio"
    if not audio_dir.is_dir():
        raise MissingClipError(folder, "no audio/ folder")
    wanted = {stem for stem, _, _ in CLIP_SLOTS}
    found: dict[str, Path] = {}
    for path in sorted(audio_dir.iterdir()):
        if path.name.startswith("."):
            continue
        if path.stem not in wanted or path.suffix.lower() not in AUDIO_EXTENSIONS or not path.is_file():
            raise ExtraClipError(folder, f"unexpected file audio/{path.name} (expected 01..08 with {AUDIO_EXTENSIONS})")
        if path.stem in found:
            raise ExtraClipError(folder, f"clip {path.stem} present twice: {found[path.stem].name}, {path.name}")
        found[path.stem] = path
    missing = [stem for stem, _, _ in CLIP_SLOTS if stem not in found]
    if missing:
        raise MissingClipError(folder, f"missing clip(s) audio/{', '.join(missing)}")
    return [found[stem] for stem, _, _ in CLIP_SLOTS]


def _clip_duration(folder: Path, path: Path) -> float:
    # decode_audio itself tells an empty clip (0 bytes or no samples) from an undecodable one.
    try:
        samples, sampling_rate = decode_audio(path, name=f"audio/{path.name}")
    except EmptyAudioError as exc:
        raise EmptyClipError(folder, str(exc)) from None
    except AudioDecodeError as exc:
        raise UndecodableClipError(folder, str(exc)) from None
    return len(samples) / sampling_rate


def read_dialogue(folder: Path | str, *, decode: bool = True) -> RawDialogue:
    """Validate one `<slug>/<id>/` folder and return it; raises a RawDialogueError naming the fault.

    decode=False skips decoding the clips (no undecodable/empty-content check, durations NaN).
    """
    folder = Path(folder)
    metadata = _load_metadata(folder)
    scenario, generation = metadata["scenario"], metadata["generation_metadata"]
    sub, eq_scale = _resolve_subscale(folder, metadata)
    texts = _turn_texts(folder, metadata)
    entries = _clip_entries(folder, metadata, texts)
    clips = _clip_files(folder)
    durations = tuple(_clip_duration(folder, p) if decode else float("nan") for p in clips)

    valence = scenario.get("scenario_valence")
    if valence is not None:
        try:
            check_valence(valence)
        except ValueError as exc:
            raise MetadataError(folder, str(exc)) from None
    version = generation.get("generation_version") or ("v2" if "scenario_valence" in scenario else "v1")
    fields = {
        "id": str(generation["dataset_id"]),
        "subscale": sub.slug,
        "subscale_name": sub.name,
        "composite": sub.composite.slug,
        "composite_name": sub.composite.name,
        "eq_scale": eq_scale,
        "scenario_valence": valence,
        "target_social_intent": scenario.get("target_social_intent"),
        "generation_version": str(version),
        "timestamp": generation.get("timestamp"),
        **{name: _optional_text(scenario.get(name)) for name in SCENARIO_FIELDS},
        **{column: texts[n] for n, column in enumerate(TEXT_COLUMNS, start=1)},
        **{column: entry.get("tone_description") for column, entry in zip(TONE_COLUMNS, entries)},
        "duration_s": float(sum(durations)),
    }
    return RawDialogue(folder, fields, tuple(clips), durations)


def _optional_text(value) -> str | None:
    # Scenario fields are text; a non-string (rare, hand-edited files) is kept as its JSON text.
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def iter_dialogues(raw_dir: Path | str, *, strict: bool = False, rejected: list[Rejection] | None = None):
    """Yield validated RawDialogues of raw_dir in folder order.

    A faulty folder raises its RawDialogueError when strict; otherwise it is logged,
    appended to `rejected` (when given) and skipped.
    """
    seen: dict[str, Path] = {}
    for folder in find_dialogue_folders(raw_dir):
        try:
            dialogue = read_dialogue(folder)
            if dialogue.id in seen:
                raise DuplicateIdError(folder, f"dataset_id {dialogue.id!r} already used by {seen[dialogue.id]}")
        except RawDialogueError as exc:
            if strict:
                raise
            logger.warning("rejected %s", exc)
            if rejected is not None:
                rejected.append(Rejection(folder, exc.code, str(exc)))
            continue
        seen[dialogue.id] = folder
        yield dialogue
