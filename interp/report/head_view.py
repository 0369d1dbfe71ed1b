"""Per-head views: one head before and after (its attention pattern at the pre step, at the post
step, and the change post − pre, side by side with readable token labels), and the head-score
curves per checkpoint (:func:`head_scores_figure`).

What ``HeadRanking.show_head(layer, head)`` and ``RunAnalysis.show_head(layer, head)`` return, and
what the report draws for each top head (:mod:`interp.report.page`). The patterns come in as
``[query_pos, key_pos]`` matrices; the callers pick them out of their ``[layer, batch, head,
query_pos, key_pos]`` stacks, so nobody has to index that layout by hand.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio
from jaxtyping import Float
from markupsafe import Markup
from plotly.subplots import make_subplots
from torch import Tensor

from interp.core.templating import render, trusted
from interp.report.display import Assets, figure_fragment
from interp.report.figures import plot_text

__all__ = [
    "head_comparison_figure",
    "head_comparisons_html",
    "head_scores_figure",
    "token_axis_labels",
    "top_score_heads",
]


def token_axis_labels(tokens: Sequence[str], n: int) -> list[str]:
    """``n`` unique axis labels ``"<token> (<pos>)"``, as the circuitsvis views beside them write
    them: the position keeps them unique (a plotly category axis merges equal labels, and a prompt
    repeats its tokens); spaces shown as ``␣`` and newlines as
    ``⏎`` so that a token made of whitespace stays visible; positions alone where ``tokens`` is
    shorter than ``n``. Escaped for plotly (text from tokenizers is data)."""
    labels = []
    for i in range(n):
        if i < len(tokens):
            text = str(tokens[i]).replace(" ", "␣").replace("\n", "⏎").replace("\t", "⇥")
            labels.append(plot_text(f"{text} ({i})"))
        else:
            labels.append(str(i))
    return labels


def head_comparison_figure(
    pre: Float[Tensor, "query_pos key_pos"] | np.ndarray,
    post: Float[Tensor, "query_pos key_pos"] | np.ndarray,
    tokens: Sequence[str] = (),
    title: str = "Attention pattern before and after",
    pre_label: str = "pre",
    post_label: str = "post",
) -> go.Figure:
    """Three heatmaps side by side: ``pre``, ``post`` (attention probabilities, one 0–1 scale) and
    ``post − pre`` (diverging, ±max |change|); rows are query positions, columns key positions.

    Args:
        pre, post: one head's attention pattern on one prompt at the two steps, ``[query_pos,
            key_pos]``, probabilities (rows sum to 1).
        tokens: the prompt's token texts (axis labels, :func:`token_axis_labels`).
        title: the figure's title (plain text; escaped here).
        pre_label, post_label: the panels' names (e.g. ``"pre (step 1800)"``).

    Returns:
        A plotly figure whose ``data`` are the three heatmaps in that order (``data[2].z`` is
        ``post − pre``).

    Raises:
        ValueError: ``pre`` and ``post`` are not two matrices of one shape.
    """
    a = np.asarray(pre.detach().cpu().float() if isinstance(pre, Tensor) else pre, dtype=np.float64)
    b = np.asarray(post.detach().cpu().float() if isinstance(post, Tensor) else post, dtype=np.float64)
    if a.ndim != 2 or a.shape != b.shape:
        raise ValueError(f"pre and post must be [query_pos, key_pos] of one shape; got {a.shape} and {b.shape}")
    diff = b - a
    q_labels, k_labels = token_axis_labels(tokens, a.shape[0]), token_axis_labels(tokens, a.shape[1])
    bound = float(np.nanmax(np.abs(diff))) if np.isfinite(diff).any() and np.nanmax(np.abs(diff)) > 0 else 1.0
    names = [plot_text(pre_label), plot_text(post_label), plot_text(f"{post_label} − {pre_label}")]
    fig = make_subplots(rows=1, cols=3, subplot_titles=names, horizontal_spacing=0.11, shared_yaxes=True)
    for col, (z, name) in enumerate(zip((a, b, diff), names), start=1):
        change = col == 3
        fig.add_trace(
            go.Heatmap(
                z=z,
                x=k_labels,
                y=q_labels,
                name=name,
                coloraxis="coloraxis2" if change else "coloraxis",
                showlegend=True,
                hovertemplate="query %{y}<br>key %{x}<br>" + name + " %{z:.3f}<extra></extra>",
            ),
            row=1,
            col=col,
        )
    fig.update_yaxes(autorange="reversed", title_text="query position", row=1, col=1)
    fig.update_xaxes(title_text="key position", tickangle=-60)
    fig.update_layout(
        title=plot_text(title),
        height=420 + 6 * a.shape[0],
        coloraxis=dict(
            colorscale="Blues",
            cmin=0,
            cmax=1,
            colorbar=dict(title=dict(text="attention", side="right"), x=0.635, len=0.8, thickness=10),
        ),
        coloraxis2=dict(
            colorscale="RdBu",  # blue: attention gained, red: lost (as the scrubber and the delta_p maps)
            cmid=0,
            cmin=-bound,
            cmax=bound,
            colorbar=dict(
                title=dict(text="post − pre", side="right"), x=1.01, len=0.8, thickness=10, exponentformat="none"
            ),
        ),
        margin=dict(t=70, b=90),
        showlegend=True,
        legend=dict(orientation="h", yanchor="top", y=-0.3, x=0),
    )
    return fig


def top_score_heads(scores: pd.DataFrame, per_score: int = 2) -> dict[tuple[int, int], tuple[int, str]]:
    """The heads worth a line: for each score, the ``per_score`` heads with the highest value at
    the last step of ``scores`` (rows step, layer, head, score, value of one run); a head that
    leads several scores keeps the first. Returns {(layer, head): (colour index, score)}."""
    last = scores[scores["step"] == scores["step"].max()]
    top: dict[tuple[int, int], tuple[int, str]] = {}
    for score in dict.fromkeys(last["score"]):
        best = last[last["score"] == score].sort_values("value", ascending=False).head(per_score)
        for r in best.itertuples():
            top.setdefault((int(r.layer), int(r.head)), (len(top), str(score)))
    return top


def head_scores_figure(
    scores: pd.DataFrame,
    emergence: pd.DataFrame | None = None,
    title: str = "Head scores per checkpoint, over the capability curve",
) -> go.Figure:
    """Per run: the top heads' scores against training step (:func:`top_score_heads`: the two
    heads with the highest value of each score at the last step, each drawn with the score it
    leads in), with greedy accuracy (grey, right axis) from ``emergence.csv`` when given; every
    other head and score is one legend entry, "other heads and scores", off until clicked.

    Args:
        scores: rows of ``head_scores.csv`` (model, seed, step, layer, head, score, value).
        emergence: rows of ``emergence.csv`` (model, seed, step, accuracy, ...), optional.
    """
    if not {"model", "seed"} <= set(scores.columns):  # one run's table: label it as one run
        scores = scores.assign(model="run", seed="")
    runs = list(dict.fromkeys(zip(scores["model"], scores["seed"])))
    fig = make_subplots(
        rows=max(1, len(runs)),
        cols=1,
        subplot_titles=[plot_text(f"{m} seed {s}") for m, s in runs],
        specs=[[{"secondary_y": True}] for _ in range(max(1, len(runs)))],
        shared_xaxes=True,
    )
    dashes = {"previous_token": "dot", "prefix_matching": "solid", "copying": "dash"}
    palette = pio.templates["plotly"].layout.colorway
    rest_named = False
    for row, (model, seed) in enumerate(runs, start=1):
        sub = scores[(scores["model"] == model) & (scores["seed"] == seed)]
        top = top_score_heads(sub)
        for (layer, head), by_head in sub.groupby(["layer", "head"]):
            rank = top.get((int(layer), int(head)))
            for score, line in by_head.groupby("score"):
                line = line.sort_values("step")
                lead = rank is not None and rank[1] == score  # the score this head leads in
                fig.add_trace(
                    go.Scatter(
                        x=line["step"],
                        y=line["value"],
                        mode="lines+markers" if lead else "lines",
                        name=f"L{layer}H{head} {score}" if lead else "other heads and scores",
                        legendgroup=f"L{layer}H{head}" if lead else "rest",
                        showlegend=lead or not rest_named,
                        visible=True if lead else "legendonly",
                        marker=dict(size=4),
                        hovertemplate=f"L{layer}H{head} {score}<br>step %{{x}}<br>%{{y:.3f}}<extra></extra>",
                        line=dict(color=palette[rank[0] % len(palette)], dash=dashes.get(score, "solid"), width=2.5)
                        if lead
                        else dict(color="rgba(120,120,120,0.3)", width=1, dash=dashes.get(score, "solid")),
                    ),
                    row=row,
                    col=1,
                    secondary_y=False,
                )
                rest_named = rest_named or not lead
        if emergence is not None:
            curve = emergence[(emergence["model"] == model) & (emergence["seed"] == seed)].sort_values("step")
            curve = curve[(curve["step"] >= sub["step"].min()) & (curve["step"] <= sub["step"].max())]
            fig.add_trace(
                go.Scatter(
                    x=curve["step"],
                    y=curve["accuracy"],
                    mode="lines",
                    name="greedy accuracy",
                    line=dict(color="gray", width=4),
                    opacity=0.4,
                    showlegend=row == 1,
                ),
                row=row,
                col=1,
                secondary_y=True,
            )
        fig.update_yaxes(title_text="score", row=row, col=1, secondary_y=False, range=[-0.05, 1.05])
        fig.update_yaxes(title_text="accuracy", row=row, col=1, secondary_y=True, range=[0, 1])
    fig.update_xaxes(title_text="training step", row=max(1, len(runs)), col=1)
    fig.update_layout(
        title=title + " (dotted: previous-token, solid: prefix-matching, dashed: copying)",
        showlegend=True,
        height=320 * max(1, len(runs)) + 80,
    )
    return fig


def head_comparisons_html(run, assets: Assets, label: str) -> str:
    """The report's comparison of each top head a run kept (``example_patterns``: pre then post
    per head, ``example_names`` ``"L1H3 pre (step 1800)"``, ...): :func:`head_comparison_figure`
    per head, then a caption; ``label`` names the run in the titles."""
    names, patterns = list(getattr(run, "example_names", []) or []), run.example_patterns
    parts = []
    for i in range(0, len(names) - 1, 2):
        head = names[i].split(" ")[0]
        fig = head_comparison_figure(
            patterns[i],
            patterns[i + 1],
            run.example_tokens,
            title=f"{label}: {head} before, after and the change",
            pre_label=names[i].split(" ", 1)[-1],
            post_label=names[i + 1].split(" ", 1)[-1],
        )
        parts.append(figure_fragment(fig, assets))
    caption = Markup(
        "Each top head's pattern at the pre step, at the post step and the change post − pre (blue: attention "
        "gained, red: lost, as in the scrubber); rows are query positions, columns key positions, labelled token (position) "
        "(␣ = a space). From Python: <code>run.show_head(layer, head)</code>, or any head with "
        "<code>rank_heads_between(...).show_head(layer, head)</code>."
    )
    if not parts:
        return ""
    return render("report/templates/section_body.html.j2", parts=[trusted(p) for p in parts], caption=caption)
