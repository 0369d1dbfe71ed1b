"""`make lock`: constraints.txt rewritten from a venv's ``pip freeze``, keeping its comment lines
and its environment-marker lines.

A package pinned once per side of a Python boundary, such as::

    soupsieve==4.1.3; python_full_version >= "3.11.5"
    soupsieve==2.9.2; python_full_version < "3.11.5"

keeps all of its lines, in the freeze's order: the line whose marker holds for the Python running
this script takes the venv's version, the others stay as written (only a venv on that other
Python can update them; `make check-constraints`, which `make lock` runs after, says whether
they still resolve). Every other line is the freeze's.

Usage: ``pip freeze --exclude-editable | python tools/lock_constraints.py constraints.txt > new``
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from packaging.markers import Marker
from packaging.utils import canonicalize_name

_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def _name(line: str) -> str:
    match = _NAME.match(line)
    if match is None:
        raise ValueError(f"not a requirement line: {line!r}")
    return canonicalize_name(match.group(1))


def locked(old: str, freeze: str) -> str:
    """The new constraints text: ``old``'s comments, then ``freeze``'s lines with the marker
    groups of ``old`` in place of their packages' lines (groups of packages the venv lacks last)."""
    comments = [line for line in old.splitlines() if line.startswith("#")]
    groups: dict[str, list[str]] = {}
    for line in old.splitlines():
        if ";" in line and not line.startswith("#") and line.strip():
            groups.setdefault(_name(line), []).append(line)
    body: list[str] = []
    for line in freeze.splitlines():
        if not line.strip():
            continue
        name = _name(line)
        if name not in groups:
            body.append(line)
            continue
        pin = line.split(";")[0].strip()
        for kept in groups.pop(name):
            marker = kept.split(";", 1)[1]
            body.append(f"{pin};{marker}" if Marker(marker.strip()).evaluate() else kept)
    body += [line for lines in groups.values() for line in lines]
    return "\n".join(comments + body) + "\n"


if __name__ == "__main__":
    sys.stdout.write(locked(Path(sys.argv[1]).read_text(), sys.stdin.read()))
