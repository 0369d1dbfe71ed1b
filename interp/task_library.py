"""The paper's other capabilities and the researcher's own prompts: pattern completion, IOI and
task files (JSONL / CSV).

Baherwani et al. 2026 measure four capabilities on Pythia: string repetition and in-context
repetition (:class:`interp.tasks.RepetitionTask`, :class:`interp.tasks.TokenRepetitionTask`),
pattern completion and indirect-object identification (below). Every task builds an
:class:`interp.tasks.TaskBatch` through :meth:`interp.tasks.CapabilityTask.finish` (BOS per the
source's convention, right padding for prompts of different lengths). The facts of every task
(parameters, default metric, source) sit in :mod:`interp.task_registry`.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from interp.core.task_batch import context_problems
from interp.tasks import CapabilityTask, TaskBatch, TaskError, alnum_token_pool

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


# --------------------------------------------------------------------------- pattern completion


@dataclass
class PatternCompletionTask(CapabilityTask):
    """Pattern completion: a template over random tokens, repeated; predict the next element.

    A template such as ``"ABAB"``, ``"AABB"``, ``"ABCABC"`` or ``"ABBA"`` is one period of the
    pattern (period = its length); each letter is bound to a distinct random token of the pool
    for each prompt, the period is written ``repeats`` times and the last element is cut off as
    the answer: ``ABBA`` x 2 over (``q``, ``7``) -> ``q 7 7 q q 7 7 -> q``. Distractors (for
    ``logit-diff``) are the tokens bound to the template's other letters. Templates of different
    periods give prompts of different lengths (right padding, :class:`interp.tasks.TaskBatch`).

    Source: Baherwani et al. 2026 name pattern completion as one of the four Pythia capabilities
    but give no definition of the prompts (see /work/shared/PAPER.md): this definition, the
    default templates, repeats and pool are ours.

    Args:
        n_prompts: number of prompts (templates cycle over the prompts).
        templates: periods of the pattern, each a string of upper-case letters with at least two
            distinct letters.
        repeats: periods written per prompt (>= 2: one to show the pattern, one to complete).
        seed: sampling seed.
        token_pool: candidate token ids; ``None`` = single ASCII letters / digits
            (:func:`interp.tasks.alnum_token_pool`).
        prepend_bos: prepend the BOS token (``None``: the tokenizer's convention).

    Raises:
        ValueError: bad ``n_prompts``, ``repeats`` or template.
        TaskError: (from :meth:`build`) a pool smaller than a template's letter count.
    """

    n_prompts: int = 64
    templates: Sequence[str] = ("ABAB", "AABB", "ABCABC", "ABBA")
    repeats: int = 3
    seed: int = 0
    token_pool: Sequence[int] | None = None
    name: str = "pattern-completion"
    prepend_bos: bool | None = None

    def __post_init__(self) -> None:
        if isinstance(self.templates, str):
            self.templates = tuple(t.strip() for t in self.templates.split(",") if t.strip())
        if self.n_prompts < 1:
            raise ValueError(f"n_prompts={self.n_prompts} must be >= 1")
        if self.repeats < 2:
            raise ValueError(f"repeats={self.repeats} must be >= 2 (one period to show, one to complete)")
        if not self.templates:
            raise ValueError("templates is empty; give e.g. ABAB,AABB,ABCABC,ABBA")
        for t in self.templates:
            if not t.isalpha() or not t.isupper() or len(set(t)) < 2:
                raise ValueError(
                    f"template {t!r} must be upper-case letters with at least two distinct ones, e.g. ABBA"
                )

    def build(self, tokenizer) -> TaskBatch:
        """The prompts tokenised for ``tokenizer`` (deterministic given ``seed``).

        Returns:
            :class:`~interp.core.task_batch.TaskBatch`: tokens ``[n_prompts, pos]``, answers and
            answer_pos ``[n_prompts]``, distractors ``[n_prompts, n_distractors]``.

        Raises:
            TaskError: the token pool has fewer tokens than a template has distinct letters.
        """
        pool = list(self.token_pool) if self.token_pool is not None else alnum_token_pool(tokenizer)
        rng = np.random.default_rng(self.seed)
        prompts, answers, texts, distractors = [], [], [], []
        for i in range(self.n_prompts):
            template = self.templates[i % len(self.templates)]
            letters = sorted(set(template))
            if len(pool) < len(letters):
                raise TaskError(f"token pool has {len(pool)} tokens; template {template!r} needs {len(letters)}")
            bound = dict(zip(letters, (pool[j] for j in rng.choice(len(pool), size=len(letters), replace=False))))
            sequence = [bound[c] for c in template * self.repeats]
            prompts.append(sequence[:-1])
            answers.append(sequence[-1])
            texts.append(tokenizer.decode(sequence[:-1]))
            distractors.append([bound[c] for c in letters if bound[c] != sequence[-1]])
        return self.finish(tokenizer, prompts, answers, texts, distractors)


# --------------------------------------------------------------------------- IOI

#: Wang et al. 2022 ("Interpretability in the Wild"), ``ioi_dataset.py``: BABA templates (the
#: first-mentioned name is the subject ``[B]``); ABBA swaps the first two names. The final
#: ``[A]`` (the indirect object) is the answer and is cut off.
IOI_TEMPLATES = (
    "Then, [B] and [A] went to the [PLACE]. [B] gave a [OBJECT] to [A]",
    "Then, [B] and [A] had a lot of fun at the [PLACE]. [B] gave a [OBJECT] to [A]",
    "Then, [B] and [A] were working at the [PLACE]. [B] decided to give a [OBJECT] to [A]",
    "Then, [B] and [A] were thinking about going to the [PLACE]. [B] wanted to give a [OBJECT] to [A]",
    "Then, [B] and [A] had a long argument, and afterwards [B] said to [A]",
    "After [B] and [A] went to the [PLACE], [B] gave a [OBJECT] to [A]",
    "When [B] and [A] got a [OBJECT] at the [PLACE], [B] decided to give it to [A]",
    "While [B] and [A] were working at the [PLACE], [B] gave a [OBJECT] to [A]",
    "While [B] and [A] were commuting to the [PLACE], [B] gave a [OBJECT] to [A]",
    "Afterwards, [B] and [A] went to the [PLACE]. [B] gave a [OBJECT] to [A]",
    "Friends [B] and [A] found a [OBJECT] at the [PLACE]. [B] gave it to [A]",
)
#: A subset of Wang et al.'s names (single GPT-2 / GPT-NeoX tokens with a leading space).
IOI_NAMES = (
    "Mary",
    "John",
    "Alice",
    "Bob",
    "Tom",
    "James",
    "Michael",
    "David",
    "Sarah",
    "Laura",
    "Paul",
    "Mark",
    "Kevin",
    "Anna",
    "Lisa",
    "Sam",
    "Daniel",
    "Jessica",
    "Ryan",
    "Jason",
)
IOI_PLACES = ("store", "garden", "restaurant", "school", "hospital", "office", "house", "station")
IOI_OBJECTS = ("ring", "kiss", "bone", "basketball", "computer", "necklace", "drink", "snack")


def _single_tokens(tokenizer, words: Sequence[str], prefix: str = " ") -> tuple[dict[str, int], dict[str, list[int]]]:
    """``({word: id} of words that are one token as prefix + word, {word: ids} of the others)``."""
    good: dict[str, int] = {}
    bad: dict[str, list[int]] = {}
    for w in words:
        ids = tokenizer.encode(prefix + w, add_special_tokens=False)
        (good if len(ids) == 1 else bad)[w] = ids[0] if len(ids) == 1 else ids
    return good, bad


@dataclass
class IOITask(CapabilityTask):
    """Indirect-object identification (Wang et al. 2022, "Interpretability in the Wild").

    ``"When Mary and John went to the store, John gave a drink to"`` -> `` Mary``: two names,
    the subject (S, mentioned twice) and the indirect object (IO, once); the answer is the IO.
    ABBA templates name IO first, BABA templates S first (:data:`IOI_TEMPLATES`, from Wang et
    al.'s ``ioi_dataset.py``); prompts alternate between them. Names and objects must be single
    tokens with a leading space under the source's tokenizer (checked; those that are not are
    left out, and a tokenizer with fewer than two such names or no such object is refused).
    Distractor = S, so ``logit-diff`` = logit(IO) - logit(S), the field's standard metric and
    this task's default (:mod:`interp.task_registry`).

    Args:
        n_prompts: number of prompts.
        order: ``"both"`` (ABBA and BABA alternating), ``"ABBA"`` or ``"BABA"``.
        seed: sampling seed.
        names, places, objects: the fillers (defaults from Wang et al.'s lists).
        prepend_bos: prepend the BOS token (``None``: the tokenizer's convention).

    Raises:
        ValueError: bad ``n_prompts`` or ``order``.
        TaskError: (from :meth:`build`) too few single-token names or objects; the embedded
            byte tokenizer (one token per byte) has none: IOI needs a word-piece vocabulary.
    """

    n_prompts: int = 64
    order: str = "both"
    seed: int = 0
    names: Sequence[str] = IOI_NAMES
    places: Sequence[str] = IOI_PLACES
    objects: Sequence[str] = IOI_OBJECTS
    name: str = "ioi"
    prepend_bos: bool | None = None

    def __post_init__(self) -> None:
        if self.n_prompts < 1:
            raise ValueError(f"n_prompts={self.n_prompts} must be >= 1")
        if self.order not in ("both", "ABBA", "BABA"):
            raise ValueError(f"order={self.order!r}; valid: both, ABBA, BABA")

    def build(self, tokenizer) -> TaskBatch:
        """The prompts tokenised for ``tokenizer`` (deterministic given ``seed``).

        Returns:
            :class:`~interp.core.task_batch.TaskBatch`: tokens ``[n_prompts, pos]``, answers and
            answer_pos ``[n_prompts]``, distractors ``[n_prompts, n_distractors]``.

        Raises:
            TaskError: fewer than 2 names or no object are single tokens of ``tokenizer`` (a
                byte-level vocabulary, for example).
        """
        tok_name = getattr(tokenizer, "name_or_path", "") or type(tokenizer).__name__
        names, bad_names = _single_tokens(tokenizer, self.names)
        objects, bad_objects = _single_tokens(tokenizer, self.objects)
        if len(names) < 2 or not objects:
            word, ids = next(iter((bad_names if len(names) < 2 else bad_objects).items()))
            raise TaskError(
                f"task ioi: {len(names)} of {len(self.names)} names and {len(objects)} of "
                f"{len(self.objects)} objects are single tokens under tokenizer {tok_name!r} (e.g. "
                f"{' ' + word!r} -> {len(ids)} tokens); IOI needs a word-piece vocabulary where names "
                "are one token (the embedded byte tokenizer has one token per byte)"
            )
        rng = np.random.default_rng(self.seed)
        name_list, object_list = list(names), list(objects)
        orders = ["ABBA", "BABA"] if self.order == "both" else [self.order]
        prompts, answers, texts, distractors = [], [], [], []
        for i in range(self.n_prompts):
            template = IOI_TEMPLATES[int(rng.integers(len(IOI_TEMPLATES)))]
            io_name, s_name = (name_list[j] for j in rng.choice(len(name_list), size=2, replace=False))
            place = self.places[int(rng.integers(len(self.places)))]
            obj = object_list[int(rng.integers(len(object_list)))]
            if orders[i % len(orders)] == "ABBA":  # IO first: swap the first two mentions
                template = template.replace("[B] and [A]", "[A] and [B]", 1)
            text = template.replace("[PLACE]", place).replace("[OBJECT]", obj)
            text = text.replace("[A]", io_name).replace("[B]", s_name)
            text = text[: text.rindex(" " + io_name)]  # the final IO is the answer
            prompts.append(tokenizer.encode(text, add_special_tokens=False))
            answers.append(names[io_name])
            texts.append(text)
            distractors.append([names[s_name]])
        return self.finish(tokenizer, prompts, answers, texts, distractors)


# --------------------------------------------------------------------------- task files


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
