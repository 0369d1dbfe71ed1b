"""Sweep layer (package ``sweeps``): spec parsing, results store, executors (in-process, joblib,
Ray), SIGKILL + resume, summaries and plots. Real sweeps go through synthetic.training.train (tiny: S=8, steps<=50)."""

from __future__ import annotations

import json
import math
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import torch
from typer.testing import CliRunner

from emergence_lens.cli import app as emergence_app
from sweeps import (
    ResultsStore,
    SweepSpec,
    load_metrics,
    load_results,
    plan_runs,
    resolve_dataclass_config,
    run_id_of,
    run_sweep,
)
from synthetic.sweep_plots import (
    plot_final_loss_vs,
    plot_loss_curves,
    plot_plateau_vs_S,
    plot_success_vs,
    success_table,
)
from synthetic.training import TrainConfig, train

REPO = Path(__file__).resolve().parents[2]
TRAIN = "synthetic.sweeps:train_runner"  # the runner `emergence sweep` uses when a spec names none

# The documented example spec, shortened to test size (steps <= 50, S <= 8).
EXAMPLE_YAML = """\
task: linear-map
steps: 40
eval_every: 10
tokens_per_step: 512
eval_tokens: 1024
grid:
  S: [8]
  s: [1, 2]
seeds: [0, 1]
runner: synthetic.sweeps:train_runner
"""
EXAMPLE_TOML = """\
task = "linear-map"
steps = 40
eval_every = 10
tokens_per_step = 512
eval_tokens = 1024
seeds = [0, 1]
runner = "synthetic.sweeps:train_runner"
[grid]
S = [8]
s = [1, 2]
"""


@pytest.fixture(scope="module")
def spec_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("spec") / "example.yaml"
    path.write_text(EXAMPLE_YAML)
    return path


@pytest.fixture(scope="module")
def reference(spec_file, tmp_path_factory):
    """The example sweep run uninterrupted on 2 joblib worker processes."""
    out = tmp_path_factory.mktemp("reference")
    outcome = run_sweep(spec_file, out, jobs=2, executor="joblib", progress=False)
    return outcome


# ---------------------------------------------------------------------------------------------
# Spec
# ---------------------------------------------------------------------------------------------
def test_example_spec_expands_to_grid_times_seeds(spec_file, tmp_path):
    tasks = plan_runs(spec_file)
    fields = set(TrainConfig.__dataclass_fields__)
    assert len(tasks) == 4
    assert [(t.config["S"], t.config["s"], t.config["seed"]) for t in tasks] == [
        (8, 1, 0),
        (8, 1, 1),
        (8, 2, 0),
        (8, 2, 1),
    ]
    for t in tasks:
        assert set(t.config) == fields  # fully resolved: every TrainConfig field
        assert t.config["task"] == "linear-map" and t.config["steps"] == 40
        assert t.run_id == run_id_of(t.config, "synthetic.sweeps:train_runner")
        assert len(t.run_id) == 16 and int(t.run_id, 16) >= 0
    assert len({t.run_id for t in tasks}) == 4
    # TOML, the Python mapping and the Python object give the same runs.
    toml = tmp_path / "example.toml"
    toml.write_text(EXAMPLE_TOML)
    ids = [t.run_id for t in tasks]
    assert [t.run_id for t in plan_runs(toml)] == ids
    as_dict = {
        "task": "linear-map",
        "steps": 40,
        "eval_every": 10,
        "tokens_per_step": 512,
        "eval_tokens": 1024,
        "grid": {"S": [8], "s": [1, 2]},
        "seeds": [0, 1],
    }
    assert [t.run_id for t in plan_runs(as_dict, TRAIN)] == ids
    spec = SweepSpec(
        fixed={"task": "linear-map", "steps": 40, "eval_every": 10, "tokens_per_step": 512, "eval_tokens": 1024},
        grid={"S": [8], "s": [1, 2]},
        seeds=[0, 1],
    )
    assert [t.run_id for t in plan_runs(spec, TRAIN)] == ids


