"""One entry point for every source of SpeechEQ rows: raw folder, exported Hub folder, Hub id, or the embedded sample."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

from .columns import CLIP_COLUMNS

if TYPE_CHECKING:  # imported where used: the runner's GPU bench fingerprints its rows on a box without `datasets`
    import datasets

logger = logging.getLogger(__name__)

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


def load_speecheq(
    source: str | os.PathLike | None = None,
    split: str = "test",
    *,
    cache_dir: str | os.PathLike | None = None,
) -> datasets.Dataset:
    """SpeechEQ rows (one per dialogue, audio as datasets.Audio) from `source`.

    source: a raw generator folder (`<slug>/<id>/metadata.json` + audio/01..08), an
    exported Hub repo folder (README.md + data/*.parquet), a Hub id such as
    "SpeechEQ/SpeechEQ", or None for the embedded sample (rendered offline, cached).
    cache_dir: where built/downloaded data is cached (default: the datasets cache,
    or for the sample `$SPEECHEQ_CACHE`, else `<HF_HOME>/speecheq`).
    """
    import datasets

    from .raw import looks_like_raw_dir

    if source is None:
        from .sample import load_sample

        return _check_split(load_sample(cache_root=cache_dir), split, "the embedded sample")
    path = Path(source).expanduser()
    if path.exists():
        if not path.is_dir():
            raise NotADirectoryError(f"SpeechEQ source {str(source)!r} is a file; expected a folder or a Hub id")
        if looks_like_raw_dir(path):
            from .builder import build_raw

            dataset, rejected = build_raw(path, cache_dir=cache_dir)
            if rejected:
                logger.warning("%s: %d dialogue folder(s) rejected (see warnings above)", path, len(rejected))
            return _check_split(dataset, split, str(path))
        if (path / "README.md").is_file() or any(path.glob("data/*.parquet")):
            _check_parquet_footers(path)
            return datasets.load_dataset(os.fspath(path), split=split, cache_dir=_str(cache_dir))
        raise ValueError(
            f"{path}: neither raw generator output (<slug>/<id>/metadata.json) nor an exported dataset "
            "folder (README.md + data/*.parquet)"
        )
    if isinstance(source, str) and _HUB_ID.match(source):
        return datasets.load_dataset(source, split=split, cache_dir=_str(cache_dir))
    raise FileNotFoundError(f"SpeechEQ source {str(source)!r}: no such folder, and not a Hub id like 'SpeechEQ/SpeechEQ'")


def _check_parquet_footers(export_dir: Path) -> None:
    """A ValueError naming the first shard of an export that is not a readable parquet file (datasets' own error names none)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    for shard in sorted(export_dir.rglob("*.parquet")):
        try:
            pq.read_schema(shard)
        except (OSError, pa.ArrowException) as exc:
            raise ValueError(f"{shard}: not a readable parquet file ({exc})") from exc


def _str(path) -> str | None:
    return None if path is None else os.fspath(path)


def _check_split(dataset: datasets.Dataset, split: str, where: str) -> datasets.Dataset:
    # Raw folders and the sample hold the benchmark's single split.
    if split != "test":
        raise ValueError(f"{where} has only the 'test' split, got split={split!r}")
    return dataset


def dataset_fingerprint(ds: datasets.Dataset) -> str:
    """Stable content hash: every row's non-audio fields plus the SHA-256 of each clip's encoded bytes.

    Equal for the same dialogues however they were loaded (raw, exported folder, Hub);
    order-sensitive, because row order is part of what a run saw. Row sources that are not a
    `datasets.Dataset` (bench/bench_gpu.py's pre-decoded clips) give their own `content_fingerprint()`.
    """
    own = getattr(ds, "content_fingerprint", None)
    if callable(own):
        return own()
    audio_columns = set(ds.column_names) & set(CLIP_COLUMNS)
    digest = hashlib.sha256()
    # Arrow format hands over the stored {bytes, path} cells without decoding any audio.
    for batch in ds.with_format("arrow").iter(batch_size=32):
        for row in batch.to_pylist():
            for name in audio_columns:
                cell = row[name]
                # Only the bytes identify a clip; the stored path differs between sources.
                row[name] = hashlib.sha256(cell["bytes"]).hexdigest() if cell and cell.get("bytes") else None
            digest.update(json.dumps(row, sort_keys=True, default=str).encode())
    return digest.hexdigest()[:16]
