"""The population page's figures (plotly): Kaplan-Meier curves per arm, the point of emergence per
seed, each arm's seed x step heatmap of greedy accuracy.

Every label that comes from data (arm and run names) goes through
:func:`interp.report.figures.plot_text` first (plotly reads its strings as a small HTML subset);
:func:`interp.population.result.figure_html` turns a figure into the ``<div>`` a page inlines.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio

from interp.report.figures import plot_text

__all__ = ["heatmap_figure", "km_figure", "strip_figure"]

_PALETTE = pio.templates["plotly"].layout.colorway


def _rgba(colour: str, alpha: float) -> str:
    colour = colour.lstrip("#")
    r, g, b = (int(colour[i : i + 2], 16) for i in (0, 2, 4))
    return f"rgba({r},{g},{b},{alpha})"


def km_figure(result) -> go.Figure:
    """Kaplan-Meier curves per arm: survival (probability of not yet having emerged) vs step, as
    step functions with pointwise 95 % bands and a tick at each censored run's budget."""
    fig = go.Figure()
    for i, arm in enumerate(result.arms["arm"]):
        colour = _PALETTE[i % len(_PALETTE)]
        km = result.km[result.km["arm"] == arm]
        end = float(result.arms.loc[result.arms["arm"] == arm, "budget"].iloc[0])
        steps = [*km["step"].astype(float), max(end, float(km["step"].max()))]
        last = km.iloc[-1]
        surv, lo, hi = (
            [*km[c], last[c]] for c in ("survival", "survival_lo", "survival_hi")
        )  # the curve held to the budget
        name = plot_text(arm)
        band = {"mode": "lines", "line": {"width": 0, "shape": "hv"}, "showlegend": False, "hoverinfo": "skip"}
        fig.add_trace(go.Scatter(x=steps, y=hi, legendgroup=name, **band))  # the band: hi, then lo filled up to it
        fig.add_trace(
            go.Scatter(x=steps, y=lo, legendgroup=name, fill="tonexty", fillcolor=_rgba(colour, 0.15), **band)
        )
        fig.add_trace(
            go.Scatter(
                x=steps,
                y=surv,
                mode="lines",
                line={"shape": "hv", "color": colour, "width": 2},
                name=name,
                legendgroup=name,
                hovertemplate=f"{name}<br>step %{{x}}<br>not yet emerged %{{y:.3f}}<extra></extra>",
            )
        )
        censored = result.runs[(result.runs["arm"] == arm) & ~result.runs["emerged"]]
        if len(censored):
            at = censored["censored_at"].to_numpy(float)
            fig.add_trace(
                go.Scatter(
                    x=at,
                    y=[_survival_at(km, t) for t in at],
                    mode="markers",
                    marker={"symbol": "line-ns-open", "size": 14, "color": colour, "line": {"width": 2}},
                    name=f"{name}: censored",
                    legendgroup=name,
                    showlegend=False,  # one key for every arm's ticks, below
                    text=[plot_text(r) for r in censored["run"]],
                    hovertemplate="%{text}<br>censored at step %{x}<extra></extra>",
                )
            )
    if (~result.runs["emerged"]).any():  # the ticks' key, once, in grey: the tick's colour is its arm's
        fig.add_trace(
            go.Scatter(
                x=[None],
                y=[None],
                mode="markers",
                marker={"symbol": "line-ns-open", "size": 14, "color": "#666", "line": {"width": 2}},
                name="censored run (tick at its budget)",
                hoverinfo="skip",
            )
        )
    fig.update_layout(
        template="plotly_white",
        height=420,
        margin={"l": 60, "r": 20, "t": 30, "b": 50},
        xaxis_title="training step",
        yaxis={"title": "not yet emerged (probability)", "range": [-0.02, 1.04]},
        legend={"orientation": "h", "y": -0.2},
    )
    return fig


def _survival_at(km: pd.DataFrame, step: float) -> float:
    before = km[km["step"] <= step]
    return float(before["survival"].iloc[-1]) if len(before) else 1.0


