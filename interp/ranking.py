"""One ranking path: heads ranked by a patch's effect, joint top-K recovery, the jump decomposed.

Baherwani et al. 2026 (head-patching analysis): rank the pre checkpoint's heads by how much
patching in the post checkpoint's attention pattern raises the metric (the column ``delta``, in
the metric's unit: the paper's ``delta_p`` for the probability of the answer), then patch the
top K heads jointly for K = 1 ... all and report the fraction of the pre -> post change they
recover, ``recovered = (m_K - m_pre) / (m_post - m_pre)`` (ARENA-style calibration: pre = 0,
post = 1).  ``decompose_jump`` asks the same question of every component (patterns, queries,
keys, values, head outputs, QK and OV weights, MLPs, (un)embedding): which one carries the jump?

Entry points (the main job's runner, the CLI and notebooks all call these):

* ``head_ranking(pre_model, post, batch, config, kind, options) -> HeadRanking`` on two loaded
  checkpoints (the study settings as one :class:`interp.core.settings.StudyConfig`);
* ``rank_heads_between(source, pre_step, post_step, batch, ...) -> HeadRanking`` loads them
  (and, with ``decompose``, calls :func:`interp.decomposition.decompose_jump`).

The statistics (``rank_heads``, ``bootstrap_interval``, ``topk_recovery``, the pre-screen's
agreement; bootstrap intervals over prompts, ``MIN_BOOTSTRAP_PROMPTS``) are
:mod:`interp.ranking_stats`, the decomposition :mod:`interp.decomposition`: import them from there.
A jump below 3 standard errors of the paired per-prompt difference
(``interp.emergence.jump_noise``, the interval study's rule) is flagged ``jump_too_small``.
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from jaxtyping import Float
from torch import Tensor

from interp.core.kept import KEPT, batch_digest
from interp.core.objects import check_argument, results_equal, short_repr
from interp.core.settings import StudyConfig
from interp.decomposition import DecomposeOptions, decompose_jump
from interp.emergence import check_source, jump_noise
from interp.patching import (
    PostCheckpoint,
    attribution_delta_p,
    capture_post,
    metric_spec,
    metric_values,
    per_head_delta,
)
from interp.patching._forward import check_batch, heads_shape, model_device
from interp.patching.kinds import kind_names
from interp.ranking_stats import (
    TopkOptions,
    _top_found,
    bootstrap_interval,
    prescreen_rank_correlation,
    rank_heads,
    topk_recovery,
)
from interp.tasks import TaskBatch, metric_for

__all__ = ["HeadRanking", "RankingFields", "RankingOptions", "head_ranking", "rank_heads_between"]


# --------------------------------------------------------------------------- the ranking


@dataclass(kw_only=True)
class RankingFields:
    """The values a head ranking gives, declared once: :class:`HeadRanking`'s and, once its run is
    ranked, :class:`interp.main_job.report.RunAnalysis`'s (None or empty before).

    Values are in the units of ``metric`` (``unit``; :mod:`interp.core.metrics`).

    Attributes:
        value_pre, value_post: mean metric of the pre / post checkpoint (metric units).
        delta: ``Float[Tensor, "layer head"]`` exact per-head effect (NaN where not computed).
        heads: the ranked heads (``rank_heads(delta)`` plus bootstrap bounds, the pre-screen's
            estimate, ``metric`` and ``unit``).
        topk: ``topk_recovery`` table (k, value, recovered, metric, unit).
        example_tokens, example_patterns, example_names: the top heads' patterns on prompt 0
            (pre then post for each head, ``Float[Tensor, "2*n_top query_pos key_pos"]``), for display.
        rank_correlation_prescreen: Spearman rho of the pre-screen's estimate vs exact (None below 3 heads).
        prescreen_top2_found: whether the exact top 2 heads are the estimate's top 2 (None if
            fewer than 2 exact values).
        metric: the metric's name; unit: its unit.
        jump_se: standard error of the paired per-prompt jump value_post - value_pre (metric
            units; :func:`interp.emergence.jump_noise`).
    """

    value_pre: float | None = None
    value_post: float | None = None
    delta: Float[Tensor, "layer head"] | None = None
    heads: pd.DataFrame | None = None
    topk: pd.DataFrame | None = None
    example_tokens: list[str] = field(default_factory=list)
    example_patterns: Tensor | None = None
    example_names: list[str] = field(default_factory=list)
    rank_correlation_prescreen: float | None = None
    prescreen_top2_found: bool | None = None
    metric: str = "p"
    unit: str = "probability"
    jump_se: float | None = None

    def ranking_values(self) -> dict[str, Any]:
        """The fields above by name (what a run copies from its ranking)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(RankingFields)}


