"""Patching metrics: answer-position logits and the batch -> one value per prompt.

TransformerLens's ``patching_metric`` maps a forward's logits to a number; here a metric is
restricted to the answer position, ``metric(logits, batch) -> values``:

* ``logits``: ``Float[Tensor, "batch d_vocab"]`` the logits that predict each prompt's answer
  (row ``b`` is position ``batch.answer_pos[b]`` of prompt ``b``);
* ``batch``: the :class:`interp.tasks.TaskBatch` (its ``answers`` and, for ``logit-diff``,
  its ``distractors``);
* ``values``: ``Float[Tensor, "batch"]``, float32.

Restricting the metric to the answer position is what keeps the fast path's answer-only
unembedding exact for every metric.  Three are built in (``METRICS``):

``"p"`` (default)
    probability of the answer, softmax in float32 (Baherwani et al. 2026: "probability of the
    answer"), probability units.
``"logprob"``
    log probability of the answer, nats.
``"logit-diff"``
    the answer's logit minus the largest logit among the task's distractor tokens (Wang et al.
    2022, "Interpretability in the Wild", logit difference; with several distractors the
    largest is the strongest competitor), logit units.  For the repetition task the
    distractors are the nine other digits.
"""

from __future__ import annotations

from typing import Callable, Protocol, Union

import torch
from jaxtyping import Float
from torch import Tensor

__all__ = ["Metric", "METRICS", "METRIC_UNITS", "answer_probability", "answer_logprob", "logit_diff", "resolve_metric",
           "metric_name"]


class Metric(Protocol):
    """``(logits [batch, d_vocab] at the answer positions, batch) -> Float[Tensor, "batch"]``."""

    def __call__(self, logits: Float[Tensor, "batch d_vocab"], batch) -> Float[Tensor, "batch"]: ...


def _answers(batch, device: torch.device) -> Tensor:
    return batch.answers.to(device)


def answer_probability(logits: Float[Tensor, "batch d_vocab"], batch) -> Float[Tensor, "batch"]:
    """Softmax probability (float32) of each prompt's answer token; probability units."""
    logp = torch.log_softmax(logits.float(), dim=-1)
    return logp.gather(-1, _answers(batch, logits.device)[:, None]).squeeze(-1).exp()


def answer_logprob(logits: Float[Tensor, "batch d_vocab"], batch) -> Float[Tensor, "batch"]:
    """Log probability (float32) of each prompt's answer token; nats."""
    logp = torch.log_softmax(logits.float(), dim=-1)
    return logp.gather(-1, _answers(batch, logits.device)[:, None]).squeeze(-1)


def logit_diff(logits: Float[Tensor, "batch d_vocab"], batch) -> Float[Tensor, "batch"]:
    """Answer logit minus the largest distractor logit (float32); logit units.

    Raises:
        ValueError: if the batch names no distractor tokens (``batch.distractors`` is None).
    """
    distractors = getattr(batch, "distractors", None)
    if distractors is None:
        raise ValueError("metric 'logit-diff' needs a batch with distractor tokens (TaskBatch.distractors); "
                         f"task {getattr(batch, 'task', '') or 'of this batch'!r} names none: use 'p' or 'logprob'")
    logits = logits.float()
    answer = logits.gather(-1, _answers(batch, logits.device)[:, None]).squeeze(-1)
    rival = logits.gather(-1, distractors.to(logits.device)).max(dim=-1).values
    return answer - rival


METRICS: dict[str, Callable] = {"p": answer_probability, "logprob": answer_logprob, "logit-diff": logit_diff}
#: Unit of each built-in metric (for tables and axis titles).
METRIC_UNITS = {"p": "probability", "logprob": "nats", "logit-diff": "logits"}

MetricLike = Union[str, Callable]


def resolve_metric(metric: MetricLike) -> Callable:
    """A metric callable from a name in ``METRICS`` or a callable (returned as is).

    Raises:
        ValueError: an unknown name or a non-callable.
    """
    if callable(metric):
        return metric
    if isinstance(metric, str) and metric in METRICS:
        return METRICS[metric]
    raise ValueError(f"metric={metric!r}; valid: {', '.join(METRICS)} or a callable (logits [batch, d_vocab], batch) -> [batch]")


def metric_name(metric: MetricLike) -> str:
    """The name a table shows for ``metric`` (a built-in's key, else the callable's ``__name__``)."""
    if isinstance(metric, str):
        resolve_metric(metric)
        return metric
    for name, fn in METRICS.items():
        if fn is metric:
            return name
    return getattr(metric, "__name__", type(metric).__name__)
