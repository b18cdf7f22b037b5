"""Per-clip results on disk, keyed by what computed them and by a hash of the audio.

The cascade transcribes and rates every clip it hears; the two variants
(`emo_num`, `emo_des`), repeated runs, other personas and other seeds hear the
same clips, so those results are computed once. An entry is one small JSON
file `<root>/<namespace>-<component key>/<ab>/<audio hash>.json`, written
through a temporary file and a rename (a reader sees a whole entry or none; an
unreadable entry is a miss and is rewritten). The root is
`$SPEECHEQ_CACHE/clips`, else `<HF_HOME>/speecheq/clips` (the same convention
as the embedded sample); the user's HF_HOME is read, never set.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import threading
from pathlib import Path

import numpy as np

logger = logging.getLogger(__name__)

CACHE_SUBDIR = "clips"


def cache_root(root: str | os.PathLike | None = None) -> Path:
    """Where clip results live: the argument, else $SPEECHEQ_CACHE/clips, else <HF_HOME>/speecheq/clips."""
    if root is not None:
        return Path(root)
    from speecheq_dataset.sample import sample_cache_root

    return sample_cache_root() / CACHE_SUBDIR


def audio_digest(array: np.ndarray, sampling_rate: int) -> str:
    """SHA-256 of a clip's float32 samples and rate: equal audio, equal key, whatever file it came from."""
    samples = np.ascontiguousarray(array, dtype=np.float32)
    digest = hashlib.sha256(f"{int(sampling_rate)}:{samples.size}:".encode())
    digest.update(samples.tobytes())
    return digest.hexdigest()


def component_key(description: dict) -> str:
    """A short stable key of a component's identity (model, revision or file stamps, settings, code version)."""
    text = json.dumps(description, sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def checkpoint_stamp(pretrained: str) -> dict:
    """What identifies a checkpoint's weights: a local folder's file names, sizes and mtimes, else the Hub id.

    A Hub id is resolved by its cached snapshot's commit when one is present, so a new
    revision of the same id is a new key.
    """
    path = Path(pretrained)
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.is_file())
        return {"path": str(path.resolve()), "files": [[p.name, p.stat().st_size, int(p.stat().st_mtime)] for p in files]}
    stamp: dict = {"id": pretrained}
    try:
        from huggingface_hub import try_to_load_from_cache

        found = try_to_load_from_cache(pretrained, "config.json")
        if isinstance(found, str):
            stamp["snapshot"] = Path(found).parent.name  # the commit hash of the cached snapshot
    except Exception:  # no cache, odd id: the id alone is the key
        pass
    return stamp


class ClipCache:
    """JSON results per clip for one component, in memory and on disk (thread-safe)."""

    def __init__(self, namespace: str, description: dict, *, root: str | os.PathLike | None = None, enabled: bool = True) -> None:
        self.namespace = namespace
        self.key = component_key(description)
        self.enabled = enabled
        self.folder = cache_root(root) / f"{namespace}-{self.key}"
        self._memory: dict[str, dict] = {}
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0
        if enabled:
            self.folder.mkdir(parents=True, exist_ok=True)
            description_file = self.folder / "component.json"
            if not description_file.is_file():
                _write_atomic(description_file, json.dumps(description, indent=2, sort_keys=True, default=str))

    def _path(self, digest: str) -> Path:
        return self.folder / digest[:2] / f"{digest}.json"

    def get(self, digest: str) -> dict | None:
        """The stored result of a clip, or None (counted as a hit or a miss)."""
        with self._lock:
            known = self._memory.get(digest)
        if known is None and self.enabled:
            path = self._path(digest)
            if path.is_file():
                try:
                    known = json.loads(path.read_text(encoding="utf-8"))
                except (OSError, ValueError):
                    logger.warning("%s: unreadable cache entry, recomputing it", path)
                    known = None
                if known is not None:
                    with self._lock:
                        self._memory[digest] = known
        with self._lock:
            if known is None:
                self.misses += 1
            else:
                self.hits += 1
        return known

    def put(self, digest: str, value: dict) -> None:
        """Store a clip's result (JSON-ready dict)."""
        with self._lock:
            self._memory[digest] = value
        if self.enabled:
            path = self._path(digest)
            path.parent.mkdir(parents=True, exist_ok=True)
            _write_atomic(path, json.dumps(value, sort_keys=True))

    def stats(self) -> dict:
        with self._lock:
            return {"hits": self.hits, "misses": self.misses, "folder": str(self.folder) if self.enabled else None}


def _write_atomic(path: Path, text: str) -> None:
    """Temp file + rename, without fsync: a cache entry lost to a power cut is only recomputed."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
