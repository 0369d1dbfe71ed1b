"""Atomic file writes: nothing is ever left half-written on disk.

Every writer goes to a temporary file in the destination folder and then ``os.replace``s it,
which is atomic on POSIX and Windows when source and destination share a filesystem.
"""

from __future__ import annotations

import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pandas as pd


@contextmanager
def atomic_path(path: str | os.PathLike, suffix: str = "") -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it onto ``path`` if the block succeeds.

    On any exception the temporary file is removed and ``path`` is left untouched.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=suffix + ".tmp", dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    # mkstemp creates 0600 files; give the result the permissions a plain open() would (umask).
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp_path, 0o666 & ~umask)
    try:
        yield tmp_path
        os.replace(tmp_path, path)
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically and return the path."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically and return the path."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)
    return Path(path)


def atomic_to_csv(df: pd.DataFrame, path: str | os.PathLike) -> Path:
    """Save ``df`` as CSV (no index) atomically."""
    with atomic_path(path, suffix=".csv") as tmp:
        df.to_csv(tmp, index=False)
    return Path(path)


def atomic_to_parquet(df: pd.DataFrame, path: str | os.PathLike) -> Path:
    """Save ``df`` as parquet (pyarrow) atomically."""
    with atomic_path(path, suffix=".parquet") as tmp:
        df.to_parquet(tmp, index=False)
    return Path(path)
