"""What every capability task shares: :class:`CapabilityTask` (prompts with one answer token ->
:class:`TaskBatch`), the tokenizer helpers and the per-checkpoint score (:func:`evaluate`).

A task turns a tokenizer into a :class:`TaskBatch`: ``tokens [batch, pos]``, the ``answers
[batch]`` (token ids) and the ``answer_pos [batch]`` (the position whose next-token prediction is
scored: each prompt's own last token). Prompts of different lengths are padded on the right with
an ``attention_mask`` (1 = real token) and ``position_ids`` (each real token keeps its index in
its own prompt, as when run alone); under causal attention no real position sees a pad, so each
prompt's answer logits equal those of the prompt run alone (tests/interp/tasks/test_task_library.py, to 1e-5).
Prompts come from a fixed seed, so every checkpoint of a sweep is scored on identical tokens.

BOS: every task has ``prepend_bos`` (``None`` = the source's training convention, read from its
Hugging Face tokenizer: whether ``tokenizer(text)`` adds a BOS token; Pythia's GPT-NeoX tokenizer,
OLMo-2's and the embedded byte tokenizer add none, Llama's adds ``<s>``). The batch records the
choice (``TaskBatch.prepend_bos``) and the main job writes it into every table.

The tasks themselves: :mod:`interp.tasks.repetition`, :mod:`interp.tasks.pattern`,
:mod:`interp.tasks.ioi`, :mod:`interp.tasks.files` (your own prompts); every task's facts are
registered where it is defined (:mod:`interp.tasks.registry`).
"""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from jaxtyping import Float
from torch import Tensor

from interp.core.task_batch import CONTEXT_ATTRIBUTE, TaskBatch, TaskError


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
        from interp.report.display import capability_score_html

        return capability_score_html(self)

    def _repr_html_(self) -> str:
        """Jupyter display: the two values as a small table with bars."""
        return self._html()

    def save_html(self, path):
        """Write the display as a self-contained page (atomic; :func:`interp.report.display.save_html`)."""
        from interp.report.display import save_html

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


def tokenizer_adds_bos(tokenizer) -> bool:
    """Whether the Hugging Face tokenizer prepends a BOS token (its ``add_special_tokens=True``
    encoding starts with ``bos_token_id`` and the plain one does not): the source's training
    convention. Pythia (GPT-NeoX tokenizer), OLMo-2 and the embedded byte tokenizer: False;
    Llama-style tokenizers: True."""
    bos = getattr(tokenizer, "bos_token_id", None)
    if bos is None:
        return False
    with_special = tokenizer("a", add_special_tokens=True)["input_ids"]
    plain = tokenizer("a", add_special_tokens=False)["input_ids"]
    return len(with_special) == len(plain) + 1 and with_special[0] == bos


def pad_token_id(tokenizer) -> int:
    """The id right padding uses: the tokenizer's pad token, else its EOS, else 0 (pads are
    masked out and sit after every real token, so their id never reaches an answer)."""
    for name in ("pad_token_id", "eos_token_id"):
        value = getattr(tokenizer, name, None)
        if isinstance(value, int):
            return value
    return 0


def check_tokenizer(tokenizer, where: str) -> None:
    """Refuse what is not a Hugging Face tokenizer, in one line naming what was passed.

    A tokenizer here is a callable with ``encode`` (a ``PreTrainedTokenizerBase``: the object a
    source's ``tokenizer()`` returns; a ``str`` has ``encode`` but is not callable). The common slip, a checkpoint source where its tokenizer
    belongs (``task.build(source)``), is named as such.

    Raises:
        TypeError: ``tokenizer`` has no ``encode`` (``where`` says which call refused it).
    """
    if callable(tokenizer) and callable(getattr(tokenizer, "encode", None)):
        return
    if callable(getattr(tokenizer, "tokenizer", None)) and hasattr(tokenizer, "available_steps"):
        name = getattr(tokenizer, "model_id", "")
        raise TypeError(
            f"{where}: got the checkpoint source {type(tokenizer).__name__} {name!r}; "
            "pass its tokenizer: source.tokenizer()"
        )
    from interp.core.objects import described

    raise TypeError(f"{where}: expected a Hugging Face tokenizer (e.g. source.tokenizer()), got {described(tokenizer)}")


