"""Head ranking by pattern-patching ``delta_p`` and the joint top-K recovery curve.

Baherwani et al. 2026 (head-patching analysis): rank the pre checkpoint's heads by how much
patching in the post checkpoint's attention pattern raises p(answer), then patch the top K heads
jointly for K = 1 ... all and report the fraction of the pre -> post change they recover,
``recovered = (p_K - p_pre) / (p_post - p_pre)``.  A few heads recovering most of the change is
the paper's "sparse attention pattern" signature.

``recovered`` is undefined when ``p_post == p_pre``: ``topk_recovery`` then returns a NaN
column and emits a ``RuntimeWarning`` (it does not raise, so a sweep over checkpoint pairs
keeps going).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any, Literal, Sequence

import pandas as pd
import torch
from jaxtyping import Float
from torch import Tensor

from interp.patching import (
    PatchingInputs,
    _answer_rows_forward,
    _as_inputs,
    _heads_shape,
    _model_device,
    _pattern_hook_name,
    attribution_delta_p,
    delta_p_all_heads,
    mean_answer_prob,
    patch_head_sets,
)

__all__ = [
    "HeadRanking",
    "rank_heads",
    "topk_recovery",
    "head_ranking_report",
    "prescreen_rank_correlation",
]


def rank_heads(delta_p: Float[Tensor, "layer head"]) -> pd.DataFrame:
    """One row per head, sorted by ``delta_p`` (largest first).

    Args:
        delta_p: ``Float[Tensor, "layer head"]`` per-head delta_p (probability units); NaN marks
            heads that were not computed (e.g. outside a pre-screen's top N).

    Returns:
        DataFrame with columns ``layer``, ``head``, ``delta_p``, ``rank`` (``Int64``; 1 = largest
        delta_p; ties broken by (layer, head); ``<NA>`` for NaN heads, which come last).

    Raises:
        ValueError: if ``delta_p`` is not a 2-D tensor.
    """
    if not isinstance(delta_p, Tensor) or delta_p.ndim != 2:
        shape = tuple(delta_p.shape) if isinstance(delta_p, Tensor) else type(delta_p).__name__
        raise ValueError(f"delta_p must be a [layer, head] tensor, got {shape}")
    n_layers, n_heads = delta_p.shape
    values = delta_p.detach().float().cpu()
    frame = pd.DataFrame({
        "layer": torch.arange(n_layers).repeat_interleave(n_heads).numpy(),
        "head": torch.arange(n_heads).repeat(n_layers).numpy(),
        "delta_p": values.flatten().numpy().astype("float64"),
    })
    frame = frame.sort_values(["delta_p", "layer", "head"], ascending=[False, True, True],
                              na_position="last", kind="mergesort").reset_index(drop=True)
    ranked = frame["delta_p"].notna()
    frame["rank"] = pd.array([pd.NA] * len(frame), dtype="Int64")
    frame.loc[ranked, "rank"] = range(1, int(ranked.sum()) + 1)
    return frame


def _ranked_heads(ranking: pd.DataFrame) -> list[tuple[int, int]]:
    missing = {"layer", "head", "rank"} - set(ranking.columns)
    if missing:
        raise ValueError(f"ranking must have columns layer, head, rank (from rank_heads); missing {sorted(missing)}")
    ranked = ranking[ranking["rank"].notna()].sort_values("rank")
    return [(int(l), int(h)) for l, h in zip(ranked["layer"], ranked["head"])]


def topk_recovery(model: Any, inputs: PatchingInputs, patterns: Float[Tensor, "layer batch head q k"],
                  ranking: pd.DataFrame, p_pre: float, p_post: float,
                  ks: Sequence[int] | None = None, memory_budget_mb: int = 1024) -> pd.DataFrame:
    """Joint patch of the top K ranked heads, for each K.

    Args:
        model: pre-checkpoint ``TransformerBridge`` (eval mode).
        inputs: prompts and answers.
        patterns: the post checkpoint's patterns (``interp.patching.cache_patterns``).
        ranking: output of ``rank_heads`` (only rows with a rank are used).
        p_pre, p_post: mean p(answer) of the pre and post checkpoints (probability units).
        ks: the K values, each in [1, number of ranked heads]; default 1 ... all ranked heads.
        memory_budget_mb: activation memory per stacked chunk, MiB.

    Returns:
        DataFrame with columns ``k``, ``p_patched`` (mean p(answer) with the top k heads patched)
        and ``recovered = (p_patched - p_pre) / (p_post - p_pre)`` (NaN, with a RuntimeWarning,
        when ``p_post == p_pre``).

    Raises:
        ValueError: bad ranking columns, a K out of range, or the engine's input errors.
    """
    heads = _ranked_heads(ranking)
    if not heads:
        raise ValueError("ranking has no ranked heads (every delta_p is NaN)")
    ks = list(range(1, len(heads) + 1)) if ks is None else [int(k) for k in ks]
    bad = [k for k in ks if not 1 <= k <= len(heads)]
    if bad:
        raise ValueError(f"ks must lie in [1, {len(heads)}] (the number of ranked heads), got {bad}")
    p = patch_head_sets(model, inputs, patterns, [heads[:k] for k in ks], memory_budget_mb=memory_budget_mb)
    frame = pd.DataFrame({"k": ks, "p_patched": p.double().numpy()})
    span = float(p_post) - float(p_pre)
    if span == 0.0 or not math.isfinite(span):
        warnings.warn(f"p_post == p_pre ({float(p_pre):.6g}): recovered = (p_K - p_pre) / (p_post - p_pre) "
                      "is undefined; returning NaN", RuntimeWarning, stacklevel=2)
        frame["recovered"] = float("nan")
    else:
        frame["recovered"] = (frame["p_patched"] - float(p_pre)) / span
    return frame


@dataclass
class HeadRanking:
    """Everything the head-ranking analysis produces for one (pre, post) checkpoint pair.

    Attributes:
        p_pre, p_post: mean p(answer) of the pre / post checkpoint (probability units).
        delta_p: ``Float[Tensor, "layer head"]`` exact per-head delta_p (NaN where not computed).
        heads: ``rank_heads(delta_p)``, plus ``delta_p_attribution`` when a pre-screen ran.
        topk: ``topk_recovery`` table (k, p_patched, recovered).
        post_patterns: ``Float[Tensor, "layer batch head query_pos key_pos"]`` post patterns.
        delta_p_attribution: the pre-screen's estimates, or None.
    """

    p_pre: float
    p_post: float
    delta_p: Tensor
    heads: pd.DataFrame
    topk: pd.DataFrame
    post_patterns: Tensor
    delta_p_attribution: Tensor | None = None


def _patterns_and_p(model: Any, inputs: PatchingInputs) -> tuple[Tensor, float]:
    """Post-checkpoint patterns and mean p(answer) from a single forward."""
    n_layers, _ = _heads_shape(model)
    names = {_pattern_hook_name(l) for l in range(n_layers)}
    inputs = inputs.to(_model_device(model))
    with torch.no_grad():
        p, (cache,) = _answer_rows_forward(
            lambda tokens, **kw: model.run_with_cache(tokens, names_filter=lambda n: n in names, **kw), inputs)
        patterns = torch.stack([cache[_pattern_hook_name(l)].float() for l in range(n_layers)])
    return patterns, float(p.mean())


def head_ranking_report(pre_model: Any, post_model: Any, inputs: PatchingInputs,
                        method: Literal["fast", "reference"] = "fast",
                        prescreen_top_n: int | None = None, memory_budget_mb: int = 1024) -> HeadRanking:
    """Rank the pre checkpoint's heads by pattern patching from the post checkpoint.

    Steps: post patterns and p_post (one forward of ``post_model``); p_pre; per-head delta_p
    (``method``; with ``prescreen_top_n`` only the pre-screen's top N heads by attribution
    estimate are patched exactly, the rest are NaN); ranking; joint top-K recovery over the
    ranked heads.

    Args:
        pre_model, post_model: ``TransformerBridge`` s of the same architecture (eval mode).
        inputs: prompts and answers.
        method: ``"fast"`` or ``"reference"`` (see ``delta_p_all_heads``).
        prescreen_top_n: patch exactly only the top N heads of ``attribution_delta_p``.
        memory_budget_mb: activation memory per stacked chunk, MiB.

    Returns:
        ``HeadRanking``.

    Raises:
        ValueError: models without attention heads or with different (n_layers, n_heads),
            bad ``prescreen_top_n``, or the engine's input errors.
    """
    inputs = _as_inputs(inputs)
    shape_pre, shape_post = _heads_shape(pre_model), _heads_shape(post_model)
    if shape_pre != shape_post:
        raise ValueError(f"pre and post checkpoints differ in (n_layers, n_heads): {shape_pre} vs {shape_post}")
    n_layers, n_heads = shape_pre
    if prescreen_top_n is not None and not (isinstance(prescreen_top_n, int) and 1 <= prescreen_top_n):
        raise ValueError(f"prescreen_top_n must be a positive int or None, got {prescreen_top_n!r}")
    post_patterns, p_post = _patterns_and_p(post_model, inputs)
    p_pre = mean_answer_prob(pre_model, inputs)
    attribution = None
    heads = None
    if prescreen_top_n is not None:
        attribution = attribution_delta_p(pre_model, inputs, post_patterns)
        top = torch.argsort(attribution.flatten(), descending=True, stable=True)[:prescreen_top_n]
        heads = [(int(i) // n_heads, int(i) % n_heads) for i in top]
    delta_p = delta_p_all_heads(pre_model, inputs, post_patterns, method=method,
                                memory_budget_mb=memory_budget_mb, heads=heads)
    ranking = rank_heads(delta_p)
    if attribution is not None:
        ranking["delta_p_attribution"] = [float(attribution[l, h]) for l, h in zip(ranking["layer"], ranking["head"])]
    topk = topk_recovery(pre_model, inputs, post_patterns, ranking, p_pre, p_post, memory_budget_mb=memory_budget_mb)
    return HeadRanking(p_pre=p_pre, p_post=p_post, delta_p=delta_p, heads=ranking, topk=topk,
                       post_patterns=post_patterns, delta_p_attribution=attribution)


def prescreen_rank_correlation(delta_p_exact: Float[Tensor, "layer head"],
                               delta_p_attr: Float[Tensor, "layer head"]) -> float:
    """Spearman rank correlation between exact and attribution delta_p over the heads both have.

    Computed as the Pearson correlation of pandas average ranks (no SciPy).  Heads that are NaN
    in either tensor are dropped.

    Returns:
        a float in [-1, 1]; NaN if fewer than two heads remain or either side is constant.

    Raises:
        ValueError: if the two tensors differ in shape.
    """
    if tuple(delta_p_exact.shape) != tuple(delta_p_attr.shape):
        raise ValueError(f"delta_p_exact {tuple(delta_p_exact.shape)} and delta_p_attr "
                         f"{tuple(delta_p_attr.shape)} must have the same [layer, head] shape")
    frame = pd.DataFrame({"exact": delta_p_exact.detach().double().cpu().flatten().numpy(),
                          "attr": delta_p_attr.detach().double().cpu().flatten().numpy()}).dropna()
    if len(frame) < 2:
        return float("nan")
    return float(frame["exact"].rank().corr(frame["attr"].rank()))