def test_points_union_dedup_and_type_coercion():
    spec = {"steps": 30.0, "lr": "1e-3", "grid": {"s": [1, 2]}, "seeds": 2, "points": [{"s": 1}, {"S": 4, "s": 3}]}
    tasks = plan_runs(spec, TRAIN)
    # grid {s=1, s=2} ∪ points {s=1 (duplicate), (S=4, s=3)} = 3 points × 2 seeds.
    assert [(t.config["S"], t.config["s"], t.config["seed"]) for t in tasks] == [
        (16, 1, 0),
        (16, 1, 1),
        (16, 2, 0),
        (16, 2, 1),
        (4, 3, 0),
        (4, 3, 1),
    ]
    assert tasks[0].config["steps"] == 30 and isinstance(tasks[0].config["steps"], int)
    assert tasks[0].config["lr"] == 0.001 and isinstance(tasks[0].config["lr"], float)


def test_spec_errors_are_one_line():
    with pytest.raises(ValueError, match=r"unknown config field 'stepz'; valid: .*steps") as err:
        plan_runs({"stepz": 10}, TRAIN)
    assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match="seed"):
        plan_runs({"seed": 3, "seeds": [0, 1]}, TRAIN)
    with pytest.raises(ValueError, match=r"grid.s must be a non-empty list"):
        plan_runs({"grid": {"s": 3}}, TRAIN)
    with pytest.raises(ValueError, match=r"steps='many' must be an integer"):
        plan_runs({"steps": "many"}, TRAIN)
    with pytest.raises(ValueError, match=r"runner 'nowhere.mod:f' cannot be imported"):
        plan_runs({"runner": "nowhere.mod:f"})
    with pytest.raises(ValueError, match=r"names no runner"):
        plan_runs({"steps": 1})
    with pytest.raises(ValueError, match=r"executor='dask'; valid executors: joblib, ray"):
        run_sweep({"steps": 1}, "/tmp/unused-sweep-dir", executor="dask", runner=TRAIN)


def test_resolve_dataclass_config_for_other_jobs():
    """The hook for other jobs (e.g. checkpoint analyses): any dataclass defines the fields."""
    from dataclasses import dataclass

    @dataclass
    class AnalysisConfig:
        model: str
        seed: int = 0
        threshold: float | None = None

    assert resolve_dataclass_config(AnalysisConfig, {"model": "pythia-14m", "threshold": 1}) == {
        "model": "pythia-14m",
        "seed": 0,
        "threshold": 1.0,
    }
    with pytest.raises(ValueError, match="'model' of AnalysisConfig has no default"):
        resolve_dataclass_config(AnalysisConfig, {})


# ---------------------------------------------------------------------------------------------
# Store and failures, with an in-process toy runner (exact expected values)
# ---------------------------------------------------------------------------------------------
def toy_runner(config: dict) -> tuple[dict, pd.DataFrame]:
    if config["s"] == 3:
        raise RuntimeError(f"boom at s={config['s']}")
    print(f"toy run s={config['s']} seed={config['seed']}")
    steps = np.arange(0, 31, 10)
    loss = np.log(2) * np.exp(-steps / (10.0 * config["s"])) + 0.001 * config["seed"]
    return {"final_loss": float(loss[-1]), "emerged": bool(loss[-1] < 0.1), "n_params": 7}, pd.DataFrame(
        {"step": steps, "loss": loss}
    )


