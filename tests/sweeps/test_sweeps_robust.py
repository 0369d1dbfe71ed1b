"""The sweep's store takes what runners return, and a killed worker is one failed run (issue 68,
items 3 and 4): a column of two types is kept as text with one warning naming the runs of each
type, a resume after any failure writes results.parquet, one-element tensors become numbers and
larger ones fail their run in one line; a runner that SIGKILLs its worker fails that run alone,
the runs beside it are re-queued, and a run that killed its worker twice is skipped."""

from __future__ import annotations

import os
import signal
import warnings

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import torch

from sweeps import run_sweep
from sweeps.store import ResultsStore


def mixed_runner(config: dict) -> tuple[dict, pd.DataFrame | None]:
    """``E`` is the text "never" for s = 1 and a number of steps otherwise; ``t`` a 1-element
    tensor, ``a`` a 1-element array, ``z`` a 0-d tensor."""
    s = config["s"]
    summary = {
        "E": "never" if s == 1 else 1200 * s,
        "t": torch.tensor([0.5 * s]),
        "a": np.array([s], dtype=np.int64),
        "z": torch.tensor(2.0),
    }
    if s == 4:
        summary["big"] = torch.zeros(3)
    return summary, None


def run_ids_by_s(results: pd.DataFrame) -> dict[int, str]:
    return dict(zip(results["s"], results["run_id"]))


def test_a_column_of_two_types_is_kept_as_text_with_one_warning(tmp_path):
    spec = {"grid": {"s": [1, 2, 3, 4]}}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        outcome = run_sweep(spec, tmp_path, runner=mixed_runner, progress=False)
    rows = pd.read_parquet(tmp_path / "results.parquet")  # written: the merge did not stop
    ids = run_ids_by_s(rows)
    assert rows.set_index("s")["status"].to_dict() == {1: "ok", 2: "ok", 3: "ok", 4: "failed"}
    column = rows.set_index("s")["E"]
    assert column[[1, 2, 3]].tolist() == ["never", "2400", "3600"] and pd.isna(column[4])
    mixed = [str(w.message) for w in caught if "results column 'E'" in str(w.message)]
    numbers = ", ".join(sorted([ids[2], ids[3]]))
    expected = (
        f"results column 'E' holds values of two types (int64: runs {numbers}; string: runs {ids[1]}); kept as text"
    )
    assert mixed == [expected]
    # One-element tensors and arrays are numbers; a 0-d tensor too.
    ok = rows[rows["status"] == "ok"].set_index("s")
    assert ok["t"].to_dict() == {1: 0.5, 2: 1.0, 3: 1.5} and ok["t"].dtype == np.float64
    assert ok["a"].to_dict() == {1: 1, 2: 2, 3: 3} and ok["z"].tolist() == [2.0, 2.0, 2.0]
    # A larger tensor fails its own run, in one line naming the key.
    error = rows.set_index("s")["error"][4]
    assert error == "ValueError: summary key 'big' is a tensor of 3 elements; a results row takes one number per key"
    assert outcome.n_failed == 1


def test_a_resume_after_a_failed_merge_writes_the_results(tmp_path):
    """Rows of two types already on disk (as a sweep before this fix left them): the resume
    merges them, and the warning says so once."""
    store = ResultsStore(tmp_path)
    store.write_run({"run_id": "a", "status": "ok", "E": "never"})
    store.write_run({"run_id": "b", "status": "ok", "E": 1200})
    with pytest.warns(RuntimeWarning, match=r"results column 'E' holds values of two types \(int64: runs b; string"):
        assert store.consolidate() == store.results_path
    table = pq.read_table(store.results_path)
    assert table.column("E").to_pylist() == ["never", "1200"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # said once per store
        assert store.results()["E"].tolist() == ["never", "1200"]


# ----------------------------------------------------------------------------- item 4


def killing_runner(config: dict) -> tuple[dict, None]:
    """s = 2 kills its own worker (as the kernel's out-of-memory killer would); the others
    sleep a little so that they are in flight beside it."""
    import time

    if config["s"] == 2:
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(0.5)
    return {"value": config["s"] * 10}, None


def test_a_killed_worker_is_one_failed_run(tmp_path):
    spec = {"grid": {"s": [1, 2, 3, 4, 5]}}
    outcome = run_sweep(spec, tmp_path, runner=killing_runner, jobs=2, progress=False)
    rows = pd.read_parquet(tmp_path / "results.parquet").set_index("s")
    assert rows["status"].to_dict() == {1: "ok", 2: "failed", 3: "ok", 4: "ok", 5: "ok"}
    assert rows["value"].dropna().to_dict() == {1: 10, 3: 30, 4: 40, 5: 50}
    assert rows["error"][2] == "worker killed by signal 9: out of memory?"
    assert (outcome.n_ran, outcome.n_failed) == (5, 1)
    store = ResultsStore(tmp_path)
    assert "worker killed by signal 9" in store.log_path(rows["run_id"][2]).read_text()
    # Retried, it kills its worker again: recorded failed once more; a third try skips it.
    again = run_sweep(spec, tmp_path, runner=killing_runner, jobs=2, progress=False, retry_failed=True)
    assert (again.n_ran, again.n_failed) == (1, 1)
    with pytest.warns(RuntimeWarning, match=r"killed its worker twice \(worker killed by signal 9: out of memory\?\)"):
        third = run_sweep(spec, tmp_path, runner=killing_runner, jobs=2, progress=False, retry_failed=True)
    assert (third.n_ran, third.n_failed) == (0, 1)


#: One sweep of :func:`killing_runner` in this process (``jobs=1``), as a command of its own: the
#: run s = 2 kills the whole process.
IN_PROCESS = (
    "import sys; sys.path.insert(0, {tests!r}); "
    "from test_sweeps_robust import killing_runner; from sweeps import run_sweep; "
    "run_sweep({{'grid': {{'s': [1, 2, 3]}}}}, {out!r}, runner=killing_runner, jobs=1, progress=False)"
)


@pytest.mark.slow  # three fresh interpreters, two of them killed
def test_a_run_that_kills_the_sweeps_own_process_twice_is_skipped(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    command = [sys.executable, "-c", IN_PROCESS.format(tests=str(Path(__file__).parent), out=str(tmp_path))]
    for _ in (1, 2):  # the process dies each time, at s = 2
        ended = subprocess.run(command, capture_output=True, text=True, timeout=600)
        assert ended.returncode == -signal.SIGKILL, ended.stderr
    ended = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert ended.returncode == 0, ended.stderr
    assert "skipped: the sweep's process died 2 times while this run ran" in ended.stderr
    rows = pd.read_parquet(tmp_path / "results.parquet").set_index("s")
    assert rows["status"].to_dict() == {1: "ok", 2: "failed", 3: "ok"}
    assert (
        rows["error"][2] == "the sweep's process died 2 times while this run ran (killed by a signal: out of memory?)"
    )
    assert rows["worker_kills"][2] == 2 and rows["value"][3] == 30


def test_a_ray_worker_crash_points_to_the_sweeps_logs():
    from sweeps.executors import _crashed_record
    from sweeps.runners import RunTask

    class WorkerCrashedError(Exception):
        pass

    error = WorkerCrashedError(
        "The worker died unexpectedly while executing this task. Check python-core-worker-*.log files for more "
        "information.\nmore text"
    )
    record = _crashed_record(RunTask("r1", {}, "m:f"), error)
    assert record.status == "failed"
    assert (
        record.error
        == "worker killed (WorkerCrashedError: The worker died unexpectedly while executing this task): out of memory?"
    )
    assert "python-core-worker" not in record.error and "python-core-worker" in record.log
