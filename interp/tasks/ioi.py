"""Indirect-object identification (Wang et al. 2022, "Interpretability in the Wild"): two names,
the subject mentioned twice and the indirect object once; the answer is the indirect object.

The task's facts are registered below its class.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from interp.tasks.base import CapabilityTask, TaskBatch, TaskError
from interp.tasks.registry import TaskSpec, register_task

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
    this task's default (:mod:`interp.tasks.registry`).

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


register_task(
    TaskSpec(
        IOITask,
        "logit-diff",
        "Wang et al. 2022, Interpretability in the Wild (ABBA/BABA templates of ioi_dataset.py)",
        "indirect-object identification; logit-diff = logit(IO) - logit(S)",
        byte_tokenizer=False,
    )
)
