"""Capability tasks: prompts with one answer token, and the per-checkpoint metrics on them.

A task turns a tokenizer into a :class:`TaskBatch`: ``tokens [batch, pos]`` of equal length, the
``answers [batch]`` (token ids) and the ``answer_pos [batch]`` (the position whose next-token
prediction is scored, i.e. the last prompt position). Prompts come from a fixed seed, so every
checkpoint of a sweep is scored on identical tokens.

Source: Baherwani et al. 2026, Pythia part ("repetition task"): a string of random digits
followed by a partial repeat; the answer is the next digit of the repeat, e.g.
``0 7 3 1 2 0 2 3 0 7 3 1 2 0 2 -> 3``. Solved = greedy prediction equals the answer;
continuous metric = probability of the answer. The prompt count, string length and digit
rendering are not given by the paper (Baherwani et al. 2026): the defaults below are ours.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import torch
from jaxtyping import Float, Int
from torch import Tensor

DIGITS = tuple("0123456789")


class TaskError(ValueError):
    """A task cannot be built for this tokenizer or these prompts."""


@dataclass
class TaskBatch:
    """Tokenised prompts of one capability task.

    Attributes:
        tokens: ``Int[Tensor, "batch pos"]`` prompt token ids, all prompts the same length.
        answers: ``Int[Tensor, "batch"]`` the correct next token of each prompt.
        answer_pos: ``Int[Tensor, "batch"]`` position whose logits predict the answer.
        prompts: the prompt texts (for display), one per row.
        task: the task's name.
        distractors: ``Int[Tensor, "batch n_distractors"]`` or None: the wrong answers a
            logit-difference metric compares the answer with (repetition task: the nine other
            digits), see :mod:`interp.patching.metrics`.
    """

    tokens: Int[Tensor, "batch pos"]
    answers: Int[Tensor, "batch"]
    answer_pos: Int[Tensor, "batch"]
    prompts: list[str] = field(default_factory=list)
    task: str = ""
    distractors: Int[Tensor, "batch n_distractors"] | None = None

    def __post_init__(self) -> None:
        if self.tokens.ndim != 2:
            raise TaskError(f"tokens must be [batch, pos], got shape {tuple(self.tokens.shape)}")
        n = self.tokens.shape[0]
        if self.answers.shape != (n,) or self.answer_pos.shape != (n,):
            raise TaskError(
                f"answers {tuple(self.answers.shape)} and answer_pos {tuple(self.answer_pos.shape)} "
                f"must both be ({n},) to match tokens {tuple(self.tokens.shape)}"
            )
        if self.distractors is not None and (self.distractors.ndim != 2 or self.distractors.shape[0] != n
                                             or self.distractors.shape[1] == 0):
            raise TaskError(f"distractors must be [{n}, n_distractors >= 1], got {tuple(self.distractors.shape)}")

    def __len__(self) -> int:
        return int(self.tokens.shape[0])

    def to(self, device: str | torch.device) -> "TaskBatch":
        """Return a copy with the tensors on ``device``."""
        return TaskBatch(
            self.tokens.to(device), self.answers.to(device), self.answer_pos.to(device),
            self.prompts, self.task, None if self.distractors is None else self.distractors.to(device),
        )

    def repeat(self, n_copies: int) -> "TaskBatch":
        """The batch stacked ``n_copies`` times along the prompt axis (copy-major)."""
        return TaskBatch(
            self.tokens.repeat(n_copies, 1), self.answers.repeat(n_copies), self.answer_pos.repeat(n_copies),
            list(self.prompts) * n_copies, self.task,
            None if self.distractors is None else self.distractors.repeat(n_copies, 1),
        )

    @classmethod
    def from_token_lists(
        cls, prompts: Sequence[Sequence[int]], answers: Sequence[int], texts: Sequence[str] = (),
        task: str = "", distractors: Sequence[Sequence[int]] | None = None,
    ) -> "TaskBatch":
        """Stack equal-length token lists into a batch; the answer follows each prompt's last token.

        Raises:
            TaskError: if the prompts have unequal lengths (positions must line up across the
                batch for attention-pattern patching) or there are no prompts.
        """
        if len(prompts) == 0:
            raise TaskError("no prompts given: a task needs at least one prompt")
        lengths = sorted({len(p) for p in prompts})
        if len(lengths) != 1:
            raise TaskError(
                f"prompts tokenise to unequal lengths {lengths}; patching needs equal lengths "
                "(use items that are one token each)"
            )
        tokens = torch.tensor([list(p) for p in prompts], dtype=torch.long)
        n, length = tokens.shape
        return cls(
            tokens=tokens,
            answers=torch.tensor(list(answers), dtype=torch.long),
            answer_pos=torch.full((n,), length - 1, dtype=torch.long),
            prompts=list(texts),
            task=task,
            distractors=None if distractors is None else torch.tensor([list(d) for d in distractors], dtype=torch.long),
        )


@dataclass
class CapabilityScore:
    """Capability of one checkpoint on one task.

    Attributes:
        accuracy: fraction of prompts whose greedy (argmax) prediction is the answer, in [0, 1].
        p_answer: mean probability of the answer token at the answer position, in [0, 1].
        n_prompts: number of prompts scored.
    """

    accuracy: float
    p_answer: float
    n_prompts: int

    def _html(self, assets=None) -> str:
        from interp.display import capability_score_html

        return capability_score_html(self)

    def _repr_html_(self) -> str:
        """Jupyter display: the two values as a small table with bars."""
        return self._html()

    def save_html(self, path):
        """Write the display as a self-contained page (atomic; :func:`interp.display.save_html`)."""
        from interp.display import save_html

        return save_html(self, path, title="capability score")


def single_token_id(tokenizer, text: str) -> int:
    """Return the id of ``text`` if the tokenizer encodes it as exactly one token.

    Raises:
        TaskError: if ``text`` encodes to zero or several tokens.
    """
    ids = tokenizer.encode(text, add_special_tokens=False)
    if len(ids) != 1:
        name = getattr(tokenizer, "name_or_path", type(tokenizer).__name__)
        raise TaskError(
            f"item {text!r} tokenises to {len(ids)} tokens {ids} with tokenizer {name!r}; "
            "each item must be exactly one token (try another item prefix, e.g. '' or ' ')"
        )
    return ids[0]


def resolve_item_prefix(tokenizer, items: Sequence[str], prefix: str | None) -> str:
    """Pick how items are rendered: ``prefix + item`` must be one token for every item.

    ``prefix=None`` tries ``" "`` (what BPE vocabularies such as Pythia's store as one token,
    matching the paper's space-separated digits) and then ``""`` (byte-level vocabularies).

    Raises:
        TaskError: if no candidate prefix makes every item a single token.
    """
    candidates = [" ", ""] if prefix is None else [prefix]
    last: TaskError | None = None
    for candidate in candidates:
        try:
            for item in items:
                single_token_id(tokenizer, candidate + item)
            return candidate
        except TaskError as err:
            last = err
    assert last is not None
    raise last


class CapabilityTask(ABC):
    """A capability measured by next-token prediction at one position per prompt."""

    name: str = "task"

    @abstractmethod
    def build(self, tokenizer) -> TaskBatch:
        """Tokenise this task's prompts for ``tokenizer`` (deterministic given the task's seed)."""


@dataclass
class RepetitionTask(CapabilityTask):
    """The paper's repetition task: random digits, then a partial repeat; predict the next digit.

    A prompt is ``length`` random digits followed by the first ``length - 1`` of them again; the
    answer is the ``length``-th digit (paper: ``0 7 3 1 2 0 2 3 0 7 3 1 2 0 2 -> 3``, i.e.
    length 8). Prompts are ``2 * length - 1`` tokens long.

    Args:
        n_prompts: number of prompts (paper: unknown; default 64).
        length: digits in the random string (paper example: 8; default 10).
        seed: seed of the digit strings.
        prefix: rendering of each digit (``" "`` -> ``" 7"``); ``None`` picks the first of
            ``" "``, ``""`` that makes every digit one token.

    Raises:
        TaskError: (from :meth:`build`) if a digit is not a single token.
        ValueError: if ``n_prompts < 1`` or ``length < 2``.
    """

    n_prompts: int = 64
    length: int = 10
    seed: int = 0
    prefix: str | None = None
    name: str = "repetition"

    def __post_init__(self) -> None:
        if self.n_prompts < 1:
            raise ValueError(f"n_prompts={self.n_prompts} must be >= 1")
        if self.length < 2:
            raise ValueError(f"length={self.length} must be >= 2 (one digit to repeat, one to predict)")

    def build(self, tokenizer) -> TaskBatch:
        prefix = resolve_item_prefix(tokenizer, DIGITS, self.prefix)
        digit_ids = [single_token_id(tokenizer, prefix + d) for d in DIGITS]
        rng = np.random.default_rng(self.seed)
        strings = rng.integers(0, 10, size=(self.n_prompts, self.length))
        prompts, answers, texts = [], [], []
        for row in strings:
            sequence = list(row) + list(row[: self.length - 1])
            prompts.append([digit_ids[d] for d in sequence])
            answers.append(digit_ids[row[-1]])
            texts.append("".join(prefix + DIGITS[d] for d in sequence))
        # logit-diff compares the answer with the strongest of the nine other digits
        distractors = [[i for i in digit_ids if i != a] for a in answers]
        return TaskBatch.from_token_lists(prompts, answers, texts, task=self.name, distractors=distractors)


@dataclass
class TokenRepetitionTask(CapabilityTask):
    """In-context repetition of random tokens (the induction-head probe).

    A prompt is ``length`` tokens drawn without replacement from ``token_pool`` followed by its
    first ``length - 1`` tokens; the answer is the ``length``-th token.

    Args:
        n_prompts: number of prompts.
        length: random tokens per prompt (drawn without replacement, so the answer is unique).
        seed: sampling seed.
        token_pool: candidate token ids; ``None`` = every token whose text is one ASCII letter
            or digit, optionally after a leading space (works for byte and BPE vocabularies).

    Raises:
        TaskError: if the pool has fewer than ``length`` tokens.
    """

    n_prompts: int = 64
    length: int = 10
    seed: int = 0
    token_pool: Sequence[int] | None = None
    name: str = "token-repetition"

    def build(self, tokenizer) -> TaskBatch:
        pool = list(self.token_pool) if self.token_pool is not None else alnum_token_pool(tokenizer)
        if len(pool) < self.length:
            raise TaskError(f"token pool has {len(pool)} tokens; length={self.length} needs at least that many")
        rng = np.random.default_rng(self.seed)
        prompts, answers, texts = [], [], []
        for _ in range(self.n_prompts):
            row = [pool[i] for i in rng.choice(len(pool), size=self.length, replace=False)]
            sequence = row + row[: self.length - 1]
            prompts.append(sequence)
            answers.append(row[-1])
            texts.append(tokenizer.decode(sequence))
        # logit-diff: the answer against the other tokens of the prompt's random string
        distractors = [[t for t in p[: self.length] if t != a] for p, a in zip(prompts, answers)]
        return TaskBatch.from_token_lists(prompts, answers, texts, task=self.name, distractors=distractors)


def alnum_token_pool(tokenizer) -> list[int]:
    """Token ids whose text is a single ASCII letter or digit, with or without a leading space."""
    pool = []
    for text in [c for c in "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"]:
        for candidate in (text, " " + text):
            ids = tokenizer.encode(candidate, add_special_tokens=False)
            if len(ids) == 1 and ids[0] not in pool:
                pool.append(ids[0])
    return pool


TASKS: dict[str, type[CapabilityTask]] = {
    "repetition": RepetitionTask,
    "token-repetition": TokenRepetitionTask,
}


def make_task(name: str, **kwargs) -> CapabilityTask:
    """Build a task by name (see :data:`TASKS`).

    Raises:
        ValueError: if ``name`` is not a known task.
    """
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; valid tasks: {', '.join(sorted(TASKS))}")
    return TASKS[name](**kwargs)


def answer_logits(
    logits: Float[Tensor, "batch pos d_vocab"], batch: TaskBatch
) -> Float[Tensor, "batch d_vocab"]:
    """Select the logits at each prompt's answer position."""
    return logits[torch.arange(logits.shape[0], device=logits.device), batch.answer_pos.to(logits.device)]


