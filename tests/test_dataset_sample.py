"""The embedded sample: our scripts, espeak-ng prosody rules, audible contrast, SPEC §9 balance, the cache."""

from __future__ import annotations

import io
import math
import os
from pathlib import Path

import librosa
import numpy as np
import pytest
import soundfile as sf
from hypothesis import given
from hypothesis import strategies as st

from builders.export import export_sample
from builders.export import summarize
from speecheq_dataset import sample as sample_module
from speecheq_dataset import tts
from speecheq_dataset.loading import load_speecheq
from speecheq_dataset.taxonomy import SUBSCALE_SLUGS
from speecheq_dataset.taxonomy import VALENCES
from speecheq_dataset.tts import NEUTRAL
from speecheq_dataset.tts import Prosody
from speecheq_dataset.tts import prosody_for


@pytest.fixture(scope="session")
def sample_cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("speecheq-sample-cache")


@pytest.fixture(scope="session")
def sample_ds(sample_cache):
    return load_speecheq(None, cache_dir=sample_cache)


def _clip(cell) -> tuple[np.ndarray, int]:
    return np.asarray(cell["array"], dtype=np.float32), int(cell["sampling_rate"])


def _features(cell) -> tuple[float, float, float]:
    """Duration (s), RMS (dB) and median F0 (Hz) of a clip."""
    samples, sr = _clip(cell)
    rms_db = 20 * math.log10(float(np.sqrt(np.mean(samples**2))) + 1e-9)
    f0 = librosa.yin(samples, fmin=60, fmax=500, sr=sr)
    return len(samples) / sr, rms_db, float(np.median(f0))


@pytest.fixture(scope="session")
def pair_features(sample_ds):
    """(valence, high features, low features) of every test pair of the sample."""
    pairs = []
    for row in sample_ds:
        for turn in (4, 6):
            pairs.append((row["scenario_valence"], _features(row[f"turn{turn}_audio_high"]), _features(row[f"turn{turn}_audio_low"])))
    return pairs


@pytest.mark.slow
def test_sample_covers_every_subscale_and_valence(sample_ds):
    assert len(sample_ds) >= 15
    assert set(sample_ds["subscale"]) == set(SUBSCALE_SLUGS)
    assert set(sample_ds["scenario_valence"]) == set(VALENCES)
    assert set(sample_ds["generation_version"]) == {"v2"}
    assert all(sample_ds["target_social_intent"])


@pytest.mark.slow
def test_clips_are_lossless_espeak_wav(sample_ds):
    from datasets import Audio

    cell = sample_ds.cast_column("turn1_audio", Audio(decode=False))[0]["turn1_audio"]
    assert cell["bytes"][:4] == b"RIFF"
    info = sf.info(io.BytesIO(cell["bytes"]))
    assert (info.samplerate, info.channels, info.subtype) == (22050, 1, "PCM_16")


@pytest.mark.slow
def test_every_test_pair_differs_audibly(pair_features):
    # At least one contrast_v1-sized gap per pair (SPEC §4): rate, loudness or pitch.
    for valence, (dur_h, rms_h, f0_h), (dur_l, rms_l, f0_l) in pair_features:
        gaps = (abs(math.log(dur_h / dur_l)) / math.log(1.15), abs(rms_h - rms_l) / 3.0, abs(12 * math.log2(f0_h / f0_l)) / 2.0)
        assert max(gaps) >= 1.0, (valence, gaps)


@pytest.mark.slow
def test_slower_clip_shortcut_does_not_work_on_the_sample(pair_features):
    # SPEC §9: on the published data "pick the longer clip" is right 75 % of the time.
    by_valence: dict[str, list[bool]] = {v: [] for v in VALENCES}
    for valence, high, low in pair_features:
        by_valence[valence].append(high[0] > low[0])
    everything = [x for xs in by_valence.values() for x in xs]
    assert 0.3 <= np.mean(everything) <= 0.7
    # Which clip is longer depends on the valence (a rushed dissonant reply can still outpace a bright one).
    assert np.mean(by_valence["Positive"]) <= 0.3, "positive resonance is bright and fast: mostly the shorter clip"
    assert np.mean(by_valence["Negative"]) >= 0.7, "negative resonance is heavy and slow: mostly the longer clip"
    quieter_is_high = np.mean([high[1] < low[1] for _, high, low in pair_features])
    assert quieter_is_high <= 0.7


PROSODY_TABLE = [
    ("", NEUTRAL),
    ("Deflated", NEUTRAL),  # word-start matching: "flat" inside "deflated" is not a flat delivery
    ("Heavy low trailing pitch, slow and soft", Prosody(pitch=36, rate=100, amplitude=45, word_gap=4, pitch_range=70)),
    ("Bright beaming pitch, laughing, high energy, voice lifting with delight.", Prosody(70, 220, 155, 0, 170)),
    ("Firm clipped staccato, hard consonants, falling pitch, steady and level.", Prosody(38, 190, 130, 2, 60)),
    ("Flat monotone, slow and listless, bored dutiful voice.", Prosody(42, 115, 70, 2, 30)),
    ("Anxious panicked rush, shaky high pitch, frantic and fast.", Prosody(65, 250, 100, 0, 140)),
]