#: The fields a head ranking must have (the rest of :class:`RankingFields` may stay empty).
_REQUIRED = ("value_pre", "value_post", "delta", "heads", "topk")


@dataclass
class HeadRanking(RankingFields):
    """Everything the head-ranking analysis produces for one (pre, post) checkpoint pair.

    Values are in the units of ``metric`` (``unit``; :mod:`interp.core.metrics`): probability for
    ``"p"`` (then ``delta`` is the paper's ``delta_p``: Baherwani et al. 2026, "Emergent
    Capabilities Arise Randomly from Learning Sparse Attention Patterns"), nats for
    ``"logprob"``, logits for ``"logit-diff"``. Intervals: percentile bootstrap over prompts
    (Efron & Tibshirani 1993); ``rank_correlation_prescreen``: Spearman's rho.

    Attributes:
        value_pre, value_post: mean metric of the pre / post checkpoint (metric units).
        delta: ``Float[Tensor, "layer head"]`` exact per-head effect (NaN where not computed).
        heads: ``rank_heads(delta)`` plus ``delta_lo``, ``delta_hi`` (95 % bootstrap interval
            over prompts), ``delta_attribution`` (the pre-screen's estimate), ``metric`` and ``unit``.
        topk: ``topk_recovery`` table (k, value, recovered, metric, unit).
        post_patterns: ``Float[Tensor, "layer batch head query_pos key_pos"]`` post patterns.
        pre_patterns: ``Float[Tensor, "layer batch head query_pos key_pos"]`` pre patterns (on the
            CPU), filled in by :func:`rank_heads_between`; None otherwise.
        delta_attribution: the pre-screen's estimates ``Float[Tensor, "layer head"]``, or None.
        metric: the metric's name; unit: its unit.
        rank_correlation_prescreen: Spearman rho of estimate vs exact (None below 3 heads).
        prescreen_top2_found: whether the exact top 2 heads are the estimate's top 2 (None if
            fewer than 2 exact values).
        components: ``decompose_jump`` table, when asked for.
        example_tokens, example_patterns, example_names: the top heads' patterns on prompt 0
            (pre then post for each head), for display.
        jump_se: standard error of the paired per-prompt jump value_post - value_pre (metric units).
        jump_too_small: the jump is below 3 standard errors (:func:`interp.emergence.jump_noise`):
            delta and recovered divide or compare against noise (also the ``jump_too_small``
            column of ``heads``).

    ``repr`` is one screen, ``==`` compares
    every field (tensors by value, tables with ``DataFrame.equals``), and Jupyter shows the
    tables and the heatmap.

    Raises:
        TypeError: a required field (``value_pre``, ``value_post``, ``delta``, ``heads``,
            ``topk``) is None.
    """

    # value_pre, value_post, delta, heads, topk (required here), example_*, the pre-screen's
    # agreement, metric and unit: the fields of RankingFields
    post_patterns: Tensor
    delta_attribution: Tensor | None = None
    components: pd.DataFrame | None = None
    pre_patterns: Tensor | None = field(default=None, repr=False)
    jump_too_small: bool = False

    __eq__ = results_equal

    def __post_init__(self) -> None:
        missing = [name for name in _REQUIRED if getattr(self, name) is None]
        if missing:
            raise TypeError(f"HeadRanking() needs {', '.join(missing)} (got None); required: {', '.join(_REQUIRED)}")

    def __repr__(self) -> str:
        heads = self.heads if self.heads is not None else pd.DataFrame()
        top = heads.dropna(subset=["delta"]).head(3) if "delta" in heads else heads.head(0)
        best = ", ".join(f"L{int(l)}H{int(h)} {d:+.4g}" for l, h, d in zip(top["layer"], top["head"], top["delta"]))
        return (
            f"HeadRanking(metric={self.metric!r} ({self.unit}), value_pre={self.value_pre:.4g}, "
            f"value_post={self.value_post:.4g}, top heads: {best or 'none'})\n" + short_repr(self)
        )

    def _html(self, assets) -> str:
        from interp.report.display import head_ranking_html

        return head_ranking_html(self, assets)

    def _repr_html_(self) -> str:
        """Jupyter display (self-contained): :func:`interp.report.display.head_ranking_html`."""
        from interp.report.display import Assets

        return self._html(Assets())

    def save_html(self, path) -> Path:
        """Write the display as a self-contained page (atomic; :func:`interp.report.display.save_html`)."""
        from interp.report.display import save_html

        return save_html(self, path, title=f"head ranking ({self.metric})")

    def show_head(self, layer: int, head: int, prompt: int = 0):
        """One head's attention pattern on one prompt at the pre step, at the post step and the
        change post − pre, side by side (:func:`interp.report.head_view.head_comparison_figure`;
        token labels on prompt 0, from ``example_tokens``).

        Args:
            layer, head: the head.
            prompt: which prompt of the batch (index into ``[layer, batch, head, q, k]``).

        Returns:
            A plotly figure with three heatmaps, ``[query_pos, key_pos]`` each: pre, post, post − pre.

        Raises:
            ValueError: no pre patterns (a ranking from :func:`head_ranking` alone; use
                :func:`rank_heads_between`), or a layer, head or prompt out of range.
        """
        from interp.report.head_view import head_comparison_figure

        if self.pre_patterns is None:
            raise ValueError(
                "this ranking has no pre patterns (head_ranking leaves them empty); rank_heads_between fills them"
            )
        n_layers, n_prompts, n_heads = (int(n) for n in self.post_patterns.shape[:3])
        if not (0 <= layer < n_layers and 0 <= head < n_heads and 0 <= prompt < n_prompts):
            raise ValueError(
                f"L{layer}H{head} prompt {prompt} is out of range: layers 0..{n_layers - 1}, heads "
                f"0..{n_heads - 1}, prompts 0..{n_prompts - 1}"
            )
        delta = float(self.delta[layer, head]) if self.delta is not None else float("nan")
        return head_comparison_figure(
            self.pre_patterns[layer, prompt, head],
            self.post_patterns[layer, prompt, head].cpu(),
            self.example_tokens if prompt == 0 else (),
            title=f"L{layer}H{head} on prompt {prompt}: attention before and after (Δ {delta:+.4f} {self.unit})",
        )


