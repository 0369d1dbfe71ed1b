"""Helpers every part of the patching package shares: model checks, the batch, answer-only forwards,
the hook that replaces an activation by the post one (reference and fast engines alike)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from jaxtyping import Bool, Float
from torch import Tensor

from interp.core.metrics import answer_logits
from interp.core.task_batch import TaskBatch


def model_device(model: torch.nn.Module) -> torch.device:
    for p in model.parameters():
        return p.device
    return torch.device("cpu")


def heads_shape(model: Any) -> tuple[int, int]:
    """``(n_layers, n_heads)`` of a bridge with attention heads in eval mode, else a one-line ValueError."""
    cfg = getattr(model, "cfg", None)
    n_layers = int(getattr(cfg, "n_layers", 0) or 0)
    n_heads = int(getattr(cfg, "n_heads", 0) or 0)
    hook_dict = getattr(model, "hook_dict", {})
    if n_layers <= 0 or n_heads <= 0 or any(f"blocks.{l}.attn.hook_pattern" not in hook_dict for l in range(n_layers)):
        raise ValueError(
            f"model {type(model).__name__} (n_layers={n_layers}, n_heads={n_heads}) has no "
            "attention heads with blocks.{l}.attn.hook_pattern; attention-pattern patching "
            "needs a TransformerBridge of an attention model"
        )
    if getattr(model, "training", False):
        raise ValueError("model is in training mode (dropout would randomise patches); call model.eval() first")
    return n_layers, n_heads


def mlp_width(model: Any) -> int:
    """``d_mlp``, the number of MLP neurons per layer (``model.cfg.d_mlp``).

    Raises:
        ValueError: a model whose config names no MLP width.
    """
    d_mlp = int(getattr(getattr(model, "cfg", None), "d_mlp", 0) or 0)
    if d_mlp <= 0:
        raise ValueError(f"model {type(model).__name__} has no cfg.d_mlp: neuron targets need an MLP")
    return d_mlp


def unit_count(model: Any, scope: str) -> int:
    """How many units a per-unit scope has per layer: ``n_heads`` (``head``), ``n_key_value_heads``
    (``kv_head``; ``n_heads`` without grouped-query attention), ``d_mlp`` (``neuron``).

    Raises:
        ValueError: a scope that is not per unit, or a model without that dimension.
    """
    if scope == "head":
        return heads_shape(model)[1]
    if scope == "kv_head":
        return int(getattr(model.cfg, "n_key_value_heads", None) or heads_shape(model)[1])
    if scope == "neuron":
        return mlp_width(model)
    raise ValueError(f"scope {scope!r} has no units; per-unit scopes: head, kv_head, neuron")


def check_batch(batch: Any) -> TaskBatch:
    """The batch as a :class:`TaskBatch`, validated for patching (integer ids, answer_pos in range).

    Raises:
        ValueError: not a batch, non-integer tensors, or ``answer_pos`` outside ``[0, pos - 1]``.
    """
    if not isinstance(batch, TaskBatch):
        try:
            batch = TaskBatch(
                batch.tokens,
                batch.answers,
                batch.answer_pos,
                distractors=getattr(batch, "distractors", None),
                attention_mask=getattr(batch, "attention_mask", None),
            )
        except AttributeError:
            raise ValueError(
                f"batch must be a TaskBatch (tokens, answers, answer_pos), got {type(batch).__name__}"
            ) from None
    for name in ("tokens", "answers", "answer_pos"):
        value = getattr(batch, name)
        if not isinstance(value, Tensor) or value.is_floating_point() or value.is_complex():
            raise ValueError(
                f"{name} must be an integer torch.Tensor, got "
                f"{type(value).__name__ if not isinstance(value, Tensor) else value.dtype}"
            )
    if batch.tokens.shape[0] == 0 or batch.tokens.shape[1] == 0:
        raise ValueError(f"tokens must be a non-empty [batch, pos] tensor, got shape {tuple(batch.tokens.shape)}")
    pos = batch.tokens.shape[1]
    if bool(((batch.answer_pos < 0) | (batch.answer_pos >= pos)).any()):
        raise ValueError(
            f"answer_pos must lie in [0, {pos - 1}], got values "
            f"{batch.answer_pos.min().item()}..{batch.answer_pos.max().item()}"
        )
    return batch


def answer_rows(logits: Float[Tensor, "batch pos d_vocab"], batch: TaskBatch) -> Float[Tensor, "batch d_vocab"]:
    """The logits at each prompt's answer position (:func:`interp.core.metrics.answer_logits`).

    Raises:
        ValueError: if ``logits`` is not ``[batch, pos, d_vocab]`` for this batch.
    """
    return answer_logits(logits, batch)


def answer_logits_forward(run: Callable, batch: TaskBatch) -> tuple[Float[Tensor, "batch d_vocab"], Any]:
    """``(answer-position logits, rest)`` of ``run(tokens, **kw)``, unembedding the answer positions only.

    Hugging Face causal LMs accept ``logits_to_keep`` (a 1-D tensor of positions) and then
    unembed only those positions; with a 50k vocabulary that is most of a forward's FLOPs.  A
    model that ignores the argument returns full logits, one that rejects it is rerun without.
    A padded batch (prompts of different lengths) also passes its ``attention_mask`` and
    ``position_ids`` (:meth:`interp.tasks.TaskBatch.forward_kwargs`).
    """
    keep = torch.unique(batch.answer_pos)  # sorted
    extra = batch.forward_kwargs() if hasattr(batch, "forward_kwargs") else {}  # padded: mask, position ids
    try:
        out = run(batch.tokens, logits_to_keep=keep, **extra)
    except TypeError:
        out = run(batch.tokens, **extra)
    logits, rest = (out[0], out[1:]) if isinstance(out, tuple) else (out, ())
    if logits.shape[1] == batch.tokens.shape[1]:
        return answer_rows(logits, batch), rest
    if logits.shape[1] != keep.numel():
        raise RuntimeError(f"model returned logits of shape {tuple(logits.shape)} for logits_to_keep={keep.tolist()}")
    rows = logits[torch.arange(batch.tokens.shape[0], device=logits.device), torch.searchsorted(keep, batch.answer_pos)]
    return rows, rest


def first(output: Any) -> Tensor:
    return output[0] if isinstance(output, (tuple, list)) else output


def replace_hook(
    post: Tensor,
    mask: Bool[Tensor, "copies unit"],
    head_axis: int | None,
    query_mask: Bool[Tensor, " pos"] | None = None,
) -> Callable:
    """Hook: copy ``c`` of a stacked batch takes ``post`` on the heads ``mask[c]``.

    ``post``: the post activation of one copy of the prompts (``[batch, head, q, k]`` for a
    pattern, ``[batch, pos, head, d_head]`` for q/k/v/z, ``[batch, pos, d_model]`` for an MLP
    output: ``head_axis`` None, one unit); ``query_mask`` restricts a pattern to query positions.
    """
    n_copies = mask.shape[0]
    if head_axis is None:
        select = mask[:, :1].reshape(n_copies, 1, 1, 1)
    else:
        shape = [n_copies] + [1] * post.ndim
        shape[head_axis + 1] = mask.shape[1]
        select = mask.reshape(shape)
        if query_mask is not None:
            qshape = [1] * (post.ndim + 1)
            qshape[head_axis + 2] = query_mask.numel()
            select = select & query_mask.reshape(qshape)

    def hook(act: Tensor, hook: Any = None) -> Tensor:
        stacked = act.reshape(n_copies, -1, *act.shape[1:])
        return torch.where(select, post[None].to(act.dtype), stacked).reshape(act.shape)

    return hook


def query_mask(query_pos: int | None, pos: int, device: torch.device) -> Tensor | None:
    """Boolean mask of the one patched destination position (None: every position).

    Raises:
        ValueError: a position outside ``[-pos, pos - 1]``.
    """
    if query_pos is None:
        return None
    if not -pos <= query_pos < pos:
        raise ValueError(f"query_pos={query_pos} out of range for prompts of {pos} tokens")
    mask = torch.zeros(pos, dtype=torch.bool, device=device)
    mask[query_pos % pos] = True
    return mask
