"""Audio I/O shared by the builders and the runner: decode encoded clips to arrays.

Clips are stored as their original encoded bytes (MP3 for the published data,
WAV for the embedded sample); decoding happens here, once, with torchcodec.
"""

from __future__ import annotations

import io
import os
import wave
from pathlib import Path

import numpy as np


class AudioDecodeError(ValueError):
    """A clip that cannot be decoded or holds no samples; the message names it."""


class EmptyAudioError(AudioDecodeError):
    """A clip with no content: zero bytes, or a valid container that decodes to no samples."""


def decode_audio(source: bytes | str | os.PathLike, sampling_rate: int | None = None, *, name: str = "") -> tuple[np.ndarray, int]:
    """Decode encoded audio (bytes or a file path) to mono float32 samples.

    `sampling_rate` resamples when given; `name` labels errors (a file or column).
    Returns (samples, sampling_rate).
    """
    from torchcodec.decoders import AudioDecoder

    label = name or (str(source) if not isinstance(source, bytes) else "<bytes>")
    if isinstance(source, (str, os.PathLike)):
        source = Path(source)
        if not source.is_file():
            raise AudioDecodeError(f"{label}: no such audio file")
        source = source.read_bytes()
    if not source:
        raise EmptyAudioError(f"{label}: empty audio (0 bytes)")
    try:
        decoder = AudioDecoder(source, sample_rate=sampling_rate, num_channels=1)
        samples = decoder.get_all_samples()
    except Exception as exc:  # torchcodec raises RuntimeError/ValueError variants
        if _holds_no_frames(source):
            raise EmptyAudioError(f"{label}: audio decodes to no samples (a valid container with 0 frames)") from exc
        raise AudioDecodeError(f"{label}: cannot decode audio ({exc})") from exc
    array = samples.data.numpy()[0].astype(np.float32, copy=False)
    if array.size == 0:
        raise EmptyAudioError(f"{label}: audio decodes to no samples")
    return array, int(samples.sample_rate)


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
