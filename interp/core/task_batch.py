"""The batch of one capability task, as the patching engine and the metrics take it (ground floor).

:class:`TaskBatch`: ``tokens [batch, pos]``, the ``answers [batch]`` (token ids), the ``answer_pos
[batch]`` (the position whose next-token prediction is scored), optional ``distractors``, right
padding with an ``attention_mask`` (1 = real token) and the ``prepend_bos`` choice. Tasks build
it (:mod:`interp.tasks`, which re-exports both names: ``interp.tasks.TaskBatch`` is this class);
the engine (:mod:`interp.patching`), the metric registry (:mod:`interp.core.metrics`) and the
ranking read it. :class:`TaskError` is what a bad batch or task raises.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from jaxtyping import Int
from torch import Tensor

from interp.core.objects import fields_html, results_equal, short_repr

__all__ = ["CONTEXT_ATTRIBUTE", "TaskBatch", "TaskError", "context_problems"]

#: Attribute of a checkpoint source's tokenizer holding ``(the model's context in tokens, where it
#: was read)``: set by :meth:`interp.sources.CheckpointSource.tokenizer` from the source's
#: ``config.json`` before any weights load, read by every task when it builds its batch.
CONTEXT_ATTRIBUTE = "emergence_context"


def context_problems(tokenizer, lengths: Sequence[int], names: Sequence[str]) -> list[str]:
    """One line per prompt longer than the model's context carried by ``tokenizer``.

    Args:
        tokenizer: a source's tokenizer (:data:`CONTEXT_ATTRIBUTE`; none attached: no check).
        lengths: each prompt's length in tokens (BOS included when prepended).
        names: each prompt's name in a message (``"tasks.jsonl: row 7"``, ``"prompt 3"``).

    Returns:
        ``["tasks.jsonl: row 7: the prompt is 300 tokens, longer than the model's context of 128
        tokens (neox-seed3: max_position_embeddings in config.json); shorten it or drop it"]``.
    """
    context = getattr(tokenizer, CONTEXT_ATTRIBUTE, None)
    if not context:
        return []
    n_ctx, what = context
    return [
        f"{name}: the prompt is {length} tokens, longer than the model's context of {n_ctx} tokens "
        f"({what}); shorten it or drop it"
        for name, length in zip(names, lengths)
        if length > n_ctx
    ]


class TaskError(ValueError):
    """A task cannot be built for this tokenizer or these prompts: an item the task needs as one
    token splits into several (digits, names, letters), too few single-token items for a template,
    prompts the batch cannot hold, or prompts longer than the model's context (the prompt, its
    length in tokens and the context named, before any weights load).

    Fix: use a task the tokenizer can run (``emergence list-tasks``, column ``byte_tokenizer``;
    IOI needs a word-piece vocabulary such as Pythia's), or change the task's parameters
    (``prefix``, ``templates``, ``length``) as the message says; shorten prompts to the model's
    context.
    """


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
            digits), see :mod:`interp.core.metrics`.
        attention_mask: ``Int[Tensor, "batch pos"]`` (1 = real token, 0 = right padding) or None
            when every prompt has the same length.
        prepend_bos: whether a BOS token was prepended to every prompt.

    Raises:
        TaskError: ``tokens`` not 2-D; ``answers`` or ``answer_pos`` not ``[batch]``;
            ``distractors`` not ``[batch, n_distractors >= 1]``; ``attention_mask`` of another
            shape than ``tokens`` (each named with the shapes given).
    """

    tokens: Int[Tensor, "batch pos"]
    answers: Int[Tensor, " batch"]
    answer_pos: Int[Tensor, " batch"]
    prompts: list[str] = field(default_factory=list)
    task: str = ""
    distractors: Int[Tensor, "batch n_distractors"] | None = None
    attention_mask: Int[Tensor, "batch pos"] | None = None
    prepend_bos: bool = False

    __eq__ = results_equal
    __repr__ = short_repr
    _repr_html_ = fields_html

    def __post_init__(self) -> None:
        if self.tokens.ndim != 2:
            raise TaskError(f"tokens must be [batch, pos], got shape {tuple(self.tokens.shape)}")
        n = self.tokens.shape[0]
        if self.answers.shape != (n,) or self.answer_pos.shape != (n,):
            raise TaskError(
                f"answers {tuple(self.answers.shape)} and answer_pos {tuple(self.answer_pos.shape)} "
                f"must both be ({n},) to match tokens {tuple(self.tokens.shape)}"
            )
        if self.distractors is not None and (
            self.distractors.ndim != 2 or self.distractors.shape[0] != n or self.distractors.shape[1] == 0
        ):
            raise TaskError(f"distractors must be [{n}, n_distractors >= 1], got {tuple(self.distractors.shape)}")
        if self.attention_mask is not None and tuple(self.attention_mask.shape) != tuple(self.tokens.shape):
            raise TaskError(
                f"attention_mask {tuple(self.attention_mask.shape)} must match tokens {tuple(self.tokens.shape)}"
            )

    @property
    def padded(self) -> bool:
        """Whether any prompt is shorter than the batch (right padding present)."""
        return self.attention_mask is not None and not bool(self.attention_mask.bool().all())

    @property
    def position_ids(self) -> Int[Tensor, "batch pos"]:
        """Position ids: each real token's index in its own prompt (right padding: ``arange``)."""
        return torch.arange(self.tokens.shape[1], device=self.tokens.device).expand_as(self.tokens)

    def forward_kwargs(self) -> dict:
        """Keyword arguments of a forward on ``tokens``: ``attention_mask`` and ``position_ids``
        when the batch is padded, else none (the model's defaults are exact then)."""
        if not self.padded or self.attention_mask is None:
            return {}
        return {"attention_mask": self.attention_mask.to(self.tokens.device), "position_ids": self.position_ids}

    def __len__(self) -> int:
        return int(self.tokens.shape[0])

    def to(self, device: str | torch.device) -> TaskBatch:
        """Return a copy with the tensors on ``device``."""
        return TaskBatch(
            self.tokens.to(device),
            self.answers.to(device),
            self.answer_pos.to(device),
            self.prompts,
            self.task,
            None if self.distractors is None else self.distractors.to(device),
            None if self.attention_mask is None else self.attention_mask.to(device),
            self.prepend_bos,
        )

    def repeat(self, n_copies: int) -> TaskBatch:
        """The batch stacked ``n_copies`` times along the prompt axis (copy-major)."""
        return TaskBatch(
            self.tokens.repeat(n_copies, 1),
            self.answers.repeat(n_copies),
            self.answer_pos.repeat(n_copies),
            list(self.prompts) * n_copies,
            self.task,
            None if self.distractors is None else self.distractors.repeat(n_copies, 1),
            None if self.attention_mask is None else self.attention_mask.repeat(n_copies, 1),
            self.prepend_bos,
        )

    def rows(self, index: slice) -> TaskBatch:
        """The prompts ``index`` (a slice) as a batch of their own."""
        return TaskBatch(
            self.tokens[index],
            self.answers[index],
            self.answer_pos[index],
            list(self.prompts[index]),
            self.task,
            None if self.distractors is None else self.distractors[index],
            None if self.attention_mask is None else self.attention_mask[index],
            self.prepend_bos,
        )

    @classmethod
    def from_token_lists(
        cls,
        prompts: Sequence[Sequence[int]],
        answers: Sequence[int],
        texts: Sequence[str] = (),
        task: str = "",
        distractors: Sequence[Sequence[int]] | None = None,
        pad_id: int = 0,
        prepend_bos: bool = False,
    ) -> TaskBatch:
        """Stack token lists into a batch; the answer follows each prompt's own last token.

        Prompts of different lengths are padded on the right with ``pad_id`` and get an
        ``attention_mask``; equal lengths give none. Distractor lists of different lengths are
        padded by repeating their first id (the metric takes a maximum over them).

        Raises:
            TaskError: if there are no prompts, or a prompt is empty.
        """
        if len(prompts) == 0:
            raise TaskError("no prompts given: a task needs at least one prompt")
        lengths = [len(p) for p in prompts]
        if min(lengths) == 0:
            raise TaskError(f"prompt {lengths.index(0)} is empty: a prompt needs at least one token")
        width = max(lengths)
        tokens = torch.full((len(prompts), width), int(pad_id), dtype=torch.long)
        mask = torch.zeros((len(prompts), width), dtype=torch.long)
        for i, p in enumerate(prompts):
            tokens[i, : len(p)] = torch.tensor(list(p), dtype=torch.long)
            mask[i, : len(p)] = 1
        d = None
        if distractors is not None:
            most = max(len(x) for x in distractors)
            d = torch.tensor(
                [list(x) + [x[0]] * (most - len(x)) if len(x) else [] for x in distractors], dtype=torch.long
            )
        return cls(
            tokens=tokens,
            answers=torch.tensor(list(answers), dtype=torch.long),
            answer_pos=torch.tensor([n - 1 for n in lengths], dtype=torch.long),
            prompts=list(texts),
            task=task,
            distractors=d,
            attention_mask=None if len(set(lengths)) == 1 else mask,
            prepend_bos=prepend_bos,
        )
