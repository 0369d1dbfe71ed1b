"""Suites a user defines (issue 44, item 1): the spec, the source names, the plan and the training
on each executor (tiny runs: seconds)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from interp.sources import catalogue
from interp.sources.catalogue import load_suite_spec, resolve_embedded, suite_config_from_spec
from interp.sources.suites import n_parameters, plan_suite, train_suite

TINY = {
    "sizes": [
        {"n_layers": 1, "d_model": 16, "n_heads": 2, "steps": 24},
        {"n_layers": 1, "d_model": 16, "n_heads": 4, "steps": 16},
    ],
    "seeds": "3..4",
    "checkpoint_every": 8,
    "n_ctx": 32,
    "batch_size": 4,
    "keep_optimizer": "last",
}


def test_the_shipped_suites_are_specs_with_their_documented_digests():
    assert catalogue.FULL.digest() == "7cdb30f57c9a"  # the suite docs/results.md describes
    assert catalogue.QUICK.digest() == "ad5aea722ce5"
    assert catalogue.FULL.run_names() == [f"neox-2l-{d}d-seed{s}" for d in (64, 128) for s in (0, 1, 2)]
    assert catalogue.FULL.steps == 3000 and catalogue.FULL.size_steps == (("neox-2l-128d", 2000),)
    population = load_suite_spec("population")
    arms = [(s.name, s.d_model, s.n_heads) for s in population.sizes]
    assert arms == [
        ("neox-2l-64d-1h", 64, 1),
        ("neox-2l-64d-2h", 64, 2),
        ("neox-2l-64d-4h", 64, 4),
        ("neox-2l-64d-8h", 64, 8),
        ("neox-2l-128d-4h", 128, 4),
    ]
    assert population.seeds == tuple(range(24)) and len(population.run_names()) == 120
    assert [population.steps_for(s) for s in population.sizes] == [4000, 4000, 4000, 4000, 3000]
    assert population.keep_optimizer == "last"
    assert catalogue.suite_label(population) == "suite:population"


def test_a_spec_reads_seeds_sizes_and_budgets():
    cfg = suite_config_from_spec(TINY)
    assert cfg.seeds == (3, 4) and cfg.steps == 24 and cfg.size_steps == (("neox-1l-16d-4h", 16),)
    assert cfg.run_names() == [
        "neox-1l-16d-2h-seed3",
        "neox-1l-16d-2h-seed4",
        "neox-1l-16d-4h-seed3",
        "neox-1l-16d-4h-seed4",
    ]
    assert suite_config_from_spec({**TINY, "seeds": 3}).seeds == (0, 1, 2)
    assert suite_config_from_spec({**TINY, "seeds": [7, 2]}).seeds == (7, 2)
    assert suite_config_from_spec({**TINY, "lr": 1}).lr == 1.0  # an int where a float is asked
    # keep_optimizer "every" (the default) is not hashed: a spec that spells it out names the same folder
    every = {k: v for k, v in TINY.items() if k != "keep_optimizer"}
    assert (
        suite_config_from_spec(every).digest() == suite_config_from_spec({**every, "keep_optimizer": "every"}).digest()
    )
    assert suite_config_from_spec(every).digest() != suite_config_from_spec(TINY).digest()


@pytest.mark.parametrize(
    "change, message",
    [
        ({"sizes": [{"n_layers": 1, "d_model": 18, "n_heads": 4}]}, "d_model=18 does not divide into n_heads=4"),
        ({"seeds": "5..2"}, "seeds='5..2' is an empty range"),
        ({"seeds": [1, 1]}, "repeats a seed"),
        ({"seeds": -2}, r"seeds=-2 must be an integer >= 1"),
        ({"heads": 4}, r"unknown key 'heads'; valid: sizes, seeds, steps, checkpoint_every"),
        ({"keep_optimizer": "some"}, "keep_optimizer='some'; valid: every, last"),
        ({"lr": "fast"}, r"lr='fast' must be a float like 0.002"),
        ({"sizes": [{"n_layers": 1, "d_model": 16}]}, "sizes\\[0\\] lacks 'n_heads'"),
        ({"sizes": [{"n_layers": 1, "d_model": 16, "n_heads": 2, "width": 3}]}, "sizes\\[0\\]: unknown key 'width'"),
        ({"sizes": [{"n_layers": 1, "d_model": 16, "n_heads": 2, "name": "<b>x</b>"}]}, "letters, digits"),
        ({"checkpoint_every": 0}, "checkpoint_every=0 must be an integer >= 1"),
    ],
)
def test_a_bad_spec_is_one_line_naming_the_value(change, message):
    with pytest.raises(ValueError, match=message) as error:
        suite_config_from_spec({**TINY, **change})
    assert "\n" not in str(error.value)


def test_suite_names_resolve_to_runs_without_training(tmp_path):
    spec = tmp_path / "tiny.yaml"
    spec.write_text(json.dumps(TINY))  # JSON is YAML
    runs = resolve_embedded(f"suite:{spec}")
    assert [run for _, run in runs] == suite_config_from_spec(TINY).run_names()
    assert resolve_embedded(f"suite:{spec}/neox-1l-16d-4h-seed4")[0][1] == "neox-1l-16d-4h-seed4"
    assert catalogue.is_embedded_name(f"suite:{spec}") and catalogue.is_embedded_name("suite:population")
    assert len(resolve_embedded("suite:population")) == 120
    with pytest.raises(ValueError, match=r"unknown run 'neox-1l-16d-4h-seed9' in suite:.*valid: neox-1l-16d-2h-seed3"):
        resolve_embedded(f"suite:{spec}/neox-1l-16d-4h-seed9")
    with pytest.raises(ValueError, match=r"not a shipped spec \(embedded, embedded-quick, population, "):
        resolve_embedded("suite:nope")
    from interp.sources.door import check_source_name

    assert check_source_name(f"suite:{spec}") == 4


def test_plan_states_runs_steps_and_disk():
    plan = plan_suite(load_suite_spec("population"))
    assert len(plan) == 120 and set(plan["status"]) <= {"to train", "trained", "interrupted"}
    small = plan[plan["size"] == "neox-2l-64d-1h"].iloc[0]
    assert (small["steps"], small["checkpoints"], small["d_head"]) == (4000, 48, 64)
    # 48 float32 weight files + one AdamW state (two tensors per parameter) of 133,376 parameters
    assert n_parameters(catalogue.SMALL) == 133_376
    assert small["disk_mb"] == round((48 + 2) * 4 * 133_376 / 1e6, 1)


def _digests(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*.safetensors"))
    }


@pytest.mark.slow
def test_a_spec_trains_on_the_local_pool_and_joblib_to_the_same_bytes(tmp_path):
    cfg = suite_config_from_spec(TINY)
    local = train_suite(cfg, root=tmp_path / "local", jobs=2, progress=False)
    assert [p.name for p in local] == cfg.run_names()
    for folder in local:  # keep_optimizer: last -> only the last checkpoint keeps its optimizer state
        last = max(int(p.name[4:]) for p in folder.glob("step*"))
        assert last == cfg.steps_for(next(s for s in cfg.sizes if folder.name.startswith(s.name)))
        assert sorted(p.parent.name for p in folder.glob("step*/optimizer.safetensors")) == [f"step{last}"]
        assert json.loads((folder / "suite.json").read_text())["config"]["keep_optimizer"] == "last"
    estimate = plan_suite(cfg, tmp_path / "local")
    assert set(estimate["status"]) == {"trained"}
    for folder, mb in zip(local, estimate["disk_mb"]):  # the estimate counts the tensors' bytes (to 0.1 MB)
        tensors = sum(p.stat().st_size for p in folder.rglob("*.safetensors")) / 1e6
        assert abs(tensors - mb) <= 0.05 + 0.02 * tensors
    joblib = train_suite(cfg, root=tmp_path / "joblib", executor="joblib", jobs=2, progress=False)
    for a, b in zip(local, joblib):
        assert _digests(a) == _digests(b) and _digests(a)
    # the runs are sources like any other
    from interp.sources import LocalSuiteSource

    source = LocalSuiteSource(local[0])
    assert source.available_steps() == list(cfg.checkpoint_steps_for(cfg.sizes[0]))


def test_train_suite_command_lists_the_plan_and_refuses_bad_input(tmp_path, monkeypatch):
    from emergence_lens.cli import app

    monkeypatch.setenv("EMERGENCE_LENS_CACHE", str(tmp_path))
    spec = tmp_path / "tiny.yaml"
    spec.write_text(json.dumps(TINY))
    runner = CliRunner()
    result = runner.invoke(app, ["train-suite", str(spec), "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "neox-1l-16d-2h-seed3" in result.output and "4 runs, 4 to train (80 steps)" in result.output
    bad = runner.invoke(app, ["train-suite", str(spec), "--executor", "slurm"])
    assert bad.exit_code == 2 and bad.output.strip().splitlines()[-1] == (
        "error: emergence train-suite: executor 'slurm'; valid: local, joblib, ray"
    )
    both = runner.invoke(app, ["train-suite", str(spec), "--quick"])
    assert both.exit_code == 2 and "--quick names the quick suite; it takes no SPEC" in both.output


def test_an_embedded_quick_run_keeps_its_name(quick_suite, monkeypatch):
    """Issue 67 item 6: a quick-suite run opened as ``embedded-quick/<run>`` is named so in its
    source (the steps dict, progress bars and the population read ``model_id``), never as the
    full suite's ``embedded/<run>``."""
    from interp.sources.door import open_sources

    _, root = quick_suite
    monkeypatch.setenv("EMERGENCE_LENS_CACHE", str(root))
    quick = open_sources(["embedded-quick/neox-2l-64d-seed1"], progress=False)
    assert [s.model_id for s in quick] == ["embedded-quick/neox-2l-64d-seed1"]
    whole = open_sources(["embedded-quick"], progress=False)
    assert [s.model_id for s in whole] == [f"embedded-quick/{run}" for run in catalogue.QUICK.run_names()]
    from interp.main_job.units import expand_sources
    from interp.sources.door import open_source

    # one run opened by its name, and the names the main job expands a suite to (its units and
    # report rows, issue 55): the name typed, never the full suite's
    assert open_source("embedded-quick/neox-2l-64d-seed1").model_id == "embedded-quick/neox-2l-64d-seed1"
    assert expand_sources(["embedded-quick"]) == [s.model_id for s in whole]
