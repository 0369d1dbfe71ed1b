"""Kernel pins: the trainer's workers compute with the pinned kernels whatever the caller's
environment says, and a worker that dies is reported with its run, signal and step."""

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from interp.core import kernel_pins
from interp.sources import embedded
from tiny_suite import TINY, tiny_suite

CFG = tiny_suite(seed=3)

needs_pins = pytest.mark.skipif(
    not kernel_pins.pins_apply(), reason=f"the kernel pins do not apply here: {kernel_pins.why_not()}"
)


def _train_from_here(root: Path, monkeypatch, **env_changes) -> tuple[str, dict]:
    """ensure_suite (the quick suite's seed 1, 40 steps: the real model and data, trained as the
    suite is) from this process, with ``env_changes`` in the environment its spawned worker
    starts from (the caller's kernel variables; the test's own ones removed first). Returns the
    sha256 of step 40's weights and the run's suite.json (with ``cache_folder``: its key)."""
    for var in (*kernel_pins.PINS, *kernel_pins.THREAD_VARS, kernel_pins.UNPIN_VAR):
        monkeypatch.delenv(var, raising=False)
    for var, value in env_changes.items():
        monkeypatch.setenv(var, value)
    kernel_pins.why_not.cache_clear()  # read again: EMERGENCE_LENS_UNPINNED may have changed
    try:
        cfg = embedded.SuiteConfig(**{**embedded.QUICK.__dict__, "seeds": (1,), "steps": 40, "checkpoint_every": 40})
        (run,) = embedded.ensure_suite(cfg, root=root, n_jobs=1, progress=False)
    finally:
        monkeypatch.undo()
        kernel_pins.why_not.cache_clear()
    digest = hashlib.sha256((run / "step40" / "model.safetensors").read_bytes()).hexdigest()
    meta = json.loads((run / "suite.json").read_text())
    meta["cache_folder"] = run.parent.name
    return digest, meta


@pytest.mark.slow
@needs_pins
def test_pins_win_over_the_callers_kernel_environment(tmp_path, monkeypatch):
    """The worker starts from the caller's environment (spawn copies it), and the pins replace
    its kernel variables: a caller asking for torch's default kernels and MKL's compatible path
    gets the same bytes as a plain one. Without the pins the same two environments reach the
    worker as they are (it records the DEFAULT level) and give other bytes."""
    plain, meta = _train_from_here(tmp_path / "a", monkeypatch)
    # the odd caller's worker is also spawned as a fresh interpreter, not forked from a fork server
    odd, odd_meta = _train_from_here(
        tmp_path / "b",
        monkeypatch,
        ATEN_CPU_CAPABILITY="default",
        MKL_CBWR="COMPATIBLE",
        **{kernel_pins.SPAWN_VAR: "1"},
    )
    assert plain == odd  # the trainer's workers ran the same kernels: identical bytes
    for m in (meta, odd_meta):
        pins = m["environment"]["kernel_pins"]
        assert pins["applied"] and pins["pins"] == kernel_pins.PINS and pins["cpu_capability"] == "AVX2"
        assert pins["env"]["ATEN_CPU_CAPABILITY"] == "avx2" and pins["env"]["MKL_CBWR"] == "AVX2"
        assert pins["env"]["OMP_NUM_THREADS"] == "1"
    # the same folder name (cache key) for both callers: it names the pinned level, not theirs
    assert meta["cache_folder"] == odd_meta["cache_folder"]
    # without the pins the same two environments give other bytes: what the pins take away
    free, free_meta = _train_from_here(tmp_path / "c", monkeypatch, EMERGENCE_LENS_UNPINNED="1")
    free_odd, free_odd_meta = _train_from_here(
        tmp_path / "d", monkeypatch, EMERGENCE_LENS_UNPINNED="1", ATEN_CPU_CAPABILITY="default", MKL_CBWR="COMPATIBLE"
    )
    assert free_odd_meta["environment"]["kernel_pins"]["cpu_capability"] == "DEFAULT"  # the odd caller's kernels
    assert free_meta["environment"]["kernel_pins"]["cpu_capability"] != "DEFAULT"
    assert free != free_odd
    assert not free_meta["environment"]["kernel_pins"]["applied"]
    assert "EMERGENCE_LENS_UNPINNED" in free_meta["environment"]["kernel_pins"]["reason"]


