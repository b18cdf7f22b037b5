"""The inputs of the continuous EMO-Reasoning scores: per-second VAD turns, validated and batched.

A turn is a per-second valence/arousal/dominance (VAD) trajectory, given by
column NAME (a mapping, a pandas DataFrame or a CSV file with columns
`valence, arousal, dominance`), never by position: emotion models disagree on
the order of their outputs (SPEC §7). Every problem is a ValueError naming the
turn (or file) and what is wrong: the column, and the line or second where
there is one.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np

DIMENSIONS: tuple[str, ...] = ("valence", "arousal", "dominance")

TurnInput = Mapping | str | os.PathLike | object  # mapping / DataFrame / CSV path


def read_vad_csv(path: str | os.PathLike) -> np.ndarray:
    """A (3, T) VAD array from a CSV with `valence, arousal, dominance` columns (any order, any case).

    Other columns (time, speaker, ...) are ignored. ValueError naming the file
    for a missing column, no rows, a value that is not a number (and its line)
    or NaN/infinity (and its second).
    """
    path = Path(path)
    with path.open(newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        header = {name.strip().lower(): name for name in (reader.fieldnames or [])}
        missing = [d for d in DIMENSIONS if d not in header]
        if missing:
            raise ValueError(f"{path}: missing column(s) {missing}; found {reader.fieldnames}")
        rows = []
        for line_no, row in enumerate(reader, start=2):
            try:
                rows.append([float(row[header[d]]) for d in DIMENSIONS])
            except (TypeError, ValueError):
                raise ValueError(f"{path}: line {line_no} has a non-numeric value in {[row.get(header[d]) for d in DIMENSIONS]}") from None
    if not rows:
        raise ValueError(f"{path}: no rows (a turn needs at least one second of VAD)")
    return checked_vad(np.asarray(rows, dtype=np.float64).T, name=str(path))


def checked_vad(arr: np.ndarray, *, name: str, finite: bool = True) -> np.ndarray:
    """A non-empty C-contiguous (3, T) array, finite unless the caller checks finiteness in bulk (finite=False)."""
    if arr.shape[1] == 0:
        raise ValueError(f"{name}: empty trajectory (a turn needs at least one second of VAD)")
    if finite and not np.isfinite(arr).all():
        dim, t = (int(v[0]) for v in np.nonzero(~np.isfinite(arr)))
        raise ValueError(f"{name}: {DIMENSIONS[dim]} is {float(arr[dim, t])!r} at second {t}; drop or interpolate such frames first")
    return np.ascontiguousarray(arr)


def as_vad(turn: TurnInput, *, name: str = "turn", finite: bool = True) -> np.ndarray:
    """A validated (3, T) VAD array (rows in VAD order) from a mapping/DataFrame with named columns or a CSV path.

    finite=False leaves the NaN/infinity check to the caller (`collect_turns` checks a whole batch at once).

    >>> as_vad({"Dominance": [0.3, 0.4], "valence": [0.1, 0.2], "arousal": [0.5, 0.6]}).tolist()
    [[0.1, 0.2], [0.5, 0.6], [0.3, 0.4]]
    """
    if isinstance(turn, (str, os.PathLike)):
        return read_vad_csv(turn)
    if type(turn) is dict and "valence" in turn and "arousal" in turn and "dominance" in turn:
        # fast path for the common case: a plain dict with lower-case names and equal 1-D columns
        try:
            arr = np.array((turn["valence"], turn["arousal"], turn["dominance"]), dtype=np.float64)
        except (TypeError, ValueError):
            arr = None  # ragged or odd content: the general path below names the problem
        if arr is not None and arr.ndim == 2:
            return checked_vad(arr, name=name, finite=finite)
    if isinstance(turn, np.ndarray) and turn.dtype.names is None:
        raise ValueError(f"{name}: a plain array has no column names; pass a mapping {{'valence': ..., 'arousal': ..., 'dominance': ...}}")
    columns = getattr(turn, "columns", None)
    keys = list(columns) if columns is not None else (list(turn.keys()) if isinstance(turn, Mapping) else None)
    if keys is None and isinstance(turn, np.ndarray):
        keys = list(turn.dtype.names)
    if keys is None:
        raise ValueError(f"{name}: expected a mapping/DataFrame with valence, arousal, dominance columns or a CSV path, got {type(turn).__name__}")
    by_lower = {str(k).strip().lower(): k for k in keys}
    missing = [d for d in DIMENSIONS if d not in by_lower]
    if missing:
        raise ValueError(f"{name}: missing column(s) {missing}; found {keys}")
    cols = []
    for d in DIMENSIONS:
        col = np.asarray(turn[by_lower[d]], dtype=np.float64)
        if col.ndim != 1:
            raise ValueError(f"{name}: column {d} must be 1-D (one value per second), got shape {col.shape}")
        cols.append(col)
    lengths = {len(c) for c in cols}
    if len(lengths) != 1:
        raise ValueError(f"{name}: columns have different lengths {[len(c) for c in cols]}")
    return checked_vad(np.vstack(cols), name=name, finite=finite)


class TurnBatch:
    """Validated turns stored flat: one C-contiguous (3, ΣT) array and the turn offsets into it."""

    __slots__ = ("flat", "offsets")

    def __init__(self, flat: np.ndarray, offsets: np.ndarray):
        self.flat = flat
        self.offsets = offsets

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, i: int) -> np.ndarray:
        return self.flat[:, self.offsets[i] : self.offsets[i + 1]]

    @property
    def lengths(self) -> np.ndarray:
        """Seconds per turn, as floats (the formulas divide by them)."""
        return np.diff(self.offsets).astype(np.float64)


def collect_turns(turns: Sequence[TurnInput], name_of: Callable[[int], str]) -> TurnBatch:
    """Validate and flatten turns in bulk: per turn only name lookups, one NaN check for the batch."""
    cols: tuple[list, list, list] = ([], [], [])
    lengths = np.empty(len(turns), dtype=np.int64)
    for i, turn in enumerate(turns):
        if type(turn) is dict:
            try:
                v, a, d = turn["valence"], turn["arousal"], turn["dominance"]
                n = len(v)
                fast = n > 0 and len(a) == n and len(d) == n
            except (KeyError, TypeError):
                fast = False
            if fast:
                cols[0].append(v)
                cols[1].append(a)
                cols[2].append(d)
                lengths[i] = n
                continue
        arr = as_vad(turn, name=name_of(i), finite=False)
        for k in range(3):
            cols[k].append(arr[k])
        lengths[i] = arr.shape[1]
    offsets = np.zeros(len(turns) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    if len(turns) == 0:
        return TurnBatch(np.zeros((3, 0)), offsets)
    try:
        flat = np.ascontiguousarray(np.stack([np.concatenate(c).astype(np.float64, copy=False) for c in cols]))
        ok = flat.shape == (3, int(offsets[-1]))
    except (TypeError, ValueError):
        ok = False
    if not ok:  # some column is not a flat list of numbers: let the per-turn path name it
        for i, turn in enumerate(turns):
            as_vad(turn, name=name_of(i))
        raise ValueError("VAD columns could not be combined into one batch")  # pragma: no cover - as_vad raises first
    if not np.isfinite(flat).all():
        bad = int(np.flatnonzero(~np.isfinite(flat).all(axis=0))[0])
        i = int(np.searchsorted(offsets, bad, side="right") - 1)
        checked_vad(flat[:, offsets[i] : offsets[i + 1]], name=name_of(i))
    return TurnBatch(flat, offsets)


def paired_turns(user_turns: Sequence, model_turns: Sequence) -> tuple[TurnBatch, TurnBatch]:
    """Validated batches of two equal-length lists of turns (user turn i answered by model turn i)."""
    for what, turns in (("user_turns", user_turns), ("model_turns", model_turns)):
        if isinstance(turns, (str, bytes, Mapping)) or not isinstance(turns, Sequence):
            raise ValueError(f"{what} must be a list of turns, got {type(turns).__name__}")
    if len(user_turns) != len(model_turns):
        raise ValueError(f"{len(user_turns)} user turns but {len(model_turns)} model turns")
    users = collect_turns(user_turns, lambda i: f"user turn {i}")
    models = collect_turns(model_turns, lambda i: f"model turn {i}")
    return users, models


__all__ = ["DIMENSIONS", "TurnBatch", "as_vad", "collect_turns", "paired_turns", "read_vad_csv"]
