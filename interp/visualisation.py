"""Figures and the self-contained HTML report.

Plotly figures for Jupyter (``fig.show()``) and for the report; circuitsvis attention patterns
rendered with ``local_src`` (JavaScript inlined, no CDN, no network probe on render). The report
is one HTML file that opens offline: plotly's JS is inlined once, every figure reuses it.
"""

from __future__ import annotations

import html
import re
from typing import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio
from plotly.subplots import make_subplots
from torch import Tensor
from jaxtyping import Float


def capability_figure(emergence: pd.DataFrame, points: pd.DataFrame, metric: str = "accuracy",
                      threshold: float | None = 0.5) -> go.Figure:
    """Capability vs training step, one line per seed, one panel per model; points marked.

    Args:
        emergence: rows (model, seed, step, accuracy, p_answer) -- ``emergence.csv``.
        points: rows (model, seed, pre_step, post_step, emerged, ...) -- ``points.csv``.
        metric: ``"accuracy"`` (greedy, fraction) or ``"p_answer"`` (probability).
        threshold: drawn as a dashed line when ``metric == "accuracy"``.

    Raises:
        ValueError: if ``metric`` is not a column of ``emergence``.
    """
    if metric not in ("accuracy", "p_answer"):
        raise ValueError(f"metric={metric!r}; valid: 'accuracy', 'p_answer'")
    models = list(dict.fromkeys(emergence["model"]))
    fig = make_subplots(rows=1, cols=max(1, len(models)), subplot_titles=models, shared_yaxes=True)
    palette = pio.templates["plotly"].layout.colorway
    for col, model in enumerate(models, start=1):
        sub = emergence[emergence["model"] == model]
        for k, (seed, curve) in enumerate(sub.groupby("seed", sort=True)):
            curve = curve.sort_values("step")
            color = palette[k % len(palette)]
            fig.add_trace(go.Scatter(
                x=curve["step"].clip(lower=0.5), y=curve[metric], mode="lines+markers", name=f"{model} seed {seed}",
                line=dict(color=color), marker=dict(size=4), legendgroup=f"{model}-{seed}",
                hovertemplate="step %{x}<br>" + metric + " %{y:.3f}<extra></extra>",
            ), row=1, col=col)
            point = points[(points["model"] == model) & (points["seed"] == seed)]
            if len(point) and bool(point["emerged"].iloc[0]) and pd.notna(point["post_step"].iloc[0]):
                post = int(point["post_step"].iloc[0])
                y = curve.loc[curve["step"] == post, metric]
                fig.add_trace(go.Scatter(
                    x=[post], y=[y.iloc[0] if len(y) else None], mode="markers", showlegend=False,
                    marker=dict(symbol="star", size=14, color=color, line=dict(width=1, color="black")),
                    hovertemplate=f"point of emergence<br>{model} seed {seed}<br>pre {point['pre_step'].iloc[0]} → post {post}<extra></extra>",
                    legendgroup=f"{model}-{seed}",
                ), row=1, col=col)
        fig.update_xaxes(type="log", title_text="training step (log; step 0 drawn at 0.5)", row=1, col=col,
                         tickvals=[0.5, 1, 10, 100, 1000, 10000, 100000], ticktext=["0", "1", "10", "100", "1k", "10k", "100k"],
                         minor=dict(showgrid=False, ticks=""))
    if metric == "accuracy" and threshold is not None:
        fig.add_hline(y=threshold, line_dash="dash", line_color="gray")
    fig.update_yaxes(title_text="greedy accuracy" if metric == "accuracy" else "p(answer)", row=1, col=1)
    label = "Greedy accuracy" if metric == "accuracy" else "p(answer)"
    fig.update_layout(title=f"{label} per checkpoint, one line per seed (★ = post step of the point of emergence)",
                      height=420)
    return fig


