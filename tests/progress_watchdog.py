"""A guard against hangs that fails on lack of progress, never on slowness (issue 71).

pytest-timeout's per-test limit is a wall clock: on a busy 2-core machine (load 12-19) the quick
suite's training in the shared ``quick_suite`` fixture ran past 1800 s and every test of its worker
errored, though nothing was wrong. The long fixtures are now left out of that limit
(``timeout_func_only`` in pyproject.toml) and watched instead by :func:`progress_watchdog`: it
fails the block only when a *progress probe* (a folder's files, the CPU time of this process and
its children) has not changed for ``stall_seconds``. Slow work that keeps moving is never failed.
"""

from __future__ import annotations

import faulthandler
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

#: The signal the watchdog thread sends the main thread to fail the block there.
WATCHDOG_SIGNAL = signal.SIGUSR2


def folder_probe(root: str | Path) -> Callable[[], Hashable]:
    """A probe of a folder's progress: (number of files, newest modification in ns) under ``root``,
    recursively. A training run writes a checkpoint folder every 100 steps (quick suite) and a
    waiting process sees the other's files appear, so both move it."""
    root = Path(root)

    def probe() -> Hashable:
        count, newest = 0, 0
        for folder, dirs, files in os.walk(root):
            for name in files + dirs:
                try:
                    newest = max(newest, os.stat(os.path.join(folder, name), follow_symlinks=False).st_mtime_ns)
                except OSError:  # renamed or removed meanwhile (a run published): still a change
                    continue
                count += 1
        return count, newest

    return probe


def cpu_probe() -> Hashable:
    """CPU time of this process and all its live descendants (whole seconds, user + system). A
    deadlocked process (a lock, a queue no one fills, a dead worker waited on) uses none; work
    that moves uses some, however slowly the machine gives it a core."""
    import psutil

    me = psutil.Process()
    total = 0.0
    for process in [me, *me.children(recursive=True)]:
        try:
            times = process.cpu_times()
        except psutil.Error:  # ended meanwhile
            continue
        total += times.user + times.system
    return int(total)


@contextmanager
def progress_watchdog(
    probe: Callable[[], Hashable], stall_seconds: float, what: str, poll_seconds: float | None = None
) -> Iterator[None]:
    """Fail the ``with`` block (``pytest.fail``) once ``probe()`` has returned the same value for
    ``stall_seconds`` (seconds) in a row; any change restarts the count, so the block may run for
    as long as it keeps moving.

    A thread polls ``probe`` every ``poll_seconds`` (default: a tenth of ``stall_seconds``, at most
    10 s). In the main thread (pytest's, also under pytest-xdist) the failure is raised there, by
    :data:`WATCHDOG_SIGNAL`, so the block's own clean-up runs (the training pool stops its
    workers); in another thread the watchdog can only dump every thread's stack to standard error
    and end the process, as pytest-timeout's ``thread`` method does.

    Raises:
        pytest.fail.Exception: no progress for ``stall_seconds``; the message names ``what`` and
            the probe's last value.
    """
    poll = poll_seconds if poll_seconds is not None else min(stall_seconds / 10, 10.0)
    in_main = threading.current_thread() is threading.main_thread()
    stalled: list[str] = []
    active = threading.Event()
    stop = threading.Event()

    def fail_here(signum, frame) -> None:
        if active.is_set() and stalled:
            active.clear()
            pytest.fail(stalled[0], pytrace=True)

    def watch(main_ident: int) -> None:
        last, changed = probe(), time.monotonic()
        while not stop.wait(poll):
            value = probe()
            if value != last:
                last, changed = value, time.monotonic()
                continue
            idle = time.monotonic() - changed
            if idle >= stall_seconds:
                stalled.append(
                    f"{what}: no progress for {idle:.0f} s (watchdog limit {stall_seconds:g} s without a change "
                    f"of its progress probe, last value {last!r}); slow work that moves is never failed"
                )
                if in_main:
                    signal.pthread_kill(main_ident, WATCHDOG_SIGNAL)
                else:
                    sys.stderr.write(stalled[0] + "\n")
                    faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
                    os._exit(1)
                return

    previous = signal.signal(WATCHDOG_SIGNAL, fail_here) if in_main else None
    active.set()
    thread = threading.Thread(target=watch, args=(threading.get_ident(),), name=f"watchdog: {what}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        active.clear()
        stop.set()
        thread.join()
        if in_main:
            signal.signal(WATCHDOG_SIGNAL, previous)