def test_failing_run_is_recorded_and_rerun_runs_only_missing(tmp_path, capsys):
    spec = {"grid": {"s": [1, 2, 3]}, "seeds": [0, 1]}
    first = run_sweep(spec, tmp_path, runner=toy_runner, progress=False)
    assert (first.n_planned, first.n_ran, first.n_skipped, first.n_failed) == (6, 6, 0, 2)
    rows = pd.read_parquet(tmp_path / "results.parquet")
    assert len(rows) == 6
    failed = rows[rows["status"] == "failed"]
    assert sorted(failed["s"]) == [3, 3]
    assert set(failed["error"]) == {"RuntimeError: boom at s=3"}
    assert failed["final_loss"].isna().all()
    ok = rows[rows["status"] == "ok"].set_index(["s", "seed"])
    for (s, seed), row in ok.iterrows():
        assert row["final_loss"] == pytest.approx(math.log(2) * math.exp(-3 / s) + 0.001 * seed, abs=1e-12)
    assert set(rows["emerged"].dropna()) == {True, False}  # s=1 emerged, s=2 did not
    # Per-run logs hold the run's prints and the failure's traceback.
    store = ResultsStore(tmp_path)
    for _, row in rows.iterrows():
        log = store.log_path(row["run_id"]).read_text()
        assert ("Traceback" in log and "boom at s=3" in log) if row["s"] == 3 else f"toy run s={row['s']}" in log
    metrics = load_metrics(tmp_path)
    assert len(metrics) == 4 * 4 and set(metrics["run_id"]) == set(ok["run_id"])
    # Re-running runs nothing; --retry-failed runs exactly the failed ones again.
    again = run_sweep(spec, tmp_path, runner=toy_runner, progress=False)
    assert (again.n_ran, again.n_skipped) == (0, 6)
    retry = run_sweep(spec, tmp_path, runner=toy_runner, progress=False, retry_failed=True)
    assert (retry.n_ran, retry.n_failed) == (2, 2)
    # One sweep per folder: another spec (a grid extended) is refused naming both specs and
    # leaves the folder as it was; --force starts over.
    from sweeps.driver import spec_digest

    extended_spec = {"grid": {"s": [1, 2, 3, 4]}, "seeds": [0, 1], "name": "toy"}
    held = (tmp_path / "spec.yaml").read_text()
    with pytest.raises(ValueError) as refused:
        run_sweep(extended_spec, tmp_path, runner=toy_runner, progress=False)
    message = str(refused.value)
    old_digest = spec_digest(SweepSpec.from_dict(spec))[:12]
    new_digest = spec_digest(SweepSpec.from_dict(extended_spec))[:12]
    assert old_digest != new_digest and "\n" not in message
    assert f"(digest {old_digest})" in message and f"spec 'toy' (digest {new_digest})" in message, message
    assert (tmp_path / "spec.yaml").read_text() == held and len(pd.read_parquet(tmp_path / "results.parquet")) == 6
    extended = run_sweep(extended_spec, tmp_path, runner=toy_runner, progress=True, force=True)
    assert (extended.n_ran, extended.n_skipped) == (8, 0)
    assert len(pd.read_parquet(tmp_path / "results.parquet")) == 8
    # progress as the house's plain lines where standard error is not a terminal (capsys): no
    # cursor codes, the first line at once, the last with the rate and the failures
    lines = capsys.readouterr().err
    assert "\r" not in lines and "\x1b" not in lines
    bar = [line for line in lines.splitlines() if line.startswith("toy: ")]
    assert bar[0] == "toy: 0/8 runs (0 %), 00:00 elapsed"
    assert bar[-1].startswith("toy: 8/8 runs (100 %), ") and bar[-1].endswith(" left; 2 failed"), bar
    # A resumed sweep says what it found done; those runs count in the position, not in the rate.
    retried = run_sweep(extended_spec, tmp_path, runner=toy_runner, progress=True, retry_failed=True)
    assert (retried.n_ran, retried.n_skipped) == (2, 6)
    bar = [line for line in capsys.readouterr().err.splitlines() if line.startswith("toy: ")]
    assert bar[:2] == ["toy: 6/8 runs (75 %), 00:00 elapsed", f"toy: continuing: 6 of 8 runs already in {tmp_path}"]
    assert bar[-1].startswith("toy: 8/8 runs (100 %), ") and bar[-1].endswith("; 2 failed"), bar
    # The same spec (renamed) resumes.
    assert run_sweep(dict(extended_spec, name="again"), tmp_path, runner=toy_runner, progress=True).n_ran == 0
    assert f"again: all 8 runs already in {tmp_path}; nothing to run" in capsys.readouterr().err.splitlines()


