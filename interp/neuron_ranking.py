"""The MLP neurons of one layer ranked by a cross-checkpoint patch: ``rank_neurons``.

The neuron counterpart of :func:`interp.ranking.head_ranking`'s per-head effects: each neuron of
``layer`` (the MLP's hidden activation after the nonlinearity, ``blocks.{layer}.mlp.hook_post``,
``[batch, pos, d_mlp]``) is patched alone from the post checkpoint into the pre checkpoint through
the generic engine (:func:`interp.patching.patch_values`, kind ``neuron``: full forwards, one per
neuron), and the neurons are sorted by ``delta`` = mean patched metric - mean pre metric.

Sources: activation patching of single neurons (Vig et al. 2020, "Investigating Gender Bias in
Language Models Using Causal Mediation Analysis"; TransformerLens ``patching``), across
checkpoints around a point of emergence as for heads (Baherwani et al. 2026); locations as a
component with an index set: pyvene (Wu et al. 2024).
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import torch

from interp.core.metrics import metric_spec
from interp.core.objects import check_argument
from interp.core.settings import StudyConfig
from interp.core.task_batch import TaskBatch
from interp.patching import PostCheckpoint, capture_post, metric_values, neurons, patch_values
from interp.patching._forward import check_batch, heads_shape, mlp_width, model_device
from interp.ranking_stats import bootstrap_interval
from interp.tasks import metric_for

__all__ = ["rank_neurons"]


def rank_neurons(
    pre_model: Any,
    post: Any,
    batch: TaskBatch,
    layer: int,
    config: StudyConfig = StudyConfig(),
    top_n: int | None = None,
) -> pd.DataFrame:
    """Rank the MLP neurons of ``layer`` by patching each alone from the post checkpoint.

    Run it on the checkpoints around a point of emergence (``pre_step``, ``post_step``): the
    neurons whose post activation moves the pre checkpoint's metric most come first.

    Args:
        pre_model: the pre checkpoint (``TransformerBridge``, eval mode, float32).
        post: the post model or its ``PostCheckpoint`` (``capture_post``; it must hold the
            ``neuron`` activations: ``kinds=None`` or a ``kinds`` with ``"neuron"``).
        batch: prompts (``TaskBatch``: tokens ``Int[Tensor, "batch pos"]``, answers ``[batch]``).
        layer: the layer whose ``d_mlp`` neurons are ranked, in ``[0, n_layers - 1]``.
        config: the study settings (:class:`interp.core.settings.StudyConfig`): ``metric``
            (None: the task's own, :func:`interp.tasks.metric_for`) and ``n_boot`` (bootstrap
            resamples over prompts of the 95 % interval of ``delta``; 0: none). Neurons are always
            patched by full forwards (``method`` is not read: the layer-skip engine has no neuron way).
        top_n: keep only the first ``top_n`` rows (None: every neuron).

    Returns:
        DataFrame, one row per neuron sorted by ``delta`` (largest first; ties by neuron): ``layer``,
        ``neuron``, ``delta`` (mean patched - mean pre, metric units: probability for ``p``),
        ``delta_lo``, ``delta_hi`` (95 % percentile bootstrap interval), ``rank`` (1 = largest),
        ``metric``, ``unit``.

    Raises:
        TypeError: ``config`` is not a ``StudyConfig``.
        ValueError: a bad batch, a ``layer`` out of range, a ``top_n`` below 1, a model without
            ``cfg.d_mlp``, pre and post checkpoints of different shapes, or the engine's input errors.
    """
    check_argument(isinstance(config, StudyConfig), config, "rank_neurons: config", "a StudyConfig")
    batch = check_batch(batch)
    n_layers, _ = heads_shape(pre_model)
    if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer < n_layers:
        raise ValueError(f"layer={layer!r} out of range: an integer in [0, {n_layers - 1}]")
    if top_n is not None and (isinstance(top_n, bool) or not isinstance(top_n, int) or top_n < 1):
        raise ValueError(f"top_n={top_n!r}: an integer >= 1, or None for every neuron")
    d_mlp = mlp_width(pre_model)
    metric = metric_for(batch, config.metric)
    batch = batch.to(model_device(pre_model))
    if not isinstance(post, PostCheckpoint):
        if isinstance(post, torch.nn.Module) and mlp_width(post) != d_mlp:
            raise ValueError(f"pre and post checkpoints differ in d_mlp: {d_mlp} vs {mlp_width(post)}")
        post = capture_post(post, batch, kinds=("neuron",), weights=False)
    targets = [neurons([(layer, n)]) for n in range(d_mlp)]
    patched = patch_values(pre_model, post, batch, targets, metric=metric, method="reference")  # [d_mlp, batch]
    values_pre, values_post = metric_values(pre_model, batch, metric), post.values(batch, metric)
    delta = (patched - values_pre).mean(dim=1)
    ci = bootstrap_interval(patched, values_pre, values_post, n_boot=config.n_boot)
    spec = metric_spec(metric)
    table = pd.DataFrame(
        {
            "layer": layer,
            "neuron": range(d_mlp),
            "delta": delta.double().numpy(),
            "delta_lo": ci["delta_lo"],
            "delta_hi": ci["delta_hi"],
        }
    )
    table = table.sort_values(["delta", "neuron"], ascending=[False, True], kind="mergesort").reset_index(drop=True)
    table["rank"] = range(1, d_mlp + 1)
    table["metric"], table["unit"] = spec.name, spec.unit
    return table if top_n is None else table.head(top_n)
