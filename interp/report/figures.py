"""Plotly figures of the report and of notebooks: capability curves with the point of emergence,
the Δp heatmap, top-K recovery and the component decomposition (per-head views and head-score
curves: :mod:`interp.report.head_view`).

One concept: the report's figures and the layout rules they share (axes that end where the data
end, legends that fit at 800 px); splitting it would split those rules.
:mod:`interp.report.page` arranges them into the report's sections.
"""

from __future__ import annotations

import html

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio
from jaxtyping import Float
from plotly.subplots import make_subplots
from torch import Tensor

from interp.core.terms import DEFAULT_THRESHOLD
from interp.report.step_axis import check_step_scale, fit_step_ranges, step_axis, x_steps
from interp.sources.catalogue import run_label


def plot_text(text) -> str:
    """User or tokenizer text for a plotly label (title, trace name, hover text): HTML-escaped,
    since plotly renders its strings as a small HTML subset (``<b>``, ``<br>``, entities)."""
    return html.escape(str(text), quote=False)


#: The longest legend name (characters) that two entries a row leave room for in the overview's
#: legend on an 800 px page: half its plot area is about 300 px, and an entry is its 40 px symbol
#: and about 5.5 px a character (12 px font). Longer names, as "neox-2l-128d seed 2: 1000→1500
#: (bisection: 5 checkpoints)" (57 characters, 354 px), overlapped the next entry (issue 71).
LEGEND_HALF_CHARS = 42


