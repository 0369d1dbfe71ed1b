"""The training loss under the capability figure: the loss plateau and the capability jump one
above the other on a shared step axis (:func:`add_loss_panels` on a
:func:`interp.report.figures.capability_figure` made with ``loss_row=True``;
:func:`capability_with_loss` makes both). The loss has its own panels, not a second y axis over
the accuracy: drawn over the accuracy lines, its noisy curves hid them (issue 71)."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio

from interp.report.figures import capability_figure, plot_text, thin_curve
from interp.report.step_axis import fit_step_ranges


def run_losses(runs) -> dict:
    """``{(model, seed): training loss rows}`` of the runs that record one (``RunAnalysis.training_loss``)."""
    return {(r.model, r.seed): r.training_loss for r in runs if getattr(r, "training_loss", None) is not None}


def capability_with_loss(
    emergence: pd.DataFrame, points: pd.DataFrame, losses: dict | None = None, **kwargs
) -> go.Figure:
    """:func:`interp.report.figures.capability_figure` (``kwargs``: its ``metric``, ``threshold``,
    ``totals``, ``x_scale``) with each run's training loss in a row of panels below, one per model,
    on the same step axis (:func:`add_loss_panels`).

    Args:
        emergence, points: as for ``capability_figure``.
        losses: ``{(model, seed): rows (step, loss)}``, the training loss (nats) of the runs that
            record one (:meth:`interp.sources.CheckpointSource.loss_curve`); None or {}, or none of
            these models': no loss row.
    """
    models = list(dict.fromkeys(emergence["model"]))
    drawn = {key: rows for key, rows in (losses or {}).items() if key[0] in models and _has_loss(rows)}
    fig = capability_figure(emergence, points, loss_row=bool(drawn), **kwargs)
    if drawn:
        add_loss_panels(fig, models, drawn, points, x_scale=kwargs.get("x_scale", "linear"))
    return fig


def _has_loss(rows) -> bool:
    return rows is not None and len(rows) > 0 and {"step", "loss"} <= set(rows.columns)


def add_loss_panels(fig: go.Figure, models: list, losses: dict, points: pd.DataFrame, x_scale: str = "linear") -> int:
    """Draw each run's training loss in the second row of its model's column of a
    :func:`capability_figure` made with ``loss_row=True``, in its seed's colour, with its point of
    emergence marked on the loss (an ✕ at the post step: the plateau and the jump one above the
    other, as in the paper's figures). A run's loss shares its legend entry with its capability
    line (one click hides both); every step axis is then fitted to the data again.

    Args:
        fig: a :func:`capability_figure` with ``loss_row=True`` (one column per model, in ``models``' order).
        models: the panels' models.
        losses: ``{(model, seed): rows (step, loss)}`` (nats); runs without one are skipped.
        points: the figure's ``points`` rows (model, seed, pre_step, post_step, emerged).
        x_scale: the figure's step axis (step 0 drawn at 0.5 on ``"log"``).

    Returns:
        How many loss traces were drawn.
    """
    palette = pio.templates["plotly"].layout.colorway
    drawn = 0
    for col, model in enumerate(models, start=1):
        seeds = sorted({seed for (m, seed) in losses if m == model})
        all_seeds = sorted(points.loc[points["model"] == model, "seed"]) if len(points) else seeds
        for seed in seeds:
            loss = losses[(model, seed)]
            if not _has_loss(loss):
                continue
            loss = thin_curve(loss.sort_values("step"))
            k = all_seeds.index(seed) if seed in all_seeds else seeds.index(seed)
            color = palette[k % len(palette)]
            name = f"{plot_text(model)} seed {seed}"
            steps = loss["step"].clip(lower=0.5) if x_scale == "log" else loss["step"]
            fig.add_trace(
                go.Scatter(
                    x=steps,
                    y=loss["loss"],
                    mode="lines",
                    line=dict(color=color, width=1.2),
                    name=f"{name}: training loss (nats)",
                    legendgroup=f"{model}-{seed}",
                    showlegend=False,
                    hovertemplate=f"{name}<br>step %{{x}}<br>training loss %{{y:.3f}} nats<extra></extra>",
                ),
                row=2,
                col=col,
            )
            drawn += 1
            row = points[(points["model"] == model) & (points["seed"] == seed)] if len(points) else points
            if len(row) and bool(row["emerged"].iloc[0]) and pd.notna(row["post_step"].iloc[0]):
                post = int(row["post_step"].iloc[0])
                at = loss.iloc[(loss["step"] - post).abs().argsort().iloc[:1]]
                fig.add_trace(
                    go.Scatter(
                        x=[max(post, 0.5) if x_scale == "log" else post],
                        y=[float(at["loss"].iloc[0])],
                        mode="markers",
                        marker=dict(symbol="x", size=11, color=color, line=dict(width=1, color="black")),
                        name=f"{name}: point of emergence on the loss",
                        legendgroup=f"{model}-{seed}",
                        showlegend=False,
                        hovertemplate=f"point of emergence (post {post})<br>training loss %{{y:.3f}} nats<extra></extra>",
                    ),
                    row=2,
                    col=col,
                )
    fig.update_yaxes(title_text="training loss (nats)", rangemode="tozero", row=2, col=1)
    fit_step_ranges(fig, x_scale)
    return drawn
