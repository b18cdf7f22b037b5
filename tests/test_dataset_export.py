"""The 45 real dialogues -> Hub folder: bytes, durations, card statistics, loading paths, push dry-run, CLI."""

from __future__ import annotations

import json
import re
import statistics
from collections import Counter
from collections import defaultdict
from pathlib import Path

import datasets
import numpy as np
import pyarrow.parquet as pq
import pytest
import soundfile as sf
import yaml
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from builders import cli
from builders.export import build_export
from builders.export import ExportDestinationError
from builders.export import compute_statistics
from builders.export import export_hub_folder
from builders.push import plan_upload
from builders.push import push_folder
from speecheq_dataset.builder import build_raw
from speecheq_dataset.columns import CLIP_COLUMNS
from speecheq_dataset.loading import dataset_fingerprint
from speecheq_dataset.loading import load_speecheq
from speecheq_dataset.raw import CLIP_SLOTS
from speecheq_dataset.schema import FEATURES
from speecheq_dataset.taxonomy import SUBSCALE_SLUGS

MP3_FRAME_SAMPLES = 1152  # one MPEG-1 Layer III frame


@pytest.fixture(scope="session")
def built(real_raw_dir, tmp_path_factory):
    """The 45 real dialogues, built once: (builder dataset, export result, HF cache dir)."""
    root = tmp_path_factory.mktemp("real45")
    dataset, rejected = build_raw(real_raw_dir, cache_dir=root / "build-cache")
    assert rejected == []
    result = export_hub_folder(dataset, root / "export")
    return dataset, result, root / "hf-cache"


@pytest.fixture(scope="session")
def exported(built):
    """load_dataset() of the exported folder, audio left undecoded."""
    _, result, cache = built
    ds = datasets.load_dataset(str(result.out_dir), split="test", cache_dir=str(cache))
    return ds.cast(datasets.Features({**ds.features, **{c: datasets.Audio(decode=False) for c in CLIP_COLUMNS}}))


def _source_folder(real_raw_dir: Path, row: dict) -> Path:
    return real_raw_dir / row["subscale"] / row["id"]


@pytest.mark.slow
def test_one_row_per_real_dialogue(exported, real_raw_dir):
    folders = {p.parent.name for p in real_raw_dir.glob("*/*/metadata.json")}
    assert len(exported) == 45 == len(folders)
    assert set(exported["id"]) == folders
    assert set(exported["subscale"]) == set(SUBSCALE_SLUGS)


@pytest.mark.slow
def test_every_audio_cell_holds_the_source_file_bytes(exported, real_raw_dir):
    for row in exported:
        folder = _source_folder(real_raw_dir, row)
        for column, (stem, _, _) in zip(CLIP_COLUMNS, CLIP_SLOTS):
            assert row[column]["bytes"] == (folder / "audio" / f"{stem}.mp3").read_bytes(), (row["id"], column)


@pytest.mark.slow
def test_decoded_durations_match_source_within_one_frame(built, real_raw_dir):
    _, result, cache = built
    ds = datasets.load_dataset(str(result.out_dir), split="test", cache_dir=str(cache))
    for row in ds:
        folder = _source_folder(real_raw_dir, row)
        for column, (stem, _, _) in zip(CLIP_COLUMNS, CLIP_SLOTS):
            decoded = row[column]
            seconds = len(decoded["array"]) / decoded["sampling_rate"]
            # An independent decoder (libsndfile) on the source file.
            info = sf.info(folder / "audio" / f"{stem}.mp3")
            assert abs(seconds - info.frames / info.samplerate) <= MP3_FRAME_SAMPLES / info.samplerate, (row["id"], column)


def test_candidate_pairs_share_text_with_the_turn(exported, real_raw_dir):
    for row in exported:
        metadata = json.loads((_source_folder(real_raw_dir, row) / "metadata.json").read_text())
        for turn in (4, 6):
            texts = {e["text"] for e in metadata["audio_files"] if e["sentence_number"] == turn}
            assert texts == {row[f"turn{turn}_text"]}
        assert row["turn4_tone_high"] != row["turn4_tone_low"]


