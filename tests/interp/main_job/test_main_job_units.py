"""The main job as resumable (source, task) units (interp.main_job.runner.run_study): a study killed with
SIGKILL after its first unit and started again writes the tables of an uninterrupted one; joblib
and Ray give the report of the local executor, equal by value; --dry-run lists the units and which
are done."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from interp.core.settings import StudyConfig
from interp.main_job.runner import run_study
from interp.main_job.units import plan_units, study_status
from interp.tasks import RepetitionTask
from tests.conftest import save_tiny_neox

ROOT = Path(__file__).resolve().parents[3]
TABLES = ("emergence", "points", "heads", "topk", "checkpoints", "head_scores", "components")
TASK = RepetitionTask(n_prompts=8, length=6, seed=0)
CONFIG = StudyConfig(scan=True, threshold=0.5)


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
    report = run_study(four_sources, [TASK], CONFIG, out_dir=out, progress=False)
    assert len(report.runs) == 4 and len(tables(out)["emergence"]) == 4 * 3  # every step of every run
    assert report.provenance["settings"]["config"] == CONFIG.as_dict()  # the settings recorded whole
    return out, report


def _cli(args: list[str]) -> list[str]:
    return [sys.executable, "-m", "emergence_lens.cli", *args]


#: The command line with ``ResultsStore.write_run`` wrapped to SIGKILL its own process right after
#: the first unit's "done" row is written: the kill lands after the first unit and before the
#: second, whatever the machine's speed (no polling, no race with a fast machine).
KILL_AFTER_FIRST_UNIT = (
    "import os, signal, sys\n"
    "from sweeps.store import ResultsStore\n"
    "write = ResultsStore.write_run\n"
    "def write_then_die(self, *args, **kwargs):\n"
    "    path = write(self, *args, **kwargs)\n"
    "    os.kill(os.getpid(), signal.SIGKILL)\n"
    "ResultsStore.write_run = write_then_die\n"
    "from emergence_lens.cli import main\n"
    "sys.argv = ['emergence', *sys.argv[1:]]\n"
    "main()\n"
)


@pytest.mark.slow
def test_killed_study_resumes_to_identical_tables(four_sources, reference, tmp_path):
    reference, _ = reference
    out = tmp_path / "study"
    args = ["run", *four_sources, "--out", str(out), "--n-prompts", "8", "--length", "6", "--scan"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    killed = subprocess.run(
        [sys.executable, "-c", KILL_AFTER_FIRST_UNIT, *args], cwd=ROOT, env=env, capture_output=True
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr.decode()[-2000:]
    done_before = study_status(plan_units(four_sources, [TASK]), out)
    assert done_before["done"].sum() == 1  # the kill landed after the first unit, before the second
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
def test_joblib_gives_the_local_report_by_value(four_sources, reference, tmp_path):
    """The same tiny study through the local executor (plain calls in this process) and joblib
    (two worker processes): the reports' runs are equal field by field (tensors, tables, points),
    and so are the saved tables."""
    folder, local = reference
    report = run_study(
        four_sources, [TASK], CONFIG, executor="joblib", jobs=2, out_dir=tmp_path / "joblib", progress=False
    )
    assert [r.model_id for r in report.runs] == [r.model_id for r in local.runs]
    assert report.runs == local.runs and len(report.emergence) == 4 * 3  # every step of every run
    assert report.points.equals(local.points) and report.heads.equals(local.heads)
    assert_same_tables(tmp_path / "joblib", folder)
    logs = sorted((tmp_path / "joblib" / "units" / "logs").iterdir())
    assert len(logs) == 4 and all("ok after" in p.read_text() for p in logs)


def test_a_study_in_memory_equals_the_saved_one(four_sources, reference):
    """Without ``out_dir`` the units go through a temporary store: the same runs, nothing saved."""
    _, local = reference
    report = run_study(four_sources[:2], [TASK], CONFIG, progress=False)
    assert report.runs == local.runs[:2]


@pytest.mark.slow
def test_ray_gives_the_local_tables(four_sources, reference, tmp_path):
    ray = pytest.importorskip("ray")
    folder, local = reference
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        report = run_study(
            four_sources, [TASK], CONFIG, executor="ray", jobs=2, out_dir=tmp_path / "ray", progress=False
        )
    finally:
        ray.shutdown()
    assert report.runs == local.runs
    assert_same_tables(tmp_path / "ray", folder)


def test_bad_study_options_are_refused_before_anything_runs(four_sources, tmp_path):
    for kwargs, needle in (
        ({"executor": "slurm"}, "valid executors: local, joblib, ray"),
        ({"jobs": 0}, "jobs=0"),
        ({"address": "auto"}, "needs executor 'ray'"),
    ):
        with pytest.raises(ValueError, match=needle):
            run_study(four_sources, [TASK], CONFIG, out_dir=tmp_path / "bad", progress=False, **kwargs)
    assert not (tmp_path / "bad").exists()


def test_bad_settings_are_refused_in_one_line_naming_the_valid_ones():
    for kwargs, needle in (
        ({"dtype": "float8"}, "dtype='float8'; valid dtypes: float32, bfloat16, float16"),
        ({"method": "slow"}, "method='slow'; valid: fast, reference, attribution"),
        ({"metric": "pp"}, "metric='pp'; valid: p, "),
        ({"threshold": 0.0}, r"threshold=0.0 must be in \(0, 1\]"),
        ({"hold": -1}, "hold=-1"),
        ({"device": "gpu"}, "device 'gpu' is not valid"),
        ({"ks": [0]}, "ks item=0"),
        ({"scan": "yes"}, "scan='yes'; valid: True, False"),
    ):
        with pytest.raises(ValueError, match=needle) as caught:
            StudyConfig(**kwargs)
        assert "\n" not in str(caught.value)
    config = StudyConfig(metric="logprob", ks=[1, 2], dtype="bfloat16", swap_weights=False)
    assert config.ks == (1, 2) and StudyConfig.from_dict(config.as_dict()) == config
    with pytest.raises(ValueError, match="fields \\['metrc'\\] are unknown"):
        StudyConfig.from_dict({"metrc": "p"})
    with pytest.raises(ValueError, match=r"config=.*valid: a StudyConfig"):
        run_study(["x/y"], [TASK], {"scan": True})


def test_dtype_and_weight_swap_reach_every_road(four_sources, monkeypatch):
    """The config's dtype and weight swap are set on the source whichever executor runs the unit
    (joblib with one job runs its units in this process, through ``analyse_unit``)."""
    from interp.main_job import runner

    seen = []
    analyse = runner.analyse_run

    def spy(source, task, config, progress=None):
        out = analyse(source, task, config, progress=progress)
        seen.append((str(source.dtype), source.swap_weights))
        return out

    monkeypatch.setattr(runner, "analyse_run", spy)
    config = StudyConfig(dtype="bfloat16", swap_weights=False, decompose=False, scores=False, scrub=False)
    for executor in ("local", "joblib"):
        report = run_study(four_sources[:1], [TASK], config, executor=executor, progress=False)
        assert report.provenance["settings"]["config"]["dtype"] == "bfloat16"
    assert seen == [("torch.bfloat16", False)] * 2
