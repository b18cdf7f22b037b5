"""The tiny example set of each utterance task, written for this project and spoken with espeak-ng.

examples/<task>.jsonl holds each item's words (`text`), its delivery (`tone`:
tone words of speecheq_dataset.tts's keyword table), `gender` and the task's
fields; `write_examples` renders every clip with the TTS backend and writes
the documented layout (<task>.jsonl + audio/<task>/<id>.wav). `example_data`
keeps one rendered copy in the cache (beside the embedded sample), keyed by
the example files and the renderer.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from pathlib import Path

from eval_scripts.multibench.tasks import TASKS

logger = logging.getLogger(__name__)

EXAMPLES_DIR = Path(__file__).resolve().parent / "examples"
RENDER_FIELDS = ("text", "tone", "gender")


def example_items(task: str) -> list[dict]:
    """The example definitions of a task (words, tone, voice and the task's fields)."""
    path = EXAMPLES_DIR / f"{task}.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def write_examples(out_dir: str | Path, tasks: list[str] | None = None, tts=None) -> Path:
    """Render the example sets of `tasks` (default: all four) into `out_dir` in the data layout; returns out_dir."""
    from speecheq_dataset.tts_backends import EspeakTts

    out_dir = Path(out_dir)
    tts = tts or EspeakTts()
    for task in tasks or list(TASKS):
        lines = []
        for item in example_items(task):
            scenario = {"speaker1_gender": item["gender"], "language": item.get("language", "en")}
            voice = tts.voices(scenario, 0)[0]
            speech = tts.synthesize(item["text"], item["tone"], voice)
            audio = f"audio/{task}/{item['id']}.{speech.extension}"
            (out_dir / audio).parent.mkdir(parents=True, exist_ok=True)
            (out_dir / audio).write_bytes(speech.data)
            lines.append({"id": item["id"], "audio": audio, **{k: v for k, v in item.items() if k not in (*RENDER_FIELDS, "id")}})
        (out_dir / f"{task}.jsonl").write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines), encoding="utf-8")
    return out_dir


def examples_key() -> str:
    """Cache key: the example files' bytes and the espeak-ng renderer's source."""
    from speecheq_dataset import tts

    digest = hashlib.sha256(tts.RENDERER_VERSION.encode() + Path(tts.__file__).read_bytes())
    for path in sorted(EXAMPLES_DIR.glob("*.jsonl")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def example_data(cache_root: str | os.PathLike | None = None) -> Path:
    """The rendered example folder of all four tasks in the cache, rendered on first use."""
    from speecheq_dataset.files import make_temp_dir
    from speecheq_dataset.sample import sample_cache_root

    entry = sample_cache_root(cache_root) / f"multibench-examples-{examples_key()}"
    if all((entry / f"{task}.jsonl").is_file() for task in TASKS):
        return entry
    tmp = make_temp_dir(entry, prefix=f".tmp-{entry.name}-")
    try:
        write_examples(tmp)
        try:
            os.rename(tmp, entry)
        except OSError:
            if not (entry / "emotion_recognition.jsonl").is_file():  # not a lost race with another process
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    logger.info("Multi-Bench example sets rendered at %s", entry)
    return entry
