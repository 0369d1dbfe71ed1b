"""The jump decomposed by component: which part of the model (patterns, queries, keys, values,
head outputs, QK and OV weights, MLPs, (un)embedding) carries the pre -> post change of the metric?

``decompose_jump(pre_model, post, batch, config, options) -> DataFrame`` (``COMPONENT_COLUMNS``;
the study settings as one :class:`interp.core.settings.StudyConfig`) patches each component of
:data:`COMPONENTS` (all heads or all layers at once) and, for the per-head kinds of
``options.topk_kinds``, the top-K heads of that kind, with the bootstrap of :mod:`interp.ranking_stats`;
``decompose_between`` loads the two checkpoints of a source first. :mod:`interp.ranking`
re-exports every public name here.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import pandas as pd
import torch

from interp.core.objects import check_argument
from interp.core.settings import StudyConfig
from interp.core.terms import COMPONENT_COLUMNS  # the table's columns (the report reads them too)
from interp.emergence import jump_noise
from interp.patching import (
    PostCheckpoint,
    Target,
    capture_post,
    metric_name,
    metric_spec,
    metric_values,
    patch_values,
    per_head_delta,
)
from interp.patching._forward import check_batch, heads_shape, model_device, unit_count
from interp.patching.kinds import FULL_FORWARD_SCOPES, KIND_TABLE, get_kind, kind_names
from interp.ranking_stats import (
    _ranked_heads,
    _recovered,
    bootstrap_interval,
    rank_heads,
)
from interp.tasks import TaskBatch, metric_for

__all__ = [
    "COMPONENTS",
    "COMPONENT_COLUMNS",
    "INTERACTION",
    "WHOLE",
    "WHOLE_PARTS",
    "DecomposeOptions",
    "check_components",
    "decompose_between",
    "decompose_jump",
]


#: the components of ``decompose_jump`` (all heads / all layers each), by the name its table uses: the
#: kinds with a ``component`` label in the kinds table (:mod:`interp.patching.kinds`), in table order
COMPONENTS: dict[str, Target] = {name: Target(name) for name, kind in KIND_TABLE.items() if kind.component}


#: The whole of the decomposition's ``all`` rows (every parameter of every block at once), the
#: components it is made of (besides the norms), and the row of their interaction.
WHOLE = "block"
WHOLE_PARTS = ("qk", "ov", "mlp_weights")
INTERACTION = "interaction"


def check_components(
    targets: Sequence[str] | Mapping[str, Target] | None,
    topk_kinds: Sequence[str] = ("pattern", "z"),
    ks: Sequence[int] | None = None,
) -> dict[str, Target]:
    """The components a decomposition patches, checked before any checkpoint is loaded.

    Returns:
        ``{name: Target}`` (default: :data:`COMPONENTS`).

    Raises:
        ValueError: an unknown component name (the valid ones listed), a ``topk_kinds`` entry that
            is not a per-head kind, or a K below 1 (the upper bound needs the model: checked later).
    """
    if targets is None:
        chosen = dict(COMPONENTS)
    elif isinstance(targets, Mapping):
        chosen = dict(targets)
    else:
        unknown = [t for t in targets if t not in COMPONENTS]
        if unknown:
            raise ValueError(f"unknown components {unknown}; valid: {', '.join(COMPONENTS)}")
        chosen = {t: COMPONENTS[t] for t in targets}
    bad_kinds = [k for k in topk_kinds if k not in kind_names("head")]
    if bad_kinds:
        raise ValueError(f"topk_kinds {bad_kinds} are not per-head kinds ({', '.join(kind_names('head'))})")
    low = [int(k) for k in ks or () if int(k) < 1]
    if low:
        raise ValueError(f"ks must lie in [1, the number of heads], got {low}")
    return chosen


def _topk_sets(
    pre_model: Any,
    post: PostCheckpoint,
    batch: TaskBatch,
    kind: str,
    metric: Any,
    ks: Sequence[int],
    memory_budget_mb: float,
) -> list[tuple[str, int, Target]]:
    delta = per_head_delta(pre_model, post, batch, kind, metric=metric, memory_budget_mb=memory_budget_mb)
    heads = _ranked_heads(rank_heads(delta))
    return [(f"top-{k}", k, Target(kind, tuple(heads[:k]))) for k in ks if 1 <= k <= len(heads)]


@dataclass(frozen=True)
class DecomposeOptions:
    """What a decomposition patches and how its table is labelled, besides the study settings.

    Checked when made (:func:`check_components`), so a bad component is refused before any
    checkpoint is loaded.

    Attributes:
        targets: component names (keys of :data:`COMPONENTS`) or a mapping name -> ``Target``;
            None: every component of :data:`COMPONENTS`.
        topk_kinds: per-head kinds that get top-K rows (their heads ranked by their single-head
            effect, the top K patched jointly).
        labels: values of ``model``, ``seed``, ``pre_step``, ``post_step`` for the table (NaN if
            absent; :func:`decompose_between` fills them from the source).
        whole: with the default components, two more rows: ``block`` (every parameter of every
            block patched at once: everything but the (un)embedding) and ``interaction`` (whole
            − sum of its parts: ``block`` − (``qk`` + ``ov`` + ``mlp_weights``), per prompt, so
            its interval is bootstrapped too; the norms' share is in it). A jump that lives in
            how the parts combine shows as a whole far above every part.
        seed: the bootstrap's generator seed.
        memory_budget_mb: activation memory per stacked call of the fast path (MiB, > 0).

    Raises:
        ValueError: an unknown component name (the valid ones listed) or a ``topk_kinds`` entry
            that is not a per-head kind.
    """

    targets: Sequence[str] | Mapping[str, Target] | None = None
    topk_kinds: Sequence[str] = ("pattern", "z")
    labels: Mapping[str, Any] | None = None
    whole: bool = True
    seed: int = 0
    memory_budget_mb: float = 1024

    def __post_init__(self) -> None:
        if self.targets is not None and not isinstance(self.targets, Mapping):
            object.__setattr__(self, "targets", tuple(self.targets))  # frozen: a list given is kept as a tuple
        object.__setattr__(self, "topk_kinds", tuple(self.topk_kinds))
        check_components(self.targets, self.topk_kinds)


def decompose_jump(
    pre_model: Any,
    post: Any,
    batch: TaskBatch,
    config: StudyConfig = StudyConfig(),
    options: DecomposeOptions = DecomposeOptions(),
) -> pd.DataFrame:
    """How much of the pre -> post jump each component recovers when patched from post into pre.

    For every component (default ``COMPONENTS``: patterns, queries, keys, values, head outputs
    ``hook_z``, QK weights, OV weights, MLP outputs, MLP weights, embedding, unembedding; each
    over every head / layer) one patched run; for each kind in ``options.topk_kinds`` its heads
    ranked by their single-head effect and the top K patched jointly for each K in ``config.ks``.

    Args:
        pre_model: the pre checkpoint (``TransformerBridge``, eval mode).
        post: the post model or its ``PostCheckpoint`` (with weights, for the weight components).
        batch: prompts (``TaskBatch``: tokens ``Int[Tensor, "batch pos"]``, answers ``[batch]``).
        config: the study settings (:class:`interp.core.settings.StudyConfig`): ``metric`` (None:
            the task's own, :func:`interp.tasks.metric_for` on ``batch``), ``method``
            (``reference``: full forwards; else the fast path, see
            ``interp.patching.patch_values``), ``ks`` (K values of the top-K rows; None: 1 ... all
            heads, or powers of two above 32 heads) and ``n_boot`` (bootstrap resamples over
            prompts; 0: no intervals).
        options: the components, top-K kinds, labels, the whole row, the bootstrap seed and the
            memory budget (:class:`DecomposeOptions`).

    Returns:
        DataFrame with ``COMPONENT_COLUMNS``: ``target`` (component name), ``scope`` (``all`` or
        ``top-K``), ``k`` (heads / layers patched), ``heads`` (top-K rows: the heads), ``metric``,
        ``unit``, ``value`` (mean metric patched, metric units) and ``recovered = (value - value_pre) / (value_post -
        value_pre)`` with 95 % bootstrap intervals over prompts (``_lo``, ``_hi``; NaN below
        :data:`MIN_BOOTSTRAP_PROMPTS` prompts), ``jump_se`` (standard error of the paired jump)
        and ``jump_too_small`` (the jump is below 3 standard errors: the shares divide by noise).

    Raises:
        TypeError: ``config`` is not a ``StudyConfig`` or ``options`` not a ``DecomposeOptions``.
        ValueError: a K out of range, or the engine's input errors; a model with grouped-query
            attention (keys and values are shared by several query heads, so the per-head q/k/v
            targets do not exist: one line naming the head counts).

    Source: activation patching across checkpoints (post into pre) as in Baherwani et al. 2026,
    "Emergent Capabilities Arise Randomly from Learning Sparse Attention Patterns", extended from
    patterns to every component; intervals: percentile bootstrap (Efron & Tibshirani 1993, "An
    Introduction to the Bootstrap"), :mod:`interp.ranking_stats`.
    """
    check_argument(isinstance(config, StudyConfig), config, "decompose_jump: config", "a StudyConfig")
    check_argument(isinstance(options, DecomposeOptions), options, "decompose_jump: options", "a DecomposeOptions")
    targets, topk_kinds, memory_budget_mb = options.targets, options.topk_kinds, options.memory_budget_mb
    metric = metric_for(batch, config.metric)
    method: Literal["fast", "reference"] = "reference" if config.method == "reference" else "fast"
    batch = check_batch(batch)
    n_layers, n_heads = heads_shape(pre_model)
    n_kv = getattr(pre_model.cfg, "n_key_value_heads", None) or n_heads
    if n_kv < n_heads:
        raise ValueError(
            f"the decomposition patches keys and values per head; this model has grouped-query attention "
            f"({n_heads} query heads share {n_kv} key/value heads), so it has no per-head keys and values: "
            "rank the query heads' patterns instead (rank-heads)"
        )
    batch = batch.to(model_device(pre_model))
    chosen = check_components(targets, topk_kinds, config.ks)
    n_total = n_layers * n_heads
    default_ks = (
        range(1, n_total + 1) if n_total <= 32 else sorted({2**i for i in range(6) if 2**i < n_total} | {n_total})
    )
    ks = [int(k) for k in (config.ks if config.ks is not None else default_ks)]
    bad = [k for k in ks if not 1 <= k <= n_total]
    if bad:
        raise ValueError(f"ks must lie in [1, {n_total}] (the number of heads), got {bad}")
    if not isinstance(post, PostCheckpoint):
        post = capture_post(post, batch, weights=True)
    values_pre, values_post = metric_values(pre_model, batch, metric), post.values(batch, metric)
    rows: list[tuple[str, str, int, str, Target]] = []
    for name, target in chosen.items():
        kind_scope = get_kind(target.kind).scope
        if kind_scope in FULL_FORWARD_SCOPES:
            count = len(target.resolved_units(n_layers, unit_count(pre_model, kind_scope)))
        elif kind_scope == "layer":
            count = len(target.resolved_layers(n_layers))
        else:
            count = 1 if kind_scope == "model" else len(target.resolved_heads(n_layers, n_heads))
        rows.append((name, "all", count, "", target))
    for kind in topk_kinds:
        for scope, k, target in _topk_sets(pre_model, post, batch, kind, metric, ks, memory_budget_mb):
            rows.append((kind, scope, k, " ".join(f"L{l}H{h}" for l, h in target.heads or ()), target))
    whole = options.whole and targets is None  # the default components: the parts of the whole are all there
    if whole:
        rows.append((WHOLE, "all", n_layers, "", Target(WHOLE)))
    values = patch_values(
        pre_model, post, batch, [r[4] for r in rows], metric=metric, method=method, memory_budget_mb=memory_budget_mb
    )
    if whole:  # whole − sum of parts, per prompt: (v_whole − pre) − Σ (v_part − pre), shifted back by pre
        at = {(r[0], r[1]): i for i, r in enumerate(rows)}
        parts = [values[at[(name, "all")]] for name in WHOLE_PARTS]
        interaction = values[at[(WHOLE, "all")]] - torch.stack(parts).sum(0) + len(parts) * values_pre.to(values)
        values = torch.cat([values, interaction[None]])
        rows.append((INTERACTION, "all", n_layers, " ".join(WHOLE_PARTS), Target(WHOLE)))
    ci = bootstrap_interval(values, values_pre, values_post, n_boot=config.n_boot, seed=options.seed)
    m_pre, m_post = float(values_pre.mean()), float(values_post.mean())
    _, jump_se, jump_too_small = jump_noise(values_pre, values_post)
    if m_post == m_pre:
        warnings.warn(
            f"value_post == value_pre ({m_pre:.6g}): recovered is undefined; NaN", RuntimeWarning, stacklevel=2
        )
    labels = {k: v for k, v in dict(options.labels or {}).items() if v is not None}
    nan = float("nan")
    frame = pd.DataFrame(
        {
            "model": labels.get("model", nan),
            "seed": labels.get("seed", nan),
            "pre_step": labels.get("pre_step", nan),
            "post_step": labels.get("post_step", nan),
            "target": [r[0] for r in rows],
            "scope": [r[1] for r in rows],
            "k": [r[2] for r in rows],
            "heads": [r[3] for r in rows],
            "metric": metric_name(metric),
            "unit": metric_spec(metric).unit,
            "value": values.mean(dim=1).double().numpy(),
            "value_lo": ci["value_lo"],
            "value_hi": ci["value_hi"],
            "recovered": [_recovered(float(v), m_pre, m_post) for v in values.mean(dim=1)],
            "recovered_lo": ci["recovered_lo"],
            "recovered_hi": ci["recovered_hi"],
            "value_pre": m_pre,
            "value_post": m_post,
            "jump_se": jump_se,
            "jump_too_small": jump_too_small,
        }
    )
    if whole:  # the interaction's "value" is a shifted difference, not a metric anyone measured
        frame.loc[frame["target"] == INTERACTION, ["value", "value_lo", "value_hi"]] = nan
    order = frame["scope"].ne("all").argsort(kind="stable")  # every "all" row (whole and interaction too) first
    return frame.iloc[order].reset_index(drop=True)[COMPONENT_COLUMNS]


def decompose_between(
    source: Any,
    pre_step: int,
    post_step: int,
    batch: TaskBatch,
    config: StudyConfig = StudyConfig(),
    options: DecomposeOptions = DecomposeOptions(),
) -> pd.DataFrame:
    """Load ``post_step`` (captured) then ``pre_step`` from a checkpoint source and run ``decompose_jump``.

    Args:
        source: a checkpoint source (``interp.sources``).
        pre_step, post_step: training steps; ``post_step`` must be later.
        batch: task prompts tokenised for ``source``'s tokenizer (``TaskBatch``).
        config: the study settings as :func:`decompose_jump` reads them, and ``device`` (where
            the checkpoints are loaded; None: cuda if usable, else cpu).
        options: as :func:`decompose_jump`; the ``model``, ``seed``, ``pre_step`` and
            ``post_step`` labels come from the source's id and the steps.

    Raises:
        TypeError: ``config`` is not a ``StudyConfig`` or ``options`` not a ``DecomposeOptions``.
        ValueError: ``pre_step >= post_step``, a K below 1 (checked before either checkpoint is
            loaded: :func:`check_components`), or as ``decompose_jump``.

    Source: as :func:`decompose_jump` (Baherwani et al. 2026; Efron & Tibshirani 1993).
    """
    from interp.sources.catalogue import model_and_seed

    check_argument(isinstance(config, StudyConfig), config, "decompose_between: config", "a StudyConfig")
    check_argument(isinstance(options, DecomposeOptions), options, "decompose_between: options", "a DecomposeOptions")
    if pre_step >= post_step:
        raise ValueError(f"pre_step={pre_step} must be earlier than post_step={post_step}")
    check_components(options.targets, options.topk_kinds, config.ks)
    post_loaded = source.load(post_step, device=config.device)
    batch = batch.to(next(post_loaded.model.parameters()).device)
    post = capture_post(post_loaded.model, batch, weights=True)
    pre = source.load(pre_step, device=config.device)
    model, seed = model_and_seed(source.model_id)
    labels = {"model": model, "seed": seed, "pre_step": pre_step, "post_step": post_step}
    return decompose_jump(pre.model, post, batch, config, dataclasses.replace(options, labels=labels))
