"""Does a population run hang on the interpreter? Runs of the population trained again under
other Python interpreters and compared byte for byte with the runs the population entry trained.

For each ``--python`` interpreter (a Python with this project's requirements installed, e.g. a
fresh clone's ``.venv/bin/python`` made with Debian's ``/usr/bin/python3``, or pyenv's 3.12 or
3.13) and each ``--run``: the run is trained in that interpreter, in a scratch cache, by the same
unit the suite's executors use (:func:`interp.sources.suites.train_unit`: the kernel pins, one
thread), from this checkout (``PYTHONPATH``); then every checkpoint's weight and optimizer files
and the loss curve are compared with the same run in this machine's cache (trained first, here,
if the cache lacks it). Equal bytes mean the population's points of emergence do not depend on
the interpreter at this kernel level; the unpinned entry (``analyses.population_unpinned``)
asks the same of another kernel level.

Each run is trained under its spec with its seed alone (as ``python -m analyses.population --seeds
N`` trains it), so a run trained one seed at a time is found in the cache. The rows are kept in
``docs/data/population-crosscheck/rows.csv``, one per (run, interpreter, torch): a later call adds
its rows or replaces its own, and the docs block lists them all.

Usage: ``python -m analyses.population_crosscheck --python PATH [--python PATH ...] [--spec NAME]
[--run NAME ...] [--update-docs]``. Default runs: seed 0 of the d_model-64 1-head arm and of the
d_model-128 arm (``--spec population``), else seed 0 of the spec's first arm. Runtime: about 3-6
min of one core per run and interpreter.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import asdict, replace
from pathlib import Path

import pandas as pd

from interp.cli.options import description
from interp.population.kept import SPECS, update_docs

ROOT = Path(__file__).resolve().parents[1]
BEGIN, END = "<!-- population-crosscheck:begin -->", "<!-- population-crosscheck:end -->"
RUNS = ("neox-2l-64d-1h-seed0", "neox-2l-128d-4h-seed0")
#: Every (run, interpreter) compared so far: one row each (:data:`COLUMNS`).
KEPT = ROOT / "docs" / "data" / "population-crosscheck" / "rows.csv"
COLUMNS = ["spec", "run", "python", "torch", "reference_python", "files", "differ", "first_differing"]
#: What runs in the other interpreter: train one unit, print its folder and the interpreter's facts.
CHILD = """\
import json, sys, platform, torch
from interp.sources.suites import train_unit
summary, _ = train_unit(json.loads(sys.argv[1]))
print(json.dumps({"folder": summary["folder"], "python": platform.python_version(), "torch": torch.__version__}))
"""


def interpreter_facts(python: str) -> dict:
    """``{"python": version, "torch": version}`` of an interpreter; one-line error when it cannot
    import this project's requirements."""
    probe = "import json, platform, torch, transformers; print(json.dumps({'python': platform.python_version(), 'torch': torch.__version__}))"
    done = subprocess.run([python, "-c", probe], capture_output=True, text=True, env=_env())
    if done.returncode:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise SystemExit(f"error: --python {python} cannot import torch and transformers: {last}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _env(**extra) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT), **extra)
    env.pop("EMERGENCE_LENS_UNPINNED", None)
    return env


def compare_folders(reference: Path, other: Path) -> tuple[int, list[str]]:
    """(files compared, relative paths that differ or are missing in ``other``): every
    ``*.safetensors`` under the run folder and ``loss.csv``."""
    files = sorted(p.relative_to(reference) for p in reference.rglob("*.safetensors"))
    files.append(Path("loss.csv"))
    differ = [
        str(f) for f in files if not (other / f).is_file() or (other / f).read_bytes() != (reference / f).read_bytes()
    ]
    return len(files), differ


def crosscheck(python: str, run: str, cfg, spec: str = "population") -> dict:
    """Train ``run`` of ``cfg`` (the shipped spec ``spec``) under ``python`` in a scratch cache, its
    seed alone, and compare it with this machine's cached run (trained here first if missing).
    Returns one row of the table (:data:`COLUMNS`)."""
    from interp.sources.catalogue import suite_dir
    from interp.sources.suites import train_unit

    if run not in cfg.run_names():
        raise SystemExit(f"error: --run {run!r} is not a run of {spec}; e.g. {', '.join(cfg.run_names()[:3])}, …")
    cfg = replace(cfg, seeds=(int(run.rsplit("seed", 1)[1]),))
    reference = Path(train_unit({"suite": asdict(cfg), "root": None, "run": run})[0]["folder"])
    facts = interpreter_facts(python)
    with tempfile.TemporaryDirectory(prefix="crosscheck-") as scratch:
        unit = json.dumps({"suite": asdict(cfg), "root": scratch, "run": run})
        done = subprocess.run([python, "-c", CHILD, unit], capture_output=True, text=True, env=_env())
        if done.returncode:
            raise SystemExit(
                f"error: training {run} under {python} failed: {(done.stderr.strip().splitlines() or [''])[-1]}"
            )
        other = Path(json.loads(done.stdout.strip().splitlines()[-1])["folder"])
        assert other == suite_dir(cfg, scratch) / run
        n, differ = compare_folders(reference, other)
    return {
        "spec": spec,
        "run": run,
        "python": facts["python"],
        "torch": facts["torch"],
        "reference_python": sys.version.split()[0],
        "files": n,
        "differ": len(differ),
        "first_differing": differ[0] if differ else "",
    }


def docs_block(rows: list[dict]) -> str:
    """docs/results.md's block: one line per (run, interpreter)."""
    lines = []
    for r in rows:
        verdict = (
            "every file byte-identical"
            if not r["differ"]
            else f"**{r['differ']} differ** (first: {r['first_differing']})"
        )
        lines.append(
            f"- {r['run']} under Python {r['python']} (torch {r['torch']}) against Python {r['reference_python']}: "
            f"{r['files']} files (checkpoint weights, optimizer state, loss curve), {verdict}."
        )
    return "\n".join(lines) + "\n"


def merge(kept: pd.DataFrame, rows: list[dict]) -> pd.DataFrame:
    """The kept rows with ``rows`` added; a row for the same (run, interpreter, torch) replaces the
    kept one."""
    new = pd.DataFrame(rows, columns=COLUMNS)
    key = ["run", "python", "torch"]
    old = kept.merge(new[key], on=key, how="left", indicator=True)
    kept = kept[(old["_merge"] == "left_only").to_numpy()]
    return pd.concat([kept, new], ignore_index=True)[COLUMNS]


def read_kept() -> pd.DataFrame:
    """The kept rows (:data:`KEPT`); a file without the columns is named in one line."""
    if not KEPT.is_file():
        return pd.DataFrame(columns=COLUMNS)
    kept = pd.read_csv(KEPT, keep_default_na=False, dtype={"python": str, "reference_python": str})
    if missing := [c for c in COLUMNS if c not in kept.columns]:
        raise SystemExit(f"error: {KEPT} lacks the columns {missing}: remove it and run the cross-check again")
    return kept


def main(argv=None) -> None:
    from interp.core.io import atomic_to_csv
    from interp.sources.catalogue import load_suite_spec

    parser = argparse.ArgumentParser(prog="python -m analyses.population_crosscheck", description=description(__doc__))
    parser.add_argument("--python", action="append", required=True, help="another interpreter (repeatable)")
    parser.add_argument("--spec", choices=sorted(SPECS), default="population", help="which shipped population")
    parser.add_argument(
        "--run", action="append", default=None, help=f"a run of the spec (default: {', '.join(RUNS)} for population)"
    )
    parser.add_argument("--update-docs", action="store_true", help="rewrite docs/results.md's cross-check block")
    args = parser.parse_args(argv)
    cfg = load_suite_spec(args.spec)
    runs = args.run or (RUNS if args.spec == "population" else [cfg.run_names()[0]])
    rows = [crosscheck(python, run, cfg, args.spec) for python in args.python for run in runs]
    kept = merge(read_kept(), rows)
    atomic_to_csv(kept, KEPT)
    block = docs_block(kept.to_dict("records"))
    print(block)
    if args.update_docs:
        update_docs(block, (BEGIN, END))
    if any(r["differ"] for r in rows):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
