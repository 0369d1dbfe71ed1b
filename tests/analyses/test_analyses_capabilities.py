"""analyses/capabilities.py at CI scale: every byte-tokenizer task on the quick suite, one point
of emergence per (run, task), and the comparison with in-context repetition."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch


def test_capabilities_on_the_quick_suite(quick_suite, tmp_path, monkeypatch):
    from analyses import capabilities

    runs, root = quick_suite
    monkeypatch.setenv("EMERGENCE_LENS_CACHE", str(root))
    torch.set_num_threads(1)
    out = tmp_path / "capabilities"
    overlap = capabilities.main(["--suite", "embedded-quick", "--out", str(out), "--n-prompts", "32"])
    tasks = ["repetition", "token-repetition", "pattern-completion"]
    assert capabilities.byte_tasks() == tasks  # IOI is left out: the byte tokenizer cannot run it
    points = pd.read_csv(out / "points.csv")
    assert len(points) == len(runs) * len(tasks) and set(points["task"]) == set(tasks)
    capability = pd.read_csv(out / "capability.csv")
    # a full scan per (run, task): every task is scored at the same steps
    steps = capability.groupby(["model", "seed", "task"])["step"].apply(tuple)
    assert steps.groupby(level=[0, 1]).nunique().eq(1).all()
    assert len(overlap) == len(runs) * 2 and set(overlap["task"]) == {"repetition", "pattern-completion"}
    heads = pd.read_csv(out / "report" / "heads.csv")
    for _, row in overlap.iterrows():
        ref = points[
            (points.model == row.model) & (points.seed == row.seed) & (points.task == "token-repetition")
        ].iloc[0]
        assert (pd.isna(row["reference_post_step"]) and pd.isna(ref["post_step"])) or row["reference_post_step"] == ref[
            "post_step"
        ]
        curve = capability[
            (capability.model == row.model) & (capability.seed == row.seed) & (capability.task == row.task)
        ]
        rises = curve.sort_values("step")["p_answer"].diff()
        assert row["steepest_rise"] == pytest.approx(rises.max()) and rises.max() > 0
        assert row["steepest_post_step"] == int(curve.sort_values("step")["step"].iloc[int(np.nanargmax(rises.values))])
        if pd.notna(row["head_overlap"]):  # both emerged: the overlap is what the head tables say

            def top(task):
                return set(
                    heads[(heads.model == row.model) & (heads.seed == row.seed) & (heads.task == task)]  # noqa: B023
                    .nsmallest(2, "rank")
                    .apply(lambda h: f"L{h.layer}H{h.head}", axis=1)
                )

            assert row["head_overlap"] == pytest.approx(len(top(row["task"]) & top("token-repetition")) / 2)
            assert row["same_step"] == (row["post_step"] == row["reference_post_step"])
    block = (out / "capabilities.md").read_text()
    assert "IOI" in block and "word-piece vocabulary" in block
    assert (out / "report" / "report.html").read_text().count("<h2>Task: ") == len(tasks)
    # the report opens offline in a real browser, one section per task, every figure drawn
    from browser import visit
    from tests.interp.report.test_report_browser import _require_browser

    _require_browser()
    result = visit(out / "report" / "report.html", tmp_path / "capabilities.png")
    assert result.ready and not result.blocked and not result.page_errors and not result.console_errors
    assert all(fig["svg"] for fig in result.state["figs"]) and len(result.state["figs"]) >= len(tasks) * len(runs)