def test_finished_runs_copied_into_a_fresh_store_are_not_run_again(tmp_path):
    """The kept-runs path of the paper-scale entries: a sweep's finished runs, copied into a
    fresh store (another clone's disk), are skipped there; failed runs are not copied."""
    spec = {"grid": {"s": [1, 2, 3]}, "seeds": [0, 1]}
    first = run_sweep(spec, tmp_path / "a", runner=toy_runner, progress=False)
    assert first.n_failed == 2
    kept, fresh = ResultsStore(tmp_path / "kept"), ResultsStore(tmp_path / "fresh")
    assert fresh.copy_finished_from(tmp_path / "missing") == []
    copied = kept.copy_finished_from(tmp_path / "a")
    ok = first.results[first.results["status"] == "ok"]
    assert copied == sorted(ok["run_id"]) and len(copied) == 4
    assert kept.copy_finished_from(tmp_path / "a") == []  # nothing new; nothing replaced
    assert fresh.copy_finished_from(kept) == copied
    for run_id in copied:  # byte-for-byte: row, metrics and log
        for path in (ResultsStore.row_path, ResultsStore.metrics_path, ResultsStore.log_path):
            assert path(fresh, run_id).read_bytes() == path(ResultsStore(tmp_path / "a"), run_id).read_bytes()
    resumed = run_sweep(spec, fresh.root, runner=toy_runner, progress=False)
    assert (resumed.n_ran, resumed.n_skipped, resumed.n_failed) == (2, 4, 2)  # only the two s = 3 runs
    pd.testing.assert_frame_equal(
        resumed.results[resumed.results["status"] == "ok"][["run_id", "final_loss"]].reset_index(drop=True),
        ok[["run_id", "final_loss"]].reset_index(drop=True),
    )
    assert kept.copy_finished_from(kept.root) == []


def test_cli_sweep_refuses_another_spec_in_one_line(tmp_path):
    first, second = tmp_path / "a.yaml", tmp_path / "b.yaml"
    first.write_text("runner: tests.sweeps.test_sweeps:toy_runner\ngrid:\n  s: [1]\nseeds: [0]\n")
    second.write_text("runner: tests.sweeps.test_sweeps:toy_runner\ngrid:\n  s: [1, 2]\nseeds: [0]\n")
    out = tmp_path / "sw"
    runner = CliRunner()
    assert runner.invoke(emergence_app, ["sweep", str(first), "--out", str(out), "--no-progress"]).exit_code == 0
    for args in ([], ["--dry-run"]):
        result = runner.invoke(emergence_app, ["sweep", str(second), "--out", str(out), "--no-progress", *args])
        lines = result.output.strip().splitlines()
        assert result.exit_code == 2 and len(lines) == 1, result.output
        assert "holds spec 'a'" in lines[0] and "this spec 'b'" in lines[0] and "--force" in lines[0]
    forced = runner.invoke(emergence_app, ["sweep", str(second), "--out", str(out), "--no-progress", "--force"])
    assert forced.exit_code == 0, forced.output
    assert "2 runs: 2 ran, 0 already done" in forced.output
    assert sorted(pd.read_parquet(out / "results.parquet")["s"]) == [1, 2]
    again = runner.invoke(emergence_app, ["sweep", str(second), "--out", str(out), "--no-progress"])
    assert "2 runs: 0 ran, 2 already done" in again.output


# ---------------------------------------------------------------------------------------------
# Real sweeps through synthetic.training.train
# ---------------------------------------------------------------------------------------------
def _final_losses(results: pd.DataFrame) -> dict[str, float]:
    return dict(zip(results["run_id"], results["final_loss"]))


def _metrics(sweep_dir: Path) -> pd.DataFrame:
    """Every per-step metric of a sweep except wall-clock time, in a canonical order."""
    metrics = load_metrics(sweep_dir).drop(columns=["elapsed_s"])
    return metrics.sort_values(["run_id", "step"], ignore_index=True)


