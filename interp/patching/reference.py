"""The reference path: every target patched by full forwards of the pre checkpoint.

TransformerLens's ``generic_activation_patch`` (``reduce="none"``) for one head's activation
or one layer's activation (the setter named by the kind's ``tl_setter``), ``run_with_hooks``
for joint activation patches, the pre model with the post parameters copied in for weight
targets, and two forwards for a path (the receiver's input recomputed from the stream plus the
sender's change).  Every fact about a kind comes from the kinds table
(:mod:`interp.patching.kinds`); this module imports nothing from the fast engine.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from interp.core.task_batch import TaskBatch
from interp.patching import _weights
from interp.patching._forward import (
    answer_logits_forward,
    answer_rows,
    model_device,
    query_mask,
    replace_hook,
    unit_count,
)
from interp.patching.kinds import get_kind
from interp.patching.targets import Target, hook_name

__all__ = ["reference_values"]

#: TransformerLens setter name -> (the setter, its index columns); "whole_layer": the post activation everywhere
_INDEX_COLUMNS = {
    "layer_head_pattern_patch_setter": ["layer", "head_index"],
    "layer_head_vector_patch_setter": ["layer", "head"],
    "whole_layer": ["layer"],
}


def _hooks_for(model: Any, post: Any, target: Target, pos: int) -> list:
    """run_with_hooks hooks replacing the target's activations by the post ones (one copy)."""
    n_layers, n_heads = post.n_layers, post.n_heads
    device = model_device(model)
    kind = get_kind(target.kind)
    if kind.scope == "layer":
        return [
            (
                hook_name(target.kind, l),
                replace_hook(
                    post.activation(target.kind, l).to(device), torch.ones(1, 1, dtype=torch.bool, device=device), None
                ),
            )
            for l in target.resolved_layers(n_layers)
        ]
    if kind.scope == "head":
        n_units, units = n_heads, target.resolved_heads(n_layers, n_heads)
    else:  # key/value heads, neurons
        n_units = unit_count(model, kind.scope)
        units = target.resolved_units(n_layers, n_units)
    by_layer: dict[int, list[int]] = {}
    for layer, unit in units:
        by_layer.setdefault(layer, []).append(unit)
    hooks = []
    for layer, heads in by_layer.items():
        mask = torch.zeros(1, n_units, dtype=torch.bool, device=device)
        mask[0, heads] = True
        hooks.append(
            (
                hook_name(target.kind, layer),
                replace_hook(
                    post.activation(target.kind, layer).to(device),
                    mask,
                    kind.head_axis,
                    query_mask(target.query_pos, pos, device),
                ),
            )
        )
    return hooks


def _setter(name: str) -> Callable:
    if name == "whole_layer":
        return lambda act, index, clean: clean  # the whole layer, every position
    import transformer_lens.patching as tl_patching

    return getattr(tl_patching, name)


def _transformer_lens_single(model: Any, post: Any, batch: TaskBatch, target: Target, fn: Callable) -> Tensor | None:
    """TransformerLens's own patch for one head's / one layer's activation (the kind's
    ``tl_setter``), else None."""
    import pandas as pd
    from transformer_lens import ActivationCache
    from transformer_lens.patching import generic_activation_patch

    kind = get_kind(target.kind)
    if batch.padded or kind.tl_setter is None:  # generic_activation_patch takes no attention mask: hooks pass it
        return None
    if kind.scope == "head" and target.query_pos is None and target.heads is not None and len(target.heads) == 1:
        ((layer, head),) = target.resolved_heads(post.n_layers, post.n_heads)
        index = [layer, head]
    elif kind.scope == "layer" and target.layers is not None and len(target.layers) == 1:
        (layer,) = target.resolved_layers(post.n_layers)
        index = [layer]
    else:
        return None
    columns = _INDEX_COLUMNS[kind.tl_setter]
    if len(columns) != len(index):
        return None
    index_df = pd.DataFrame([index], columns=columns)
    name = hook_name(target.kind, layer)
    cache = ActivationCache({name: post.activation(target.kind, layer).to(model_device(model))}, model)
    result = generic_activation_patch(
        model,
        batch.tokens,
        cache,
        lambda logits: fn(answer_rows(logits, batch), batch),
        patch_setter=_setter(kind.tl_setter),
        activation_name=kind.tl_activation or target.kind,
        index_df=index_df,
        reduce="none",
    )
    return result.values[0]


def _path_values(model: Any, post: Any, batch: TaskBatch, target: Target, fn: Callable) -> Tensor:
    """Direct path: receiver input recomputed from (stream + sender's change), two forwards."""
    (sl, sh), (rl, rh), rinput = target.heads[0], target.receiver, target.receiver_input
    kw = batch.forward_kwargs()
    _, cache = model.run_with_cache(batch.tokens, names_filter=lambda n: n == hook_name("z", sl), **kw)
    W_O = model.blocks[sl].attn.W_O[sh]
    delta = (post.activation("z", sl)[:, :, sh].to(W_O.device) - cache[hook_name("z", sl)][:, :, sh]) @ W_O
    captured = {}
    name = hook_name(rinput, rl)
    model.run_with_hooks(
        batch.tokens,
        fwd_hooks=[
            (f"blocks.{rl}.hook_in", lambda x, hook: x + delta.to(x.dtype)),
            (name, lambda act, hook: captured.__setitem__("x", act.clone()) or act),
        ],
        **kw,
    )
    mask = torch.zeros(1, post.n_heads, dtype=torch.bool, device=W_O.device)
    mask[0, rh] = True
    logits = model.run_with_hooks(batch.tokens, fwd_hooks=[(name, replace_hook(captured["x"], mask, 2))], **kw)
    return fn(answer_rows(logits, batch), batch)


def reference_values(model: Any, post: Any, batch: TaskBatch, target: Target, fn: Callable) -> Tensor:
    """The metric per prompt with ``target`` patched, by full forwards (see the module docstring).

    Args:
        model: the pre checkpoint (``TransformerBridge``, eval mode), on the batch's device.
        post: a :class:`interp.patching.engine.PostCheckpoint` of the same prompts.
        batch: the prompts (``TaskBatch``, on the model's device).
        target: what to patch.
        fn: metric ``(logits [batch, d_vocab], batch) -> [batch]``.

    Returns:
        ``Float[Tensor, "batch"]`` in the metric's units, on the model's device.

    Raises:
        ValueError: a weight target without captured weights, or a kind the path cannot patch.
    """
    kind = get_kind(target.kind)
    if kind.scope == "path":
        return _path_values(model, post, batch, target, fn)
    if kind.is_weights:
        if post.weights is None:
            raise ValueError(f"target {target.label()!r} swaps weights: capture_post(..., weights=True)")
        with _weights.swapped(model, post.weights, _weights.target_slices(model, target)):
            rows, _ = answer_logits_forward(model, batch)
        return fn(rows, batch)
    if kind.hook is None:
        raise ValueError(f"kind {target.kind!r} has neither a hook nor weights: nothing to patch")
    values = _transformer_lens_single(model, post, batch, target, fn)
    if values is not None:
        return values
    logits = model.run_with_hooks(
        batch.tokens, fwd_hooks=_hooks_for(model, post, target, batch.tokens.shape[1]), **batch.forward_kwargs()
    )
    return fn(answer_rows(logits, batch), batch)