def loss_curve_figure(losses: pd.DataFrame, emergence: pd.DataFrame | None = None,
                      points: pd.DataFrame | None = None, smooth: int = 25,
                      title: str = "Training loss and capability") -> go.Figure:
    """Training loss (nats, left axis) beside the capability (greedy accuracy, right axis) of one
    run, so that the loss plateau before the jump is visible; the point of emergence is shaded.

    Args:
        losses: one row per optimizer step, columns ``step``, ``loss`` (nats) -- a run's
            ``loss.csv`` (:func:`interp.embedded.loss_curve`).
        emergence: optional capability rows (``step``, ``accuracy``) of the same run.
        points: optional point-of-emergence row(s) (``pre_step``, ``post_step``, ``emerged``).
        smooth: window (steps) of the centred running mean drawn over the raw loss; 1 = none.

    Raises:
        ValueError: ``losses`` lacks ``step`` / ``loss`` columns, or ``smooth`` < 1.
    """
    if not {"step", "loss"} <= set(losses.columns):
        raise ValueError(f"losses has columns {list(losses.columns)}; expected 'step' and 'loss'")
    if smooth < 1:
        raise ValueError(f"smooth={smooth}; expected a window of at least 1 step")
    losses = losses.sort_values("step")
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    fig.add_trace(go.Scatter(x=losses["step"], y=losses["loss"], mode="lines", name="loss (per step)",
                             line=dict(color="lightgray", width=1)), secondary_y=False)
    if smooth > 1:
        fig.add_trace(go.Scatter(x=losses["step"], y=losses["loss"].rolling(smooth, center=True, min_periods=1).mean(),
                                 mode="lines", name=f"loss ({smooth}-step mean)", line=dict(color="#1f77b4")),
                      secondary_y=False)
    if emergence is not None and len(emergence):
        curve = emergence.sort_values("step")
        fig.add_trace(go.Scatter(x=curve["step"], y=curve["accuracy"], mode="lines+markers", name="accuracy",
                                 line=dict(color="#d62728"), marker=dict(size=4)), secondary_y=True)
    if points is not None and len(points) and bool(points["emerged"].iloc[0]) and pd.notna(points["post_step"].iloc[0]):
        fig.add_vrect(x0=float(points["pre_step"].iloc[0]), x1=float(points["post_step"].iloc[0]),
                      fillcolor="orange", opacity=0.25, line_width=0,
                      annotation_text="point of emergence", annotation_position="top left")
    fig.update_xaxes(title_text="training step")
    fig.update_yaxes(title_text="training loss (nats)", secondary_y=False)
    fig.update_yaxes(title_text="greedy accuracy", range=[0, 1], secondary_y=True)
    fig.update_layout(title=title, legend=dict(orientation="h", y=-0.2), height=380)
    return fig


def delta_p_heatmap(delta_p: Float[Tensor, "layer head"] | np.ndarray, title: str = "Δp per head",
                    bound: float | None = None) -> go.Figure:
    """Heatmap of ``delta_p`` (probability units) over layer × head, diverging around 0.

    ``bound`` fixes the colour range to ±bound (use one bound for heatmaps shown side by side).
    """
    values = np.asarray(delta_p.detach().cpu() if isinstance(delta_p, Tensor) else delta_p, dtype=float)
    if bound is None:
        bound = float(np.nanmax(np.abs(values))) if np.isfinite(values).any() else 1.0
    fig = go.Figure(go.Heatmap(
        z=values, x=[f"H{h}" for h in range(values.shape[1])], y=[f"L{l}" for l in range(values.shape[0])],
        colorscale="RdBu", zmid=0, zmin=-bound, zmax=bound, colorbar=dict(title="Δp"),
        hovertemplate="layer %{y} head %{x}<br>Δp %{z:+.4f}<extra></extra>",
    ))
    fig.update_layout(title=title, xaxis_title="head", yaxis_title="layer", height=320)
    fig.update_yaxes(autorange="reversed")
    return fig


def recovery_figure(topk: pd.DataFrame, title: str = "Share of the jump recovered by the top-K heads") -> go.Figure:
    """``recovered`` vs K, one line per (model, seed) when those columns exist."""
    fig = go.Figure()
    groups = topk.groupby(["model", "seed"]) if {"model", "seed"} <= set(topk.columns) else [(("", ""), topk)]
    for (model, seed), sub in groups:
        label = f"{model} seed {seed}".strip()
        fig.add_trace(go.Scatter(x=sub["k"], y=sub["recovered"], mode="lines+markers", name=label or "recovered"))
    fig.add_hline(y=1.0, line_dash="dash", line_color="gray")
    fig.update_layout(title=title, xaxis_title="K (top heads patched jointly)", yaxis_title="recovered", height=380)
    return fig


def attention_patterns_html(tokens: Sequence[str], patterns: Float[Tensor, "n query_pos key_pos"],
                            names: Sequence[str]) -> str:
    """circuitsvis ``attention_heads`` view as self-contained HTML (``local_src``, no CDN)."""
    import circuitsvis as cv

    rendered = cv.attention.attention_heads(
        attention=patterns.detach().cpu().float(), tokens=list(tokens), attention_head_names=list(names),
    )
    # circuitsvis writes its mount point as a self-closing <div .../>, which HTML parses as an
    # open div: everything after it would nest inside the widget and vanish when it renders.
    return re.sub(r'(<div id="circuits-vis-[^"]*"[^>]*?)\s*/>', r"\1></div>", rendered.local_src, count=1)