@pytest.mark.slow
def test_a_dying_worker_is_reported_with_run_signal_and_step(tmp_path, monkeypatch):
    monkeypatch.setenv(embedded._TEST_KILL_VAR, "5:SIGILL")  # read by the spawned worker only
    with pytest.raises(
        kernel_pins.WorkerDiedError,
        match=r"run neox-1l-32d-seed3 \(pid \d+\) killed by signal SIGILL \(4\).* at step 5 ",
    ):
        embedded.ensure_suite(CFG, root=tmp_path, n_jobs=1, progress=False)
    assert not list(tmp_path.rglob("suite.json"))  # nothing half-written appears as a run


def test_run_pinned_reports_a_death_and_returns_results():
    with pytest.raises(kernel_pins.WorkerDiedError, match=r"the probe process killed by signal SIGSEGV \(11\)"):
        kernel_pins.run_pinned(signal.raise_signal, signal.SIGSEGV, what="probe")
    env = kernel_pins.run_pinned(kernel_pins.kernel_env)
    expected = kernel_pins.PINS if kernel_pins.pins_apply() else {}
    assert {k: env.get(k) for k in expected} == expected


def _probe(label: str, loud: bool = True) -> dict:
    """Run in a pinned worker: says who it is and what it sees (``loud``: on both standard streams)."""
    if loud:
        print(f"probe {label} on stdout", flush=True)
        os.write(2, f"probe {label} on stderr\n".encode())
    return {"pid": os.getpid(), "parent": os.getppid(), "env": os.environ.get("EMERGENCE_LENS_PROBE")}


@pytest.mark.slow
@pytest.mark.skipif(
    not kernel_pins._uses_fork_server(), reason="workers are spawned here (Windows, or the opt-out set)"
)
def test_forked_workers_see_the_callers_environment_and_streams(monkeypatch, capfd):
    """Workers forked from the pinned fork server: each sees the caller's environment and
    standard streams of the moment it starts; a variable read only at run time keeps the server,
    one that a library may read at import starts another."""
    monkeypatch.setenv("EMERGENCE_LENS_PROBE", "first")
    with capfd.disabled():  # the server starts with other standard streams than the test's capture
        first = kernel_pins.run_pinned(_probe, "one", loud=False)
    monkeypatch.setenv("EMERGENCE_LENS_PROBE", "second")
    second = kernel_pins.run_pinned(_probe, "two")
    assert (first["env"], second["env"]) == ("first", "second")
    # two processes with one parent, the server: not spawned by this process
    assert first["pid"] != second["pid"] and first["parent"] == second["parent"] != os.getpid()
    out, err = capfd.readouterr()  # this test's capture, whatever the server started with
    assert "probe two on stdout" in out and "probe two on stderr" in err
    # any other variable may be read when a library is imported (HF_HUB_OFFLINE, say): another server
    monkeypatch.setenv("EMERGENCE_TEST_IMPORT_TIME", f"{os.getpid()}-{time.time()}")
    third = kernel_pins.run_pinned(_probe, "three")
    assert third["env"] == "second" and third["parent"] not in (first["parent"], os.getpid())


@needs_pins
def test_suite_training_refuses_an_unpinned_process(tmp_path):
    assert os.environ.get(kernel_pins.MARK_VAR) is None  # this test process was not started pinned
    with pytest.raises(RuntimeError, match="started with the kernel pins"):
        embedded._train_to_folder(TINY, 3, CFG, tmp_path / "run")
    assert kernel_pins.level_label() == "pinned:ATEN_CPU_CAPABILITY=avx2,MKL_CBWR=AVX2,ONEDNN_MAX_CPU_ISA=AVX2"


def test_where_pins_cannot_apply_the_reason_is_one_line(monkeypatch):
    kernel_pins.why_not.cache_clear()
    try:
        monkeypatch.setattr(kernel_pins.platform, "machine", lambda: "aarch64")
        reason = kernel_pins.why_not()
        assert reason == "the CPU is aarch64, not x86-64: AVX2 kernels do not exist here"
        assert kernel_pins.worker_env(1) == {} and kernel_pins.level_label() == torch.backends.cpu.get_cpu_capability()
        monkeypatch.setattr(kernel_pins.platform, "machine", lambda: "x86_64")
        monkeypatch.setattr(kernel_pins, "_cpu_flags", lambda: {"sse2", "avx"})
        kernel_pins.why_not.cache_clear()
        assert "no AVX2/FMA" in kernel_pins.why_not()
        monkeypatch.setenv(kernel_pins.UNPIN_VAR, "1")
        kernel_pins.why_not.cache_clear()
        assert kernel_pins.why_not().startswith("EMERGENCE_LENS_UNPINNED=1 set by the caller")
    finally:
        kernel_pins.why_not.cache_clear()


