"""Per-clip delivery features and the pairwise acoustic-contrast score (SPEC §4).

Shared by the dataset builders (validation: is a high/low test pair really
different in delivery?) and by the runner's `prosody` shortcut baselines.
Everything here is a pure function over (samples, sampling_rate); the only
heavy dependency is librosa, imported on first use.

Feature definitions (all computed on the clip with leading/trailing silence
trimmed, after resampling to ANALYSIS_SR so that clips from different sources
are measured alike):
- duration_s: trimmed length in seconds;
- pitch_hz: log-domain mean F0 (geometric mean over voiced frames), from
  librosa.yin with a periodicity check for voicing; NaN when nothing is voiced;
  pitch_semitones is the same value in semitones re 440 Hz;
- pitch_range_st: spread of F0 over the voiced frames, 90th minus 10th
  percentile in semitones (NaN when fewer than PITCH_RANGE_MIN_FRAMES are voiced);
- rms_db: RMS level of the trimmed clip in dB re full scale (floored);
- zcr: mean frame zero-crossing rate (a speaking-rate / noisiness proxy);
- centroid_hz: mean spectral centroid;
- mfcc: means of MFCC 1–12 (c0, the overall level, is left out).
"""

from __future__ import annotations

import functools
import math
from dataclasses import asdict, dataclass, field, replace

import numpy as np

from speecheq_dataset.audio import resample

ANALYSIS_SR = 16_000
FRAME_LENGTH = 1024  # 64 ms at 16 kHz: holds >= 4 periods of the lowest F0
HOP_LENGTH = 256  # 16 ms
TRIM_FRAME_S = 0.02
TRIM_TOP_DB = 40.0  # edges quieter than (peak - 40 dB) are silence
PITCH_FMIN_HZ = 65.0
PITCH_FMAX_HZ = 600.0
VOICING_MIN_CORRELATION = 0.6  # normalised autocorrelation at the yin period
VOICING_SILENCE_DB = 35.0  # frames this far below the loudest frame are never voiced
DB_FLOOR = -100.0
N_MFCC = 12
N_MELS = 40  # the usual speech filterbank for MFCCs (and 3x cheaper than librosa's 128)
PITCH_REFERENCE_HZ = 440.0
PITCH_RANGE_PERCENTILES = (10.0, 90.0)
PITCH_RANGE_MIN_FRAMES = 5
PITCH_TRACKERS = ("yin", "pyin")  # pyin only for comparison: ~15x slower (SPEC §4)
# Names the feature definitions above; caches of features are keyed by it, so bump it on any change.
FEATURES_VERSION = "clip_features_v2"

# Floors for log ratios, so that silent clips give finite gaps.
_RATIO_FLOORS = {"duration_s": 1e-3, "zcr": 1e-4, "centroid_hz": 1.0}


@dataclass(frozen=True)
class ClipFeatures:
    """Delivery features of one clip (see the module docstring for definitions)."""

    duration_s: float
    pitch_hz: float
    voiced_fraction: float
    rms_db: float
    zcr: float
    centroid_hz: float
    mfcc: tuple[float, ...]
    pitch_range_st: float = float("nan")

    @property
    def pitch_semitones(self) -> float:
        """Mean pitch in semitones relative to 440 Hz (NaN when unvoiced)."""
        return hz_to_semitones(self.pitch_hz)

    def as_dict(self) -> dict:
        """JSON-friendly dict (NaN pitch becomes None)."""
        out = asdict(self)
        out["mfcc"] = list(self.mfcc)
        out["pitch_semitones"] = self.pitch_semitones
        for key in ("pitch_hz", "pitch_semitones", "pitch_range_st"):
            if not math.isfinite(out[key]):
                out[key] = None
        return out

    @classmethod
    def from_dict(cls, data: dict) -> ClipFeatures:
        """The inverse of as_dict (None pitch values become NaN)."""
        nan = float("nan")
        return cls(
            duration_s=float(data["duration_s"]),
            pitch_hz=nan if data.get("pitch_hz") is None else float(data["pitch_hz"]),
            voiced_fraction=float(data["voiced_fraction"]),
            rms_db=float(data["rms_db"]),
            zcr=float(data["zcr"]),
            centroid_hz=float(data["centroid_hz"]),
            mfcc=tuple(float(v) for v in data["mfcc"]),
            pitch_range_st=nan if data.get("pitch_range_st") is None else float(data["pitch_range_st"]),
        )

    def with_gain(self, gain_db: float) -> ClipFeatures:
        """The features of this clip scaled by a plain gain of `gain_db` <= 0 dB.

        Exact for attenuation: every other feature is either scale-free (pitch,
        ZCR, centroid, MFCC 1-12) or measured relative to the clip's own peak
        (trimming, voicing), so only the level moves.
        """
        if gain_db > 0:
            raise ValueError(f"with_gain: only attenuation is exact (a boost may clip), got {gain_db} dB")
        return replace(self, rms_db=max(DB_FLOOR, self.rms_db + gain_db))


