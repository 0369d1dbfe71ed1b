"""The registry of capability tasks (in the manner of lm-evaluation-harness's task registry): each
task's facts (name, class, parameters, default metric, source, BOS convention) registered beside its class.

``make_task(name, **params)`` builds a task by name (a parameter the task does not take is
refused); :func:`interp.tasks.files.parse_tasks` builds several at once (names and task files
mixed) and :func:`interp.tasks.files.task_table` is what ``emergence list-tasks`` prints. A task's
name is declared once, as the default of its class's ``name`` field; its spec is registered under
that name by a :func:`register_task` call below its class (in this package or in your code); the
CLI and the main job pick it up.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from interp.tasks.base import CapabilityTask

#: ``prepend_bos`` of every task unless given: the source's training convention as its Hugging
#: Face tokenizer applies it (``interp.tasks.tokenizer_adds_bos``).
BOS_CONVENTION = "source's tokenizer (Pythia, OLMo-2, embedded: no BOS; Llama-style: BOS)"


@dataclass(frozen=True)
class TaskSpec:
    """One registered task.

    Attributes:
        cls: the :class:`interp.tasks.CapabilityTask` subclass; the default of its ``name``
            field is the name ``--task`` takes (:attr:`name`).
        default_metric: metric of patching and the ranking when none is given (``p``,
            ``logprob``, ``logit-diff``; :mod:`interp.core.metrics`).
        source: where the definition comes from.
        description: one line.
        byte_tokenizer: whether the embedded byte tokenizer can run it.
        shown_as: the name shown in place of the class's (the task-file entry alone, which has none).
    """

    cls: type
    default_metric: str
    source: str
    description: str
    byte_tokenizer: bool = True
    shown_as: str = ""

    @property
    def name(self) -> str:
        """The task's name: the default of its class's ``name`` field (or :attr:`shown_as`)."""
        task_class: type[CapabilityTask] = self.cls
        return self.shown_as or task_class.name

    def parameters(self) -> dict:
        """Constructor parameters and their defaults (``name`` and internals left out)."""
        out = {}
        for f in dataclasses.fields(self.cls):
            if f.name in ("name", "rows", "path") or not f.init:
                continue
            default = (
                f.default
                if f.default is not dataclasses.MISSING
                else (f.default_factory() if f.default_factory is not dataclasses.MISSING else None)
            )
            out[f.name] = default
        return out


#: Every registered task by name, filled where each task is defined (:mod:`interp.tasks.repetition`,
#: :mod:`interp.tasks.pattern`, :mod:`interp.tasks.ioi`; importing :mod:`interp.tasks` loads them all).
REGISTRY: dict[str, TaskSpec] = {}

#: Every registered task by name (the name ``import emergence_lens as el; el.TASKS`` shows).
TASKS = REGISTRY


def spec_of(name: str) -> TaskSpec:
    """The spec of a registered task.

    Raises:
        ValueError: unknown name (one line listing the valid ones).
    """
    if name not in REGISTRY:
        raise ValueError(f"unknown task {name!r}; valid tasks: {', '.join(REGISTRY)} (or a .jsonl/.csv task file)")
    return REGISTRY[name]


def register_task(spec: TaskSpec, replace: bool = False) -> TaskSpec:
    """Add ``spec`` to :data:`REGISTRY` under its class's name (``--task``, ``emergence list-tasks``,
    :func:`make_task` and the main job offer it).

    Raises:
        ValueError: a name already registered (unless ``replace``), or a class without a ``name``.
    """
    name = spec.name
    if not isinstance(name, str) or not name:
        raise ValueError(f"task class {spec.cls.__name__} has no name: give its `name` field a default")
    if name in REGISTRY and not replace:
        raise ValueError(f"task {name!r} is already registered; pass replace=True to redefine it")
    REGISTRY[name] = spec
    return spec


def make_task(name: str, **params) -> CapabilityTask:
    """Build a registered task from its parameters (:meth:`TaskSpec.parameters`).

    Raises:
        ValueError: unknown name (one line listing the valid ones), a parameter the task does not
            take (one line naming it and the task's parameters), or a bad parameter value.
    """
    spec = spec_of(name)
    valid = spec.parameters()
    unknown = [k for k in params if k not in valid]
    if unknown:
        raise ValueError(
            f"task {name!r} takes no parameter {unknown[0]!r}; valid parameters: {', '.join(valid) or 'none'}"
        )
    return spec.cls(**params)


def metric_for(task: Any, metric: str | None = None) -> str:
    """The patching metric of a study of ``task``: ``metric`` when given, else the task's
    registered default (``logit-diff`` for IOI, ``p`` for repetition; ``p`` for task files and
    unregistered classes). The one place that decides it: ``el.run``, ``el.rank_heads_between``,
    ``emergence rank-heads`` and the scrubber all call it (issue 54).

    Args:
        task: a task object (:class:`interp.tasks.CapabilityTask`), its tokenised prompts (a
            :class:`interp.core.task_batch.TaskBatch`, whose ``task`` is the task's name) or a
            registered task name.
        metric: the metric asked for (a name of :data:`interp.core.metrics.METRICS`), or None.

    Returns:
        A metric name.
    """
    if metric is not None:
        return metric
    if isinstance(task, str):
        name, cls = task, None
    elif hasattr(task, "tokens") and hasattr(task, "answers"):  # a TaskBatch: the task by name
        name, cls = getattr(task, "task", ""), None
    else:
        name, cls = getattr(task, "name", ""), type(task)
    spec = REGISTRY.get(name)
    return spec.default_metric if spec is not None and (cls is None or issubclass(cls, spec.cls)) else "p"
