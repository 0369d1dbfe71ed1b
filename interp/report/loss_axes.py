"""The training loss on a second axis of the capability figure: the loss plateau and the
capability jump side by side (:func:`add_loss_axes` on a
:func:`interp.report.figures.capability_figure`; :func:`capability_with_loss` makes both)."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio

from interp.report.figures import capability_figure, plot_text, thin_curve


def run_losses(runs) -> dict:
    """``{(model, seed): training loss rows}`` of the runs that record one (``RunAnalysis.training_loss``)."""
    return {(r.model, r.seed): r.training_loss for r in runs if getattr(r, "training_loss", None) is not None}


def capability_with_loss(
    emergence: pd.DataFrame, points: pd.DataFrame, losses: dict | None = None, **kwargs
) -> go.Figure:
    """:func:`interp.report.figures.capability_figure` (``kwargs``: its ``metric``, ``threshold``,
    ``totals``) with each run's training loss on a second y axis (:func:`add_loss_axes`).

    Args:
        emergence, points: as for ``capability_figure``.
        losses: ``{(model, seed): rows (step, loss)}``, the training loss (nats) of the runs that
            record one (:meth:`interp.sources.CheckpointSource.loss_curve`); None or {}: none drawn.
    """
    fig = capability_figure(emergence, points, **kwargs)
    if losses:
        add_loss_axes(fig, list(dict.fromkeys(emergence["model"])), losses, points)
    return fig


def add_loss_axes(fig: go.Figure, models: list, losses: dict, points: pd.DataFrame) -> int:
    """Draw each run's training loss on a second y axis (right, nats) of its model's panel of a
    :func:`capability_figure`, dotted in its seed's colour, with its point of emergence marked on
    the loss (an ✕ at the post step: the plateau and the jump side by side, as in the paper's
    figures). The step axis is the panel's own (log or linear alike: step 0 drawn at 0.5).

    Args:
        fig: a :func:`capability_figure` (one panel per model, in ``models``' order).
        models: the panels' models.
        losses: ``{(model, seed): rows (step, loss)}`` (nats); runs without one are skipped.
        points: the figure's ``points`` rows (model, seed, pre_step, post_step, emerged).

    Returns:
        How many loss traces were drawn.
    """
    palette = pio.templates["plotly"].layout.colorway
    n_panels = max(1, len(models))
    drawn = 0
    for col, model in enumerate(models, start=1):
        seeds = sorted({seed for (m, seed) in losses if m == model})
        all_seeds = sorted(points.loc[points["model"] == model, "seed"]) if len(points) else seeds
        axis = n_panels + col  # the overlay axis of this panel: y{n_panels + col}
        x_ref, y_ref = ("x", "y") if col == 1 else (f"x{col}", f"y{col}")
        for seed in seeds:
            loss = losses[(model, seed)]
            if loss is None or not len(loss) or not {"step", "loss"} <= set(loss.columns):
                continue
            loss = thin_curve(loss.sort_values("step"))
            k = all_seeds.index(seed) if seed in all_seeds else seeds.index(seed)
            color = palette[k % len(palette)]
            name = f"{plot_text(model)} seed {seed}"
            fig.add_trace(
                go.Scatter(
                    x=loss["step"].clip(lower=0.5),
                    y=loss["loss"],
                    mode="lines",
                    line=dict(color=color, dash="dot", width=1.5),
                    name=f"{name}: training loss (nats, right axis)",
                    legendgroup=f"{model}-{seed}",
                    xaxis=x_ref,
                    yaxis=f"y{axis}",
                    hovertemplate="step %{x}<br>training loss %{y:.3f} nats<extra></extra>",
                )
            )
            drawn += 1
            row = points[(points["model"] == model) & (points["seed"] == seed)] if len(points) else points
            if len(row) and bool(row["emerged"].iloc[0]) and pd.notna(row["post_step"].iloc[0]):
                post = int(row["post_step"].iloc[0])
                at = loss.iloc[(loss["step"] - post).abs().argsort().iloc[:1]]
                fig.add_trace(
                    go.Scatter(
                        x=[max(post, 0.5)],
                        y=[float(at["loss"].iloc[0])],
                        mode="markers",
                        marker=dict(symbol="x", size=11, color=color, line=dict(width=1, color="black")),
                        name=f"{name}: point of emergence on the loss",
                        legendgroup=f"{model}-{seed}",
                        showlegend=False,
                        xaxis=x_ref,
                        yaxis=f"y{axis}",
                        hovertemplate=f"point of emergence (post {post})<br>training loss %{{y:.3f}} nats<extra></extra>",
                    )
                )
        fig.update_layout(
            {
                f"yaxis{axis}": dict(
                    overlaying=y_ref,
                    anchor=x_ref,
                    side="right",
                    showgrid=False,
                    rangemode="tozero",
                    tickmode="auto",  # an overlaying axis otherwise syncs its ticks to the left one (0.559, ...)
                    nticks=6,
                    tickformat=".2~f",
                    title=dict(text="training loss (nats)") if col == n_panels else None,
                )
            }
        )
    if drawn:
        fig.update_layout(legend=dict(x=1.08), margin=dict(r=60))  # clear of the right axis' title
    return drawn