@dataclass(frozen=True)
class ContrastConstants:
    """A versioned set of contrast weights, saturation thresholds (tau) and pass mark."""

    version: str
    weights: dict[str, float]
    taus: dict[str, float]
    pass_score: float

    @property
    def max_score(self) -> float:
        return float(sum(self.weights.values()))


# SPEC §4 `contrast_v1`: starting thresholds, to be recalibrated on real data
# before freezing; a recalibration is a new version, never an edit of this one.
CONTRAST_V1 = ContrastConstants(
    version="contrast_v1",
    weights={"pitch": 2.0, "rate": 2.0, "energy": 1.0, "centroid": 1.0, "zcr": 1.0, "mfcc": 1.0},
    taus={
        "pitch": 2.0,  # semitones
        "rate": math.log(1.15),  # |ln duration ratio|
        "energy": 3.0,  # dB
        "centroid": math.log(1.15),  # |ln centroid ratio|
        "zcr": math.log(1.20),  # |ln ZCR ratio|
        "mfcc": 3.0,  # RMS difference of MFCC 1-12 means
    },
    pass_score=4.0,
)

# Features that describe *how* something is said independently of *what* is
# said (duration depends on the words, so it is left out when comparing
# clips of different texts, e.g. an option against the catalyst's turn).
TEXT_INDEPENDENT_GAPS = ("pitch", "energy", "centroid", "zcr", "mfcc")


@dataclass(frozen=True)
class ContrastResult:
    """The contrast of one pair: raw gaps, points per feature, total and verdict."""

    version: str
    score: float
    passed: bool
    gaps: dict[str, float | None]
    points: dict[str, float] = field(default_factory=dict)


def hz_to_semitones(hz: float) -> float:
    """Frequency in semitones relative to 440 Hz (NaN for NaN or non-positive input)."""
    if not (hz > 0):
        return float("nan")
    return 12.0 * math.log2(hz / PITCH_REFERENCE_HZ)


def _prepare(array: np.ndarray, sampling_rate: int) -> np.ndarray:
    """Mono float32 at ANALYSIS_SR; errors name the bad input."""
    samples = np.asarray(array, dtype=np.float32)
    if samples.ndim > 1:
        samples = samples.mean(axis=0) if samples.shape[0] < samples.shape[-1] else samples.mean(axis=1)
    if samples.size == 0:
        raise ValueError("acoustic features: the clip has no samples")
    if sampling_rate <= 0:
        raise ValueError(f"acoustic features: bad sampling rate {sampling_rate!r}")
    if not np.all(np.isfinite(samples)):
        raise ValueError("acoustic features: the clip contains NaN or infinite samples")
    return resample(samples, sampling_rate, ANALYSIS_SR)


