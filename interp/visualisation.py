"""Figures and the self-contained HTML report.

Plotly figures for Jupyter and for the report; circuitsvis attention patterns rendered offline
(:mod:`interp.display`: no CDN, no network probe). The report is one HTML file that opens
offline, with plotly.js and the circuitsvis bundle inlined once each.

Layout: a summary table first, every run's capability on one figure, then one part per run
made of the section functions in :data:`RUN_SECTIONS` (capability with the point of emergence,
Δp heatmap, top-K recovery, attention patterns pre vs post, the scrubber of every head's pattern
across checkpoints, and the component decomposition,
head-score curves, training loss and checkpoint hazards when a run carries them). To add a
section, write ``def my_section(run, ctx) -> Section | None`` and add it to ``RUN_SECTIONS``
(or ``(report, ctx)`` to ``PAGE_SECTIONS``); notebooks show the same sections.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio
from jaxtyping import Float
from plotly.subplots import make_subplots
from torch import Tensor

from interp.catalogue import run_label
from interp.display import (
    LIBRARIES,
    STYLE,
    Assets,
    attention_fragment,
    figure_fragment,
    plot_text,
    style_tag,
    table_fragment,
)


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
    fig = make_subplots(rows=1, cols=max(1, len(models)), subplot_titles=[plot_text(m) for m in models], shared_yaxes=True)
    palette = pio.templates["plotly"].layout.colorway
    starred = False
    for col, model in enumerate(models, start=1):
        sub = emergence[emergence["model"] == model]
        for k, (seed, curve) in enumerate(sub.groupby("seed", sort=True)):
            curve = curve.sort_values("step")
            color = palette[k % len(palette)]
            fig.add_trace(go.Scatter(
                x=curve["step"].clip(lower=0.5), y=curve[metric], mode="lines+markers", name=f"{plot_text(model)} seed {seed}",
                line=dict(color=color), marker=dict(size=4), legendgroup=f"{model}-{seed}",
                hovertemplate="step %{x}<br>" + metric + " %{y:.3f}<extra></extra>",
            ), row=1, col=col)
            point = points[(points["model"] == model) & (points["seed"] == seed)]
            if len(point) and bool(point["emerged"].iloc[0]) and pd.notna(point["post_step"].iloc[0]):
                post = int(point["post_step"].iloc[0])
                y = curve.loc[curve["step"] == post, metric]
                fig.add_trace(go.Scatter(
                    x=[post], y=[y.iloc[0] if len(y) else None], mode="markers", showlegend=not starred,
                    marker=dict(symbol="star", size=14, color=color, line=dict(width=1, color="black")),
                    hovertemplate=f"point of emergence<br>{plot_text(model)} seed {seed}<br>pre {point['pre_step'].iloc[0]} → post {post}<extra></extra>",
                    legendgroup=f"{model}-{seed}", name="★ post step of the point of emergence",
                ), row=1, col=col)
                starred = True  # one legend entry explains every star
        fig.update_xaxes(type="log", title_text="training step (log; step 0 drawn at 0.5)", row=1, col=col,
                         tickvals=[0.5, 1, 10, 100, 1000, 10000, 100000], ticktext=["0", "1", "10", "100", "1k", "10k", "100k"],
                         minor=dict(showgrid=False, ticks=""))
    if metric == "accuracy" and threshold is not None:
        # one line per panel, one legend entry for all of them (clicking it toggles every panel's)
        fig.add_hline(y=threshold, line_dash="dash", line_color="gray", name=f"threshold ({threshold:g})",
                      showlegend=True, legendgroup="threshold")
        for i, shape in enumerate(s for s in fig.layout.shapes if s.legendgroup == "threshold"):
            shape.showlegend = i == 0
    fig.update_yaxes(title_text="greedy accuracy" if metric == "accuracy" else "p(answer)", row=1, col=1)
    label = "Greedy accuracy" if metric == "accuracy" else "p(answer)"
    fig.update_layout(title=f"{label} per checkpoint, one line per seed (★ = post step of the point of emergence)",
                      height=420, showlegend=True)
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
    fig.update_layout(title=title, legend=dict(orientation="h", y=-0.2), height=380, showlegend=True)
    return fig


def delta_p_heatmap(delta_p: Float[Tensor, "layer head"] | np.ndarray, title: str | None = None,
                    bound: float | None = None, metric: str = "p", unit: str | None = None) -> go.Figure:
    """Heatmap of a per-head effect over layer × head, diverging around 0, labelled with its metric.

    Args:
        delta_p: ``Float[Tensor, "layer head"]``, the change of ``metric`` per head (metric units;
            the paper's Δp for ``metric="p"``).
        title: the figure's title (default ``"Δ <metric label> per head (<unit>)"``).
        bound: fixes the colour range to ±bound (use one bound for heatmaps shown side by side).
        metric: a name of :data:`interp.metrics.METRICS` (the colour bar, hover and legend use its
            label); unit: overrides the registry's unit.
    """
    from interp.metrics import metric_spec

    spec = metric_spec(metric)
    unit = unit or spec.unit
    values = np.asarray(delta_p.detach().cpu() if isinstance(delta_p, Tensor) else delta_p, dtype=float)
    if bound is None:
        bound = float(np.nanmax(np.abs(values))) if np.isfinite(values).any() else 1.0
    fig = go.Figure(go.Heatmap(
        z=values, x=[f"H{h}" for h in range(values.shape[1])], y=[f"L{l}" for l in range(values.shape[0])],
        colorscale="RdBu", zmid=0, zmin=-bound, zmax=bound, colorbar=dict(title=f"{spec.delta_label}<br>({unit})"),
        hovertemplate="layer %{y} head %{x}<br>" + spec.delta_label + " %{z:+.4f} " + unit + "<extra></extra>",
        name=f"{spec.delta_label} per head (colour: blue raises {spec.label}, red lowers it)", showlegend=True,
    ))
    title = title or f"{spec.delta_label} per head ({unit})"
    fig.update_layout(title=title, xaxis_title="head", yaxis_title="layer", height=320, showlegend=True,
                      legend=dict(orientation="h", yanchor="top", y=-0.25, x=0))
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
    fig.update_layout(title=title, xaxis_title="K (top heads patched jointly)", yaxis_title="recovered", height=380,
                      showlegend=True)
    return fig


def _log_step_axis(fig: go.Figure, **where) -> None:
    """Training steps on a log axis with step 0 drawn at 0.5 (Pythia-like schedules start at 0)."""
    fig.update_xaxes(type="log", title_text="training step (log; step 0 drawn at 0.5)",
                     tickvals=[0.5, 1, 10, 100, 1000, 10000, 100000], ticktext=["0", "1", "10", "100", "1k", "10k", "100k"],
                     minor=dict(showgrid=False, ticks=""), **where)


def run_capability_figure(curve: pd.DataFrame, pre_step: int | None, post_step: int | None,
                          threshold: float | None = 0.5, title: str = "Capability per checkpoint") -> go.Figure:
    """One run's greedy accuracy and p(answer) vs training step, the point of emergence marked.

    Args:
        curve: rows (step, accuracy, p_answer): the evaluated checkpoints (steps; fractions).
        pre_step, post_step: the point of emergence (``None`` when the run did not emerge
            between two checkpoints); the interval between them is shaded, both ends starred.
        threshold: the accuracy threshold, drawn dashed.
    """
    curve = curve.sort_values("step")
    x = curve["step"].clip(lower=0.5)
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=x, y=curve["accuracy"], mode="lines+markers", name="greedy accuracy",
                             marker=dict(size=5), hovertemplate="step %{x}<br>accuracy %{y:.3f}<extra></extra>"))
    fig.add_trace(go.Scatter(x=x, y=curve["p_answer"], mode="lines+markers", name="p(answer)",
                             marker=dict(size=5), hovertemplate="step %{x}<br>p(answer) %{y:.3f}<extra></extra>"))
    if pre_step is not None and post_step is not None:
        ends = curve[curve["step"].isin([pre_step, post_step])]
        fig.add_trace(go.Scatter(
            x=ends["step"].clip(lower=0.5), y=ends["accuracy"], mode="markers",
            marker=dict(symbol="star", size=15, color="gold", line=dict(width=1, color="black")),
            name=f"point of emergence: step {pre_step} → {post_step}",
            hovertemplate="step %{x}<br>accuracy %{y:.3f}<extra>point of emergence</extra>"))
        fig.add_vrect(x0=max(pre_step, 0.5), x1=max(post_step, 0.5), fillcolor="gold", opacity=0.2, line_width=0,
                      name="pre → post interval", showlegend=True)
    if threshold is not None:
        fig.add_hline(y=threshold, line_dash="dash", line_color="gray", name=f"threshold ({threshold:g})",
                      showlegend=True)
    _log_step_axis(fig)
    fig.update_yaxes(title_text="accuracy / p(answer)", range=[-0.02, 1.02])
    fig.update_layout(title=title, height=360, showlegend=True, margin=dict(t=50, b=40))
    return fig


def recovery_run_figure(topk: pd.DataFrame, title: str = "Top-K heads patched jointly") -> go.Figure:
    """One run's share of the jump recovered vs K (``recovered`` = (value_K − value_pre) / (value_post −
    value_pre), in the run's metric)."""
    fig = recovery_figure(topk[["k", "recovered"]], title=title)
    fig.data[0].name = "recovered by the top K heads' patterns"
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


