"""The embedded default dataset: the project's own dialogue scripts, rendered offline with espeak-ng.

Scripts live in speecheq_dataset/scripts/*.json in the raw metadata format
(SPEC §2.1, v2). `render_sample` writes them as raw generator output; the
result goes through the same builder as the published data. The built
dataset is cached under `$SPEECHEQ_CACHE`, else `<HF_HOME>/speecheq`, keyed by
a hash of the scripts, the renderer (version and source) and the espeak-ng version, and
written atomically (temporary folder + rename), so a crash never leaves a half cache.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import subprocess
from importlib import resources
from pathlib import Path

import datasets

from . import tts
from .files import make_temp_dir
from .raw import CLIP_SLOTS
from .raw import METADATA_FILE
from .tts import ESPEAK
from .tts import RENDERER_VERSION
from .tts import espeak_available
from .tts import synthesize_many
from .tts import voice_for

logger = logging.getLogger(__name__)

CACHE_ENV = "SPEECHEQ_CACHE"


def script_files() -> list[Path]:
    """The packaged dialogue scripts, sorted by name."""
    folder = resources.files("speecheq_dataset") / "scripts"
    files = sorted(Path(os.fspath(p)) for p in folder.iterdir() if p.name.endswith(".json"))
    if not files:
        raise FileNotFoundError(f"no dialogue scripts in {folder}: the package data is missing")
    return files


def load_scripts() -> list[dict]:
    """The packaged scripts as raw metadata dicts (file order)."""
    scripts = []
    for path in script_files():
        try:
            scripts.append(json.loads(path.read_text(encoding="utf-8")))
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}: invalid JSON ({exc})") from None
    return scripts


def _espeak_version() -> str:
    if not espeak_available():
        return "missing"
    done = subprocess.run([ESPEAK, "--version"], capture_output=True, text=True, timeout=30)
    return done.stdout.strip()


def sample_key() -> str:
    """Cache key of the sample: scripts' bytes + renderer version and source + espeak-ng version."""
    digest = hashlib.sha256(f"{RENDERER_VERSION}\0{_espeak_version()}\0".encode())
    # The renderer's own source too: an edited rule must not be served from a stale cache.
    digest.update(Path(tts.__file__).read_bytes())
    for path in script_files():
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def sample_cache_root(cache_root: str | os.PathLike | None = None) -> Path:
    """Where the built sample is cached: the argument, else $SPEECHEQ_CACHE, else <HF_HOME>/speecheq."""
    if cache_root is not None:
        return Path(cache_root)
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    from huggingface_hub import constants

    # Read (never set) the user's HF_HOME, so the sample sits beside their other Hugging Face data.
    return Path(constants.HF_HOME) / "speecheq"


def render_sample(raw_dir: str | os.PathLike) -> Path:
    """Write the embedded scripts as raw generator output (`<slug>/<id>/metadata.json` + audio/01..08.wav)."""
    raw_dir = Path(raw_dir)
    scripts = load_scripts()
    jobs, targets = [], []
    for metadata in scripts:
        generation, scenario = metadata["generation_metadata"], metadata["scenario"]
        folder = raw_dir / generation["subscale_slug"] / generation["dataset_id"]
        (folder / "audio").mkdir(parents=True, exist_ok=True)
        (folder / METADATA_FILE).write_text(json.dumps(metadata, indent=2, ensure_ascii=False), encoding="utf-8")
        by_slot = {(e["sentence_number"], e["eq_level"]): e for e in metadata["audio_files"]}
        for stem, number, level in CLIP_SLOTS:
            entry = by_slot[(number, level)]
            speaker = entry["speaker"]
            voice = voice_for(speaker, scenario.get(f"{speaker}_gender"), scenario.get(f"{speaker}_voice"))
            jobs.append((entry["text"], entry.get("tone_description") or "", voice))
            targets.append(folder / "audio" / f"{stem}.wav")
    logger.info("rendering %d clips of %d dialogues with espeak-ng", len(jobs), len(scripts))
    for target, wav in zip(targets, synthesize_many(jobs)):
        target.write_bytes(wav)
    return raw_dir


def ensure_sample(cache_root: str | os.PathLike | None = None) -> Path:
    """The cache entry of the built sample (`raw/` + `dataset/`), rendering and building it if absent."""
    from .builder import build_raw

    root = sample_cache_root(cache_root)
    entry = root / f"sample-{sample_key()}"
    if (entry / "dataset").is_dir():
        return entry
    tmp = make_temp_dir(entry, prefix=f".tmp-{entry.name}-")
    try:
        raw = render_sample(tmp / "raw")
        dataset, _ = build_raw(raw, strict=True, cache_dir=tmp / "build")
        dataset.save_to_disk(os.fspath(tmp / "dataset"))
        del dataset
        shutil.rmtree(tmp / "build", ignore_errors=True)
        try:
            os.rename(tmp, entry)
        except OSError:
            if not (entry / "dataset").is_dir():  # not a lost race with another process: a real failure
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    logger.info("embedded sample built at %s", entry)
    return entry


def load_sample(cache_root: str | os.PathLike | None = None) -> datasets.Dataset:
    """The embedded sample as a Dataset (built on first use, then read from the cache)."""
    return datasets.load_from_disk(os.fspath(ensure_sample(cache_root) / "dataset"))
