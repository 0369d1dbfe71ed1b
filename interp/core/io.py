"""Atomic file writes: nothing is ever left half-written on disk.

Every writer goes to a temporary file in the destination folder and then ``os.replace``s it,
which is atomic on POSIX and Windows when source and destination share a filesystem.
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pandas is imported by the caller that hands in a DataFrame
    import pandas as pd


def cache_root() -> Path:
    """Where trained suites and other built artefacts live: ``$EMERGENCE_LENS_CACHE``, else
    ``$XDG_CACHE_HOME/emergence-lens``, else ``~/.cache/emergence-lens``."""
    env = os.environ.get("EMERGENCE_LENS_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "emergence-lens"


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


def read_kept_csv(
    path: str | os.PathLike,
    columns: list[str],
    whole=None,
    damaged: str = "is not a whole table",
    then: str = "it is redone",
    echo=None,
) -> pd.DataFrame | None:
    """A kept CSV file, checked: ``None`` when there is none; a damaged one (unreadable, other
    ``columns``, or ``whole(frame)`` false) is named in one line (``warning: PATH WHY; THEN``),
    removed, and ``None`` returned, so that the caller redoes it. Never trusted half-read."""
    import pandas as pd

    path = Path(path)
    if not path.is_file():
        return None
    try:
        frame, why = pd.read_csv(path), damaged
    except (OSError, ValueError) as error:
        frame, why = None, f"cannot be read ({error})"
    if frame is None or list(frame.columns) != list(columns) or (whole is not None and not whole(frame)):
        (echo or (lambda line: print(line, flush=True)))(f"warning: {path} {why}; {then}")
        path.unlink(missing_ok=True)
        return None
    return frame


def replace_block(path: str | os.PathLike, block: str, markers: tuple[str, str]) -> Path:
    """Replace the text of ``path`` between the ``markers`` (begin, end; both kept; every such
    block) by ``block``, atomically: a docs page's generated block. Returns the path.

    Raises:
        ValueError: ``path`` lacks either marker, one line naming the file and both markers.
    """
    import re

    begin, end = markers
    text = Path(path).read_text()
    if begin not in text or end not in text:
        raise ValueError(f"{path} has no {begin} ... {end} block to replace")
    return atomic_write_text(
        path, re.sub(re.escape(begin) + r".*?" + re.escape(end), lambda m: f"{begin}\n{block}{end}", text, flags=re.S)
    )


def markdown_table(csv: str | os.PathLike) -> str:
    """A CSV file as a GitHub Markdown table (floats to 4 significant digits, a missing value as
    ``—``), one line per row and a trailing newline."""
    import pandas as pd

    df = pd.read_csv(csv)
    fmt = lambda v: f"{v:.4g}" if isinstance(v, float) else ("—" if v is None else str(v))  # noqa: E731
    lines = ["| " + " | ".join(map(str, df.columns)) + " |", "| " + " | ".join("---" for _ in df.columns) + " |"]
    lines += ["| " + " | ".join(fmt(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join(lines) + "\n"


def atomic_to_parquet(df: pd.DataFrame, path: str | os.PathLike) -> Path:
    """Save ``df`` as parquet (pyarrow) atomically."""
    with atomic_path(path, suffix=".parquet") as tmp:
        df.to_parquet(tmp, index=False)
    return Path(path)


def remove_folder(path: str | os.PathLike) -> None:
    """Remove a folder and everything in it, renaming it first: a kill half-way through the
    removal leaves a hidden ``.drop-*`` sibling, never a half-emptied folder under its own name.
    Nothing happens when it does not exist."""
    import shutil

    folder = Path(path)
    if not folder.exists():
        return
    doomed = folder.with_name(f".drop-{folder.name}-{os.getpid()}")
    os.replace(folder, doomed)
    shutil.rmtree(doomed, ignore_errors=True)


def config_json(config: Any, **kwargs: Any) -> str:
    """Canonical JSON of a config (sorted keys; dataclasses, tuples, numpy and torch scalars
    converted); ``kwargs`` go to :func:`json.dumps` (e.g. ``indent``, ``separators``).

    Raises:
        TypeError: a value that has no JSON form.
    """
    if dataclasses.is_dataclass(config) and not isinstance(config, type):
        config = dataclasses.asdict(config)
    return json.dumps(config, sort_keys=True, default=to_jsonable, **kwargs)


def to_jsonable(obj: Any) -> Any:
    """The JSON form of a value :func:`json.dumps` does not know (its ``default=`` hook):
    tuples and sets -> lists, dataclasses -> dicts, paths -> strings, numpy/torch scalars -> Python scalars.

    Raises:
        TypeError: anything else.
    """
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return dataclasses.asdict(obj)
    if isinstance(obj, os.PathLike):
        return os.fspath(obj)
    if isinstance(obj, (tuple, set, frozenset)):
        return list(obj)
    if hasattr(obj, "item"):  # numpy / torch scalars
        return obj.item()
    raise TypeError(f"config value {obj!r} of type {type(obj).__name__} is not JSON-serialisable")


def write_figure_html(fig: Any, path: str | os.PathLike) -> Path:
    """Write a plotly figure as a self-contained HTML page (plotly.js inlined, so it opens
    offline), atomically; returns the path."""
    return atomic_write_text(path, fig.to_html(include_plotlyjs=True, full_html=True))


def check_out_dir(path: str | os.PathLike | None, option: str = "--out") -> Path | None:
    """Refuse an output folder that cannot be one, before any work: returns ``path`` as a Path.

    Nothing is left behind here: the nearest existing folder on ``path`` is tried with a temporary
    file, removed at once (as root, permission bits say nothing; a read-only file system or a
    pseudo file system such as /sys only answers a write); the atomic writers create the folder
    with the first file, so a command that fails before writing leaves no folder behind.

    Raises:
        ValueError: ``path`` is an existing file, or lies under one, or no file can be written
            where it would be made; one line naming ``option`` and what would do instead.
    """
    if path is None:
        return None
    path = Path(path).expanduser()
    for where in (path, *path.parents):
        if where.exists():
            if not where.is_dir():
                raise ValueError(
                    f"{option} {str(path)!r}: {str(where)!r} is an existing file, not a folder; "
                    f"give {option} a folder (new or existing; a new one is made with the first file)"
                )
            try:
                handle, probe = tempfile.mkstemp(dir=where, prefix=".emergence-write-check-")
            except OSError as error:
                raise ValueError(
                    f"{option} {str(path)!r}: cannot write in {str(where)!r} ({error.strerror}); "
                    f"give {option} a folder you can write, e.g. {option} {_writable_suggestion(path.name)}"
                ) from None
            os.close(handle)
            os.unlink(probe)
            break
    return path


def _writable_suggestion(name: str) -> str:
    """A folder the user can write for an output named ``name``: under ``~/emergence-results``
    when the home folder is writable, else under the temporary folder."""
    home = Path.home()
    base = home / "emergence-results" if os.access(home, os.W_OK) else Path(tempfile.gettempdir()) / "emergence-results"
    return str(base / (name or "out"))