# ---------------------------------------------------------------------------------------------
# The report: a list of section functions.
#
# A run section is a function ``(run, ctx) -> Section | None``: it reads what it needs from one
# run's analysis (``interp.pipeline.RunAnalysis``; attributes a run lacks are ``None`` through
# ``getattr``) and returns a heading and an HTML body, or ``None`` to leave itself out. The report
# shows, for every run, each function of RUN_SECTIONS in order; a page section
# ``(report, ctx) -> Section | None`` of PAGE_SECTIONS comes before the runs. Adding a section is
# writing its function and adding it to one of the two lists.
# ---------------------------------------------------------------------------------------------


@dataclass
class Section:
    """One part of the report: a heading and an HTML body (plotly / circuitsvis through ``ctx``)."""

    heading: str
    body: str


@dataclass
class ReportContext:
    """What every section shares on one page.

    Attributes:
        assets: which JavaScript libraries the page already holds (each is inlined once).
        threshold: the accuracy threshold of the point of emergence (fraction).
        delta_p_bound: one colour range (±bound, metric units) for every per-head heatmap of the page.
    """

    assets: Assets
    threshold: float = 0.5
    delta_p_bound: float | None = None


def _run_label(run) -> str:
    """``pythia-70m seed 3 · repetition``: the run and the task of one analysis."""
    task = getattr(run, "task", None)
    return run_label(run.model, run.seed) + (f" · {task}" if task else "")


