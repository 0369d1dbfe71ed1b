"""Executors: each takes the units of runs to do (a unit: one run, or runs trained together) and yields a :class:`~sweeps.execute.RunRecord` per run
as runs finish, in any order. ``joblib`` runs processes on this machine (``jobs == 1``: in this
process); ``ray`` runs on a local Ray or an existing cluster."""

from __future__ import annotations

import importlib.util
import logging
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Generator, Iterator, Sequence
from pathlib import Path
from typing import Any

from interp.core.io import atomic_write_text
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
    """Units one after another in this process. Each run's start is counted in its marker
    (:func:`started_marker`): a run that kills this process (the out-of-memory killer) leaves it,
    and the driver skips a run whose marker says the sweep died under it twice."""
    for unit in units:
        for task in unit:
            marker = started_marker(task)
            if marker is not None:
                marker.parent.mkdir(parents=True, exist_ok=True)
                atomic_write_text(marker, str(starts_of(task) + 1))
        yield from execute_unit(unit)


def started_marker(task: RunTask) -> Path | None:
    """``STORE/partial/<run_id>.started`` beside the run's state folder: how many times the run
    was started in the sweep's own process without its row being written (None: no store)."""
    return None if task.state_dir is None else Path(f"{task.state_dir}.started")


def starts_of(task: RunTask) -> int:
    """The count in the run's :func:`started_marker` (0: none, or unreadable)."""
    marker = started_marker(task)
    try:
        return int(marker.read_text()) if marker is not None and marker.is_file() else 0
    except (OSError, ValueError):
        return 0


def _execute_joblib(units: Sequence[list[RunTask]], jobs: int, address: str | None) -> Iterator[RunRecord]:
    """Units on ``jobs`` loky worker processes (``jobs == 1``: in this process).

    A worker killed mid-run (the kernel's out-of-memory killer: SIGKILL) breaks loky's whole pool
    (``TerminatedWorkerError``, which names no run). The units that were started and had not
    returned are then known from the markers each writes when it starts: one alone is the killer,
    recorded as failed (:func:`killed_record`, "worker killed by signal 9: out of memory?"); of
    several, each is run again alone in a worker of its own, so that only the one that kills its
    worker again is recorded so. The units not started yet are queued again on a fresh pool.
    """
    if jobs == 1:  # in-process: no worker start-up, same single-thread arithmetic
        yield from _execute_serial(units, jobs, address)
        return
    queue = list(units)
    while queue:
        broken = yield from _joblib_round(queue, jobs)
        if broken is None:
            return
        in_flight, queue, error = broken
        if len(in_flight) == 1:
            yield from (killed_record(task, error) for task in in_flight[0])
            continue
        for unit in in_flight:  # which of them killed its worker: each alone
            alone = yield from _joblib_round([unit], 2)
            if alone is not None:
                yield from (killed_record(task, alone[2]) for task in unit)


def _execute_marked(index: int, unit: list[RunTask], markers: str) -> tuple[int, list[RunRecord]]:
    """:func:`execute_unit` in a worker, after leaving ``markers/<index>.started`` (the driver's
    way to know which units were in flight when a worker died)."""
    Path(markers, f"{index}.started").write_text(str(os.getpid()))
    return index, execute_unit(unit)


def _joblib_round(
    units: Sequence[list[RunTask]], jobs: int
) -> Generator[RunRecord, None, tuple[list[list[RunTask]], list[list[RunTask]], BaseException] | None]:
    """Yield the records of ``units`` on one loky pool; returns None when every unit returned, or,
    when a worker died, ``(units started and not returned, units not started, loky's error)``.

    Raises:
        BrokenProcessPool: a worker died before any unit started (nothing to blame).
    """
    from concurrent.futures.process import BrokenProcessPool

    from joblib import Parallel, delayed

    markers = tempfile.mkdtemp(prefix="emergence-sweep-")
    returned: set[int] = set()
    try:
        parallel = Parallel(n_jobs=jobs, backend="loky", return_as="generator_unordered")
        try:
            for index, records in parallel(delayed(_execute_marked)(i, u, markers) for i, u in enumerate(units)):
                returned.add(index)
                yield from records
        except BrokenProcessPool as error:
            started = {int(p.name.split(".")[0]) for p in Path(markers).glob("*.started")}
            in_flight = [units[i] for i in sorted(started - returned)]
            if not in_flight:
                raise
            logger.warning(
                "a worker died (%s); runs in flight: %s",
                _first_sentence(str(error)),
                ", ".join(t.run_id for u in in_flight for t in u),
            )
            return in_flight, [units[i] for i in range(len(units)) if i not in started], error
        return None
    finally:
        shutil.rmtree(markers, ignore_errors=True)


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


#: Ray's errors for a worker or node that died under a task (the out-of-memory killer's among them).
RAY_DEATHS = ("WorkerCrashedError", "OutOfMemoryError", "NodeDiedError", "ActorDiedError")


def _first_sentence(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line.split(". ")[0].rstrip(".")


def _crashed_record(task: RunTask, err: BaseException) -> RunRecord:
    """The failed record of a run whose Ray worker died (or whose result never came back).

    The error says what happened in one line, without Ray's pointer to its own temp folder's
    logs; Ray's whole message goes into the run's log (``STORE/logs/<run_id>.log``, which the
    driver's warning names)."""
    name = type(err).__name__
    what = f"{name}: {_first_sentence(str(err))}"
    killed = name in RAY_DEATHS
    message = f"worker killed ({what}): out of memory?" if killed else f"worker failed ({what})"
    return failed_record(task, message, f"{message}\n{name}: {err}\n", killed)


def killed_record(task: RunTask, err: BaseException) -> RunRecord:
    """The failed record of a run whose worker process was killed (loky's ``TerminatedWorkerError``
    names the signal in its exit codes: ``{SIGKILL(-9)}``): ``"worker killed by signal 9: out
    of memory?"``, appended to the run's log as well."""
    import re
    import signal

    found = re.search(r"SIG\w+\((-?\d+)\)", str(err))
    number = abs(int(found.group(1))) if found else None
    if number == signal.SIGKILL:
        message = f"worker killed by signal {number}: out of memory?"
    elif number is not None:
        message = f"worker killed by signal {number} ({signal.Signals(number).name})"
    else:
        message = f"worker died ({_first_sentence(str(err))})"
    return failed_record(task, message, f"{message}\n", killed=True)


def failed_record(task: RunTask, message: str, log: str, killed: bool) -> RunRecord:
    """A failed run's record with ``message`` as its error; ``log`` is appended to the run's log
    file (local executors) or carried in the record (Ray); ``killed``: its process died under it."""
    now = _now()
    if task.log_path is not None:  # the run's own log, after what it wrote before it died
        Path(task.log_path).parent.mkdir(parents=True, exist_ok=True)
        with open(task.log_path, "a", encoding="utf-8") as stream:
            stream.write(log)
    return RunRecord(
        run_id=task.run_id,
        status="failed",
        error=message[:2000],
        summary={},
        metrics=None,
        log=None if task.log_path is not None else log,
        wall_time_s=float("nan"),
        started_at=now,
        finished_at=now,
        host="",
        versions={},
        killed=killed,
    )


#: Executor name -> ``(units, jobs, address) -> records``; a unit is a list of runs one worker does
#: together (:func:`sweeps.execute.group_units`).
RUN_EXECUTORS: dict[str, Callable[[Sequence[list[RunTask]], int, str | None], Iterator[RunRecord]]] = {
    "joblib": _execute_joblib,
    "ray": _execute_ray,
}