def _card_tables(card: str) -> dict[str, dict[str, tuple[int, float]]]:
    tables: dict[str, dict[str, tuple[int, float]]] = {}
    for key in ("subscale", "scenario_valence"):
        block = card.split(f"| {key} | dialogues | hours |", 1)[1].split("\n\n", 1)[0]
        rows = re.findall(r"^\| `?([^|`]+?)`? \| (\d+) \| ([\d.]+) \|$", block, flags=re.M)
        tables[key] = {name: (int(n), float(h)) for name, n, h in rows}
    return tables


def test_card_statistics_equal_an_independent_count(built, real_raw_dir):
    _, result, _ = built
    card = (result.out_dir / "README.md").read_text()
    seconds_per_folder = {
        folder: sum(sf.info(f).frames / sf.info(f).samplerate for f in sorted((folder / "audio").glob("*.mp3")))
        for folder in (p.parent for p in real_raw_dir.glob("*/*/metadata.json"))
    }
    by_subscale: dict[str, float] = defaultdict(float)
    for folder, seconds in seconds_per_folder.items():
        by_subscale[folder.parent.name] += seconds
    counts = Counter(folder.parent.name for folder in seconds_per_folder)
    tables = _card_tables(card)
    assert tables["subscale"] == {s: (counts[s], round(by_subscale[s] / 3600, 4)) for s in counts}
    total = sum(seconds_per_folder.values())
    assert tables["scenario_valence"] == {"(none, v1)": (45, round(total / 3600, 4))}
    durations = list(seconds_per_folder.values())
    assert f"mean {statistics.fmean(durations):.2f} s, sd {statistics.stdev(durations):.2f} s" in card
    assert f"45 dialogues, {total / 3600:.4f} h of audio" in card


def test_card_yaml_declares_configs_features_license(built):
    _, result, _ = built
    card = (result.out_dir / "README.md").read_text()
    header = yaml.safe_load(card.split("---\n")[1])
    assert header["configs"] == [{"config_name": "default", "data_files": [{"split": "test", "path": "data/test-*.parquet"}]}]
    assert datasets.Features._from_yaml_list(header["dataset_info"]["features"]) == FEATURES
    assert header["dataset_info"]["splits"][0]["num_examples"] == 45
    assert header["license"] == "cc-by-4.0"
    assert "@article{" in card and "## Taxonomy" in card
    for column in FEATURES:
        assert f"| `{column}` |" in card, f"column {column} documented"


def test_streaming_and_regular_loading_give_the_same_rows(built, exported):
    _, result, _ = built
    streamed = datasets.load_dataset(str(result.out_dir), split="test", streaming=True)
    for column in CLIP_COLUMNS:
        streamed = streamed.cast_column(column, datasets.Audio(decode=False))

    def comparable(row):
        return {k: (v["bytes"] if k in CLIP_COLUMNS else v) for k, v in row.items()}

    assert [comparable(r) for r in streamed] == [comparable(r) for r in exported]


def test_resampling_cast_for_model_input(built):
    _, result, cache = built
    ds = datasets.load_dataset(str(result.out_dir), split="test", cache_dir=str(cache))
    native = ds[0]["turn4_audio_low"]
    resampled = ds.cast_column("turn4_audio_low", datasets.Audio(sampling_rate=16000))[0]["turn4_audio_low"]
    assert (native["sampling_rate"], resampled["sampling_rate"]) == (24000, 16000)
    expected = len(native["array"]) * 16000 / 24000
    assert abs(resampled["array"].shape[-1] - expected) <= 16000 * 0.01
    assert np.isfinite(resampled["array"]).all()


@pytest.mark.slow
def test_fingerprint_is_the_same_from_every_source(built, exported, real_raw_dir):
    dataset, result, cache = built
    expected = dataset_fingerprint(dataset)
    assert dataset_fingerprint(exported) == expected
    assert dataset_fingerprint(load_speecheq(result.out_dir, cache_dir=cache)) == expected
    assert dataset_fingerprint(load_speecheq(real_raw_dir, cache_dir=cache)) == expected
    assert dataset_fingerprint(dataset.select(range(44))) != expected


