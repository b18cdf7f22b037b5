"""Per-clip delivery features and the contrast_v1 score (SPEC §4) on synthetic signals and hand-worked gaps."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from speecheq_dataset.acoustics import (
    CONTRAST_V1,
    ClipFeatures,
    clip_features,
    contrast_from_gaps,
    contrast_score,
    delivery_distance,
    feature_gaps,
    hz_to_semitones,
    trim_silence,
)
from speecheq_dataset.audio import resample

SR = 16_000


def tone(freq_hz: float, seconds: float = 1.0, amplitude: float = 0.3, sr: int = SR) -> np.ndarray:
    t = np.arange(int(seconds * sr)) / sr
    return (amplitude * np.sin(2 * np.pi * freq_hz * t)).astype(np.float32)


def features(**overrides) -> ClipFeatures:
    base = dict(duration_s=2.0, pitch_hz=220.0, voiced_fraction=0.5, rms_db=-20.0, zcr=0.1, centroid_hz=1000.0, mfcc=(0.0,) * 12)
    base.update(overrides)
    return ClipFeatures(**base)


@pytest.mark.slow
def test_octave_apart_tones_are_twelve_semitones_apart():
    low, high = clip_features(tone(220), SR), clip_features(tone(440), SR)
    assert low.pitch_hz == pytest.approx(220, rel=0.01)
    assert high.pitch_hz == pytest.approx(440, rel=0.01)
    assert high.pitch_semitones - low.pitch_semitones == pytest.approx(12.0, abs=0.1)
    assert feature_gaps(low, high)["pitch"] == pytest.approx(12.0, abs=0.1)
    assert low.voiced_fraction > 0.9


def test_semitone_scale_is_relative_to_a440():
    assert hz_to_semitones(440.0) == 0.0
    assert hz_to_semitones(880.0) == pytest.approx(12.0)
    assert math.isnan(hz_to_semitones(float("nan")))
    assert math.isnan(hz_to_semitones(0.0))


@pytest.mark.slow
def test_noise_is_unvoiced_and_pitch_scores_nothing():
    noise = np.random.default_rng(0).normal(0, 0.1, SR).astype(np.float32)
    feats = clip_features(noise, SR)
    assert math.isnan(feats.pitch_hz)
    assert feats.voiced_fraction < 0.05
    assert feats.as_dict()["pitch_hz"] is None
    assert feature_gaps(feats, clip_features(tone(220), SR))["pitch"] is None


@pytest.mark.slow
def test_silence_around_speech_is_trimmed_from_duration():
    padded = np.concatenate([np.zeros(SR // 2), tone(200, 1.0), np.zeros(SR)]).astype(np.float32)
    assert len(trim_silence(padded, SR)) / SR == pytest.approx(1.0, abs=0.05)
    assert clip_features(padded, SR).duration_s == pytest.approx(1.0, abs=0.05)


def test_all_silent_clip_has_zero_duration_and_floor_level():
    feats = clip_features(np.zeros(SR, dtype=np.float32), SR)
    assert feats.duration_s == 0.0
    assert feats.rms_db == -100.0
    assert math.isnan(feats.pitch_hz)


def test_louder_clip_has_higher_db_by_the_amplitude_ratio():
    quiet, loud = clip_features(tone(220, amplitude=0.1), SR), clip_features(tone(220, amplitude=0.2), SR)
    assert loud.rms_db - quiet.rms_db == pytest.approx(20 * math.log10(2), abs=0.05)
    assert quiet.rms_db == pytest.approx(20 * math.log10(0.1 / math.sqrt(2)), abs=0.05)


def test_features_do_not_depend_on_the_input_sampling_rate():
    at16, at24 = clip_features(tone(220, sr=16_000), 16_000), clip_features(tone(220, sr=24_000), 24_000)
    assert at24.pitch_hz == pytest.approx(at16.pitch_hz, rel=0.01)
    assert at24.duration_s == pytest.approx(at16.duration_s, abs=0.02)
    assert at24.rms_db == pytest.approx(at16.rms_db, abs=0.1)


def test_higher_tone_has_higher_zcr_and_centroid():
    low, high = clip_features(tone(220), SR), clip_features(tone(880), SR)
    assert high.zcr == pytest.approx(4 * low.zcr, rel=0.05)
    assert high.centroid_hz > 3 * low.centroid_hz


@pytest.mark.parametrize(
    "bad, message",
    [(np.zeros(0, dtype=np.float32), "no samples"), (np.array([0.0, np.nan], dtype=np.float32), "NaN")],
)
def test_bad_clips_fail_with_a_reason(bad, message):
    with pytest.raises(ValueError, match=message):
        clip_features(bad, SR)


def test_contrast_v1_constants_match_the_spec():
    assert CONTRAST_V1.version == "contrast_v1"
    assert CONTRAST_V1.max_score == 8.0
    assert CONTRAST_V1.pass_score == 4.0
    assert [CONTRAST_V1.weights[k] for k in ("pitch", "rate", "energy", "centroid", "zcr", "mfcc")] == [2, 2, 1, 1, 1, 1]
    assert CONTRAST_V1.taus["rate"] == pytest.approx(math.log(1.15))
    assert CONTRAST_V1.taus["zcr"] == pytest.approx(math.log(1.20))


# Hand-worked: each row changes features of clip b against the base clip a and
# gives the points by feature: weight * min(1, gap / tau).
HAND_WORKED = [
    # identical delivery: nothing
    ({}, 0.0),
    # 1 semitone = half of tau 2 st -> 2 * 0.5 = 1 point
    ({"pitch_hz": 220.0 * 2 ** (1 / 12)}, 1.0),
    # 4 semitones saturate: 2 points
    ({"pitch_hz": 220.0 * 2 ** (4 / 12)}, 2.0),
    # 15 % longer = tau exactly: 2 points; 1.5 dB quieter = half of 3 dB: 0.5
    ({"duration_s": 2.3, "rms_db": -21.5}, 2.5),
    # the worked example: 1 st (1) + ln 1.15 longer (2) + 1.5 dB (0.5) + ZCR x1.2 (1) + MFCC RMS diff 1.5 (0.5) = 5.0
    ({"pitch_hz": 220.0 * 2 ** (1 / 12), "duration_s": 2.3, "rms_db": -21.5, "zcr": 0.12, "mfcc": (1.5,) * 12}, 5.0),
    # centroid 15 % lower (ln(1/1.15) -> |gap| = tau): 1 point; unvoiced b earns no pitch points
    ({"centroid_hz": 1000.0 / 1.15, "pitch_hz": float("nan")}, 1.0),
    # everything saturated: 8
    ({"pitch_hz": 440.0, "duration_s": 4.0, "rms_db": -10.0, "centroid_hz": 3000.0, "zcr": 0.3, "mfcc": (5.0,) * 12}, 8.0),
]


@pytest.mark.parametrize("changes, expected", HAND_WORKED)
def test_contrast_score_hand_worked(changes, expected):
    a, b = features(), features(**changes)
    result = contrast_score(a, b)
    assert result.score == pytest.approx(expected, abs=1e-9)
    assert result.passed == (expected >= 4.0)
    assert result.version == "contrast_v1"
    assert contrast_score(b, a).score == pytest.approx(expected, abs=1e-9)  # symmetric


def test_contrast_points_per_feature_of_the_worked_example():
    b = features(pitch_hz=220.0 * 2 ** (1 / 12), duration_s=2.3, rms_db=-21.5, zcr=0.12, mfcc=(1.5,) * 12)
    points = contrast_score(features(), b).points
    assert points == pytest.approx({"pitch": 1.0, "rate": 2.0, "energy": 0.5, "centroid": 0.0, "zcr": 1.0, "mfcc": 0.5})


gap = st.floats(min_value=0, max_value=50, allow_nan=False)


@settings(max_examples=200, deadline=None)
@given(pitch=gap, rate=gap, energy=gap, centroid=gap, zcr=gap, mfcc=gap, extra=st.floats(min_value=0, max_value=5))
def test_contrast_is_bounded_and_monotone_in_every_gap(pitch, rate, energy, centroid, zcr, mfcc, extra):
    gaps = {"pitch": pitch, "rate": rate, "energy": energy, "centroid": centroid, "zcr": zcr, "mfcc": mfcc}
    score = contrast_from_gaps(gaps).score
    assert 0.0 <= score <= 8.0
    for name in gaps:
        wider = dict(gaps, **{name: gaps[name] + extra})
        assert contrast_from_gaps(wider).score >= score - 1e-12


def test_delivery_distance_is_in_tau_units_and_ignores_duration():
    a = features()
    assert delivery_distance(a, features(duration_s=9.0)) == 0.0
    # 2 st pitch (1 tau) and 3 dB (1 tau): sqrt(2)
    assert delivery_distance(a, features(pitch_hz=220.0 * 2 ** (2 / 12), rms_db=-23.0)) == pytest.approx(math.sqrt(2))
    # unvoiced pitch drops out of the distance instead of making it NaN
    assert delivery_distance(a, features(pitch_hz=float("nan"), rms_db=-26.0)) == pytest.approx(2.0)


@pytest.mark.parametrize("from_rate, to_rate", [(16_000, 16_000), (48_000, 16_000), (24_000, 16_000), (8_000, 16_000)])
def test_resample_keeps_duration_and_pitch_and_gives_float32(from_rate, to_rate):
    samples = tone(440.0, seconds=0.5, sr=from_rate).astype(np.float64)
    out = resample(samples, from_rate, to_rate)
    assert out.dtype == np.float32 and len(out) == int(0.5 * to_rate)
    spectrum = np.abs(np.fft.rfft(out))
    assert abs(np.argmax(spectrum) * to_rate / len(out) - 440.0) <= 2.0
    if from_rate == to_rate:
        np.testing.assert_array_equal(out, samples.astype(np.float32))
