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