def trim_silence(array: np.ndarray, sampling_rate: int, top_db: float = TRIM_TOP_DB) -> np.ndarray:
    """Drop leading and trailing audio quieter than (peak - top_db); an all-silent clip trims to nothing."""
    import librosa

    samples = np.asarray(array, dtype=np.float32)
    if samples.size == 0 or float(np.max(np.abs(samples))) == 0.0:
        return samples[:0]
    # Shorter frames than the analysis frames: the trim edge is accurate to ~10 ms.
    frame = max(16, int(round(TRIM_FRAME_S * sampling_rate)))
    hop = max(4, frame // 4)
    trimmed, _ = librosa.effects.trim(samples, top_db=top_db, frame_length=frame, hop_length=hop)
    return trimmed


def _voiced_pitch(samples: np.ndarray, tracker: str = "yin") -> tuple[float, float, float]:
    """(log-domain mean F0, voiced fraction, F0 range in semitones) of ANALYSIS_SR samples at least FRAME_LENGTH long."""
    import librosa

    if tracker == "pyin":
        f0, voiced, _ = librosa.pyin(samples, fmin=PITCH_FMIN_HZ, fmax=PITCH_FMAX_HZ, sr=ANALYSIS_SR, frame_length=FRAME_LENGTH,
                                     hop_length=HOP_LENGTH)
        voiced = voiced & np.isfinite(f0)
    elif tracker == "yin":
        f0 = librosa.yin(samples, fmin=PITCH_FMIN_HZ, fmax=PITCH_FMAX_HZ, sr=ANALYSIS_SR, frame_length=FRAME_LENGTH,
                         hop_length=HOP_LENGTH)
        voiced = _yin_voicing(samples, f0)
    else:
        raise ValueError(f"unknown pitch tracker {tracker!r}; known: {', '.join(PITCH_TRACKERS)}")
    if not voiced.any():
        return float("nan"), 0.0, float("nan")
    log_f0 = np.log(f0[voiced])
    spread = float("nan")
    if log_f0.size >= PITCH_RANGE_MIN_FRAMES:
        low, high = np.percentile(log_f0, PITCH_RANGE_PERCENTILES)
        spread = float((high - low) * 12.0 / math.log(2.0))
    return float(np.exp(np.mean(log_f0))), float(voiced.mean()), spread


def _yin_voicing(samples: np.ndarray, f0: np.ndarray) -> np.ndarray:
    """Which yin frames are voiced: the signal really repeats at the yin period and is not near-silent."""
    import librosa

    # yin always returns a period, even for noise or silence.
    padded = np.pad(samples, FRAME_LENGTH // 2)
    frames = librosa.util.frame(padded.astype(np.float64), frame_length=FRAME_LENGTH, hop_length=HOP_LENGTH)[:, : len(f0)]
    energy = np.sqrt(np.mean(frames**2, axis=0))
    loud_enough = 20 * np.log10(np.maximum(energy, 1e-10)) > 20 * np.log10(max(float(energy.max()), 1e-10)) - VOICING_SILENCE_DB
    voiced = np.zeros(len(f0), dtype=bool)
    for t in np.flatnonzero(loud_enough & np.isfinite(f0)):
        lag = int(round(ANALYSIS_SR / f0[t]))
        a = frames[: FRAME_LENGTH - lag, t]
        b = frames[lag:, t]
        denom = math.sqrt(float(a @ a) * float(b @ b))
        voiced[t] = denom > 0 and float(a @ b) / denom >= VOICING_MIN_CORRELATION
    return voiced


@functools.lru_cache(maxsize=1)
def _mel_basis() -> np.ndarray:
    import librosa

    return librosa.filters.mel(sr=ANALYSIS_SR, n_fft=FRAME_LENGTH, n_mels=N_MELS).astype(np.float32)


def clip_features(array: np.ndarray, sampling_rate: int, *, pitch_tracker: str = "yin") -> ClipFeatures:
    """Delivery features of one clip (trimmed, at ANALYSIS_SR); `pitch_tracker="pyin"` only to compare trackers."""
    import librosa

    samples = trim_silence(_prepare(array, sampling_rate), ANALYSIS_SR)
    duration = samples.size / ANALYSIS_SR
    if samples.size == 0:
        return ClipFeatures(0.0, float("nan"), 0.0, DB_FLOOR, 0.0, 0.0, tuple([0.0] * N_MFCC))
    rms = math.sqrt(float(np.mean(samples.astype(np.float64) ** 2)))
    rms_db = max(DB_FLOOR, 20.0 * math.log10(rms)) if rms > 0 else DB_FLOOR
    # Clips shorter than one analysis frame are zero-padded to one (pitch, ZCR and spectrum alike).
    analysed = samples if samples.size >= FRAME_LENGTH else np.pad(samples, (0, FRAME_LENGTH - samples.size))
    pitch_hz, voiced_fraction, pitch_range = _voiced_pitch(analysed, pitch_tracker)
    zcr = float(librosa.feature.zero_crossing_rate(analysed, frame_length=FRAME_LENGTH, hop_length=HOP_LENGTH).mean())
    spectrum = np.abs(librosa.stft(analysed, n_fft=FRAME_LENGTH, hop_length=HOP_LENGTH))
    centroid = float(librosa.feature.spectral_centroid(S=spectrum, sr=ANALYSIS_SR).mean())
    mel = _mel_basis() @ (spectrum.astype(np.float32) ** 2)  # a plain matmul: librosa's einsum is slow under load
    mfcc = librosa.feature.mfcc(S=librosa.power_to_db(mel), n_mfcc=N_MFCC + 1)[1:].mean(axis=1)
    return ClipFeatures(
        duration_s=float(duration),
        pitch_hz=pitch_hz,
        voiced_fraction=voiced_fraction,
        rms_db=float(rms_db),
        zcr=zcr,
        centroid_hz=centroid,
        mfcc=tuple(float(v) for v in mfcc),
        pitch_range_st=pitch_range,
    )


def _log_ratio(a: float, b: float, floor: float) -> float:
    return abs(math.log(max(a, floor) / max(b, floor)))


def feature_gaps(a: ClipFeatures, b: ClipFeatures) -> dict[str, float | None]:
    """Unsigned gaps per contrast feature, in the units of SPEC §4 (pitch None when either clip is unvoiced)."""
    pitch = abs(a.pitch_semitones - b.pitch_semitones)
    return {
        "pitch": pitch if math.isfinite(pitch) else None,
        "rate": _log_ratio(a.duration_s, b.duration_s, _RATIO_FLOORS["duration_s"]),
        "energy": abs(a.rms_db - b.rms_db),
        "centroid": _log_ratio(a.centroid_hz, b.centroid_hz, _RATIO_FLOORS["centroid_hz"]),
        "zcr": _log_ratio(a.zcr, b.zcr, _RATIO_FLOORS["zcr"]),
        "mfcc": float(np.sqrt(np.mean((np.asarray(a.mfcc) - np.asarray(b.mfcc)) ** 2))),
    }


def contrast_from_gaps(gaps: dict[str, float | None], constants: ContrastConstants = CONTRAST_V1) -> ContrastResult:
    """Score gaps: each feature earns weight * min(1, gap / tau); a missing gap (unvoiced pitch) earns 0."""
    points = {}
    for name, weight in constants.weights.items():
        gap = gaps.get(name)
        points[name] = 0.0 if gap is None else weight * min(1.0, gap / constants.taus[name])
    score = float(sum(points.values()))
    return ContrastResult(constants.version, score, score >= constants.pass_score, dict(gaps), points)


def contrast_score(a: ClipFeatures, b: ClipFeatures, constants: ContrastConstants = CONTRAST_V1) -> ContrastResult:
    """The SPEC §4 contrast of a test pair (out of constants.max_score; passes at constants.pass_score)."""
    return contrast_from_gaps(feature_gaps(a, b), constants)


def pair_contrast(first: tuple[np.ndarray, int], second: tuple[np.ndarray, int], constants: ContrastConstants = CONTRAST_V1) -> ContrastResult:
    """Contrast of two raw clips given as (samples, sampling_rate)."""
    return contrast_score(clip_features(*first), clip_features(*second), constants)


def delivery_distance(
    a: ClipFeatures, b: ClipFeatures, constants: ContrastConstants = CONTRAST_V1, features: tuple[str, ...] = TEXT_INDEPENDENT_GAPS
) -> float:
    """Euclidean distance with each gap in units of its contrast threshold tau (a fixed, unfitted standardisation)."""
    gaps = feature_gaps(a, b)
    terms = [(gaps[name] / constants.taus[name]) ** 2 for name in features if gaps[name] is not None]
    return math.sqrt(sum(terms))
