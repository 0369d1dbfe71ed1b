"""Shared helpers for the synthetic reproductions in ``analyses/`` (each entry reads them here, never
from another entry).

Each reproduction builds a list of run configs (:class:`synthetic.training.TrainConfig` field
dicts, or any runner's fields), runs them with :func:`run_configs` (joblib processes, one torch
thread each, so two workers fit a 2-core machine; or the sweep engine with ``--sweep-dir``),
reduces the learning curves to a table, and writes ``<name>.csv`` and ``<name>.html`` with
:func:`write_outputs`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from interp.cli.options import description
from interp.core.io import atomic_to_csv, write_figure_html
from synthetic.sweeps import DEFAULT_RUNNER

RESULTS_ROOT = Path("results/analyses")


@dataclass(frozen=True)
class Execution:
    """How a reproduction's runs execute.

    Attributes:
        jobs: worker processes (one torch thread each); 1 = in this process.
        sweep_dir: a sweep results store to run through (resumable; see docs/sweeps.md), or None
            for direct runs.
        executor: with ``sweep_dir``: ``"joblib"`` or ``"ray"``.
        name: the sweep's label (the reproduction's name).
        ensemble: with ``sweep_dir``: at most this many runs of one shape (differing only in
            seed, data_seed, s or n_rules) train together in one worker
            (:func:`synthetic.ensemble.train_ensemble`); 1 = every run alone.
        device: the ``device`` field given to every run (``"cpu"``, ``"cuda"``, ``"cuda:N"``,
            ``"auto"``); None leaves the runs' own (``"auto"``: cuda when available). It is part
            of each run's id, so CPU and GPU runs of one store never mix.
        finished_only: with ``sweep_dir``: train nothing; report the runs the store already
            holds (a long entry's table while it is still running, or after it stopped).
    """

    jobs: int = 2
    sweep_dir: Path | None = None
    executor: str = "joblib"
    name: str = ""
    ensemble: int = 1
    device: str | None = None
    finished_only: bool = False


def parse_args(name: str, description: str, argv: Sequence[str] | None = None) -> tuple[argparse.Namespace, Execution]:
    """The common command line: ``--paper-scale``, ``--out DIR``, ``--jobs N``, ``--sweep-dir DIR``, ``--ensemble N``, ``--device D``,
    ``--executor {joblib,ray}``, ``--set KEY=VALUE`` (repeatable; see :func:`apply_overrides`);
    returns the arguments and the :class:`Execution` they ask for.

    ``--out`` defaults to ``results/analyses/<name>/``; ``--jobs`` defaults to 2.
    """
    parser = argparse.ArgumentParser(prog=f"python -m analyses.{name}", description=description)
    parser.add_argument(
        "--paper-scale", action="store_true", help="the paper's settings (S, ~1e4 steps, more seeds): meant for a GPU"
    )
    parser.add_argument("--out", type=Path, default=RESULTS_ROOT / name, help="output folder")
    parser.add_argument("--jobs", type=int, default=2, help="parallel worker processes")
    parser.add_argument(
        "--sweep-dir",
        type=Path,
        default=None,
        help="run through the sweep engine into this results store (resumable; see docs/sweeps.md)",
    )
    parser.add_argument(
        "--executor",
        choices=["joblib", "ray"],
        default="joblib",
        help="with --sweep-dir: joblib processes here, or Ray",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override one setting (JSON value, e.g. steps=3000 or s=[5]); repeatable",
    )
    parser.add_argument(
        "--ensemble",
        type=int,
        default=None,
        metavar="N",
        help="with --sweep-dir: train up to N runs of one shape together (seeds, data "
        "seeds, s) in one worker; default 8 with --paper-scale, else 1 (each run alone)",
    )
    parser.add_argument(
        "--device", default=None, help="device of every run: auto, cpu, cuda or cuda:N (default: each run's own, auto)"
    )
    parser.add_argument(
        "--finished-only",
        action="store_true",
        help="with --sweep-dir: train nothing, report the runs the store already holds",
    )
    args = parser.parse_args(argv)
    if args.finished_only and args.sweep_dir is None:
        parser.error("--finished-only reads a results store: give it with --sweep-dir DIR")
    if args.device is not None and args.device not in ("auto", "cpu", "cuda") and not args.device.startswith("cuda:"):
        parser.error(f"--device={args.device!r} is invalid: choose auto, cpu, cuda or cuda:N")
    if args.jobs < 1:
        parser.error(f"--jobs={args.jobs} is invalid: must be ≥ 1")
    if args.ensemble is None:
        args.ensemble = 8 if args.paper_scale else 1
    if args.ensemble < 1:
        parser.error(f"--ensemble={args.ensemble} is invalid: must be ≥ 1")
    if args.out.exists() and not args.out.is_dir():
        parser.error(f"--out {str(args.out)!r} is an existing file, not a folder")
    return args, Execution(
        jobs=args.jobs,
        sweep_dir=args.sweep_dir,
        executor=args.executor,
        name=name,
        ensemble=args.ensemble,
        device=args.device,
        finished_only=args.finished_only,
    )


def _run_one(runner: str, config: dict[str, Any]) -> tuple[dict, pd.DataFrame]:
    """Worker: one run on one torch thread (the sweep path does the same, so both paths
    compute identical numbers)."""
    import torch

    from sweeps import load_runner

    torch.set_num_threads(1)  # two workers share a 2-core machine
    return load_runner(runner)(dict(config))


def run_configs(
    configs: Sequence[dict[str, Any]], execution: Execution | None = None, runner: str = DEFAULT_RUNNER
) -> list[tuple[dict, pd.DataFrame]]:
    """Run every config with ``runner`` (default: train a synthetic-task model).

    Direct runs use joblib processes (``execution.jobs``; 1 = in this process). With
    ``execution.sweep_dir`` the configs go through the sweep engine as explicit points: each
    finished run lands in that results store, runs already there are reused (a killed
    reproduction resumes where it stopped), and the summary and per-step metrics are read back
    from the store, so the tables are computed from exactly what the store holds.

    Returns:
        ``(summary, metrics)`` per config, in input order (for the default runner see
        :func:`synthetic.training.train` for the keys and columns); with
        ``execution.finished_only`` None for each run the store does not hold (pass the list
        through :func:`finished`).

    Raises:
        ValueError: a bad config field (before any run starts).
        RuntimeError: a run failed in the sweep path (its error and log path are named).
    """
    execution = execution or Execution()
    if execution.device is not None:
        configs = [{**c, "device": execution.device} for c in configs]
    if execution.sweep_dir is not None:
        return _through_sweep(configs, execution, runner)
    from sweeps import load_runner, resolve_with

    resolved = [resolve_with(load_runner(runner), dict(c)) for c in configs]  # bad fields fail here
    if execution.jobs == 1:
        return [_run_one(runner, c) for c in resolved]
    from joblib import Parallel, delayed

    return Parallel(n_jobs=execution.jobs, backend="loky")(delayed(_run_one)(runner, c) for c in resolved)


class FinishedOnlyError(RuntimeError):
    """``--finished-only`` found no finished run of the entry in its store (``python -m
    analyses.<name> --finished-only`` reads the runs stored so far and trains none).

    Fix: let the sweep finish some runs first (the same command without ``--finished-only``
    trains them, resumably), or point ``--sweep-dir`` at the store that holds them.
    """


def finished(configs: Sequence[Any], results: Sequence) -> tuple[list[Any], list]:
    """The configs (or whatever labels the runs, one per result) and results of the runs that
    finished: every pair unless ``--finished-only`` left out the runs its store does not hold
    yet or holds as failed (their result is None; the count of each was printed).

    Raises:
        FinishedOnlyError: not one run has finished.
    """
    pairs = [(c, r) for c, r in zip(configs, results, strict=True) if r is not None]
    if not pairs:
        raise FinishedOnlyError(f"none of the {len(configs)} runs has finished in the store yet")
    return [c for c, _ in pairs], [r for _, r in pairs]


def _summary_of(row: pd.Series) -> dict[str, Any]:
    """The runner's summary from a results row (``summary_<key>`` columns restored to ``<key>``)."""
    summary = {}
    for key, value in row.items():
        if key.startswith("summary_"):
            key = key[len("summary_") :]
        elif f"summary_{key}" in row.index:
            continue  # the summary's own value wins over the config field of the same name
        if isinstance(value, str) and value[:1] in "[{":
            with contextlib.suppress(ValueError):
                value = json.loads(value)
        summary[key] = None if (not isinstance(value, (list, dict)) and pd.isna(value)) else value
    return summary


def _through_sweep(
    configs: Sequence[dict[str, Any]], execution: Execution, runner: str
) -> list[tuple[dict, pd.DataFrame]]:
    from sweeps import SweepSpec, load_metrics, load_results, load_runner, resolve_with, run_id_of, run_sweep

    spec = SweepSpec(points=[dict(c) for c in configs], name=execution.name, runner=runner)
    if execution.finished_only:
        if not (Path(execution.sweep_dir) / "results.parquet").is_file():
            raise FinishedOnlyError(f"{execution.sweep_dir} holds no finished run yet (no results.parquet)")
    else:
        run_sweep(
            spec, execution.sweep_dir, jobs=execution.jobs, executor=execution.executor, ensemble=execution.ensemble
        )
    rows = load_results(execution.sweep_dir).set_index("run_id")
    fn = load_runner(runner)
    out: list = []
    missing = failed = 0
    for config in configs:  # one entry per config, duplicates included, in input order
        run_id = run_id_of(resolve_with(fn, dict(config)), runner)
        if execution.finished_only and (run_id not in rows.index or rows.loc[run_id, "status"] != "ok"):
            out.append(None)  # not finished (or failed): left out by finished()
            missing += run_id not in rows.index
            failed += run_id in rows.index
            continue
        row = rows.loc[run_id]
        if row["status"] != "ok":
            raise RuntimeError(f"run {run_id} failed: {row['error']} (log: {execution.sweep_dir}/logs/{run_id}.log)")
        metrics = load_metrics(execution.sweep_dir, [run_id]).drop(columns="run_id").reset_index(drop=True)
        out.append((_summary_of(row), metrics))
    if execution.finished_only:
        print(
            f"--finished-only: the tables rest on {len(configs) - missing - failed} of {len(configs)} runs "
            f"({missing} not finished yet, {failed} failed) in {execution.sweep_dir}"
        )
    return out


def write_outputs(table: pd.DataFrame, fig: Any, out_dir: str | os.PathLike, name: str) -> tuple[Path, Path]:
    """Write ``<out_dir>/<name>.csv`` and ``<out_dir>/<name>.html`` (self-contained) atomically,
    and ``provenance.json`` (the command line, package versions, source digests)."""
    from interp.core.provenance import make_provenance, write_provenance

    out = Path(out_dir)
    csv = atomic_to_csv(table, out / f"{name}.csv")
    html = write_figure_html(fig, out / f"{name}.html")
    write_provenance(out, make_provenance(f"analyses.{name}", {"rows": len(table)}))
    return Path(csv), Path(html)


def within(ours: float, reference: float, rel: float) -> bool:
    """``|ours − reference| ≤ rel·|reference|`` (e.g. rel = 0.02 for "within 2 %")."""
    return abs(ours - reference) <= rel * abs(reference)


def linear_map_floor(S: int) -> float:
    """The linear map's loss floor at state size ``S`` (one transition), from the task itself
    (``make_task("linear-map", S).floor``; the paper's (S−1)/(2S−1)·ln 2, nats/token)."""
    from synthetic.datasets import make_task

    return float(make_task("linear-map", S=S, s=1).floor)


def plateau_loss(task: str, **fields: Any) -> float:
    """The task's loss plateau (``ln d_vocab`` nats: ln 2 for the linear map, ln k for cellular
    automata), from the task itself."""
    from synthetic.datasets import make_task

    return float(make_task(task, **fields).plateau_loss)


#: The linear map's plateau, ln 2 nats/token (binary tokens), as the task defines it.
LN2 = plateau_loss("linear-map", S=4, s=1)
#: The loss level of the paper's s = 3 comparison of the linear map (S = 16; read from its figure).
PAPER_THRESHOLD = 0.40
#: The linear map's floor at S = 16, 0.3354 nats/token: (S−1)/(2S−1)·ln 2.
FLOOR_S16 = linear_map_floor(16)
#: Evaluations averaged into a run's ``late_loss`` (the cellular-automata and depth entries).
LATE_EVALS = 4


def scaled_threshold(S: int) -> float:
    """The paper's 0.40 (S = 16) moved to state size ``S`` at the same fraction of the
    plateau-to-floor gap (nats/token); ``scaled_threshold(16) == 0.40``."""
    frac = (PAPER_THRESHOLD - FLOOR_S16) / (LN2 - FLOOR_S16)
    floor = linear_map_floor(S)
    return floor + frac * (LN2 - floor)


def apply_overrides(cfg: dict[str, Any], pairs: Sequence[str]) -> dict[str, Any]:
    """``cfg`` with each ``KEY=VALUE`` of ``pairs`` applied (the ``--set`` option).

    ``VALUE`` is read as JSON (``3000``, ``1e-3``, ``[3, 5]``), else kept as a string; a scalar
    given for a list setting becomes a one-element list (``s=5`` → ``[5]``).

    Raises:
        ValueError: a pair without ``=``, or a key that is not one of ``cfg``'s settings.
    """
    out = dict(cfg)
    for pair in pairs:
        key, sep, text = pair.partition("=")
        if not sep:
            raise ValueError(f"--set {pair!r} is invalid: expected KEY=VALUE")
        if key not in cfg:
            raise ValueError(f"--set {key!r} is not a setting: choose one of {', '.join(sorted(cfg))}")
        try:
            value = json.loads(text)
        except ValueError:
            value = text
        out[key] = [value] if isinstance(cfg[key], list) and not isinstance(value, list) else value
    return out


def reproduce(
    name: str,
    doc: str,
    argv: Sequence[str] | None,
    settings: Callable[[bool], dict],
    run: Callable[..., tuple],
    table: Callable[[tuple], pd.DataFrame] = lambda out: out[0],
    shown: Callable[[tuple], pd.DataFrame] = lambda out: out[1],
) -> tuple[dict, tuple]:
    """A reproduction's command line end to end: parse ``argv`` (:func:`parse_args`), run
    ``run(settings(paper_scale) with the --set overrides, execution)``, write ``table(outputs)`` and the figure (the last
    output) with :func:`write_outputs`, print ``shown(outputs)`` and the runtime.

    Returns:
        ``(settings, outputs)`` for the caller's headline lines.
    """
    args, execution = parse_args(name, description(doc), argv)
    try:
        cfg = apply_overrides(settings(args.paper_scale), args.set)
    except ValueError as err:
        print(f"python -m analyses.{name}: error: {err}", file=sys.stderr)
        raise SystemExit(2) from None
    timer = Timer()
    try:
        outputs = run(cfg, execution)
    except FinishedOnlyError as err:
        print(f"python -m analyses.{name}: --finished-only: {err}", file=sys.stderr)
        raise SystemExit(2) from None
    write_outputs(table(outputs), outputs[-1], args.out, name)
    print(shown(outputs).to_string(index=False))
    print(f"runtime: {timer.seconds:.0f} s; outputs in {args.out}")
    return cfg, outputs


class Timer:
    """Wall-clock seconds since construction (for the runtime line every script prints)."""

    def __init__(self) -> None:
        self.start = time.perf_counter()

    @property
    def seconds(self) -> float:
        return time.perf_counter() - self.start