def _point(run) -> tuple[int | None, int | None]:
    point = getattr(run, "point", None)
    return (getattr(point, "pre_step", None), getattr(point, "post_step", None))


def _jump_note(run) -> str:
    """A warning sentence when the run's jump is below 3 standard errors (``jump_too_small``)."""
    heads = getattr(run, "heads", None)
    if heads is None or "jump_too_small" not in heads or not len(heads) or not bool(heads["jump_too_small"].iloc[0]):
        return ""
    spec, _ = _metric_of(run)
    return (" <b class='el-warning'>The jump is below 3 standard errors of the paired per-prompt difference "
            f"(jump_too_small): {html.escape(spec.delta_label)} and recovered compare against noise.</b>")


def capability_section(run, ctx: ReportContext) -> Section | None:
    """Capability curve of the run with the point of emergence marked."""
    curve = getattr(run, "curve", None)
    if curve is None or not len(curve):
        return None
    pre, post = _point(run)
    fig = run_capability_figure(curve, pre, post, threshold=ctx.threshold,
                                title=f"{plot_text(_run_label(run))}: capability per evaluated checkpoint")
    from interp.emergence import DEFAULT_HOLD, rule_text

    point = getattr(run, "point", None)
    hold = getattr(point, "hold", DEFAULT_HOLD)
    if pre is not None and post is not None:
        where = f"The capability switches on between steps {pre} and {post} (shaded)."
    elif post is not None:
        where = f"The capability was on from the first checkpoint (step {post})."
    else:
        where = "No checkpoint crosses the threshold and holds."
    if point is not None and not getattr(point, "monotone", True):
        where += " The accuracy is not monotone: it reaches the threshold and falls back, or drops by more than noise."
    scanned = getattr(point, "search", "bisection") == "scan"
    caption = (f"Greedy accuracy and mean p(answer) on the task's prompts at each checkpoint "
               f"{'(every searchable one)' if scanned else 'the search evaluated'}. {where} "
               f"Point of emergence: {rule_text(hold)}.")
    return Section("Capability and point of emergence", figure_fragment(fig, ctx.assets, caption))


