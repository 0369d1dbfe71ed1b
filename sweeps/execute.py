"""Executing one run inside a worker: one torch thread, output captured, failures recorded
(never raised), provenance (package versions, host, git commit) attached."""

from __future__ import annotations

import contextlib
import contextvars
import datetime as _dt
import functools
import hashlib
import io
import logging
import os
import platform
import subprocess
import sys
import time
import traceback
import typing
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from interp.core.io import config_json
from sweeps.runners import RunTask, load_runner, runner_name

VERSIONED_PACKAGES = ("emergence-lens", "torch", "transformer-lens", "transformers", "numpy", "pandas")

_STATE_DIR: contextvars.ContextVar[Path | None] = contextvars.ContextVar("run_state_dir", default=None)


def run_state_dir() -> Path | None:
    """The folder where the runner of the run (or group of runs) now executing may keep a
    resumable state, or None (outside a sweep, or on an executor without a shared disk).

    A runner that keeps its state there continues from it when the sweep runs again after a
    kill (the default runner does, every 1000 steps of a longer run:
    :func:`synthetic.training.train`'s ``state_dir``). The folder is ``STORE/partial/<run_id>``
    for a run and ``STORE/partial/group-<hash of its run ids>`` for runs trained together; the
    driver removes it once the run's row (a group's: every member's row) is in the store, so a
    kill after the run ends but before its row is written loses nothing either.
    """
    return _STATE_DIR.get()


@dataclass
class RunRecord:
    """What a worker sends back: status, summary, per-step metrics, log text and timings."""

    run_id: str
    status: str  # "ok" or "failed"
    error: str | None
    summary: dict[str, Any]
    metrics: pd.DataFrame | None
    log: str | None
    wall_time_s: float
    started_at: str
    finished_at: str
    host: str
    versions: dict[str, str]
    killed: bool = False  # the run's worker process died under it (a signal; out of memory?)


def execute_run(task: RunTask) -> RunRecord:
    """Run one task with one torch thread, capturing its output; never raises on a run error.

    The log goes to ``task.log_path`` as it is written when the path is given (local
    executors), else it is returned in the record (Ray, where the worker may be another host).
    """
    started = _now()
    t0 = time.perf_counter()
    status, error, summary, metrics = "ok", None, {}, None
    buffer = io.StringIO()
    with contextlib.ExitStack() as stack:
        if task.log_path is not None:
            stream = stack.enter_context(_open_log(task.log_path))
        else:
            stream = buffer
        stream.write(f"run {task.run_id} runner {runner_name(task.runner)} started {started}\n")
        stream.write(f"config {config_json(task.config)}\n")
        stack.enter_context(_one_torch_thread())
        stack.enter_context(_capture(stream))
        stack.enter_context(_state_dir(task.state_dir))
        try:
            fn = load_runner(task.runner)
            out = fn(dict(task.config))
            if not (isinstance(out, tuple) and len(out) == 2 and isinstance(out[0], Mapping)):
                raise TypeError(f"runner returned {type(out).__name__}; expected (summary dict, metrics DataFrame)")
            summary = summary_row(out[0])
            metrics = out[1] if isinstance(out[1], pd.DataFrame) else None
        except Exception as err:  # a failing run is data, not a crash of the sweep
            status, error = "failed", f"{type(err).__name__}: {err}".splitlines()[0][:2000]
            traceback.print_exc(file=stream)
        wall = time.perf_counter() - t0
        stream.write(f"{status} after {wall:.3f} s\n")
    return RunRecord(
        run_id=task.run_id,
        status=status,
        error=error,
        summary=summary,
        metrics=metrics,
        log=buffer.getvalue() if task.log_path is None else None,
        wall_time_s=wall,
        started_at=started,
        finished_at=_now(),
        host=platform.node(),
        versions=package_versions(),
    )