def capability_figure(
    emergence: pd.DataFrame,
    points: pd.DataFrame,
    metric: str = "accuracy",
    threshold: float | None = DEFAULT_THRESHOLD,
    totals: dict | None = None,
    x_scale: str = "linear",
    loss_row: bool = False,
) -> go.Figure:
    """Capability vs training step, one line per seed, one panel per model; each run's point of
    emergence starred, its span in the run's legend entry ("neox-2l-64d seed 1: 1900→2000"), so
    that no label is drawn on the plot to be cut or to overlap another (issue 71). A run whose
    point came from a bisection (``points.search == "bisection"``) is drawn as its evaluated points
    only, named "bisection: n of N checkpoints" (no line through steps nobody measured). Each
    panel's step axis ends where its data end (:func:`interp.report.step_axis.fit_step_ranges`);
    the legend sits below the panels, one entry per run (its loss too), two entries a row when
    every name fits half of an 800 px plot (:data:`LEGEND_HALF_CHARS`), else one.

    Args:
        emergence: rows (model, seed, step, accuracy, p_answer) -- ``emergence.csv``.
        points: rows (model, seed, pre_step, post_step, emerged, ...) -- ``points.csv``.
        metric: ``"accuracy"`` (greedy, fraction) or ``"p_answer"`` (probability).
        threshold: drawn as a dashed line when ``metric == "accuracy"``.
        totals: ``{(model, seed): searchable checkpoints}`` (the N of "n of N"; optional).
        x_scale: the step axis (:data:`interp.report.step_axis.STEP_SCALES`; default linear, so that late jumps are not
            squeezed into the right edge; ``"zoom"`` is the linear axis here).
        loss_row: leave a second row of panels, sharing each column's step axis, for the runs'
            training loss (:func:`interp.report.loss_axes.capability_with_loss` draws it there).

    Raises:
        ValueError: if ``metric`` is not a column of ``emergence``, or a bad ``x_scale``.
    """
    if metric not in ("accuracy", "p_answer"):
        raise ValueError(f"metric={metric!r}; valid: 'accuracy', 'p_answer'")
    check_step_scale(x_scale)
    models = list(dict.fromkeys(emergence["model"]))
    cols, rows = max(1, len(models)), 2 if loss_row else 1
    fig = make_subplots(
        rows=rows,
        cols=cols,
        subplot_titles=[plot_text(m) for m in models] + [""] * (cols * (rows - 1)),
        shared_yaxes=True,
        shared_xaxes=True,
        vertical_spacing=0.06,
        row_heights=[0.62, 0.38] if loss_row else None,
    )
    palette = pio.templates["plotly"].layout.colorway
    starred = False
    entries = 0
    for col, model in enumerate(models, start=1):
        sub = emergence[emergence["model"] == model]
        for k, (seed, curve) in enumerate(sub.groupby("seed", sort=True)):
            curve = curve.sort_values("step")
            color = palette[k % len(palette)]
            point = points[(points["model"] == model) & (points["seed"] == seed)]
            bisected = bool(len(point)) and "search" in point and point["search"].iloc[0] == "bisection"
            total = (totals or {}).get((model, seed))
            of = f"bisection: {len(curve)}" + (f" of {total}" if total else "") + " checkpoints"
            emerged = len(point) and bool(point["emerged"].iloc[0]) and pd.notna(point["post_step"].iloc[0])
            span = ""
            if emerged:
                post, pre = int(point["post_step"].iloc[0]), point["pre_step"].iloc[0]
                span = f"{int(pre)}→{post}" if pd.notna(pre) else f"→{post}"
            fig.add_trace(
                go.Scatter(
                    x=x_steps(curve["step"], x_scale),
                    y=curve[metric],
                    mode="markers" if bisected else "lines+markers",
                    name=f"{plot_text(model)} seed {seed}: "
                    + (span if emerged else "not emerged")
                    + (f" ({of})" if bisected else ""),
                    line=dict(color=color),
                    marker=dict(size=7 if bisected else 4),
                    legendgroup=f"{model}-{seed}",
                    hovertemplate="step %{x}<br>" + metric + " %{y:.3f}<extra></extra>",
                ),
                row=1,
                col=col,
            )
            entries += 1
            if emerged:
                y = curve.loc[curve["step"] == post, metric]
                fig.add_trace(
                    go.Scatter(
                        x=[max(post, 0.5) if x_scale == "log" else post],
                        y=[y.iloc[0] if len(y) else None],
                        mode="markers",
                        text=[f"seed {seed}: {span}"],
                        showlegend=not starred,
                        marker=dict(symbol="star", size=14, color=color, line=dict(width=1, color="black")),
                        hovertemplate=f"point of emergence<br>{plot_text(model)} seed {seed}<br>pre {pre} → post {post}<extra></extra>",
                        legendgroup=f"{model}-{seed}",
                        name="★ post step of the point of emergence",
                    ),
                    row=1,
                    col=col,
                )
                entries += not starred
                starred = True  # one legend entry explains every star
        for row in range(1, rows + 1):
            step_axis(fig, "log" if x_scale == "log" else "linear", row=row, col=col)
            if row < rows:
                fig.update_xaxes(title_text=None, row=row, col=col)
    if metric == "accuracy" and threshold is not None:
        # one line per panel, one legend entry for all of them (clicking it toggles every panel's)
        fig.add_hline(
            y=threshold,
            line_dash="dash",
            line_color="gray",
            name=f"threshold ({threshold:g})",
            showlegend=True,
            legendgroup="threshold",
            row=1,
            col="all",
        )
        for i, shape in enumerate(s for s in fig.layout.shapes if s.legendgroup == "threshold"):
            shape.showlegend = i == 0
        entries += 1
    fig.update_yaxes(title_text="greedy accuracy" if metric == "accuracy" else "p(answer)", row=1, col=1)
    label = "Greedy accuracy" if metric == "accuracy" else "p(answer)"
    longest = max((len(t.name or "") for t in fig.data if t.showlegend is not False), default=0)
    per_row = 2 if longest <= LEGEND_HALF_CHARS else 1
    legend_rows = -(-entries // per_row)
    fig.update_layout(
        title=f"{label} per checkpoint, one line per seed (★ = post step of the point of emergence)",
        height=(620 if loss_row else 420) + 22 * legend_rows,
        showlegend=True,
        # below the panels, two entries a row (each half the width) when the names fit half of
        # an 800 px plot, else one: on an 800 px screen a legend at the side left the curves a
        # third of the width, and a tall one scrolled in its own box at the figure's foot, under
        # the step axis' title, in a margin made for it; "grouped" (the default with legend
        # groups) gave every entry a row of its own
        legend=dict(orientation="h", yref="container", yanchor="bottom", y=0, x=0, traceorder="normal")
        | dict(entrywidth=1 / per_row, entrywidthmode="fraction"),
        margin=dict(b=70 + 22 * legend_rows),
    )
    fit_step_ranges(fig, x_scale)
    fig.update_yaxes(autorange=True)  # said outright: with shared step ranges set, plotly.js left [-1, 4]
    return fig


def loss_curve_figure(
    losses: pd.DataFrame,
    emergence: pd.DataFrame | None = None,
    points: pd.DataFrame | None = None,
    smooth: int = 25,
    title: str = "Training loss and capability",
) -> go.Figure:
    """Training loss (nats, left axis) beside the capability (greedy accuracy, right axis) of one
    run, so that the loss plateau before the jump is visible; the point of emergence is shaded.

    Args:
        losses: one row per optimizer step, columns ``step``, ``loss`` (nats) -- a run's
            ``loss.csv`` (:func:`interp.sources.embedded.loss_curve`).
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
    fig.add_trace(
        go.Scatter(
            x=losses["step"],
            y=losses["loss"],
            mode="lines",
            name="loss (per step)",
            line=dict(color="lightgray", width=1),
        ),
        secondary_y=False,
    )
    if smooth > 1:
        fig.add_trace(
            go.Scatter(
                x=losses["step"],
                y=losses["loss"].rolling(smooth, center=True, min_periods=1).mean(),
                mode="lines",
                name=f"loss ({smooth}-step mean)",
                line=dict(color="#1f77b4"),
            ),
            secondary_y=False,
        )
    if emergence is not None and len(emergence):
        curve = emergence.sort_values("step")
        fig.add_trace(
            go.Scatter(
                x=curve["step"],
                y=curve["accuracy"],
                mode="lines+markers",
                name="accuracy",
                line=dict(color="#d62728"),
                marker=dict(size=4),
            ),
            secondary_y=True,
        )
    if points is not None and len(points) and bool(points["emerged"].iloc[0]) and pd.notna(points["post_step"].iloc[0]):
        fig.add_vrect(
            x0=float(points["pre_step"].iloc[0]),
            x1=float(points["post_step"].iloc[0]),
            fillcolor="orange",
            opacity=0.25,
            line_width=0,
            annotation_text="point of emergence",
            annotation_position="top left",
        )
    fig.update_xaxes(title_text="training step")
    fig.update_yaxes(title_text="training loss (nats)", secondary_y=False)
    # explicit ticks: a secondary axis otherwise syncs its ticks to the loss axis (0.017, 0.222, ...)
    fig.update_yaxes(
        title_text="greedy accuracy", range=[0, 1], tickmode="linear", tick0=0, dtick=0.2, secondary_y=True
    )
    fig.update_yaxes(tickformat=".2~f", secondary_y=False)
    fig.update_layout(title=title, legend=dict(orientation="h", y=-0.2), height=380, showlegend=True)
    return fig


#: Heads (layers x heads) up to which :func:`delta_p_heatmap` prints each cell's value in it (the
#: embedded suite's 2 x 4 and 2 x 8, Pythia-70m's 6 x 8); larger grids keep the value to the hover.
MAX_CELL_TEXT = 64


def delta_p_heatmap(
    delta_p: Float[Tensor, "layer head"] | np.ndarray,
    title: str | None = None,
    bound: float | None = None,
    metric: str = "p",
    unit: str | None = None,
    jump: float | None = None,
) -> go.Figure:
    """Heatmap of a per-head effect over layer × head, diverging around 0, labelled with its metric.

    Args:
        delta_p: ``Float[Tensor, "layer head"]``, the change of ``metric`` per head (metric units;
            the paper's Δp for ``metric="p"``).
        title: the figure's title (default ``"Δ <metric label> per head (<unit>)"``).
        bound: fixes the colour range to ±bound (use one bound for heatmaps shown side by side;
            a fraction of the jump when ``jump`` is given).
        metric: a name of :data:`interp.core.metrics.METRICS` (the colour bar, hover and legend use its
            label); unit: overrides the registry's unit.
        jump: the run's jump ``value_post - value_pre`` (metric units): the colour is then
            ``delta / jump``, the fraction of the jump each head recovers alone (comparable
            across runs whose jumps differ), and the hover gives both.

    Each cell shows its value (the colour's number) when the grid has at most
    :data:`MAX_CELL_TEXT` heads.
    """
    from interp.core.metrics import metric_spec

    spec = metric_spec(metric)
    unit = unit or spec.unit
    values = np.asarray(delta_p.detach().cpu() if isinstance(delta_p, Tensor) else delta_p, dtype=float)
    relative = jump is not None and np.isfinite(jump) and jump != 0
    z = values / jump if relative else values
    if bound is None:
        bound = float(np.nanmax(np.abs(z))) if np.isfinite(z).any() else 1.0
    label = f"{spec.delta_label} / jump" if relative else spec.delta_label
    hover = "layer %{y} head %{x}<br>" + spec.delta_label + " %{customdata:+.4f} " + unit
    hover += "<br>= %{z:+.2f} of the run's jump<extra></extra>" if relative else "<extra></extra>"
    fig = go.Figure(
        go.Heatmap(
            z=z,
            customdata=values,
            x=[f"H{h}" for h in range(values.shape[1])],
            y=[f"L{l}" for l in range(values.shape[0])],
            colorscale="RdBu",
            zmid=0,
            zmin=-bound,
            zmax=bound,
            colorbar=dict(title=f"{label}<br>({'fraction' if relative else unit})", exponentformat="none"),
            hovertemplate=hover,
            name=f"{label} per head (colour: blue raises {spec.label}, red lowers it)",
            showlegend=True,
            # each cell's value printed in it while the cells are few enough to hold it
            texttemplate=("%{z:+.2f}" if relative else "%{z:+.3f}") if values.size <= MAX_CELL_TEXT else None,
            textfont=dict(size=11),
        )
    )
    title = title or f"{label} per head ({'fraction of the jump' if relative else unit})"
    fig.update_layout(
        title=title,
        xaxis_title="head",
        yaxis_title="layer",
        height=320,
        showlegend=True,
        legend=dict(orientation="h", yanchor="top", y=-0.25, x=0),
    )
    fig.update_yaxes(autorange="reversed")
    return fig


def recovery_figure(topk: pd.DataFrame, title: str = "Share of the jump recovered by the top-K heads") -> go.Figure:
    """``recovered`` vs K, one line per (model, seed) when those columns exist."""
    fig = go.Figure()
    groups = topk.groupby(["model", "seed"]) if {"model", "seed"} <= set(topk.columns) else [(("", ""), topk)]
    for (model, seed), sub in groups:
        label = plot_text(f"{model} seed {seed}".strip())
        fig.add_trace(go.Scatter(x=sub["k"], y=sub["recovered"], mode="lines+markers", name=label or "recovered"))
    fig.add_hline(y=1.0, line_dash="dash", line_color="gray", name="post step (recovered = 1)", showlegend=True)
    fig.add_hline(y=0.0, line_dash="dot", line_color="gray", name="pre step (recovered = 0)", showlegend=True)
    fig.update_layout(
        title=title, xaxis_title="K (top heads patched jointly)", yaxis_title="recovered", height=380, showlegend=True
    )
    return fig


def run_capability_figure(
    curve: pd.DataFrame,
    pre_step: int | None,
    post_step: int | None,
    threshold: float | None = DEFAULT_THRESHOLD,
    title: str = "Capability per checkpoint",
    search: str = "scan",
    n_checkpoints: int | None = None,
    x_scale: str = "linear",
) -> go.Figure:
    """One run's greedy accuracy and p(answer) vs training step, the point of emergence marked.

    Args:
        curve: rows (step, accuracy, p_answer): the evaluated checkpoints (steps; fractions).
        pre_step, post_step: the point of emergence (``None`` when the run did not emerge
            between two checkpoints); the interval between them is shaded, both ends starred.
        threshold: the accuracy threshold, drawn dashed.
        search: ``"scan"`` (every checkpoint evaluated: lines) or ``"bisection"`` (the evaluated
            points only, no line through unmeasured steps, and "bisection: n of N checkpoints"
            written on the figure).
        n_checkpoints: the run's searchable checkpoints (the N; optional).
        x_scale: the step axis, one of :data:`interp.report.step_axis.STEP_SCALES` (default linear: a jump late in
            training is not squeezed into the right edge as on a log axis).

    Raises:
        ValueError: an ``x_scale`` not in :data:`interp.report.step_axis.STEP_SCALES`.
    """
    check_step_scale(x_scale)
    curve = curve.sort_values("step")
    x = x_steps(curve["step"], x_scale)
    bisected = search == "bisection"
    mode = "markers" if bisected else "lines+markers"
    size = 8 if bisected else 5
    fig = go.Figure()
    if bisected:
        fig.add_annotation(
            text=f"bisection: {len(curve)}" + (f" of {n_checkpoints}" if n_checkpoints else "") + " checkpoints "
            "evaluated (points only: no line through unmeasured steps)",
            xref="paper",
            yref="paper",
            x=0,
            y=1.0,
            xanchor="left",
            yanchor="bottom",
            showarrow=False,
            font=dict(size=12, color="#444"),
        )
    fig.add_trace(
        go.Scatter(
            x=x,
            y=curve["accuracy"],
            mode=mode,
            name="greedy accuracy",
            marker=dict(size=size),
            hovertemplate="step %{x}<br>accuracy %{y:.3f}<extra></extra>",
        )
    )
    fig.add_trace(
        go.Scatter(
            x=x,
            y=curve["p_answer"],
            mode=mode,
            name="p(answer)",
            marker=dict(size=size),
            hovertemplate="step %{x}<br>p(answer) %{y:.3f}<extra></extra>",
        )
    )
    if pre_step is not None and post_step is not None:
        ends = curve[curve["step"].isin([pre_step, post_step])]
        fig.add_trace(
            go.Scatter(
                x=x_steps(ends["step"], x_scale),
                y=ends["accuracy"],
                mode="markers",
                marker=dict(symbol="star", size=15, color="gold", line=dict(width=1, color="black")),
                name=f"point of emergence: step {pre_step} → {post_step}",
                hovertemplate="step %{x}<br>accuracy %{y:.3f}<extra>point of emergence</extra>",
            )
        )
        fig.add_vrect(
            x0=max(pre_step, 0.5) if x_scale == "log" else pre_step,
            x1=max(post_step, 0.5) if x_scale == "log" else post_step,
            fillcolor="gold",
            opacity=0.2,
            line_width=0,
            name="pre → post interval",
            showlegend=True,
        )
    if threshold is not None:
        fig.add_hline(
            y=threshold, line_dash="dash", line_color="gray", name=f"threshold ({threshold:g})", showlegend=True
        )
    step_axis(fig, x_scale, point=(pre_step, post_step), steps=curve["step"])
    fig.update_yaxes(title_text="accuracy / p(answer)", range=[-0.02, 1.02])
    fig.update_layout(
        title=title,
        height=400,
        showlegend=True,
        margin=dict(t=50, b=40),
        legend=dict(orientation="h", yanchor="top", y=-0.2, x=0),  # below: the curves keep the width
    )
    return fig


def recovery_run_figure(
    topk: pd.DataFrame, title: str = "Top-K heads patched jointly", noisy: bool = False
) -> go.Figure:
    """One run's share of the jump recovered vs K (``recovered`` = (value_K − value_pre) / (value_post −
    value_pre), in the run's metric), with its 95 % bootstrap band (``recovered_lo`` / ``recovered_hi``,
    when the table has them); ``noisy`` (the run's jump is below 3 standard errors) says so on the figure."""
    fig = recovery_figure(topk[["k", "recovered"]], title=title + (" — jump below 3 s.e.: noisy" if noisy else ""))
    fig.data[0].name = "recovered by the top K heads' patterns"
    if {"recovered_lo", "recovered_hi"} <= set(topk.columns) and topk["recovered_lo"].notna().any():
        band = topk.sort_values("k")
        fig.add_trace(
            go.Scatter(
                x=band["k"],
                y=band["recovered_hi"],
                mode="lines",
                line=dict(width=0),
                showlegend=False,
                hoverinfo="skip",
            )
        )
        fig.add_trace(
            go.Scatter(
                x=band["k"],
                y=band["recovered_lo"],
                mode="lines",
                line=dict(width=0),
                fill="tonexty",
                fillcolor="rgba(31,119,180,0.2)",
                name="95 % bootstrap interval over prompts",
                hoverinfo="skip",
            )
        )
    fig.update_layout(height=340, margin=dict(t=50, b=40))
    return fig


#: Points drawn per curve in the report at most (a per-step loss curve is thinned to this).
MAX_CURVE_POINTS = 600


def thin_curve(rows: pd.DataFrame, max_points: int | None = None) -> pd.DataFrame:
    """Every k-th row (the last kept) so that at most ``max_points`` (default
    ``MAX_CURVE_POINTS``) remain: a per-step loss curve stays light in a report page."""
    max_points = max_points or MAX_CURVE_POINTS
    stride = max(1, -(-len(rows) // max_points))
    return pd.concat([rows.iloc[::stride], rows.iloc[[-1]]]).drop_duplicates("step") if stride > 1 else rows


#: order and labels of the decomposition's components (``interp.decomposition.COMPONENTS``)
COMPONENT_LABELS = {
    "pattern": "all patterns",
    "q": "all queries",
    "k": "all keys",
    "v": "all values",
    "z": "all head outputs (hook_z)",
    "qk": "all QK weights",
    "ov": "all OV weights",
    "mlp": "all MLP outputs",
    "mlp_weights": "all MLP weights",
    "embed": "embedding",
    "unembed": "unembedding",
    "block": "all blocks at once",
    "interaction": "interaction (blocks − QK − OV − MLP)",
}


def _interval(rows: pd.DataFrame, **style) -> dict | None:
    """Plotly error bars from the ``recovered_lo`` / ``recovered_hi`` columns (95 % bootstrap
    interval), or None when a table has no interval."""
    if not {"recovered_lo", "recovered_hi"} <= set(rows.columns):
        return None
    return dict(
        type="data",
        symmetric=False,
        array=rows["recovered_hi"] - rows["recovered"],
        arrayminus=rows["recovered"] - rows["recovered_lo"],
        **style,
    )


def _row_label(row) -> str:
    """A table row's run (``model``, ``seed`` columns) as :func:`interp.sources.catalogue.run_label` names it."""
    return plot_text(run_label(row["model"], row["seed"])) if pd.notna(row.get("model")) else "run"


def components_figure(
    components: pd.DataFrame, title: str = "Share of the jump each component recovers, patched from post into pre"
) -> go.Figure:
    """Grouped bars: ``recovered`` per component (every head / layer), one bar per run, 95 % intervals.

    Args:
        components: rows of ``components.csv`` (``interp.decomposition.decompose_jump``); the
            ``scope == "all"`` rows are drawn.
    """
    rows = components[components["scope"] == "all"].copy()
    fig = go.Figure()
    order = [c for c in COMPONENT_LABELS if c in set(rows["target"])] + [
        c for c in dict.fromkeys(rows["target"]) if c not in COMPONENT_LABELS
    ]
    rows["run"] = rows.apply(_row_label, axis=1)
    for run, sub in rows.groupby("run", sort=False):
        sub = sub.set_index("target").reindex(order)
        fig.add_trace(
            go.Bar(
                x=[COMPONENT_LABELS.get(c, c) for c in order],
                y=sub["recovered"],
                name=run,
                error_y=_interval(sub),
                hovertemplate="%{x}<br>recovered %{y:.2f}<extra>" + run + "</extra>",
            )
        )
    metric = ", ".join(sorted(set(rows["metric"].astype(str)))) if len(rows) and "metric" in rows else "p"
    fig.add_hline(y=1.0, line_dash="dash", line_color="gray")
    fig.add_hline(y=0.0, line_color="black", line_width=1)
    fig.update_layout(
        title=f"{title} (metric: {metric}; bars: 95 % bootstrap over prompts)",
        barmode="group",
        showlegend=True,
        yaxis_title="recovered = (m_patched − m_pre) / (m_post − m_pre)",
        height=460,
    )
    return fig


def components_topk_figure(
    components: pd.DataFrame, title: str = "Top-K heads patched jointly: patterns vs head outputs"
) -> go.Figure:
    """``recovered`` vs K for the top-K rows (patterns solid, head outputs dashed), one colour per run."""
    rows = components[components["scope"].astype(str).str.startswith("top-")].copy()
    rows["run"] = rows.apply(_row_label, axis=1) if len(rows) else []
    palette = pio.templates["plotly"].layout.colorway
    fig = go.Figure()
    for i, (run, sub) in enumerate(rows.groupby("run", sort=False)):
        for target, dash in (("pattern", "solid"), ("z", "dash")):
            line = sub[sub["target"] == target].sort_values("k")
            if not len(line):
                continue
            fig.add_trace(
                go.Scatter(
                    x=line["k"],
                    y=line["recovered"],
                    mode="lines+markers",
                    name=f"{run}: {COMPONENT_LABELS[target].replace('all ', '')}",
                    line=dict(color=palette[i % len(palette)], dash=dash),
                    error_y=_interval(line, thickness=1),
                )
            )
    fig.add_hline(y=1.0, line_dash="dash", line_color="gray")
    fig.update_layout(
        title=title,
        xaxis_title="K (top heads by their own effect, patched jointly)",
        showlegend=True,
        yaxis_title="recovered",
        height=420,
    )
    return fig
