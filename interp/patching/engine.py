"""The generic cross-checkpoint patch: post into pre, any target, any metric, fast or reference.

``patch(pre_model, post, batch, targets, metric)`` runs the pre checkpoint once per target with
that target taken from the post checkpoint and returns the metric per prompt.  ``post`` is the
post checkpoint's model or a :class:`PostCheckpoint` captured from it (a checkpoint source that
reuses one bridge overwrites the post weights when it loads pre: capture first).

``method="fast"`` (default) runs the layer-skip engine (``interp.patching.fast``) for every
target that is a sum of per-head or per-MLP changes and full forwards for the rest (weights of
whole blocks, the embedding, the unembedding, OV weights of every head of a layer, joint sets
with weights beyond their first layer); ``method="reference"`` runs full forwards for every
target (``interp.patching.reference``): TransformerLens's ``generic_activation_patch``
(``reduce="none"``) for one head's activation or one layer's MLP output, ``run_with_hooks``
for joint activation patches, the pre model with the post parameters copied in for weight
targets, and two forwards for a path (the receiver's input recomputed from the stream plus the
sender's change).  Both read each kind's facts from the kinds table
(``interp.patching.kinds``).  The two methods
agree to 1e-5 (tests), on padded batches too (prompts of different lengths, right padding:
every forward gets the batch's ``attention_mask`` and ``position_ids``; the fast path's block
calls reuse the arguments the model's own forward handed each block).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any, Literal

import torch
from jaxtyping import Float, Int
from torch import Tensor

from interp.core.metrics import MetricLike, resolve_metric
from interp.core.task_batch import TaskBatch
from interp.patching import _weights
from interp.patching._forward import (
    answer_logits_forward,
    answer_rows,
    check_batch,
    heads_shape,
    model_device,
    query_mask,
    unit_count,
)
from interp.patching.fast import (
    FastPathUnsupported,
    LayerSkipEngine,
    chunk_size,
    cpu_chunk_tokens,
    fast_path_applies,
    heads_mixing_kinds,
    target_units,
)
from interp.patching.kinds import FULL_FORWARD_SCOPES, KIND_TABLE, SCOPE_INDEX, get_kind, kind_names
from interp.patching.post import PostCheckpoint
from interp.patching.reference import reference_values
from interp.patching.targets import Target, hook_name

__all__ = [
    "PostCheckpoint",
    "answer_prob",
    "cache_patterns",
    "capture_post",
    "delta_p_all_heads",
    "mean_answer_prob",
    "metric_values",
    "patch",
    "patch_head_sets",
    "patch_heads",
    "patch_values",
    "per_head_delta",
    "post_from_patterns",
]


def capture_post(
    post_model: Any, batch: TaskBatch, kinds: Sequence[str] | None = None, weights: bool = True
) -> PostCheckpoint:
    """One forward of the post checkpoint: the activations of ``kinds`` at every layer, the
    answer logits and (``weights=True``) a copy of every parameter.

    Args:
        post_model: the post checkpoint (``TransformerBridge``, eval mode).
        batch: prompts (``TaskBatch``).
        kinds: activation kinds to keep (kinds with a hook in ``interp.patching.kinds``: ``pattern, q,
            k, v, z, mlp``, ``neuron`` and any registered one); None: every one of them except the
            per-neuron kinds (``[batch, pos, d_mlp]`` per layer, 4x the residual stream: name them,
            e.g. ``kinds=("neuron",)``, or pass the post model to ``patch_values``, which captures
            what its targets need).
        weights: also copy the parameters (needed by weight targets; memory: one model).

    Returns:
        ``PostCheckpoint`` on the model's device.

    Raises:
        ValueError: a model without attention heads, in training mode, or a bad batch / kind.
    """
    batch = check_batch(batch)
    n_layers, n_heads = heads_shape(post_model)
    hooked = [name for name, k in KIND_TABLE.items() if k.hook is not None]
    kinds = [name for name in hooked if KIND_TABLE[name].scope != "neuron"] if kinds is None else kinds
    bad = [k for k in kinds if k not in hooked]
    if bad:
        raise ValueError(f"kinds {bad} cannot be captured; valid: {', '.join(hooked)}")
    names = {hook_name(k, l) for k in kinds for l in range(n_layers)}
    device = model_device(post_model)
    batch = batch.to(device)
    with torch.no_grad():  # not inference_mode: callers may use the result under autograd
        rows, (cache,) = answer_logits_forward(
            lambda tokens, **kw: post_model.run_with_cache(tokens, names_filter=lambda n: n in names, **kw), batch
        )
        activations = {name: cache[name].float().clone() for name in names if name in cache.keys()}
    return PostCheckpoint(
        activations,
        rows.float().clone(),
        _weights.capture_weights(post_model) if weights else None,
        n_layers,
        n_heads,
        tokens=batch.tokens.clone(),
    )


def metric_values(model: Any, batch: TaskBatch, metric: MetricLike = "p") -> Float[Tensor, " batch"]:
    """The metric per prompt from one forward of ``model`` (answer positions unembedded only).

    Raises:
        ValueError: a bad batch or metric.
    """
    batch = check_batch(batch)
    fn = resolve_metric(metric)
    batch = batch.to(model_device(model))
    with torch.inference_mode():
        rows, _ = answer_logits_forward(model, batch)
        return fn(rows, batch).float().cpu()


def _as_post(post: Any, batch: TaskBatch, targets: Sequence[Target], pre_model: Any = None) -> PostCheckpoint:
    if isinstance(post, PostCheckpoint):
        return post
    from interp.patching.ideal import IdealPatterns

    if isinstance(post, IdealPatterns):  # ideal patterns of the chosen heads (interp.patching.ideal)
        post.check_targets(targets, *heads_shape(pre_model))
        return post.post(pre_model, batch)
    if not isinstance(post, torch.nn.Module):
        raise ValueError(f"post must be a model or a PostCheckpoint (capture_post), got {type(post).__name__}")
    needs_weights = any(t.is_weights for t in targets)
    neuron_kinds = {t.kind for t in targets if get_kind(t.kind).scope == "neuron"}
    kinds = [
        name for name, k in KIND_TABLE.items() if k.hook is not None and (k.scope != "neuron" or name in neuron_kinds)
    ]
    return capture_post(post, batch, kinds=kinds, weights=needs_weights)


# --------------------------------------------------------------------------- the generic call


def _check_shapes(pre_model: Any, post: PostCheckpoint, batch: TaskBatch) -> None:
    shape = heads_shape(pre_model)
    if shape != (post.n_layers, post.n_heads):
        raise ValueError(
            f"pre and post checkpoints differ in (n_layers, n_heads): {shape} vs {(post.n_layers, post.n_heads)}"
        )
    if post.tokens is not None and (
        tuple(post.tokens.shape) != tuple(batch.tokens.shape) or not torch.equal(post.tokens.cpu(), batch.tokens.cpu())
    ):
        raise ValueError("post checkpoint was captured on other prompts than this batch")


def _check_index_sizes(pre_model: Any, post: PostCheckpoint, targets: Sequence[Target]) -> None:
    """Each per-unit activation target's captured activation has as many units on its unit axis as
    the scope's bound (``n_heads`` for heads, ``n_key_value_heads`` for key/value heads, ``d_mlp``
    for neurons): a kind declared with the wrong scope or axis (a per-head ``k`` on a grouped-query
    model, whose ``hook_k`` holds the key/value heads) is refused here, whichever engine would run it."""
    for name in {t.kind for t in targets}:
        kind = get_kind(name)
        if kind.scope not in SCOPE_INDEX or kind.hook is None or kind.head_axis is None:
            continue
        bound = SCOPE_INDEX[kind.scope][1]
        expected = unit_count(pre_model, kind.scope)
        act = post.activation(name, 0)
        size = act.shape[kind.head_axis] if act.ndim > kind.head_axis else None
        if size != expected:
            raise ValueError(
                f"kind {name!r} (scope {kind.scope!r}) indexes axis {kind.head_axis} of {kind.hook_name(0)}, "
                f"shape {tuple(act.shape)}, but its units range over {bound}={expected}: "
                "declare the kind with the scope and head_axis of the unit its hook holds"
                + (" (key/value heads: kinds k_kv, v_kv)" if kind.hook in ("attn.hook_k", "attn.hook_v") else "")
            )


def patch_values(
    pre_model: Any,
    post: Any,
    batch: TaskBatch,
    targets: Sequence[Target],
    metric: MetricLike = "p",
    method: Literal["fast", "reference"] = "fast",
    memory_budget_mb: float = 1024,
) -> Float[Tensor, "targets batch"]:
    """The metric per prompt of the pre checkpoint with each target patched from the post checkpoint.

    The generic call every specialisation goes through (TransformerLens's
    ``generic_activation_patch`` idea, across checkpoints instead of across prompts).

    Args:
        pre_model: the pre checkpoint, ``TransformerBridge`` in eval mode (float32).
        post: the post checkpoint's model, or its ``PostCheckpoint`` (``capture_post``), or an
            ``IdealPatterns`` (``interp.patching.ideal``: ideal patterns of chosen heads, for
            ``pattern`` targets of those heads).
        batch: the prompts (``TaskBatch``), the same ones ``post`` was captured on.
        targets: what to patch, one run per target (``interp.patching.targets``).
        metric: ``"p"`` (default), ``"logprob"``, ``"logit-diff"`` or a callable
            ``(logits [batch, d_vocab], batch) -> [batch]``.
        method: ``"fast"`` (layer skip where it applies) or ``"reference"`` (full forwards).
        memory_budget_mb: activation memory per stacked call of the fast path, MiB.

    Returns:
        ``Float[Tensor, "targets batch"]`` on the CPU, in the metric's units.

    Raises:
        ValueError: a bad batch, metric, method, target, budget, or models of different shapes.
    """
    return _patch_values(pre_model, post, batch, targets, metric, method, memory_budget_mb)[0]


def _patch_values(
    pre_model: Any,
    post: Any,
    batch: TaskBatch,
    targets: Sequence[Target],
    metric: MetricLike,
    method: str,
    memory_budget_mb: float,
) -> tuple[Tensor, Tensor | None]:
    """``patch_values`` plus the pre metric per prompt when the fast path computed it (else None)."""
    batch = check_batch(batch)
    fn = resolve_metric(metric)
    if method not in ("fast", "reference"):
        raise ValueError(f"method must be 'fast' or 'reference', got {method!r}")
    targets = list(targets)
    bad = [t for t in targets if not isinstance(t, Target)]
    if bad:
        raise ValueError(f"targets must be interp.patching.Target objects, got {type(bad[0]).__name__}")
    n_layers, n_heads = heads_shape(pre_model)
    units = [target_units(t, n_layers, n_heads) for t in targets]  # validates heads / layers
    for t in targets:
        scope = get_kind(t.kind).scope
        if scope in FULL_FORWARD_SCOPES:  # key/value heads, neurons: range-checked before anything runs
            t.resolved_units(n_layers, unit_count(pre_model, scope))
    for t in targets:
        query_mask(t.query_pos, batch.tokens.shape[1], torch.device("cpu"))
    chunk = chunk_size(pre_model, batch, memory_budget_mb)
    post = _as_post(post, batch, targets, pre_model)
    _check_shapes(pre_model, post, batch)
    _check_index_sizes(pre_model, post, targets)
    device = model_device(pre_model)
    batch = batch.to(device)
    out = torch.empty(len(targets), batch.tokens.shape[0])
    values_pre = None
    if not targets:
        return out, values_pre
    mixing = heads_mixing_kinds(pre_model) if method == "fast" else frozenset()
    fast = [i for i, u in enumerate(units) if method == "fast" and fast_path_applies(u, n_heads, mixing)]
    if fast:
        with torch.inference_mode():
            try:
                engine = LayerSkipEngine(pre_model, batch, fn, post)
                engine.check_tail()
                if engine.device.type == "cpu":
                    chunk = min(chunk, max(1, round(cpu_chunk_tokens(pre_model) / batch.tokens.numel())))
                fast_units = [u for u in (units[i] for i in fast) if u is not None]  # fast_path_applies: never None
                out[fast] = engine.values_of_sets(fast_units, chunk).cpu()
                values_pre = engine.values_pre.cpu()
            except FastPathUnsupported as err:
                warnings.warn(
                    f"layer-skip patching unavailable for this model ({err}); using full forwards",
                    RuntimeWarning,
                    stacklevel=2,
                )
                fast = []
    done = set(fast)
    with torch.inference_mode():
        for i, target in enumerate(targets):
            if i not in done:
                out[i] = reference_values(pre_model, post, batch, target, fn).float().cpu()
    return out, values_pre


def patch(
    pre_model: Any,
    post: Any,
    batch: TaskBatch,
    target: Target,
    metric: MetricLike = "p",
    method: Literal["fast", "reference"] = "fast",
) -> Float[Tensor, " batch"]:
    """The metric per prompt with one target patched (``patch_values`` for a single target).

    Raises:
        ValueError: as ``patch_values``.
    """
    return patch_values(pre_model, post, batch, [target], metric=metric, method=method)[0]


# --------------------------------------------------------------------------- thin specialisations


def per_head_delta(
    pre_model: Any,
    post: Any,
    batch: TaskBatch,
    kind: str = "pattern",
    metric: MetricLike = "p",
    method: Literal["fast", "reference"] = "fast",
    heads: Sequence[tuple[int, int]] | None = None,
    memory_budget_mb: float = 1024,
    per_prompt: bool = False,
) -> Tensor:
    """Each head patched alone: ``mean metric_patched - mean metric_pre`` per ``(layer, head)``.

    With ``kind="pattern"`` and ``metric="p"`` this is the paper's ``delta_p`` (Baherwani et
    al. 2026, head patching; TransformerLens ``get_act_patch_attn_head_pattern_all_pos``).

    Args:
        kind: a per-head target kind (``pattern, q, k, v, z, qk, ov``).
        heads: only these ``(layer, head)`` pairs (others NaN); default every head.
        per_prompt: return ``[layer, head, batch]`` per-prompt differences instead of means.
        (others: see ``patch_values``.)

    Returns:
        ``Float[Tensor, "layer head"]`` (or ``"layer head batch"``), metric units, CPU.

    Raises:
        ValueError: as ``patch_values``, or a kind that is not per head.
    """
    if kind not in kind_names("head"):
        raise ValueError(f"kind={kind!r}; per-head kinds: {', '.join(kind_names('head'))}")
    batch = check_batch(batch)
    n_layers, n_heads = heads_shape(pre_model)
    from interp.patching.ideal import IdealPatterns

    if heads is None and isinstance(post, IdealPatterns):
        heads = sorted(post.heads)
    pairs = (
        [(l, h) for l in range(n_layers) for h in range(n_heads)]
        if heads is None
        else list(Target(kind, tuple(heads)).resolved_heads(n_layers, n_heads))
    )
    post = _as_post(post, batch, [Target(kind, tuple(pairs))], pre_model)
    values, base = _patch_values(
        pre_model, post, batch, [Target(kind, (pair,)) for pair in pairs], metric, method, memory_budget_mb
    )
    if base is None:  # the fast path did not run: one more forward for the baseline
        base = metric_values(pre_model, batch, metric)
    out = torch.full((n_layers, n_heads, batch.tokens.shape[0]), float("nan"))
    for (layer, head), row in zip(pairs, values):
        out[layer, head] = row - base
    return out if per_prompt else out.mean(dim=-1)


def patch_head_sets(
    model: Any,
    inputs: TaskBatch,
    patterns: Any,
    head_sets: Sequence[Sequence[tuple[int, int]]],
    memory_budget_mb: float = 1024,
    metric: MetricLike = "p",
    kind: str = "pattern",
) -> Float[Tensor, " sets"]:
    """Mean metric of the pre checkpoint with each set of heads jointly patched (one value per set).

    Args:
        model: the pre checkpoint.
        inputs: prompts (``TaskBatch``).
        patterns: the post checkpoint's patterns ``[layer, batch, head, q, k]`` (``cache_patterns``)
            or a ``PostCheckpoint`` / post model.
        head_sets: sets of ``(layer, head)``; an empty set gives the unpatched value.

    Returns:
        ``Float[Tensor, "sets"]`` (metric units, CPU).

    Raises:
        ValueError: as ``patch_values``.
    """
    post = post_from_patterns(model, inputs, patterns) if isinstance(patterns, Tensor) else patterns
    chunk_size(model, check_batch(inputs), memory_budget_mb)
    sets = [list(s) for s in head_sets]
    out = torch.empty(len(sets))
    filled = [i for i, s in enumerate(sets) if s]
    if filled:
        values = patch_values(
            model,
            post,
            inputs,
            [Target(kind, tuple(sets[i])) for i in filled],
            metric=metric,
            memory_budget_mb=memory_budget_mb,
        )
        out[filled] = values.mean(dim=1)
    if len(filled) < len(sets):
        out[[i for i, s in enumerate(sets) if not s]] = float(metric_values(model, inputs, metric).mean())
    return out


def patch_heads(model: Any, inputs: TaskBatch, patterns: Any, heads: Sequence[tuple[int, int]]) -> float:
    """Mean p(answer) with ``heads`` jointly pattern-patched (``patch_head_sets`` for one set)."""
    return float(patch_head_sets(model, inputs, patterns, [list(heads)])[0])


def post_from_patterns(model: Any, batch: TaskBatch, patterns: Float[Tensor, "layer batch head q k"]) -> PostCheckpoint:
    """A ``PostCheckpoint`` holding only the post patterns (for pattern targets).

    Raises:
        ValueError: patterns of the wrong shape for this model and batch.
    """
    batch = check_batch(batch)
    n_layers, n_heads = heads_shape(model)
    n, pos = batch.tokens.shape
    expected = (n_layers, n, n_heads, pos, pos)
    if not isinstance(patterns, Tensor) or tuple(patterns.shape) != expected:
        got = tuple(patterns.shape) if isinstance(patterns, Tensor) else type(patterns).__name__
        raise ValueError(
            f"patterns must have shape [layer, batch, head, query_pos, key_pos] = {expected} "
            f"for this model and these prompts (post and pre checkpoints must share "
            f"n_layers and n_heads), got {got}"
        )
    device = model_device(model)
    return PostCheckpoint(
        {hook_name("pattern", l): patterns[l].to(device, torch.float32) for l in range(n_layers)},
        None,
        None,
        n_layers,
        n_heads,
    )


def cache_patterns(model: Any, tokens: Int[Tensor, "batch pos"]) -> Float[Tensor, "layer batch head query_pos key_pos"]:
    """Attention patterns (``hook_pattern``, post-softmax) of every layer, on the model's device.

    Raises:
        ValueError: if the model has no attention heads or is in training mode.
    """
    n_layers, _ = heads_shape(model)
    names = {hook_name("pattern", l) for l in range(n_layers)}
    with torch.no_grad():  # not inference_mode: callers may use the result under autograd
        _, cache = model.run_with_cache(tokens.to(model_device(model)), names_filter=lambda n: n in names)
        return torch.stack([cache[hook_name("pattern", l)].float() for l in range(n_layers)])


def delta_p_all_heads(
    model: Any,
    inputs: TaskBatch,
    patterns: Any,
    method: Literal["fast", "reference"] = "fast",
    memory_budget_mb: float = 1024,
    heads: Sequence[tuple[int, int]] | None = None,
    metric: MetricLike = "p",
) -> Float[Tensor, "layer head"]:
    """Per-head ``delta_p`` of pattern patching (``per_head_delta`` with ``kind="pattern"``).

    ``patterns``: the post patterns ``[layer, batch, head, q, k]`` (``cache_patterns``), or a
    ``PostCheckpoint`` / post model.

    Source: Baherwani et al. 2026, "Emergent Capabilities Arise Randomly from Learning Sparse
    Attention Patterns" (``delta_p``, head patching across checkpoints).

    Returns:
        ``Float[Tensor, "layer head"]``, metric units (probability for ``metric="p"``), CPU.

    Raises:
        ValueError: as ``per_head_delta``.
    """
    post = post_from_patterns(model, inputs, patterns) if isinstance(patterns, Tensor) else patterns
    return per_head_delta(
        model, post, inputs, "pattern", metric=metric, method=method, heads=heads, memory_budget_mb=memory_budget_mb
    )


def mean_answer_prob(model: Any, inputs: TaskBatch) -> float:
    """Mean over prompts of ``p(answer)`` (probability) from one forward."""
    return float(metric_values(model, inputs, "p").mean())


def answer_prob(logits: Float[Tensor, "batch pos d_vocab"], inputs: TaskBatch) -> Float[Tensor, " batch"]:
    """Probability (softmax, float32) of each prompt's answer at its answer position.

    Raises:
        ValueError: if ``logits`` is not ``[batch, pos, d_vocab]`` for these inputs.
    """
    from interp.core.metrics import answer_probability

    inputs = check_batch(inputs)
    return answer_probability(answer_rows(logits, inputs), inputs)
