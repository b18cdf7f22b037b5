"""Frame-level V/A/D trajectories (SPEC §7): named columns, the CSV layout, the sliding-window and CSER extractors, CSER training."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from eval_scripts.components.cser import CSERModel
from eval_scripts.components.cser import CserVad
from eval_scripts.components.cser import ccc
from eval_scripts.components.tiny import build_tiny_cser
from eval_scripts.components.vad import VadTrajectory
from eval_scripts.components.vad import WindowedVad
from eval_scripts.components.vad import build_vad_extractor
from eval_scripts.components.vad import n_seconds
from eval_scripts.components.vad import second_bounds
from eval_scripts.train_cser import main as train_main
from eval_scripts.train_cser import read_corpus
from speecheq_dataset.audio import encode_wav
from speecheq_dataset.columns import CLIP_COLUMNS
from speecheq_metric import read_vad_csv

pytestmark = pytest.mark.usefixtures("one_torch_thread")
SR = 16_000


@pytest.fixture(scope="module")
def clips(dialogues):
    return [dialogues[1].clips[c].array for c in CLIP_COLUMNS[:3]]


# ---------------------------------------------------------------- seconds and the CSV layout


@pytest.mark.parametrize(
    "seconds, rows, last",
    [(0.3, 1, (0, 4800)), (1.0, 1, (0, 16000)), (1.49, 1, (0, 23840)), (1.5, 2, (16000, 24000)), (2.49, 2, (16000, 39840)),
     (3.0, 3, (32000, 48000))],
)
def test_a_clip_has_its_duration_rounded_half_up_in_seconds_the_last_running_to_its_end(seconds, rows, last):
    n = int(round(seconds * SR))
    assert n_seconds(n) == rows and len(second_bounds(n)) == rows and second_bounds(n)[-1] == last
    assert [b[0] for b in second_bounds(n)] == [k * SR for k in range(rows)]


def test_trajectory_csv_has_named_columns_and_reads_back_exactly(tmp_path):
    track = VadTrajectory(valence=np.array([0.1, -0.25]), arousal=np.array([0.5, 0.6000000000000001]), dominance=np.array([1e-9, 0.3]))
    text = track.to_csv_text()
    assert text.splitlines()[0] == "second,valence,arousal,dominance"
    path = tmp_path / "t.csv"
    path.write_text(text, encoding="utf-8")
    back = VadTrajectory.read_csv(path)
    assert all(np.array_equal(getattr(back, d), getattr(track, d)) for d in ("valence", "arousal", "dominance"))
    assert np.array_equal(read_vad_csv(path), np.vstack([track.valence, track.arousal, track.dominance]))


@settings(max_examples=40)
@given(st.lists(st.tuples(*[st.floats(-3, 3, allow_nan=False, width=64)] * 3), min_size=1, max_size=12))
def test_csv_round_trip_is_exact_for_any_values(tmp_path_factory, rows):
    track = VadTrajectory.from_rows([dict(zip(("valence", "arousal", "dominance"), r)) for r in rows])
    path = tmp_path_factory.mktemp("csv") / "t.csv"
    path.write_text(track.to_csv_text(), encoding="utf-8")
    assert VadTrajectory.read_csv(path).as_dict() == track.as_dict()


def test_reordered_csv_columns_are_read_by_name(tmp_path):
    path = tmp_path / "t.csv"
    with path.open("w", newline="") as f:
        csv.writer(f).writerows([["dominance", "second", "arousal", "valence"], [0.3, 0, 0.2, 0.1], [0.6, 1, 0.5, 0.4]])
    assert VadTrajectory.read_csv(path).as_dict() == {"valence": [0.1, 0.4], "arousal": [0.2, 0.5], "dominance": [0.3, 0.6]}


def test_from_named_maps_model_outputs_by_name():
    outputs = np.array([[0.7, 0.1, 0.4], [0.8, 0.2, 0.5]])  # a model whose columns are arousal, valence, dominance
    track = VadTrajectory.from_named(outputs, {"arousal": 0, "valence": 1, "dominance": 2})
    assert track.as_dict() == {"valence": [0.1, 0.2], "arousal": [0.7, 0.8], "dominance": [0.4, 0.5]}
    with pytest.raises(ValueError, match="equal, non-empty columns"):
        VadTrajectory(valence=np.zeros(2), arousal=np.zeros(3), dominance=np.zeros(2))


# ---------------------------------------------------------------- extractors


@pytest.fixture(scope="module")
def windowed():
    return WindowedVad("tiny-random")


@pytest.mark.parametrize(
    "seconds, windows",
    [(0.5, [(0, 8000)]), (2.3, [(0, 16000), (16000, 32000)]), (2.5, [(0, 16000), (16000, 32000), (24000, 40000)])],
)
def test_one_window_per_second_the_last_moved_back_inside_the_clip(windowed, seconds, windows):
    assert windowed.windows(int(seconds * SR)) == windows


def test_windowed_extractor_rates_each_second_of_real_clips(windowed, clips):
    tracks = windowed.trajectories(clips)
    assert [len(t) for t in tracks] == [n_seconds(len(c)) for c in clips]
    first = clips[0]
    direct = windowed.regressor.predict([first[a:b] for a, b in windowed.windows(len(first))])
    assert tracks[0].as_dict() == VadTrajectory.from_rows(direct).as_dict()
    assert windowed.describe()["regressor"]["architecture"] == "Wav2Vec2ForVadRegression"


def test_cser_extractor_on_real_clips_is_batch_independent(clips):
    single = CserVad("tiny-random").trajectories(clips)
    batched = CserVad("tiny-random", batch_size=3).trajectories(clips)
    assert [len(t) for t in single] == [n_seconds(len(c)) for c in clips]
    for a, b in zip(single, batched):
        for d in ("valence", "arousal", "dominance"):
            np.testing.assert_allclose(getattr(a, d), getattr(b, d), rtol=0, atol=1e-5)


def test_cser_checkpoint_saves_and_loads_bit_exactly(tmp_path, clips):
    tiny = build_tiny_cser(seed=2)
    tiny.model.save_pretrained(tmp_path)
    tiny.processor.save_pretrained(tmp_path)
    loaded = CSERModel.from_pretrained(tmp_path)
    before, after = tiny.model.state_dict(), loaded.state_dict()
    assert list(before) == list(after) and all(torch.equal(before[k], after[k]) for k in before)
    assert loaded.config.id2label == {0: "arousal", 1: "valence", 2: "dominance"}  # the published order, mapped by name
    ours, theirs = CserVad(str(tmp_path)).trajectories(clips[:1])[0], CserVad("tiny-random", seed=2).trajectories(clips[:1])[0]
    np.testing.assert_allclose(ours.valence, theirs.valence, rtol=0, atol=1e-6)


def test_extractor_registry_fails_loudly():
    with pytest.raises(ValueError, match="unknown V/A/D extractor 'vadnet'; known: cser, windows"):
        build_vad_extractor("vadnet")
    with pytest.raises(ValueError, match="needs pretrained=FOLDER"):
        build_vad_extractor("cser")


# ---------------------------------------------------------------- training


def _synthetic_corpus(folder, n_clips: int = 10, seed: int = 0):
    """Clips whose every second is a tone: loudness follows arousal, pitch valence, noise dominance; rows per second."""
    rng = np.random.default_rng(seed)
    rows = []
    t = np.arange(SR) / SR
    for c in range(n_clips):
        pieces = []
        for s in range(int(rng.integers(3, 6))):
            a, v, d = rng.uniform(0.05, 0.9), rng.uniform(0, 1), rng.uniform(0, 1)
            pieces.append(a * np.sin(2 * np.pi * (120 + 300 * v) * t) + 0.02 * d * rng.standard_normal(SR))
            rows.append({"audio": f"clip{c}.wav", "second": s, "valence": v, "arousal": a, "dominance": d})
        (folder / f"clip{c}.wav").write_bytes(encode_wav(np.concatenate(pieces).astype(np.float32), SR))
    table = folder / "labels.csv"
    with table.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return table


def _corpus_loss(model, table) -> float:
    """1 - mean CCC of a model over every labelled second of the corpus (eval mode, one batch)."""
    from eval_scripts.train_cser import _batch
    from eval_scripts.train_cser import _Features

    model.eval()
    features = _Features(model, build_tiny_cser().processor, read_corpus(table))
    feats, seconds, labels, labelled = _batch([features(i) for i in range(len(features.clips))])
    with torch.no_grad():
        return float(model(features=feats, seconds_mask=seconds, labels=labels, labels_mask=labelled).loss)


@pytest.mark.slow
def test_training_the_cser_lowers_the_ccc_loss_and_the_result_saves_and_loads(tmp_path):
    table = _synthetic_corpus(tmp_path)
    out = tmp_path / "cser"
    assert train_main(["--data", str(table), "--output-dir", str(out), "--init", "tiny-random", "--max-steps", "30",
                       "--batch-size", "10", "--lr", "0.01", "--seed", "0"]) == 0
    before = _corpus_loss(build_tiny_cser(seed=0).model, table)
    trained = CSERModel.from_pretrained(out)
    after = _corpus_loss(trained, table)
    assert after < before - 0.1, (before, after)
    log = json.loads((out / "training_log.json").read_text())
    assert len(log["steps"]) == 30 and log["dropped_rows"] == 0
    tracks = CserVad(str(out)).trajectories([np.zeros(SR * 2, dtype=np.float32) + 0.01])
    assert len(tracks[0]) == 2
    # the folder now holds a model: training into it again needs --overwrite, and is refused before any step
    saved = (out / "training_log.json").read_bytes()
    assert train_main(["--data", str(table), "--output-dir", str(out), "--init", "tiny-random", "--max-steps", "1"]) == 2
    assert (out / "training_log.json").read_bytes() == saved
    assert train_main(["--data", str(table), "--output-dir", str(out), "--init", "tiny-random", "--max-steps", "1", "--overwrite"]) == 0
    assert len(json.loads((out / "training_log.json").read_text())["steps"]) == 1


def test_ccc_is_one_for_identical_series_and_penalises_bias_and_scale():
    x = torch.tensor([0.1, 0.4, 0.2, 0.9])
    assert float(ccc(x, x)) == pytest.approx(1.0, abs=1e-6)
    assert float(ccc(x + 0.5, x)) < 0.6 and float(ccc(2 * x, x)) < 1.0  # Pearson r would be 1 for both
    centred = x - x.mean()
    assert float(ccc(-centred, centred)) == pytest.approx(-1.0, abs=1e-6)


@pytest.mark.parametrize(
    "content, message",
    [("audio,second,valence,arousal\nc.wav,0,0.1,0.2\n", "missing column(s) ['dominance']"),
     ("audio,second,valence,arousal,dominance\nmissing.wav,0,0.1,0.2,0.3\n", "does not exist"),
     ("audio,second,valence,arousal,dominance\nc.wav,zero,0.1,0.2,0.3\n", "row 2 has a non-numeric second or label")],
)
def test_corpus_errors_name_the_file_and_the_problem(tmp_path, content, message):
    (tmp_path / "c.wav").write_bytes(encode_wav(np.zeros(SR, dtype=np.float32), SR))
    table = tmp_path / "labels.csv"
    table.write_text(content, encoding="utf-8")
    with pytest.raises(ValueError) as failure:
        read_corpus(table)
    assert str(failure.value).startswith(f"{table}: ") and message in str(failure.value)


def test_corpus_reads_parquet_with_columns_in_any_order(tmp_path):
    import pandas as pd

    (tmp_path / "c.wav").write_bytes(encode_wav(np.zeros(2 * SR, dtype=np.float32), SR))
    pd.DataFrame({"dominance": [0.3, 0.6], "Valence": [0.1, 0.4], "second": [1, 0], "arousal": [0.2, 0.5], "audio": ["c.wav"] * 2,
                  "split": ["valid"] * 2}).to_parquet(tmp_path / "labels.parquet")
    (clip,) = read_corpus(tmp_path / "labels.parquet")
    assert clip.split == "valid" and clip.labels == {1: {"valence": 0.1, "arousal": 0.2, "dominance": 0.3},
                                                     0: {"valence": 0.4, "arousal": 0.5, "dominance": 0.6}}