@pytest.mark.slow
def test_shards_are_size_bounded_and_rows_survive(built, tmp_path):
    dataset, _, _ = built
    limit = 6 * 2**20
    result = export_hub_folder(dataset, tmp_path / "small-shards", max_shard_bytes=limit, rows_per_group=4)
    shards = sorted((result.out_dir / "data").glob("*.parquet"))
    assert len(shards) >= 5
    assert [s.name for s in shards] == [f"test-{i:05d}-of-{len(shards):05d}.parquet" for i in range(len(shards))]
    for shard in shards:
        metadata = pq.ParquetFile(shard).metadata
        # A shard may overshoot by at most the row group that crossed the limit.
        assert sum(metadata.row_group(i).total_byte_size for i in range(metadata.num_row_groups)) <= limit + 4 * 2**20
        assert all(metadata.row_group(i).num_rows <= 4 for i in range(metadata.num_row_groups))
    reloaded = datasets.load_dataset(str(result.out_dir), split="test", cache_dir=str(tmp_path / "hf"))
    assert dataset_fingerprint(reloaded) == dataset_fingerprint(dataset)


def test_export_refuses_to_overwrite_foreign_folders(built, tmp_path):
    dataset, _, _ = built
    (tmp_path / "precious").mkdir()
    (tmp_path / "precious" / "thesis.tex").write_text("do not delete")
    with pytest.raises(ExportDestinationError, match="precious.*thesis.tex"):
        export_hub_folder(dataset.select(range(2)), tmp_path / "precious")
    assert (tmp_path / "precious" / "thesis.tex").read_text() == "do not delete"
    # A previous export is replaced whole with overwrite=True, and nothing temporary is left beside it.
    export_hub_folder(dataset.select(range(3)), tmp_path / "out")
    with pytest.raises(ExportDestinationError, match="already holds a SpeechEQ export; pass --overwrite"):
        export_hub_folder(dataset.select(range(2)), tmp_path / "out")
    export_hub_folder(dataset.select(range(2)), tmp_path / "out", overwrite=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "precious"]
    assert pq.ParquetFile(next((tmp_path / "out" / "data").glob("*.parquet"))).metadata.num_rows == 2


def _looks_like_an_export(folder):
    """Issue 8.1's reproducer: a README.md and a data/ folder that are not ours."""
    (folder / "data").mkdir(parents=True)
    (folder / "README.md").write_text("notes")
    (folder / "data" / "important.csv").write_text("a,b")


@pytest.mark.parametrize("overwrite", [False, True])
def test_a_folder_that_merely_looks_like_an_export_is_never_replaced(built, tmp_path, overwrite):
    dataset, _, _ = built
    _looks_like_an_export(tmp_path / "P")
    with pytest.raises(ExportDestinationError, match=r"did not write \(README.md"):
        export_hub_folder(dataset.select(range(2)), tmp_path / "P", overwrite=overwrite)
    assert (tmp_path / "P" / "data" / "important.csv").read_text() == "a,b"
    assert (tmp_path / "P" / "README.md").read_text() == "notes"


def test_a_file_added_to_an_export_blocks_its_replacement_and_gitattributes_is_kept(built, tmp_path):
    dataset, _, _ = built
    export_hub_folder(dataset.select(range(2)), tmp_path / "out")
    (tmp_path / "out" / "data" / "notes.csv").write_text("mine")
    with pytest.raises(ExportDestinationError, match="data/notes.csv"):
        export_hub_folder(dataset.select(range(3)), tmp_path / "out", overwrite=True)
    (tmp_path / "out" / "data" / "notes.csv").unlink()
    (tmp_path / "out" / ".gitattributes").write_text("*.parquet filter=lfs")
    export_hub_folder(dataset.select(range(3)), tmp_path / "out", overwrite=True)
    assert (tmp_path / "out" / ".gitattributes").read_text() == "*.parquet filter=lfs"
    marker = json.loads((tmp_path / "out" / ".speecheq-export.json").read_text())
    assert marker["dialogues"] == 3 and marker["files"] == ["README.md", "data/test-00000-of-00001.parquet"]


@pytest.mark.parametrize("layout", ["raw inside out", "out inside raw", "same folder"])
def test_a_source_and_the_destination_may_not_contain_each_other(built, tmp_path, layout):
    # Issue 8.2: RAW_DIR inside OUT_DIR was deleted and replaced by parquet.
    dataset, _, _ = built
    raw, out = {"raw inside out": (tmp_path / "P2" / "data", tmp_path / "P2"),
                "out inside raw": (tmp_path / "raw", tmp_path / "raw" / "export"),
                "same folder": (tmp_path / "same", tmp_path / "same")}[layout]
    raw.mkdir(parents=True, exist_ok=True)
    (raw / "keep.txt").write_text("raw data")
    with pytest.raises(ExportDestinationError, match="contains the source|inside the source"):
        export_hub_folder(dataset.select(range(2)), out, sources=(raw,), overwrite=True)
    assert (raw / "keep.txt").read_text() == "raw data"


