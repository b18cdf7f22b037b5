"""Versioned prompt files (our own wording): the forced-choice protocol's (SPEC §5), and the loader every track's prompt files share."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

PROMPTS_DIR = Path(__file__).resolve().parent
DEFAULT_TEMPLATE = PROMPTS_DIR / "forced_choice_v1.json"
PERSONAS_FILE = PROMPTS_DIR / "personas_v1.json"
TEMPLATE_KEYS = (
    "system",
    "round1",
    "round2",
    "history_line_audio",
    "history_line_text",
    "history_separator",
    "option_audio",
    "option_oracle",
    "logprob_prefix",
)


@dataclass(frozen=True)
class PromptFile:
    """A prompt file's texts (the keys a use needs) plus the SHA-256 of its exact bytes (recorded in results)."""

    path: str
    name: str
    texts: dict[str, str]
    sha256: str

    def __getitem__(self, key: str) -> str:
        return self.texts[key]

    def fill(self, key: str, values: dict) -> str:
        """A text with its placeholders filled; an unknown placeholder is an error naming the file."""
        try:
            return self.texts[key].format(**values)
        except (KeyError, IndexError) as exc:
            raise ValueError(f"prompt file {self.path}: unknown placeholder {exc} in {key!r}") from None

    def record(self) -> dict:
        return {"name": self.name, "path": self.path, "sha256": self.sha256}


def load_prompt_file(path: str | Path, keys: tuple[str, ...]) -> PromptFile:
    """A JSON prompt file that must hold the text `keys`; errors name the file and the missing keys."""
    path = Path(path)
    try:
        raw = path.read_bytes()
        data = json.loads(raw)
    except (OSError, ValueError) as exc:
        raise ValueError(f"prompt file {path}: cannot read a JSON object ({exc})") from None
    missing = [k for k in keys if not isinstance(data, dict) or not isinstance(data.get(k), str)]
    if missing:
        raise ValueError(f"prompt file {path}: missing text keys {', '.join(missing)}")
    return PromptFile(str(path), str(data.get("name") or path.stem), {k: data[k] for k in keys}, hashlib.sha256(raw).hexdigest())


# The forced-choice template is a prompt file with the template keys.
PromptTemplate = PromptFile


def load_template(path: str | Path | None = None) -> PromptTemplate:
    """Read a template JSON file (default: forced_choice_v1.json); missing keys are an error naming them."""
    return load_prompt_file(path or DEFAULT_TEMPLATE, TEMPLATE_KEYS)


def persona_names() -> list[str]:
    """The seven persona names of SPEC §5."""
    return list(_personas())


def persona_text(name: str) -> str:
    """System prompt of a persona; unknown names fail with the list of known ones."""
    personas = _personas()
    if name not in personas:
        raise ValueError(f"unknown persona {name!r}; known personas: {', '.join(personas)}")
    return personas[name]


def _personas() -> dict[str, str]:
    return json.loads(PERSONAS_FILE.read_text(encoding="utf-8"))["personas"]


def prompt_hash(template: PromptTemplate, system: str) -> str:
    """Hash of what shapes every prompt: the template file's bytes and the system prompt in use."""
    digest = hashlib.sha256()
    digest.update(template.sha256.encode())
    digest.update(b"\0")
    digest.update(system.encode("utf-8"))
    return digest.hexdigest()
