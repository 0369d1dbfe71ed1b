"""Figures that show the jump (issue 58, item 5; issue 55, item 3): a linear step axis by default
(log and a zoom on the point of emergence as options), head-score charts that draw the top heads
and leave the rest faint or on demand."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from interp.report.figures import run_capability_figure
from interp.report.head_view import head_scores_figure, top_score_heads
from interp.report.step_axis import STEP_SCALES

STEPS = list(range(0, 2500, 100))
CURVE = pd.DataFrame(
    {"step": STEPS, "accuracy": [0.1] * 18 + [0.3, 0.7] + [0.8] * 5, "p_answer": [0.05] * 18 + [0.2, 0.5] + [0.6] * 5}
)


def test_a_runs_curve_is_drawn_on_a_linear_step_axis_by_default():
    fig = run_capability_figure(CURVE, 1800, 1900)
    assert fig.layout.xaxis.type == "linear" and list(fig.data[0].x) == STEPS  # step 0 at 0, not 0.5
    shaded = [s for s in fig.layout.shapes if s.type == "rect"]
    assert (shaded[0].x0, shaded[0].x1) == (1800, 1900)
    log = run_capability_figure(CURVE, 1800, 1900, x_scale="log")
    assert log.layout.xaxis.type == "log" and log.data[0].x[0] == 0.5
    zoom = run_capability_figure(CURVE, 1800, 1900, x_scale="zoom")
    # four jumps' widths either side of the point, clipped to the run
    assert zoom.layout.xaxis.type == "linear" and tuple(zoom.layout.xaxis.range) == (1400, 2300)
    with pytest.raises(ValueError, match=r"x_scale='logarithmic'; valid: " + ", ".join(STEP_SCALES)):
        run_capability_figure(CURVE, 1800, 1900, x_scale="logarithmic")


def test_the_head_score_chart_draws_the_top_heads_and_keeps_the_rest_on_demand():
    rows = []
    rng = np.random.default_rng(0)
    for step in (1700, 1800, 1900, 2000):
        for layer in range(2):
            for head in range(4):
                for score in ("previous_token", "prefix_matching", "copying"):
                    value = 0.05 + 0.02 * rng.random()
                    if (layer, head, score) == (0, 2, "previous_token"):
                        value = 0.9
                    if (layer, head, score) == (1, 3, "prefix_matching") and step >= 1900:
                        value = 0.8
                    rows.append((step, layer, head, score, value))
    scores = pd.DataFrame(rows, columns=["step", "layer", "head", "score", "value"])
    top = top_score_heads(scores)
    assert top[(0, 2)] == (0, "previous_token") and top[(1, 3)][1] == "prefix_matching" and len(top) <= 6
    fig = head_scores_figure(scores)
    shown = [t for t in fig.data if t.visible is not False and t.visible != "legendonly"]
    named = {t.name for t in shown}
    assert {"L0H2 previous_token", "L1H3 prefix_matching"} <= named
    assert len(shown) == len(top)  # one line per top head, in its leading score
    rest = [t for t in fig.data if t.visible == "legendonly"]
    assert len(rest) == 8 * 3 - len(top) and sum(bool(t.showlegend) for t in rest) == 1  # one legend entry