def test_mkl_takes_its_intel_code_path_in_every_pinned_worker():
    """Issue 19: MKL picks kernels by CPU vendor too; a pinned worker runs its Intel path on any
    x86-64 CPU (natively on Intel, through the preloaded shim elsewhere), so an AMD CPU trains the
    Intel machine's bytes. In this (unpinned) process the answer is the CPU's own."""
    if not kernel_pins.pins_apply():
        pytest.skip(f"the kernel pins do not apply here: {kernel_pins.why_not()}")
    assert kernel_pins.run_pinned(kernel_pins.mkl_takes_intel_path) is True
    vendor = kernel_pins.cpu_vendor()
    if vendor is not None:
        assert kernel_pins.mkl_takes_intel_path() is (vendor == "GenuineIntel")
        env = kernel_pins.worker_env(1)
        shim, _ = kernel_pins.mkl_vendor_shim()
        assert (str(shim) in env.get("LD_PRELOAD", "")) is (vendor != "GenuineIntel")


@pytest.mark.slow
def test_the_shim_is_built_once_and_a_non_intel_cpu_without_it_is_unpinned(tmp_path, monkeypatch):
    if kernel_pins._c_compiler() is None:
        pytest.skip("no C compiler here to build the shim")
    monkeypatch.setenv("EMERGENCE_LENS_CACHE", str(tmp_path / "cache"))
    kernel_pins.mkl_vendor_shim.cache_clear()
    kernel_pins.why_not.cache_clear()
    try:
        shim, reason = kernel_pins.mkl_vendor_shim()
        assert reason is None and shim.parent == tmp_path / "cache" / "kernel-pins" and shim.is_file()
        digest = hashlib.sha256(kernel_pins.MKL_VENDOR_SHIM_SOURCE.encode()).hexdigest()[:12]
        assert shim.name == f"libmkl_intel_path-{digest}.so"
        # the source beside it and nothing half-written; a second call builds nothing
        assert sorted(p.name for p in shim.parent.iterdir()) == sorted([shim.with_suffix(".c").name, shim.name])
        kernel_pins.mkl_vendor_shim.cache_clear()
        built = shim.stat().st_mtime_ns
        assert kernel_pins.mkl_vendor_shim() == (shim, None) and shim.stat().st_mtime_ns == built
        preloaded = subprocess.run(
            [sys.executable, "-c", "from interp.core import kernel_pins; print(kernel_pins.mkl_takes_intel_path())"],
            env={**os.environ, "LD_PRELOAD": str(shim), "PYTHONPATH": str(Path(__file__).resolve().parents[3])},
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert preloaded.stdout.strip() == "True", preloaded.stderr[-1000:]
        # a non-Intel CPU gets the shim in its workers' environment ...
        monkeypatch.setattr(kernel_pins, "cpu_vendor", lambda: "AuthenticAMD")
        monkeypatch.setattr(kernel_pins, "_cpu_flags", lambda: {"avx2", "fma"})
        monkeypatch.setattr(kernel_pins.platform, "machine", lambda: "x86_64")
        monkeypatch.setenv("LD_PRELOAD", "libother.so")
        assert kernel_pins.why_not() is None
        assert kernel_pins.worker_env(1)["LD_PRELOAD"] == f"{shim} libother.so"
        # ... and where it cannot be built, the pins do not apply, with a one-line reason
        monkeypatch.setattr(kernel_pins, "_c_compiler", lambda: None)
        monkeypatch.setenv("EMERGENCE_LENS_CACHE", str(tmp_path / "empty"))
        kernel_pins.mkl_vendor_shim.cache_clear()
        kernel_pins.why_not.cache_clear()
        assert kernel_pins.why_not() == (
            "the CPU is AuthenticAMD, not Intel, so MKL takes another code path, and the shim that makes "
            "it take Intel's could not be made: no C compiler (cc, gcc or clang) to build it"
        )
        with pytest.warns(RuntimeWarning, match="not pinned to the AVX2 kernels: the CPU is AuthenticAMD"):
            kernel_pins._warn_once.cache_clear()
            assert kernel_pins.worker_env(1) == {}
        assert not list((tmp_path / "empty").rglob("*.so"))
    finally:
        kernel_pins.mkl_vendor_shim.cache_clear()
        kernel_pins.why_not.cache_clear()
        kernel_pins._warn_once.cache_clear()
