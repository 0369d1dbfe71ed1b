"""What the layer-skip engine can compute, and how many stacked copies per call.

``target_units`` splits a target into per-head / per-MLP units, ``fast_path_applies`` says
whether the engine computes a joint patch exactly, ``heads_mixing_kinds`` which kinds reach
other heads in a model; the chunk sizes bound a stacked call's memory.  Every fact about a kind
comes from the kinds table (:mod:`interp.patching.kinds`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from torch import Tensor

from interp.core.task_batch import TaskBatch
from interp.patching.kinds import KIND_TABLE, get_kind
from interp.patching.targets import Target

__all__ = [
    "CPU_CHUNK_TOKENS",
    "CPU_UNEMBED_ROWS",
    "FastPathUnsupported",
    "Unit",
    "bytes_per_copy",
    "chunk_size",
    "cpu_chunk_tokens",
    "fast_path_applies",
    "heads_mixing_kinds",
    "target_units",
]

# Tolerances of the run-time checks of the fast path against the model's own forward.
_VALUE_CHECK_ATOL = 1e-5  # metric units (relative above 1), as the acceptance test of the engine
_RESID_CHECK_RTOL = 1e-4  # relative to the residual stream's largest entry
# On a CPU, stacked copies beyond ~2k token rows per call only add cache and allocator misses:
# 4 copies of 32 x 17 tokens ran 6-10 % faster than 8-12 on the benchmark shapes.  (GPUs: the
# memory budget alone sets the chunk.)  A gated MLP halves it (:func:`cpu_chunk_tokens`).
CPU_CHUNK_TOKENS = 2048
#: On a CPU, the answer-position streams of several chunks are unembedded together up to this
#: many rows (:class:`_PendingUnembedding`).
CPU_UNEMBED_ROWS = 512


@dataclass(frozen=True)
class Unit:
    """One patched component of a joint patch: ``kind`` at ``(layer, index)`` (index: head; 0 for an MLP).

    ``sender`` / ``receiver_input`` for a path (the unit sits at the receiver head).
    """

    kind: str
    layer: int
    index: int
    query_pos: int | None = None
    sender: tuple[int, int] | None = None
    receiver_input: str = "q"

    @property
    def key(self) -> tuple:
        """Units with one key share one table of per-head changes at a layer."""
        return (self.kind, self.query_pos, self.sender, self.receiver_input)


def target_units(target: Target, n_layers: int, n_heads: int) -> list[Unit] | None:
    """The units of a target, or None if it is not a sum of per-head / per-MLP changes (its kind
    has no ``fast`` way in the kinds table).  Validates the target's heads / layers either way.

    Raises:
        ValueError: a head or layer out of range.
    """
    kind = get_kind(target.kind)
    if kind.scope == "path":
        target.resolved_heads(n_layers, n_heads)
    elif kind.scope == "head":
        pairs = target.resolved_heads(n_layers, n_heads)
    elif kind.scope == "layer":
        layers = target.resolved_layers(n_layers)
    if kind.fast is None:
        return None
    if kind.scope == "path":
        (rl, rh) = target.receiver
        return [Unit(target.kind, rl, rh, sender=target.heads[0], receiver_input=target.receiver_input)]
    if kind.scope == "layer":
        return [Unit(target.kind, l, 0) for l in layers]
    return [Unit(target.kind, l, h, query_pos=target.query_pos) for l, h in pairs]


def heads_mixing_kinds(model: Any) -> frozenset[str]:
    """Per-head kinds whose change reaches the layer's *other* heads in this model.

    OLMo-2 normalises queries and keys over all heads together (``q_norm`` / ``k_norm`` over
    ``n_heads * d_head``, before the split into heads), so a head's query, key or QK weights move
    every head's attention and per-head changes do not add up; per-head norms (``d_head`` wide)
    and no norm keep heads separate.
    """
    attn = model.blocks[0].attn
    d_head = int(model.cfg.d_head)
    for name in ("q_norm", "k_norm"):
        norm = getattr(attn, name) if name in dict(attn.named_children()) else None
        weight = getattr(norm, "weight", None) if norm is not None else None
        if isinstance(weight, Tensor) and weight.numel() > d_head:  # kinds marked through_qk_norm
            return frozenset(name for name, kind in KIND_TABLE.items() if kind.through_qk_norm)
    return frozenset()


def fast_path_applies(units: Sequence[Unit] | None, n_heads: int, mixing: frozenset[str] = frozenset()) -> bool:
    """Whether the layer-skip engine computes this joint patch exactly.

    All units at the first patched layer may be of any unit kind (a path only alone; a kind with
    a ``shared_bias`` (OV weights) only without the layer's shared output bias, i.e. not every
    head of the layer), later ones must be head activations a hook can replace (``fast="hook"``
    in the kinds table). Kinds in ``mixing`` (:func:`heads_mixing_kinds`) are left to the
    reference path.
    """
    if not units or any(u.kind in mixing for u in units):
        return False
    kinds = {u.kind: get_kind(u.kind) for u in units}
    first_layer = min(u.layer for u in units)
    start = [u for u in units if u.layer == first_layer]
    if any(kinds[u.kind].scope == "path" for u in units) and len(units) != 1:
        return False
    if any(kinds[u.kind].fast != "hook" for u in units if u.layer > first_layer):
        return False
    shared = [name for name, kind in kinds.items() if kind.shared_bias]
    return all(len({u.index for u in start if u.kind == name}) < n_heads for name in shared)


class FastPathUnsupported(RuntimeError):
    """A run-time check of the layer-skip (fast) patching path failed for this model: a block
    layout it does not handle, a hook it needs that the bridge does not expose, or a rebuilt
    block that differs from the model's own forward. The engine catches it and computes the same
    values with full forwards (the reference path), with a warning naming the reason.

    Fix: nothing is needed (the values are exact either way); to skip the check and its warning,
    pass ``method="reference"``. A float16 / bfloat16 model always gets the reference path (the
    block check's float32 tolerance is below their rounding; the message says so): load it in
    float32 (``--dtype float32``) for the fast path (≈ 5× the reference's speed on the 70m shape
    in float32: docs/results.md, bench_patching). To make the fast path handle a new block layout, see
    docs/extending.md.
    """


def bytes_per_copy(model: Any, batch: TaskBatch, full_logits: bool) -> int:
    """Rough peak activation bytes of one copy of the prompts in a layer-skip (or full) run."""
    cfg = model.cfg
    d_model = int(cfg.d_model)
    d_mlp = int(getattr(cfg, "d_mlp", None) or 4 * d_model)
    n_heads, d_vocab = int(cfg.n_heads), int(cfg.d_vocab)
    n, pos = batch.tokens.shape
    per_token = 8 * d_model + 3 * d_mlp + 4 * n_heads * pos
    logits = 3 * d_vocab * (pos if full_logits else 1)
    return 4 * n * (pos * per_token + logits)


def cpu_chunk_tokens(model: Any) -> int:
    """Token rows per stacked call on a CPU: ``CPU_CHUNK_TOKENS``, half for a gated MLP.

    A gated MLP (SwiGLU: OLMo-2, Llama) keeps four ``d_mlp``-wide tensors per token alive
    (gate, up, activation, product) where a plain one keeps two; on the OLMo-2 70m shape 2-3
    copies of 32 x 17 tokens ran ~8 % faster than 4 (GPT-2: 2-4 copies alike).
    """
    return CPU_CHUNK_TOKENS // 2 if getattr(model.cfg, "gated_mlp", False) else CPU_CHUNK_TOKENS


def chunk_size(model: Any, batch: TaskBatch, memory_budget_mb: float, full_logits: bool = False) -> int:
    """Copies of the prompts per stacked call within ``memory_budget_mb`` MiB.

    Raises:
        ValueError: a budget that is not a positive number.
    """
    if isinstance(memory_budget_mb, bool) or not isinstance(memory_budget_mb, (int, float)) or memory_budget_mb <= 0:
        raise ValueError(f"memory_budget_mb must be a positive number of MiB, got {memory_budget_mb!r}")
    return max(1, int(memory_budget_mb * 2**20) // bytes_per_copy(model, batch, full_logits))