@pytest.mark.slow
def test_real_sweep_on_two_joblib_workers(reference, spec_file):
    out = reference.out_dir
    assert (reference.n_planned, reference.n_ran, reference.n_failed) == (4, 4, 0)
    rows = pd.read_parquet(out / "results.parquet")
    assert len(rows) == 4 and set(rows["status"]) == {"ok"}
    assert sorted(zip(rows["s"], rows["seed"])) == [(1, 0), (1, 1), (2, 0), (2, 1)]
    for col in (
        "final_loss",
        "floor",
        "plateau_length",
        "steps_to_threshold",
        "emerged",
        "n_params",
        "wall_time_s",
        "versions",
        "git_commit",
        "config_json",
        "lr",
        "d_model",
    ):
        assert col in rows.columns, col
    # Linear-map floor for S=8: (S-1)/(2S-1) * ln 2 (Baherwani et al. 2026, "Linear map task").
    assert np.allclose(rows["floor"], 7 / 15 * math.log(2), atol=1e-6)
    assert (rows["final_loss"] > rows["floor"] - 1e-6).all() and (rows["final_loss"] < 1.0).all()
    assert '"torch": "2.' in rows["versions"].iloc[0]
    metrics = load_metrics(out)
    assert set(metrics["run_id"]) == set(rows["run_id"])
    # The sweep runs exactly what a direct train() call runs: bit-for-bit equal final loss.
    first = rows.sort_values(["s", "seed"]).iloc[0]
    config = json.loads(first["config_json"])
    torch.set_num_threads(1)
    direct = train(TrainConfig(**config), progress=False)
    assert direct.summary["final_loss"] == first["final_loss"]
    for run_id in rows["run_id"]:
        assert (out / "logs" / f"{run_id}.log").read_text().rstrip().splitlines()[-1].startswith("ok after")


@pytest.mark.slow
def test_sigkill_mid_sweep_then_resume_matches_uninterrupted(reference, spec_file, tmp_path):
    out = tmp_path / "killed"
    log = open(tmp_path / "sweep.out", "w")  # noqa: SIM115 (the child writes to it while this test runs)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "emergence_lens",
            "sweep",
            str(spec_file),
            "--out",
            str(out),
            "--jobs",
            "1",
            "--no-progress",
        ],
        cwd=REPO,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and proc.poll() is None:
            if len(ResultsStore(out).row_files()) >= 1:
                break
            time.sleep(0.02)
        os.killpg(proc.pid, signal.SIGKILL)  # the sweep and any child it has
    finally:
        proc.wait(timeout=60)
        log.close()
    assert proc.returncode == -signal.SIGKILL, (tmp_path / "sweep.out").read_text()
    n_before = len(ResultsStore(out).row_files())
    assert 1 <= n_before < 4, "the kill must land mid-sweep"
    for path in out.rglob("*.parquet"):  # every visible parquet file is whole
        if not path.name.startswith("."):
            pq.read_table(path)
    resumed = run_sweep(spec_file, out, jobs=1, progress=False)
    assert (resumed.n_skipped, resumed.n_ran, resumed.n_failed) == (n_before, 4 - n_before, 0)
    final = pd.read_parquet(out / "results.parquet")
    assert _final_losses(final) == _final_losses(reference.results)  # same ids, identical losses
    pd.testing.assert_frame_equal(_metrics(out), _metrics(reference.out_dir), check_exact=True)


@pytest.mark.slow
def test_ray_matches_joblib_bit_for_bit(reference, spec_file, tmp_path):
    pytest.importorskip("ray")
    outcome = run_sweep(spec_file, tmp_path, jobs=2, executor="ray", progress=False)
    assert (outcome.n_ran, outcome.n_failed) == (4, 0)
    assert _final_losses(outcome.results) == _final_losses(reference.results)
    pd.testing.assert_frame_equal(_metrics(tmp_path), _metrics(reference.out_dir), check_exact=True)
    # Ray workers may be remote: their logs come back with the result and the driver writes them.
    for run_id in outcome.results["run_id"]:
        assert "ok after" in (tmp_path / "logs" / f"{run_id}.log").read_text()


