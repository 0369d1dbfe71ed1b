"""Figures and notebook display of synthetic runs (a :class:`synthetic.training.TrainResult`).

Figures (plotly): the evaluation loss against its floor and plateau, the per-position
"staircase" (loss on each output cell), and per-head attention entropy and ground-truth
alignment over training. ``TrainResult._repr_html_`` shows a summary table and these figures,
offline (:mod:`interp.report.display`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import torch
from jaxtyping import Float
from markupsafe import escape

from interp.report.display import Assets, figure_fragment, key_values_fragment, style_tag

SUMMARY_KEYS = (
    "final_loss",
    "floor",
    "plateau_loss",
    "plateau_length",
    "threshold",
    "steps_to_threshold",
    "emerged",
    "final_max_alignment",
    "n_params",
    "wall_time_s",
)


def _label(result) -> str:
    cfg = result.config
    bias = f", bias β={cfg.bias:g}" if cfg.bias else ", no bias"
    return f"{cfg.task} S={cfg.S} s={cfg.s}, seed {cfg.seed}{bias}"


def loss_figure(results, title: str = "Evaluation loss") -> go.Figure:
    """Evaluation loss (nats) vs step for one run or a ``{label: result}`` mapping, with the
    task's plateau (the loss of predicting without the pattern, ln 2 per bit on the linear map)
    and floor (the best achievable loss) as dashed lines."""
    if not isinstance(results, Mapping):
        results = {_label(results): results}
    fig = go.Figure()
    for label, result in results.items():
        fig.add_trace(go.Scatter(x=result.metrics["step"], y=result.metrics["loss"], mode="lines", name=label))
    first = next(iter(results.values()))
    fig.add_hline(
        y=first.summary["plateau_loss"],
        line_dash="dash",
        line_color="gray",
        name=f"plateau ({first.summary['plateau_loss']:.3f} nats)",
        showlegend=True,
    )
    if first.summary.get("floor") is not None:
        fig.add_hline(
            y=first.summary["floor"],
            line_dash="dot",
            line_color="black",
            name=f"floor ({first.summary['floor']:.3f} nats)",
            showlegend=True,
        )
    fig.update_layout(title=title, xaxis_title="training step", yaxis_title="loss (nats)", height=360, showlegend=True)
    return fig


def staircase_figure(result, title: str = "Per-position loss: the staircase") -> go.Figure:
    """Loss on each output cell ``i`` (``loss_out_i``, nats) vs step: the cells are learned one at
    a time (Baherwani et al. 2026, the linear map task's staircase figure)."""
    metrics = result.metrics
    columns = sorted((c for c in metrics.columns if re.fullmatch(r"loss_out_\d+", c)), key=lambda c: int(c[9:]))
    fig = go.Figure(
        [go.Scatter(x=metrics["step"], y=metrics[c], mode="lines", name=f"output cell {c[9:]}") for c in columns]
    )
    fig.update_layout(
        title=title, xaxis_title="training step", yaxis_title="loss on the cell (nats)", height=380, showlegend=True
    )
    return fig


def head_metric_figure(result, metric: str = "entropy", title: str | None = None) -> go.Figure:
    """Per-head ``entropy`` (nats) or ``alignment`` (attention mass on the true keys, probability)
    vs step, one line per head (measured with the bias in force when the run had one).

    Raises:
        ValueError: ``metric`` is not ``"entropy"`` or ``"alignment"``, or the run has no such columns.
    """
    if metric not in ("entropy", "alignment"):
        raise ValueError(f"metric={metric!r}; valid: 'entropy', 'alignment'")
    metrics = result.metrics
    columns = [c for c in metrics.columns if re.fullmatch(rf"{metric}_L\d+H\d+", c)]
    if not columns:
        raise ValueError(f"the run has no {metric}_L*H* columns (a model without attention?)")
    fig = go.Figure(
        [go.Scatter(x=metrics["step"], y=metrics[c], mode="lines", name=c.split("_", 1)[1]) for c in columns]
    )
    unit = "nats" if metric == "entropy" else "mass on the true keys"
    fig.update_layout(
        title=title or f"Head {metric} over training",
        xaxis_title="training step",
        yaxis_title=f"{metric} ({unit})",
        height=380,
        showlegend=True,
    )
    return fig


@torch.no_grad()
def alignment_without_bias(result, n_seqs: int = 256, seed: int = 12345) -> Float[np.ndarray, "layer head"]:
    """Ground-truth alignment of every head of the trained model, measured with no bias.

    The attention-bias hooks live only inside :func:`synthetic.training.train`, so the returned
    model is the bare model: its attention mass on the true keys (probability, averaged over
    ``n_seqs`` fresh sequences and the target query positions) is what the model itself learned.
    """
    from synthetic.metrics import attention_alignment

    task, model = result.task or result.config.make_task(), result.model
    device = next(model.parameters()).device
    tokens = task.sample(n_seqs, torch.Generator(device="cpu").manual_seed(seed)).to(device)
    names = [f"blocks.{l}.attn.hook_pattern" for l in range(model.cfg.n_layers)]
    _, cache = model.run_with_cache(tokens, names_filter=lambda n: n in names)
    return np.stack(
        [
            attention_alignment(cache[n], task.pattern_mask.to(device), task.target_mask.to(device)).cpu().numpy()
            for n in names
        ]
    )


def result_html(result, assets: Assets | None = None) -> str:
    """A run's summary table and its loss, staircase, entropy and alignment figures as HTML
    (libraries from ``assets``; default a new page's, so the HTML is self-contained)."""
    assets = Assets() if assets is None else assets
    summary = {k: result.summary.get(k) for k in SUMMARY_KEYS}
    parts = [
        style_tag(),
        f"<h3>{escape(_label(result))}</h3>",  # a label is data, never markup
        key_values_fragment(
            summary,
            caption="Losses in nats; plateau_length and steps_to_threshold in steps "
            "(— when not reached); final_max_alignment: the best head's mass on the true keys.",
        ),
        figure_fragment(loss_figure(result), assets),
        figure_fragment(staircase_figure(result), assets),
    ]
    if any(c.startswith("entropy_") for c in result.metrics.columns):
        parts += [
            figure_fragment(head_metric_figure(result, "entropy"), assets),
            figure_fragment(head_metric_figure(result, "alignment"), assets),
        ]
    return "<div class='el-train-result'>" + "\n".join(parts) + "</div>"


def results_table(results: Mapping[str, object]) -> pd.DataFrame:
    """One row per labelled run: the summary keys of :data:`SUMMARY_KEYS`."""
    return pd.DataFrame([{"run": label, **{k: r.summary.get(k) for k in SUMMARY_KEYS}} for label, r in results.items()])