def _metric_of(run):
    """The registry entry of a run's metric (``run.metric``; ``"p"`` when absent) and its unit."""
    from interp.metrics import metric_spec

    spec = metric_spec(getattr(run, "metric", None) or "p")
    return spec, getattr(run, "unit", None) or spec.unit


def delta_p_section(run, ctx: ReportContext) -> Section | None:
    """The change of the metric per head (layer × head heatmap), labelled with the run's metric."""
    delta = getattr(run, "delta", None)
    if delta is None:
        return None
    pre, post = _point(run)
    spec, unit = _metric_of(run)
    d = spec.delta_label
    fig = delta_p_heatmap(delta, title=f"{plot_text(_run_label(run))}: {d} per head ({unit})", bound=ctx.delta_p_bound,
                          metric=spec.name, unit=unit)
    caption = (f"{d} = mean {spec.label} when one head's attention pattern at step {post} is patched into step {pre}, "
               f"minus mean {spec.label} at step {pre} (metric {html.escape(spec.name)}, {unit}). "
               "One colour range for every run of the page.") + _jump_note(run)
    return Section(f"{d} per head", figure_fragment(fig, ctx.assets, caption))


def topk_section(run, ctx: ReportContext) -> Section | None:
    """Share of the jump recovered by the top-K heads patched jointly."""
    topk = getattr(run, "topk", None)
    if topk is None or not len(topk):
        return None
    fig = recovery_run_figure(topk, title=f"{plot_text(_run_label(run))}: top-K heads patched jointly")
    spec, unit = _metric_of(run)
    caption = (f"recovered = ({spec.label} with the top K heads' patterns patched − value_pre) / (value_post − value_pre), "
               f"metric {html.escape(spec.name)} ({unit}); 1 means the K heads' patterns alone carry the whole jump.") + _jump_note(run)
    return Section("Top-K recovery", figure_fragment(fig, ctx.assets, caption))


def attention_section(run, ctx: ReportContext) -> Section | None:
    """Attention patterns of the top heads, pre vs post (circuitsvis, offline)."""
    patterns = getattr(run, "example_patterns", None)
    if patterns is None:
        return None
    caption = ("Each top head's pattern on prompt 0 at the pre step and at the post step (click a head to enlarge; "
               "rows are query positions, columns key positions).")
    body = attention_fragment(run.example_tokens, patterns, run.example_names, ctx.assets)
    return Section(f"Attention patterns of the top heads — {_run_label(run)} (prompt 0)",
                   body + f"<p class='el-caption'>{caption}</p>")


def scrubber_section(run, ctx: ReportContext) -> Section | None:
    """Every head's attention pattern at every checkpoint the run evaluated, with a step slider
    (:mod:`interp.scrubber`), when the run recorded them."""
    from interp.scrubber import run_scrub_data, scrubber_fragment

    data = run_scrub_data(run, threshold=ctx.threshold, n_prompts=REPORT_SCRUB_PROMPTS)
    if data is None:
        return None
    caption = (f"{len(data.steps)} checkpoints the run evaluated (every checkpoint with a full scan), on the task's "
               f"first {len(data.tokens)} prompts; <code>emergence scrub</code> shows every checkpoint of any run on "
               "more prompts. Rows are query positions, columns key positions; each head's title gives its Δp; "
               "← / → step once the scrubber has focus (click it).")
    body = scrubber_fragment(data, ctx.assets, max_chars=REPORT_SCRUB_CHARS, delta_p_figure=False)
    return Section(f"Attention patterns across checkpoints — {_run_label(run)}", body + f"<p class='el-caption'>{caption}</p>")