def test_cli_mounted_as_emergence_sweep(reference, spec_file):
    runner = CliRunner()
    result = runner.invoke(emergence_app, ["sweep", str(spec_file), "--out", str(reference.out_dir), "--dry-run"])
    assert result.exit_code == 0, result.output
    assert result.output.strip().splitlines()[-1] == "4 runs, 0 to run"
    result = runner.invoke(emergence_app, ["sweep", str(spec_file), "--out", str(reference.out_dir), "--no-progress"])
    assert result.exit_code == 0, result.output
    assert "4 runs: 0 ran, 4 already done, 0 failed" in result.output
    bad = spec_file.parent / "bad.yaml"
    bad.write_text("stepz: 3\n")
    result = runner.invoke(emergence_app, ["sweep", str(bad), "--out", str(reference.out_dir)])
    assert result.exit_code == 2 and "unknown config field 'stepz'" in result.output


def test_summaries_and_plots_from_store(reference):
    results = load_results(reference.out_dir)
    metrics = load_metrics(reference.out_dir)
    table = success_table(results, "s")
    assert list(table["s"]) == [1, 2] and list(table["n_runs"]) == [2, 2]
    for s, group in results.groupby("s"):
        row = table[table["s"] == s].iloc[0]
        assert row["final_loss_mean"] == pytest.approx(group["final_loss"].mean(), abs=1e-12)
        assert row["success_fraction"] == pytest.approx(group["emerged"].astype(bool).mean())
    fig = plot_final_loss_vs(results, "s")
    seeds_trace = fig.data[0]
    assert sorted(seeds_trace.y) == sorted(results["final_loss"])  # one dot per seed
    assert list(fig.data[1].y) == pytest.approx(list(table["final_loss_mean"]))
    assert len(plot_success_vs(results, "s", color="S").data) == 2
    plateau = plot_plateau_vs_S(results, color="s")
    assert sorted(plateau.data[0].y) == sorted(results.loc[results["s"] == 1, "plateau_length"].dropna())
    curves = plot_loss_curves(metrics, results, color="s")
    assert len(curves.data) == 4  # a band and a mean line per s
    merged = metrics.merge(results[["run_id", "s"]], on="run_id")
    by_step = merged[merged["s"] == 1].groupby("step")["loss"].mean()
    assert list(curves.data[1].y) == pytest.approx(list(by_step.values), abs=1e-12)


def test_local_ray_start_retries_a_startup_timeout():
    """Ray gives its raylet a fixed 30 s to start; on a loaded machine the start is retried."""
    from sweeps.executors import _start_local_ray

    class FakeRay:
        def __init__(self, failures: int) -> None:
            self.failures, self.inits, self.shutdowns = failures, [], 0

        def init(self, **kwargs) -> None:
            self.inits.append(kwargs)
            if len(self.inits) <= self.failures:
                raise Exception("The current node timed out during startup. This could happen ...")

        def shutdown(self) -> None:
            self.shutdowns += 1

    fake = FakeRay(failures=1)
    _start_local_ray(fake, 2)
    assert len(fake.inits) == 2 and fake.shutdowns == 1 and fake.inits[-1]["num_cpus"] == 2
    with pytest.raises(Exception, match="timed out during startup"):
        _start_local_ray(FakeRay(failures=3), 2)


@pytest.mark.slow
def test_ensemble_units_match_single_runs_in_format_and_values(reference, spec_file, tmp_path):
    # s and seed differ only in data/init: all 4 runs form one ensemble unit (one worker)
    from sweeps.execute import group_units
    from sweeps.runners import plan_runs

    units = group_units(plan_runs(spec_file), 8)
    assert [len(u) for u in units] == [4]
    assert [len(u) for u in group_units(plan_runs(spec_file), 3)] == [3, 1]
    out = tmp_path / "ensemble"
    outcome = run_sweep(spec_file, out, jobs=1, progress=False, ensemble=8)
    assert (outcome.n_ran, outcome.n_failed) == (4, 0)
    rows = outcome.results.set_index("run_id").sort_index()
    ref = reference.results.set_index("run_id").sort_index()
    assert list(rows.index) == list(ref.index) and list(rows.columns) == list(ref.columns)
    assert np.allclose(rows["final_loss"], ref["final_loss"], rtol=0, atol=1e-5)
    a, b = _metrics(out), _metrics(reference.out_dir)
    assert list(a.columns) == list(b.columns) and len(a) == len(b)
    assert np.allclose(a["loss"], b["loss"], atol=1e-5)
    for run_id in rows.index:
        log = (out / "logs" / f"{run_id}.log").read_text()
        assert "trained together" in log and run_id in log
        assert log.rstrip().splitlines()[-1].startswith("ok after")  # the last line of a single run's log too
    for store in (reference.out_dir, out):  # single runs and ensembles: a log line per evaluation, with its loss
        metrics = _metrics(store)
        for run_id, rows_of_run in metrics.groupby("run_id"):
            lines = [x for x in (store / "logs" / f"{run_id}.log").read_text().splitlines() if x.startswith("step ")]
            assert [int(x.split(":")[0].split()[1]) for x in lines] == rows_of_run["step"].tolist()
            for line, loss in zip(lines, rows_of_run["loss"], strict=True):
                assert f"{loss:.4f}" in line.split("loss ")[1], (store, run_id, line)
    # resumable: a second call finds every run in the store
    assert run_sweep(spec_file, out, jobs=1, progress=False, ensemble=8).n_ran == 0


