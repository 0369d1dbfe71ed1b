"""Evaluations kept for the process: a checkpoint's score on a task, asked for again, is not
computed again (ground floor).

A notebook asks the same question several times: the scan, the main job (``el.run_study``), the
population and the scrubber each score every checkpoint of a run on the same prompts. Each
answer is kept here, keyed by what decides it:

* the **weights**: the step's weight digest (sha256, :meth:`interp.sources.CheckpointSource.digest`)
  and the dtype the source loads them in (``float32`` by default);
* the **task and prompt set**: a digest of the batch's tensors (tokens, answers, answer
  positions, attention mask, distractors) and its ``prepend_bos``;
* the **measurement** (``what``): ``"capability"`` (greedy accuracy and mean p(answer),
  :func:`interp.tasks.evaluate`), ``"patterns:<n>"`` (every head's pattern on the first ``n``
  prompts, the scrubber's), ``"head-scores"`` (:mod:`interp.scores`).

So the same weights read through another source object (a suite opened twice, ``embedded/<run>``
and its folder) are found again, and a changed prompt set or weight file is a new key. A source
without a digest (``digest`` returns None, as test doubles do) is never kept. The one user is
:class:`interp.emergence.StepEvaluator` (and its scrubber subclass), the road every command and
notebook call takes to score checkpoints; it records which steps it took from here
(``reused``), and the calls say so in their progress line.

Memory: a capability score is three numbers; a step's patterns on 4 prompts of a 2-layer,
4-head model are ~10 KB. At most :data:`MAX_ITEMS` answers are kept, the oldest dropped first;
:meth:`KeptEvaluations.clear` empties the store (``el.StepEvaluator.kept.clear()``).
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from typing import Any

__all__ = ["KEPT", "MAX_ITEMS", "KeptEvaluations", "batch_digest"]

#: Most answers kept at once (the oldest are dropped first).
MAX_ITEMS = 200_000


def batch_digest(batch) -> str:
    """sha256 hex of a ``TaskBatch``'s prompt set: its task name, ``prepend_bos`` and the bytes of
    ``tokens``, ``answers``, ``answer_pos``, ``attention_mask`` and ``distractors`` (None when absent)."""
    h = hashlib.sha256()
    h.update(f"{getattr(batch, 'task', '')}|{getattr(batch, 'prepend_bos', '')}".encode())
    for name in ("tokens", "answers", "answer_pos", "attention_mask", "distractors"):
        value = getattr(batch, name, None)
        h.update(f"|{name}:".encode())
        if value is not None:
            tensor = value.detach().cpu().contiguous()
            h.update(f"{tuple(tensor.shape)}{tensor.dtype}".encode())
            h.update(tensor.numpy().tobytes())
    return h.hexdigest()


class KeptEvaluations:
    """The process's store of answers: ``(weights digest, dtype, batch digest, what) -> value``.

    ``key`` builds the key (None when the source gives no digest), ``get``/``put`` read and
    write it; ``hits`` and ``misses`` count look-ups since the last :meth:`clear`.
    """

    def __init__(self, max_items: int = MAX_ITEMS) -> None:
        self.max_items = max_items
        self._store: OrderedDict[tuple, Any] = OrderedDict()
        self.hits = 0
        self.misses = 0

    @staticmethod
    def key(source, step: int, batch_key: str, what: str) -> tuple | None:
        """The key of ``what`` measured on ``source``'s ``step`` with the prompt set ``batch_key``
        (:func:`batch_digest`), or None when the source has no digest for the step."""
        digest = getattr(source, "digest", None)
        value = digest(step) if callable(digest) else None
        if not isinstance(value, str) or not value:
            return None
        return (value, str(getattr(source, "dtype", "")), batch_key, what)

    def get(self, key: tuple | None) -> Any:
        """The kept value of ``key``, or None (a None key is never kept)."""
        if key is None or key not in self._store:
            self.misses += 1
            return None
        self.hits += 1
        self._store.move_to_end(key)
        return self._store[key]

    def put(self, key: tuple | None, value: Any) -> None:
        """Keep ``value`` under ``key`` (nothing for a None key)."""
        if key is None:
            return
        self._store[key] = value
        self._store.move_to_end(key)
        while len(self._store) > self.max_items:
            self._store.popitem(last=False)

    def clear(self) -> None:
        """Forget every kept answer and reset the counters."""
        self._store.clear()
        self.hits = self.misses = 0

    def __len__(self) -> int:
        return len(self._store)


#: The process's one store (read and written by :class:`interp.emergence.StepEvaluator`).
KEPT = KeptEvaluations()
