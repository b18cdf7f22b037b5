"""Log-mel features clip by clip, each clip padded only just past its own end (the omni families; see hf_families).

`clip_log_mels` is a plain function of (extractor, samples) so a loader worker
process can run it; `PerClipFeatures` wraps a processor's feature extractor with
it and keeps each clip's features for as long as the clip lives.
"""

from __future__ import annotations

from eval_scripts.models.memo import ClipMemo

PAD_UNIT = 16000  # samples (1 s): clips are padded to whole seconds ...
PAD_GAP = 400  # ... with at least this many zero samples after the end


def clip_log_mels(extractor, samples, kwargs: dict | None = None, unit: int = PAD_UNIT, gap: int = PAD_GAP):
    """Log-mels (mels x valid frames) of one clip, padded to whole `unit`s with at least `gap` zero samples.

    The Whisper extractor computes the STFT over the padding too; padding each clip only a
    little keeps its valid frames exactly those the processor's 30-s padding gives (so they
    do not depend on batch-mates) at a fraction of the cost. Only the valid frames are
    returned: the omni encoders read just the frames `feature_attention_mask` marks.
    """
    import numpy as np

    samples = np.asarray(samples, dtype=np.float32)
    target = ((len(samples) + gap) // unit + 1) * unit
    call = dict(kwargs or {}, padding="max_length", max_length=target, truncation=False, return_attention_mask=True, return_tensors="np")
    out = extractor([samples], **call)
    valid = int(out["attention_mask"][0].sum())
    return np.ascontiguousarray(out["input_features"][0][:, :valid])


class PerClipFeatures:
    """A feature extractor run clip by clip (`clip_log_mels`); a batch is the clips' valid frames, zero-padded.

    Features live in a `ClipMemo` (as long as their clip): round 2 reuses round 1's, and
    those computed ahead by the runner's loader (`HFAudioLM.prepare_clips`, or a loader
    worker process through `adopt_prepared`) are found.
    """

    def __init__(self, extractor, unit: int = PAD_UNIT, gap: int = PAD_GAP) -> None:
        self.extractor = extractor
        self.unit, self.gap = unit, gap
        self.memo = ClipMemo()  # (clip array, extractor kwargs) -> log-mels

    def __getattr__(self, name):
        return getattr(self.extractor, name)

    @staticmethod
    def key(kwargs: dict) -> tuple:
        return tuple(sorted(kwargs.items()))

    def clip_features(self, clip, **kwargs):
        """Log-mels (mels x valid frames) of one clip array (thread-safe)."""
        known = self.memo.get(clip, self.key(kwargs))
        if known is None:
            known = clip_log_mels(self.extractor, clip, kwargs, self.unit, self.gap)
            self.memo.put(clip, self.key(kwargs), known)
        return known

    def adopt(self, clip, features, **kwargs) -> None:
        """Features of `clip` computed elsewhere (a loader worker process) by `clip_log_mels` with these kwargs."""
        self.memo.put(clip, self.key(kwargs), features)

    def __call__(self, audio, **kwargs):
        import numpy as np
        from transformers import BatchFeature

        return_tensors = kwargs.pop("return_tensors", None)
        for name in ("padding", "max_length", "truncation", "return_attention_mask", "pad_to_multiple_of"):
            kwargs.pop(name, None)
        clips = [audio] if isinstance(audio, np.ndarray) and audio.ndim == 1 else list(audio)
        parts = [self.clip_features(c, **kwargs) for c in clips]
        frames = max(f.shape[-1] for f in parts)
        # np.empty + explicit zeroing: np.zeros of a fresh ~30 MB block page-faults on every write (10x slower).
        features = np.empty((len(parts), parts[0].shape[0], frames), dtype=np.float32)
        mask = np.zeros((len(parts), frames), dtype=np.int32)
        for i, f in enumerate(parts):
            features[i, :, : f.shape[-1]] = f
            features[i, :, f.shape[-1] :] = 0.0
            mask[i, : f.shape[-1]] = 1
        return BatchFeature({"input_features": features, "attention_mask": mask}, tensor_type=return_tensors)
