"""Store files cut short make their run or unit not done, named, and redone (issue 41, item 3).

A sweep's ``runs/<id>.parquet`` or ``metrics/<id>.parquet``, a study's unit row or a file of a
unit's state, each truncated to half its size (a partial copy, a full disk): before the fix
``--dry-run`` reported it done and every rerun (also ``--retry-failed``) stopped with pyarrow's
"Parquet magic bytes not found in footer". Now each is named in one line, counted as not done
and redone; every other file of the store is left byte for byte as it was.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from conftest import save_tiny_neox
from sweeps import ResultsStore, run_sweep
from sweeps.store import load_metrics


def cut(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def ok_runner(config: dict) -> tuple[dict, pd.DataFrame]:
    if config["s"] == 3:
        raise RuntimeError("boom")
    steps = np.arange(0, 31, 10)
    return {"final_loss": float(config["s"] + 0.1 * config["seed"])}, pd.DataFrame({"step": steps, "loss": steps * 1.0})


def test_a_sweep_row_or_metrics_file_cut_short_is_named_and_redone(tmp_path):
    spec = {"grid": {"s": [1, 2, 3]}, "seeds": [0, 1]}
    first = run_sweep(spec, tmp_path, runner=ok_runner, progress=False)
    assert (first.n_ran, first.n_failed) == (6, 2)
    store = ResultsStore(tmp_path)
    rows = store.results().set_index("run_id")
    ok_ids = sorted(rows.index[rows["status"] == "ok"])
    row_id, metrics_id = ok_ids[0], ok_ids[1]
    cut(store.row_path(row_id))
    cut(store.metrics_path(metrics_id))
    untouched = {k: v for k, v in snapshot(tmp_path).items() if row_id not in k and metrics_id not in k}
    damaged = store.damaged()
    assert sorted(damaged) == sorted([row_id, metrics_id])
    assert damaged[row_id].startswith(f"runs/{row_id}.parquet is unreadable (")
    assert "Parquet magic bytes not found in footer" in damaged[row_id]
    assert damaged[metrics_id].startswith(f"metrics/{metrics_id}.parquet is unreadable (")
    assert store.damaged_lines()[0] == (
        f"{tmp_path}/{damaged[sorted(damaged)[0]]}; run {sorted(damaged)[0]} is counted as not done and will be run again"
    )
    assert store.done_ids() == set(rows.index) - {row_id, metrics_id}
    assert len(store.results()) == 4 and set(load_metrics(tmp_path)["run_id"]) == set(ok_ids) - {metrics_id}
    # --retry-failed: the two failed runs and the two damaged ones, nothing else.
    again = run_sweep(spec, tmp_path, runner=ok_runner, progress=False, retry_failed=True)
    assert (again.n_ran, again.n_skipped) == (4, 2)
    assert store.damaged() == {}
    redone = store.results().set_index("run_id")
    pd.testing.assert_series_equal(redone["final_loss"], rows["final_loss"])
    assert len(load_metrics(tmp_path)) == 4 * 4
    now = snapshot(tmp_path)
    keep = [k for k in untouched if k.startswith(("runs/", "metrics/")) and not any(f in k for f in ("s-3", "s=3"))]
    failed_ids = set(rows.index[rows["status"] != "ok"])
    keep = [k for k in keep if not any(f in k for f in failed_ids)]
    assert keep and all(now[k] == untouched[k] for k in keep)


@pytest.fixture(scope="module")
def two_sources(tmp_path_factory, byte_tokenizer_dir):
    base = tmp_path_factory.mktemp("damaged-study")
    names = []
    for i in range(2):
        root = base / f"run{i}"
        shutil.copytree(byte_tokenizer_dir, root / "tokenizer")
        for step in range(3):
            save_tiny_neox(root / f"step{step}", seed=70 + 10 * i + step)
        names.append(str(root))
    return names


def test_a_study_unit_row_or_state_cut_short_is_named_and_redone(two_sources, tmp_path, caplog):
    from emergence_lens.cli import app
    from interp.core.settings import StudyConfig
    from interp.main_job.runner import run_study
    from interp.main_job.units import damaged_units, plan_units, study_status
    from interp.tasks import RepetitionTask

    task = RepetitionTask(n_prompts=8, length=6, seed=0)
    out = tmp_path / "study"
    run_study(two_sources, [task], StudyConfig(scan=True, threshold=0.5), out_dir=out, progress=False)
    reference = {name: pd.read_parquet(out / f"{name}.parquet") for name in ("emergence", "heads", "points")}
    units = plan_units(two_sources, [task])
    # a unit's id: the run folder's own name, not a slug of its absolute path (issue 56, item 7)
    assert [u.unit_id.rsplit("-", 1)[0] for u in units] == ["run0__repetition", "run1__repetition"]
    store = ResultsStore(out / "units")
    cut(store.row_path(units[0].unit_id))
    state_files = sorted((store.root / "state" / units[1].unit_id).rglob("*.parquet"))
    cut(state_files[0])
    damaged = damaged_units(units, out)
    assert list(damaged) == sorted(u.unit_id for u in units)
    row_line = damaged[units[0].unit_id]
    assert row_line.startswith(f"{store.root}/runs/{units[0].unit_id}.parquet is unreadable (")
    assert "Parquet magic bytes not found in footer" in row_line
    assert row_line.endswith(
        f"; the unit {two_sources[0]}, task repetition is counted as not done and will be run again"
    )
    assert damaged[units[1].unit_id].startswith(f"{store.root}/state/{units[1].unit_id} is unreadable (")
    assert not study_status(units, out)["done"].any()
    args = ["run", *two_sources, "--out", str(out), "--n-prompts", "8", "--length", "6", "--scan"]
    dry = CliRunner().invoke(app, [*args, "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert "0 of 2 units done" in dry.output and dry.output.count("damaged: ") == 2
    caplog.clear()
    again = CliRunner().invoke(app, args)  # each damaged unit named once, by the run as given
    assert again.exit_code == 0, again.output
    assert [shown(again, caplog, line) for line in damaged.values()] == [1, 1]
    assert damaged_units(units, out) == {} and study_status(units, out)["done"].all()
    for name, table in reference.items():
        pd.testing.assert_frame_equal(pd.read_parquet(out / f"{name}.parquet"), table, check_exact=True, obj=name)


def shown(result, caplog, text: str) -> int:
    """How often a command showed ``text``: its own output, and the log records that a terminal
    shows on stderr (pytest holds them in ``caplog`` instead)."""
    return result.output.count(text) + sum(text in r.getMessage() for r in caplog.records)


def test_the_sweep_command_names_a_damaged_run_once(tmp_path, caplog):
    """Issue 56, item 7: the "will be run again" line was printed by the command and again by the
    sweep it runs."""
    from emergence_lens.cli import app

    spec = tmp_path / "spec.yaml"
    spec.write_text("grid:\n  s: [1, 2]\nseeds: [0]\nrunner: tests.sweeps.test_damaged_store:ok_runner\n")
    out = tmp_path / "out"
    first = CliRunner().invoke(app, ["sweep", str(spec), "--out", str(out), "--no-progress"])
    assert first.exit_code == 0, first.output
    store = ResultsStore(out)
    run_id = sorted(store.done_ids())[0]
    cut(store.row_path(run_id))
    line = store.damaged_lines()[0]
    assert line.endswith(f"; run {run_id} is counted as not done and will be run again")
    caplog.clear()
    dry = CliRunner().invoke(app, ["sweep", str(spec), "--out", str(out), "--dry-run"])
    assert shown(dry, caplog, "will be run again") == 1 and f"damaged: {line}" in dry.output
    caplog.clear()
    again = CliRunner().invoke(app, ["sweep", str(spec), "--out", str(out), "--no-progress"])
    assert again.exit_code == 0, again.output
    assert shown(again, caplog, "will be run again") == 1 and shown(again, caplog, line) == 1
    assert "2 runs: 1 ran, 1 already done, 0 failed" in again.output
