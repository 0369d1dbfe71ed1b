"""``emergence results``: the registry of analyses, resume, total time, Markdown tables."""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from analyses import results
from analyses.results import REGISTRY, Analysis, run_results
from emergence_lens.cli import app

CALLS: list[list[str]] = []


def main(argv):
    """A stand-in analysis: records its call and writes one table (value = len of --jobs)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path)
    parser.add_argument("--jobs", type=int)
    parser.add_argument("--sweep-dir", type=Path)
    args = parser.parse_args(argv)
    CALLS.append(list(argv))
    args.out.mkdir(parents=True, exist_ok=True)
    pd.DataFrame({"S": [8, 16], "final_loss": [0.32351, 0.33541]}).to_csv(args.out / "tiny.csv", index=False)


def test_registry_modules_exist_and_accept_the_common_options():
    import importlib

    assert len({a.name for a in REGISTRY}) == len(REGISTRY)
    for analysis in REGISTRY:
        module = importlib.import_module(analysis.module)
        assert callable(module.main), analysis.module
        assert analysis.page.startswith(("docs/results", "docs/embedded.md")), analysis.page


def test_runs_then_resumes_and_writes_markdown(tmp_path):
    registry = [Analysis("tiny", __name__, "docs/results.md §0")]
    lines: list[str] = []
    CALLS.clear()
    first = run_results(tmp_path, jobs=1, registry=registry, echo=lines.append)
    assert list(first) == ["tiny"] and len(CALLS) == 1
    assert CALLS[0] == [
        "--out",
        str(tmp_path / "analyses" / "tiny"),
        "--jobs",
        "1",
        "--sweep-dir",
        str(tmp_path / "sweeps" / "tiny"),
    ]
    md = (tmp_path / "analyses" / "tiny" / "tiny.md").read_text().splitlines()
    assert md == ["| S | final_loss |", "| --- | --- |", "| 8 | 0.3235 |", "| 16 | 0.3354 |"]
    assert lines[-1].startswith("total time: ") and "1 analyses run now (0 already done)" in lines[-1]
    lines.clear()
    second = run_results(tmp_path, jobs=1, registry=registry, echo=lines.append)
    assert second == {} and len(CALLS) == 1  # resumed: nothing re-run
    assert lines[0].startswith("tiny: done before") and "0 analyses run now (1 already done)" in lines[-1]
    run_results(tmp_path, jobs=1, registry=registry, force=True, echo=lines.append)
    assert len(CALLS) == 2


def test_unknown_analysis_is_refused_before_work(tmp_path):
    with pytest.raises(
        ValueError,
        match=r"unknown analysis 'nope'; valid: main_job, decomposition, interval_study, trainer_determinism, linear_map_floors",
    ):
        run_results(tmp_path / "out", ["nope"])
    assert not (tmp_path / "out").exists()
    result = CliRunner().invoke(app, ["results", "--list", "--only", "staircase", "--out", str(tmp_path)])
    assert result.exit_code == 0 and result.output.split() == ["staircase", "todo", "docs/results-synthetic.md", "(d)"]
    assert results.select(["depth", "staircase"]) == [a for a in REGISTRY if a.name in ("staircase", "depth")]


def test_paper_scale_entries_are_behind_the_flag_and_pass_device(tmp_path):
    paper = [a.name for a in results.select(paper_scale=True)]
    assert paper == ["sparsity_sweep_paper", "heads_vs_dhead_paper", "arch_linear_map_paper", "depth_paper"]
    assert not set(paper) & {a.name for a in results.select()}  # not in the documented-scale run
    assert all(a.args == ("--paper-scale",) and a.runs_sweeps for a in results.select(paper_scale=True))
    registry = [Analysis("tiny", __name__, "docs/results.md §0", ("--x",), paper_scale=True)]
    CALLS.clear()
    with pytest.raises(SystemExit):  # the stand-in does not take --device / --x: the args reached it
        run_results(tmp_path, jobs=1, registry=registry, paper_scale=True, device="cuda", echo=lambda _: None)
    with pytest.raises(ValueError, match="--device 'gpu' is invalid"):
        run_results(tmp_path, registry=registry, paper_scale=True, device="gpu")
    result = CliRunner().invoke(app, ["results", "--list", "--paper-scale", "--out", str(tmp_path)])
    assert result.exit_code == 0 and [line.split()[0] for line in result.output.splitlines()] == paper


def test_device_reaches_only_the_entries_that_take_it(tmp_path, monkeypatch):
    import importlib
    import inspect
    import sys
    import types

    # each registered entry that trains: takes --device exactly when its parser can (synthetic.harness's)
    for entry in REGISTRY:
        if entry.runs_sweeps:
            source = inspect.getsource(importlib.import_module(entry.module))
            assert entry.takes_device == ("synthetic.harness" in source), entry.name
    seen: list[list[str]] = []

    def strict_main(argv):  # an entry whose parser knows no --device
        parser = argparse.ArgumentParser()
        for flag in ("--out", "--jobs", "--sweep-dir"):
            parser.add_argument(flag)
        seen.append(parser.parse_args(argv) and list(argv))

    monkeypatch.setitem(sys.modules, "strict_entry", types.SimpleNamespace(main=strict_main))
    lines: list[str] = []
    registry = [Analysis("pinned", "strict_entry", "x", takes_device=False)]
    run_results(tmp_path, jobs=1, registry=registry, device="cuda", echo=lines.append)
    assert "--device" not in seen[0]
    assert "pinned: trains with the embedded trainer on the CPU (kernel-pinned); --device not passed" in lines


def test_finished_only_reads_each_store_without_training_or_marking_done(tmp_path, monkeypatch):
    import sys
    import types

    seen: list[list[str]] = []

    def partial_main(argv):  # a stand-in entry: with --finished-only writes the table of what its store holds
        parser = argparse.ArgumentParser()
        parser.add_argument("--out", type=Path)
        parser.add_argument("--sweep-dir", type=Path)
        parser.add_argument("--finished-only", action="store_true")
        parser.add_argument("--device")
        args = parser.parse_args(argv)
        seen.append(list(argv))
        if not args.sweep_dir.exists():
            raise SystemExit(2)
        args.out.mkdir(parents=True, exist_ok=True)
        pd.DataFrame({"S": [8], "seeds": [2]}).to_csv(args.out / "t.csv", index=False)

    def crashing_main(argv):  # an entry whose summary needs runs that have not finished
        raise IndexError("single positional indexer is out-of-bounds")

    monkeypatch.setitem(sys.modules, "partial_entry", types.SimpleNamespace(main=partial_main))
    monkeypatch.setitem(sys.modules, "crashing_entry", types.SimpleNamespace(main=crashing_main))
    registry = [
        Analysis("crash", "crashing_entry", "x"),
        Analysis("half", "partial_entry", "docs/results.md §0"),
        Analysis("empty", "partial_entry", "x"),
    ]
    (tmp_path / "sweeps" / "half").mkdir(parents=True)
    lines: list[str] = []
    assert run_results(tmp_path, registry=registry, finished_only=True, echo=lines.append) == {}
    folder = tmp_path / "analyses" / "half" / "finished-so-far"
    assert seen[0] == ["--out", str(folder), "--sweep-dir", str(tmp_path / "sweeps" / "half"), "--finished-only"]
    assert (folder / "t.md").read_text().splitlines()[-1] == "| 8 | 2 |"
    assert lines == [
        "crash: too few runs finished for its summary (IndexError: single positional indexer is out-of-bounds)",
        f"half: the finished runs' tables are in {folder}",
        "empty: nothing to report (exit 2)",
    ]
    assert not list(tmp_path.glob("analyses/*/done.json"))  # still to be run
    seen.clear()  # the device is part of every run id: it is passed on as the runs were given it
    run_results(tmp_path, registry=registry[1:2], finished_only=True, device="cuda", echo=lines.append)
    assert seen[0][-2:] == ["--device", "cuda"]


RUNS: list[int] = []


def counted_runner(config: dict) -> tuple[dict, pd.DataFrame]:
    """A run that records itself; its loss is a known function of s."""
    RUNS.append(config["s"])
    return {"final_loss": 1.0 / config["s"]}, pd.DataFrame({"step": [0, 10], "loss": [1.0, 1.0 / config["s"]]})


def sweeping_main(argv):
    """A stand-in paper-scale entry: a sweep of s = 1..4 into --sweep-dir, its table to --out."""
    from sweeps import run_sweep

    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path)
    parser.add_argument("--jobs", type=int)
    parser.add_argument("--sweep-dir", type=Path)
    parser.add_argument("--finished-only", action="store_true")
    parser.add_argument("--paper-scale", action="store_true")
    args = parser.parse_args(argv)
    if not args.finished_only:
        run_sweep({"grid": {"s": [1, 2, 3, 4]}}, args.sweep_dir, runner=counted_runner, progress=False)
    args.out.mkdir(parents=True, exist_ok=True)
    rows = pd.read_parquet(args.sweep_dir / "results.parquet").sort_values("s")
    rows[["s", "final_loss"]].to_csv(args.out / "t.csv", index=False)


def test_paper_scale_runs_are_kept_and_a_fresh_clone_resumes_from_them(tmp_path, monkeypatch):
    import sys
    import types

    monkeypatch.setitem(sys.modules, "sweeping_entry", types.SimpleNamespace(main=sweeping_main))
    registry = [Analysis("kept", "sweeping_entry", "docs/results.md §0", ("--paper-scale",), paper_scale=True)]
    kept_root = tmp_path / "docs-data"
    kept_root.mkdir()
    lines: list[str] = []
    RUNS.clear()
    run_results(tmp_path / "one", jobs=1, registry=registry, paper_scale=True, kept_root=kept_root, echo=lines.append)
    assert sorted(RUNS) == [1, 2, 3, 4]
    store = kept_root / "kept" / "store"
    assert f"kept: 4 newly finished runs kept in {store} (commit it: a fresh clone resumes from there)" in lines
    assert len(list((store / "runs").glob("*.parquet"))) == 4 and len(list((store / "metrics").glob("*"))) == 4
    # A fresh clone (another OUT, empty): the kept runs are taken, none is trained again.
    lines.clear()
    run_results(tmp_path / "two", jobs=1, registry=registry, paper_scale=True, kept_root=kept_root, echo=lines.append)
    assert sorted(RUNS) == [1, 2, 3, 4]
    assert lines[1] == f"kept: 4 finished runs taken from {store} (kept by an earlier run; --no-kept trains them again)"
    table = pd.read_csv(tmp_path / "two" / "analyses" / "kept" / "t.csv")
    assert table["final_loss"].tolist() == pytest.approx([1.0, 0.5, 1 / 3, 0.25], abs=1e-12)
    # --finished-only on a third fresh clone reports the kept runs without training.
    run_results(
        tmp_path / "three", registry=registry, paper_scale=True, finished_only=True, kept_root=kept_root, echo=print
    )
    assert pd.read_csv(tmp_path / "three" / "analyses" / "kept" / "finished-so-far" / "t.csv").equals(table)
    # --no-kept (kept_root None) trains every run; a missing kept folder is the same.
    run_results(tmp_path / "four", jobs=1, registry=registry, paper_scale=True, kept_root=None, echo=lines.append)
    run_results(tmp_path / "five", jobs=1, registry=registry, paper_scale=True, kept_root=tmp_path / "no", echo=print)
    assert sorted(RUNS) == [1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4] and not (tmp_path / "no").exists()
