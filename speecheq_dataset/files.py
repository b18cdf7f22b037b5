"""Writing files and folders the safe way: atomically, with the usual permissions, and explaining a failed write in one line.

`tempfile` creates files 0600 and folders 0700, which is right for secrets and
wrong for results that a team shares: whatever we rename into place gets the
mode a plain `open()` or `mkdir` would have given it under the process umask.
"""

from __future__ import annotations

import errno
import os
import tempfile
import threading
from pathlib import Path

_umask_lock = threading.Lock()


def process_umask() -> int:
    """The process umask (read by setting and restoring it, under a lock)."""
    with _umask_lock:
        mask = os.umask(0o022)
        os.umask(mask)
    return mask


def give_usual_mode(path: Path | str) -> None:
    """chmod `path` to what `open()`/`mkdir` would have created under the umask (0666/0777 minus the umask)."""
    path = Path(path)
    base = 0o777 if path.is_dir() else 0o666
    os.chmod(path, base & ~process_umask())


def make_temp_dir(dest: Path | str, *, prefix: str) -> Path:
    """A fresh temporary folder beside `dest` (same filesystem, so it can be renamed into place), usual mode."""
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=prefix, dir=dest.parent))
    give_usual_mode(tmp)
    return tmp


def write_bytes_atomic(path: Path | str, data: bytes) -> None:
    """Write through a temp file + fsync + rename: readers see the old or the new file, never half of one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~process_umask())
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def stale_temporaries(folder: Path | str, names: tuple[str, ...]) -> list[Path]:
    """Leftover `.<name>.*.tmp` files of write_bytes_atomic in `folder` (a kill between write and rename leaves them)."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    return sorted(p for name in names for p in folder.glob(f".{name}.*.tmp") if p.is_file())


# errno values that mean "the disk (or a quota, or a file size limit) is full".
_FULL = {errno.ENOSPC: "No space left on device", errno.EFBIG: "File too large", errno.EDQUOT: "Disk quota exceeded"}


def describe_write_error(exc: BaseException, fallback_path: Path | str | None = None) -> str | None:
    """One line for a failed write ("No space left on device: /out/data/x.parquet"), or None if `exc` is not one.

    Walks the exception's causes (datasets and pyarrow wrap the OSError) and also
    reads pyarrow's messages, which carry the errno only as text.
    """
    seen = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno in _FULL:
            where = current.filename or fallback_path
            return f"{_FULL[current.errno]}: {where}" if where else _FULL[current.errno]
        text = str(current)
        for code, reason in _FULL.items():
            if reason in text or f"errno {code}]" in text.lower():
                return f"{reason}: {fallback_path}" if fallback_path else reason
        current = current.__cause__ or current.__context__
    return None


# Exceptions that mean the command was given something wrong (a path, a value, a folder it must not write over):
# exit status 2, as argparse uses for its own usage errors. A failure while working (a full disk, the network,
# a faulty dialogue under --strict) exits 1.
USER_MISTAKES: tuple[type[BaseException], ...] = (ValueError, FileNotFoundError, NotADirectoryError, IsADirectoryError,
                                                  FileExistsError, ImportError)


def one_line(exc: BaseException) -> str:
    """An exception as one line: its message's first line (the rest of a library's message is noise on a terminal)."""
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def exit_status(exc: BaseException) -> int:
    """2 for a user mistake (USER_MISTAKES), 1 for any other failure."""
    return 2 if isinstance(exc, USER_MISTAKES) else 1
