"""Every fact of every capability task in one place (in the manner of lm-evaluation-harness's
task registry): name, class, parameters, default metric, source, BOS convention.

``make_task(name, **params)`` builds a task by name (a parameter the task does not take is
refused), ``parse_tasks("repetition,my.jsonl")`` several at once (names and task files mixed),
``task_table()`` is what ``emergence list-tasks`` prints. A task's name is declared once, as the
default of its class's ``name`` field; its spec is registered under that name. Adding a task:
write its class (:mod:`interp.task_library`), add its :class:`TaskSpec` to :data:`REGISTRY` (in
the package) or :func:`register_task` it (in your code); the CLI and the main job pick it up.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from interp.task_library import IOITask, PatternCompletionTask, TaskFile
from interp.tasks import CapabilityTask, RepetitionTask, TokenRepetitionTask

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
            ``logprob``, ``logit-diff``; :mod:`interp.patching.metrics`).
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


REGISTRY: dict[str, TaskSpec] = {
    spec.name: spec
    for spec in (
        TaskSpec(
            RepetitionTask,
            "p",
            "Baherwani et al. 2026 (Pythia: string repetition; digits, partial repeat); counts and lengths ours",
            "random digits, then a partial repeat; predict the next digit",
        ),
        TaskSpec(
            TokenRepetitionTask,
            "p",
            "Baherwani et al. 2026 (Pythia: in-context repetition); induction-head probe (Olsson et al. 2022)",
            "random tokens, then a partial repeat; predict the next token",
        ),
        TaskSpec(
            PatternCompletionTask,
            "p",
            "Baherwani et al. 2026 name it without a definition: the definition is ours",
            "a template (ABAB, AABB, ABCABC, ABBA) over random tokens; predict the next element",
        ),
        TaskSpec(
            IOITask,
            "logit-diff",
            "Wang et al. 2022, Interpretability in the Wild (ABBA/BABA templates of ioi_dataset.py)",
            "indirect-object identification; logit-diff = logit(IO) - logit(S)",
            byte_tokenizer=False,
        ),
    )
}

#: Every registered task by name (the name ``import emergence_lens as el; el.TASKS`` shows).
TASKS = REGISTRY

#: What ``--task FILE`` / ``TaskFile(path)`` is (not a registered name: a task per file).
TASK_FILE_SPEC = TaskSpec(
    TaskFile,
    "p",
    "your own prompts (fields prompt, answer, optional distractors, id)",
    "one token answer per prompt, checked under the source's tokenizer",
    shown_as="FILE.jsonl|FILE.csv",
)


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


def is_task_file(item: str) -> bool:
    """Whether a ``--task`` item names a file (an extension ``.jsonl``/``.json``/``.csv``, a path, or
    an existing file); a registered name is never a file (:func:`parse_tasks` checks it first)."""
    return Path(item).suffix.lower() in (".jsonl", ".json", ".csv") or "/" in item or Path(item).is_file()


def parse_tasks(text: str | Sequence[str], task_files: Sequence[str | Path] = (), **shared) -> list[CapabilityTask]:
    """Tasks from ``"repetition,pattern-completion,my_prompts.jsonl"`` (names and files mixed)
    plus ``task_files``; each task file is read and checked for form here.

    ``shared`` are options given once for every named task (the CLI's ``--n-prompts`` and
    ``--length``, ``seed``): each registered task gets those among its parameters (``ioi`` has no
    ``length``); for one task's own parameters use :func:`make_task`.

    Raises:
        ValueError: an unknown name, an empty list, a task given twice; TaskFileError for a bad file.
    """
    items = [t.strip() for t in (text.split(",") if isinstance(text, str) else text) if t and t.strip()]
    items += [str(f) for f in task_files]
    if not items:
        raise ValueError(f"no task given; valid tasks: {', '.join(REGISTRY)} (or a .jsonl/.csv task file)")
    tasks = [
        make_task(item, **_fitting(item, shared)) if item in REGISTRY or not is_task_file(item) else TaskFile(item)
        for item in items
    ]
    names = [t.name for t in tasks]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"task {twice[0]!r} is given twice; each task once")
    return tasks


def _fitting(name: str, shared: dict) -> dict:
    """The options of ``shared`` that task ``name`` takes (all of them for an unknown name, which
    :func:`make_task` refuses)."""
    if name not in REGISTRY:
        return {}
    valid = REGISTRY[name].parameters()
    return {k: v for k, v in shared.items() if k in valid}


def default_metric(task: CapabilityTask) -> str:
    """The registered default metric of ``task`` (``p`` for task files and unregistered classes)."""
    spec = REGISTRY.get(getattr(task, "name", ""))
    return spec.default_metric if spec is not None and isinstance(task, spec.cls) else "p"


def task_table():
    """``pandas.DataFrame``: one row per task (name, parameters, default metric, byte tokenizer, source)."""
    import pandas as pd

    rows = []
    for spec in [*REGISTRY.values(), TASK_FILE_SPEC]:
        params = ", ".join(f"{k}={v!r}" for k, v in spec.parameters().items())
        rows.append(
            {
                "task": spec.name,
                "description": spec.description,
                "parameters": params,
                "default_metric": spec.default_metric,
                "prepend_bos": BOS_CONVENTION,
                "byte_tokenizer": spec.byte_tokenizer,
                "source": spec.source,
            }
        )
    return pd.DataFrame(rows)
