"""Measure the notebooks' stated times (analyses/notebooks/README.md, "time on 2 cores"; issue 67
item 7): execute each notebook top to bottom at the scale a user runs it (or ``--scale ci``, the
tests' scale) in a fresh kernel of this interpreter with nbclient, and print one Markdown row per
notebook: wall seconds for the whole notebook and for its slowest cell, with the machine's load
average before and after, the interpreter and the CPU.

Usage: ``python tools/time_notebooks.py [first_hour main_job synthetic] [--scale ci]
[--cache DIR]``. ``--cache`` is the toolkit's cache (``EMERGENCE_LENS_CACHE``): one that holds the
trained quick suite measures the notebooks "once the quick suite is cached", an empty one
includes its training. ``hub_pythia`` is not timed here: it downloads from the hub (its time is
the network's).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "analyses" / "notebooks"
TIMED = ("first_hour", "main_job", "synthetic")


def run_notebook(name: str, env: dict[str, str], work: Path) -> tuple[float, float]:
    """Execute ``analyses/notebooks/<name>.ipynb`` in a fresh kernel of this interpreter (working
    folder: the repository root) with ``env`` added; returns (whole notebook, slowest cell), wall
    seconds. Raises nbclient's ``CellExecutionError`` on the first failing cell."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    spec = work / "kernels" / "emergence-lens-timing"
    spec.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(json.dumps({"argv": argv, "display_name": "timing", "language": "python"}))
    os.environ["JUPYTER_PATH"] = str(work)
    cells: list[float] = []
    client = NotebookClient(
        nb,
        timeout=3600,
        kernel_name="emergence-lens-timing",
        resources={"metadata": {"path": str(ROOT)}},
        env={**os.environ, **env},
    )
    client.on_cell_execute = lambda cell, cell_index: cells.append(time.perf_counter())
    started = time.perf_counter()
    client.execute()
    total = time.perf_counter() - started
    marks = [*cells, started + total]
    slowest = max(b - a for a, b in itertools.pairwise(marks)) if cells else total
    return total, slowest


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", default=list(TIMED), help=f"notebooks (default: {' '.join(TIMED)})")
    parser.add_argument("--scale", choices=("full", "ci"), default="full", help="full: as a user runs it (default)")
    parser.add_argument("--cache", type=Path, default=None, help="EMERGENCE_LENS_CACHE for the kernels")
    args = parser.parse_args(argv)
    bad = [n for n in args.names if n not in TIMED]
    if bad:
        raise SystemExit(f"error: notebook {bad[0]!r} is not timed here; valid: {', '.join(TIMED)}")
    env = {"OMP_NUM_THREADS": "1"}
    if args.scale == "ci":
        env["EMERGENCE_LENS_NOTEBOOK_SCALE"] = "ci"
    if args.cache is not None:
        env["EMERGENCE_LENS_CACHE"] = str(args.cache)
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())  # fmt: skip
    print(f"Python {platform.python_version()}, {os.cpu_count()} cores ({cpu}), scale {args.scale}")
    print("| notebook | whole notebook (s) | slowest cell (s) | load average before / after |")
    print("| --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.names:
            out = Path(tmp) / name
            out.mkdir()
            before = os.getloadavg()[0]
            total, slowest = run_notebook(name, {**env, "EMERGENCE_LENS_NOTEBOOK_OUT": str(out / "results")}, out)
            print(f"| `{name}.ipynb` | {total:.0f} | {slowest:.0f} | {before:.1f} / {os.getloadavg()[0]:.1f} |",
                  flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