class _PeekingRunner:
    """A runner whose group reads its members' logs half-way through (what ``tail -f`` sees)."""

    def __init__(self, log_paths: list[Path]) -> None:
        self.log_paths, self.seen_halfway = log_paths, []

    def __call__(self, config):
        return {"i": config["i"]}, pd.DataFrame({"step": [0]})

    def run_group(self, configs):
        print("step 100: loss 0.5000 0.6000 (3 s)", flush=True)
        self.seen_halfway = [p.read_text() for p in self.log_paths]
        return [({"i": c["i"]}, pd.DataFrame({"step": [0]})) for c in configs]


def test_a_groups_output_reaches_every_members_log_while_it_runs(tmp_path):
    from sweeps.execute import execute_unit
    from sweeps.runners import RunTask

    paths = [tmp_path / "logs" / f"r{i}.log" for i in range(2)]
    runner = _PeekingRunner(paths)
    tasks = [RunTask(f"r{i}", {"i": i}, runner, str(p)) for i, p in enumerate(paths)]
    records = execute_unit(tasks)
    assert [r.status for r in records] == ["ok", "ok"] and [r.summary["i"] for r in records] == [0, 1]
    for text in runner.seen_halfway:  # written before the group returned
        assert text.splitlines()[0].startswith("runs r0, r1 trained together")
        assert text.splitlines()[1] == "step 100: loss 0.5000 0.6000 (3 s)"
    for i, path in enumerate(paths):
        lines = path.read_text().splitlines()
        assert lines[1] == "step 100: loss 0.5000 0.6000 (3 s)" and lines[-2] == f"run r{i}"
        assert lines[-1].startswith("ok after")


@pytest.mark.slow
@pytest.mark.parametrize("ensemble", [1, 8])
def test_a_run_stopped_half_way_continues_from_its_kept_state(reference, spec_file, tmp_path, monkeypatch, ensemble):
    """A sweep stopped in the middle of a run (here: an interrupt at step 30 of 40) keeps the
    run's state of step 20 in STORE/partial/; run again, it continues from there, and the
    store ends equal to an uninterrupted sweep's, with no state left behind."""
    import synthetic.sweeps as synthetic_sweeps

    monkeypatch.setattr(synthetic_sweeps, "STATE_EVERY", 20)
    plain_log = synthetic_sweeps.log_eval

    def stop_at_30(rows):
        plain_log(rows)
        if rows[0]["step"] == 30:
            raise KeyboardInterrupt  # not a run error: the sweep itself stops, as when killed

    out = tmp_path / "stopped"
    monkeypatch.setattr(synthetic_sweeps, "log_eval", stop_at_30)
    with pytest.raises(KeyboardInterrupt):
        run_sweep(spec_file, out, jobs=1, progress=False, ensemble=ensemble)
    kept = [p for p in (out / "partial").iterdir() if (p / "state" / "rows.json").is_file()]
    assert len(kept) == 1 and json.loads((kept[0] / "state" / "trainer_state.json").read_text())["step"] == 20
    resumed_from: list[int] = []
    monkeypatch.setattr(synthetic_sweeps, "log_eval", lambda rows: resumed_from.append(rows[0]["step"]))
    outcome = run_sweep(spec_file, out, jobs=1, progress=False, ensemble=ensemble)
    assert outcome.n_failed == 0 and resumed_from[0] == 30  # the first evaluation after the kept step 20
    assert not list((out / "partial").rglob("rows.json"))  # finished: no state left
    # the stopped run's log keeps its first attempt (evaluations up to step 30), then the resumed one
    attempts = {
        p.stem: [m.start() for m in re.finditer(r" started \d{4}-", p.read_text())]
        for p in (out / "logs").glob("*.log")
    }
    resumed = [run_id for run_id, starts in attempts.items() if len(starts) == 2]
    assert len(resumed) == (1 if ensemble == 1 else len(attempts)), attempts  # the run (or group) stopped
    for run_id in resumed:
        text = (out / "logs" / f"{run_id}.log").read_text()
        assert 0 < text.index("step 30: loss") < attempts[run_id][1]  # before the second start
        assert text.rstrip().splitlines()[-1].startswith("ok after")
    a, b = _metrics(out), _metrics(reference.out_dir)
    if ensemble == 1:
        assert a.equals(b)  # bit for bit: as if never stopped
    else:
        assert list(a.columns) == list(b.columns) and np.allclose(a["loss"], b["loss"], atol=1e-5)