@dataclass(frozen=True)
class RankingOptions:
    """What a call of :func:`head_ranking` does besides the study settings.

    Attributes:
        memory_budget_mb: activation memory per stacked call of the fast path (MiB, > 0).
        attribution: run the attribution pre-screen even when it selects no heads (its estimates
            and their agreement with the exact values are reported); False skips it unless
            ``method="attribution"`` or ``prescreen_top_n`` selects heads by it.
    """

    memory_budget_mb: float = 1024
    attribution: bool = True


def head_ranking(
    pre_model: Any,
    post: Any,
    batch: TaskBatch,
    config: StudyConfig = StudyConfig(),
    kind: str = "pattern",
    options: RankingOptions = RankingOptions(),
) -> HeadRanking:
    """Rank the pre checkpoint's heads by patching ``kind`` (default the pattern) from the post checkpoint.

    Steps: post activations and metric (``capture_post``); the pre metric; the attribution
    pre-screen (integrated gradients over ``config.prescreen_steps`` points per layer, see
    ``interp.patching.attribution``; ``options.attribution=False`` skips it unless it selects
    heads); exact per-head effects (every head, or with ``config.prescreen_top_n`` /
    ``config.method="attribution"`` only the pre-screen's top N, default a quarter of the heads,
    the rest NaN); ranking with 95 % bootstrap intervals; joint top-K recovery over the ranked
    heads (:func:`interp.ranking_stats.topk_recovery`).

    Args:
        pre_model: the pre checkpoint (``TransformerBridge``, eval mode, float32).
        post: the post model or its ``PostCheckpoint``.
        batch: prompts (``TaskBatch``: tokens ``Int[Tensor, "batch pos"]``, answers ``[batch]``).
        config: the study settings (:class:`interp.core.settings.StudyConfig`; the ``device``,
            ``decompose`` and the rest are :func:`rank_heads_between`'s): ``metric`` (None: the
            task's own, :func:`interp.tasks.metric_for` on ``batch``: ``logit-diff`` for IOI, ``p``
            for repetition and batches without a known task), ``method`` (``fast``, ``reference``:
            full forwards, TransformerLens; ``attribution``: exact deltas for the pre-screen's top
            N only), ``prescreen_top_n`` (patch exactly only the pre-screen's top N heads),
            ``prescreen_steps`` (integration points of the pre-screen per layer: 1 = attribution
            patching, one forward and one backward over the prompts; 2, the default, costs
            ``n_layers`` passes over 2 copies of them, each from its layer on: on the Pythia-70m
            shape about 60 % of the exact fast path, so use 1 on large models; see
            ``benchmarks/bench_patching.py``), ``ks`` (K values of the joint top-K patch; None:
            1 ... all ranked heads) and ``n_boot`` (bootstrap resamples over prompts; 0: no intervals).
        kind: per-head target kind ranked (``pattern``, ``q``, ``k``, ``v``, ``z``, ``qk``, ``ov``).
        options: the memory budget and whether the pre-screen runs (:class:`RankingOptions`).

    Returns:
        ``HeadRanking`` (values in the metric's unit: probability for ``p``, nats for
        ``logprob``, logits for ``logit-diff``). With grouped-query attention
        (``n_key_value_heads < n_heads``: Llama-style models; Ainslie et al. 2023, "GQA") a head
        is a query head, its own pattern patched alone; ``heads``' ``kv_head`` column names the
        key/value head it shares (``head // (n_heads // n_key_value_heads)``, transformers'
        ``repeat_kv`` order; ``kv_head == head`` without grouped-query attention).

    Raises:
        TypeError: ``config`` is not a ``StudyConfig`` or ``options`` not a ``RankingOptions``.
        ValueError: different model shapes, a ``prescreen_top_n`` above the model's head count,
            a bad ``kind``, or the engine's input errors.

    Sources: head patching from the post checkpoint into the pre one and ``delta_p``: Baherwani
    et al. 2026, "Emergent Capabilities Arise Randomly from Learning Sparse Attention Patterns";
    the pre-screen: attribution patching (Nanda 2023, "Attribution Patching"; Syed et al. 2023,
    "Attribution Patching Outperforms Automated Circuit Discovery") refined by integrated
    gradients (Sundararajan et al. 2017, "Axiomatic Attribution for Deep Networks"); intervals:
    percentile bootstrap (Efron & Tibshirani 1993); the patching hooks: TransformerLens.
    """
    check_argument(isinstance(config, StudyConfig), config, "head_ranking: config", "a StudyConfig")
    check_argument(isinstance(options, RankingOptions), options, "head_ranking: options", "a RankingOptions")
    batch = check_batch(batch)
    metric, method, prescreen_top_n = metric_for(batch, config.metric), config.method, config.prescreen_top_n
    config = config.replace(metric=metric)  # the task's own metric, decided once (interp.tasks.metric_for)
    if kind not in kind_names("head"):
        raise ValueError(f"kind={kind!r}; per-head kinds: {', '.join(kind_names('head'))}")
    n_layers, n_heads = heads_shape(pre_model)
    if prescreen_top_n is not None and prescreen_top_n > n_layers * n_heads:
        raise ValueError(
            f"prescreen_top_n={prescreen_top_n} is more than the model's {n_layers * n_heads} heads "
            f"({n_layers} layers x {n_heads} heads); use 1..{n_layers * n_heads}, or None for every head"
        )
    batch = batch.to(model_device(pre_model))
    if not isinstance(post, PostCheckpoint):
        if heads_shape(post) != (n_layers, n_heads):
            raise ValueError(
                f"pre and post checkpoints differ in (n_layers, n_heads): {(n_layers, n_heads)} vs {heads_shape(post)}"
            )
        post = capture_post(post, batch, weights=kind in ("qk", "ov"))
    values_pre, values_post = metric_values(pre_model, batch, metric), post.values(batch, metric)
    value_pre, value_post = float(values_pre.mean()), float(values_post.mean())
    _, jump_se, jump_too_small = jump_noise(values_pre, values_post)
    post_patterns = torch.stack([post.activation("pattern", l) for l in range(n_layers)])
    estimate, heads = None, None
    selecting = method == "attribution" or prescreen_top_n is not None
    if (options.attribution or selecting) and kind == "pattern":
        estimate = attribution_delta_p(pre_model, batch, post_patterns, metric=metric, steps=config.prescreen_steps)
    if selecting:
        if estimate is None:
            raise ValueError(f"the attribution pre-screen ranks patterns only, not kind={kind!r}")
        top_n = prescreen_top_n if prescreen_top_n is not None else max(1, estimate.numel() // 4)
        top = torch.argsort(estimate.flatten(), descending=True, stable=True)[:top_n]
        heads = [(int(i) // n_heads, int(i) % n_heads) for i in top]
    per_prompt = per_head_delta(
        pre_model,
        post,
        batch,
        kind,
        metric=metric,
        method="reference" if method == "reference" else "fast",
        heads=heads,
        memory_budget_mb=options.memory_budget_mb,
        per_prompt=True,
    )
    delta = per_prompt.mean(dim=-1)
    ranking = rank_heads(delta)
    computed = [(l, h) for l, h in zip(ranking["layer"], ranking["head"]) if torch.isfinite(delta[l, h])]
    lo = {pair: float("nan") for pair in zip(ranking["layer"], ranking["head"])}
    hi = dict(lo)
    if computed:
        rows = torch.stack([per_prompt[l, h] + values_pre for l, h in computed])
        ci = bootstrap_interval(rows, values_pre, values_post, n_boot=config.n_boot)
        for i, pair in enumerate(computed):
            lo[pair], hi[pair] = float(ci["delta_lo"][i]), float(ci["delta_hi"][i])
    pairs = list(zip(ranking["layer"], ranking["head"]))
    ranking["delta_lo"] = [lo[p] for p in pairs]
    ranking["delta_hi"] = [hi[p] for p in pairs]
    ranking["delta_attribution"] = [float(estimate[l, h]) if estimate is not None else float("nan") for l, h in pairs]
    spec = metric_spec(metric)
    n_kv = getattr(pre_model.cfg, "n_key_value_heads", None) or n_heads
    # the key/value head each (query) head reads: itself without grouped-query attention
    ranking.insert(ranking.columns.get_loc("head") + 1, "kv_head", ranking["head"] // (n_heads // n_kv))
    ranking["metric"], ranking["unit"] = spec.name, spec.unit
    ranking["jump_too_small"] = jump_too_small
    topk = topk_recovery(
        pre_model,
        batch,
        post,
        ranking,
        config,
        TopkOptions(kind=kind, memory_budget_mb=options.memory_budget_mb, values=(values_pre, values_post)),
    )
    topk["metric"], topk["unit"] = spec.name, spec.unit
    finite = torch.isfinite(delta)
    rho = top2 = None
    if estimate is not None:
        rho = prescreen_rank_correlation(delta[finite], estimate[finite]) if int(finite.sum()) >= 3 else None
        top2 = _top_found(delta, estimate)
    return HeadRanking(
        value_pre=value_pre,
        value_post=value_post,
        delta=delta,
        heads=ranking,
        topk=topk,
        post_patterns=post_patterns,
        delta_attribution=estimate,
        metric=spec.name,
        unit=spec.unit,
        rank_correlation_prescreen=rho,
        prescreen_top2_found=top2,
        jump_se=jump_se,
        jump_too_small=jump_too_small,
    )


def rank_heads_between(
    source: Any,
    pre_step: int,
    post_step: int,
    batch: TaskBatch,
    config: StudyConfig | None = None,
    n_example_heads: int = 3,
) -> HeadRanking:
    """Load ``post_step`` then ``pre_step`` from a checkpoint source and run ``head_ranking``.

    The post checkpoint is captured first (activations, answer logits and, with ``decompose``,
    a copy of its weights: a :class:`interp.patching.PostCheckpoint`) and its model released, so
    that at most one model is resident while pre is analysed. Loading pre boots a fresh bridge:
    a post model the caller still holds keeps its weights unchanged (max |difference| 0,
    ``tests/emergence_lens/test_first_hour.py::test_loading_pre_leaves_post_weights_untouched``).

    Args:
        source: a checkpoint source (``interp.sources``).
        pre_step, post_step: training steps; ``post_step`` must be later.
        batch: task prompts tokenised for ``source``'s tokenizer.
        config: the settings (:class:`interp.core.settings.StudyConfig`; default
            ``StudyConfig(decompose=False)``): ``device``, ``method``, ``metric`` (None: the
            task's own, :func:`interp.tasks.metric_for`),
            ``prescreen_top_n``, ``prescreen_steps``, ``ks`` and ``n_boot`` as in
            :func:`head_ranking`; ``decompose`` also runs ``decompose_jump``
            (``HeadRanking.components``; with its own K values, and ``method`` and ``n_boot`` from
            ``config``).
        n_example_heads: top heads whose pre/post patterns on prompt 0 are kept for display.

    Returns:
        ``HeadRanking`` with the example patterns filled in; its ``heads`` and ``topk`` tables
        start with the source's ``model`` and ``seed`` columns. A ranking asked for before in this
        process (the same weights at both steps, prompts and ``config``) is a copy of the kept
        one, and nothing is loaded (:mod:`interp.core.kept`).

    Raises:
        TypeError: ``source`` is not a checkpoint source, or ``batch`` not a ``TaskBatch`` (one line).
        ValueError: ``pre_step >= post_step``, or as ``head_ranking``.

    Source: head patching across checkpoints, Baherwani et al. 2026 (see :func:`head_ranking`).
    """
    check_source(source, "rank_heads_between: source")
    check_argument(
        isinstance(batch, TaskBatch), batch, "rank_heads_between: batch", "a TaskBatch (task.build(source.tokenizer()))"
    )
    if pre_step >= post_step:
        raise ValueError(
            f"pre_step={pre_step} must be earlier than post_step={post_step} "
            "(patching goes from the later checkpoint into the earlier one)"
        )
    config = config or StudyConfig(decompose=False)
    key = KEPT.key(
        source,
        (pre_step, post_step),
        batch_digest(batch),
        f"ranking:{sorted(config.as_dict().items())}:{n_example_heads}",
        config.device,
    )
    kept = KEPT.get(key)
    if kept is not None:  # asked before in this process: same weights, prompts and settings
        return copy.deepcopy(kept)
    ranking = _rank_heads_between(source, pre_step, post_step, batch, config, n_example_heads)
    KEPT.put(key, copy.deepcopy(ranking))
    return ranking


def _rank_heads_between(
    source: Any, pre_step: int, post_step: int, batch: TaskBatch, config: StudyConfig, n_example_heads: int
) -> HeadRanking:
    metric, device, decompose = metric_for(batch, config.metric), config.device, config.decompose
    post_loaded = source.load(post_step, device=device)
    if hasattr(source, "prefetch"):
        source.prefetch(pre_step)  # read while post is captured (swapping sources only)
    batch = batch.to(next(post_loaded.model.parameters()).device)
    post = capture_post(post_loaded.model, batch, weights=decompose)
    del post_loaded  # the captured tensors are all the analysis needs from post
    pre = source.load(pre_step, device=device)
    with torch.inference_mode():
        pre_patterns = torch.stack(list(_patterns(pre.model, batch)))
    ranking = head_ranking(pre.model, post, batch, config.replace(metric=metric))
    n_kv = getattr(pre.model.cfg, "n_key_value_heads", None) or pre.model.cfg.n_heads
    if decompose and n_kv < pre.model.cfg.n_heads:
        import warnings

        warnings.warn(
            f"{source.model_id}: no component decomposition (it patches keys and values per head, and "
            f"{pre.model.cfg.n_heads} query heads share {n_kv} key/value heads); the heads are ranked",
            RuntimeWarning,
            stacklevel=2,
        )
        decompose = False
    if decompose:
        ranking.components = decompose_jump(
            pre.model,
            post,
            batch,
            config.replace(metric=metric, ks=None),  # the decomposition's own K values (ks is the ranking's)
            DecomposeOptions(labels={"pre_step": pre_step, "post_step": post_step}),
        )
    assert ranking.heads is not None and ranking.delta is not None  # HeadRanking requires both
    top = ranking.heads.dropna(subset=["delta"]).head(n_example_heads)
    patterns, names = [], []
    for layer, head in zip(top["layer"], top["head"]):
        patterns += [pre_patterns[layer, 0, head], ranking.post_patterns[layer, 0, head]]
        names += [f"L{layer}H{head} pre (step {pre_step})", f"L{layer}H{head} post (step {post_step})"]
    tokenizer = source.tokenizer()
    ranking.pre_patterns = pre_patterns.cpu()
    ranking.example_tokens = [tokenizer.decode([int(t)]) for t in batch.tokens[0]]
    ranking.example_patterns = torch.stack(patterns).cpu() if patterns else None
    ranking.example_names = names
    ranking.delta = ranking.delta.detach().cpu()
    from interp.sources.catalogue import model_and_seed

    model, seed = model_and_seed(source.model_id)
    for name in ("heads", "topk"):
        table = getattr(ranking, name).drop(columns=["model", "seed"], errors="ignore")
        table.insert(0, "seed", seed)
        table.insert(0, "model", model)
        setattr(ranking, name, table)
    return ranking


def _patterns(model: Any, batch: TaskBatch) -> Tensor:
    from interp.patching import cache_patterns

    return cache_patterns(model, batch.tokens)
