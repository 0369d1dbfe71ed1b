"""Your own prompts (task files, JSONL / CSV) and tasks named on the command line: ``--task
repetition,my.jsonl`` (:func:`parse_tasks`), the table ``emergence list-tasks`` prints
(:func:`task_table`).

A task file is read and checked for form when the task is made (before any checkpoint loads);
:meth:`TaskFile.build` checks every answer is one token under the source's tokenizer.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from interp.core.task_batch import context_problems
from interp.tasks.base import CapabilityTask, TaskBatch, TaskError
from interp.tasks.registry import BOS_CONVENTION, REGISTRY, TaskSpec, make_task

#: At most this many bad rows of a task file are named, then a count of the rest.
MAX_ROW_ERRORS = 10


class TaskFileError(TaskError):
    """A task file cannot be used: missing, not ``.jsonl``/``.csv``, not UTF-8, not JSON, no rows,
    a missing field, duplicate ids, distractors on some rows only, answers that are not one
    token under the source's tokenizer, or prompts longer than the model's context (the row,
    its length in tokens and the context named). ``lines``: one line per problem (the first is
    ``str(err)``; the command line prints at most 10, then a count).

    Fix: correct the rows named (each row needs ``prompt`` and ``answer``; ``distractors`` on
    every row or none; one-token answers under this tokenizer, e.g. with a leading space for
    word-piece vocabularies; prompts no longer than the model's context) and save the file as UTF-8.
    """

    def __init__(self, lines: Sequence[str]):
        self.lines = list(lines)
        super().__init__("\n".join(self.lines))


def _split_ids(tokenizer, text: str) -> list[int]:
    return tokenizer.encode(text, add_special_tokens=False)


@dataclass
class TaskRow:
    """One prompt of a task file: ``prompt`` text, ``answer`` text, optional ``distractors``, ``id``."""

    id: str
    prompt: str
    answer: str
    distractors: list[str] = field(default_factory=list)


@dataclass
class TaskFile(CapabilityTask):
    """Your own prompts from a JSONL or CSV file.

    Fields: ``prompt``, ``answer`` (the text whose single token follows the prompt, e.g.
    ``" Paris"``), optional ``distractors`` (JSONL: a list of strings; CSV: strings separated by
    ``|``) and optional ``id`` (default: the row number). The file is read and checked when the
    task is made (before any checkpoint loads): not UTF-8, empty, a missing field, duplicate ids,
    rows with distractors mixed with rows without: one line each. :meth:`build` checks that every
    answer and distractor is one token under the source's tokenizer: one line per bad row
    (at most 10, then a count), naming the row, the text and how it splits.

    Args:
        path: the file (``.jsonl`` / ``.json`` lines or ``.csv``).
        prepend_bos: prepend the BOS token (``None``: the tokenizer's convention).

    Raises:
        TaskFileError (a ValueError): the problems above, ``.lines`` one per problem.
    """

    path: str | Path = ""
    name: str = ""
    prepend_bos: bool | None = None
    sha256: str = field(default="", init=False)

    def __post_init__(self) -> None:
        import hashlib

        self.path = Path(self.path).expanduser()
        self.name = self.name or self.path.stem
        self.rows: list[TaskRow] = read_task_file(self.path)  # not a field: provenance records path + sha256
        self.sha256 = hashlib.sha256(self.path.read_bytes()).hexdigest()

    def build(self, tokenizer) -> TaskBatch:
        """The file's rows tokenised for ``tokenizer``, in file order.

        Returns:
            :class:`~interp.core.task_batch.TaskBatch`: one prompt per row (right-padded, with an
            ``attention_mask``, when the prompts differ in length); distractors
            ``[rows, n_distractors]`` when the file gives them, else None.

        Raises:
            TaskFileError: an answer or distractor that is not one token, or a prompt with no
                token, under ``tokenizer`` (every such row named, up to ``MAX_ROW_ERRORS``); a
                prompt longer than the model's context that a source's tokenizer carries (the
                row, its length in tokens and the context named, before any weights load).
        """
        tok_name = getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__
        problems, prompts, answers, texts, distractors, names = [], [], [], [], [], []
        for row in self.rows:
            bad = [
                (what, text, _split_ids(tokenizer, text))
                for what, text in [("answer", row.answer)] + [("distractor", d) for d in row.distractors]
            ]
            bad = [b for b in bad if len(b[2]) != 1]
            if bad:
                what, text, ids = bad[0]
                pieces = [tokenizer.decode([t]) for t in ids]
                problems.append(
                    f"{Path(self.path).name}: row {row.id}: {what} {text!r} is {len(ids)} tokens {pieces!r} "
                    f"under tokenizer {tok_name!r}; answers and distractors must be one token"
                )
                continue
            prompt_ids = _split_ids(tokenizer, row.prompt)
            if not prompt_ids:
                problems.append(f"{Path(self.path).name}: row {row.id}: prompt {row.prompt!r} is no token at all")
                continue
            prompts.append(prompt_ids)
            answers.append(_split_ids(tokenizer, row.answer)[0])
            texts.append(row.prompt)
            distractors.append([_split_ids(tokenizer, d)[0] for d in row.distractors])
            names.append(f"{Path(self.path).name}: row {row.id}")
        if problems:
            raise TaskFileError(_capped(problems))
        bos = [tokenizer.bos_token_id] if self.resolved_prepend_bos(tokenizer) else []
        too_long = context_problems(tokenizer, [len(bos) + len(p) for p in prompts], names)
        if too_long:
            raise TaskFileError(_capped(too_long))
        has_distractors = bool(self.rows[0].distractors)
        return self.finish(tokenizer, prompts, answers, texts, distractors if has_distractors else None, names)


def _capped(problems: list[str]) -> list[str]:
    if len(problems) <= MAX_ROW_ERRORS:
        return problems
    return problems[:MAX_ROW_ERRORS] + [f"... and {len(problems) - MAX_ROW_ERRORS} more bad rows"]


def read_task_file(path: str | Path) -> list[TaskRow]:
    """The rows of a JSONL or CSV task file, checked for form (see :class:`TaskFile`).

    Raises:
        TaskFileError: unreadable, not UTF-8, unknown extension, empty, a missing field, bad
            JSON, duplicate ids, distractors on some rows only (one line each).
    """
    path = Path(path)
    if not path.is_file():
        raise TaskFileError([f"task file {str(path)!r} does not exist (expected a .jsonl or .csv file)"])
    suffix = path.suffix.lower()
    if suffix not in (".jsonl", ".json", ".csv"):
        raise TaskFileError(
            [f"task file {path.name!r}: extension {suffix or '(none)'!r} is unknown; use .jsonl or .csv"]
        )
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as err:
        line = err.object[: err.start].count(b"\n") + 1
        raise TaskFileError(
            [
                (
                    f"task file {path.name!r} is not UTF-8 (line {line}, byte {err.start}: "
                    f"{err.object[err.start : err.start + 1]!r}); save it as UTF-8"
                )
            ]
        ) from None
    records: list[tuple[str, dict]] = []  # (row label, fields)
    if suffix == ".csv":
        reader = csv.DictReader(io.StringIO(text))
        for n, fields in enumerate(reader, start=2):  # row 1 is the header
            fields = {k.strip(): v for k, v in fields.items() if k is not None}
            d = fields.get("distractors") or ""
            fields["distractors"] = [x for x in d.split("|") if x] if d else []
            records.append((f"line {n}", fields))
    else:
        for n, row_text in enumerate(text.splitlines(), start=1):
            if not row_text.strip():
                continue
            try:
                fields = json.loads(row_text)
            except json.JSONDecodeError as err:
                raise TaskFileError([f"task file {path.name!r}: line {n} is not JSON ({err.msg})"]) from None
            if not isinstance(fields, dict):
                raise TaskFileError(
                    [
                        (
                            f"task file {path.name!r}: line {n} is a {type(fields).__name__}, "
                            "expected an object with prompt and answer"
                        )
                    ]
                )
            records.append((f"line {n}", fields))
    if not records:
        raise TaskFileError([f"task file {path.name!r} has no rows; each row needs a prompt and an answer"])
    missing = [
        (label, f)
        for label, fields in records
        for f in ("prompt", "answer")
        if not isinstance(fields.get(f), str) or fields.get(f) == ""
    ]
    if missing:
        where = ", ".join(f"{label} ({f})" for label, f in missing[:MAX_ROW_ERRORS])
        more = f" and {len(missing) - MAX_ROW_ERRORS} more" if len(missing) > MAX_ROW_ERRORS else ""
        raise TaskFileError(
            [
                (
                    f"task file {path.name!r}: missing or empty field at {where}{more}; "
                    "each row needs prompt and answer (text)"
                )
            ]
        )
    rows: list[TaskRow] = []
    seen: dict[str, list[str]] = {}
    for i, (label, fields) in enumerate(records):
        d = fields.get("distractors") or []
        if isinstance(d, str) or not all(isinstance(x, str) for x in d):
            raise TaskFileError([f"task file {path.name!r}: {label}: distractors must be a list of strings, got {d!r}"])
        row_id = str(fields.get("id") if fields.get("id") not in (None, "") else i)
        seen.setdefault(row_id, []).append(label)
        rows.append(TaskRow(row_id, fields["prompt"], fields["answer"], list(d)))
    dup = {k: v for k, v in seen.items() if len(v) > 1}
    if dup:
        shown = "; ".join(f"id {k!r} at {', '.join(v)}" for k, v in list(dup.items())[:MAX_ROW_ERRORS])
        raise TaskFileError([f"task file {path.name!r}: duplicate ids: {shown}"])
    with_d = {bool(r.distractors) for r in rows}
    if len(with_d) > 1:
        lacking = [r.id for r in rows if not r.distractors][:MAX_ROW_ERRORS]
        raise TaskFileError(
            [
                (
                    f"task file {path.name!r}: distractors on some rows only (none on ids {lacking}); "
                    "give them on every row or on none"
                )
            ]
        )
    return rows


#: What ``--task FILE`` / ``TaskFile(path)`` is (not a registered name: a task per file).
TASK_FILE_SPEC = TaskSpec(
    TaskFile,
    "p",
    "your own prompts (fields prompt, answer, optional distractors, id)",
    "one token answer per prompt, checked under the source's tokenizer",
    shown_as="FILE.jsonl|FILE.csv",
)


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
