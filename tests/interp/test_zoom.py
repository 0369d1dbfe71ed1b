"""Zoom: exact re-training between stored checkpoints into an overlay; dense crossing rule."""

import dataclasses
import json
import shutil

import pytest
from safetensors.torch import load_file, save_file

from interp.core.training_state import NotResumableError, has_training_state
from interp.emergence import held_crossing
from interp.sources import HubSource, LocalSuiteSource, embedded
from interp.zoom import ZoomMismatchError, _max_abs_diff, default_every, overlay_steps, stored_steps, zoom, zoom_plan
from tiny_suite import TINY, tiny_suite

CFG = tiny_suite(seed=5)


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory):
    """One tiny run, trained as the suite trains (a pinned worker), once for the module."""
    from interp.core.kernel_pins import run_pinned

    base = tmp_path_factory.mktemp("zoom_tiny_run") / "run"
    run_pinned(embedded._train_to_folder, TINY, 5, CFG, base)
    return base


@pytest.fixture(scope="module")
def last_only_run(tmp_path_factory):
    """The same tiny run trained keeping the last checkpoint's optimizer state only (the
    population's ``keep_optimizer: last``)."""
    from interp.core.kernel_pins import run_pinned

    base = tmp_path_factory.mktemp("zoom_last_only") / "run"
    run_pinned(embedded._train_to_folder, TINY, 5, dataclasses.replace(CFG, keep_optimizer="last"), base)
    return base


@pytest.fixture()
def tiny_run(trained_run, tmp_path):
    """A copy of the module's trained run (each test writes its own overlay)."""
    run = tmp_path / "run"
    shutil.copytree(trained_run, run)
    return run


def test_zoom_reproduces_the_stored_end_point_and_writes_an_overlay(tiny_run):
    result = zoom(tiny_run, 8, 16, every=2)
    assert result.max_abs_diff == 0.0 and result.trained_steps == 8 and result.threads == 1
    assert result.new_steps == [10, 12, 14] == overlay_steps(tiny_run)
    # the base schedule is untouched; the overlay is opt-in
    assert LocalSuiteSource(tiny_run).available_steps() == list(CFG.checkpoint_steps)
    assert LocalSuiteSource(tiny_run, include_zoom=True).available_steps() == [0, 1, 2, 4, 8, 10, 12, 14, 16]
    index = json.loads((tiny_run / "zoom" / "zoom.json").read_text())[0]
    assert (index["max_abs_diff"], index["resumed_from"]) == (0.0, 8)
    assert not [p for p in (tiny_run / "zoom").iterdir() if p.name.startswith(".tmp")]
    # a zoomed step is itself resumable: zooming inside the overlay re-trains 12 -> 14 exactly
    inner = zoom(tiny_run, 12, 14, every=1)
    assert inner.new_steps == [13] and inner.max_abs_diff == 0.0
    assert stored_steps(tiny_run) == [0, 1, 2, 4, 8, 10, 12, 13, 14, 16]