def test_a_long_tmpdir_gives_ray_a_short_temp_folder(tmp_path, monkeypatch):
    """Issue 56, item 6: Ray's sockets live under $TMPDIR/ray; past ~40 bytes their paths pass the
    107-byte AF_UNIX limit, so a local Ray starts in a short folder of its own."""
    import os

    from sweeps.executors import RAY_SOCKET_SUFFIX_BYTES, SOCKET_PATH_MAX, _start_local_ray, ray_temp_dir

    long_dir = tmp_path / ("t" * 60)
    long_dir.mkdir()
    monkeypatch.delenv("RAY_TMPDIR", raising=False)
    monkeypatch.setenv("TMPDIR", "/tmp")
    assert ray_temp_dir() is None  # /tmp/ray: Ray's own default fits
    monkeypatch.setenv("TMPDIR", str(long_dir))
    short = ray_temp_dir()
    assert short == f"/tmp/emergence-ray-{os.getuid()}" and os.access(short, os.W_OK)
    assert len(short.encode()) + RAY_SOCKET_SUFFIX_BYTES <= SOCKET_PATH_MAX < len(str(long_dir / "ray")) + 66

    class FakeRay:
        def __init__(self) -> None:
            self.inits: list[dict] = []

        def init(self, **kwargs) -> None:
            self.inits.append(kwargs)

    fake = FakeRay()
    _start_local_ray(fake, 2)
    assert fake.inits[-1]["_temp_dir"] == short and fake.inits[-1]["num_cpus"] == 2
    # a RAY_TMPDIR the user set is theirs: too long, one line says what to set
    monkeypatch.setenv("RAY_TMPDIR", str(long_dir))
    with pytest.raises(ValueError, match=r"^executor 'ray': RAY_TMPDIR='.*' is too long .*set RAY_TMPDIR to a short"):
        _start_local_ray(fake, 2)


@pytest.mark.slow  # starts a real local Ray (~10-30 s)
def test_a_sweep_on_ray_runs_under_a_long_tmpdir(tmp_path, monkeypatch):
    from interp.core.spec_file import parse_spec_text as yaml_spec

    pytest.importorskip("ray")
    long_dir = tmp_path / ("t" * 60)
    long_dir.mkdir()
    monkeypatch.delenv("RAY_TMPDIR", raising=False)
    monkeypatch.setenv("TMPDIR", str(long_dir))
    spec = {**yaml_spec(EXAMPLE_YAML, ".yaml"), "grid": {"S": [8], "s": [1]}, "seeds": [0]}  # one run of the example
    outcome = run_sweep(spec, tmp_path / "out", jobs=1, executor="ray", progress=False)
    assert (outcome.n_ran, outcome.n_failed) == (1, 0)
