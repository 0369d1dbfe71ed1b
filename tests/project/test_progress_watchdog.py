"""The long fixtures' guard against hangs (tests/progress_watchdog.py, issue 71): a stalled fake
trainer is failed, a slow one that keeps writing checkpoints is not, and pytest-timeout's limit,
as pyproject.toml configures it, leaves fixture work alone."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
import tomllib
from pathlib import Path

import pytest

from progress_watchdog import WATCHDOG_SIGNAL, cpu_probe, folder_probe, progress_watchdog

REPO = Path(__file__).resolve().parents[2]
#: The fake trainers' time constants (seconds): small, but a slow trainer's gap between
#: checkpoints stays well inside the stall limit even when this machine is loaded.
STALL, POLL, CHECKPOINT_EVERY, CHECKPOINTS = 1.5, 0.05, 0.1, 40


def fake_trainer(folder: Path, checkpoints: int, stall_after: int | None = None, never: threading.Event | None = None):
    """Write ``checkpoints`` checkpoint folders, one every :data:`CHECKPOINT_EVERY` s; with
    ``stall_after``, stop writing after that many and wait on ``never`` (a hang: a lock never
    released) for at most 60 s. Returns the checkpoints written."""
    written = 0
    for step in range(checkpoints):
        if stall_after is not None and step == stall_after:
            assert never is not None
            never.wait(60)
        (folder / f"step{step}").mkdir()
        (folder / f"step{step}" / "model.safetensors").write_bytes(b"w")
        written += 1
        time.sleep(CHECKPOINT_EVERY)
    return written


def test_a_stalled_trainer_is_failed(tmp_path):
    never = threading.Event()
    caught = pytest.raises(pytest.fail.Exception, match=r"fake trainer: no progress for \d+ s \(watchdog limit 1.5 s")
    with caught, progress_watchdog(folder_probe(tmp_path), STALL, "fake trainer", poll_seconds=POLL):
        fake_trainer(tmp_path, CHECKPOINTS, stall_after=3, never=never)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step0", "step1", "step2"]  # stopped in the hang


def test_a_slow_trainer_that_keeps_moving_is_not_failed(tmp_path):
    started = time.monotonic()
    with progress_watchdog(folder_probe(tmp_path), STALL, "fake trainer", poll_seconds=POLL):
        written = fake_trainer(tmp_path, CHECKPOINTS)
    assert written == CHECKPOINTS
    # it ran for longer than the stall limit several times over (40 x 0.1 s = 4 s > 1.5 s): a
    # wall-clock limit of STALL would have failed it
    assert time.monotonic() - started > 2 * STALL


def test_the_signal_handler_is_put_back(tmp_path):
    before = signal.getsignal(WATCHDOG_SIGNAL)
    with progress_watchdog(folder_probe(tmp_path), STALL, "fake trainer", poll_seconds=POLL):
        assert signal.getsignal(WATCHDOG_SIGNAL) is not before
    assert signal.getsignal(WATCHDOG_SIGNAL) is before


def test_probes_move_with_files_and_cpu(tmp_path):
    probe = folder_probe(tmp_path)
    empty = probe()
    (tmp_path / "step0").mkdir()
    assert probe() != empty
    (tmp_path / "step0" / "loss.csv").write_text("step,loss\n")
    assert probe()[0] == 2
    spent = cpu_probe()
    deadline = time.process_time() + 1.2
    while time.process_time() < deadline:  # 1.2 s of CPU: the whole-second count moves
        pass
    assert cpu_probe() >= spent + 1


@pytest.mark.parametrize("where, passes", [("fixture", True), ("test", False)])
def test_pytest_timeout_as_configured_counts_the_test_function_only(tmp_path, where, passes):
    """pyproject.toml's ``timeout_func_only``: a fixture that works for 3 s under ``--timeout=1``
    passes; a test function that does the same is still stopped."""
    ini = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    (tmp_path / "pytest.ini").write_text(f"[pytest]\ntimeout_func_only = {str(ini['timeout_func_only']).lower()}\n")
    fixture_sleep, test_sleep = (3, 0) if where == "fixture" else (0, 3)
    (tmp_path / "test_slow.py").write_text(
        "import time, pytest\n"
        f"@pytest.fixture\ndef work():\n    time.sleep({fixture_sleep})\n"
        f"def test_it(work):\n    time.sleep({test_sleep})\n"
    )
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:xdist",
            "--timeout=1",
            "test_slow.py",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert (done.returncode == 0) is passes, done.stdout + done.stderr
    if not passes:
        assert "Timeout (>1.0s) from pytest-timeout" in done.stdout
