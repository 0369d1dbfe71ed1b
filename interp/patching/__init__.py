"""Cross-checkpoint patching: take a component from the post checkpoint into the pre checkpoint.

Public API (TransformerLens's ``patching`` module is the model: one generic function, thin
specialisations, shapes in every docstring):

Generic call (``engine``)
    ``patch_values(pre_model, post, batch, targets, metric="p", method="fast")``
        -> ``Float[Tensor, "targets batch"]``, the metric per prompt with each target patched.
    ``patch(pre_model, post, batch, target, ...)`` -> ``Float[Tensor, "batch"]`` (one target).
    ``capture_post(post_model, batch)`` -> ``PostCheckpoint`` (post activations, answer logits,
        weights; capture before a checkpoint source reuses the bridge for pre).
    ``metric_values(model, batch, metric)`` -> ``Float[Tensor, "batch"]`` (no patch).

Kinds (``kinds``): ``KIND_TABLE``, one ``Kind`` entry per kind of target (scope, hook, head axis,
    weight slices, TransformerLens setter, fast support); ``register(Kind(...))`` adds one.

Targets (``targets``): ``pattern(heads, query_pos)``, ``queries``, ``keys``, ``values``,
    ``head_output`` (``hook_z``), ``qk_weights``, ``ov_weights``, ``path(sender, receiver, "q"|"k"|"v")``,
    ``mlp_output(layers)``, ``mlp_weights``, ``block_weights``, ``embedding()``, ``unembedding()``,
    ``neurons(pairs)`` (MLP neurons, ``mlp.hook_post``), ``kv_keys(pairs)`` / ``kv_values(pairs)``
    (key/value heads of grouped-query attention); ``heads=None`` / ``layers=None`` /
    ``neurons=None`` / ``kv_heads=None`` = all.  ``Target`` is the dataclass behind them.

Metrics (the registry :mod:`interp.core.metrics`): ``"p"`` (default), ``"logprob"``, ``"logit-diff"`` or a callable
    ``(logits [batch, d_vocab] at the answer positions, batch) -> [batch]``.

Specialisations (``engine``)
    ``per_head_delta(pre, post, batch, kind="pattern", metric="p")`` -> ``Float[Tensor, "layer head"]``
    ``delta_p_all_heads(model, batch, patterns)`` -> ``Float[Tensor, "layer head"]`` (the paper's delta_p)
    ``patch_head_sets(model, batch, patterns, head_sets)`` -> ``Float[Tensor, "sets"]``
    ``cache_patterns(model, tokens)`` -> ``Float[Tensor, "layer batch head query_pos key_pos"]``

Ideal patterns (``ideal``): ``IdealPatterns({(layer, head): "induction" | callable})`` in place of
    ``post`` sets pattern targets of those heads to an ideal pattern of the prompt's tokens
    (``previous_token``, ``induction``, ``duplicate_token``, ``first_token``, ``uniform``);
    ``ideal_pattern(rule, tokens)`` -> ``Float[Tensor, "batch query_pos key_pos"]``.

Pre-screen (``attribution``)
    ``attribution_delta_p(model, batch, patterns, steps=1 | n)`` -> ``Float[Tensor, "layer head"]``
    (attribution patching; integrated gradients for ``steps > 1``);
    ``attribution_screen(...)`` -> ``AttributionScreen`` (the estimate, and the pre checkpoint's
    metric per prompt, patterns and answer logits from the same forward).

The input is an :class:`interp.tasks.TaskBatch` (tokens ``[batch, pos]``, answers ``[batch]``,
answer_pos ``[batch]``, optional distractors).  ``fast`` holds the layer-skip engine behind
``method="fast"`` (a package: one class per block layout); ``reference`` the full forwards
(TransformerLens's ``generic_activation_patch`` where it has the same operation); ``engine`` the
generic call that sends each target to one of them.
"""

from interp.core.metrics import (
    METRICS,
    answer_logprob,
    answer_probability,
    logit_diff,
    metric_name,
    metric_spec,
    resolve_metric,
)
from interp.core.task_batch import TaskBatch
from interp.patching.attribution import AttributionScreen, attribution_delta_p, attribution_screen
from interp.patching.engine import (
    PostCheckpoint,
    answer_prob,
    cache_patterns,
    capture_post,
    delta_p_all_heads,
    mean_answer_prob,
    metric_values,
    patch,
    patch_head_sets,
    patch_heads,
    patch_values,
    per_head_delta,
    post_from_patterns,
)
from interp.patching.ideal import IDEAL_PATTERNS, IdealPatterns, ideal_pattern
from interp.patching.targets import (
    KINDS,
    Target,
    block_weights,
    embedding,
    head_output,
    keys,
    kv_keys,
    kv_values,
    mlp_output,
    mlp_weights,
    neurons,
    ov_weights,
    path,
    pattern,
    qk_weights,
    queries,
    unembedding,
    values,
)

__all__ = [
    "IDEAL_PATTERNS",
    "KINDS",
    "METRICS",
    "AttributionScreen",
    "IdealPatterns",
    "PostCheckpoint",
    "Target",
    "TaskBatch",
    "answer_logprob",
    "answer_prob",
    "answer_probability",
    "attribution_delta_p",
    "attribution_screen",
    "block_weights",
    "cache_patterns",
    "capture_post",
    "delta_p_all_heads",
    "embedding",
    "head_output",
    "ideal_pattern",
    "keys",
    "kv_keys",
    "kv_values",
    "logit_diff",
    "mean_answer_prob",
    "metric_name",
    "metric_spec",
    "metric_values",
    "mlp_output",
    "mlp_weights",
    "neurons",
    "ov_weights",
    "patch",
    "patch_head_sets",
    "patch_heads",
    "patch_values",
    "path",
    "pattern",
    "per_head_delta",
    "post_from_patterns",
    "qk_weights",
    "queries",
    "resolve_metric",
    "unembedding",
    "values",
]
