"""Pattern completion: a template over random tokens, repeated; predict the next element.

Baherwani et al. 2026 name the capability on Pythia without a definition: the definition is
ours. Every task builds a :class:`interp.tasks.TaskBatch` through
:meth:`interp.tasks.CapabilityTask.finish` (BOS per the source's convention, right padding for
prompts of different lengths); the task's facts are registered below its class.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from interp.tasks.base import CapabilityTask, TaskBatch, TaskError, alnum_token_pool
from interp.tasks.registry import TaskSpec, register_task


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


register_task(
    TaskSpec(
        PatternCompletionTask,
        "p",
        "Baherwani et al. 2026 name it without a definition: the definition is ours",
        "a template (ABAB, AABB, ABCABC, ABBA) over random tokens; predict the next element",
    )
)