def strip_figure(result) -> go.Figure:
    """E per seed, one column per arm (jittered by seed order); censored runs as open triangles
    at their budget; each arm's median E with its 95 % interval as a black diamond and bar."""
    fig = go.Figure()
    arms = list(result.arms["arm"])
    median_shown = False
    for i, arm in enumerate(arms):
        colour = _PALETTE[i % len(_PALETTE)]
        rows = result.runs[result.runs["arm"] == arm]
        jitter = np.linspace(-0.25, 0.25, len(rows)) if len(rows) > 1 else np.zeros(1)
        x = i + jitter
        for emerged, symbol, label in ((True, "circle", "E"), (False, "triangle-up-open", "censored at budget")):
            pick = (rows["emerged"] == emerged).to_numpy()
            if not pick.any():
                continue
            y = rows["E"] if emerged else rows["censored_at"]
            fig.add_trace(
                go.Scatter(
                    x=x[pick],
                    y=y.to_numpy(float)[pick],
                    mode="markers",
                    marker={"symbol": symbol, "size": 9, "color": colour, "line": {"width": 1.5, "color": colour}},
                    name=plot_text(f"{arm}: {label}"),
                    text=[plot_text(f"{r} (seed {s})") for r, s in zip(rows["run"][pick], rows["seed"][pick])],
                    hovertemplate="%{text}<br>%{y} steps<extra></extra>",
                )
            )
        arm_row = result.arms.iloc[i]
        if not math.isnan(arm_row["median_E"]):
            hi = arm_row["median_E_hi"] if math.isfinite(arm_row["median_E_hi"]) else arm_row["budget"]
            lo = arm_row["median_E_lo"]
            fig.add_trace(
                go.Scatter(
                    x=[i + 0.38],
                    y=[arm_row["median_E"]],
                    mode="markers",
                    marker={"symbol": "diamond", "size": 11, "color": "black"},
                    error_y={
                        "type": "data",
                        "symmetric": False,
                        "array": [hi - arm_row["median_E"]],
                        "arrayminus": [arm_row["median_E"] - lo],
                        "color": "black",
                    },
                    name="median E (95 % CI)",
                    legendgroup="median",
                    showlegend=not median_shown,
                    hovertemplate=plot_text(arm) + "<br>median %{y} steps<extra></extra>",
                )
            )
            median_shown = True
    fig.update_layout(
        template="plotly_white",
        height=420,
        margin={"l": 60, "r": 20, "t": 30, "b": 50},
        xaxis={
            "tickmode": "array",
            "tickvals": list(range(len(arms))),
            "ticktext": [plot_text(a) for a in arms],
            "range": [-0.6, len(arms) - 0.4],
        },
        yaxis_title="point of emergence E (steps)",
        legend={"orientation": "h", "y": -0.2},
    )
    return fig


def heatmap_figure(result, arm: str) -> go.Figure:
    """One arm's capability: greedy accuracy (the quantity E is read from) per seed (rows) and
    checkpoint step (columns), p(answer) in the hover, each run's E marked by a white diamond."""
    curves = result.curves[result.curves["arm"] == arm]
    runs = result.runs[result.runs["arm"] == arm]
    labels = {r: plot_text(f"{r} (seed {s})") for r, s in zip(runs["run"], runs["seed"])}
    grid = curves.pivot_table(index="run", columns="step", values="accuracy", aggfunc="first")
    grid = grid.reindex([r for r in runs["run"] if r in grid.index])
    p_answer = curves.pivot_table(index="run", columns="step", values="p_answer", aggfunc="first")
    p_answer = p_answer.reindex(index=grid.index, columns=grid.columns)
    steps = [int(s) for s in grid.columns]
    fig = go.Figure(
        go.Heatmap(
            z=grid.to_numpy(float),
            x=steps,
            y=[labels[r] for r in grid.index],
            zmin=0,
            zmax=1,
            colorscale="Viridis",
            colorbar={"title": "greedy<br>accuracy"},
            customdata=p_answer.to_numpy(float),
            hovertemplate="%{y}<br>step %{x}<br>greedy accuracy %{z:.3f}<br>p(answer) %{customdata:.3f}<extra></extra>",
        )
    )
    emerged = runs[runs["emerged"]]
    fig.add_trace(
        go.Scatter(
            x=emerged["E"].to_numpy(float),
            y=[labels[r] for r in emerged["run"]],
            mode="markers",
            marker={"symbol": "diamond", "size": 10, "color": "white", "line": {"width": 1, "color": "black"}},
            name="point of emergence E",
            hovertemplate="%{y}<br>E = step %{x}<extra></extra>",
            showlegend=True,
        )
    )
    fig.update_layout(
        template="plotly_white",
        title=plot_text(f"{arm}: greedy accuracy per seed and step"),
        height=max(240, 60 + 26 * len(grid)),
        margin={"l": 180, "r": 20, "t": 50, "b": 50},
        xaxis={"title": "training step"},
        legend={"orientation": "h", "y": 1.02, "x": 1, "xanchor": "right", "yanchor": "bottom"},
    )
    return fig
