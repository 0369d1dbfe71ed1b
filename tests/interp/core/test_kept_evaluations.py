"""Evaluations kept for the process (interp.core.kept, issue 58 item 2) and the progress line that
says so (interp.core.progress, item 3): a second identical question loads no checkpoint."""

from __future__ import annotations

import pandas as pd
import pytest

from interp.core.kept import KEPT
from interp.emergence import StepEvaluator, full_scan, scan_emergence
from interp.sources import LocalSuiteSource
from interp.tasks import RepetitionTask


def _counting(source) -> list[int]:
    """Record every step ``source`` loads (a list that grows as it loads)."""
    loads: list[int] = []
    original = source.load

    def load(step, device=None):
        loads.append(step)
        return original(step, device=device)

    source.load = load
    return loads


def test_a_second_identical_question_loads_no_checkpoint(tiny_local_suite, capsys):
    first_source = LocalSuiteSource(tiny_local_suite)
    batch = RepetitionTask(n_prompts=8, length=6).build(first_source.tokenizer())
    first_loads = _counting(first_source)
    first = full_scan(first_source, batch, progress=False)
    assert first_loads == [0, 100, 200] and len(KEPT) == 6  # per step: the capability and the shape
    # another source object on the same weights, the same prompts: every score is kept
    again = LocalSuiteSource(tiny_local_suite)
    loads = _counting(again)
    evaluator = StepEvaluator(again, batch)
    point = scan_emergence(again, batch, evaluator=evaluator, progress=True)
    assert loads == [] and evaluator.reused == [0, 100, 200]
    pd.testing.assert_frame_equal(evaluator.table(), first)
    assert list(point.evaluations["accuracy"]) == list(first["accuracy"])
    # the call said so, in its progress line (standard error outside a kernel; plain lines here,
    # where it is not a terminal)
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert "3/3" in last and "3 kept" in last
    # another prompt set is another question: every step is loaded again
    other = RepetitionTask(n_prompts=8, length=6, seed=1).build(again.tokenizer())
    fresh = StepEvaluator(again, other)
    full_scan(again, other, evaluator=fresh, progress=True)
    assert loads == [0, 100, 200] and fresh.reused == []
    assert "kept" not in capsys.readouterr().err


def test_the_progress_line_counts_the_kept_scores(tiny_local_suite, capsys):
    source = LocalSuiteSource(tiny_local_suite)
    batch = RepetitionTask(n_prompts=8, length=6).build(source.tokenizer())
    full_scan(source, batch, progress=False)
    assert capsys.readouterr().err == ""  # progress=False draws nothing
    full_scan(LocalSuiteSource(tiny_local_suite), batch, progress=True)
    err = capsys.readouterr().err
    last = err.strip().splitlines()[-1]
    assert "\r" not in err  # not a terminal: plain lines (interp.core.progress.LineProgress)
    assert last.startswith(f"{source.model_id}: 3/3 checkpoints (100 %)") and last.endswith("; 3 kept")


def test_changed_weights_are_a_new_question(tiny_local_suite, tmp_path):
    import shutil

    from conftest import save_tiny_neox

    copy = tmp_path / "suite"
    shutil.copytree(tiny_local_suite, copy)
    source = LocalSuiteSource(copy)
    batch = RepetitionTask(n_prompts=8, length=6).build(source.tokenizer())
    full_scan(source, batch, progress=False)
    save_tiny_neox(copy / "step200", seed=7)  # new weights at step 200: a new digest, measured anew
    shutil.copytree(copy / "step0", copy / "step300")  # step 0's weights under another step: kept
    changed = LocalSuiteSource(copy)
    loads = _counting(changed)
    evaluator = StepEvaluator(changed, batch)
    for step in (200, 100, 300):
        evaluator(step)
    assert loads == [200] and evaluator.reused == [100, 300]
    assert evaluator.scores[300] == evaluator(0)


@pytest.mark.slow
def test_population_and_scrubber_reuse_the_scan(tiny_local_suite):
    """The notebook's order: a scan, then the population and the scrubber twice on the same run."""
    from interp.population.collect import population
    from interp.scrubbing import scrub_data

    source = LocalSuiteSource(tiny_local_suite)
    task = RepetitionTask(n_prompts=8, length=6)
    full_scan(source, task.build(source.tokenizer()), progress=False)
    pop_source = LocalSuiteSource(tiny_local_suite)
    loads = _counting(pop_source)
    result = population([pop_source], task=task, progress=False)
    assert loads == []  # the scan kept the scores and each model's shape
    assert list(result.curves["accuracy"]) == list(full_scan(source, task.build(source.tokenizer()))["accuracy"])
    scrub_source = LocalSuiteSource(tiny_local_suite)
    scrub_loads = _counting(scrub_source)
    first = scrub_data(scrub_source, task=task, progress=False)
    assert scrub_loads == [0, 100, 200]  # patterns and head scores were not kept yet
    second = scrub_data(scrub_source, task=task, progress=False)
    assert scrub_loads == [0, 100, 200]  # nothing loaded the second time
    assert (first.patterns == second.patterns).all() and first.head_scores.equals(second.head_scores)


