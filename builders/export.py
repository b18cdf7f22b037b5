"""Export SpeechEQ rows as a Hub dataset repository folder: README.md card + data/test-*.parquet shards.

Shards embed the clips' original bytes (datasets.table.embed_table_storage),
are cut at a bounded size, and use small row groups so streaming readers hold
only a few dialogues' audio at a time. The card's statistics are computed from
the rows being exported. The folder is written next to its destination and
renamed into place, so a crash never leaves a half export.
"""

from __future__ import annotations

import logging
import os
import shutil
import statistics
import tempfile
from collections import Counter
from collections import defaultdict
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path

import datasets
import pyarrow as pa
import pyarrow.parquet as pq
import yaml
from datasets.table import embed_table_storage
from tqdm.auto import tqdm

from speecheq_dataset.builder import CITATION
from speecheq_dataset.builder import LICENSE
from speecheq_dataset.columns import CLIP_COLUMNS
from speecheq_dataset.raw import Rejection
from speecheq_dataset.schema import COLUMN_DOCS
from speecheq_dataset.schema import FEATURES
from speecheq_dataset.taxonomy import COMPOSITES
from speecheq_dataset.taxonomy import SUBSCALE_SLUGS
from speecheq_dataset.taxonomy import SUBSCALES
from speecheq_dataset.taxonomy import VALENCES

logger = logging.getLogger(__name__)

SPLIT = "test"
DEFAULT_MAX_SHARD_BYTES = 256 * 1024 * 1024
# ~8 clips x 100-200 kB per dialogue: 16 dialogues is a row group of a few tens of MB.
DEFAULT_ROWS_PER_GROUP = 16
NO_VALENCE = "(none, v1)"
EXPORT_MARKER = "data"


@dataclass(frozen=True)
class GroupStats:
    """Dialogue count and audio hours of one subscale or valence."""

    dialogues: int
    hours: float


@dataclass(frozen=True)
class Statistics:
    """What the card reports, computed from the exported rows."""

    dialogues: int
    hours: float
    mean_duration_s: float
    sd_duration_s: float  # sample standard deviation (n - 1); 0 for one dialogue
    by_subscale: dict[str, GroupStats]
    by_valence: dict[str, GroupStats]


@dataclass
class ExportResult:
    """An exported folder and what went into it."""

    out_dir: Path
    files: list[Path]
    stats: Statistics
    rejected: list[Rejection] = field(default_factory=list)

    @property
    def size_bytes(self) -> int:
        """Total size of the exported files."""
        return sum(f.stat().st_size for f in self.files)


def compute_statistics(subscales: list[str], valences: list[str | None], durations: list[float]) -> Statistics:
    """Dialogues and hours per subscale and valence, plus mean/sd of dialogue duration (seconds)."""
    if not (len(subscales) == len(valences) == len(durations)):
        raise ValueError("subscales, valences and durations must have one entry per dialogue")
    seconds_by_subscale: dict[str, float] = defaultdict(float)
    seconds_by_valence: dict[str, float] = defaultdict(float)
    count_subscale, count_valence = Counter(subscales), Counter(v or NO_VALENCE for v in valences)
    for sub, val, dur in zip(subscales, valences, durations):
        seconds_by_subscale[sub] += dur
        seconds_by_valence[val or NO_VALENCE] += dur
    ordered_subs = [s for s in SUBSCALE_SLUGS if s in count_subscale] + sorted(set(count_subscale) - set(SUBSCALE_SLUGS))
    ordered_vals = [v for v in (*VALENCES, NO_VALENCE) if v in count_valence]
    return Statistics(
        dialogues=len(durations),
        hours=sum(durations) / 3600,
        mean_duration_s=statistics.fmean(durations) if durations else 0.0,
        sd_duration_s=statistics.stdev(durations) if len(durations) > 1 else 0.0,
        by_subscale={s: GroupStats(count_subscale[s], seconds_by_subscale[s] / 3600) for s in ordered_subs},
        by_valence={v: GroupStats(count_valence[v], seconds_by_valence[v] / 3600) for v in ordered_vals},
    )


