"""The training-step axis of every capability figure (the report's, the notebooks', the scrubber's
and readiness's): linear by default, so that a jump late in training gets its share of the width
(on a log axis the quick suite's jump at steps 1800-2300 of 2400 took the right-most 8 %); log
and a zoom on the point of emergence as options (issue 58, item 5).
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

__all__ = ["STEP_SCALES", "check_step_scale", "step_axis", "x_steps"]


#: Step axes: ``"linear"`` (the default: a jump late in training gets its share of the width),
#: ``"log"`` (early training spread out; step 0 drawn at 0.5), ``"zoom"`` (linear, opened on a
#: window around the point of emergence; double-click the plot for the whole run).
STEP_SCALES = ("linear", "log", "zoom")


def check_step_scale(scale: str) -> str:
    """``scale`` if it is one of :data:`STEP_SCALES`.

    Raises:
        ValueError: any other value (the valid ones named).
    """
    if scale not in STEP_SCALES:
        raise ValueError(f"x_scale={scale!r}; valid: {', '.join(STEP_SCALES)}")
    return scale


def step_axis(fig: go.Figure, scale: str = "linear", point: tuple | None = None, steps=None, **where) -> None:
    """Training steps on ``fig``'s x axis (``where``: ``row``/``col`` of a subplot).

    Args:
        scale: one of :data:`STEP_SCALES`.
        point: ``(pre_step, post_step)`` for ``"zoom"`` (without one, zoom is the linear axis).
        steps: the steps drawn (the zoom window is clipped to them).
    """
    check_step_scale(scale)
    if scale == "log":
        fig.update_xaxes(
            type="log",
            title_text="training step (log; step 0 drawn at 0.5)",
            tickvals=[0.5, 1, 10, 100, 1000, 10000, 100000],
            ticktext=["0", "1", "10", "100", "1k", "10k", "100k"],
            minor=dict(showgrid=False, ticks=""),
            **where,
        )
        return
    fig.update_xaxes(type="linear", title_text="training step", **where)
    if scale == "zoom" and point is not None and None not in point:
        pre, post = point
        width = max(post - pre, 1)
        lo, hi = pre - 4 * width, post + 4 * width
        if steps is not None and len(steps):
            lo, hi = max(lo, float(min(steps))), min(hi, float(max(steps)))
        fig.update_xaxes(
            range=[lo, hi],
            title_text="training step (zoomed on the point of emergence; double-click: whole run)",
            **where,
        )


def x_steps(steps: pd.Series, scale: str) -> pd.Series:
    """The x values of ``steps`` on a ``scale`` axis (step 0 at 0.5 on a log axis)."""
    return steps.clip(lower=0.5) if scale == "log" else steps
