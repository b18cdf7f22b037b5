"""Export SpeechEQ rows as a Hub dataset repository folder: README.md card + data/test-*.parquet shards.

Shards embed the clips' original bytes (datasets.table.embed_table_storage),
are cut at a bounded size, and use small row groups so streaming readers hold
only a few dialogues' audio at a time. The card's statistics are computed from
the rows being exported. The folder is written next to its destination and
renamed into place, so a crash never leaves a half export.

An export is never written over anything it cannot prove it wrote: every export
leaves a marker file listing its files, and a destination that holds anything
else is refused by name. Replacing an earlier export needs `overwrite=True`.
"""

from __future__ import annotations

import json
import logging
import os
import re
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
from speecheq_dataset.files import make_temp_dir
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
DATA_DIR = "data"
CARD_FILE = "README.md"
# Written by every export, listing its files; stays local (push uploads only UPLOAD_PATTERNS).
MARKER_FILE = ".speecheq-export.json"
MARKER_FORMAT = "speecheq-export/1"
# A file the user may add to an export for the Hub; kept across a replacement, never deleted.
KEPT_FILES = (".gitattributes",)
SHARD_NAME = re.compile(rf"^{SPLIT}-\d{{5}}-of-\d{{5}}\.parquet$")
LICENSE_ID = re.compile(r"^[a-z0-9][a-z0-9.+\-]*$")  # the Hub's license ids: cc-by-4.0, apache-2.0, mit, other, ...


class ExportDestinationError(ValueError):
    """The export's destination holds something the export did not write, or an export that needs --overwrite."""


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
    warnings: list[str] = field(default_factory=list)  # things in the raw folder that were passed over

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


def check_card_fields(license: str, pretty_name: str) -> None:
    """ValueError naming a license id or pretty name that cannot go into a card's YAML header."""
    if not LICENSE_ID.match(license):
        raise ValueError(f"--license {license!r} is not a Hub license id (e.g. cc-by-4.0, mit, apache-2.0, other)")
    if not pretty_name.strip() or "\n" in pretty_name:
        raise ValueError(f"--pretty-name {pretty_name!r} must be one non-empty line")


