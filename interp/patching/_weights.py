"""Where a weight target's parameters live in a TransformerBridge, and swapping them in place.

Layout (checked on the GPT-NeoX, GPT-2, Llama, OLMo-2 and native bridges): each block's attention
has split ``q``, ``k``, ``v``, ``o`` projections (``attn.{q,k,v,o}.original_component``),
head-major. A ``torch.nn.Linear`` stores ``[out, in]``, so ``W_Q[h] = q.weight[h*d_head:(h+1)*d_head].T``
and ``W_O[h] = o.weight[:, h*d_head:(h+1)*d_head].T``; transformers' ``Conv1D`` (GPT-2's ``o``,
``x @ weight + bias``) stores ``[in, out]``, so its head slices are the transposed ones
(``W_O[h] = o.weight[h*d_head:(h+1)*d_head]``). The bridge's forward uses the split projections
(GPT-NeoX's fused ``qkv`` linear and GPT-2's ``c_attn`` are not called by it;
tests/interp/patching/test_patching_families.py checks GPT-2's weight targets against a Hugging Face model built
with the swapped ``c_attn`` / ``c_proj`` columns).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import torch
from jaxtyping import Float
from torch import Tensor

from interp.patching.kinds import get_kind
from interp.patching.targets import Target

Slice = tuple[str, tuple]  # (parameter name, index into it)
_ALL = (slice(None),)


def _param_names(model: Any) -> dict[int, str]:
    return {id(p): name for name, p in model.named_parameters()}


def _is_conv1d(module: Any) -> bool:
    """transformers' ``Conv1D`` (GPT-2): ``x @ weight + bias``, weight ``[in, out]``."""
    return type(module).__name__ == "Conv1D" and isinstance(getattr(module, "weight", None), Tensor)


def _projection(model: Any, layer: int, name: str) -> torch.nn.Module:
    """The split ``name`` projection (q, k, v, o) of ``layer``'s attention: a Linear or a Conv1D."""
    module = getattr(model.blocks[layer].attn, name, None)
    projection = getattr(module, "original_component", None)
    if not (isinstance(projection, torch.nn.Linear) or _is_conv1d(projection)):
        raise ValueError(
            f"blocks.{layer}.attn has no split '{name}' projection: weight targets need a bridge "
            "whose attention exposes q, k, v, o projections (Linear or Conv1D)"
        )
    return projection


def _head_index(projection: torch.nn.Module, part: str, rows: slice) -> tuple:
    """Index of one head's slice of a projection's weight: its output features for q, k, v, its
    input features for o, on whichever axis the layout (Linear ``[out, in]``, Conv1D ``[in, out]``) puts them."""
    output_axis = 1 if _is_conv1d(projection) else 0
    axis = output_axis if part != "o" else 1 - output_axis
    return (rows,) if axis == 0 else (slice(None), rows)


def _check_no_gqa(model: Any) -> None:
    kv = getattr(model.cfg, "n_key_value_heads", None)
    if kv is not None and int(kv) != int(model.cfg.n_heads):
        raise ValueError(f"per-head weight targets need n_key_value_heads == n_heads, got {kv} vs {model.cfg.n_heads}")


def head_slices(
    model: Any, layer: int, heads: Sequence[int], parts: Sequence[str], bias_out: bool = False
) -> list[Slice]:
    """Parameter slices of ``heads`` of ``layer`` for projections ``parts`` (subset of q, k, v, o).

    ``bias_out`` adds the output bias ``b_O`` (shared by the layer's heads).
    """
    _check_no_gqa(model)
    names = _param_names(model)
    d_head = int(model.cfg.d_head)
    out: list[Slice] = []
    for part in parts:
        projection = _projection(model, layer, part)
        for h in heads:
            rows = slice(h * d_head, (h + 1) * d_head)
            out.append((names[id(projection.weight)], _head_index(projection, part, rows)))
            if part != "o" and projection.bias is not None:
                out.append((names[id(projection.bias)], (rows,)))
        if part == "o" and bias_out and projection.bias is not None:
            out.append((names[id(projection.bias)], _ALL))
    return out


def head_W_O(model: Any, weights: dict[str, Tensor], layer: int) -> Float[Tensor, "head d_head d_model"]:
    """``W_O`` per head of ``layer`` from a weight dict (:func:`capture_weights`) of a model shaped like ``model``."""
    projection = _projection(model, layer, "o")
    name = _param_names(model)[id(projection.weight)]
    weight = weights[name]
    if not _is_conv1d(projection):
        weight = weight.T  # Linear [d_model, n_heads * d_head] -> [n_heads * d_head, d_model]
    n_heads = int(model.cfg.n_heads)
    return weight.reshape(n_heads, weight.shape[0] // n_heads, weight.shape[1])


def _module_slices(model: Any, module: torch.nn.Module) -> list[Slice]:
    names = _param_names(model)
    return [(names[id(p)], _ALL) for p in module.parameters()]


def target_slices(model: Any, target: Target) -> list[Slice]:
    """Every parameter slice a weight target swaps, from its kind's ``weights`` in the kinds table
    (:mod:`interp.patching.kinds`): head kinds name attention projections (``q``, ``k``, ``v``,
    ``o``; ``b_O`` too for every head of a layer when ``shared_bias``), layer kinds block
    submodules (``""`` the whole block), model kinds model attributes.

    Raises:
        ValueError: not a weight target, or the bridge lacks the needed modules.
    """
    kind = get_kind(target.kind)
    if not kind.is_weights:
        raise ValueError(f"target {target.kind!r} is not a weight target")
    n_layers, n_heads = int(model.cfg.n_layers), int(model.cfg.n_heads)
    if kind.scope == "head":
        by_layer: dict[int, list[int]] = {}
        for layer, head in target.resolved_heads(n_layers, n_heads):
            by_layer.setdefault(layer, []).append(head)
        slices: list[Slice] = []
        for layer, heads in sorted(by_layer.items()):
            slices += head_slices(
                model, layer, heads, kind.weights, bias_out=kind.shared_bias and len(set(heads)) == n_heads
            )
        return slices
    if kind.scope == "layer":
        return [
            s
            for l in target.resolved_layers(n_layers)
            for name in kind.weights
            for s in _module_slices(model, model.blocks[l].get_submodule(name))
        ]
    if kind.scope == "model":
        return [s for name in kind.weights for s in _module_slices(model, getattr(model, name))]
    raise ValueError(f"target {target.kind!r}: weights of scope {kind.scope!r} are not supported")


@contextlib.contextmanager
def swapped(model: Any, post_weights: dict[str, Tensor], slices: Sequence[Slice]) -> Iterator[None]:
    """Copy ``post_weights[name][index]`` into ``model``'s parameters for the duration of the block."""
    params = dict(model.named_parameters())
    saved = []
    try:
        with torch.no_grad():
            for name, index in slices:
                if name not in post_weights:
                    raise ValueError(
                        f"post checkpoint has no parameter {name!r}: pre and post must share the architecture"
                    )
                param = params[name]
                saved.append((param, index, param[index].clone()))
                param[index] = post_weights[name][index].to(param.device, param.dtype)
        yield
    finally:
        with torch.no_grad():
            for param, index, value in reversed(saved):
                param[index] = value


def capture_weights(model: Any) -> dict[str, Tensor]:
    """A detached copy of every parameter of ``model`` by name."""
    return {name: p.detach().clone() for name, p in model.named_parameters()}
