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
