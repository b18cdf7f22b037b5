"""User profiles of the interactive track (one JSON object per line) and the fixed list of emotions a user line can carry.

A profile: `id`, `language` (en, zh), `category` (everyday, support, conflict),
`scenario` (the situation), `goal` (what the user wants from the talk),
`character` (how they talk), `first_line` and `first_emotion` (the opening,
spoken with emotional TTS), `topic` (a short noun phrase the scripted user
refers to) and `gender` (female, male: the TTS voice). The default set,
profiles_v1.jsonl, was written for this project.
"""

from __future__ import annotations

from dataclasses import asdict
from dataclasses import dataclass
from dataclasses import fields
from pathlib import Path

DEFAULT_PROFILES = Path(__file__).resolve().parent / "profiles_v1.jsonl"
LANGUAGES = {"en": "English", "zh": "Chinese (Mandarin)"}
CATEGORIES = ("everyday", "support", "conflict")
GENDERS = ("female", "male")

# The fixed list a user line's emotion is chosen from, each with the tone instruction the TTS speaks it with.
# The instructions use the delivery words of speecheq_dataset.tts's keyword table, so espeak-ng renders them too.
USER_EMOTIONS: dict[str, str] = {
    "neutral": "Even, plain conversational voice.",
    "happiness": "Bright and warm, smiling, with a light laugh.",
    "excitement": "Excited, high energy and fast, bursting with joy.",
    "relaxation": "Soft, unhurried and gentle, at ease.",
    "relief": "Soft and slow, with a long relieved sigh.",
    "gratitude": "Warm and sincere, bright and grateful.",
    "humour": "Playful and bright, with a giggle in the voice.",
    "sadness": "Heavy, soft and slow, trailing off.",
    "disappointment": "Weary and flat, with a falling pitch.",
    "fear": "Shaky and breathless, quick, almost a whisper.",
    "anxiety": "Anxious and nervous, rapid and tense.",
    "anger": "Angry, loud and sharp, forceful.",
    "frustration": "Exasperated and tense, clipped words.",
    "hesitation": "Hesitant and halting, with long pauses.",
    "empathy": "Warm, gentle and sincere, at a measured pace.",
}
NEGATIVE_EMOTIONS = frozenset({"sadness", "disappointment", "fear", "anxiety", "anger", "frustration"})
RELIEVED_EMOTIONS = frozenset({"relief", "gratitude", "relaxation", "happiness"})


@dataclass(frozen=True)
class UserProfile:
    """Who the simulated user is and how the conversation opens."""

    id: str
    language: str
    category: str
    scenario: str
    goal: str
    character: str
    first_line: str
    first_emotion: str
    topic: str
    gender: str = "female"

    def as_dict(self) -> dict:
        return asdict(self)

    @property
    def language_name(self) -> str:
        return LANGUAGES[self.language]


def profile_from_dict(data: dict, where: str) -> UserProfile:
    """A validated profile; ValueError naming `where` and the bad field."""
    if not isinstance(data, dict):
        raise ValueError(f"{where}: a profile is a JSON object, got {type(data).__name__}")
    names = [f.name for f in fields(UserProfile)]
    missing = [n for n in names if n not in data and n != "gender"]
    if missing:
        raise ValueError(f"{where}: missing field(s) {', '.join(missing)}")
    unknown = sorted(set(data) - set(names))
    if unknown:
        raise ValueError(f"{where}: unknown field(s) {', '.join(unknown)} (known: {', '.join(names)})")
    for name in names:
        if name in data and (not isinstance(data[name], str) or not data[name].strip()):
            raise ValueError(f"{where}: field {name!r} must be non-empty text, got {data[name]!r}")
    checks = {"language": tuple(LANGUAGES), "category": CATEGORIES, "first_emotion": tuple(USER_EMOTIONS), "gender": GENDERS}
    for name, allowed in checks.items():
        if name in data and data[name] not in allowed:
            raise ValueError(f"{where}: {name} {data[name]!r} is not one of {', '.join(allowed)}")
    if any(c in data["id"] for c in "/\\\x00") or data["id"] in (".", ".."):
        raise ValueError(f"{where}: id {data['id']!r} cannot name a file")
    return UserProfile(**data)


def load_profiles(path: str | Path | None = None) -> list[UserProfile]:
    """The profiles of a JSONL file (default: profiles_v1.jsonl); errors name the file, the line and the field."""
    path = Path(path) if path else DEFAULT_PROFILES
    if not path.is_file():
        raise ValueError(f"--profiles {path}: cannot read (no such file)")
    from eval_scripts.store import load_json_items

    profiles = load_json_items(path, profile_from_dict, lambda profile: profile.id)
    if not profiles:
        raise ValueError(f"--profiles {path}: no profiles")
    return profiles
