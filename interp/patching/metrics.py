"""Patching metrics: the registry of :mod:`interp.core.metrics`, seen from the patching package.

A patching metric is ``metric(logits [batch, d_vocab] at the answer positions, batch) ->
Float[Tensor, "batch"]``; the built-in ones (``"p"``, ``"logprob"``, ``"logit-diff"``), their
units and sources, and how to add one are in :mod:`interp.core.metrics` (one definition, one place).
This module keeps the names the patching package has always exported.
"""

from __future__ import annotations

from typing import Protocol

from interp.core.metrics import (  # noqa: F401  (re-exported)
    METRICS,
    MetricLike,
    MetricSpec,
    answer_logprob,
    answer_probability,
    logit_diff,
    metric_name,
    metric_spec,
    resolve_metric,
)

__all__ = [
    "METRICS",
    "Metric",
    "MetricSpec",
    "answer_logprob",
    "answer_probability",
    "logit_diff",
    "metric_name",
    "metric_spec",
    "resolve_metric",
]


class Metric(Protocol):
    """``(logits [batch, d_vocab] at the answer positions, batch) -> Float[Tensor, "batch"]``."""

    def __call__(self, logits, batch): ...