class CapabilityTask(ABC):
    """A capability measured by next-token prediction at one position per prompt.

    Subclasses set ``prepend_bos`` (``None``: the tokenizer's convention, :func:`tokenizer_adds_bos`)
    and build their batch through :meth:`finish`, which prepends the BOS token and pads. Every
    subclass's ``build`` checks its argument first (:func:`check_tokenizer`, put in front of it
    when the class is defined): a wrong one is refused in one line, before any prompt is made.
    """

    name: str = "task"
    prepend_bos: bool | None = None

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        build = cls.__dict__.get("build")
        if build is None or getattr(build, "__isabstractmethod__", False) or getattr(build, "_checked", False):
            return

        @functools.wraps(build)
        def checked_build(self, tokenizer, *args, **kw):
            check_tokenizer(tokenizer, f"{type(self).__name__}.build")
            return build(self, tokenizer, *args, **kw)

        checked_build._checked = True  # type: ignore[attr-defined]
        cls.build = checked_build  # type: ignore[method-assign]

    @abstractmethod
    def build(self, tokenizer) -> TaskBatch:
        """Tokenise this task's prompts for ``tokenizer`` (deterministic given the task's seed).

        Raises:
            TypeError: ``tokenizer`` is not a tokenizer (e.g. the source itself:
                :func:`check_tokenizer`).
        """

    def resolved_prepend_bos(self, tokenizer) -> bool:
        """``prepend_bos``, with ``None`` read from the tokenizer (:func:`tokenizer_adds_bos`).

        Raises:
            TaskError: ``prepend_bos=True`` with a tokenizer that has no BOS token.
        """
        if self.prepend_bos is None:
            return tokenizer_adds_bos(tokenizer)
        if self.prepend_bos and getattr(tokenizer, "bos_token_id", None) is None:
            name = getattr(tokenizer, "name_or_path", type(tokenizer).__name__)
            raise TaskError(f"prepend_bos=True but tokenizer {name!r} has no BOS token; use prepend_bos=False")
        return bool(self.prepend_bos)

    def finish(
        self,
        tokenizer,
        prompts: Sequence[Sequence[int]],
        answers: Sequence[int],
        texts: Sequence[str],
        distractors: Sequence[Sequence[int]] | None,
        names: Sequence[str] | None = None,
    ) -> TaskBatch:
        """The batch of these token lists, with BOS prepended per :meth:`resolved_prepend_bos`
        and right padding (:meth:`TaskBatch.from_token_lists`).

        Every task builds its batch here, so the prompts are checked here against the model's
        context that a source's tokenizer carries (:data:`interp.core.task_batch.CONTEXT_ATTRIBUTE`;
        before any weights load: a longer prompt would be scored past the positions the model
        was trained on, silently).

        Args:
            names: each prompt's name in an error (default ``"<task>: prompt <i>"``, from 0).

        Raises:
            TaskError: a prompt longer than the model's context (one line: the first such prompt,
                its length in tokens, the context and where it was read, then how many more).
        """
        bos = self.resolved_prepend_bos(tokenizer)
        if bos:
            prompts = [[tokenizer.bos_token_id, *p] for p in prompts]
        names = names or [f"{self.name}: prompt {i}" for i in range(len(prompts))]
        context = getattr(tokenizer, CONTEXT_ATTRIBUTE, None)
        too_long = [(name, len(p)) for name, p in zip(names, prompts) if context and len(p) > context[0]]
        if context and too_long:
            (name, length), n_ctx, what = too_long[0], context[0], context[1]
            more = f" ({len(too_long) - 1} more prompts too long)" if len(too_long) > 1 else ""
            raise TaskError(
                f"{name}: the prompt is {length} tokens, longer than the model's context of {n_ctx} tokens "
                f"({what}); shorten it or drop it{more}"
            )
        return TaskBatch.from_token_lists(
            prompts,
            answers,
            texts,
            task=self.name,
            distractors=distractors,
            pad_id=pad_token_id(tokenizer),
            prepend_bos=bos,
        )