#: The report's scrubbers stay light (one per run): prompts shown, and the budget of each one's
#: pattern bytes (base64 characters; coarser levels past it, see ``ScrubData.payload``).
REPORT_SCRUB_PROMPTS = 2
REPORT_SCRUB_CHARS = 30_000


def components_section(run, ctx: ReportContext) -> Section | None:
    """Component decomposition of the jump (``components.csv`` rows of the run), when computed."""
    components = getattr(run, "components", None)
    if components is None or not len(components):
        return None
    fig = components_figure(components, title=f"{plot_text(_run_label(run))}: share of the jump recovered, by component")
    return Section("Where the jump lives: component decomposition",
                   figure_fragment(fig, ctx.assets, "Each bar patches one kind of component of every head or layer "
                                   "from post into pre." + _jump_note(run)) + table_fragment(components))


def head_scores_section(run, ctx: ReportContext) -> Section | None:
    """Head scores per checkpoint (``head_scores.csv`` rows of the run), when computed."""
    scores = getattr(run, "head_scores", None)
    if scores is None or not len(scores):
        return None
    fig = head_scores_figure(scores, title=f"{plot_text(_run_label(run))}: head scores per checkpoint")
    return Section("Head scores per checkpoint", figure_fragment(fig, ctx.assets, "One line per head, one panel per score."))


def training_loss_section(run, ctx: ReportContext) -> Section | None:
    """Training-loss curve (rows step, loss) of a run trained by the toolkit, when recorded."""
    loss = getattr(run, "training_loss", None)
    if loss is None or not len(loss):
        return None
    pre, post = _point(run)
    points = pd.DataFrame([{"pre_step": pre, "post_step": post, "emerged": pre is not None and post is not None}])
    fig = loss_curve_figure(thin_curve(loss), getattr(run, "curve", None), points, smooth=1,
                            title=f"{plot_text(_run_label(run))}: training loss beside the capability")
    return Section("Training loss", figure_fragment(fig, ctx.assets, "Training loss (nats, left) and greedy accuracy "
                                                    "(right) per step: the loss plateau before the jump shows here."))


def hazards_section(run, ctx: ReportContext) -> Section | None:
    """Checkpoint hazards of the run's per-step ``checkpoints`` table
    (:func:`interp.checkpoints.checkpoint_table`): duplicate-weight groups left out of the search,
    steps missing from the schedule, a listing read from the cache."""
    table = getattr(run, "checkpoints", None)
    if table is None or "status" not in table.columns:
        # a run without the per-step table (built by hand, or saved before it existed): the
        # steps its search left out as duplicates are still a hazard worth showing
        excluded = sorted(getattr(getattr(run, "point", None), "excluded_steps", {}).items())
        if not excluded:
            return None
        rows = pd.DataFrame([{"step": step, "status": f"duplicate of step {other}: left out of the search"}
                             for step, other in excluded])
        return Section("Checkpoint hazards", table_fragment(rows))
    from interp.checkpoints import hazard_lines

    return Section("Checkpoint hazards", checkpoint_hazards_html(table, hazard_lines(table, _run_label(run))))


def readiness_section(run, ctx: ReportContext) -> Section | None:
    """Capability as trained and with ideal attention patterns, E and R marked (``run.readiness``,
    an :class:`interp.readiness.ReadinessResult`, when computed)."""
    from interp.readiness import readiness_section as section

    return section(run, ctx)


#: Sections shown for every run, in order.
RUN_SECTIONS: list[Callable] = [
    capability_section,
    delta_p_section,
    topk_section,
    attention_section,
    scrubber_section,
    components_section,
    head_scores_section,
    training_loss_section,
    readiness_section,
    hazards_section,
]