def test_study_then_scrubber_then_readiness_reuse_every_answer(quick_suite, monkeypatch):
    """Issue 67 item 7, a notebook's order on one quick-suite run: ``run_study`` (a scan), the
    scrubber, readiness, then the study and readiness again. After the study the scrubber loads
    no checkpoint and readiness evaluates no capability curve (it loads each step once, for the
    ideal patterns only); the second study and readiness load nothing. Every answer equals the
    one each call gives alone, with nothing kept."""
    import numpy as np

    import interp.evaluator
    from interp.core.settings import StudyConfig
    from interp.main_job.runner import run_study
    from interp.readiness import readiness
    from interp.scrubbing import scrub_data
    from interp.sources.base import CheckpointSource

    folder = quick_suite[0][1]  # seed 2, which emerges (seed 1's crossing at 2300 has no room to hold)
    loads: list[int] = []
    curves: list[int] = []  # forwards that score a step's capability (interp.tasks.evaluate_prompts)
    original_load, original_score = CheckpointSource.load, interp.evaluator.evaluate_prompts

    def load(self, step, device=None):
        loads.append(step)
        return original_load(self, step, device=device)

    def score(model, batch, chunk_size=64):
        curves.append(1)
        return original_score(model, batch, chunk_size)

    monkeypatch.setattr(CheckpointSource, "load", load)
    monkeypatch.setattr(interp.evaluator, "evaluate_prompts", score)
    # a scan (the scrubber wants every step), no decomposition and few resamples: the test's time
    task, config = RepetitionTask(n_prompts=32), StudyConfig(scan=True, decompose=False, n_boot=20)

    def calls() -> dict:
        source = LocalSuiteSource(folder)
        batch = task.build(source.tokenizer())
        counts: dict = {}
        before = len(loads), len(curves)
        study = run_study([LocalSuiteSource(folder)], task, config, progress=False)
        counts["study"] = (len(loads) - before[0], len(curves) - before[1])
        before = len(loads), len(curves)
        scrub = scrub_data(source, task, config=config, ranking=study.runs[0], progress=False)
        counts["scrubber"] = (len(loads) - before[0], len(curves) - before[1])
        before = len(loads), len(curves)
        ready = readiness(source, batch, config=config, progress=False)
        counts["readiness"] = (len(loads) - before[0], len(curves) - before[1])
        return {"study": study, "scrub": scrub, "ready": ready, "counts": counts, "steps": source.searchable_steps()}

    first = calls()
    n_steps = len(first["steps"])
    assert first["counts"]["study"][0] >= n_steps and first["counts"]["study"][1] == n_steps
    assert first["counts"]["scrubber"] == (0, 0)  # patterns and head scores came with the study's scan
    assert first["counts"]["readiness"] == (n_steps, 0)  # the ideal patterns only: the curve was kept
    before = len(loads), len(curves)
    again = calls()
    assert (len(loads), len(curves)) == before  # the second time nothing at all is loaded or scored
    assert again["counts"] == {"study": (0, 0), "scrubber": (0, 0), "readiness": (0, 0)}

    # each answer as a call on its own gives it, with nothing kept: the first study was one (the
    # store starts empty); the scrubber and readiness are run again alone
    KEPT.clear()
    alone_scrub = scrub_data(
        LocalSuiteSource(folder), task, config=config, ranking=first["study"].runs[0], progress=False
    )
    KEPT.clear()
    source = LocalSuiteSource(folder)
    alone_ready = readiness(source, task.build(source.tokenizer()), config=config, progress=False)
    for name in ("points", "heads", "topk", "head_scores"):
        pd.testing.assert_frame_equal(getattr(again["study"], name), getattr(first["study"], name))
    assert first["study"].runs[0].heads is not None  # the run emerged: its ranking was kept and reused
    for kept in (first, again):
        assert np.array_equal(kept["scrub"].patterns, alone_scrub.patterns)
        pd.testing.assert_frame_equal(kept["scrub"].curve, alone_scrub.curve)
        pd.testing.assert_frame_equal(kept["scrub"].head_scores, alone_scrub.head_scores)
        pd.testing.assert_frame_equal(kept["ready"].curve, alone_ready.curve)
        assert kept["ready"].heads == alone_ready.heads and kept["ready"].point_row() == alone_ready.point_row()