def execute_unit(tasks: Sequence[RunTask]) -> list[RunRecord]:
    """Run one unit of work: a single run (:func:`execute_run`), or runs of one runner that it
    trains together (its ``run_group(configs) -> [(summary, metrics), ...]``, e.g. an ensemble of
    seeds in one process; see :func:`group_units`). Never raises on a run error: when the group
    fails, every run of it is retried alone, so each gets its own record and log.

    A grouped run's record is like a single run's: its summary and metrics come from the group,
    ``wall_time_s`` is the group's wall time divided by its size, and its log holds the group's
    output after a line naming the group's runs; with log paths (local executors) that output
    reaches every member's log as it is written, so a long group can be followed with ``tail -f``.
    """
    if len(tasks) == 1:
        return [execute_run(tasks[0])]
    fn = load_runner(tasks[0].runner)
    group = getattr(fn, "run_group", None)
    if group is None:
        return [execute_run(t) for t in tasks]
    started = _now()
    t0 = time.perf_counter()
    buffer = io.StringIO()
    try:
        with contextlib.ExitStack() as stack:
            live = [
                stack.enter_context(_open_log(t.log_path)) for t in tasks if t.log_path is not None
            ]  # each member's log, written as the group runs
            stream = _Tee(buffer, *live)
            stream.write(
                f"runs {', '.join(t.run_id for t in tasks)} trained together by "
                f"{runner_name(tasks[0].runner)}.run_group, started {started}\n"
            )
            stack.enter_context(_one_torch_thread())
            stack.enter_context(_capture(stream))
            stack.enter_context(_state_dir(group_state_dir(tasks)))
            outs = group([dict(t.config) for t in tasks])
        if len(outs) != len(tasks):
            raise TypeError(f"run_group returned {len(outs)} results for {len(tasks)} runs")
        summaries = [summary_row(summary) for summary, _ in outs]
    except Exception:  # the group as a whole failed: each run alone records its own outcome
        return [execute_run(t) for t in tasks]
    wall = (time.perf_counter() - t0) / len(tasks)
    finished = _now()
    records = []
    for task, summary, (_, metrics) in zip(tasks, summaries, outs):
        tail = f"run {task.run_id}\nok after {wall:.3f} s (its share of the group)\n"
        log = buffer.getvalue() + tail
        if task.log_path is not None:  # the group's output is in the log already
            with _open_log(task.log_path) as stream:
                stream.write(tail)
        records.append(
            RunRecord(
                run_id=task.run_id,
                status="ok",
                error=None,
                summary=summary,
                metrics=metrics if isinstance(metrics, pd.DataFrame) else None,
                log=None if task.log_path is not None else log,
                wall_time_s=wall,
                started_at=started,
                finished_at=finished,
                host=platform.node(),
                versions=package_versions(),
            )
        )
    return records


def group_units(tasks: Sequence[RunTask], max_size: int) -> list[list[RunTask]]:
    """Split ``tasks`` into units of work: runs whose runner gives the same
    ``group_key(config)`` (not None) go together, at most ``max_size`` per unit, in task order;
    every other run is a unit of its own. ``max_size`` 1 → one unit per run."""
    if max_size <= 1:
        return [[t] for t in tasks]
    units: list[list[RunTask]] = []
    open_units: dict[Any, list[RunTask]] = {}
    for task in tasks:
        key_fn = getattr(load_runner(task.runner), "group_key", None)
        key = key_fn(dict(task.config)) if key_fn is not None else None
        if key is None:
            units.append([task])
            continue
        key = (runner_name(task.runner), key)
        unit = open_units.get(key)
        if unit is None or len(unit) >= max_size:
            unit = open_units[key] = []
            units.append(unit)
        unit.append(task)
    return units


@contextlib.contextmanager
def _one_torch_thread() -> Iterator[None]:
    """One intra-op thread per run: N workers on N cores must not oversubscribe, and a fixed
    thread count keeps float reductions (hence losses) identical across executors."""
    if "torch" not in sys.modules:  # a fresh worker: make OpenMP start with one thread too
        os.environ.setdefault("OMP_NUM_THREADS", "1")
    try:
        import torch
    except ImportError:  # a runner that does not use torch
        yield
        return
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