@torch.inference_mode()
def score_logits(logits: Float[Tensor, "batch pos d_vocab"], batch: TaskBatch) -> CapabilityScore:
    """Greedy accuracy and mean p(answer) from a forward pass's logits (float32 softmax)."""
    final = answer_logits(logits, batch).float()
    answers = batch.answers.to(final.device)
    accuracy = (final.argmax(-1) == answers).float().mean().item()
    p_answer = final.softmax(-1).gather(1, answers[:, None]).mean().item()
    return CapabilityScore(accuracy=accuracy, p_answer=p_answer, n_prompts=len(batch))


@torch.inference_mode()
def evaluate(model: torch.nn.Module, batch: TaskBatch, chunk_size: int = 64) -> CapabilityScore:
    """Score a model (a TransformerBridge or any tokens -> logits module) on a task batch.

    Args:
        model: maps ``Int[Tensor, "batch pos"]`` to logits ``Float[Tensor, "batch pos d_vocab"]``
            (a Hugging Face model's ``.logits`` output is accepted too).
        batch: the task's prompts.
        chunk_size: prompts per forward pass (bounds memory).

    Returns:
        Greedy accuracy (fraction) and mean p(answer) (probability) over all prompts.
    """
    device = next(model.parameters()).device
    correct, p_sum = 0.0, 0.0
    for start in range(0, len(batch), chunk_size):
        chunk = TaskBatch(
            batch.tokens[start : start + chunk_size], batch.answers[start : start + chunk_size],
            batch.answer_pos[start : start + chunk_size],
        ).to(device)
        logits = model(chunk.tokens)
        logits = getattr(logits, "logits", logits)
        score = score_logits(logits, chunk)
        correct += score.accuracy * len(chunk)
        p_sum += score.p_answer * len(chunk)
    return CapabilityScore(accuracy=correct / len(batch), p_answer=p_sum / len(batch), n_prompts=len(batch))
