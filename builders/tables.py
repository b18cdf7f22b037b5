"""CSV reports of the builders' commands (audit, validate, oracle)."""

from __future__ import annotations

import csv
from collections.abc import Iterable
from pathlib import Path


def write_csv(path: Path | str, header: list[str], rows: Iterable[list]) -> None:
    """A CSV file with a header row (its folder created when missing)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as out:
        writer = csv.writer(out)
        writer.writerow(header)
        writer.writerows(rows)