@contextlib.contextmanager
def _capture(stream: typing.TextIO) -> Iterator[None]:
    """Send stdout, stderr and root-logger records to ``stream`` for the duration of the run."""
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        with contextlib.redirect_stdout(stream), contextlib.redirect_stderr(stream):
            yield
    finally:
        root.removeHandler(handler)


def group_state_dir(tasks: Sequence[RunTask]) -> str | None:
    """The state folder of runs trained together: ``group-<hash of their run ids>`` beside the
    first run's own (so the same group, planned again after a kill, finds it); None without one."""
    if tasks[0].state_dir is None:
        return None
    digest = hashlib.sha256(",".join(t.run_id for t in tasks).encode()).hexdigest()[:16]
    return str(Path(tasks[0].state_dir).parent / f"group-{digest}")


@contextlib.contextmanager
def _state_dir(path: str | None) -> Iterator[None]:
    token = _STATE_DIR.set(Path(path) if path is not None else None)
    try:
        yield
    finally:
        _STATE_DIR.reset(token)


def _open_log(path: str | Path) -> typing.TextIO:
    """A run's log file for appending, line-buffered (its folder made). Appending keeps the
    earlier attempts of a run that was stopped and resumed (each begins with its ``started``
    line), so the log of a resumed run still shows the steps before the stop."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    return open(path, "a", encoding="utf-8", buffering=1)


class _Tee(io.TextIOBase):
    """Text written once, to several streams (a group's output into each member's log)."""

    def __init__(self, *streams: typing.TextIO) -> None:
        self.streams = streams

    def write(self, text: str) -> int:
        for stream in self.streams:
            stream.write(text)
        return len(text)

    def flush(self) -> None:
        for stream in self.streams:
            stream.flush()


def _to_builtin(value: Any, key: str = "") -> Any:
    """numpy/torch scalars, and tensors or arrays of one element, → Python numbers so rows are
    plain parquet columns (a tensor's text, ``"tensor([1.])"``, is never stored).

    Raises:
        ValueError: a tensor or array of more than one element (one line naming ``key``): a
            results row holds one number per key; per-step values belong in the metrics table.
    """
    if hasattr(value, "item") and hasattr(value, "ndim") and hasattr(value, "shape"):  # a tensor or an array
        size = int(value.numel()) if hasattr(value, "numel") else int(getattr(value, "size", 0))
        if size == 1:
            return value.item()
        kind = "tensor" if hasattr(value, "numel") else "array"
        raise ValueError(f"summary key {key!r} is a {kind} of {size} elements; a results row takes one number per key")
    if hasattr(value, "item") and getattr(value, "ndim", 0) == 0:  # a numpy scalar
        return value.item()
    if isinstance(value, (tuple, set)):
        return list(value)
    return value


def summary_row(summary: Mapping[Any, Any]) -> dict[str, Any]:
    """A runner's summary as a results row's values (:func:`_to_builtin` per key).

    Raises:
        ValueError: as :func:`_to_builtin`.
    """
    return {str(k): _to_builtin(v, str(k)) for k, v in summary.items()}


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="milliseconds")


@functools.lru_cache(maxsize=1)
def package_versions() -> dict[str, str]:
    """Python and key package versions of this process (``"absent"`` for a missing package)."""
    from importlib import metadata

    versions = {"python": platform.python_version()}
    for pkg in VERSIONED_PACKAGES:
        try:
            versions[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            versions[pkg] = "absent"
    return versions


def git_commit(path: str | os.PathLike | None = None) -> str | None:
    """``HEAD`` of the git checkout holding ``path`` (default: this package), ``+dirty`` if it has
    uncommitted changes, or None outside a checkout or without git."""
    where = Path(path) if path is not None else Path(__file__).resolve().parent
    try:
        head = subprocess.run(
            ["git", "-C", str(where), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(where), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return head + ("+dirty" if dirty else "")