def test_push_dry_run_lists_the_upload_offline(built, monkeypatch):
    _, result, _ = built

    def no_network(*args, **kwargs):
        raise AssertionError("dry run must not touch the Hub")

    monkeypatch.setattr("huggingface_hub.HfApi.upload_folder", no_network)
    monkeypatch.setattr("huggingface_hub.HfApi.create_repo", no_network)
    plan = push_folder(result.out_dir, "SpeechEQ/SpeechEQ", dry_run=True)
    assert [p.path_in_repo for p in plan] == ["README.md", "data/test-00000-of-00001.parquet"]
    assert [p.size_bytes for p in plan] == [f.stat().st_size for f in result.files]


def test_push_without_token_fails_before_any_request(built, monkeypatch):
    _, result, _ = built
    monkeypatch.setattr("huggingface_hub.get_token", lambda: None)
    monkeypatch.setattr("huggingface_hub.HfApi.create_repo", lambda *a, **k: pytest.fail("no request without a token"))
    with pytest.raises(PermissionError, match="HF_TOKEN"):
        push_folder(result.out_dir, "SpeechEQ/SpeechEQ")


@pytest.mark.parametrize("repo_id", ["SpeechEQ", "a/b/c", "/name", "owner/"])
def test_push_rejects_malformed_repo_ids(built, repo_id):
    _, result, _ = built
    with pytest.raises(ValueError, match=re.escape(repr(repo_id))):
        push_folder(result.out_dir, repo_id, dry_run=True)


def test_push_plan_names_what_is_missing(tmp_path):
    with pytest.raises(FileNotFoundError, match="README.md"):
        plan_upload(tmp_path)
    (tmp_path / "README.md").write_text("card")
    with pytest.raises(FileNotFoundError, match="parquet"):
        plan_upload(tmp_path)


def test_cli_build_reports_rejected_folders_and_strict_fails(real_raw_dir, tmp_path, capsys, copy_dialogue):
    raw = tmp_path / "raw"
    for meta in sorted(real_raw_dir.glob("*/*/metadata.json"))[:3]:
        copy_dialogue(meta.parent, raw)
    broken = sorted(raw.glob("*/*"))[1]
    (broken / "audio" / "07.mp3").unlink()

    assert cli.main(["build", str(raw), str(tmp_path / "out")]) == 0
    out, err = capsys.readouterr()
    assert "2 dialogues" in out
    assert "Rejected 1 dialogue folder(s)" in err and "missing_clip" in err and str(broken) in err
    assert len(datasets.load_dataset(str(tmp_path / "out"), split="test", cache_dir=str(tmp_path / "hf"))) == 2

    assert cli.main(["build", str(raw), str(tmp_path / "strict-out"), "--strict"]) == 1
    _, err = capsys.readouterr()
    assert "missing_clip" in err and broken.name in err
    assert not (tmp_path / "strict-out").exists()

    assert cli.main(["push", str(tmp_path / "out"), "--repo-id", "me/speecheq", "--dry-run"]) == 0
    out, _ = capsys.readouterr()
    assert "would upload 2 files" in out and "data/test-00000-of-00001.parquet" in out


@pytest.mark.slow
def test_build_export_end_to_end_on_real_folder(real_raw_dir, tmp_path):
    # The same path `speecheq dataset build` takes, with its own fresh build.
    result = build_export(real_raw_dir, tmp_path / "out", strict=True)
    assert result.stats.dialogues == 45 and result.rejected == []


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(SUBSCALE_SLUGS[:4]), st.sampled_from(["Positive", "Conflict", None]), st.floats(1, 200)),
        min_size=1,
        max_size=30,
    )
)
def test_statistics_sum_back_to_the_totals(rows):
    subs, vals, durs = (list(x) for x in zip(*rows))
    stats = compute_statistics(subs, vals, durs)
    assert sum(g.dialogues for g in stats.by_subscale.values()) == len(rows) == stats.dialogues
    assert sum(g.dialogues for g in stats.by_valence.values()) == len(rows)
    assert sum(g.hours for g in stats.by_subscale.values()) == pytest.approx(sum(durs) / 3600)
    assert sum(g.hours for g in stats.by_valence.values()) == pytest.approx(stats.hours)
    assert stats.mean_duration_s == pytest.approx(np.mean(durs))
    assert stats.sd_duration_s == pytest.approx(np.std(durs, ddof=1) if len(durs) > 1 else 0.0)


