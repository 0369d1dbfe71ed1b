"""How an output folder was made: ``provenance.json`` beside the results.

A provenance record holds the call (a public function and its arguments, and the process's
command line, which is the CLI command when it ran from the CLI), the settings that decide the
numbers, the versions of the packages that compute them, digests of the toolkit's own source
files (and the git commit when the package runs from a checkout), the weight digests of the
checkpoints used, and the machine (Python, platform, CPU count, torch threads).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import platform
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

from interp.core.io import atomic_write_text

FILENAME = "provenance.json"

#: Distributions whose versions can change the numbers or the figures.
PACKAGES = (
    "emergence-lens",
    "torch",
    "transformers",
    "transformer-lens",
    "tokenizers",
    "safetensors",
    "huggingface_hub",
    "numpy",
    "pandas",
    "pyarrow",
    "plotly",
    "circuitsvis",
)

#: The toolkit's source folders, relative to the repository root.
SOURCE_DIRS = ("interp", "synthetic")


def package_versions(names=PACKAGES) -> dict[str, str | None]:
    """Installed version of each distribution (``None`` when it is not installed)."""
    versions = {"python": platform.python_version()}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def source_digests(root: Path | None = None) -> dict[str, Any]:
    """sha256 of each ``.py`` file of the toolkit (relative path -> hex), their combined digest
    (sha256 of the sorted ``path digest`` lines) and the git commit of the checkout (``None``
    outside a git checkout; ``dirty`` is ``True`` when tracked files differ from it)."""
    root = root or Path(__file__).resolve().parents[2]  # the repository (this file: interp/core/)
    files = {}
    for folder in SOURCE_DIRS:
        for path in sorted((root / folder).rglob("*.py")):
            files[path.relative_to(root).as_posix()] = hashlib.sha256(path.read_bytes()).hexdigest()
    combined = hashlib.sha256("".join(f"{p} {d}\n" for p, d in sorted(files.items())).encode()).hexdigest()
    return {"combined": combined, "files": files, **git_state(root)}


def git_state(root: Path) -> dict[str, Any]:
    """``git_commit`` (the checkout's HEAD) and ``git_dirty`` (tracked files differ from it) of the
    checkout holding ``root``; both None outside a git checkout (or without git)."""
    try:
        top = subprocess.run(
            ["git", "rev-parse", "--show-toplevel"], cwd=root, capture_output=True, text=True, timeout=10
        ).stdout.strip()
        if not top or Path(top).resolve() != root.resolve():  # e.g. an installed copy inside another checkout
            return {"git_commit": None, "git_dirty": None}
        commit = (
            subprocess.run(
                ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10
            ).stdout.strip()
            or None
        )
        status = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=10,
        )
        dirty = bool(status.stdout.strip()) if commit and status.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        commit, dirty = None, None
    return {"git_commit": commit, "git_dirty": dirty}


def _json_safe(value: Any) -> Any:
    """Settings as JSON: dataclasses as dicts, paths and unknown objects as ``repr`` strings."""
    from dataclasses import asdict, is_dataclass

    if is_dataclass(value) and not isinstance(value, type):
        return {"type": type(value).__name__, **{k: _json_safe(v) for k, v in asdict(value).items()}}
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value) if not isinstance(value, Path) else str(value)


def make_provenance(call: str, settings: dict[str, Any], checkpoints: dict[str, Any] | None = None) -> dict[str, Any]:
    """A provenance record.

    Args:
        call: the public function that made the folder, e.g. ``"interp.main_job.runner.run_study"``.
        settings: its arguments (anything that decides the numbers); made JSON-safe.
        checkpoints: per source, the weight digest of every checkpoint step used.
    """
    import torch

    return {
        "created_utc": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "call": call,
        "command": sys.argv[:] if sys.argv and sys.argv[0] else None,
        "settings": _json_safe(settings),
        "checkpoints": _json_safe(checkpoints or {}),
        "packages": package_versions(),
        "source": source_digests(),
        "machine": {
            "platform": platform.platform(),
            "machine": platform.machine(),
            "cpu_count": os.cpu_count(),
            "torch_threads": torch.get_num_threads(),
            "python": sys.version.split()[0],
        },
    }


def write_provenance(folder: str | Path, record: dict[str, Any]) -> Path:
    """Write ``record`` to ``folder/provenance.json`` atomically; returns the path."""
    return atomic_write_text(Path(folder) / FILENAME, json.dumps(record, indent=2, sort_keys=False) + "\n")


def read_provenance(folder: str | Path) -> dict[str, Any] | None:
    """The folder's provenance record, or ``None`` when it has none."""
    path = Path(folder) / FILENAME
    return json.loads(path.read_text()) if path.is_file() else None
