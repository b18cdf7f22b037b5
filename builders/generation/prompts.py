"""Versioned prompt templates of the text stages (files in prompts/, `$name` placeholders).

A template file holds the system message, a line `==== user ====`, then the
user message. A changed prompt is a new file (`<stage>_v2.txt`), never an edit
of a released one; records store the version and the file's hash.
"""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass
from importlib import resources
from string import Template

PROMPT_VERSION = "v1"
SEPARATOR = "==== user ===="
STAGE_PROMPTS: tuple[str, ...] = ("scenario", "dialogue", "tones_context", "tones_test", "filter", "oracle")


@dataclass(frozen=True)
class PromptTemplate:
    """One stage's template: system and user parts, version and content hash."""

    name: str
    version: str
    system: str
    user: str
    sha256: str

    def render(self, **values) -> list[dict]:
        """Chat messages with every placeholder filled (dicts and lists as JSON); a missing value fails by name."""
        text = {k: v if isinstance(v, str) else json.dumps(v, ensure_ascii=False) for k, v in values.items()}
        try:
            user = Template(self.user).substitute(text)
        except KeyError as exc:
            raise ValueError(f"prompt {self.name}_{self.version}: no value for placeholder {exc.args[0]!r}") from None
        return [{"role": "system", "content": self.system}, {"role": "user", "content": user}]

    def describe(self) -> dict:
        return {"prompt": f"{self.name}_{self.version}", "prompt_sha256": self.sha256[:16]}


@functools.lru_cache(maxsize=None)
def load_prompt(name: str, version: str = PROMPT_VERSION) -> PromptTemplate:
    """The packaged template `prompts/<name>_<version>.txt`; an unknown one fails with the known names."""
    folder = resources.files("builders.generation") / "prompts"
    path = folder / f"{name}_{version}.txt"
    if not path.is_file():
        known = sorted(p.name for p in folder.iterdir() if p.name.endswith(".txt"))
        raise ValueError(f"no prompt template {name}_{version}.txt; known: {', '.join(known)}")
    content = path.read_text(encoding="utf-8")
    if SEPARATOR not in content:
        raise ValueError(f"prompt template {path.name} lacks the line {SEPARATOR!r} between system and user parts")
    system, user = (part.strip() for part in content.split(SEPARATOR, 1))
    return PromptTemplate(name, version, system, user, hashlib.sha256(content.encode()).hexdigest())