def dataset_statistics(ds: datasets.Dataset) -> Statistics:
    """Statistics of a SpeechEQ Dataset (reads only the small columns)."""
    small = ds.select_columns(["subscale", "scenario_valence", "duration_s"])
    return compute_statistics(small["subscale"], small["scenario_valence"], small["duration_s"])


def _yaml_header(stats: Statistics, split_bytes: int, download_bytes: int, pretty_name: str) -> str:
    size = "n<1K" if stats.dialogues < 1000 else "1K<n<10K" if stats.dialogues < 10_000 else "10K<n<100K"
    header = {
        "license": LICENSE,
        "language": ["en"],
        "pretty_name": pretty_name,
        "size_categories": [size],
        "task_categories": ["audio-classification", "audio-text-to-text"],
        "tags": ["speech", "emotional-intelligence", "paralinguistics", "benchmark", "eq-i"],
        "configs": [
            {"config_name": "default", "data_files": [{"split": SPLIT, "path": f"data/{SPLIT}-*.parquet"}]}
        ],
        "dataset_info": {
            "features": FEATURES._to_yaml_list(),
            "splits": [{"name": SPLIT, "num_bytes": split_bytes, "num_examples": stats.dialogues}],
            "download_size": download_bytes,
            "dataset_size": split_bytes,
        },
    }
    return "---\n" + yaml.safe_dump(header, sort_keys=False, allow_unicode=True) + "---\n"


def statistics_markdown(stats: Statistics) -> str:
    """The card's statistics section (Markdown tables)."""
    lines = [
        f"{stats.dialogues} dialogues, {stats.hours:.4f} h of audio; dialogue duration (sum of its eight clips) "
        f"mean {stats.mean_duration_s:.2f} s, sd {stats.sd_duration_s:.2f} s.",
        "",
        "| subscale | dialogues | hours |",
        "|---|---:|---:|",
        *(f"| `{s}` | {g.dialogues} | {g.hours:.4f} |" for s, g in stats.by_subscale.items()),
        "",
        "| scenario_valence | dialogues | hours |",
        "|---|---:|---:|",
        *(f"| {v} | {g.dialogues} | {g.hours:.4f} |" for v, g in stats.by_valence.items()),
    ]
    return "\n".join(lines)


def _type_label(feature) -> str:
    return feature.dtype if isinstance(feature, datasets.Value) else feature.__class__.__name__


def card_text(stats: Statistics, split_bytes: int, download_bytes: int, *, pretty_name: str = "SpeechEQ", source_note: str = "") -> str:
    """The full README.md dataset card."""
    taxonomy = "\n".join(
        f"| {c.name} (`{c.slug}`) | "
        + ", ".join(f"{s.name} (`{s.slug}`)" for s in SUBSCALES if s.composite == c)
        + " |"
        for c in COMPOSITES
    )
    columns = "\n".join(f"| `{name}` | {_type_label(FEATURES[name])} | {COLUMN_DOCS[name]} |" for name in FEATURES)
    body = f"""
# {pretty_name}

SpeechEQ measures the emotional intelligence (EQ) of speech-language models. Each row is a six-turn spoken
dialogue between a **catalyst** (turns 1, 3, 5) and a **test subject** (turns 2, 4, 6). Turns 4 and 6 each
have two recordings of the *same words*: a socially resonant delivery (`_high`, high EQ) and a dissonant one
(`_low`). A model hears the context and picks the fitting delivery; `Acc_traj` (both turns right) is the
primary score. Option order must be randomised: `_high` is not "option 1".
{source_note}
## Usage

```python
from datasets import load_dataset, Audio

ds = load_dataset("SpeechEQ/SpeechEQ", split="test")          # or a local export folder
ds = ds.cast_column("turn4_audio_high", Audio(sampling_rate=16000))  # resample for a model
clip = ds[0]["turn4_audio_high"]                               # decoder: clip["array"], clip["sampling_rate"]
```

Audio cells hold the clips' original encoded bytes (no re-encoding), so acoustic features are those of the
published recordings.

## Statistics

{statistics_markdown(stats)}

## Taxonomy (EQ-i 2.0)

| composite | subscales |
|---|---|
{taxonomy}

Scenario valence: `Positive` (amplify good news), `Negative` (hold space), `Conflict` (hold a boundary, ground
the other person).

## Columns

| column | type | meaning |
|---|---|---|
{columns}

## Known weakness

In the published data the resonant clip is often the slower and quieter one, so simple delivery rules score above
chance; report a prosody-shortcut baseline next to every model.

## License

{LICENSE}

## Citation

```bibtex
{CITATION}
```
"""
    return _yaml_header(stats, split_bytes, download_bytes, pretty_name) + body


