"""Delivery features of encoded clips, cached on disk by the clip's SHA-256 (one JSONL line per clip).

The generation pipeline, `speecheq validate` and `speecheq audit` measure the
same clips again and again (re-runs, audits of a raw folder and of its export);
a clip is decoded and measured once per feature version.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from pathlib import Path

from speecheq_dataset.acoustics import FEATURES_VERSION
from speecheq_dataset.acoustics import ClipFeatures
from speecheq_dataset.acoustics import clip_features
from speecheq_dataset.audio import decode_audio

logger = logging.getLogger(__name__)


def clip_hash(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def default_cache_path() -> Path:
    """$SPEECHEQ_CACHE, else <HF_HOME>/speecheq: `features-<version>.jsonl` (beside the embedded sample's cache)."""
    from speecheq_dataset.sample import sample_cache_root

    return sample_cache_root() / f"features-{FEATURES_VERSION}.jsonl"


class FeatureCache:
    """Features by clip hash, in memory and (when `path` is set) appended to a JSONL file (thread-safe)."""

    def __init__(self, path: Path | str | None = None):
        self.path = Path(path) if path else None
        self._known: dict[str, ClipFeatures] = {}
        self._lock = threading.Lock()
        self.hits = self.misses = 0
        if self.path and self.path.is_file():
            with self.path.open("r", encoding="utf-8") as lines:
                for line in lines:
                    try:
                        entry = json.loads(line)
                        if entry.get("version") == FEATURES_VERSION:
                            self._known[entry["sha256"]] = ClipFeatures.from_dict(entry["features"])
                    except (ValueError, KeyError, TypeError):
                        continue  # a line cut short by a crash: measured again when needed

    def __len__(self) -> int:
        return len(self._known)

    def get(self, data: bytes, *, name: str = "") -> ClipFeatures:
        """Features of an encoded clip: from the cache, or decoded and measured now (and stored)."""
        key = clip_hash(data)
        with self._lock:
            known = self._known.get(key)
            if known is not None:
                self.hits += 1
                return known
        features = clip_features(*decode_audio(data, name=name))
        self.put(key, features)
        return features

    def put(self, key: str, features: ClipFeatures) -> None:
        with self._lock:
            self.misses += 1
            self._known[key] = features
            if self.path is not None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                line = json.dumps({"sha256": key, "version": FEATURES_VERSION, "features": features.as_dict()})
                with self.path.open("a", encoding="utf-8") as out:
                    out.write(line + "\n")
                    out.flush()
                    os.fsync(out.fileno())
