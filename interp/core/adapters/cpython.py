"""CPython's private ``multiprocessing`` and ``concurrent.futures`` names that the project uses,
behind public-looking names of ours.

Checked on CPython 3.10 to 3.13 (3.11.7 here); :func:`can_fork_from_server` answers False on any
other interpreter or version, and the training workers are then spawned (slower by ~8 s of imports
each, the same bits). What moves breaks the pinned training workers of
:mod:`interp.core.kernel_pins` (every embedded-suite training); ``tests/interp/core/test_kernel_pins.py`` and
``tests/project/test_private_names.py`` fail first.

* :class:`CustomStartProcess` overrides ``Process._Popen``, the one hook through which a
  ``multiprocessing`` context decides how a process starts. The public road
  (``multiprocessing.get_context("forkserver")``) offers one process-wide fork server, started with
  the environment of the first caller; the pins need a server per kernel environment
  (docs/embedded.md, "Kernel pins").
* :func:`spawn_popen` and :func:`fork_server_popen` subclass ``popen_spawn_posix.Popen`` and
  ``popen_forkserver.Popen`` and override their ``_launch`` (reading ``Popen._fds`` and
  ``Process._name``, calling ``forkserver.read_signed``): the second is CPython's own launch,
  line for line, except that it connects to the server the caller names. Its ``poll`` takes a
  lock: CPython's unlocked ``poll`` read twice at once (a pool's manager thread and
  :func:`interp.core.kernel_pins.pool_exit_codes`) finds the pipe at its end the second time
  (status 255 instead of the signal).
* :func:`stop_fork_server` calls ``ForkServer._stop`` (CPython >= 3.8; a server also exits when
  its parent does, so a missing ``_stop`` only keeps a server until the end of the session).
* :func:`pool_processes` reads ``ProcessPoolExecutor._processes`` (pid -> process): a broken pool
  says which worker died only there, and Python < 3.14 has no ``terminate_workers``.
"""

from __future__ import annotations

import io
import multiprocessing.context as mp_context
import os
import sys
import threading
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, suppress
from typing import Any

__all__ = [
    "CustomStartProcess",
    "can_fork_from_server",
    "fork_server_popen",
    "inherited_fds",
    "new_fork_server",
    "pool_processes",
    "spawn_popen",
    "stop_fork_server",
]


def can_fork_from_server() -> bool:
    """Whether :func:`fork_server_popen` follows this interpreter's internals: CPython 3.10-3.13
    on POSIX, able to send file descriptors between processes."""
    from multiprocessing import reduction

    known = sys.implementation.name == "cpython" and sys.version_info < (3, 14)
    return os.name == "posix" and known and bool(reduction.HAVE_SEND_HANDLE)


class CustomStartProcess(mp_context.SpawnProcess):
    """A spawn-context process whose start is decided by its :meth:`popen` (override it); by
    default multiprocessing's own spawn start."""

    def popen(self):
        """Start this process; return its ``Popen`` object (a ``multiprocessing`` process handle)."""
        return mp_context.SpawnProcess._Popen(self)

    @staticmethod
    def _Popen(process_obj):
        return process_obj.popen()


def spawn_popen(process_obj, launching: Callable[[], AbstractContextManager]):
    """Start ``process_obj`` by spawn on POSIX (a fresh interpreter), with ``launching()`` active
    around the launch (e.g. an environment the new interpreter starts with)."""
    from multiprocessing import popen_spawn_posix

    class LaunchingPopen(popen_spawn_posix.Popen):
        def _launch(self, process_obj):
            with launching():
                super()._launch(process_obj)

    return LaunchingPopen(process_obj)


def fork_server_popen(
    process_obj,
    prepare: Callable[[Any, Any], None],
    connect: Callable[[Any, Sequence[int]], tuple[int, int]],
):
    """Start ``process_obj`` by forking it from a fork server the caller chooses.

    Args:
        process_obj: the process to start (a :class:`CustomStartProcess`).
        prepare: ``prepare(popen, process_obj)``, called first; may call
            ``popen.duplicate_for_child(fd)`` to hand a descriptor to the child (its index in
            :func:`inherited_fds` there is the order of those calls).
        connect: ``connect(process_obj, fds) -> (sentinel, write_fd)``: a running server's
            ``connect_to_new_process(fds)`` (:func:`new_fork_server`).

    Returns:
        The process's ``Popen`` object; its exit status is read under a lock.
    """
    from multiprocessing import forkserver, popen_forkserver, reduction, spawn, util
    from multiprocessing.context import set_spawning_popen

    class ServerPopen(popen_forkserver.Popen):
        def __init__(self, process_obj):
            self._poll_lock = threading.Lock()
            super().__init__(process_obj)

        def poll(self, flag=os.WNOHANG):
            with self._poll_lock:
                return super().poll(flag)

        def _launch(self, process_obj):
            prepare(self, process_obj)
            prep_data = spawn.get_preparation_data(process_obj._name)
            buf = io.BytesIO()
            set_spawning_popen(self)
            try:
                reduction.dump(prep_data, buf)
                reduction.dump(process_obj, buf)
            finally:
                set_spawning_popen(None)
            self.sentinel, w = connect(process_obj, self._fds)
            _parent_w = os.dup(w)  # the child's sentinel of its parent, as in CPython
            self.finalizer = util.Finalize(self, util.close_fds, (_parent_w, self.sentinel))
            with open(w, "wb", closefd=True) as f:
                f.write(buf.getbuffer())
            self.pid = forkserver.read_signed(self.sentinel)

    return ServerPopen(process_obj)


def new_fork_server(preload: Sequence[str]):
    """A ``multiprocessing.forkserver.ForkServer`` of our own (not the process-wide one), not yet
    started, that imports the modules ``preload`` when it starts (``ensure_running()``)."""
    from multiprocessing import forkserver

    server = forkserver.ForkServer()
    server.set_forkserver_preload(list(preload))
    return server


def inherited_fds() -> list[int]:
    """In a process forked from a fork server: the descriptors its parent handed it
    (``popen.duplicate_for_child`` in :func:`fork_server_popen`'s ``prepare``), in that order."""
    from multiprocessing import forkserver

    return list(forkserver.get_inherited_fds() or [])


def stop_fork_server(server) -> None:
    """Stop a server of :func:`new_fork_server` (nothing when this Python cannot; it then exits
    with this process)."""
    stop = getattr(server, "_stop", None)
    if stop is not None:
        with suppress(OSError, ChildProcessError):
            stop()


def pool_processes(pool) -> dict[int, Any]:
    """``{pid: process}`` of a ``concurrent.futures.ProcessPoolExecutor``'s current workers (a
    copy; empty once the pool has shut down)."""
    return dict(getattr(pool, "_processes", None) or {})
