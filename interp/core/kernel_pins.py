"""Kernel pins: the embedded trainer's processes compute with the same kernels on every x86-64 CPU.

What decides the bits of a training step on CPU, besides the code and the packages, is which
kernels run: torch's own (ATen, chosen by CPU level when torch is imported, overridable with
``ATEN_CPU_CAPABILITY``), MKL's matrix products (chosen by CPU, overridable with its conditional
numerical reproducibility branch, ``MKL_CBWR``), oneDNN's (GELU runs there; ``ONEDNN_MAX_CPU_ISA``)
and the thread count. All are read when the libraries load, so they cannot be changed in a process
that has imported torch: the trainer sets them in the environment of its own worker processes
(never forked from the caller), whatever the caller's shell says. On POSIX the workers are forked
from a pinned fork server, an interpreter spawned with the pins that has imported torch and the
trainer once (:data:`PRELOAD`; saves ~8 s of imports per worker); elsewhere each is spawned. :data:`PINS` names the AVX2 level, the
highest that every x86-64 CPU with AVX2 runs (AVX-512 machines run it too); measured effect of each
pin in docs/embedded.md ("What changes the weights").

MKL also asks the CPU's vendor: on a CPU that is not Intel's it takes another code path, whose bits
differ even with ``MKL_CBWR=AVX2`` (measured on an AMD EPYC, Zen 3: the first step's
``addmm`` and flash attention, docs/embedded.md "Kernel pins"). There the pins add a fourth one,
:func:`mkl_vendor_shim`: a one-function shared library, built once with the system's C compiler,
preloaded (``LD_PRELOAD``) into the training workers, whose ``mkl_serv_intel_cpu_true`` answers
"Intel", so MKL runs the same AVX2 code path as on an Intel CPU (its AVX2 kernels use only AVX2 and
FMA, which the pins already require). The AMD machine then trains the Intel machine's bytes.

Where pins cannot apply (not x86-64, no AVX2/FMA, or a non-Intel CPU where the shim cannot be
built) training runs with the machine's kernels, a one-line warning says so, ``suite.json``
records why and the cache key names the actual level.
``EMERGENCE_LENS_UNPINNED=1`` turns the pins off on purpose (the caller's environment decides the
kernels, as before pins): used to check that the tests' properties of emergence hold under other
kernel levels (``ATEN_CPU_CAPABILITY=default|avx2|avx512``).
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import multiprocessing.context as mp_context
import os
import platform
import shutil
import signal
import subprocess
import sys
import sysconfig
import threading
import warnings
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from interp.core.adapters import cpython

#: Environment set in every training worker before torch is imported.
PINS: dict[str, str] = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
#: The kernel level torch reports in a pinned worker (``torch.backends.cpu.get_cpu_capability()``).
PINNED_LEVEL = "AVX2"
#: Thread-count variables set to the run's thread count in a pinned worker.
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")
#: Set to 1 by a caller to train with the environment's kernels instead (tests of portability).
UNPIN_VAR = "EMERGENCE_LENS_UNPINNED"
#: Marks a process started with the pins (checked by the trainer before it trains).
MARK_VAR = "EMERGENCE_LENS_PINNED"


#: Where MKL asks whether the CPU is Intel's; the shim's one function (see :func:`mkl_vendor_shim`).
MKL_VENDOR_SYMBOL = "mkl_serv_intel_cpu_true"
MKL_VENDOR_SHIM_SOURCE = f"""/* emergence-lens kernel pins: MKL takes its Intel code path (docs/embedded.md, Kernel pins). */
int {MKL_VENDOR_SYMBOL}(void) {{ return 1; }}
"""


def _cpuinfo_field(name: str) -> str | None:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return None
    line = next((ln for ln in text.splitlines() if ln.split(":", 1)[0].strip() == name), None)
    return line.split(":", 1)[1].strip() if line else None


def _cpu_flags() -> set[str] | None:
    flags = _cpuinfo_field("flags")
    return set(flags.split()) if flags is not None else None


def cpu_vendor() -> str | None:
    """The CPU's vendor string (``GenuineIntel``, ``AuthenticAMD``, …) from ``/proc/cpuinfo``, or
    None where there is none (not Linux)."""
    return _cpuinfo_field("vendor_id")


def _c_compiler() -> str | None:
    for name in (os.environ.get("CC"), sysconfig.get_config_var("CC"), "cc", "gcc", "clang"):
        if name and shutil.which(name.split()[0]):
            return name.split()[0]
    return None


@functools.lru_cache(maxsize=1)
def mkl_vendor_shim() -> tuple[Path | None, str | None]:
    """The shared library that makes MKL take its Intel code path on a non-Intel CPU:
    ``(path, None)``, built on first use into ``<cache>/kernel-pins/`` (one C function,
    :data:`MKL_VENDOR_SHIM_SOURCE`, compiled with ``$CC`` / ``cc`` / ``gcc`` / ``clang``; the file
    is named by the source's digest and written atomically), or ``(None, reason)`` when it cannot
    be built (no C compiler, or the compiler failed; the reason is one line).

    Why: MKL chooses its kernels by CPU vendor as well as level, and on AMD CPUs its non-Intel path
    computes other bits than an Intel CPU under the same ``MKL_CBWR=AVX2`` (issue 19;
    docs/embedded.md, "Kernel pins"). Preloaded, the shim's ``mkl_serv_intel_cpu_true`` is the one
    MKL (linked into ``libtorch_cpu``) calls.
    """
    from interp.core.io import atomic_path, cache_root

    digest = hashlib.sha256(MKL_VENDOR_SHIM_SOURCE.encode()).hexdigest()[:12]
    path = cache_root() / "kernel-pins" / f"libmkl_intel_path-{digest}.so"
    if any(c.isspace() or c == ":" for c in str(path)):
        return None, f"its cache path {str(path)!r} holds a space or ':', which LD_PRELOAD cannot carry"
    if path.is_file():
        return path, None
    compiler = _c_compiler()
    if compiler is None:
        return None, "no C compiler (cc, gcc or clang) to build it"
    source = path.with_suffix(".c")
    try:
        with atomic_path(source, suffix=".c") as tmp_c:
            tmp_c.write_text(MKL_VENDOR_SHIM_SOURCE)
        with atomic_path(path, suffix=".so") as tmp_so:
            done = subprocess.run(
                [compiler, "-shared", "-fPIC", "-O2", "-o", str(tmp_so), str(source)],
                capture_output=True,
                text=True,
                timeout=120,
            )
            if done.returncode != 0:
                last = (done.stderr or done.stdout).strip().splitlines()
                raise OSError(f"{compiler} failed: {last[-1] if last else f'exit {done.returncode}'}")
    except (OSError, subprocess.SubprocessError) as err:
        return None, f"building it failed ({err})"
    return path, None


def needs_mkl_shim() -> bool:
    """True on a Linux x86-64 CPU that is not Intel's (MKL would take its non-Intel code path)."""
    vendor = cpu_vendor()
    return vendor is not None and vendor != "GenuineIntel"


@functools.lru_cache(maxsize=1)
def why_not() -> str | None:
    """Why the pins cannot apply on this machine (one line), or None when they apply."""
    if os.environ.get(UNPIN_VAR, "") not in ("", "0"):
        return f"{UNPIN_VAR}={os.environ[UNPIN_VAR]} set by the caller: the environment's kernels decide"
    machine = platform.machine().lower()
    if machine not in ("x86_64", "amd64"):
        return f"the CPU is {platform.machine()}, not x86-64: AVX2 kernels do not exist here"
    flags = _cpu_flags()
    if flags is None:  # no /proc/cpuinfo (macOS, Windows): ask torch what the CPU runs
        import torch

        if torch.backends.cpu.get_cpu_capability() in ("AVX2", "AVX512"):
            return None
        return f"torch reports CPU level {torch.backends.cpu.get_cpu_capability()}, below AVX2"
    if not {"avx2", "fma"} <= flags:
        return "the CPU has no AVX2/FMA: the pinned AVX2 kernels cannot run here"
    if needs_mkl_shim():
        _, reason = mkl_vendor_shim()
        if reason is not None:
            return (
                f"the CPU is {cpu_vendor()}, not Intel, so MKL takes another code path, and the shim "
                f"that makes it take Intel's could not be made: {reason}"
            )
    return None


def pins_apply() -> bool:
    """True when the trainer's workers run with :data:`PINS` (see :func:`why_not`)."""
    return why_not() is None


@functools.lru_cache(maxsize=1)
def _warn_once(reason: str) -> None:
    warnings.warn(
        f"embedded training is not pinned to the {PINNED_LEVEL} kernels: {reason}; "
        f"the weights are this machine's own (cache key and suite.json name its level)",
        RuntimeWarning,
        stacklevel=3,
    )


def worker_env(threads: int) -> dict[str, str]:
    """Environment overrides for a training worker: :data:`PINS`, the thread counts and the mark;
    ``{}`` (with a one-line warning) where the pins cannot apply."""
    reason = why_not()
    if reason is not None:
        if os.environ.get(UNPIN_VAR, "") in ("", "0"):
            _warn_once(reason)
        return {}
    env = {**PINS, **{var: str(int(threads)) for var in THREAD_VARS}, MARK_VAR: PINNED_LEVEL}
    if needs_mkl_shim():
        shim, _ = mkl_vendor_shim()
        preload = [str(shim), *os.environ.get("LD_PRELOAD", "").split()]
        env["LD_PRELOAD"] = " ".join(dict.fromkeys(preload))
    return env


def mkl_takes_intel_path() -> bool | None:
    """Whether MKL in this process (after ``import torch``) answers "Intel" to its vendor check:
    True on an Intel CPU or with the shim preloaded, False on another vendor without it, None
    where the symbol cannot be looked up (not Linux, or a torch without MKL)."""
    import ctypes

    import torch  # loads libtorch_cpu, which holds MKL

    # MKL's call inside libtorch_cpu resolves in the global scope first (where LD_PRELOAD puts
    # the shim), then in libtorch_cpu itself (loaded RTLD_LOCAL, so only its own handle sees it).
    for library in (None, Path(torch.__file__).parent / "lib" / "libtorch_cpu.so"):
        try:
            answer = getattr(ctypes.CDLL(None if library is None else str(library)), MKL_VENDOR_SYMBOL)
        except (AttributeError, OSError):
            continue
        answer.restype = ctypes.c_int
        return bool(answer())
    return None


def level_label() -> str:
    """The kernel level that names the cache key: ``pinned:<pins>`` where the pins apply, else the
    level torch reports in this process (which unpinned workers inherit)."""
    if pins_apply():
        return "pinned:" + ",".join(f"{k}={v}" for k, v in sorted(PINS.items()))
    import torch

    return torch.backends.cpu.get_cpu_capability()


def kernel_env() -> dict[str, str | None]:
    """The kernel and thread variables as this process sees them (None: unset)."""
    return {var: os.environ.get(var) for var in (*PINS, *THREAD_VARS, MARK_VAR, "LD_PRELOAD")}


def record() -> dict:
    """What a training process ran with, for ``suite.json``: ``applied`` (bool), ``pins`` (the pinned
    variables or None), ``reason`` (why not, or None), ``cpu_capability`` torch reports here, and
    the kernel variables as this process saw them, the CPU's vendor and whether MKL takes its
    Intel code path (``mkl_intel_path``: True / False / None, see :func:`mkl_takes_intel_path`)."""
    import torch

    applied = os.environ.get(MARK_VAR) == PINNED_LEVEL
    return {
        "applied": applied,
        "pins": dict(PINS) if applied else None,
        "reason": None if applied else (why_not() or "trained in a process not started with the pins"),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "cpu_vendor": cpu_vendor(),
        "mkl_intel_path": mkl_takes_intel_path(),
        "env": kernel_env(),
    }


def check_process() -> None:
    """Raise unless this process may train a suite run: pinned (and torch runs the pinned level) or
    the pins do not apply here.

    Raises:
        RuntimeError: the pins apply but this process was not started with them (train through
            :func:`pinned_context` / :func:`run_pinned`), torch ignored them, or MKL still takes
            its non-Intel code path on a non-Intel CPU (the shim was not preloaded).
    """
    import torch

    if why_not() is not None:
        return
    if os.environ.get(MARK_VAR) != PINNED_LEVEL:
        raise RuntimeError(
            "suite runs train in a process started with the kernel pins "
            "(interp.core.kernel_pins.run_pinned or ensure_suite); this one was not"
        )
    level = torch.backends.cpu.get_cpu_capability()
    if level != PINNED_LEVEL:
        raise RuntimeError(f"torch runs {level} kernels although ATEN_CPU_CAPABILITY=avx2 was pinned")
    if needs_mkl_shim() and mkl_takes_intel_path() is False:
        raise RuntimeError(
            f"MKL takes its non-Intel code path on this {cpu_vendor()} CPU although the pins preload "
            f"the shim (LD_PRELOAD={os.environ.get('LD_PRELOAD')!r}): the bits would not be the pinned ones"
        )


# --- spawned processes with the pins ----------------------------------------------------------

_ENV_LOCK = threading.Lock()


@contextmanager
def _patched_environ(overrides: dict[str, str], replace: bool = False):
    """os.environ with ``overrides`` (``replace``: exactly ``overrides``) while a child is exec'd
    (spawn and a fork server's start copy the parent's environ)."""
    with _ENV_LOCK:
        saved = {k: os.environ.get(k) for k in (set(overrides) | (set(os.environ) if replace else set()))}
        if replace:
            os.environ.clear()
        os.environ.update(overrides)
        try:
            yield
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


#: Modules every training worker imports (``python -X importtime`` on the 2-core AMD EPYC: torch
#: 2.6 s, the trainer 0.7 s, transformers' ``PreTrainedModel`` 4.9 s): a pinned fork server imports
#: them once, and each worker forked from it starts with them loaded.
PRELOAD = ("__main__", "interp.core.kernel_pins", "interp.sources.embedded", "transformers.modeling_utils")
#: Set to 1 to start each training worker by ``spawn`` (a fresh interpreter) instead of forking it
#: from a pinned fork server: slower by the imports above, for debugging the server itself.
SPAWN_VAR = "EMERGENCE_LENS_SPAWN_WORKERS"
#: Fork servers kept alive at once (one per distinct import-time environment; ~0.4 GB each).
MAX_SERVERS = 2
#: Variables a worker reads only while it runs, never at import: a fork server is shared by callers
#: whose environments differ only in these, and each worker gets the caller's values when it starts.
RUNTIME_ONLY_PREFIXES = ("EMERGENCE_LENS_", "PYTEST_")

_SERVER_LOCK = threading.Lock()
_SERVERS: dict[tuple, Any] = {}  # import-time environment -> multiprocessing.forkserver.ForkServer


def _uses_fork_server() -> bool:
    """Whether training workers fork from a pinned fork server here: on POSIX, with CPython's
    forkserver internals of 3.10-3.13 (:func:`interp.core.adapters.cpython.can_fork_from_server`;
    a newer Python spawns), unless :data:`SPAWN_VAR` is set."""
    return cpython.can_fork_from_server() and os.environ.get(SPAWN_VAR, "") in ("", "0")


def _import_time_key(env: dict[str, str]) -> tuple:
    """The part of a worker's environment that the preloaded modules may read at import time."""
    keep = {k: v for k, v in env.items() if not k.startswith(RUNTIME_ONLY_PREFIXES)}
    keep.update({k: env[k] for k in (UNPIN_VAR, MARK_VAR) if k in env})  # they decide the kernels
    return tuple(sorted(keep.items()))


def _fork_server(env: dict[str, str]):
    """The running fork server whose interpreter started with ``env`` (started on first use, with
    :data:`PRELOAD` imported; the least recently used one is stopped beyond :data:`MAX_SERVERS`).
    Call with ``_SERVER_LOCK`` held."""
    key = _import_time_key(env)
    server = _SERVERS.pop(key, None)
    if server is None:
        server = cpython.new_fork_server(PRELOAD)
    _SERVERS[key] = server  # most recently used last
    while len(_SERVERS) > MAX_SERVERS:
        cpython.stop_fork_server(_SERVERS.pop(next(iter(_SERVERS))))
    with _patched_environ(env, replace=True):  # its interpreter (and so its kernels) starts from env
        server.ensure_running()  # restarts a server that died
    return server


def stop_fork_servers() -> None:
    """Stop the pinned fork servers of this process (the next training worker starts a new one):
    call it after editing the library's code in a running session, whose workers would otherwise
    still fork from the modules the server imported."""
    with _SERVER_LOCK:
        while _SERVERS:
            cpython.stop_fork_server(_SERVERS.pop(next(iter(_SERVERS))))


atexit.register(stop_fork_servers)


def _take_caller_env_and_stdio(popen, process_obj) -> None:
    """Before a worker forks from a server: the caller's environment (with the pins) and its
    standard output and error go with it (taken over in :meth:`PinnedProcess.run`)."""
    process_obj._worker_env = {**os.environ, **getattr(process_obj, "_pinned_env", {})}
    process_obj._stdio = [(fd, popen.duplicate_for_child(fd)) for fd in (1, 2) if _is_open(fd)]


def _connect_to_pinned_server(process_obj, fds):
    """A new process of the pinned server of ``process_obj``'s environment."""
    with _SERVER_LOCK:
        return _fork_server(process_obj._worker_env).connect_to_new_process(fds)


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


class PinnedProcess(cpython.CustomStartProcess):
    """A training worker whose environment carries :func:`worker_env` from its start.

    On POSIX it is forked from a pinned fork server (:data:`PRELOAD` already imported there, with
    the pins in its environment from its start, so its kernels are the pinned ones) and takes the
    caller's current environment and standard streams before it runs; elsewhere, or with
    :data:`SPAWN_VAR` set, it is spawned as a fresh interpreter.
    """

    def popen(self):
        """Start this worker (:class:`PinnedProcess`); its ``Popen`` handle."""
        pinned = functools.partial(_patched_environ, getattr(self, "_pinned_env", {}))
        if os.name == "nt":  # pragma: no cover - Windows spawns via its own Popen
            with pinned():
                return super().popen()
        if _uses_fork_server():
            return cpython.fork_server_popen(self, _take_caller_env_and_stdio, _connect_to_pinned_server)
        return cpython.spawn_popen(self, pinned)

    def run(self):
        """In the worker: forked from a server, first take the caller's environment and standard
        output and error (as a spawned process starts with them); then run the target."""
        env = getattr(self, "_worker_env", None)
        if env is not None:  # forked from a server: the caller's environment and streams, as spawn gives
            os.environ.clear()
            os.environ.update(env)
            inherited = cpython.inherited_fds()
            for fd, index in getattr(self, "_stdio", []):
                with suppress(OSError, ValueError):
                    (sys.stdout if fd == 1 else sys.stderr).flush()
                os.dup2(inherited[index], fd)
        super().run()


class PinnedContext(mp_context.SpawnContext):
    """A multiprocessing context whose processes start with :func:`worker_env` (threads): forked
    from a pinned fork server on POSIX, spawned elsewhere (:class:`PinnedProcess`)."""

    def __init__(self, threads: int = 1):
        super().__init__()
        self.env = worker_env(threads)

    def Process(self, *args, **kwargs):
        """A :class:`PinnedProcess` (arguments as ``multiprocessing.Process``) carrying this
        context's worker environment."""
        process = PinnedProcess(*args, **kwargs)
        process._pinned_env = self.env
        return process


def pinned_context(threads: int = 1) -> PinnedContext:
    """Multiprocessing context for training workers (``ProcessPoolExecutor(mp_context=...)``)."""
    return PinnedContext(threads)


class WorkerDiedError(RuntimeError):
    """A training worker process ended abruptly (killed by a signal, or exited without a
    result); the message names the process and the signal or exit status. ``SIGILL`` means the
    CPU lacks an instruction set the pinned kernels use; ``SIGKILL`` usually the out-of-memory
    killer.

    Fix: run the same command again (training resumes from the last saved step); for ``SIGILL``
    train on an x86-64 CPU with AVX2 (docs/embedded.md, "Kernel pins"); for ``SIGKILL`` free
    memory or train fewer runs at once.
    """


def describe_exit(exitcode: int | None) -> str:
    """``killed by signal SIGILL (4)`` / ``exited with status 3`` for a process's exit code."""
    if exitcode is None:
        return "still running"
    if exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        hint = (
            " (an instruction this CPU lacks: is ATEN_CPU_CAPABILITY above the CPU?)"
            if -exitcode == signal.SIGILL
            else ""
        )
        return f"killed by signal {name} ({-exitcode}){hint}"
    return f"exited with status {exitcode}"


def pool_exit_codes(pool, wait_s: float = 5.0) -> dict[int, int | None]:
    """``{pid: exitcode}`` of a broken process pool's workers, after waiting up to ``wait_s``
    seconds (in total) for each exit status to be known.

    The pool reports the death as soon as the dead worker's pipe closes; its own manager thread
    then reaps the process, so for a moment ``exitcode`` is ``None`` (our ``waitpid`` finds no
    child) although the process is gone. Returning then would hide the signal that killed it.
    """
    import time

    processes = cpython.pool_processes(pool)
    deadline = time.monotonic() + wait_s
    for process in processes.values():
        while process.exitcode is None and time.monotonic() < deadline:
            with suppress(AssertionError, ValueError, OSError):  # already closed by the pool
                process.join(timeout=0.05)
            if process.exitcode is None:
                time.sleep(0.01)  # reaped by the pool's thread, which has not yet stored the code
    return {pid: process.exitcode for pid, process in processes.items()}


def _run_in_child(fn, threads, args, kwargs):
    import torch

    check_process()
    torch.set_num_threads(threads)
    return fn(*args, **kwargs)


def run_pinned(fn, *args, threads: int = 1, what: str = "training", **kwargs):
    """``fn(*args, **kwargs)`` in one spawned process with the pins (``threads`` torch threads);
    its result. ``fn`` and its arguments must pickle (module-level function, plain values).

    Where the pins cannot apply, ``fn`` still runs in a fresh process with the caller's environment.

    Raises:
        WorkerDiedError: the process died (signal or exit) before returning; names ``what``.
        Whatever ``fn`` raised.
    """
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    ctx = pinned_context(threads)
    with ProcessPoolExecutor(1, mp_context=ctx) as pool:
        future = pool.submit(_run_in_child, fn, int(threads), args, kwargs)
        try:
            return future.result()
        except BrokenProcessPool:
            codes = [code for code in pool_exit_codes(pool).values() if code is not None]
            how = describe_exit(codes[0]) if codes else "ended abruptly"
            raise WorkerDiedError(f"the {what} process {how}") from None
