"""The ranking's statistics: heads sorted by their effect, 95 % bootstrap intervals over prompts,
the joint top-K recovery and the pre-screen's agreement with the exact values.

Uncertainty: 95 % percentile bootstrap intervals over prompts (Efron & Tibshirani 1993), the
prompts resampled jointly for the pre, post and patched values so that ``recovered``'s interval
carries the uncertainty of its denominator.  ``recovered = (m_K - m_pre) / (m_post - m_pre)`` is
undefined when ``m_post == m_pre``: NaN with a ``RuntimeWarning`` (no exception, so a sweep over
checkpoint pairs keeps going). Over fewer than ``MIN_BOOTSTRAP_PROMPTS`` (5) prompts the bounds
are NaN, with a ``RuntimeWarning``.

Used by :mod:`interp.ranking` (the head ranking) and :mod:`interp.decomposition` (the jump by
component); :mod:`interp.ranking` re-exports every public name here.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import torch
from jaxtyping import Float
from torch import Tensor

from interp.core.objects import check_argument
from interp.core.settings import N_BOOT, StudyConfig
from interp.patching import Target, patch_values
from interp.tasks import TaskBatch, metric_for

__all__ = [
    "MIN_BOOTSTRAP_PROMPTS",
    "N_BOOT",
    "TopkOptions",
    "bootstrap_interval",
    "prescreen_rank_correlation",
    "rank_heads",
    "topk_recovery",
]

#: Fewest prompts a 95 % percentile bootstrap interval is computed over. The 2.5th and 97.5th
#: percentiles need at least 1 / 0.025 = 40 distinct resampled means; n prompts give at most
#: C(2n - 1, n) distinct resamples: 10 at n = 3, 35 at n = 4, 126 at n = 5. Below, the bounds are NaN.
MIN_BOOTSTRAP_PROMPTS = 5


# --------------------------------------------------------------------------- tables


def rank_heads(delta: Float[Tensor, "layer head"]) -> pd.DataFrame:
    """One row per head, sorted by ``delta`` (largest first).

    Args:
        delta: ``Float[Tensor, "layer head"]`` per-head effect (metric units: the paper's
            ``delta_p`` for the metric ``p``); NaN marks heads that were not computed (e.g.
            outside a pre-screen's top N).

    Returns:
        DataFrame with columns ``layer``, ``head``, ``delta``, ``rank`` (``Int64``; 1 = largest;
        ties broken by (layer, head); ``<NA>`` for NaN heads, which come last).

    Raises:
        ValueError: if ``delta`` is not a 2-D tensor.
    """
    if not isinstance(delta, Tensor) or delta.ndim != 2:
        shape = tuple(delta.shape) if isinstance(delta, Tensor) else type(delta).__name__
        raise ValueError(f"delta must be a [layer, head] tensor, got {shape}")
    n_layers, n_heads = delta.shape
    values = delta.detach().float().cpu()
    frame = pd.DataFrame(
        {
            "layer": torch.arange(n_layers).repeat_interleave(n_heads).numpy(),
            "head": torch.arange(n_heads).repeat(n_layers).numpy(),
            "delta": values.flatten().numpy().astype("float64"),
        }
    )
    frame = frame.sort_values(
        ["delta", "layer", "head"], ascending=[False, True, True], na_position="last", kind="mergesort"
    ).reset_index(drop=True)
    ranked = frame["delta"].notna()
    frame["rank"] = pd.array([pd.NA] * len(frame), dtype="Int64")
    frame.loc[ranked, "rank"] = range(1, int(ranked.sum()) + 1)
    return frame


def _ranked_heads(ranking: pd.DataFrame) -> list[tuple[int, int]]:
    missing = {"layer", "head", "rank"} - set(ranking.columns)
    if missing:
        raise ValueError(f"ranking must have columns layer, head, rank (from rank_heads); missing {sorted(missing)}")
    ranked = ranking[ranking["rank"].notna()].sort_values("rank")
    return [(int(l), int(h)) for l, h in zip(ranked["layer"], ranked["head"])]


def _recovered(value: float, pre: float, post: float) -> float:
    span = post - pre
    return (value - pre) / span if span != 0.0 and math.isfinite(span) else float("nan")


def bootstrap_interval(
    patched: Float[Tensor, "sets batch"],
    pre: Float[Tensor, " batch"],
    post: Float[Tensor, " batch"],
    n_boot: int = N_BOOT,
    seed: int = 0,
) -> dict[str, np.ndarray]:
    """95 % percentile bootstrap intervals over prompts of each set's mean and ``recovered``.

    Prompts are resampled with replacement (``n_boot`` times, ``numpy`` generator ``seed``),
    jointly for ``patched``, ``pre`` and ``post``. Over fewer than :data:`MIN_BOOTSTRAP_PROMPTS`
    prompts every bound is NaN and a ``RuntimeWarning`` says why; with ``n_boot=0`` (no intervals
    asked for) every bound is NaN.

    Source: Efron & Tibshirani 1993, "An Introduction to the Bootstrap" (percentile interval).

    Returns:
        ``{"value_lo", "value_hi", "recovered_lo", "recovered_hi", "delta_lo", "delta_hi"}``,
        arrays of shape ``[sets]`` (``delta`` = patched - pre, metric units).

    Raises:
        ValueError: mismatched shapes or ``n_boot`` not an integer >= 0.
    """
    patched, pre, post = (torch.as_tensor(t).double().cpu().numpy() for t in (patched, pre, post))  # type: ignore[assignment]
    if patched.ndim != 2 or pre.shape != (patched.shape[1],) or post.shape != pre.shape:
        raise ValueError(
            f"patched must be [sets, batch] and pre/post [batch]; got {patched.shape}, {pre.shape}, {post.shape}"
        )
    if isinstance(n_boot, bool) or not isinstance(n_boot, int) or n_boot < 0:
        raise ValueError(f"n_boot={n_boot!r}: must be an integer >= 0 (0: no intervals)")
    if n_boot == 0:  # asked for no intervals (StudyConfig(n_boot=0)): every bound NaN, no warning
        nan = np.full(patched.shape[0], np.nan)
        return {
            key: nan.copy() for key in ("value_lo", "value_hi", "recovered_lo", "recovered_hi", "delta_lo", "delta_hi")
        }
    if pre.shape[0] < MIN_BOOTSTRAP_PROMPTS:
        warnings.warn(
            f"bootstrap over {pre.shape[0]} prompt(s): a 95 % interval needs at least "
            f"{MIN_BOOTSTRAP_PROMPTS} (fewer give under 40 distinct resamples); the bounds are NaN. "
            f"Use {MIN_BOOTSTRAP_PROMPTS} or more prompts (--n-prompts)",
            RuntimeWarning,
            stacklevel=3,
        )
        nan = np.full(patched.shape[0], np.nan)
        return {
            key: nan.copy() for key in ("value_lo", "value_hi", "recovered_lo", "recovered_hi", "delta_lo", "delta_hi")
        }
    idx = np.random.default_rng(seed).integers(0, pre.shape[0], size=(n_boot, pre.shape[0]))
    m_patched = patched[:, idx].mean(-1)  # [sets, n_boot]
    m_pre, m_post = pre[idx].mean(-1), post[idx].mean(-1)
    span = m_post - m_pre
    with np.errstate(divide="ignore", invalid="ignore"):
        recovered = np.where(span != 0, (m_patched - m_pre) / span, np.nan)

    def q(x):
        return np.nanpercentile(x, [2.5, 97.5], axis=-1) if np.isfinite(x).any() else np.full((2, x.shape[0]), np.nan)

    (v_lo, v_hi), (r_lo, r_hi), (d_lo, d_hi) = q(m_patched), q(recovered), q(m_patched - m_pre)
    return {
        "value_lo": v_lo,
        "value_hi": v_hi,
        "recovered_lo": r_lo,
        "recovered_hi": r_hi,
        "delta_lo": d_lo,
        "delta_hi": d_hi,
    }


@dataclass(frozen=True, eq=False)
class TopkOptions:
    """What a call of :func:`topk_recovery` patches and measures besides the study settings.

    Attributes:
        kind: the per-head target kind patched (``pattern``, ``q``, ``k``, ``v``, ``z``, ``qk``,
            ``ov``; :mod:`interp.patching.kinds`).
        memory_budget_mb: activation memory per stacked call of the fast path (MiB, > 0).
        values: the metric of the pre and post checkpoints, ``(pre, post)``: per-prompt values
            ``Float[Tensor, " batch"]`` (metric units; then ``recovered_lo`` / ``recovered_hi``
            hold the 95 % bootstrap interval of ``recovered``) or their means (floats: no
            interval). None: measured on ``inputs`` (the pre model's forward pass and ``post``'s
            captured answer logits), with intervals.

    Raises:
        ValueError: ``kind`` not a per-head kind, or ``values`` not a pair (one line each).
    """

    kind: str = "pattern"
    memory_budget_mb: float = 1024
    values: tuple[Any, Any] | None = None

    def __post_init__(self) -> None:
        from interp.patching.kinds import kind_names

        if self.kind not in kind_names("head"):
            raise ValueError(f"kind={self.kind!r}; per-head kinds: {', '.join(kind_names('head'))}")
        if self.values is not None and (isinstance(self.values, (str, bytes)) or len(self.values) != 2):
            raise ValueError(f"values={self.values!r}: must be a pair (pre, post) of per-prompt tensors or means")


def _end_values(model: Any, inputs: TaskBatch, post: Any, metric: str, values: tuple[Any, Any] | None):
    """(mean pre, mean post, per-prompt pre or None, per-prompt post or None) in metric units."""
    from interp.patching import PostCheckpoint, metric_values

    if values is None:
        if isinstance(post, PostCheckpoint) and post.answer_logits is None:
            raise ValueError(
                "post holds patterns only (no answer logits), so its metric cannot be measured: "
                "give TopkOptions(values=(pre, post))"
            )
        post_values = (
            post.values(inputs, metric) if isinstance(post, PostCheckpoint) else metric_values(post, inputs, metric)
        )
        values = (metric_values(model, inputs, metric), post_values)
    pre, post_v = values
    per_prompt = isinstance(pre, Tensor) and isinstance(post_v, Tensor) and pre.ndim == 1 and post_v.ndim == 1
    mean_pre = float(pre.float().mean()) if isinstance(pre, Tensor) else float(pre)
    mean_post = float(post_v.float().mean()) if isinstance(post_v, Tensor) else float(post_v)
    return mean_pre, mean_post, (pre if per_prompt else None), (post_v if per_prompt else None)


def topk_recovery(
    model: Any,
    inputs: TaskBatch,
    post: Any,
    ranking: pd.DataFrame,
    config: StudyConfig = StudyConfig(),
    options: TopkOptions = TopkOptions(),
) -> pd.DataFrame:
    """Joint patch of the top K ranked heads, for each K.

    Args:
        model: pre-checkpoint ``TransformerBridge`` (eval mode).
        inputs: prompts (``TaskBatch``: tokens ``Int[Tensor, "batch pos"]``).
        post: the post checkpoint: its patterns ``Float[Tensor, "layer batch head query_pos key_pos"]``
            (``cache_patterns``; then give ``options.values``), a ``PostCheckpoint``, or the model.
        ranking: output of ``rank_heads`` (only rows with a rank are used).
        config: the study settings (:class:`interp.core.settings.StudyConfig`): ``metric`` (None:
            the task's own, :func:`interp.tasks.metric_for` on ``inputs``), ``method`` (``reference``:
            full forwards, else the fast path), ``ks`` (the K values, each in [1, number of ranked
            heads]; None: 1 ... all ranked heads) and ``n_boot`` (bootstrap resamples over prompts;
            0: no intervals).
        options: the kind patched, the memory budget and the pre / post values (:class:`TopkOptions`).

    Returns:
        DataFrame ``k``, ``value`` (mean metric with the top k heads patched, metric units),
        ``recovered = (value - value_pre) / (value_post - value_pre)`` (NaN, with a
        RuntimeWarning, when ``value_post == value_pre``) and, with per-prompt pre / post values
        (measured, or given as tensors), ``recovered_lo`` and ``recovered_hi`` (95 % percentile
        bootstrap over prompts, :func:`bootstrap_interval`; NaN below :data:`MIN_BOOTSTRAP_PROMPTS`
        prompts or with ``n_boot=0``).

    Raises:
        TypeError: ``config`` is not a ``StudyConfig`` or ``options`` not a ``TopkOptions``.
        ValueError: bad ranking columns, a K out of range, patterns as ``post`` without
            ``options.values``, or the engine's input errors.

    Source: joint top-K pattern patching across checkpoints, Baherwani et al. 2026; the
    calibration ``recovered`` (pre = 0, post = 1) as in ARENA's activation-patching exercises.
    """
    from interp.patching import post_from_patterns

    check_argument(isinstance(config, StudyConfig), config, "topk_recovery: config", "a StudyConfig")
    check_argument(isinstance(options, TopkOptions), options, "topk_recovery: options", "a TopkOptions")
    heads = _ranked_heads(ranking)
    if not heads:
        raise ValueError("ranking has no ranked heads (every delta is NaN)")
    ks = list(range(1, len(heads) + 1)) if config.ks is None else [int(k) for k in config.ks]
    bad = [k for k in ks if not 1 <= k <= len(heads)]
    if bad:
        raise ValueError(f"ks must lie in [1, {len(heads)}] (the number of ranked heads), got {bad}")
    metric = metric_for(inputs, config.metric)
    post = post_from_patterns(model, inputs, post) if isinstance(post, Tensor) else post
    value_pre, value_post, values_pre, values_post = _end_values(model, inputs, post, metric, options.values)
    values = patch_values(
        model,
        post,
        inputs,
        [Target(options.kind, tuple(heads[:k])) for k in ks],
        metric=metric,
        method="reference" if config.method == "reference" else "fast",
        memory_budget_mb=options.memory_budget_mb,
    )
    frame = pd.DataFrame({"k": ks, "value": values.mean(dim=1).double().numpy()})
    span = float(value_post) - float(value_pre)
    if span == 0.0 or not math.isfinite(span):
        warnings.warn(
            f"value_post == value_pre ({float(value_pre):.6g}): recovered = (value_K - value_pre) / "
            "(value_post - value_pre) is undefined; returning NaN",
            RuntimeWarning,
            stacklevel=2,
        )
        frame["recovered"] = float("nan")
    else:
        frame["recovered"] = (frame["value"] - float(value_pre)) / span
    if values_pre is not None and values_post is not None:
        ci = bootstrap_interval(values, values_pre, values_post, n_boot=config.n_boot)
        frame["recovered_lo"], frame["recovered_hi"] = ci["recovered_lo"], ci["recovered_hi"]
    return frame


def prescreen_rank_correlation(
    delta_p_exact: Float[Tensor, "layer head"], delta_p_attr: Float[Tensor, "layer head"]
) -> float:
    """Spearman rank correlation between exact and estimated per-head effects over the heads both have.

    Computed as the Pearson correlation of pandas average ranks (no SciPy).  Heads that are NaN
    in either tensor are dropped.

    Returns:
        a float in [-1, 1]; NaN if fewer than two heads remain or either side is constant.

    Raises:
        ValueError: if the two tensors differ in shape.
    """
    if tuple(delta_p_exact.shape) != tuple(delta_p_attr.shape):
        raise ValueError(
            f"delta_p_exact {tuple(delta_p_exact.shape)} and delta_p_attr "
            f"{tuple(delta_p_attr.shape)} must have the same [layer, head] shape"
        )
    frame = pd.DataFrame(
        {
            "exact": delta_p_exact.detach().double().cpu().flatten().numpy(),
            "attr": delta_p_attr.detach().double().cpu().flatten().numpy(),
        }
    ).dropna()
    if len(frame) < 2:
        return float("nan")
    return float(frame["exact"].rank().corr(frame["attr"].rank()))


def _top_found(exact: Tensor, estimate: Tensor, k: int = 2) -> bool | None:
    finite = torch.isfinite(exact.flatten())
    if int(finite.sum()) < k:
        return None
    e, a = exact.flatten()[finite], estimate.flatten()[finite]
    return set(torch.topk(e, k).indices.tolist()) <= set(torch.topk(a, k).indices.tolist())