def figure_html(fig: go.Figure, include_plotlyjs: bool | str = False) -> str:
    """A plotly figure as an HTML fragment (``include_plotlyjs=True`` inlines plotly.js once)."""
    return pio.to_html(fig, full_html=False, include_plotlyjs=include_plotlyjs)


def report_html(title: str, sections: Sequence[tuple[str, str]], summary_table: pd.DataFrame | None = None,
                legend: str = "") -> str:
    """Assemble a self-contained report page.

    Args:
        title: page title.
        sections: (heading, HTML fragment) pairs in order. The first plotly fragment must carry
            the inlined plotly.js (``figure_html(fig, include_plotlyjs=True)``).
        summary_table: shown at the top as an HTML table.
        legend: HTML shown under the table (what the columns mean).
    """
    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'>",
        f"<title>{html.escape(title)}</title>",
        "<style>body{font-family:system-ui,sans-serif;margin:2em;max-width:1200px}"
        ".table-wrap{overflow-x:auto}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}"
        ".legend{color:#444;font-size:0.9em;max-width:1100px}"
        "h2{margin-top:2em;border-bottom:1px solid #ddd}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
    ]
    if summary_table is not None:
        table = summary_table.to_html(index=False, na_rep="—", float_format=lambda v: f"{v:.3f}")
        parts.append(f"<div class='table-wrap'>{table}</div>")
    if legend:
        parts.append(f"<p class='legend'>{legend}</p>")
    for heading, fragment in sections:
        parts.append(f"<h2>{html.escape(heading)}</h2>")
        parts.append(fragment)
    parts.append("</body></html>")
    return "\n".join(parts)


def checkpoint_hazards_html(checkpoints: pd.DataFrame, lines: Sequence[str]) -> str:
    """The report's checkpoint-hazard section: the hazard lines, then the rows that are not
    plainly searchable (duplicates and missing steps; ``checkpoints.csv`` has every step).

    Args:
        checkpoints: rows (model, seed, step, revision, tokens, digest, status, same_weights_as,
            listing), as :func:`interp.checkpoints.checkpoint_table` labelled per run.
        lines: :func:`interp.checkpoints.hazard_lines` of each run.
    """
    if not lines:
        n = int((checkpoints["status"] == "searchable").sum()) if len(checkpoints) else 0
        return f"<p>No hazards: {n} checkpoints, each with weights unlike every other step's, none missing.</p>"
    items = "".join(f"<li>{html.escape(line)}</li>" for line in lines)
    flagged = checkpoints[checkpoints["status"] != "searchable"].drop(columns=["listing"], errors="ignore")
    table = flagged.to_html(index=False, na_rep="—", max_rows=60)
    return (f"<ul>{items}</ul><p class='legend'>Identical weights at two steps mean at most one label is right: "
            f"every step of such a group is left out of the search unless it is the final step and its digest "
            f"equals the final model's. Every step's row: checkpoints.csv.</p><div class='table-wrap'>{table}</div>")


#: order and labels of the decomposition's components (``interp.ranking.COMPONENTS``)
COMPONENT_LABELS = {"pattern": "all patterns", "q": "all queries", "k": "all keys", "v": "all values",
                    "z": "all head outputs (hook_z)", "qk": "all QK weights", "ov": "all OV weights",
                    "mlp": "all MLP outputs", "mlp_weights": "all MLP weights", "embed": "embedding",
                    "unembed": "unembedding"}


def _run_label(row) -> str:
    return f"{row['model']} seed {row['seed']}" if pd.notna(row.get("model")) else "run"


def components_figure(components: pd.DataFrame,
                      title: str = "Share of the jump each component recovers, patched from post into pre") -> go.Figure:
    """Grouped bars: ``recovered`` per component (every head / layer), one bar per run, 95 % intervals.

    Args:
        components: rows of ``components.csv`` (``interp.ranking.decompose_jump``); the
            ``scope == "all"`` rows are drawn.
    """
    rows = components[components["scope"] == "all"].copy()
    fig = go.Figure()
    order = [c for c in COMPONENT_LABELS if c in set(rows["target"])] + \
        [c for c in dict.fromkeys(rows["target"]) if c not in COMPONENT_LABELS]
    rows["run"] = rows.apply(_run_label, axis=1)
    for run, sub in rows.groupby("run", sort=False):
        sub = sub.set_index("target").reindex(order)
        fig.add_trace(go.Bar(
            x=[COMPONENT_LABELS.get(c, c) for c in order], y=sub["recovered"], name=run,
            error_y=dict(type="data", symmetric=False, array=sub["recovered_hi"] - sub["recovered"],
                         arrayminus=sub["recovered"] - sub["recovered_lo"]),
            hovertemplate="%{x}<br>recovered %{y:.2f}<extra>" + run + "</extra>"))
    metric = ", ".join(sorted(set(rows["metric"].astype(str)))) if len(rows) else ""
    fig.add_hline(y=1.0, line_dash="dash", line_color="gray")
    fig.add_hline(y=0.0, line_color="black", line_width=1)
    fig.update_layout(title=f"{title} (metric: {metric}; bars: 95 % bootstrap over prompts)", barmode="group",
                      yaxis_title="recovered = (m_patched − m_pre) / (m_post − m_pre)", height=460)
    return fig