@pytest.mark.parametrize(("tone", "expected"), PROSODY_TABLE, ids=[t[0][:30] or "empty" for t in PROSODY_TABLE])
def test_tone_rules_hand_worked(tone, expected):
    assert prosody_for(tone) == expected


def test_rules_fire_once_however_often_a_keyword_repeats():
    assert prosody_for("slow, slow, very slow") == prosody_for("slow")


@given(st.text(max_size=200))
def test_prosody_always_within_espeak_ranges(tone):
    p = prosody_for(tone)
    assert 5 <= p.pitch <= 95 and 100 <= p.rate <= 320 and 40 <= p.amplitude <= 200
    assert 0 <= p.word_gap <= 25 and 10 <= p.pitch_range <= 250


def test_voice_choice_by_slot_and_gender():
    assert tts.voice_for("speaker1", "Female") == "en-us+f2"
    assert tts.voice_for("speaker2", "male") == "en-us+m7"
    assert tts.voice_for("speaker2", "Male", requested="onyx") == "en-us+m7"  # an OpenAI voice name is not ours
    assert tts.voice_for("speaker1", None, requested="en-gb+f3") == "en-gb+f3"


def test_espeak_command_escapes_text_and_carries_prosody(tmp_path):
    command = tts.espeak_command("Tom & <Jerry>", Prosody(40, 150, 90, 3, 80), "en-us+f2", tmp_path / "x.wav")
    assert command[:4] == ["espeak-ng", "-m", "-v", "en-us+f2"]
    assert command[command.index("-p") + 1] == "40" and command[command.index("-s") + 1] == "150"
    assert command[command.index("-a") + 1] == "90" and command[command.index("-g") + 1] == "3"
    assert command[-1] == '<speak><prosody range="80%">Tom &amp; &lt;Jerry&gt;</prosody></speak>'


def test_scripts_are_ours_and_free_of_banned_tone_words():
    scripts = sample_module.load_scripts()
    assert len(scripts) >= 15
    for script in scripts:
        tones = [entry["tone_description"] for entry in script["audio_files"]]
        for word in ("nice", "polite", "mild", "calm"):
            assert all(word not in t.lower() for t in tones), (script["generation_metadata"]["dataset_id"], word)
        assert script["generation_metadata"]["dataset_id"].startswith("sample_")


def test_cache_is_reused_and_leaves_no_temporaries(sample_ds, sample_cache):
    entry = sample_module.ensure_sample(sample_cache)
    assert entry.name == f"sample-{sample_module.sample_key()}"
    assert sorted(p.name for p in sample_cache.iterdir()) == [entry.name]
    assert sorted(p.name for p in entry.iterdir()) == ["dataset", "raw"]


def test_cache_key_follows_renderer_version(monkeypatch):
    before = sample_module.sample_key()
    monkeypatch.setattr(sample_module, "RENDERER_VERSION", "espeak-prosody-test")
    assert sample_module.sample_key() != before


@pytest.mark.slow
def test_a_crash_while_building_leaves_no_cache(tmp_path, monkeypatch):
    def crash(*args, **kwargs):
        raise RuntimeError("power cut")

    monkeypatch.setattr("speecheq_dataset.builder.build_raw", crash)
    with pytest.raises(RuntimeError, match="power cut"):
        sample_module.ensure_sample(tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_cache_location_env_then_hf_home(monkeypatch, tmp_path):
    from huggingface_hub import constants

    hf_home = os.environ["HF_HOME"]
    monkeypatch.setenv("SPEECHEQ_CACHE", str(tmp_path))
    assert sample_module.sample_cache_root() == tmp_path
    monkeypatch.delenv("SPEECHEQ_CACHE")
    assert sample_module.sample_cache_root() == Path(constants.HF_HOME) / "speecheq"
    assert os.environ["HF_HOME"] == hf_home, "the library never sets HF_HOME"


def test_sample_has_only_the_test_split(sample_cache):
    with pytest.raises(ValueError, match="'train'"):
        load_speecheq(None, split="train", cache_dir=sample_cache)


def test_sample_export_and_summary(sample_ds, sample_cache, tmp_path):
    result = export_sample(tmp_path / "sample", cache_root=sample_cache)
    text = summarize(result)
    assert f"{len(sample_ds)} dialogues" in text and "subscales: 15/15" in text
    assert "Positive 5, Negative 5, Conflict 5" in text
    assert "embedded sample" in (result.out_dir / "README.md").read_text()
