"""Command-line interface: commands that run (bad input: tests/emergence_lens/test_cli_bad_input.py)."""

from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from emergence_lens.cli import app

runner = CliRunner()


def error_line(result) -> str:
    assert result.exit_code == 2, result.output
    lines = [l for l in result.output.strip().splitlines() if l.strip()]
    assert len(lines) == 1, result.output  # exactly one line, no traceback
    assert lines[0].startswith("error: ")
    return lines[0]


def test_rank_heads_writes_tables(tiny_local_suite, tmp_path):
    out = tmp_path / "out"
    result = runner.invoke(app, ["rank-heads", str(tiny_local_suite), "--pre", "0", "--post", "200", "--out", str(out)])
    assert result.exit_code == 0, result.output
    heads = pd.read_csv(out / "heads.csv")
    assert len(heads) == 2 * 4 and sorted(heads["rank"]) == list(range(1, 9))
    topk = pd.read_csv(out / "topk.csv")
    assert list(topk["k"]) == list(range(1, 9))
    assert sorted(p.name for p in out.iterdir()) == ["heads.csv", "topk.csv"]  # no temporary files left


@pytest.mark.slow
def test_bisect_on_a_local_suite(tiny_local_suite, tmp_path):
    result = runner.invoke(app, ["bisect", str(tiny_local_suite), "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    points = pd.read_csv(tmp_path / "points.csv")
    # random tiny models never reach 50 % on digit repetition: reported as never emerging
    assert points["emerged"].tolist() == [False] and points["n_evaluations"].tolist() == [2]


def test_unknown_embedded_run_lists_valid_names():
    line = error_line(runner.invoke(app, ["bisect", "embedded/neox-9l-seed0"]))
    assert "neox-2l-64d-seed0" in line
    line = error_line(runner.invoke(app, ["bisect", "embedded-quick/neox-2l-128d-seed0"]))
    assert "neox-2l-64d-seed1, neox-2l-64d-seed2" in line  # the quick suite's runs only


def test_list_models_prints_usable_sources():
    result = runner.invoke(app, ["list-models"])
    assert result.exit_code == 0
    lines = result.output.splitlines()
    assert "EleutherAI/pythia-410m-seed9" in lines and "embedded/neox-2l-128d-seed2" in lines
    assert "embedded-quick/neox-2l-64d-seed1" in lines  # a name for every run of the quick suite


def test_embedded_names_resolve_without_training(tmp_path, monkeypatch):
    """A source name means one set of weights whatever the cache holds (issue 55):
    ``embedded/<run>`` is the full suite's run, ``embedded-quick/<run>`` the quick one's, with
    neither suite, either or both cached. Resolution itself trains nothing."""
    from interp.sources.catalogue import FULL, QUICK, resolve_embedded, suite_dir

    monkeypatch.setenv("EMERGENCE_LENS_CACHE", str(tmp_path))

    def resolved() -> tuple:
        return (
            resolve_embedded("embedded/neox-2l-64d-seed1"),
            resolve_embedded("embedded-quick/neox-2l-64d-seed1"),
            {cfg for cfg, _ in resolve_embedded("embedded")},
            {cfg for cfg, _ in resolve_embedded("embedded-quick")},
        )

    expected = ([(FULL, "neox-2l-64d-seed1")], [(QUICK, "neox-2l-64d-seed1")], {FULL}, {QUICK})
    assert resolved() == expected  # an empty cache
    assert resolve_embedded("embedded/neox-2l-64d-seed0") == [(FULL, "neox-2l-64d-seed0")]
    assert [run for _, run in resolve_embedded("embedded-quick")] == ["neox-2l-64d-seed1", "neox-2l-64d-seed2"]
    quick = suite_dir(QUICK) / "neox-2l-64d-seed1"  # only the quick suite's run cached (the case)
    quick.mkdir(parents=True)
    (quick / "suite.json").write_text("{}")
    assert resolved() == expected
    full = suite_dir(FULL) / "neox-2l-64d-seed1"  # both cached
    full.mkdir(parents=True)
    (full / "suite.json").write_text("{}")
    assert resolved() == expected
    (quick / "suite.json").unlink()  # only the full one
    assert resolved() == expected
    assert not (suite_dir(FULL) / "neox-2l-64d-seed2").exists()  # nothing was trained
    with pytest.raises(
        ValueError,
        match=r"unknown embedded run 'neox-2l-64d-seed0' in 'embedded-quick'; did you mean 'embedded/neox-2l-64d-seed0'\? valid: ",
    ):
        resolve_embedded("embedded-quick/neox-2l-64d-seed0")


def test_the_demo_plans_only_the_suite_it_analyses(tmp_path, monkeypatch):
    """``emergence demo`` (source ``embedded``) plans every unit, and opens every run, on the full
    suite, and ``demo --quick`` on the quick one, whatever the cache holds: the first run never
    trains or reads the other suite (issue 55: it analysed the quick suite's 2400-step runs)."""
    from interp.main_job.units import expand_sources
    from interp.sources.catalogue import FULL, QUICK, suite_dir
    from interp.sources.door import ReadySources

    monkeypatch.setenv("EMERGENCE_LENS_CACHE", str(tmp_path))
    for name in QUICK.run_names():  # the quick suite cached, the full one not
        (suite_dir(QUICK) / name).mkdir(parents=True)
        (suite_dir(QUICK) / name / "suite.json").write_text("{}")
    assert expand_sources(["embedded"]) == [f"embedded/{n}" for n in FULL.run_names()]
    assert expand_sources(["embedded-quick"]) == [f"embedded-quick/{n}" for n in QUICK.run_names()]
    for names, cfg in ((["embedded"], FULL), (expand_sources(["embedded"]), FULL), (["embedded-quick"], QUICK)):
        slots = ReadySources(names, progress=False)._slots  # constructing it trains nothing
        assert [slot[1] for slot in slots] == [cfg] * len(cfg.run_names())
        assert [slot[2] for slot in slots] == cfg.run_names()


def test_open_source_opens_embedded_runs_like_the_cli(tiny_local_suite, tmp_path, monkeypatch):
    """``open_source`` (Python) and the command line resolve ``embedded[-quick]/<run>`` the same
    way; a whole suite is refused by ``open_source`` before anything is trained."""
    import shutil as _shutil

    from interp.sources import open_source
    from interp.sources.catalogue import QUICK, suite_dir

    monkeypatch.setenv("EMERGENCE_LENS_CACHE", str(tmp_path))
    run = suite_dir(QUICK) / "neox-2l-64d-seed1"  # a stand-in run folder: the tiny suite, marked complete
    _shutil.copytree(tiny_local_suite, run)
    (run / "suite.json").write_text('{"model_id": "embedded/neox-2l-64d-seed1"}')
    (suite_dir(QUICK) / "neox-2l-64d-seed2").mkdir()
    (suite_dir(QUICK) / "neox-2l-64d-seed2" / "suite.json").write_text("{}")
    source = open_source("embedded-quick/neox-2l-64d-seed1")
    # the quick suite keeps its own name (issue 67, item 6), whatever its suite.json says
    assert source.available_steps() == [0, 100, 200] and source.model_id == "embedded-quick/neox-2l-64d-seed1"
    assert source.root == run
    with pytest.raises(ValueError, match="open_source takes one run, and 'embedded-quick' names 2"):
        open_source("embedded-quick")
    result = runner.invoke(app, ["curve", "embedded-quick/neox-2l-64d-seed1", "--steps", "0,200"])
    assert result.exit_code == 0, result.output
    assert "neox-2l-64d" in result.output and len(result.output.strip().splitlines()) == 3


@pytest.mark.slow
def test_rank_heads_and_decompose_over_one_prompt_say_why_bounds_are_nan(tiny_local_suite, tmp_path):
    """One prompt: NaN bounds, a one-line warning, and the jump flagged (no standard error)."""
    for command, table, bounds in (
        ("rank-heads", "heads.csv", ["delta_lo", "delta_hi"]),
        ("decompose", "components.csv", ["recovered_lo", "recovered_hi"]),
    ):
        out = tmp_path / command
        result = runner.invoke(
            app, [command, str(tiny_local_suite), "--pre", "0", "--post", "200", "--n-prompts", "1", "--out", str(out)]
        )
        assert result.exit_code == 0, result.output
        warnings = [line for line in result.output.splitlines() if line.startswith("warning: ")]
        assert len(warnings) == 1 and "bootstrap over 1 prompt(s)" in warnings[0], result.output
        assert "RuntimeWarning" not in result.output
        assert "JUMP TOO SMALL: below 3 standard errors" in result.output
        frame = pd.read_csv(out / table)
        assert frame[bounds].isna().all().all() and frame["jump_too_small"].all()


def test_the_command_line_package_exports_and_imports_only_public_names():
    """``interp.cli`` lists no private name in ``__all__``, and no module imports a private name
    (``_x``) from :mod:`interp.cli.options`: the helpers the commands share are public there."""
    import ast

    import interp.cli

    assert interp.cli.__all__ and not [name for name in interp.cli.__all__ if name.startswith("_")]
    root = Path(interp.cli.__file__).parents[2]
    private, importers = [], set()
    for path in [*(root / "interp").rglob("*.py"), *(root / "emergence_lens").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module == "interp.cli.options":
                importers.add(path.name)
                private += [f"{path.name}: {a.name}" for a in node.names if a.name.startswith("_")]
    assert {"main_job.py", "heads.py"} <= importers and private == []
