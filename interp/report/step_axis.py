"""The training-step axis of every capability figure (the report's, the notebooks', the scrubber's
and readiness's): linear by default, so that a jump late in training gets its share of the width
(on a log axis the quick suite's jump at steps 1800-2300 of 2400 took the right-most 8 %); log
and a zoom on the point of emergence as options (issue 58, item 5).
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

__all__ = ["STEP_SCALES", "check_step_scale", "fit_step_ranges", "step_axis", "x_steps"]


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


def fit_step_ranges(fig: go.Figure, scale: str = "linear", pad: float = 0.02) -> None:
    """End every step axis of ``fig`` where its data end: each x axis's range is the steps its
    traces draw (those of every axis it is shared with, ``matches``), widened by ``pad`` of the
    span each side so the end markers are whole (on a log axis, in log10 units). Plotly's own
    autorange also fits markers, annotations and arrows in pixels, and ran an axis on to 10k steps
    at 800 px where the data stop at 3k (issue 71). Axes without data are left alone.
    """
    import numpy as np

    axes = {axis.plotly_name.replace("axis", ""): axis for axis in fig.select_xaxes()}  # "x", "x2", ...
    groups: dict[str, list[float]] = {}
    for trace in fig.data:
        where = getattr(trace, "xaxis", None) or "x"
        xs = [float(x) for x in (trace.x if trace.x is not None else ()) if x is not None and x == x]
        if xs and where in axes:
            groups.setdefault(axes[where].matches or where, []).extend(xs)
    for name, axis in axes.items():
        drawn = groups.get(name)
        if axis.matches or not drawn:  # a shared axis follows its root's range (set on both, plotly.js
            continue  # stopped fitting the y axes to their data)
        lo, hi = min(drawn), max(drawn)
        if scale == "log":
            lo, hi = np.log10(max(lo, 0.5)), np.log10(max(hi, 0.5))
        width = (hi - lo) or 1.0
        axis.range = [lo - pad * width, hi + pad * width]