def test_zoom_retrains_a_last_only_run_from_step_0_bit_for_bit(last_only_run, trained_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(last_only_run, run)
    assert [s for s in stored_steps(run) if has_training_state(run / f"step{s}")] == [16]
    plan = zoom_plan(run, 8, 16)
    recorded = json.loads((run / "suite.json").read_text())["train_seconds"]
    assert (plan.start, plan.steps) == (0, 16)
    assert plan.seconds == (pytest.approx(recorded) if recorded else None)  # 16 of the run's 16 steps
    said = []
    result = zoom(run, 8, 16, every=2, echo=said.append)
    assert said == [plan.line()] and "16 steps from step 0" in said[0]
    # re-trained from the seed: every stored step passed equals the kept one bit for bit
    assert (result.resumed_from, result.trained_steps, result.max_abs_diff) == (0, 16, 0.0)
    assert result.checked_steps == [1, 2, 4, 8, 16] and result.new_steps == [10, 12, 14]
    # the zoomed steps equal those of the run that kept every state (keep_optimizer changes no weight)
    every_state = tmp_path / "every"
    shutil.copytree(trained_run, every_state)
    zoom(every_state, 8, 16, every=2)
    for step in (10, 12, 14):
        assert _max_abs_diff(run / "zoom" / f"step{step}", every_state / "zoom" / f"step{step}") == 0.0
    # the checked steps now keep their optimizer state: the next zoom starts at pre
    assert has_training_state(run / "step8") and has_training_state(run / "step4")
    assert zoom_plan(run, 4, 8).start == 4 and zoom(run, 4, 8, every=2).trained_steps == 4
    # without keep_states nothing is added beside the stored steps
    bare = tmp_path / "bare"
    shutil.copytree(last_only_run, bare)
    assert zoom(bare, 2, 4, steps=[3], keep_states=False).resumed_from == 0
    assert not has_training_state(bare / "step2")
    # the command line says the plan before it trains; the nearest resumable step before 8 is the
    # zoomed step 3 (a zoomed step keeps its optimizer state)
    from typer.testing import CliRunner

    from emergence_lens.cli import app

    done = CliRunner().invoke(app, ["zoom", str(bare), "--pre", "8", "--post", "16", "--every", "4"])
    assert done.exit_code == 0, done.output
    first, last = done.output.strip().splitlines()
    assert first.startswith("bare: re-training 13 steps from step 3 (step 8 keeps no optimizer state")
    assert "re-trained 13 steps (3 -> 16)" in last and "max |diff| at step 16: 0 " in last


def test_zoom_refuses_steps_when_the_end_point_differs(tiny_run):
    weights = load_file(str(tiny_run / "step16" / "model.safetensors"))
    name = sorted(weights)[0]
    weights[name] = weights[name] + 1e-3
    save_file(weights, str(tiny_run / "step16" / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(ZoomMismatchError, match=r"max \|diff\| 0\.001"):
        zoom(tiny_run, 8, 16, every=2)
    assert overlay_steps(tiny_run) == []
    # above the stated tolerance only: 1e-3 is accepted at tolerance 2e-3
    assert zoom(tiny_run, 8, 16, every=4, tolerance=2e-3).new_steps == [12]


def test_bad_input_and_unresumable_sources(tiny_run, tmp_path):
    with pytest.raises(ValueError, match="must be before"):
        zoom(tiny_run, 16, 8)
    with pytest.raises(ValueError, match="nearest stored steps"):
        zoom(tiny_run, 3, 8)
    with pytest.raises(NotResumableError, match="no optimizer state"):
        zoom(HubSource("EleutherAI/pythia-14m"), 0, 1000)
    foreign = tmp_path / "foreign"
    shutil.copytree(tiny_run, foreign)
    meta = json.loads((foreign / "suite.json").read_text())
    del meta["resumable"]
    (foreign / "suite.json").write_text(json.dumps(meta))
    with pytest.raises(NotResumableError, match="cannot re-train"):
        zoom(foreign, 8, 16)


def test_default_spacing_gives_at_least_ten_new_checkpoints():
    assert default_every(1300, 1400) == 5  # 19 new steps; 10 would give only 9
    assert default_every(1300, 1310) == 1
    assert default_every(0, 1000) == 50
    for pre, post in [(0, 37), (100, 200), (1230, 1240)]:
        every = default_every(pre, post)
        assert len(range(pre + every, post, every)) >= min(10, post - pre - 1)


def test_held_crossing_needs_the_crossing_to_hold():
    steps = [1300, 1310, 1320, 1330, 1340, 1350, 1360, 1370]
    noisy = [0.20, 0.52, 0.41, 0.47, 0.61, 0.56, 0.58, 0.64]
    assert held_crossing(steps, noisy, hold=2) == (1330, 1340)
    assert held_crossing(steps, noisy, hold=0) == (1300, 1310)  # the first touch, without the rule
    assert held_crossing(steps, [0.1] * 8) == (None, None)
    assert held_crossing(steps, [0.9] * 8) == (None, 1300)
    with pytest.raises(ValueError, match="hold"):
        held_crossing(steps, noisy, hold=-1)


def test_dense_point_on_the_quick_suite(quick_suite, tmp_path):
    from interp.dense import dense_point

    runs, _ = quick_suite
    run = tmp_path / runs[-1].name
    shutil.copytree(runs[-1], run, ignore=shutil.ignore_patterns("zoom"))
    point = dense_point(run, resolution=10, n_prompts=256)
    coarse = point.zooms[0]
    # one zoom into the 100-step bracket, re-trained from the stored state bit for bit
    assert (coarse.post - coarse.pre, coarse.every, coarse.max_abs_diff) == (100, 10, 0.0)
    assert point.retrained_steps == 100 and len(overlay_steps(run)) == 9
    assert coarse.pre <= point.pre_step and point.post_step - point.pre_step == 10 and point.post_step <= coarse.post
    # the noise rule: post and the next two checkpoints at or above the threshold
    curve = point.evaluations.set_index("step")["accuracy"]
    after = [s for s in curve.index if s >= point.post_step][:3]
    assert len(after) == 3 and (curve[after] >= 0.5).all()
    assert point.jump > 0 and not point.jump_too_small
    assert LocalSuiteSource(run).available_steps() == list(embedded.QUICK.checkpoint_steps)


def test_store_steps_retrains_only_the_intervals_holding_missing_steps(tiny_run):
    from interp.zoom import store_steps

    results = store_steps(tiny_run, [3, 9, 11, 8])
    assert [(r.pre, r.post, r.new_steps) for r in results] == [(2, 4, [3]), (8, 16, [9, 11])]
    assert all(r.max_abs_diff == 0.0 for r in results)
    assert store_steps(tiny_run, [3, 9]) == []  # all stored now
    with pytest.raises(ValueError, match="outside"):
        store_steps(tiny_run, [17])


def test_cli_zoom_and_its_one_line_errors(tiny_run):
    from typer.testing import CliRunner

    from emergence_lens.cli import app

    runner = CliRunner()
    done = runner.invoke(app, ["zoom", str(tiny_run), "--pre", "8", "--post", "16", "--every", "4"])
    assert done.exit_code == 0, done.output
    assert "max |diff| at step 16: 0 " in done.output and "[12]" in done.output
    for args, message in [
        (["--pre", "16", "--post", "8"], "must be earlier than"),
        (["--pre", "5", "--post", "16"], "nearest stored steps"),
    ]:
        done = runner.invoke(app, ["zoom", str(tiny_run), *args])
        assert done.exit_code == 2 and message in done.output and "Traceback" not in done.output
    done = runner.invoke(app, ["zoom", "EleutherAI/pythia-14m", "--pre", "0", "--post", "1000"])
    assert done.exit_code == 2 and "carry no optimizer state" in done.output
    assert len(done.output.strip().splitlines()) == 1


@pytest.mark.slow
def test_zoomed_steps_are_reachable_from_the_command_line(tiny_run, tmp_path, monkeypatch):
    """After `emergence zoom`, curve --steps, rank-heads and decompose take the zoomed steps, and
    the "nearest" hint names them (a local suite folder, then an embedded name)."""
    import pandas as pd
    from typer.testing import CliRunner

    from emergence_lens.cli import app

    runner = CliRunner()
    zoomed = runner.invoke(app, ["zoom", str(tiny_run), "--pre", "8", "--post", "16", "--every", "2"])
    assert zoomed.exit_code == 0 and "stored 3 new steps every 2: [10, 12, 14]" in zoomed.output, zoomed.output
    curve = runner.invoke(
        app, ["curve", str(tiny_run), "--steps", "10,14", "--n-prompts", "4", "--out", str(tmp_path / "c")]
    )
    assert curve.exit_code == 0, curve.output
    assert list(pd.read_csv(tmp_path / "c" / "emergence.csv")["step"]) == [10, 14]
    for command in ("rank-heads", "decompose"):
        out = tmp_path / command
        ok = runner.invoke(
            app, [command, str(tiny_run), "--pre", "10", "--post", "14", "--n-prompts", "6", "--out", str(out)]
        )
        assert ok.exit_code == 0, ok.output
        missing = runner.invoke(app, [command, str(tiny_run), "--pre", "11", "--post", "14"])
        assert missing.exit_code == 2 and "no checkpoint at step 11; nearest: 10, 12" in missing.output, missing.output
    # An embedded run: its overlay's steps pass the pre-training check and name the nearest ones
    # (nothing is trained or loaded: the step is refused before that).
    from interp.sources.catalogue import resolve_embedded, suite_dir

    monkeypatch.setenv("EMERGENCE_LENS_CACHE", str(tmp_path / "cache"))
    ((cfg, run),) = resolve_embedded("embedded-quick/neox-2l-64d-seed1")
    for step in (1132, 1134):
        (suite_dir(cfg) / run / "zoom" / f"step{step}").mkdir(parents=True)
    refused = runner.invoke(app, ["rank-heads", "embedded-quick/neox-2l-64d-seed1", "--pre", "1133", "--post", "1200"])
    assert refused.exit_code == 2 and "has no checkpoint at step 1133; nearest: 1132, 1134" in refused.output, (
        refused.output
    )
    import typer

    commands = typer.main.get_command(app).commands
    for command, option in (("rank-heads", "pre"), ("decompose", "pre"), ("curve", "steps"), ("zoom", "pre")):
        help_text = next(p.help for p in commands[command].params if p.name == option)
        assert "zoom" in help_text, (command, help_text)  # stated in --help
