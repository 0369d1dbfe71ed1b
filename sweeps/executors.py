"""Executors: each takes the units of runs to do (a unit: one run, or runs trained together) and yields a :class:`~sweeps.execute.RunRecord` per run
as runs finish, in any order. ``joblib`` runs processes on this machine (``jobs == 1``: in this
process); ``ray`` runs on a local Ray or an existing cluster."""

from __future__ import annotations

import importlib.util
import logging
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from sweeps.execute import RunRecord, _now, execute_unit
from sweeps.runners import RunTask

logger = logging.getLogger(__name__)


class ExecutorError(ValueError):
    """An executor cannot run here: an unknown name, its package not installed, or (Ray) a temp
    folder too long for Ray's socket paths (``RAY_TMPDIR`` set too long, or ``TMPDIR`` too long
    and no short folder of its own can be made under ``/tmp``).

    Fix: use one of the executors listed, install the package named (``pip install
    'emergence-lens[ray]'``), or set ``RAY_TMPDIR`` to a short writable folder (``/tmp``).
    """


#: Executor name -> the package it needs (checked before any work, see :func:`check_executor`).
EXECUTOR_PACKAGES = {"joblib": "joblib", "ray": "ray"}
EXECUTORS = tuple(EXECUTOR_PACKAGES)


def check_executor(executor: str) -> None:
    """Raise a one-line ExecutorError if ``executor`` is unknown or its package is not installed.

    Raises:
        ExecutorError: unknown executor (valid ones listed), or its package is missing (the
            ``pip install`` line given).
    """
    if executor not in EXECUTOR_PACKAGES:
        raise ExecutorError(f"executor={executor!r}; valid executors: {', '.join(EXECUTORS)}")
    package = EXECUTOR_PACKAGES[executor]
    if importlib.util.find_spec(package) is None:
        raise ExecutorError(
            f"executor {executor!r} needs the package {package!r}, which is not installed: "
            f"pip install 'emergence-lens[{executor}]'"
        )


def _execute_serial(units: Sequence[list[RunTask]], jobs: int, address: str | None) -> Iterator[RunRecord]:
    for unit in units:
        yield from execute_unit(unit)


def _execute_joblib(units: Sequence[list[RunTask]], jobs: int, address: str | None) -> Iterator[RunRecord]:
    if jobs == 1:  # in-process: no worker start-up, same single-thread arithmetic
        yield from _execute_serial(units, jobs, address)
        return
    from joblib import Parallel, delayed

    parallel = Parallel(n_jobs=jobs, backend="loky", return_as="generator_unordered")
    for records in parallel(delayed(execute_unit)(unit) for unit in units):
        yield from records


def _execute_ray(units: Sequence[list[RunTask]], jobs: int, address: str | None) -> Iterator[RunRecord]:
    try:
        import ray
    except ImportError as err:
        raise ExecutorError("executor 'ray' needs Ray: pip install 'emergence-lens[ray]'") from err
    started_here = False
    if not ray.is_initialized():
        if address:
            ray.init(address=address, log_to_driver=False)
        else:
            _start_local_ray(ray, jobs)
        started_here = True
    remote = ray.remote(num_cpus=1, max_retries=0)(execute_unit)
    pending = {remote.remote(unit): unit for unit in units}
    try:
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                unit = pending.pop(ref)
                try:
                    yield from ray.get(ref)
                except Exception as err:  # worker died (OOM kill, segfault): record and go on
                    for task in unit:
                        yield _crashed_record(task, err)
    finally:
        for ref in pending:
            ray.cancel(ref, force=True)
        if started_here:
            ray.shutdown()


#: Bytes a local Ray adds to its temp folder for its longest socket path,
#: ``/session_<YYYY-MM-DD_HH-MM-SS_micros>_<pid>/sockets/plasma_store.N`` (pid up to 7 digits).
RAY_SOCKET_SUFFIX_BYTES = 66
#: Longest AF_UNIX socket path (bytes): 108 on Linux, 104 on macOS, less the closing NUL.
SOCKET_PATH_MAX = (104 if sys.platform.startswith("darwin") else 108) - 1