def _replace_dir(tmp: Path, out_dir: Path) -> None:
    # Swap the finished export into place; an older export is removed only after the new one is in.
    old = None
    if out_dir.exists():
        old = out_dir.with_name(f".old-{out_dir.name}-{os.getpid()}")
        os.rename(out_dir, old)
    os.rename(tmp, out_dir)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _check_destination(out_dir: Path) -> None:
    if out_dir.exists():
        if not out_dir.is_dir():
            raise NotADirectoryError(f"export destination {out_dir} is a file")
        entries = {p.name for p in out_dir.iterdir()}
        if entries and not (entries <= {"README.md", EXPORT_MARKER, ".gitattributes"}):
            raise FileExistsError(
                f"export destination {out_dir} is not empty and not a previous export (found {sorted(entries)[:5]})"
            )


def write_shards(
    ds: datasets.Dataset,
    data_dir: Path,
    *,
    max_shard_bytes: int = DEFAULT_MAX_SHARD_BYTES,
    rows_per_group: int = DEFAULT_ROWS_PER_GROUP,
) -> list[Path]:
    """Write ds as data_dir/test-XXXXX-of-YYYYY.parquet with embedded audio; returns the shard paths."""
    if max_shard_bytes <= 0 or rows_per_group <= 0:
        raise ValueError(f"max_shard_bytes and rows_per_group must be positive, got {max_shard_bytes}, {rows_per_group}")
    data_dir.mkdir(parents=True, exist_ok=True)
    schema = FEATURES.arrow_schema
    missing = set(FEATURES) - set(ds.column_names)
    if missing:
        raise ValueError(f"dataset lacks SpeechEQ columns {sorted(missing)}")
    ds = ds.select_columns(list(FEATURES))
    # Dictionary-encode text only: clip bytes are unique blobs (and a dictionary would silently
    # deduplicate repeated clips, hiding the real size of a set that reuses recordings).
    dictionary_columns = [c for c in FEATURES if c not in CLIP_COLUMNS] + [f"{c}.path" for c in CLIP_COLUMNS]
    parts: list[Path] = []
    writer: pq.ParquetWriter | None = None
    shard_bytes = 0
    with tqdm(total=len(ds), desc="Writing parquet shards", unit="dialogue") as bar:
        for batch in ds.with_format("arrow").iter(batch_size=rows_per_group):
            table = pa.Table.from_batches(batch.to_batches(), schema=batch.schema).replace_schema_metadata(schema.metadata)
            # Path-only audio cells (e.g. a dataset built from files) get their bytes read in here.
            table = embed_table_storage(table).cast(schema)
            if writer is not None and shard_bytes + table.nbytes > max_shard_bytes:
                writer.close()
                writer = None
            if writer is None:
                parts.append(data_dir / f"part-{len(parts):05d}.parquet")
                writer = pq.ParquetWriter(parts[-1], schema, use_dictionary=dictionary_columns)
                shard_bytes = 0
            writer.write_table(table, row_group_size=rows_per_group)
            shard_bytes += table.nbytes
            bar.update(table.num_rows)
    if writer is not None:
        writer.close()
    shards = []
    for index, part in enumerate(parts):
        final = data_dir / f"{SPLIT}-{index:05d}-of-{len(parts):05d}.parquet"
        os.rename(part, final)
        shards.append(final)
    return shards