def _yaml_header(stats: Statistics, split_bytes: int, download_bytes: int, pretty_name: str, license: str) -> str:
    size = "n<1K" if stats.dialogues < 1000 else "1K<n<10K" if stats.dialogues < 10_000 else "10K<n<100K"
    header = {
        "license": license,
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


def card_text(stats: Statistics, split_bytes: int, download_bytes: int, *, pretty_name: str = "SpeechEQ", source_note: str = "",
              license: str = LICENSE, license_given: bool = False) -> str:
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

`{license}`: {"given with `--license` when this folder was exported." if license_given else
              "the default of `speecheq dataset build`, not a statement about your data; choose yours with `--license`."}

## Citation

```bibtex
{CITATION}
```
"""
    return _yaml_header(stats, split_bytes, download_bytes, pretty_name, license) + body


def _listed_files(out_dir: Path) -> set[str] | None:
    """The files a folder's export marker lists (relative paths), or None when there is no readable marker."""
    try:
        marker = json.loads((out_dir / MARKER_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(marker, dict) or marker.get("format") != MARKER_FORMAT or not isinstance(marker.get("files"), list):
        return None
    return {f for f in marker["files"] if isinstance(f, str)}


def foreign_entries(out_dir: Path) -> list[str]:
    """What in out_dir a SpeechEQ export did not write (relative paths); everything when it has no marker."""
    listed = _listed_files(out_dir)
    entries = sorted(p.name for p in out_dir.iterdir())
    if listed is None:  # name the files themselves, not just the folders holding them
        return sorted(p.relative_to(out_dir).as_posix() for p in out_dir.rglob("*") if not p.is_dir() or not any(p.iterdir()))
    foreign = []
    for name in entries:
        path = out_dir / name
        if name in (MARKER_FILE, *KEPT_FILES) and path.is_file() and not path.is_symlink():
            continue
        if name == CARD_FILE and name in listed and path.is_file() and not path.is_symlink():
            continue
        if name == DATA_DIR and path.is_dir() and not path.is_symlink():
            for shard in sorted(path.iterdir()):
                relative = f"{DATA_DIR}/{shard.name}"
                ours = SHARD_NAME.match(shard.name) and relative in listed and shard.is_file() and not shard.is_symlink()
                if not ours:
                    foreign.append(relative)
            continue
        foreign.append(name)
    return foreign


def _contains(outer: Path, inner: Path) -> bool:
    return outer == inner or outer in inner.parents


def check_destination(out_dir: Path, *, overwrite: bool, sources: tuple[Path, ...] = ()) -> None:
    """Refuse a destination the export may not write: a file, a link, a folder holding or inside a source, or one with foreign files.

    An earlier export of ours is replaced only with `overwrite`.
    """
    out_dir = Path(out_dir)
    if out_dir.is_symlink():
        raise ExportDestinationError(f"export destination {out_dir} is a symbolic link; give the real folder")
    resolved = out_dir.resolve()
    for source in sources:
        source = Path(source).resolve()
        if _contains(resolved, source):
            raise ExportDestinationError(f"export destination {out_dir} contains the source folder {source}; choose another destination")
        if _contains(source, resolved):
            raise ExportDestinationError(f"export destination {out_dir} is inside the source folder {source}; choose another destination")
    if not out_dir.exists():
        return
    if not out_dir.is_dir():
        raise ExportDestinationError(f"export destination {out_dir} is a file")
    if not any(out_dir.iterdir()):
        return
    foreign = foreign_entries(out_dir)
    if foreign:
        shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
        raise ExportDestinationError(
            f"export destination {out_dir} holds files a SpeechEQ export did not write ({shown}); choose an empty or new folder"
        )
    if not overwrite:
        raise ExportDestinationError(f"export destination {out_dir} already holds a SpeechEQ export; pass --overwrite to replace it")


def _remove_export(folder: Path) -> None:
    """Delete an old export's own files (as its marker lists them), then its folders if that left them empty."""
    listed = _listed_files(folder) or set()
    for relative in sorted(listed | {MARKER_FILE}):
        path = folder / relative
        if path.is_file() and not path.is_symlink():
            path.unlink()
    for directory in (folder / DATA_DIR, folder):
        try:
            directory.rmdir()
        except FileNotFoundError:
            pass
        except OSError:
            logger.warning("left %s in place: it holds files the old export did not write", directory)


def _swap_into_place(tmp: Path, out_dir: Path) -> None:
    """Move the finished export to out_dir; an old export there is removed only after the new one is in."""
    if not out_dir.exists():
        os.rename(tmp, out_dir)
        return
    for name in KEPT_FILES:  # the user's own additions move into the new export
        if (out_dir / name).is_file():
            os.rename(out_dir / name, tmp / name)
    if not any(out_dir.iterdir()):
        os.rename(tmp, out_dir)  # rename(2) replaces an empty folder
        return
    old = out_dir.with_name(f".old-{out_dir.name}-{os.getpid()}")
    os.rename(out_dir, old)
    os.rename(tmp, out_dir)
    _remove_export(old)


def _write_marker(folder: Path, files: list[Path], dialogues: int) -> None:
    listing = sorted(f.relative_to(folder).as_posix() for f in files)
    payload = {"format": MARKER_FORMAT, "dialogues": dialogues, "files": listing}
    (folder / MARKER_FILE).write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")


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
    overwrite: bool = False,
    sources: tuple[str | os.PathLike, ...] = (),
    rejected: list[Rejection] | None = None,
    warnings: list[str] | None = None,
    max_shard_bytes: int = DEFAULT_MAX_SHARD_BYTES,
    rows_per_group: int = DEFAULT_ROWS_PER_GROUP,
    pretty_name: str = "SpeechEQ",
    source_note: str = "",
    license: str | None = None,
) -> ExportResult:
    """Write ds as a Hub dataset repository folder at out_dir.

    out_dir must be new, empty, or (with `overwrite`) an earlier SpeechEQ export; `sources`
    are folders the export must neither contain nor sit inside (the raw data it reads).
    """
    out_dir = Path(out_dir)
    if len(ds) == 0:
        raise ValueError(f"nothing to export to {out_dir}: the dataset has no rows")
    check_card_fields(license or LICENSE, pretty_name)
    check_destination(out_dir, overwrite=overwrite, sources=tuple(Path(s) for s in sources))
    stats = dataset_statistics(ds)
    tmp = make_temp_dir(out_dir, prefix=f".tmp-{out_dir.name}-")
    try:
        try:
            shards = write_shards(ds, tmp / DATA_DIR, max_shard_bytes=max_shard_bytes, rows_per_group=rows_per_group)
        except OSError as exc:
            if exc.filename is not None:
                raise
            raise OSError(exc.errno, exc.strerror or str(exc), os.fspath(tmp / DATA_DIR)) from exc
        download_bytes = sum(s.stat().st_size for s in shards)
        split_bytes = sum(_uncompressed_bytes(s) for s in shards)
        card = card_text(stats, split_bytes, download_bytes, pretty_name=pretty_name, source_note=source_note,
                         license=license or LICENSE, license_given=license is not None)
        (tmp / CARD_FILE).write_text(card, encoding="utf-8")
        _write_marker(tmp, [tmp / CARD_FILE, *shards], stats.dialogues)
        check_destination(out_dir, overwrite=overwrite)  # again: the folder may have changed while we wrote
        _swap_into_place(tmp, out_dir)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    files = [out_dir / CARD_FILE, *sorted((out_dir / DATA_DIR).glob("*.parquet"))]
    logger.info("exported %d dialogues to %s (%d files)", stats.dialogues, out_dir, len(files))
    return ExportResult(out_dir, files, stats, list(rejected or []), list(warnings or []))


def _uncompressed_bytes(path: Path) -> int:
    metadata = pq.ParquetFile(path).metadata
    return sum(metadata.row_group(i).total_byte_size for i in range(metadata.num_row_groups))


def build_export(
    raw_dir: str | os.PathLike,
    out_dir: str | os.PathLike,
    *,
    strict: bool = False,
    overwrite: bool = False,
    cache_dir: str | os.PathLike | None = None,
    **export_kwargs,
) -> ExportResult:
    """Raw generator output -> validated rows -> exported Hub folder (a fresh build, so rejections are reported)."""
    from speecheq_dataset.builder import build_raw
    from speecheq_dataset.raw import scan_raw_dir

    # Checked before the (long) build, and again by the export itself.
    check_card_fields(export_kwargs.get("license") or LICENSE, export_kwargs.get("pretty_name", "SpeechEQ"))
    check_destination(Path(out_dir), overwrite=overwrite, sources=(Path(raw_dir),))
    warnings = scan_raw_dir(raw_dir).warnings()
    with tempfile.TemporaryDirectory(prefix="speecheq-build-", dir=cache_dir) as build_cache:
        try:
            dataset, rejected = build_raw(raw_dir, strict=strict, cache_dir=build_cache)
        except OSError as exc:
            if exc.filename is not None:
                raise
            # A failed write carries no path; name where the build was writing (its temporary cache).
            raise OSError(exc.errno, exc.strerror or str(exc), build_cache) from exc
        result = export_hub_folder(dataset, out_dir, overwrite=overwrite, sources=(raw_dir,), rejected=rejected,
                                   warnings=warnings, **export_kwargs)
        del dataset  # release the memory map before the temporary build is removed
    return result


def export_sample(out_dir: str | os.PathLike, *, overwrite: bool = False, cache_root: str | os.PathLike | None = None,
                  license: str | None = None, pretty_name: str = "SpeechEQ embedded sample") -> ExportResult:
    """Build (or reuse) the embedded sample and export it as a Hub folder at out_dir."""
    from speecheq_dataset.sample import load_sample

    note = (
        "\nThis is the **embedded sample** of the SpeechEQ toolkit: the project's own dialogue scripts rendered "
        "offline with espeak-ng (tone instructions mapped to pitch, rate and loudness), not the published data.\n"
    )
    check_card_fields(license or LICENSE, pretty_name)
    check_destination(Path(out_dir), overwrite=overwrite)
    return export_hub_folder(load_sample(cache_root), out_dir, overwrite=overwrite, pretty_name=pretty_name,
                             source_note=note, license=license)


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
    if result.warnings:
        lines.append(f"  passed over in the raw folder: {len(result.warnings)}")
        lines += [f"    - {warning}" for warning in result.warnings]
    lines.append(f"  load with: datasets.load_dataset({str(result.out_dir)!r}, split='test')")
    return "\n".join(lines)