#: Headers of the summary table on a page (``MainJobReport.summary()`` keeps the
#: column names): words that wrap between one another, never inside one.
SUMMARY_HEADERS = {"prepend_bos": "BOS prepended", "pre_step": "pre step", "post_step": "post step",
                   "n_evaluations": "checkpoints evaluated", "value_pre": "pre value", "value_post": "post value",
                   "top_head": "top head", "top_delta": "top Δ", "recovered_top2": "recovered by top 2",
                   "prescreen_spearman": "pre-screen ρ", "prescreen_top2_found": "pre-screen found top 2",
                   "jump_too_small": "jump below 3 s.e."}


#: Summary columns that, when every row of a page's table holds the same value, are stated once
#: above the table instead of repeated in a column (the table then fits a 1280 px page).
SHARED_SUMMARY_COLUMNS = ("task", "prepend_bos", "metric", "unit")


def summary_fragment(summary: pd.DataFrame, caption: str | None = None) -> str:
    """The summary table (``MainJobReport.summary()``) with readable headers (:data:`SUMMARY_HEADERS`);
    with several rows, the columns of :data:`SHARED_SUMMARY_COLUMNS` that hold one value in every
    row are named once in a line above the table."""
    shared = {}
    if len(summary) > 1:
        for column in SHARED_SUMMARY_COLUMNS:
            if column in summary and summary[column].astype(str).nunique() == 1:
                shared[SUMMARY_HEADERS.get(column, column)] = summary[column].iloc[0]
        summary = summary.drop(columns=[c for c in SHARED_SUMMARY_COLUMNS if SUMMARY_HEADERS.get(c, c) in shared])
    note = ("<p class='el-caption'>Every row: " + "; ".join(f"<b>{html.escape(str(k))}</b> {html.escape(str(v))}"
                                                      for k, v in shared.items()) + ".</p>") if shared else ""
    return note + table_fragment(summary.rename(columns=SUMMARY_HEADERS), caption=caption)


def summary_section(report, ctx: ReportContext) -> Section | None:
    """The summary table, one row per run, and what its columns mean."""
    legend = report.legend() if hasattr(report, "legend") else getattr(report, "summary_legend", "")
    return Section("Summary", summary_fragment(report.summary(), caption=legend))


def overview_section(report, ctx: ReportContext) -> Section | None:
    """Every run's capability curve, one figure per task (one panel per model)."""
    emergence, points = report.emergence, report.points
    if not len(emergence):
        return None
    tasks = list(dict.fromkeys(emergence["task"])) if "task" in emergence.columns else [None]
    parts = []
    for task in tasks:
        e = emergence if task is None else emergence[emergence["task"] == task]
        p = points if task is None else points[points["task"] == task]
        fig = capability_figure(e, p, threshold=ctx.threshold)
        if len(tasks) > 1:
            fig.update_layout(title=f"Task {task}: capability of every run")
        parts.append(figure_fragment(fig, ctx.assets, "One line per seed; ★ marks the post step of each run's point "
                                     "of emergence." + (f" Task: {html.escape(str(task))}." if len(tasks) > 1 else "")))
    return Section("Capability of every run", "\n".join(parts))


#: Sections shown once per page, before the runs.
PAGE_SECTIONS: list[Callable] = [summary_section, overview_section]


def delta_p_bound(runs: Sequence) -> float:
    """Largest finite |delta| over ``runs`` (metric units; 1.0 when none): one colour range per page."""
    bounds = [float(np.nanmax(np.abs(_as_array(r.delta)))) for r in runs
              if getattr(r, "delta", None) is not None and np.isfinite(_as_array(r.delta)).any()]
    return max(bounds, default=1.0) or 1.0


def _as_array(values) -> np.ndarray:
    return np.asarray(values.detach().cpu() if isinstance(values, Tensor) else values, dtype=float)


def _render(section: Section | None, level: int) -> str:
    if section is None:
        return ""
    return f"<h{level}>{html.escape(section.heading)}</h{level}>\n{section.body}\n"


