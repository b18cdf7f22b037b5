"""Multi-Bench's four utterance tasks (SPEC §8): the local data layout, the questions asked, and how answers are read.

Layout of a data folder (one per set of items; docs/multibench.md):
    DIR/<task>.jsonl   one JSON object per line, the fields below
    DIR/...            the audio files, at paths relative to DIR (any format FFmpeg or soundfile decodes)
Every item: `id` (unique in the file), `audio` (relative path), optionally
`question` (replaces the task's question), `context` (text shown before the
clip) and `language`. Per task:
- emotion_recognition (semi-open): `reference`, the emotion expressed;
- paralinguistic_recognition (multi-choice): `options` (2-26 texts) and
  `answer`, the list of options that apply;
- style_inference (single choice): `options` (responses to the same words
  said in different styles) and `answer`, the one that fits;
- emotion_inference (semi-open): `reference`, the feeling to infer (`context` usually set).
Options are shown as lettered lines (A. ..., B. ...) and read back with
eval_scripts.parsing.parse_option_set; semi-open answers are rated by a judge.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from eval_scripts.prompts import PROMPTS_DIR
from eval_scripts.store import load_json_items
from eval_scripts.prompts import PromptFile
from eval_scripts.prompts import load_prompt_file

FORMATS = ("semi_open", "multi_choice", "single_choice")
PROMPT_KEYS = ("system", "question", "answer")
MAX_OPTIONS = 26


@dataclass(frozen=True)
class Task:
    """One utterance task: its answer format and the fields its items need."""

    name: str
    format: str
    fields: tuple[str, ...]

    @property
    def default_prompt(self) -> Path:
        return PROMPTS_DIR / "multibench" / f"{self.name}_v1.json"


TASKS: dict[str, Task] = {
    "emotion_recognition": Task("emotion_recognition", "semi_open", ("reference",)),
    "paralinguistic_recognition": Task("paralinguistic_recognition", "multi_choice", ("options", "answer")),
    "style_inference": Task("style_inference", "single_choice", ("options", "answer")),
    "emotion_inference": Task("emotion_inference", "semi_open", ("reference",)),
}
OPTIONAL_FIELDS = ("question", "context", "language")


def task_by_name(name: str) -> Task:
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; tasks: {', '.join(TASKS)}")
    return TASKS[name]


def load_task_prompt(task: Task, path: str | Path | None = None) -> PromptFile:
    return load_prompt_file(path or task.default_prompt, PROMPT_KEYS)


def _check_item(task: Task, item: object, where: str, data_dir: Path) -> dict:
    if not isinstance(item, dict):
        raise ValueError(f"{where}: an item is a JSON object, got {type(item).__name__}")
    needed = ("id", "audio", *task.fields)
    missing = [k for k in needed if k not in item]
    if missing:
        raise ValueError(f"{where}: missing field(s) {', '.join(missing)} (task {task.name} needs {', '.join(needed)})")
    unknown = sorted(set(item) - set(needed) - set(OPTIONAL_FIELDS))
    if unknown:
        raise ValueError(f"{where}: unknown field(s) {', '.join(unknown)}")
    for key in ("id", "audio", "reference", "question", "context", "language"):
        if key in item and (not isinstance(item[key], str) or not item[key].strip()):
            raise ValueError(f"{where}: {key} must be non-empty text, got {item[key]!r}")
    if task.format != "semi_open":
        options = item["options"]
        if not isinstance(options, list) or not 2 <= len(options) <= MAX_OPTIONS or not all(isinstance(o, str) and o.strip() for o in options):
            raise ValueError(f"{where}: options must be a list of 2-{MAX_OPTIONS} non-empty texts")
        if len(set(options)) != len(options):
            raise ValueError(f"{where}: options repeat a text")
        answer = item["answer"] if task.format == "multi_choice" else [item["answer"]]
        if not isinstance(answer, list) or not answer or any(a not in options for a in answer):
            kind = "a non-empty list of options" if task.format == "multi_choice" else "one of the options"
            raise ValueError(f"{where}: answer must be {kind}, got {item['answer']!r}")
    audio = data_dir / item["audio"]
    if Path(item["audio"]).is_absolute() or ".." in Path(item["audio"]).parts:
        raise ValueError(f"{where}: audio {item['audio']!r} must be a path inside {data_dir}")
    if not audio.is_file():
        raise ValueError(f"{where}: audio file {audio} not found")
    return item


def load_items(data_dir: str | Path, task: Task) -> list[dict]:
    """The validated items of DIR/<task>.jsonl; errors name the file, the line and the field."""
    data_dir = Path(data_dir)
    path = data_dir / f"{task.name}.jsonl"
    if not path.is_file():
        raise ValueError(f"--data {data_dir}: no {path.name} (a data folder holds <task>.jsonl and its audio; see docs/multibench.md)")
    items = load_json_items(path, lambda item, where: _check_item(task, item, where, data_dir), lambda item: item["id"])
    if not items:
        raise ValueError(f"{path}: no items")
    return items


def letter(index: int) -> str:
    return chr(ord("A") + index)


def option_lines(options: list[str]) -> str:
    return "\n".join(f"{letter(k)}. {text}" for k, text in enumerate(options))


def reference_indices(task: Task, item: dict) -> list[int]:
    """The right options as 0-based indices (choice tasks)."""
    answers = item["answer"] if task.format == "multi_choice" else [item["answer"]]
    return sorted(item["options"].index(a) for a in answers)


def question_parts(task: Task, prompt: PromptFile, item: dict) -> tuple[str, str]:
    """(text before the clip, text after it)."""
    before = item.get("question") or prompt["question"]
    if item.get("context"):
        before = f"Situation: {item['context']}\n{before}"
    values = {"options": option_lines(item["options"])} if task.format != "semi_open" else {}
    return before, prompt.fill("answer", values)