def alnum_token_pool(tokenizer) -> list[int]:
    """Token ids whose text is a single ASCII letter or digit, with or without a leading space."""
    pool = []
    for text in list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"):
        for candidate in (text, " " + text):
            ids = tokenizer.encode(candidate, add_special_tokens=False)
            if len(ids) == 1 and ids[0] not in pool:
                pool.append(ids[0])
    return pool


def answer_logits(logits: Float[Tensor, "batch pos d_vocab"], batch: TaskBatch) -> Float[Tensor, "batch d_vocab"]:
    """Select the logits at each prompt's answer position (:func:`interp.core.metrics.answer_logits`).

    Raises:
        ValueError: if ``logits`` is not ``[batch, pos, d_vocab]`` for this batch.
    """
    from interp.core.metrics import answer_logits as pick

    return pick(logits, batch)


@torch.inference_mode()
def score_logits(logits: Float[Tensor, "batch pos d_vocab"], batch: TaskBatch) -> CapabilityScore:
    """Greedy accuracy and mean p(answer) from a forward pass's logits (the registry's
    ``accuracy`` and ``p`` metrics, :mod:`interp.core.metrics`)."""
    from interp.core.metrics import METRICS

    final = answer_logits(logits, batch)
    accuracy = METRICS["accuracy"](final, batch).mean().item()
    p_answer = METRICS["p"](final, batch).mean().item()
    return CapabilityScore(accuracy=accuracy, p_answer=p_answer, n_prompts=len(batch))


@dataclass(frozen=True)
class PromptScores:
    """Per-prompt capability of one checkpoint on one task (what :func:`evaluate_prompts` returns).

    Attributes:
        score: the :class:`CapabilityScore` (the means, as :func:`evaluate` gives them).
        correct: ``Float[ndarray, "prompt"]``: 1.0 where the greedy prediction is the answer, else 0.0.
        p: ``Float[ndarray, "prompt"]``: p(answer) at the answer position (probability).
    """

    score: CapabilityScore
    correct: np.ndarray
    p: np.ndarray


@torch.inference_mode()
def evaluate_prompts(model: torch.nn.Module, batch: TaskBatch, chunk_size: int = 64) -> PromptScores:
    """:func:`evaluate`, keeping each prompt's greedy correctness and p(answer) too (the
    readiness curve resamples prompts); the means are those :func:`evaluate` returns, bit for bit.

    Args:
        model, batch, chunk_size: as :func:`evaluate`.

    Returns:
        :class:`PromptScores` (``correct`` and ``p`` of length ``len(batch)``, float32).
    """
    from interp.core.metrics import METRICS

    device = next(model.parameters()).device
    correct, p_sum = 0.0, 0.0
    hits, probabilities = [], []
    for start in range(0, len(batch), chunk_size):
        chunk = batch.rows(slice(start, start + chunk_size)).to(device)
        logits = model(chunk.tokens, **chunk.forward_kwargs())
        final = answer_logits(getattr(logits, "logits", logits), chunk)
        hit, p = METRICS["accuracy"](final, chunk), METRICS["p"](final, chunk)
        correct += hit.mean().item() * len(chunk)  # as score_logits: the chunk's mean, then weighted
        p_sum += p.mean().item() * len(chunk)
        hits.append(hit.float().cpu().numpy())
        probabilities.append(p.float().cpu().numpy())
    score = CapabilityScore(accuracy=correct / len(batch), p_answer=p_sum / len(batch), n_prompts=len(batch))
    return PromptScores(score=score, correct=np.concatenate(hits), p=np.concatenate(probabilities))


def evaluate(model: torch.nn.Module, batch: TaskBatch, chunk_size: int = 64) -> CapabilityScore:
    """Score a model (a TransformerBridge or any tokens -> logits module) on a task batch.

    Args:
        model: maps ``Int[Tensor, "batch pos"]`` to logits ``Float[Tensor, "batch pos d_vocab"]``
            (a Hugging Face model's ``.logits`` output is accepted too); for a padded batch it
            must accept ``attention_mask=`` and ``position_ids=`` (bridges and HF models do).
        batch: the task's prompts.
        chunk_size: prompts per forward pass (bounds memory).

    Returns:
        Greedy accuracy (fraction) and mean p(answer) (probability) over all prompts
        (:func:`evaluate_prompts` keeps the per-prompt values too).
    """
    return evaluate_prompts(model, batch, chunk_size).score