def ray_temp_dir() -> str | None:
    """The temp folder to start a local Ray in: None (Ray's own) when its socket paths fit.

    Ray puts its sockets under ``$RAY_TMPDIR/ray``, else (Linux) ``$TMPDIR/ray``, else
    ``/tmp/ray``, and stops with "AF_UNIX path length cannot exceed 107 bytes" when that folder
    is longer than about 40 bytes (a cluster's per-job ``TMPDIR``). Then a short folder of its
    own is used, ``/tmp/emergence-ray-<uid>`` (Ray's documented ``ray.init(_temp_dir=...)``).

    Raises:
        ExecutorError: ``RAY_TMPDIR`` is set and too long, or the short folder cannot be made; the
            one line says what to set.
    """
    ray_tmpdir = os.environ.get("RAY_TMPDIR")
    system = ray_tmpdir or (os.environ.get("TMPDIR") if sys.platform.startswith("linux") else None) or "/tmp"
    default = os.path.join(system, "ray")
    if len(default.encode()) + RAY_SOCKET_SUFFIX_BYTES <= SOCKET_PATH_MAX:
        return None
    limit = SOCKET_PATH_MAX - RAY_SOCKET_SUFFIX_BYTES
    if ray_tmpdir:
        raise ExecutorError(
            f"executor 'ray': RAY_TMPDIR={ray_tmpdir!r} is too long for Ray's socket paths ({len(default.encode())} "
            f"bytes with /ray, at most {limit} fit the {SOCKET_PATH_MAX}-byte AF_UNIX limit); set RAY_TMPDIR to a "
            "short folder such as /tmp"
        )
    short = f"/tmp/emergence-ray-{os.getuid()}"
    try:
        os.makedirs(short, mode=0o700, exist_ok=True)
        if not os.access(short, os.W_OK):
            raise PermissionError(short)
    except OSError as err:
        raise ExecutorError(
            f"executor 'ray': TMPDIR={system!r} is too long for Ray's socket paths (at most {limit} bytes fit the "
            f"{SOCKET_PATH_MAX}-byte AF_UNIX limit) and {short} cannot be made ({type(err).__name__}); set "
            "RAY_TMPDIR to a short writable folder"
        ) from None
    return short


def _start_local_ray(ray: Any, num_cpus: int, attempts: int = 3) -> None:
    """``ray.init`` a local Ray with ``num_cpus`` CPUs, in a short temp folder of its own when
    ``TMPDIR`` is too long for Ray's sockets (:func:`ray_temp_dir`), retrying a start-up timeout:
    Ray gives its raylet a fixed 30 s to register, which a heavily loaded machine can exceed.

    Raises:
        ExecutorError: as :func:`ray_temp_dir`.
    """
    temp_dir = ray_temp_dir()
    if temp_dir is not None:
        logger.info("TMPDIR is too long for Ray's socket paths: starting Ray in %s", temp_dir)
    options = {} if temp_dir is None else {"_temp_dir": temp_dir}
    for attempt in range(1, attempts + 1):
        try:
            ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=False, **options)
            return
        except Exception as err:
            if "timed out during startup" not in str(err) or attempt == attempts:
                raise
            logger.warning("local Ray start-up timed out (attempt %d of %d); retrying", attempt, attempts)
            ray.shutdown()


def _crashed_record(task: RunTask, err: BaseException) -> RunRecord:
    now = _now()
    message = f"{type(err).__name__}: {err}".splitlines()[0][:2000]
    return RunRecord(
        run_id=task.run_id,
        status="failed",
        error=message,
        summary={},
        metrics=None,
        log=f"worker crashed: {message}\n",
        wall_time_s=float("nan"),
        started_at=now,
        finished_at=now,
        host="",
        versions={},
    )


#: Executor name -> ``(units, jobs, address) -> records``; a unit is a list of runs one worker does
#: together (:func:`sweeps.execute.group_units`).
RUN_EXECUTORS: dict[str, Callable[[Sequence[list[RunTask]], int, str | None], Iterator[RunRecord]]] = {
    "joblib": _execute_joblib,
    "ray": _execute_ray,
}
