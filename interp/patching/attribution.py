"""Attribution pre-screens: estimates of every head's pattern-patching effect from gradients.

``attribution_delta_p(..., steps=1)`` is attribution patching (Nanda 2023, "Attribution patching:
activation patching at industrial scale"; Syed et al. 2023, arXiv:2310.10348): the first-order
Taylor estimate ``sum grad_pattern metric * (pattern_post - pattern_pre)`` at the pre patterns,
one forward and one backward pass.  At a point of emergence the pattern changes are large and
the metric (a softmax probability) is far from linear in them, so the tangent at the pre point
can misrank heads.

``steps > 1`` is integrated gradients (Sundararajan et al. 2017, arXiv:1703.01365) on the
patterns, as Marks et al. 2024 (arXiv:2403.19647, "Sparse Feature Circuits", their IG
approximation of patching) use for nodes: the gradient is averaged over ``steps`` points
``pattern_pre + alpha (pattern_post - pattern_pre)``, ``alpha = (i + 1/2) / steps`` (midpoint
rule), along the straight line from pre to post.  The node is ``hook_pattern`` (post-softmax),
so AtP*'s query/key fix (Kramár et al. 2024, arXiv:2403.00745) does not apply; the integral is
what removes the saturation error of the tangent.

The point ``alpha`` offsets each moved layer's pattern by ``alpha (pattern_post - pattern_pre)``
while later layers compute their own patterns, so effects through later attention stay in the
gradient.  ``mode="layer"`` moves one layer at a time (``n_layers`` passes over ``steps``
stacked copies of the prompts, each running only the blocks from that layer on, from the
layer-skip engine's cached pre-run): that layer's patterns then follow the straight line exactly,
and by IG's completeness the estimates of its heads sum to the effect of patching all of the
layer's patterns.  ``mode="joint"`` moves every layer at once (one pass; later layers' patterns
are then off the line, cheaper and rougher).

:func:`attribution_screen` returns, beside the estimate, what the screen's natural forward of the
pre checkpoint saw (its metric per prompt, its patterns and answer logits as a
:class:`~interp.patching.PostCheckpoint`), so a caller that also needs those (the head timeline:
the pre values of a pair, the post of the pair before it) runs no other forward for them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import torch
from jaxtyping import Float
from torch import Tensor

from interp.core.metrics import MetricLike, resolve_metric
from interp.core.task_batch import TaskBatch
from interp.patching._forward import answer_logits_forward, check_batch, heads_shape, model_device
from interp.patching.engine import cache_patterns, capture_post, post_from_patterns
from interp.patching.post import PostCheckpoint
from interp.patching.targets import hook_name

__all__ = ["AttributionScreen", "attribution_delta_p", "attribution_screen"]


@dataclass(frozen=True)
class AttributionScreen:
    """The pre-screen's estimate and what its forward of the pre checkpoint saw (:func:`attribution_screen`).

    Attributes:
        estimate: ``Float[Tensor, "layer head"]`` estimated change of the mean metric per head
            (metric units, CPU), as :func:`attribution_delta_p` returns it.
        values_pre: ``Float[Tensor, " batch"]`` the metric of the pre checkpoint per prompt (metric
            units, CPU), as :func:`interp.patching.metric_values` gives it.
        pre: the pre checkpoint's patterns (``hook_pattern`` of every layer) and answer logits, as
            :func:`interp.patching.capture_post` with ``kinds=["pattern"], weights=False`` gives
            them: the post of an earlier checkpoint's pair.
    """

    estimate: Tensor
    values_pre: Tensor
    pre: PostCheckpoint


def _tail_runner(model: Any, batch: TaskBatch, fn: Callable) -> Any:
    """The layer-skip engine's cached pre-run, to run only the blocks from the moved layer on
    (None if the model fails the engine's checks: then full forwards)."""
    from interp.patching.fast import FastPathUnsupported, LayerSkipEngine

    try:
        with torch.inference_mode(False), torch.no_grad():  # normal tensors: they enter autograd later
            engine = LayerSkipEngine(model, batch, fn, post=None)
            engine.check_tail()
        return engine
    except FastPathUnsupported:
        return None


def _post_patterns(model: Any, batch: TaskBatch, post: Any) -> Tensor:
    n_layers, _ = heads_shape(model)
    if isinstance(post, Tensor):
        post_from_patterns(model, batch, post)  # validates the shape
        return post.to(model_device(model), torch.float32)
    if isinstance(post, torch.nn.Module):
        return cache_patterns(post, batch.tokens).float()
    return torch.stack([post.activation("pattern", l) for l in range(n_layers)]).to(model_device(model), torch.float32)


def attribution_delta_p(
    model: Any,
    inputs: TaskBatch,
    patterns: Any,
    metric: MetricLike = "p",
    steps: int = 1,
    mode: Literal["joint", "layer"] = "layer",
) -> Float[Tensor, "layer head"]:
    """Gradient estimate of every head's pattern-patching effect: :func:`attribution_screen`'s
    ``estimate`` (its arguments, errors and sources)."""
    return attribution_screen(model, inputs, patterns, metric, steps, mode).estimate


def attribution_screen(
    model: Any,
    inputs: TaskBatch,
    patterns: Any,
    metric: MetricLike = "p",
    steps: int = 1,
    mode: Literal["joint", "layer"] = "layer",
) -> AttributionScreen:
    """Gradient estimate of every head's pattern-patching effect (``delta_p`` for ``metric="p"``).

    Source: attribution patching (Nanda 2023; Syed et al. 2023) for ``steps=1``; integrated
    gradients on the patterns for ``steps > 1`` (references in the module docstring).

    Args:
        model: the pre checkpoint (``TransformerBridge``, eval mode).
        inputs: prompts (``TaskBatch``).
        patterns: the post patterns ``[layer, batch, head, q, k]`` (``cache_patterns``), a
            ``PostCheckpoint`` or the post model.
        metric: see ``interp.core.metrics``.
        steps: 1 = attribution patching at the pre patterns; > 1 = integrated gradients with
            that many midpoints along the straight line from the pre to the post patterns.
        mode: ``"layer"`` (one layer's patterns at a time; ``n_layers`` passes; default) or
            ``"joint"`` (all layers at once; one pass).  Equal for ``steps=1``.

    Returns:
        :class:`AttributionScreen`: ``estimate``, ``Float[Tensor, "layer head"]`` estimated change
        of the mean metric (metric units, CPU); the pre checkpoint's metric per prompt and its
        patterns and answer logits, from the screen's own natural forward (``steps=1``) or the
        layer-skip engine's pre-run (``mode="layer"``); one more forward only where neither ran
        (joint integrated gradients, or a model the engine does not take).

    Raises:
        ValueError: bad batch, metric, steps or mode, or patterns of the wrong shape.

    Reproducibility: the estimate is a gradient, and the backward pass's reductions on CPU split
    over torch's intra-op threads, so its last bits depend on ``torch.get_num_threads()``: on
    the quick suite's weights the same call gave equal bits twice at 1 thread and twice at 2
    threads, and values 5.8e-11 apart (the 9th significant digit) between 1 and 2 threads,
    while the exact per-head deltas were equal. A first ``emergence demo`` analyses beside its
    training workers with the idle cores' thread count (:func:`interp.sources.embedded.iter_suite`),
    a second one with all of them: hence ``delta_attribution`` differing in its 9th digit
    between the two. The main job records each run's thread count in ``provenance.json``
    (``runs``); pin ``torch.set_num_threads`` to compare bit for bit
    (tests/interp/main_job/test_first_demo.py).
    """
    batch = check_batch(inputs)
    fn = resolve_metric(metric)
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps must be a positive int, got {steps!r}")
    if mode not in ("joint", "layer"):
        raise ValueError(f"mode must be 'joint' or 'layer', got {mode!r}")
    n_layers, n_heads = heads_shape(model)
    device = model_device(model)
    post = _post_patterns(model, batch, patterns)
    if steps == 1:
        mode = "joint"  # at alpha = 0 both modes are the same single gradient
    # The moved layer's own pattern is the pre pattern whenever no earlier layer moves (layer mode,
    # or alpha = 0): read it in the hook; only joint IG needs a separate pre-run.
    seen = capture_post(model, batch, kinds=["pattern"], weights=False) if mode == "joint" and steps > 1 else None
    pre_cached = None if seen is None else torch.stack([seen.activation("pattern", l) for l in range(n_layers)])
    # clone(): tensors made under inference_mode cannot enter an autograd graph.
    batch = batch.to(device)
    batch = type(batch)(
        batch.tokens.clone(),
        batch.answers.clone(),
        batch.answer_pos.clone(),
        distractors=None if batch.distractors is None else batch.distractors.clone(),
        attention_mask=None if batch.attention_mask is None else batch.attention_mask.clone(),
    )
    alphas = torch.tensor([0.0] if steps == 1 else [(i + 0.5) / steps for i in range(steps)], device=device)
    stacked = batch.repeat(steps)
    estimate = torch.zeros(n_layers, n_heads, device=device)
    groups = [list(range(n_layers))] if mode == "joint" else [[l] for l in range(n_layers)]
    pre: dict[int, Tensor] = {}
    tail = _tail_runner(model, batch, fn) if mode == "layer" else None
    for layers in groups:
        leaves: dict[int, Tensor] = {}

        def on_line(layer: int) -> Callable:
            # pattern + alpha (post - pre): the layer's own pattern is pre, so this is the straight
            # line; later layers keep computing theirs, so indirect effects stay in the gradient.
            def hook(pattern: Tensor, hook: Any = None) -> Tensor:
                natural = pattern.detach().float().reshape(steps, *post[layer].shape)[0]
                pre[layer] = pre_cached[layer] if pre_cached is not None else natural
                offset = alphas.reshape(-1, 1, 1, 1, 1) * (post[layer] - pre[layer])[None]
                leaves[layer] = pattern + offset.reshape(pattern.shape).to(pattern.dtype)  # noqa: B023
                return leaves[layer]  # noqa: B023

            return hook

        hooks = [(hook_name("pattern", l), on_line(l)) for l in layers]
        with torch.inference_mode(False), torch.enable_grad():

            def leaf_residual(resid: Tensor, hook: Any = None) -> Tensor:
                # grad flows from here even if the parameters are frozen; no parameter grads are built
                return resid.detach().requires_grad_(True)

            if tail is not None:  # layer mode: blocks below the moved layer are the same for every alpha
                (layer,) = layers
                resid = tail.resid_pre[layer].detach().repeat(steps, 1, 1).requires_grad_(True)
                total = tail.run_tail(resid, layer, steps, hooks).sum() / (steps * batch.tokens.shape[0])
            else:
                hooks = [("blocks.0.hook_in", leaf_residual)] + hooks
                rows, _ = answer_logits_forward(functools.partial(model.run_with_hooks, fwd_hooks=hooks), stacked)
                total = fn(rows, stacked).float().sum() / (steps * batch.tokens.shape[0])
            grads = torch.autograd.grad(total, [leaves[l] for l in layers])
        for layer, grad in zip(layers, grads):
            # mean over the alphas is the sum over copies / steps (already in `total`)
            grad = grad.reshape(steps, *pre[layer].shape).sum(dim=0)
            estimate[layer] = (grad * (post[layer] - pre[layer])).sum(dim=(0, 2, 3))
    # what the pre checkpoint's natural forward saw: the screen's own (alpha = 0), the layer-skip
    # engine's pre-run, joint IG's pre-run, or (a model the engine does not take) one more forward
    if steps == 1:
        values, patterns, rows = fn(rows, stacked), [pre[l] for l in range(n_layers)], rows.detach()
    elif tail is not None:
        values, patterns, rows = tail.values_pre, [tail.pre("pattern", l) for l in range(n_layers)], tail.answer_rows
    else:
        seen = seen if seen is not None else capture_post(model, batch, kinds=["pattern"], weights=False)
        return AttributionScreen(estimate.detach().cpu(), seen.values(batch, fn), seen)
    seen = PostCheckpoint(
        {hook_name("pattern", l): patterns[l].detach().float().clone() for l in range(n_layers)},
        rows.float().clone(),
        None,
        n_layers,
        n_heads,
        tokens=batch.tokens.clone(),
    )
    return AttributionScreen(estimate.detach().cpu(), values.detach().float().cpu(), seen)