def export_hub_folder(
    ds: datasets.Dataset,
    out_dir: str | os.PathLike,
    *,
    rejected: list[Rejection] | None = None,
    max_shard_bytes: int = DEFAULT_MAX_SHARD_BYTES,
    rows_per_group: int = DEFAULT_ROWS_PER_GROUP,
    pretty_name: str = "SpeechEQ",
    source_note: str = "",
) -> ExportResult:
    """Write ds as a Hub dataset repository folder at out_dir (replacing a previous export there)."""
    out_dir = Path(out_dir)
    if len(ds) == 0:
        raise ValueError(f"nothing to export to {out_dir}: the dataset has no rows")
    _check_destination(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    stats = dataset_statistics(ds)
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{out_dir.name}-", dir=out_dir.parent))
    try:
        shards = write_shards(ds, tmp / EXPORT_MARKER, max_shard_bytes=max_shard_bytes, rows_per_group=rows_per_group)
        download_bytes = sum(s.stat().st_size for s in shards)
        split_bytes = sum(_uncompressed_bytes(s) for s in shards)
        card = card_text(stats, split_bytes, download_bytes, pretty_name=pretty_name, source_note=source_note)
        (tmp / "README.md").write_text(card, encoding="utf-8")
        _replace_dir(tmp, out_dir)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    files = [out_dir / "README.md", *sorted((out_dir / EXPORT_MARKER).glob("*.parquet"))]
    logger.info("exported %d dialogues to %s (%d files)", stats.dialogues, out_dir, len(files))
    return ExportResult(out_dir, files, stats, list(rejected or []))


def _uncompressed_bytes(path: Path) -> int:
    metadata = pq.ParquetFile(path).metadata
    return sum(metadata.row_group(i).total_byte_size for i in range(metadata.num_row_groups))


def build_export(
    raw_dir: str | os.PathLike,
    out_dir: str | os.PathLike,
    *,
    strict: bool = False,
    cache_dir: str | os.PathLike | None = None,
    **export_kwargs,
) -> ExportResult:
    """Raw generator output -> validated rows -> exported Hub folder (a fresh build, so rejections are reported)."""
    from speecheq_dataset.builder import build_raw

    with tempfile.TemporaryDirectory(prefix="speecheq-build-", dir=cache_dir) as build_cache:
        dataset, rejected = build_raw(raw_dir, strict=strict, cache_dir=build_cache)
        result = export_hub_folder(dataset, out_dir, rejected=rejected, **export_kwargs)
        del dataset  # release the memory map before the temporary build is removed
    return result


def export_sample(out_dir: str | os.PathLike, *, cache_root: str | os.PathLike | None = None) -> ExportResult:
    """Build (or reuse) the embedded sample and export it as a Hub folder at out_dir."""
    from speecheq_dataset.sample import load_sample

    note = (
        "\nThis is the **embedded sample** of the SpeechEQ toolkit: the project's own dialogue scripts rendered "
        "offline with espeak-ng (tone instructions mapped to pitch, rate and loudness), not the published data.\n"
    )
    return export_hub_folder(load_sample(cache_root), out_dir, pretty_name="SpeechEQ embedded sample", source_note=note)


def summarize(result: ExportResult) -> str:
    """A printable summary of an export: where, how big, and its statistics."""
    stats = result.stats
    lines = [
        f"SpeechEQ export at {result.out_dir}",
        f"  {stats.dialogues} dialogues, {stats.hours * 3600:.1f} s of audio "
        f"(mean {stats.mean_duration_s:.2f} s, sd {stats.sd_duration_s:.2f} s per dialogue), "
        f"{len(result.files)} files, {result.size_bytes / 1e6:.1f} MB",
        f"  subscales: {len(stats.by_subscale)}/{len(SUBSCALES)}; valences: "
        + ", ".join(f"{v} {g.dialogues}" for v, g in stats.by_valence.items()),
        f"  audio columns: {', '.join(CLIP_COLUMNS)}",
    ]
    if result.rejected:
        lines.append(f"  rejected folders: {len(result.rejected)}")
        lines += [f"    - {r.folder.name}: {r.code}" for r in result.rejected]
    lines.append(f"  load with: datasets.load_dataset({str(result.out_dir)!r}, split='test')")
    return "\n".join(lines)
