"""Audio I/O shared by the builders and the runner: decode encoded clips to arrays.

Clips are stored as their original encoded bytes (MP3 for the published data,
WAV for the embedded sample); decoding happens here, once. The decoder is
torchcodec (FFmpeg) when it loads, else soundfile, whose wheels bundle a
libsndfile that reads MP3: GPU images often have torch but no FFmpeg. The
choice is logged once; SPEECHEQ_AUDIO_DECODER=soundfile|torchcodec forces it.
Both give the same samples at a file's own rate (checked on the real clips).
"""

from __future__ import annotations

import io
import logging
import os
import threading
import wave
from pathlib import Path

import numpy as np

logger = logging.getLogger(__name__)

DECODER_ENV = "SPEECHEQ_AUDIO_DECODER"
DECODERS = ("torchcodec", "soundfile")
_decoder: str | None = None
_decoder_lock = threading.Lock()


class AudioDecodeError(ValueError):
    """A clip that cannot be decoded or holds no samples; the message names it."""


class EmptyAudioError(AudioDecodeError):
    """A clip with no content: zero bytes, or a valid container that decodes to no samples."""


def audio_decoder() -> str:
    """The decoder in use: "torchcodec" when it and its FFmpeg libraries load, else "soundfile" (chosen and logged once)."""
    global _decoder
    with _decoder_lock:
        if _decoder is None:
            _decoder = _choose_decoder()
        return _decoder


def _choose_decoder() -> str:
    forced = os.environ.get(DECODER_ENV, "").strip().lower()
    if forced and forced not in DECODERS:
        raise ValueError(f"{DECODER_ENV}={forced!r}: choose one of {', '.join(DECODERS)}")
    if forced == "soundfile":
        logger.info("decoding audio with soundfile (%s=soundfile)", DECODER_ENV)
        return "soundfile"
    try:
        from torchcodec.decoders import AudioDecoder  # noqa: F401  (loads FFmpeg's libraries)
    except Exception as exc:  # ImportError, or RuntimeError/OSError when FFmpeg's libraries are missing
        if forced == "torchcodec":
            raise
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:160]
        logger.info("decoding audio with soundfile: torchcodec cannot load (%s)", reason)
        return "soundfile"
    logger.info("decoding audio with torchcodec (FFmpeg)")
    return "torchcodec"


def decode_audio(source: bytes | str | os.PathLike, sampling_rate: int | None = None, *, name: str = "") -> tuple[np.ndarray, int]:
    """Decode encoded audio (bytes or a file path) to mono float32 samples.

    `sampling_rate` resamples when given; `name` labels errors (a file or column).
    Returns (samples, sampling_rate).
    """
    label = name or (str(source) if not isinstance(source, bytes) else "<bytes>")
    if isinstance(source, (str, os.PathLike)):
        source = Path(source)
        if not source.is_file():
            raise AudioDecodeError(f"{label}: no such audio file")
        source = source.read_bytes()
    if not source:
        raise EmptyAudioError(f"{label}: empty audio (0 bytes)")
    if audio_decoder() == "soundfile":
        array, rate = _decode_with_soundfile(source, label)
    else:
        array, rate = _decode_with_torchcodec(source, sampling_rate, label)
        sampling_rate = None  # torchcodec resampled already
    if array.size == 0:
        raise EmptyAudioError(f"{label}: audio decodes to no samples")
    if sampling_rate and sampling_rate != rate:
        array, rate = resample(array, rate, sampling_rate), sampling_rate
    return array, rate


def _decode_with_torchcodec(data: bytes, sampling_rate: int | None, label: str) -> tuple[np.ndarray, int]:
    from torchcodec.decoders import AudioDecoder

    try:
        decoder = AudioDecoder(data, sample_rate=sampling_rate, num_channels=1)
        samples = decoder.get_all_samples()
    except Exception as exc:  # torchcodec raises RuntimeError/ValueError variants
        if _holds_no_frames(data):
            raise EmptyAudioError(f"{label}: audio decodes to no samples (a valid container with 0 frames)") from exc
        raise AudioDecodeError(f"{label}: cannot decode audio ({exc})") from exc
    return samples.data.numpy()[0].astype(np.float32, copy=False), int(samples.sample_rate)


def _decode_with_soundfile(data: bytes, label: str) -> tuple[np.ndarray, int]:
    import soundfile

    try:
        frames, rate = soundfile.read(io.BytesIO(data), dtype="float32", always_2d=True)
    except Exception as exc:  # soundfile.LibsndfileError, RuntimeError, TypeError for unknown formats
        raise AudioDecodeError(f"{label}: cannot decode audio ({exc})") from exc
    return frames.mean(axis=1, dtype=np.float32) if frames.shape[1] > 1 else frames[:, 0].copy(), int(rate)


def _holds_no_frames(data: bytes) -> bool:
    """True when `data` is a valid audio container with zero frames (torchcodec reports those as undecodable)."""
    import soundfile

    try:
        return soundfile.info(io.BytesIO(data)).frames == 0
    except Exception:  # not a container soundfile knows: a real decoding failure
        return False


def decode_value(value, sampling_rate: int | None = None, *, name: str = "") -> tuple[np.ndarray, int]:
    """Decode an audio cell: an undecoded {"bytes", "path"} dict, or decoded samples ({"array", "sampling_rate"} or a torchcodec decoder)."""
    if isinstance(value, dict) and "array" not in value:
        if value.get("bytes"):
            return decode_audio(value["bytes"], sampling_rate, name=name or str(value.get("path") or ""))
        if value.get("path"):
            return decode_audio(value["path"], sampling_rate, name=name or value["path"])
        raise AudioDecodeError(f"{name or 'audio cell'}: neither bytes nor path")
    if value is None:
        raise AudioDecodeError(f"{name or 'audio cell'}: missing clip")
    # A decoded cell (torchcodec AudioDecoder, or samples decoded earlier) supports item access.
    array = np.asarray(value["array"], dtype=np.float32)
    sr = int(value["sampling_rate"])
    if array.ndim > 1:
        array = array.mean(axis=0)
    if sampling_rate and sampling_rate != sr:
        array, sr = resample(array, sr, sampling_rate), sampling_rate
    return array, sr


def resample(samples: np.ndarray, from_rate: int, to_rate: int) -> np.ndarray:
    """Mono float32 samples at `to_rate` (librosa's default high-quality resampler; a no-op at the same rate)."""
    samples = np.asarray(samples, dtype=np.float32)
    if from_rate == to_rate:
        return samples
    import librosa

    return librosa.resample(samples, orig_sr=from_rate, target_sr=to_rate).astype(np.float32, copy=False)


def encode_wav(array: np.ndarray, sampling_rate: int, target_rate: int | None = None) -> bytes:
    """Mono 16-bit PCM WAV bytes, resampled to `target_rate` when given."""
    samples = np.asarray(array, dtype=np.float32)
    if samples.ndim != 1:
        raise ValueError(f"encode_wav: expected mono samples, got shape {samples.shape}")
    if target_rate:
        samples, sampling_rate = resample(samples, sampling_rate, target_rate), target_rate
    pcm = (np.clip(samples, -1.0, 1.0) * 32767.0).round().astype("<i2")
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(int(sampling_rate))
        out.writeframes(pcm.tobytes())
    return buffer.getvalue()
