"""Smoke test of the reproductions in analyses/: one script function at a tiny size (real training)."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pandas as pd
import pytest

from tests.conftest import load_analysis as _load


def test_linear_map_floor_reproduces_at_S8(tmp_path):
    floors = _load("linear_map_floors")
    cfg = {"S": [8], "s": 1, "seeds": [0], "steps": {8: 400}, "tokens_per_step": {8: 512},
           "eval_every": 100, "eval_tokens": 4096}
    runs, per_s, fig = floors.run(cfg, jobs=1)
    row = per_s.iloc[0]
    # analytic floor (S−1)/(2S−1)·ln 2 and the paper's 0.3235 [PAPER.md, figure]
    assert row.analytic_floor == pytest.approx(7 / 15 * math.log(2), abs=1e-9)
    assert row.paper_floor == 0.3235
    # a real 400-step run (the script's CPU setting) on s = 1 reaches the floor within the 2 %
    assert 0.3235 * 0.98 <= row.ours_mean <= 0.3235 * 1.02
    assert bool(row.within_2pct)
    assert len(runs) == 1 and runs.steps.iloc[0] == 400

    table = runs.merge(per_s[["S", "paper_floor", "ours_mean"]], on="S")
    csv, html = floors.write_outputs(table, fig, tmp_path, "floors")
    back = pd.read_csv(csv)
    assert back.final_loss.iloc[0] == pytest.approx(row.ours_mean, rel=1e-9)
    assert "plotly" in html.read_text()[:200_000].lower()


def test_common_parse_args_rejects_bad_jobs():
    common = _load("_common")
    with pytest.raises(SystemExit):
        common.parse_args("x", "d", ["--jobs", "0"])
    args = common.parse_args("x", "d", ["--paper-scale"])
    assert args.paper_scale and args.jobs == 2 and args.out == Path("results/analyses/x")


def test_reproduction_runs_through_the_sweep_engine_and_resumes(tmp_path):
    """--sweep-dir routes a reproduction's runs through synthetic.sweeps: same numbers as the
    direct runner, rows in the results store, and a second call runs nothing new."""
    floors = _load("linear_map_floors")
    common = sys.modules["_common"]
    cfg = {"S": [8], "s": 1, "seeds": [0], "steps": {8: 100}, "tokens_per_step": {8: 256},
           "eval_every": 50, "eval_tokens": 1024}
    direct, _, _ = floors.run(cfg, jobs=1)
    common.parse_args("linear_map_floors", "d", ["--sweep-dir", str(tmp_path / "sweep"), "--jobs", "1"])
    try:
        swept, _, _ = floors.run(cfg, jobs=1)
        again, _, _ = floors.run(cfg, jobs=1)  # everything is in the store: resumed, nothing re-run
    finally:
        common.parse_args("x", "d", [])  # back to direct runs for other tests
    assert swept.final_loss.tolist() == direct.final_loss.tolist() == again.final_loss.tolist()
    store = pd.read_parquet(tmp_path / "sweep" / "results.parquet")
    assert len(store) == 1 and store.status.tolist() == ["ok"]
    assert store.final_loss.iloc[0] == direct.final_loss.iloc[0]
