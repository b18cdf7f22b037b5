"""Frame-level valence/arousal/dominance: the extractor interface, trajectories and their CSV files (SPEC §7).

A trajectory has one row per second of a clip with three NAMED columns
(`valence`, `arousal`, `dominance`); nothing here ever reads a model output or a
file column by position. Second k of a clip of d seconds covers [k, k + 1);
a clip has max(1, round(d)) seconds, so a trailing fragment shorter than half
a second joins the last second and a longer one becomes its own (see
`second_bounds`). The CSV layout is the one the metric module reads
(`speecheq_metric.read_vad_csv`): columns `second, valence, arousal, dominance`.

Extractors (`build_vad_extractor(kind, **args)`):
- `windows`: an utterance-level regressor (the audeering model of SPEC §5) on
  sliding one-second windows, one window per second;
- `cser`: the continuous SER of SPEC §7 (eval_scripts/components/cser.py).
"""

from __future__ import annotations

import abc
import csv
import io
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from speecheq_metric.vad import DIMENSIONS
from speecheq_metric.vad import read_vad_csv

SAMPLING_RATE = 16_000
CSV_COLUMNS = ("second", *DIMENSIONS)


def n_seconds(n_samples: int, sampling_rate: int = SAMPLING_RATE) -> int:
    """Rows of a clip's trajectory: its duration rounded to whole seconds (half up), at least one."""
    return max(1, int(math.floor(n_samples / sampling_rate + 0.5)))


def second_bounds(n_samples: int, sampling_rate: int = SAMPLING_RATE) -> list[tuple[int, int]]:
    """Sample range [start, end) of each second; the last one runs to the clip's end."""
    count = n_seconds(n_samples, sampling_rate)
    bounds = [(k * sampling_rate, (k + 1) * sampling_rate) for k in range(count)]
    bounds[-1] = (bounds[-1][0], n_samples) if count > 1 else (0, n_samples)
    return bounds


@dataclass(frozen=True)
class VadTrajectory:
    """Per-second valence, arousal and dominance of one clip (equal-length float arrays)."""

    valence: np.ndarray
    arousal: np.ndarray
    dominance: np.ndarray

    def __post_init__(self) -> None:
        lengths = {len(np.asarray(getattr(self, d))) for d in DIMENSIONS}
        if len(lengths) != 1 or 0 in lengths:
            raise ValueError(f"a trajectory needs equal, non-empty columns; got lengths {[len(getattr(self, d)) for d in DIMENSIONS]}")

    def __len__(self) -> int:
        return len(self.valence)

    @classmethod
    def from_named(cls, values: np.ndarray, columns: dict[str, int]) -> VadTrajectory:
        """From a (seconds, outputs) array and each dimension's output column (by name, from the model's config)."""
        values = np.asarray(values, dtype=np.float64)
        if values.ndim != 2:
            raise ValueError(f"expected a (seconds, outputs) array, got shape {values.shape}")
        return cls(**{d: values[:, columns[d]].copy() for d in DIMENSIONS})

    @classmethod
    def from_rows(cls, rows: list[dict[str, float]]) -> VadTrajectory:
        """From one {valence, arousal, dominance} mapping per second."""
        return cls(**{d: np.array([float(r[d]) for r in rows]) for d in DIMENSIONS})

    def as_dict(self) -> dict[str, list[float]]:
        """Named columns as lists (the metric module's turn input)."""
        return {d: np.asarray(getattr(self, d), dtype=np.float64).tolist() for d in DIMENSIONS}

    def to_csv_text(self) -> str:
        """The SPEC §7 CSV: `second, valence, arousal, dominance`, one row per second (repr-exact floats)."""
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(CSV_COLUMNS)
        for k in range(len(self)):
            writer.writerow([k, *(repr(float(getattr(self, d)[k])) for d in DIMENSIONS)])
        return out.getvalue()

    @classmethod
    def read_csv(cls, path: str | Path) -> VadTrajectory:
        """A trajectory from a CSV with named columns (any order, extra columns ignored)."""
        arr = read_vad_csv(path)
        return cls(**{d: arr[i] for i, d in enumerate(DIMENSIONS)})


class VadExtractor(abc.ABC):
    """Clips (16 kHz mono float32) in, one per-second trajectory per clip out, same order."""

    name: str = "vad"
    sampling_rate: int = SAMPLING_RATE

    @abc.abstractmethod
    def trajectories(self, clips: list[np.ndarray]) -> list[VadTrajectory]:
        """Per-second V/A/D of each clip."""

    def describe(self) -> dict:
        """Identity and settings, recorded in results."""
        return {"name": self.name}


class WindowedVad(VadExtractor):
    """An utterance-level V/A/D regressor applied to sliding windows: one window per second of the clip.

    The window of second k starts at k * hop_s; a window that would run past the clip's end is
    moved back to end there (so every window holds `window_s` of audio when the clip is that
    long), and a clip shorter than one window is rated whole.
    """

    name = "windows"

    def __init__(self, pretrained: str | None = None, *, window_s: float = 1.0, hop_s: float = 1.0, seed: int = 0,
                 batch_size: int = 16, device: str | None = None) -> None:
        from eval_scripts.components.ser import AUDEERING_SER
        from eval_scripts.components.ser import UtteranceSER

        if window_s <= 0 or hop_s <= 0:
            raise ValueError(f"window_s and hop_s must be > 0, got {window_s}, {hop_s}")
        self.window_s, self.hop_s = float(window_s), float(hop_s)
        self.regressor = UtteranceSER(pretrained or AUDEERING_SER, seed=seed, batch_size=batch_size, device=device)

    def windows(self, n_samples: int) -> list[tuple[int, int]]:
        """Sample range of each second's window."""
        width = int(round(self.window_s * self.sampling_rate))
        hop = int(round(self.hop_s * self.sampling_rate))
        count = n_seconds(n_samples, hop)  # one window per hop: per second at the default hop
        if n_samples <= width:
            return [(0, n_samples)] * count
        out = []
        for k in range(count):
            start = min(k * hop, n_samples - width)
            out.append((start, start + width))
        return out

    def trajectories(self, clips: list[np.ndarray]) -> list[VadTrajectory]:
        pieces, owners = [], []
        for i, clip in enumerate(clips):
            for start, end in self.windows(len(clip)):
                pieces.append(clip[start:end])
                owners.append(i)
        values = self.regressor.predict(pieces)
        rows: list[list[dict[str, float]]] = [[] for _ in clips]
        for i, value in zip(owners, values):
            rows[i].append(value)
        return [VadTrajectory.from_rows(r) for r in rows]

    def describe(self) -> dict:
        return {"name": self.name, "window_s": self.window_s, "hop_s": self.hop_s, "regressor": self.regressor.describe()}


def _cser(**args) -> VadExtractor:
    from eval_scripts.components.cser import CserVad

    return CserVad(**args)


EXTRACTORS: dict[str, Callable[..., VadExtractor]] = {"windows": WindowedVad, "cser": _cser}


def build_vad_extractor(kind: str = "windows", **args) -> VadExtractor:
    """A registered extractor by name; unknown names fail with the list."""
    if kind not in EXTRACTORS:
        raise ValueError(f"unknown V/A/D extractor {kind!r}; known: {', '.join(sorted(EXTRACTORS))}")
    return EXTRACTORS[kind](**args)
