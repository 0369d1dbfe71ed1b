"""One metric registry: every per-prompt measure of a checkpoint's answer, defined once.

A metric maps the logits at each prompt's answer position to one value per prompt,
``metric(logits, batch) -> values``:

* ``logits``: ``Float[Tensor, "batch d_vocab"]``, row ``b`` is position ``batch.answer_pos[b]``
  of prompt ``b`` (:func:`answer_logits` picks those rows; it is the one place that does);
* ``batch``: the :class:`interp.core.task_batch.TaskBatch` (its ``answers`` and, for ``logit-diff``, its
  ``distractors``);
* ``values``: ``Float[Tensor, "batch"]``, float32.

Each entry of :data:`METRICS` is a :class:`MetricSpec`: the name, the function, the unit, whether
higher is better, the source of the definition, and the labels tables and figures show. Tasks
(capability scores), the emergence search (greedy accuracy, p(answer)), the zoom's dense
evaluator and the patching engine all read these entries; the CLI's ``--metric`` choices and help
are built from them. Adding a metric is one :func:`register_metric` call (lm-evaluation-harness's
registries are the model):

    register_metric(MetricSpec("margin", my_fn, unit="logits", higher_is_better=True,
                               source="...", description="...", label="margin"))

Built in:

``"p"`` (default patching metric)
    probability of the answer, softmax in float32 (Baherwani et al. 2026: "probability of the
    answer"); probability units.
``"logprob"``
    log probability of the answer; nats.
``"logit-diff"``
    the answer's logit minus the largest logit among the task's distractor tokens (Wang et al.
    2022, "Interpretability in the Wild", logit difference; with several distractors the largest
    is the strongest competitor); logits.  For the repetition task the distractors are the nine
    other digits.
``"accuracy"`` (capability only, not a patching metric)
    1 where the greedy (argmax) prediction is the answer, else 0 (Baherwani et al. 2026: "solved");
    fraction.  The point of emergence is a threshold on its mean.

Restricting a metric to the answer position is what keeps the fast patching path's answer-only
unembedding exact for every metric.  This module imports torch only inside the functions, so the
command line can build its help from the registry without loading torch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: importing this module must not import torch (CLI start-up)
    from jaxtyping import Float
    from torch import Tensor

__all__ = [
    "METRICS",
    "MetricLike",
    "MetricSpec",
    "answer_logits",
    "answer_logprob",
    "answer_probability",
    "get_metric",
    "greedy_correct",
    "logit_diff",
    "metric_help",
    "metric_name",
    "metric_spec",
    "patching_metric_names",
    "register_metric",
    "resolve_metric",
]


@dataclass(frozen=True)
class MetricSpec:
    """One metric's facts, where it is defined.

    Attributes:
        name: the key (``--metric NAME``, the ``metric`` column of every table).
        fn: ``(Float[Tensor, "batch d_vocab"] answer logits, batch) -> Float[Tensor, "batch"]``.
        unit: unit of a value (``probability``, ``nats``, ``logits``, ``fraction``): the ``unit``
            column of tables and the unit in axis titles.
        higher_is_better: whether a larger value means a more capable checkpoint.
        source: where the definition comes from (paper or reference).
        description: one line for ``--help`` and docs.
        label: short name for axes and captions (``p(answer)``, ``log p(answer)``, ...).
        patching: offered as a patching metric (``--metric``); ``accuracy`` is not (a 0/1 value
            has no gradient for the attribution pre-screen).
        needs_distractors: the batch must name distractor tokens (``TaskBatch.distractors``).
        delta: the label of a change of this metric (default ``"Δ " + label``; ``"Δp"`` for ``p``,
            the paper's term).

    Calling a spec calls its function, so ``METRICS["p"](logits, batch)`` works.
    """

    name: str
    fn: Callable
    unit: str
    higher_is_better: bool
    source: str
    description: str
    label: str
    patching: bool = True
    needs_distractors: bool = False
    delta: str = ""

    def __call__(self, logits: Float[Tensor, "batch d_vocab"], batch) -> Float[Tensor, " batch"]:
        return self.fn(logits, batch)

    @property
    def axis_title(self) -> str:
        """``label (unit)``, e.g. ``p(answer) (probability)``."""
        return f"{self.label} ({self.unit})"

    @property
    def delta_label(self) -> str:
        """The label of a change of this metric, e.g. ``Δp``, ``Δ logit difference``."""
        return self.delta or f"Δ {self.label}"


# --------------------------------------------------------------------------- the answer row


def answer_logits(logits: Float[Tensor, "batch pos d_vocab"], batch) -> Float[Tensor, "batch d_vocab"]:
    """The logits at each prompt's answer position (the one place the answer row is picked).

    Raises:
        ValueError: if ``logits`` is not ``[batch, pos, d_vocab]`` for this batch.
    """
    import torch

    n, pos = batch.tokens.shape
    if logits.ndim != 3 or tuple(logits.shape[:2]) != (n, pos):
        raise ValueError(f"logits must have shape [{n}, {pos}, d_vocab], got {tuple(logits.shape)}")
    return logits[torch.arange(n, device=logits.device), batch.answer_pos.to(logits.device)]


# --------------------------------------------------------------------------- the functions


def _answers(batch, device):
    return batch.answers.to(device)


def answer_logprob(logits: Float[Tensor, "batch d_vocab"], batch) -> Float[Tensor, " batch"]:
    """Log probability (log-softmax in float32) of each prompt's answer token; nats."""
    import torch

    logp = torch.log_softmax(logits.float(), dim=-1)
    return logp.gather(-1, _answers(batch, logits.device)[:, None]).squeeze(-1)


def answer_probability(logits: Float[Tensor, "batch d_vocab"], batch) -> Float[Tensor, " batch"]:
    """Softmax probability (float32) of each prompt's answer token; probability units.

    This is the one place p(answer) is computed (tasks, the emergence search, the zoom and the
    patching engine call it).
    """
    return answer_logprob(logits, batch).exp()


def logit_diff(logits: Float[Tensor, "batch d_vocab"], batch) -> Float[Tensor, " batch"]:
    """Answer logit minus the largest distractor logit (float32); logits.

    Raises:
        ValueError: if the batch names no distractor tokens (``batch.distractors`` is None).
    """
    distractors = getattr(batch, "distractors", None)
    if distractors is None:
        task = getattr(batch, "task", "") or ""
        which = (
            f"task {task!r} names no distractor tokens"
            if task
            else "this batch names no distractor tokens (its task is unnamed)"
        )
        raise ValueError(
            f"metric 'logit-diff' needs a batch with distractor tokens (TaskBatch.distractors); "
            f"{which}: use 'p' or 'logprob', or build the batch with distractors="
        )
    logits = logits.float()
    answer = logits.gather(-1, _answers(batch, logits.device)[:, None]).squeeze(-1)
    rival = logits.gather(-1, distractors.to(logits.device)).max(dim=-1).values
    return answer - rival


def greedy_correct(logits: Float[Tensor, "batch d_vocab"], batch) -> Float[Tensor, " batch"]:
    """1.0 where the argmax of the answer logits is the answer, else 0.0 (float32); fraction."""
    return (logits.argmax(-1) == _answers(batch, logits.device)).float()


# --------------------------------------------------------------------------- the registry

#: name -> :class:`MetricSpec`; extend with :func:`register_metric`.
METRICS: dict[str, MetricSpec] = {}


def register_metric(spec: MetricSpec, replace: bool = False) -> MetricSpec:
    """Add ``spec`` to :data:`METRICS` (and so to ``--metric``'s choices and help).

    Raises:
        ValueError: a name already registered (unless ``replace``), or a spec whose ``fn`` is not callable.
    """
    if not isinstance(spec, MetricSpec) or not callable(spec.fn):
        raise ValueError(f"register_metric needs a MetricSpec with a callable fn, got {spec!r}")
    if spec.name in METRICS and not replace:
        raise ValueError(f"metric {spec.name!r} is already registered; pass replace=True to redefine it")
    METRICS[spec.name] = spec
    return spec


register_metric(
    MetricSpec(
        "p",
        answer_probability,
        unit="probability",
        higher_is_better=True,
        source="Baherwani et al. 2026: probability of the answer",
        label="p(answer)",
        description="probability of the answer token (softmax, float32)",
        delta="Δp",
    )
)
register_metric(
    MetricSpec(
        "logprob",
        answer_logprob,
        unit="nats",
        higher_is_better=True,
        source="log of Baherwani et al. 2026's probability of the answer",
        label="log p(answer)",
        description="log probability of the answer token",
    )
)
register_metric(
    MetricSpec(
        "logit-diff",
        logit_diff,
        unit="logits",
        higher_is_better=True,
        source="Wang et al. 2022, Interpretability in the Wild: logit difference",
        label="logit difference",
        description="answer logit minus the largest distractor logit",
        needs_distractors=True,
    )
)
register_metric(
    MetricSpec(
        "accuracy",
        greedy_correct,
        unit="fraction",
        higher_is_better=True,
        source="Baherwani et al. 2026: solved = greedy prediction equals the answer",
        label="greedy accuracy",
        description="1 if the greedy prediction is the answer, else 0",
        patching=False,
    )
)

MetricLike = str | Callable


def patching_metric_names() -> list[str]:
    """Names of the registered metrics a patch can be scored with (``--metric``'s choices)."""
    return [name for name, spec in METRICS.items() if spec.patching]


def _described(spec: MetricSpec) -> str:
    """A metric's description, its unit added unless the description already says it."""
    return spec.description if spec.unit in spec.description else f"{spec.description}; {spec.unit}"


def metric_help() -> str:
    """``--metric``'s help text, one clause per patching metric of the registry."""
    return "Patching metric: " + " | ".join(f"{n} ({_described(METRICS[n])})" for n in patching_metric_names()) + "."


def get_metric(name: str) -> MetricSpec:
    """The registered spec of ``name``.

    Raises:
        ValueError: an unknown name (the message lists the registered ones).
    """
    if isinstance(name, str) and name in METRICS:
        return METRICS[name]
    raise ValueError(f"metric={name!r}; valid: {', '.join(METRICS)}")


def resolve_metric(metric: MetricLike) -> Callable:
    """A patching metric's function from a registered name, or a callable (returned as is).

    Raises:
        ValueError: an unknown name, a metric that is not a patching metric, or a non-callable.
    """
    if isinstance(metric, MetricSpec):
        return metric.fn
    if callable(metric):
        return metric
    if isinstance(metric, str) and metric in METRICS and METRICS[metric].patching:
        return METRICS[metric].fn
    raise ValueError(
        f"metric={metric!r}; valid: {', '.join(patching_metric_names())} or a callable "
        "(logits [batch, d_vocab], batch) -> [batch]"
    )


def metric_name(metric: MetricLike) -> str:
    """The name a table shows for ``metric`` (a registered key, else the callable's ``__name__``).

    Raises:
        ValueError: an unknown metric name.
    """
    if isinstance(metric, MetricSpec):
        return metric.name
    if isinstance(metric, str):
        resolve_metric(metric)
        return metric
    for name, spec in METRICS.items():
        if spec.fn is metric:
            return name
    return getattr(metric, "__name__", type(metric).__name__)


def metric_spec(metric: MetricLike) -> MetricSpec:
    """The spec behind a name or callable; an unregistered callable gets a spec with unit
    ``"metric units"`` and its ``__name__`` as label (so tables and figures never claim a
    probability for it).  A name not registered (a saved table's custom metric) gets the same."""
    if isinstance(metric, MetricSpec):
        return metric
    name = metric if isinstance(metric, str) else metric_name(metric)
    if name in METRICS:
        return METRICS[name]
    return MetricSpec(
        name,
        metric if callable(metric) else (lambda logits, batch: logits),
        unit="metric units",
        higher_is_better=True,
        source="user-defined",
        description=f"user metric {name}",
        label=name,
    )
