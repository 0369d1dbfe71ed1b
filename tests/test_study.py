"""The main job as resumable (source, task) units (interp.study): a study killed with SIGKILL after
its first unit and started again writes the tables of an uninterrupted one; joblib and Ray give
the same tables as the local executor; --dry-run lists the units and which are done."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from interp.study import plan_units, run_study, study_status
from interp.tasks import RepetitionTask
from tests.conftest import save_tiny_neox

ROOT = Path(__file__).resolve().parents[1]
TABLES = ("emergence", "points", "heads", "topk", "checkpoints", "head_scores", "components")
TASK = RepetitionTask(n_prompts=8, length=6, seed=0)
OPTIONS = dict(scan=True, threshold=0.5)


@pytest.fixture(scope="module")
def four_sources(tmp_path_factory, byte_tokenizer_dir):
    base = tmp_path_factory.mktemp("study")
    names = []
    for i in range(4):
        root = base / f"run{i}"
        shutil.copytree(byte_tokenizer_dir, root / "tokenizer")
        for step in range(3):
            save_tiny_neox(root / f"step{step}", seed=10 * i + step)
        names.append(str(root))
    return names


def tables(folder: Path) -> dict[str, pd.DataFrame]:
    return {name: pd.read_parquet(folder / f"{name}.parquet") for name in TABLES}


def assert_same_tables(a: Path, b: Path) -> None:
    left, right = tables(a), tables(b)
    for name in TABLES:
        pd.testing.assert_frame_equal(left[name], right[name], check_exact=True, obj=name)


@pytest.fixture(scope="module")
def reference(four_sources, tmp_path_factory):
    out = tmp_path_factory.mktemp("reference")
    report = run_study(four_sources, out, tasks=[TASK], progress=False, **OPTIONS)
    assert len(report.runs) == 4 and len(tables(out)["emergence"]) == 4 * 3  # every step of every run
    return out


def _cli(args: list[str]) -> list[str]:
    return [sys.executable, "-m", "emergence_lens.cli", *args]


@pytest.mark.slow
def test_killed_study_resumes_to_identical_tables(four_sources, reference, tmp_path):
    out = tmp_path / "study"
    args = ["run", *four_sources, "--out", str(out), "--n-prompts", "8", "--length", "6", "--scan"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(_cli(args), cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    rows = out / "units" / "runs"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not (
        rows.is_dir() and any(p.suffix == ".parquet" and not p.name.startswith(".") for p in rows.iterdir())
    ):
        assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    done_before = study_status(plan_units(four_sources, [TASK]), out)
    assert 1 <= done_before["done"].sum() < 4, "the kill must land after the first unit and before the last"
    assert not (out / "points.parquet").exists()

    dry = subprocess.run(_cli([*args, "--dry-run"]), cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    assert f"{int(done_before['done'].sum())} of 4 units done" in dry.stdout
    assert dry.stdout.count("todo ") == 4 - int(done_before["done"].sum())

    subprocess.run(_cli(args), cwd=ROOT, env=env, capture_output=True, check=True)
    logs = {p.stem for p in (out / "units" / "logs").iterdir()}
    assert len(logs) == 4
    assert_same_tables(out, reference)
    again = subprocess.run(_cli([*args, "--dry-run"]), cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    assert "4 of 4 units done" in again.stdout


@pytest.mark.slow
def test_joblib_and_ray_give_the_local_tables(four_sources, reference, tmp_path):
    ray = pytest.importorskip("ray")
    run_study(four_sources, tmp_path / "joblib", tasks=[TASK], executor="joblib", jobs=2, progress=False, **OPTIONS)
    assert_same_tables(tmp_path / "joblib", reference)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        run_study(four_sources, tmp_path / "ray", tasks=[TASK], executor="ray", jobs=2, progress=False, **OPTIONS)
    finally:
        ray.shutdown()
    assert_same_tables(tmp_path / "ray", reference)


def test_bad_study_options_are_refused_before_anything_runs(four_sources, tmp_path):
    for kwargs, needle in (
        ({"executor": "slurm"}, "valid executors: local, joblib, ray"),
        ({"jobs": 0}, "jobs=0"),
        ({"dtype": "float8"}, "valid dtypes"),
    ):
        with pytest.raises(ValueError, match=needle):
            run_study(four_sources, tmp_path / "bad", tasks=[TASK], progress=False, **kwargs)
    assert not (tmp_path / "bad").exists()
