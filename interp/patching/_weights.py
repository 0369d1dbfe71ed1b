"""Where a weight target's parameters live in a TransformerBridge, and swapping them in place.

Layout (checked on the GPT-NeoX and native bridges): each block's attention has split
``q``, ``k``, ``v``, ``o`` linears (``attn.{q,k,v,o}.original_component``), head-major, so
``W_Q[h] = q.weight[h*d_head:(h+1)*d_head].T`` and ``W_O[h] = o.weight[:, h*d_head:(h+1)*d_head].T``
(GPT-NeoX's fused ``qkv`` linear is not used by the bridge's forward).
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator, Sequence

import torch
from torch import Tensor

from interp.patching.targets import Target

Slice = tuple[str, tuple]  # (parameter name, index into it)
_ALL = (slice(None),)


def _param_names(model: Any) -> dict[int, str]:
    return {id(p): name for name, p in model.named_parameters()}


def _linear(model: Any, layer: int, name: str) -> torch.nn.Linear:
    module = getattr(model.blocks[layer].attn, name, None)
    linear = getattr(module, "original_component", None)
    if not isinstance(linear, torch.nn.Linear):
        raise ValueError(f"blocks.{layer}.attn has no split '{name}' linear: weight targets need a bridge "
                         "whose attention exposes q, k, v, o projections")
    return linear


def _check_no_gqa(model: Any) -> None:
    kv = getattr(model.cfg, "n_key_value_heads", None)
    if kv is not None and int(kv) != int(model.cfg.n_heads):
        raise ValueError(f"per-head weight targets need n_key_value_heads == n_heads, got {kv} vs {model.cfg.n_heads}")


def head_slices(model: Any, layer: int, heads: Sequence[int], parts: Sequence[str], bias_out: bool = False) -> list[Slice]:
    """Parameter slices of ``heads`` of ``layer`` for projections ``parts`` (subset of q, k, v, o).

    ``bias_out`` adds the output bias ``b_O`` (shared by the layer's heads).
    """
    _check_no_gqa(model)
    names = _param_names(model)
    d_head = int(model.cfg.d_head)
    out: list[Slice] = []
    for part in parts:
        linear = _linear(model, layer, part)
        for h in heads:
            rows = slice(h * d_head, (h + 1) * d_head)
            if part == "o":
                out.append((names[id(linear.weight)], (slice(None), rows)))
            else:
                out.append((names[id(linear.weight)], (rows,)))
                if linear.bias is not None:
                    out.append((names[id(linear.bias)], (rows,)))
        if part == "o" and bias_out and linear.bias is not None:
            out.append((names[id(linear.bias)], _ALL))
    return out


def _module_slices(model: Any, module: torch.nn.Module) -> list[Slice]:
    names = _param_names(model)
    return [(names[id(p)], _ALL) for p in module.parameters()]


def target_slices(model: Any, target: Target) -> list[Slice]:
    """Every parameter slice a weight target swaps.

    Raises:
        ValueError: not a weight target, or the bridge lacks the needed modules.
    """
    n_layers, n_heads = int(model.cfg.n_layers), int(model.cfg.n_heads)
    if target.kind in ("qk", "ov"):
        by_layer: dict[int, list[int]] = {}
        for layer, head in target.resolved_heads(n_layers, n_heads):
            by_layer.setdefault(layer, []).append(head)
        slices: list[Slice] = []
        for layer, heads in sorted(by_layer.items()):
            if target.kind == "qk":
                slices += head_slices(model, layer, heads, ("q", "k"))
            else:
                slices += head_slices(model, layer, heads, ("v", "o"), bias_out=len(set(heads)) == n_heads)
        return slices
    if target.kind == "mlp_weights":
        return [s for l in target.resolved_layers(n_layers) for s in _module_slices(model, model.blocks[l].mlp)]
    if target.kind == "block":
        return [s for l in target.resolved_layers(n_layers) for s in _module_slices(model, model.blocks[l])]
    if target.kind == "embed":
        return _module_slices(model, model.embed)
    if target.kind == "unembed":
        return _module_slices(model, model.unembed)
    raise ValueError(f"target {target.kind!r} is not a weight target")


@contextlib.contextmanager
def swapped(model: Any, post_weights: dict[str, Tensor], slices: Sequence[Slice]) -> Iterator[None]:
    """Copy ``post_weights[name][index]`` into ``model``'s parameters for the duration of the block."""
    params = dict(model.named_parameters())
    saved = []
    try:
        with torch.no_grad():
            for name, index in slices:
                if name not in post_weights:
                    raise ValueError(f"post checkpoint has no parameter {name!r}: pre and post must share the architecture")
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
