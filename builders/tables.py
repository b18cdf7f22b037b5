"""CSV reports of the builders' commands (audit, validate, oracle)."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from pathlib import Path

from speecheq_dataset.files import write_bytes_atomic


def check_replaceable(path: Path | str, header: list[str]) -> None:
    """A ValueError unless `path` is free or holds a report with this header (an earlier one of ours, fine to replace)."""
    path = Path(path)
    if not path.exists():
        return
    if path.is_dir():
        raise ValueError(f"{path} is a folder; a report needs a file path")
    with path.open(newline="", encoding="utf-8", errors="replace") as existing:
        first = next(csv.reader(existing), None)
    if first != header:
        raise ValueError(f"{path} exists and is not a report of this kind (its first line is not {','.join(header[:3])},...); "
                         "it is left as it is: choose another report path")


def write_csv(path: Path | str, header: list[str], rows: Iterable[list]) -> None:
    """A CSV file with a header row, written whole or not at all (its folder created when missing)."""
    check_replaceable(path, header)
    text = io.StringIO(newline="")
    writer = csv.writer(text)
    writer.writerow(header)
    writer.writerows(rows)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    write_bytes_atomic(path, text.getvalue().encode("utf-8"))
