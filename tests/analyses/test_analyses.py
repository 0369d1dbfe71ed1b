"""Reproductions in analyses/: one function at a tiny size (real training), the command line,
and the sweep-engine route that every reproduction shares."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from analyses import linear_map_floors, prepretraining, staircase
from synthetic import harness
from synthetic.harness import Execution


@pytest.mark.slow
def test_linear_map_floor_reproduces_at_S8(tmp_path):
    cfg = {
        "S": [8],
        "s": 1,
        "seeds": [0],
        "steps": {8: 400},
        "tokens_per_step": {8: 512},
        "eval_every": 100,
        "eval_tokens": 4096,
    }
    runs, per_s, fig = linear_map_floors.run(cfg, Execution(jobs=1))
    row = per_s.iloc[0]
    # analytic floor (S−1)/(2S−1)·ln 2 and the paper's 0.3235 [Baherwani et al. 2026, figure]
    assert row.analytic_floor == pytest.approx(7 / 15 * math.log(2), abs=1e-9)
    assert harness.linear_map_floor(8) == pytest.approx(7 / 15 * math.log(2), abs=1e-12)
    assert row.paper_floor == 0.3235
    # a real 400-step run (the script's CPU setting) on s = 1 reaches the floor within 2 %
    assert 0.3235 * 0.98 <= row.ours_mean <= 0.3235 * 1.02
    assert bool(row.within_2pct)
    assert len(runs) == 1 and runs.steps.iloc[0] == 400

    table = runs.merge(per_s[["S", "paper_floor", "ours_mean"]], on="S")
    csv, html = harness.write_outputs(table, fig, tmp_path, "floors")
    back = pd.read_csv(csv)
    assert back.final_loss.iloc[0] == pytest.approx(row.ours_mean, rel=1e-9)
    assert "plotly" in html.read_text()[:200_000].lower()


def test_parse_args_returns_the_execution_and_sets_no_globals(tmp_path):
    with pytest.raises(SystemExit):
        harness.parse_args("x", "d", ["--jobs", "0"])
    plain = tmp_path / "file"
    plain.write_text("")
    with pytest.raises(SystemExit):
        harness.parse_args("x", "d", ["--out", str(plain)])
    args, execution = harness.parse_args("x", "d", ["--paper-scale", "--sweep-dir", str(tmp_path / "s")])
    assert args.paper_scale and args.out.as_posix() == "results/analyses/x"
    assert execution == Execution(
        jobs=2, sweep_dir=tmp_path / "s", executor="joblib", name="x", ensemble=8
    )  # --paper-scale trains ensembles of 8
    _, again = harness.parse_args("x", "d", [])
    assert again.sweep_dir is None  # nothing carried over from the previous call


def test_set_overrides_settings_and_rejects_unknown_keys(tmp_path, capsys):
    from analyses import arch_linear_map

    base = arch_linear_map.settings()
    cfg = harness.apply_overrides(base, ["s=5", "steps=3000", "eval_every=100", "lr=3e-3"])
    assert cfg == {**base, "s": [5], "steps": 3000, "eval_every": 100, "lr": 0.003}
    assert base["s"] == [3, 5, 7]  # the defaults are not modified
    with pytest.raises(ValueError, match="'step' is not a setting: choose one of"):
        harness.apply_overrides(base, ["step=3000"])
    with pytest.raises(ValueError, match="expected KEY=VALUE"):
        harness.apply_overrides(base, ["steps"])

    def never_run(cfg, execution):
        raise AssertionError("ran despite a bad --set")

    with pytest.raises(SystemExit) as exit_info:
        harness.reproduce(
            "x", "d", ["--set", "nope=1", "--out", str(tmp_path / "o")], arch_linear_map.settings, never_run
        )
    assert exit_info.value.code == 2
    assert "error: --set 'nope' is not a setting" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_reproduction_runs_through_the_sweep_engine_and_resumes(tmp_path):
    """--sweep-dir routes a reproduction's runs through the sweep engine: same numbers as the
    direct runs, rows in the results store, and a second call runs nothing new."""
    cfg = {
        "S": [8],
        "s": 1,
        "seeds": [0],
        "steps": {8: 100},
        "tokens_per_step": {8: 256},
        "eval_every": 50,
        "eval_tokens": 1024,
    }
    direct, _, _ = linear_map_floors.run(cfg, Execution(jobs=1))
    through = Execution(jobs=1, sweep_dir=tmp_path / "sweep", name="floors")
    swept, _, _ = linear_map_floors.run(cfg, through)
    stamp = (tmp_path / "sweep" / "results.parquet").stat().st_mtime_ns
    again, _, _ = linear_map_floors.run(cfg, through)  # everything is in the store: nothing re-run
    assert swept.final_loss.tolist() == direct.final_loss.tolist() == again.final_loss.tolist()
    store = pd.read_parquet(tmp_path / "sweep" / "results.parquet")
    assert len(store) == 1 and store.status.tolist() == ["ok"]
    assert store.final_loss.iloc[0] == direct.final_loss.iloc[0]
    assert len(list((tmp_path / "sweep" / "runs").iterdir())) == 1 and stamp > 0


@pytest.mark.slow
def test_staircase_and_prepretraining_use_the_sweep_dir(tmp_path):
    """The two reproductions with their own runners (alignment after training; pre-pretraining
    arms) store every run in the sweep folder and read the same numbers back."""
    cfg = {
        "S": 4,
        "s": 1,
        "seeds": [0],
        "steps": 20,
        "tokens_per_step": 256,
        "lr": 1e-3,
        "eval_every": 10,
        "eval_tokens": 256,
        "n_heads": 2,
        "d_head": 4,
    }
    direct, raw, _ = staircase.run(cfg, Execution(jobs=1))
    swept, raw_swept, _ = staircase.run(cfg, Execution(jobs=1, sweep_dir=tmp_path / "stair"))
    pd.testing.assert_frame_equal(direct, swept)
    assert raw_swept[0][2].shape == (2, 4)  # row alignment [n_heads, S] came back from the store
    assert len(pd.read_parquet(tmp_path / "stair" / "results.parquet")) == 1

    task = {
        "task": "linear-map",
        "S": 4,
        "s": 1,
        "n_layers": 1,
        "n_heads": 2,
        "d_head": 4,
        "n_ctx": 16,
        "lr": 1e-3,
        "tokens_per_step": 256,
        "steps": 20,
        "eval_every": 10,
        "eval_tokens": 256,
    }
    pre_cfg = {"task": task, "pretrain_steps": 5, "seeds": [0], "arms": ["scratch", "dyck"]}
    runs, _, _ = prepretraining.run(pre_cfg, Execution(jobs=1, sweep_dir=tmp_path / "pre"))
    store = pd.read_parquet(tmp_path / "pre" / "results.parquet")
    assert sorted(store.arm) == ["dyck", "scratch"]
    assert sorted(store.pretrain_steps) == [0, 5]  # scratch stores 0 whatever the setting says
    direct_runs, _, _ = prepretraining.run(pre_cfg, Execution(jobs=1))
    assert runs.final_loss.tolist() == direct_runs.final_loss.tolist()


# ---------------------------------------------------------------------------------------------
# Paper-scale entries (issue 27): the settings are the paper's; the argument path runs tiny
# ---------------------------------------------------------------------------------------------
def test_paper_scale_settings_are_the_papers_steps_and_tokens():
    from analyses import arch_linear_map, depth, heads_vs_dhead, sparsity_sweep

    sp = sparsity_sweep.settings(True)
    assert sp["grid"] == {8: list(range(1, 9)), 16: [2, 3, 8], 32: [2, 16, 31]}
    assert set(sp["steps"].values()) == {10_000} and set(sp["tokens_per_step"].values()) == {2048}
    hd = heads_vs_dhead.settings(True)
    assert hd["pairs"] == [(1, 8), (4, 8), (16, 8), (64, 8), (128, 1)] and hd["S"] == 16
    al = arch_linear_map.settings(True)
    assert (al["S"], al["s"], al["steps"], al["tokens_per_step"]) == (16, [3], 10_000, 2048)
    dp = depth.settings(True)
    assert dp["layers"] == [1, 2, 4] and [t["task"] for t in dp["tasks"]] == ["linear-map", "cellular-automata"]
    assert dp["tasks"][1]["n_rules"] == 16 and all(t["steps"] == 10_000 for t in dp["tasks"])
    for cfg in (sp, hd, al, dp):
        assert cfg["seeds"] == [0, 1, 2]


def test_paper_scale_argument_path_runs_tiny_as_ensembles_on_the_given_device(tmp_path):
    from analyses import heads_vs_dhead
    from sweeps import load_results
    from synthetic.harness import parse_args

    args, execution = parse_args(
        "heads_vs_dhead", "x", ["--paper-scale", "--sweep-dir", str(tmp_path / "sw"), "--device", "cpu", "--jobs", "1"]
    )
    assert (execution.ensemble, execution.device) == (8, "cpu")
    with pytest.raises(SystemExit):
        parse_args("heads_vs_dhead", "x", ["--device", "tpu"])
    argv = [
        "--paper-scale",
        "--out",
        str(tmp_path / "out"),
        "--jobs",
        "1",
        "--sweep-dir",
        str(tmp_path / "sw"),
        "--device",
        "cpu",
        "--set",
        "pairs=[[4, 8], [128, 1]]",
        "--set",
        "seeds=[0, 1]",
        "--set",
        "steps=4",
        "--set",
        "eval_every=2",
        "--set",
        "eval_tokens=64",
        "--set",
        "tokens_per_step=64",
    ]
    runs = heads_vs_dhead.main(argv)
    assert len(runs) == 4 and runs["final_loss"].between(0.2, 1.0).all()
    rows = load_results(tmp_path / "sw")
    assert set(rows["device"]) == {"cpu"} and set(rows["status"]) == {"ok"}
    for run_id in rows["run_id"]:  # the two seeds of each shape trained as one ensemble
        assert "trained together" in (tmp_path / "sw" / "logs" / f"{run_id}.log").read_text()


@pytest.mark.slow
def test_paper_scale_settings_of_the_other_entries_run_tiny_through_the_sweep(tmp_path):
    # the paper-scale settings dicts, shrunk in steps/tokens/grid only, through run() and the store
    from analyses import arch_linear_map, depth, sparsity_sweep

    tiny = {"eval_every": 2, "eval_tokens": 64}
    sp = {
        **sparsity_sweep.settings(True),
        **tiny,
        "grid": {8: [1, 2]},
        "steps": {8: 4},
        "tokens_per_step": {8: 64},
        "seeds": [0, 1],
    }
    al = {**arch_linear_map.settings(True), **tiny, "steps": 4, "tokens_per_step": 64, "seeds": [0]}
    dp = depth.settings(True)
    dp = {
        **dp,
        "layers": [1, 2],
        "seeds": [0],
        "tasks": [{**t, **tiny, "steps": 4, "tokens_per_step": 128} for t in dp["tasks"]],
    }
    for module, cfg, n_runs in ((sparsity_sweep, sp, 4), (arch_linear_map, al, 2), (depth, dp, 4)):
        sweep = tmp_path / module.__name__
        out = module.run(cfg, Execution(jobs=1, sweep_dir=sweep, ensemble=8, device="cpu", name="t"))
        assert len(out[0]) == n_runs, module.__name__
        rows = pd.read_parquet(sweep / "results.parquet")
        assert len(rows) == n_runs and set(rows["status"]) == {"ok"} and set(rows["steps"]) == {4}


def test_finished_only_reports_the_runs_the_store_holds_and_trains_none(tmp_path, capsys):
    """--finished-only on a half-run entry: the table has exactly the finished runs, with the
    numbers the full run wrote, nothing is trained, and an empty store is one clear line."""
    from analyses import sparsity_sweep
    from synthetic.harness import FinishedOnlyError

    tiny = {"eval_every": 2, "eval_tokens": 64, "steps": {8: 4}, "tokens_per_step": {8: 64}, "seeds": [0]}
    cfg = {**sparsity_sweep.settings(True), **tiny, "grid": {8: [1, 2, 3]}}
    sweep = tmp_path / "store"
    with pytest.raises(FinishedOnlyError, match="no finished run"):
        sparsity_sweep.run(cfg, Execution(jobs=1, sweep_dir=sweep, finished_only=True))
    half = {**cfg, "grid": {8: [1, 3]}}  # the store holds s = 1 and 3; s = 2 "still runs"
    full_runs, _, _ = sparsity_sweep.run(half, Execution(jobs=1, sweep_dir=sweep, ensemble=1, device="cpu"))
    stamp = (sweep / "results.parquet").stat().st_mtime_ns
    runs, agg, _ = sparsity_sweep.run(cfg, Execution(jobs=1, sweep_dir=sweep, finished_only=True, device="cpu"))
    assert runs.s.tolist() == [1, 3] and agg.seeds.tolist() == [1, 1]
    assert runs.final_loss.tolist() == full_runs.final_loss.tolist()
    assert (sweep / "results.parquet").stat().st_mtime_ns == stamp  # nothing trained or written
    argv = ["--paper-scale", "--finished-only", "--out", str(tmp_path / "o"), "--sweep-dir", str(tmp_path / "none")]
    with pytest.raises(SystemExit) as stop:
        sparsity_sweep.main(argv)
    assert stop.value.code == 2
    assert "--finished-only: " in capsys.readouterr().err
    with pytest.raises(SystemExit):  # without a store there is nothing to read
        harness.parse_args("x", "d", ["--finished-only"])


def test_depth_verdict_waits_for_two_depths_of_a_task():
    """--finished-only on an unfinished depth_paper: a task with one finished depth has no verdict
    (None), the other is decided by its own rule (here depth 4's lower final loss: not hurt)."""
    import pandas as pd

    from analyses import depth

    agg = pd.DataFrame(
        {
            "task": ["linear-map", "linear-map", "cellular-automata"],
            "n_layers": [1, 4, 1],
            "steps_to_threshold": [10000.0, 10000.0, 10000.0],
            "final_loss": [0.478, 0.433, 0.873],
            "late_loss": [0.477, 0.437, 0.874],
        }
    )
    assert depth.verdicts(agg) == {"linear_map_depth_hurts": False, "ca_depth_helps": None}
    agg.loc[1, "final_loss"] = 0.5  # deeper and worse at the same censored steps: hurts
    assert depth.verdicts(agg)["linear_map_depth_hurts"] is True
