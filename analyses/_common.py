"""Shared helpers for the CPU-scale reproductions in ``analyses/``.

Each reproduction script builds a list of :class:`synthetic.training.TrainConfig` field dicts,
runs them with :func:`run_configs` (joblib processes, one torch thread each, so two workers fit
a 2-core machine), reduces the learning curves to a table, and writes ``<name>.csv`` and
``<name>.html`` (a self-contained plotly figure) with :func:`write_outputs`.
"""

from __future__ import annotations

import argparse
import math
import os
import time
from pathlib import Path
from typing import Any, Sequence

import pandas as pd
import plotly.graph_objects as go
from joblib import Parallel, delayed

from interp.io import atomic_to_csv, atomic_write_text

LN2 = math.log(2)
LN4 = math.log(4)
RESULTS_ROOT = Path("results/analyses")


def parse_args(name: str, description: str, argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The common command line: ``--paper-scale``, ``--out DIR``, ``--jobs N``.

    ``--out`` defaults to ``results/analyses/<name>/``; ``--jobs`` (worker processes, each
    with one torch thread) defaults to 2.
    """
    parser = argparse.ArgumentParser(prog=f"analyses/{name}.py", description=description)
    parser.add_argument("--paper-scale", action="store_true",
                        help="the paper's settings (S, ~1e4 steps, more seeds): meant for a GPU")
    parser.add_argument("--out", type=Path, default=RESULTS_ROOT / name, help="output folder")
    parser.add_argument("--jobs", type=int, default=2, help="parallel worker processes")
    parser.add_argument("--sweep-dir", type=Path, default=None,
                        help="run through the sweep engine into this results store (resumable; see docs/sweeps.md)")
    parser.add_argument("--executor", choices=["joblib", "ray"], default="joblib",
                        help="with --sweep-dir: joblib processes here, or Ray")
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs={args.jobs} is invalid: must be ≥ 1")
    # The scripts call run_configs(configs, jobs); routing is decided once, here, for the process.
    _SWEEP.update(dir=args.sweep_dir, executor=args.executor, name=name)
    return args


#: Where run_configs sends its runs: set by parse_args from --sweep-dir / --executor.
_SWEEP: dict[str, Any] = {"dir": None, "executor": "joblib", "name": ""}


def _train_one(fields: dict[str, Any]) -> tuple[dict, pd.DataFrame]:
    """Worker: train one config on one torch thread; return (summary, metrics)."""
    import torch

    torch.set_num_threads(1)  # two workers share a 2-core machine
    from synthetic.training import TrainConfig, train

    result = train(TrainConfig(**fields), out_dir=None, progress=False)
    return result.summary, result.metrics


def run_configs(configs: Sequence[dict[str, Any]], jobs: int = 2) -> list[tuple[dict, pd.DataFrame]]:
    """Train every config (a dict of :class:`~synthetic.training.TrainConfig` fields).

    With ``--sweep-dir`` on the command line the runs go through the sweep engine
    (:mod:`analyses._sweep`: resumable, joblib or Ray) instead.

    Returns ``(summary, metrics)`` per config, in input order (see
    :func:`synthetic.training.train` for the keys and columns). ``jobs == 1`` runs in-process.

    Raises:
        ValueError: a bad config field (from :meth:`TrainConfig.validate`).
    """
    if _SWEEP["dir"] is not None:
        from _sweep import run_configs_through_sweep

        return run_configs_through_sweep(configs, _SWEEP["dir"], jobs=jobs, executor=_SWEEP["executor"],
                                         name=_SWEEP["name"])
    if jobs == 1:
        return [_train_one(dict(c)) for c in configs]
    return Parallel(n_jobs=jobs, backend="loky")(delayed(_train_one)(dict(c)) for c in configs)


def write_outputs(table: pd.DataFrame, fig: go.Figure, out_dir: str | os.PathLike, name: str) -> tuple[Path, Path]:
    """Write ``<out_dir>/<name>.csv`` and ``<out_dir>/<name>.html`` atomically, and
    ``provenance.json`` (the command line, package versions, source digests).

    The HTML embeds plotly.js (``include_plotlyjs=True``) so it opens offline.
    """
    from interp.provenance import make_provenance, write_provenance

    out = Path(out_dir)
    csv = atomic_to_csv(table, out / f"{name}.csv")
    html = atomic_write_text(out / f"{name}.html", fig.to_html(include_plotlyjs=True, full_html=True))
    write_provenance(out, make_provenance(f"analyses/{name}.py", {"rows": len(table)}))
    return Path(csv), Path(html)


def within(ours: float, reference: float, rel: float) -> bool:
    """``|ours − reference| ≤ rel·|reference|`` (e.g. rel = 0.02 for "within 2 %")."""
    return abs(ours - reference) <= rel * abs(reference)


class Timer:
    """Wall-clock seconds since construction (for the runtime line every script prints)."""

    def __init__(self) -> None:
        self.start = time.perf_counter()

    @property
    def seconds(self) -> float:
        return time.perf_counter() - self.start