def components_topk_figure(components: pd.DataFrame,
                           title: str = "Top-K heads patched jointly: patterns vs head outputs") -> go.Figure:
    """``recovered`` vs K for the top-K rows (patterns solid, head outputs dashed), one colour per run."""
    rows = components[components["scope"].astype(str).str.startswith("top-")].copy()
    rows["run"] = rows.apply(_run_label, axis=1) if len(rows) else []
    palette = pio.templates["plotly"].layout.colorway
    fig = go.Figure()
    for i, (run, sub) in enumerate(rows.groupby("run", sort=False)):
        for target, dash in (("pattern", "solid"), ("z", "dash")):
            line = sub[sub["target"] == target].sort_values("k")
            if not len(line):
                continue
            fig.add_trace(go.Scatter(
                x=line["k"], y=line["recovered"], mode="lines+markers", name=f"{run}: {COMPONENT_LABELS[target].replace('all ', '')}",
                line=dict(color=palette[i % len(palette)], dash=dash),
                error_y=dict(type="data", symmetric=False, array=line["recovered_hi"] - line["recovered"],
                             arrayminus=line["recovered"] - line["recovered_lo"], thickness=1)))
    fig.add_hline(y=1.0, line_dash="dash", line_color="gray")
    fig.update_layout(title=title, xaxis_title="K (top heads by their own effect, patched jointly)",
                      yaxis_title="recovered", height=420)
    return fig


def head_scores_figure(scores: pd.DataFrame, emergence: pd.DataFrame | None = None,
                       title: str = "Head scores per checkpoint, over the capability curve") -> go.Figure:
    """Per run: each head's score (one line per head and score) against training step, with greedy
    accuracy (grey, right axis) from ``emergence.csv`` when given.

    Args:
        scores: rows of ``head_scores.csv`` (model, seed, step, layer, head, score, value).
        emergence: rows of ``emergence.csv`` (model, seed, step, accuracy, ...), optional.
    """
    runs = list(dict.fromkeys(zip(scores["model"], scores["seed"])))
    fig = make_subplots(rows=max(1, len(runs)), cols=1, subplot_titles=[f"{m} seed {s}" for m, s in runs],
                        specs=[[{"secondary_y": True}] for _ in range(max(1, len(runs)))], shared_xaxes=True)
    dashes = {"previous_token": "dot", "prefix_matching": "solid", "copying": "dash"}
    palette = pio.templates["plotly"].layout.colorway
    for row, (model, seed) in enumerate(runs, start=1):
        sub = scores[(scores["model"] == model) & (scores["seed"] == seed)]
        for i, ((layer, head), by_head) in enumerate(sub.groupby(["layer", "head"])):
            for score, line in by_head.groupby("score"):
                line = line.sort_values("step")
                fig.add_trace(go.Scatter(x=line["step"], y=line["value"], mode="lines+markers",
                                         name=f"L{layer}H{head} {score}", legendgroup=f"L{layer}H{head}",
                                         showlegend=row == 1, marker=dict(size=4),
                                         line=dict(color=palette[i % len(palette)], dash=dashes.get(score, "solid"))),
                              row=row, col=1, secondary_y=False)
        if emergence is not None:
            curve = emergence[(emergence["model"] == model) & (emergence["seed"] == seed)].sort_values("step")
            curve = curve[(curve["step"] >= sub["step"].min()) & (curve["step"] <= sub["step"].max())]
            fig.add_trace(go.Scatter(x=curve["step"], y=curve["accuracy"], mode="lines", name="greedy accuracy",
                                     line=dict(color="gray", width=4), opacity=0.4, showlegend=row == 1),
                          row=row, col=1, secondary_y=True)
        fig.update_yaxes(title_text="score", row=row, col=1, secondary_y=False, range=[-0.05, 1.05])
        fig.update_yaxes(title_text="accuracy", row=row, col=1, secondary_y=True, range=[0, 1])
    fig.update_xaxes(title_text="training step", row=max(1, len(runs)), col=1)
    fig.update_layout(title=title + " (dotted: previous-token, solid: prefix-matching, dashed: copying)",
                      height=320 * max(1, len(runs)) + 80)
    return fig