def run_anchor(run) -> str:
    """The HTML id of a run's part of the report: ``run-<model>-seed<seed>-<task>``."""
    task = getattr(run, "task", None)
    return re.sub(r"[^A-Za-z0-9_-]", "-", f"run-{run.model}-seed{run.seed}" + (f"-{task}" if task else ""))


def run_html(run, ctx: ReportContext, level: int = 2, sections: Sequence[Callable] | None = None) -> str:
    """One run's part of the page: a heading, then each section of ``sections`` (default RUN_SECTIONS)."""
    parts = [f"<section id='{run_anchor(run)}' class='el-run'><h{level}>{html.escape(_run_label(run))}</h{level}>"]
    parts += [_render(fn(run, ctx), level + 1) for fn in (sections or RUN_SECTIONS)]
    if getattr(run, "heads", None) is None:
        parts.append("<p>The run did not emerge between two checkpoints: nothing to patch.</p>")
    parts.append("</section>")
    return "\n".join(parts)


def report_body(report, ctx: ReportContext) -> str:
    """The page's content: PAGE_SECTIONS, a list of links to the runs, then every run's sections;
    with several tasks, one section per task holding its runs."""
    parts = [_render(fn(report, ctx), 2) for fn in PAGE_SECTIONS]
    links = " · ".join(f"<a href='#{run_anchor(r)}'>{html.escape(_run_label(r))}</a>" for r in report.runs)
    parts.append(f"<nav class='el-runs'>Runs: {links}</nav>")
    tasks = list(dict.fromkeys(getattr(r, "task", None) for r in report.runs))
    if len(tasks) <= 1:
        parts += [run_html(r, ctx) for r in report.runs]
        return "\n".join(parts)
    for task in tasks:
        anchor = re.sub(r"[^A-Za-z0-9_-]", "-", f"task-{task}")
        parts.append(f"<section id='{anchor}' class='el-task'><h2>Task: {html.escape(str(task))}</h2>")
        parts += [run_html(r, ctx, level=3) for r in report.runs if getattr(r, "task", None) == task]
        parts.append("</section>")
    return "\n".join(parts)


PAGE_STYLE = ("body{font-family:system-ui,sans-serif;margin:16px auto;max-width:1240px;padding:0 8px}"
              "h2{margin-top:1.6em;border-bottom:1px solid #ddd}h3{margin:1.2em 0 0.3em 0}"
              "section.el-run{border-top:3px solid #888;margin-top:2em}")


class _HeadAssets(Assets):
    """Page assets that go into ``<head>``: sections only record which libraries they need."""

    def require(self, name: str) -> str:
        super().require(name)
        return ""


def page_html(title: str, body: Callable[[Assets], str]) -> str:
    """A self-contained page: ``body(assets)`` returns the HTML of the page's content, and every
    library it asked ``assets`` for (plotly.js, the circuitsvis bundle) is inlined once in
    ``<head>``; no network request when opened."""
    assets = _HeadAssets()
    content = body(assets)
    head_scripts = "".join(LIBRARIES[name]() for name in LIBRARIES if name in assets.sent)
    return "\n".join([
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        "<meta name='viewport' content='width=device-width, initial-scale=1'>",
        f"<title>{html.escape(title)}</title>",
        f"<style>{PAGE_STYLE}{STYLE}</style>",
        head_scripts,
        "</head><body>",
        f"<h1>{html.escape(title)}</h1>",
        content,
        "</body></html>",
    ])


def report_page(report) -> str:
    """The whole self-contained report page for a main-job report (:func:`page_html`).

    Args:
        report: an ``interp.pipeline.MainJobReport`` (``title``, ``threshold``, ``runs``,
            ``summary()``, ``emergence``, ``points``).
    """
    def body(assets: Assets) -> str:
        ctx = ReportContext(assets=assets, threshold=report.threshold, delta_p_bound=delta_p_bound(report.runs))
        return report_body(report, ctx)

    return page_html(report.title, body)


