"""Capability tasks: prompts with one answer token -> :class:`TaskBatch`, and the per-checkpoint
score on them. One room, one module per idea, each task registered where it is defined:

    base.py        CapabilityTask (build -> TaskBatch through finish), the tokenizer helpers,
                   CapabilityScore and evaluate (greedy accuracy, p(answer))
    registry.py    TaskSpec, REGISTRY, register_task, make_task, metric_for
    repetition.py  RepetitionTask (digits), TokenRepetitionTask (tokens): Baherwani et al. 2026
    pattern.py     PatternCompletionTask
    ioi.py         IOITask (Wang et al. 2022)
    files.py       TaskFile (your JSONL / CSV prompts), parse_tasks (``--task a,b,FILE``), task_table

Importing this package registers every built-in task; every public name of the modules above
is importable from here (``from interp.tasks import RepetitionTask, make_task``).
"""

from __future__ import annotations

from interp.core.task_batch import TaskBatch, TaskError
from interp.tasks.base import (
    CapabilityScore,
    CapabilityTask,
    PromptScores,
    alnum_token_pool,
    answer_logits,
    evaluate,
    evaluate_prompts,
    pad_token_id,
    resolve_item_prefix,
    score_logits,
    single_token_id,
    tokenizer_adds_bos,
)
from interp.tasks.registry import (
    BOS_CONVENTION,
    REGISTRY,
    TASKS,
    TaskSpec,
    make_task,
    metric_for,
    register_task,
    spec_of,
)

# The order of registration is the order `emergence list-tasks` and the errors name the tasks in.
# isort: off
from interp.tasks.repetition import DIGITS, RepetitionTask, TokenRepetitionTask
from interp.tasks.pattern import PatternCompletionTask
from interp.tasks.ioi import IOI_NAMES, IOI_OBJECTS, IOI_PLACES, IOI_TEMPLATES, IOITask
from interp.tasks.files import (
    MAX_ROW_ERRORS,
    TASK_FILE_SPEC,
    TaskFile,
    TaskFileError,
    TaskRow,
    is_task_file,
    parse_tasks,
    read_task_file,
    task_table,
)
# isort: on

__all__ = [
    "BOS_CONVENTION",
    "DIGITS",
    "IOI_NAMES",
    "IOI_OBJECTS",
    "IOI_PLACES",
    "IOI_TEMPLATES",
    "MAX_ROW_ERRORS",
    "REGISTRY",
    "TASKS",
    "TASK_FILE_SPEC",
    "CapabilityScore",
    "CapabilityTask",
    "IOITask",
    "PatternCompletionTask",
    "PromptScores",
    "RepetitionTask",
    "TaskBatch",
    "TaskError",
    "TaskFile",
    "TaskFileError",
    "TaskRow",
    "TaskSpec",
    "TokenRepetitionTask",
    "alnum_token_pool",
    "answer_logits",
    "evaluate",
    "evaluate_prompts",
    "is_task_file",
    "make_task",
    "metric_for",
    "pad_token_id",
    "parse_tasks",
    "read_task_file",
    "register_task",
    "resolve_item_prefix",
    "score_logits",
    "single_token_id",
    "spec_of",
    "task_table",
    "tokenizer_adds_bos",
]
