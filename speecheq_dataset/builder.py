"""`datasets` builder: raw generator output (SPEC §2.1) -> one row per dialogue with the clips' original bytes.

Used locally (datasets >= 4 refuses Hub dataset scripts): instantiate
`SpeechEQBuilder(data_dir=RAW_DIR, cache_dir=...)`, then `download_and_prepare()`
and `as_dataset("test")`, or call `build_raw(RAW_DIR)`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path

import datasets

from .raw import METADATA_FILE
from .raw import RawDialogueError
from .raw import Rejection
from .raw import find_dialogue_folders
from .raw import iter_dialogues
from .schema import FEATURES

logger = logging.getLogger(__name__)

BUILDER_VERSION = "1.0.0"
DESCRIPTION = (
    "SpeechEQ: a benchmark of the emotional intelligence of speech-language models. Each row is a six-turn "
    "dialogue; turns 4 and 6 have a resonant (high-EQ) and a dissonant (low-EQ) recording of the same words."
)
CITATION = """@article{wu2026speecheq,
  title   = {SpeechEQ: Measuring the Emotional Intelligence of Speech-Language Models},
  author  = {Wu and Chen and Wu and Yang and Shen},
  journal = {arXiv preprint arXiv:2606.25990},
  year    = {2026}
}"""
LICENSE = "cc-by-4.0"
REJECTED_FILE = "speecheq_rejected.json"


def source_digest(raw_dir: Path | str) -> str:
    """Hash of the raw folder's file listing (relative path, size, mtime): a changed folder gets a new cache."""
    raw_dir = Path(raw_dir)
    digest = hashlib.sha256()
    for folder in find_dialogue_folders(raw_dir):
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            stat = path.stat()
            digest.update(f"{path.relative_to(raw_dir)}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:16]


class EncodedAudio(datasets.Audio):
    """datasets.Audio that stores an encoded clip's {bytes, path} as it is.

    datasets' own encode_example imports torchcodec's encoder even for bytes it keeps
    unchanged, and GPU images often have no FFmpeg for torchcodec to load: the builder
    must work there too. Other values (arrays) still go through datasets.
    """

    def encode_example(self, value):
        if isinstance(value, dict) and isinstance(value.get("bytes"), (bytes, bytearray)) and "array" not in value:
            return {"bytes": bytes(value["bytes"]), "path": value.get("path")}
        return super().encode_example(value)


def _building_features() -> datasets.Features:
    """FEATURES with EncodedAudio for the audio columns (the same storage, so the same Arrow schema and card)."""
    return datasets.Features({
        name: EncodedAudio(sampling_rate=feature.sampling_rate, decode=feature.decode) if isinstance(feature, datasets.Audio) else feature
        for name, feature in FEATURES.items()
    })


@dataclass
class SpeechEQConfig(datasets.BuilderConfig):
    """Builder options: `data_dir` is the raw folder; `strict` fails on the first faulty dialogue."""

    strict: bool = False
    # Set from the folder's listing so edits to the raw data invalidate the cache.
    source_digest: str = field(default="")

    def __post_init__(self):
        super().__post_init__()
        if not isinstance(self.strict, bool):
            raise TypeError(f"SpeechEQConfig.strict must be a bool, got {self.strict!r}")
        if self.data_dir is None:
            raise ValueError("SpeechEQConfig needs data_dir: the raw generator output folder")
        if not Path(self.data_dir).is_dir():
            raise FileNotFoundError(f"SpeechEQConfig.data_dir {self.data_dir!r} is not a folder")


class SpeechEQBuilder(datasets.GeneratorBasedBuilder):
    """Raw SpeechEQ generator output -> the `test` split; faulty folders land in `self.rejected`."""

    BUILDER_CONFIG_CLASS = SpeechEQConfig
    VERSION = datasets.Version(BUILDER_VERSION)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.rejected: list[Rejection] = []
        self.generated = False  # True once rows were generated (not reused from the cache)

    def _info(self) -> datasets.DatasetInfo:
        return datasets.DatasetInfo(
            description=DESCRIPTION,
            features=_building_features(),
            citation=CITATION,
            homepage="https://huggingface.co/datasets/SpeechEQ/SpeechEQ",
            license=LICENSE,
        )

    def _split_generators(self, dl_manager):
        return [datasets.SplitGenerator(name=datasets.Split.TEST, gen_kwargs={"raw_dir": self.config.data_dir})]

    def _generate_examples(self, raw_dir: str):
        self.rejected = []
        self.generated = True
        dialogues = iter_dialogues(raw_dir, strict=self.config.strict, rejected=self.rejected)
        for dialogue in dialogues:
            yield dialogue.id, dialogue.row()


def build_raw(
    raw_dir: Path | str,
    *,
    strict: bool = False,
    cache_dir: Path | str | None = None,
    force: bool = False,
) -> tuple[datasets.Dataset, list[Rejection]]:
    """Build (or reuse the cached build of) a raw folder; returns the test split and the rejected folders.

    A strict build raises the first folder's RawDialogueError unwrapped. `force` rebuilds
    even when a cache exists (so the rejection report is fresh).
    """
    raw_dir = Path(raw_dir).resolve()
    builder = SpeechEQBuilder(
        cache_dir=None if cache_dir is None else os.fspath(cache_dir),
        data_dir=os.fspath(raw_dir),
        strict=strict,
        source_digest=source_digest(raw_dir),
    )
    try:
        builder.download_and_prepare(
            download_mode=datasets.DownloadMode.FORCE_REDOWNLOAD if force else None,
        )
    except datasets.exceptions.DatasetGenerationError as exc:
        # datasets wraps generator errors; callers want the named raw fault itself.
        cause = exc.__cause__
        if isinstance(cause, (RawDialogueError, OSError)):  # a strict fault, or a failed write (disk full, ...)
            raise cause from None
        raise
    # The rejection report is kept beside the cached build so a cache hit reports it too.
    report = Path(builder.cache_dir) / REJECTED_FILE
    if builder.generated:
        payload = [{"folder": str(r.folder), "code": r.code, "message": r.message} for r in builder.rejected]
        report.write_text(json.dumps(payload, indent=1), encoding="utf-8")
    elif report.is_file():
        builder.rejected = [
            Rejection(Path(r["folder"]), r["code"], r["message"]) for r in json.loads(report.read_text(encoding="utf-8"))
        ]
    dataset = builder.as_dataset(split="test")
    if len(dataset) == 0:
        reasons = "; ".join(r.message for r in builder.rejected[:5])
        raise ValueError(f"{raw_dir}: no valid dialogue folders ({METADATA_FILE}); {reasons}")
    return dataset, builder.rejected