def figures_page(title: str, figures: Sequence[tuple[str, go.Figure]], inline_plotly: bool = True) -> str:
    """A self-contained page of plotly figures, one heading each: what an analysis writes beside
    its tables. ``inline_plotly=False`` loads plotly.js from its CDN instead (a page committed to
    docs/ stays small; it then needs the network to draw)."""
    if not inline_plotly:
        parts = [f"<h2>{html.escape(heading)}</h2>" + pio.to_html(fig, full_html=False, include_plotlyjs="cdn" if i == 0 else False)
                 for i, (heading, fig) in enumerate(figures)]
        return page_html(title, lambda assets: "\n".join(parts))

    def body(assets: Assets) -> str:
        return "\n".join(f"<h2>{html.escape(heading)}</h2>{figure_fragment(fig, assets)}" for heading, fig in figures)

    return page_html(title, body)


def report_fragment(report, assets: Assets) -> str:
    """The report's content for a notebook output (libraries from ``assets``, once per page)."""
    ctx = ReportContext(assets=assets, threshold=report.threshold, delta_p_bound=delta_p_bound(report.runs))
    return f"<div class='el-report'>{style_tag()}<h2>{html.escape(report.title)}</h2>{report_body(report, ctx)}</div>"





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


def _interval(rows: pd.DataFrame, **style) -> dict | None:
    """Plotly error bars from the ``recovered_lo`` / ``recovered_hi`` columns (95 % bootstrap
    interval), or None when a table has no interval."""
    if not {"recovered_lo", "recovered_hi"} <= set(rows.columns):
        return None
    return dict(type="data", symmetric=False, array=rows["recovered_hi"] - rows["recovered"],
                arrayminus=rows["recovered"] - rows["recovered_lo"], **style)


def _row_label(row) -> str:
    """A table row's run (``model``, ``seed`` columns) as :func:`interp.catalogue.run_label` names it."""
    return plot_text(run_label(row["model"], row["seed"])) if pd.notna(row.get("model")) else "run"


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
    rows["run"] = rows.apply(_row_label, axis=1)
    for run, sub in rows.groupby("run", sort=False):
        sub = sub.set_index("target").reindex(order)
        fig.add_trace(go.Bar(
            x=[COMPONENT_LABELS.get(c, c) for c in order], y=sub["recovered"], name=run, error_y=_interval(sub),
            hovertemplate="%{x}<br>recovered %{y:.2f}<extra>" + run + "</extra>"))
    metric = ", ".join(sorted(set(rows["metric"].astype(str)))) if len(rows) and "metric" in rows else "p"
    fig.add_hline(y=1.0, line_dash="dash", line_color="gray")
    fig.add_hline(y=0.0, line_color="black", line_width=1)
    fig.update_layout(title=f"{title} (metric: {metric}; bars: 95 % bootstrap over prompts)", barmode="group", showlegend=True,
                      yaxis_title="recovered = (m_patched − m_pre) / (m_post − m_pre)", height=460)
    return fig


def components_topk_figure(components: pd.DataFrame,
                           title: str = "Top-K heads patched jointly: patterns vs head outputs") -> go.Figure:
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
            fig.add_trace(go.Scatter(
                x=line["k"], y=line["recovered"], mode="lines+markers", name=f"{run}: {COMPONENT_LABELS[target].replace('all ', '')}",
                line=dict(color=palette[i % len(palette)], dash=dash), error_y=_interval(line, thickness=1)))
    fig.add_hline(y=1.0, line_dash="dash", line_color="gray")
    fig.update_layout(title=title, xaxis_title="K (top heads by their own effect, patched jointly)", showlegend=True,
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
    if not {"model", "seed"} <= set(scores.columns):  # one run's table: label it as one run
        scores = scores.assign(model="run", seed="")
    runs = list(dict.fromkeys(zip(scores["model"], scores["seed"])))
    fig = make_subplots(rows=max(1, len(runs)), cols=1, subplot_titles=[plot_text(f"{m} seed {s}") for m, s in runs],
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
    fig.update_layout(title=title + " (dotted: previous-token, solid: prefix-matching, dashed: copying)", showlegend=True,
                      height=320 * max(1, len(runs)) + 80)
    return fig
