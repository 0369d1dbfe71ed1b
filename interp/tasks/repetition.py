"""The repetition tasks: a string of random items followed by a partial repeat; the answer is the
next item of the repeat.

Source: Baherwani et al. 2026, Pythia part ("repetition task"): a string of random digits
followed by a partial repeat; the answer is the next digit of the repeat, e.g.
``0 7 3 1 2 0 2 3 0 7 3 1 2 0 2 -> 3``. Solved = greedy prediction equals the answer;
continuous metric = probability of the answer. The prompt count, string length and digit
rendering are not given by the paper (Baherwani et al. 2026): the defaults below are ours.
:class:`TokenRepetitionTask` is the same over random tokens (in-context repetition, the
induction-head probe of Olsson et al. 2022). Each is registered below its class.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from interp.tasks.base import (
    CapabilityTask,
    TaskBatch,
    TaskError,
    alnum_token_pool,
    resolve_item_prefix,
    single_token_id,
)
from interp.tasks.registry import TaskSpec, register_task

#: The items of :class:`RepetitionTask`'s strings.
DIGITS = tuple("0123456789")


@dataclass
class RepetitionTask(CapabilityTask):
    """The paper's repetition task (Baherwani et al. 2026, "Emergent Capabilities Arise Randomly from
    Learning Sparse Attention Patterns"): random digits, then a partial repeat; predict the next digit.

    A prompt is ``length`` random digits followed by the first ``length - 1`` of them again; the
    answer is the ``length``-th digit (paper: ``0 7 3 1 2 0 2 3 0 7 3 1 2 0 2 -> 3``, i.e.
    length 8). Prompts are ``2 * length - 1`` tokens long.

    Args:
        n_prompts: number of prompts (paper: unknown; default 64).
        length: digits in the random string (paper example: 8; default 10).
        seed: seed of the digit strings.
        prefix: rendering of each digit (``" "`` -> ``" 7"``); ``None`` picks the first of
            ``" "``, ``""`` that makes every digit one token.
        prepend_bos: prepend the BOS token (``None``: the tokenizer's convention).

    Raises:
        TaskError: (from :meth:`build`) if a digit is not a single token.
        ValueError: if ``n_prompts < 1`` or ``length < 2``.
    """

    n_prompts: int = 64
    length: int = 10
    seed: int = 0
    prefix: str | None = None
    name: str = "repetition"
    prepend_bos: bool | None = None

    def __post_init__(self) -> None:
        if self.n_prompts < 1:
            raise ValueError(f"n_prompts={self.n_prompts} must be >= 1")
        if self.length < 2:
            raise ValueError(f"length={self.length} must be >= 2 (one digit to repeat, one to predict)")

    def build(self, tokenizer) -> TaskBatch:
        """The prompts tokenised for ``tokenizer`` (deterministic given ``seed``).

        Returns:
            :class:`~interp.core.task_batch.TaskBatch`: tokens ``[n_prompts, pos]``, answers and
            answer_pos ``[n_prompts]``, distractors ``[n_prompts, 9]``.

        Raises:
            TaskError: a digit (with the chosen ``prefix``) is not a single token of ``tokenizer``.
        """
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
        return self.finish(tokenizer, prompts, answers, texts, distractors)


@dataclass
class TokenRepetitionTask(CapabilityTask):
    """In-context repetition of random tokens (the induction-head probe of Olsson et al. 2022,
    "In-context Learning and Induction Heads"; the paper's in-context repetition capability).

    A prompt is ``length`` tokens drawn without replacement from ``token_pool`` followed by its
    first ``length - 1`` tokens; the answer is the ``length``-th token.

    Args:
        n_prompts: number of prompts.
        length: random tokens per prompt (drawn without replacement, so the answer is unique).
        seed: sampling seed.
        token_pool: candidate token ids; ``None`` = every token whose text is one ASCII letter
            or digit, optionally after a leading space (works for byte and BPE vocabularies).
        prepend_bos: prepend the BOS token (``None``: the tokenizer's convention).

    Raises:
        TaskError: if the pool has fewer than ``length`` tokens.
    """

    n_prompts: int = 64
    length: int = 10
    seed: int = 0
    token_pool: Sequence[int] | None = None
    name: str = "token-repetition"
    prepend_bos: bool | None = None

    def build(self, tokenizer) -> TaskBatch:
        """The prompts tokenised for ``tokenizer`` (deterministic given ``seed``).

        Returns:
            :class:`~interp.core.task_batch.TaskBatch`: tokens ``[n_prompts, pos]``, answers and
            answer_pos ``[n_prompts]``, distractors ``[n_prompts, length - 1]``.

        Raises:
            TaskError: the token pool has fewer than ``length`` tokens.
        """
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
        return self.finish(tokenizer, prompts, answers, texts, distractors)


register_task(
    TaskSpec(
        RepetitionTask,
        "p",
        "Baherwani et al. 2026 (Pythia: string repetition; digits, partial repeat); counts and lengths ours",
        "random digits, then a partial repeat; predict the next digit",
    )
)
register_task(
    TaskSpec(
        TokenRepetitionTask,
        "p",
        "Baherwani et al. 2026 (Pythia: in-context repetition); induction-head probe (Olsson et al. 2022)",
        "random tokens, then a partial repeat; predict the next token",
    )
)
