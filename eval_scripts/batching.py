"""Queries per model call: a fixed `--batch-size N`, or `auto`, the largest batch that fits.

`auto` starts at AUTO_START and, whenever a model call runs out of memory, halves
the batch that failed and retries the same queries; the size found is kept for the rest of the run (and
recorded in results.json › deployment.session.batch_size). Answers do not depend
on the batch size (greedy decoding), so neither does a run that had to shrink.
"""

from __future__ import annotations

import logging

logger = logging.getLogger(__name__)

AUTO = "auto"
AUTO_START = 64  # the first batch size `auto` tries


def parse_batch_size(text: str) -> int | str:
    """`--batch-size` values: a positive integer or "auto"."""
    if str(text).strip().lower() == AUTO:
        return AUTO
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"--batch-size must be a positive integer or 'auto', got {text!r}") from None
    if value < 1:
        raise ValueError(f"--batch-size must be >= 1 or 'auto', got {value}")
    return value


def is_out_of_memory(exc: BaseException) -> bool:
    """Whether a model call failed for lack of (device or host) memory."""
    if isinstance(exc, MemoryError):
        return True
    try:
        import torch

        if isinstance(exc, torch.OutOfMemoryError):
            return True
    except (ImportError, AttributeError):
        pass
    message = str(exc).lower()
    return isinstance(exc, RuntimeError) and ("out of memory" in message or "can't allocate memory" in message)


class BatchSize:
    """The current queries-per-call of a run: fixed, or `auto` (halved on out-of-memory, then kept)."""

    def __init__(self, value: int | str, start: int = AUTO_START) -> None:
        value = parse_batch_size(value)
        self.auto = value == AUTO
        self.size = int(start) if self.auto else int(value)

    def shrink(self, exc: BaseException, attempted: int) -> bool:
        """After a call on `attempted` queries failed: in auto mode and out of memory, halve that batch and return True (retry)."""
        if not self.auto or attempted <= 1 or not is_out_of_memory(exc):
            return False
        self.size = max(1, min(self.size, attempted) // 2)  # what the failed call held is freed with its exception
        logger.warning("out of memory at batch size %d; --batch-size auto continues with %d", attempted, self.size)
        return True