def test_statistics_hand_worked():
    stats = compute_statistics(["a", "b", "a"], ["Positive", None, "Positive"], [60.0, 120.0, 180.0])
    assert {k: g.dialogues for k, g in stats.by_subscale.items()} == {"a": 2, "b": 1}
    assert (stats.mean_duration_s, stats.sd_duration_s, stats.hours) == (120.0, 60.0, 0.1)
    assert stats.by_valence["Positive"].dialogues == 2 and stats.by_valence["Positive"].hours == pytest.approx(240 / 3600)
    assert stats.by_valence["(none, v1)"].hours == pytest.approx(120 / 3600)


def test_an_export_gets_the_usual_permissions(built, tmp_path):
    # Issue 8.19: export folders were 0700 (tempfile.mkdtemp's mode).
    import os
    import stat

    dataset, _, _ = built
    old = os.umask(0o022)
    try:
        result = export_hub_folder(dataset.select(range(2)), tmp_path / "shared")
    finally:
        os.umask(old)
    assert stat.S_IMODE(result.out_dir.stat().st_mode) == 0o755
    assert stat.S_IMODE((result.out_dir / "data").stat().st_mode) == 0o755
    assert {stat.S_IMODE(f.stat().st_mode) for f in result.files} == {0o644}


def _copy_export(result, dest: Path) -> Path:
    import shutil

    shutil.copytree(result.out_dir, dest)
    return dest


@pytest.mark.parametrize("damage, words", [
    (lambda f: (f / "notes.txt").write_text("x"), "not part of a dataset export (notes.txt)"),
    (lambda f: (f / "README.md").write_text("---\nconfigs: [unclosed\n---\n# card"), "the card's YAML is not usable"),
    (lambda f: next((f / "data").glob("*.parquet")).write_bytes(b"PAR1 not really"), "not a readable parquet file"),
    (lambda f: (f / "README.md").write_text((f / "README.md").read_text().replace("dtype: float64", "dtype: string", 1)),
     "do not match the card's features"),
    (lambda f: (f / "README.md").write_text((f / "README.md").read_text().replace("num_examples: 45", "num_examples: 44")),
     "the card says 44 rows, the shards hold 45"),
])
def test_push_dry_run_checks_what_it_would_upload(built, tmp_path, damage, words):
    # Issue 11: a dry run validates the card's YAML against the parquet schema, opens every shard, and refuses strays.
    _, result, _ = built
    folder = _copy_export(result, tmp_path / "export")
    push_folder(folder, "SpeechEQ/SpeechEQ", dry_run=True)  # intact: fine
    damage(folder)
    with pytest.raises(ValueError, match=re.escape(words)):
        push_folder(folder, "SpeechEQ/SpeechEQ", dry_run=True)


def test_license_and_pretty_name_reach_the_card_and_push_checks_them(built, tmp_path):
    dataset, _, _ = built
    result = export_hub_folder(dataset.select(range(2)), tmp_path / "out", license="cc-by-nc-4.0", pretty_name="SpeechEQ (mine)")
    card = (result.out_dir / "README.md").read_text()
    header = yaml.safe_load(card.split("---")[1])
    assert header["license"] == "cc-by-nc-4.0" and header["pretty_name"] == "SpeechEQ (mine)"
    assert "`cc-by-nc-4.0`: given with `--license`" in card
    push_folder(result.out_dir, "me/x", dry_run=True, license="cc-by-nc-4.0")
    with pytest.raises(ValueError, match="--license 'mit', but the card says 'cc-by-nc-4.0'"):
        push_folder(result.out_dir, "me/x", dry_run=True, license="mit")
    default = export_hub_folder(dataset.select(range(2)), tmp_path / "default")
    assert "the default of `speecheq dataset build`" in (default.out_dir / "README.md").read_text()
    with pytest.raises(ValueError, match="not a Hub license id"):
        export_hub_folder(dataset.select(range(2)), tmp_path / "bad", license="CC BY 4.0")
