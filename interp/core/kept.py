"""Evaluations kept for the process: a checkpoint's answer, asked for again, is not computed
again and its checkpoint not loaded again (ground floor).

A notebook asks the same question several times: the scan, the main job (``el.run_study``), the
population, the scrubber and readiness each score the checkpoints of a run on the same prompts.
Each answer is kept here, keyed by what decides it:

* the **weights**: the weight digest of every step the answer reads (sha256 of the weight files'
  bytes, :meth:`interp.sources.CheckpointSource.digest`; one step, or a ranking's pre and post),
  the dtype the source loads them in (``float32`` by default) and the device (``None``: the
  source's default);
* the **task and prompt set**: a digest of the batch's tensors (tokens, answers, answer
  positions, attention mask, distractors) and its ``prepend_bos`` (:func:`batch_digest`), or of
  the tokens a measurement runs on (:func:`tensor_digest`);
* the **measurement** (``what``) and its settings: ``"capability"`` and ``"answers"`` (greedy
  accuracy and mean p(answer), and the per-prompt values, :func:`interp.tasks.evaluate_prompts`),
  ``"shape"`` (the model's layers, width and heads), ``"patterns:<n>"`` (every head's pattern on
  the first ``n`` prompts, the scrubber's), ``"head-scores"`` (:mod:`interp.scores`),
  ``"ideal:..."`` (readiness's ideal-pattern values), ``"ranking:..."`` (a head ranking between
  two steps with every setting it reads, :func:`interp.ranking.rank_heads_between`).

So the same weights read through another source object (a suite opened twice, ``embedded/<run>``
and its folder) are found again, and a changed prompt set, setting or weight file is a new key: a
damaged or retrained checkpoint hashes to another digest and is loaded (and refused) as it is. A
source without a digest (``digest`` returns None, as test doubles do) is never kept. A source
object hashes a step's files once and remembers the digest, so a file rewritten while the same
source object stays open is not seen; open the source again after retraining.

The users are the evaluation road (:class:`interp.evaluator.StepEvaluator` and its scrubber
subclass), :func:`interp.scores.head_scores_over_checkpoints`, :func:`interp.readiness.readiness`
and :func:`interp.ranking.rank_heads_between`; the evaluators record which steps they took from here
(``reused``), and the calls say so in their progress line.

Memory: a capability score is three numbers; a step's patterns on 4 prompts of a 2-layer,
4-head model are ~10 KB; a ranking of a 12-layer model on 64 prompts ~15 MB. The store holds at
most :data:`MAX_BYTES` (estimated by :func:`size_of`: array, tensor and table bytes) and
:data:`MAX_ITEMS` answers, the least recently used dropped first; an answer larger than the whole
bound is not kept. :meth:`KeptEvaluations.clear` empties the store
(``el.StepEvaluator.kept.clear()``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import sys
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

__all__ = ["KEPT", "MAX_BYTES", "MAX_ITEMS", "KeptEvaluations", "batch_digest", "size_of", "tensor_digest"]

#: Most answers kept at once (the least recently used are dropped first).
MAX_ITEMS = 200_000
#: Most bytes kept at once (:func:`size_of`; the least recently used are dropped first): 1 GiB.
MAX_BYTES = 1 << 30


def _hash_tensor(h, value) -> None:
    tensor = value.detach().cpu().contiguous()
    h.update(f"{tuple(tensor.shape)}{tensor.dtype}".encode())
    h.update(tensor.numpy().tobytes())


def batch_digest(batch) -> str:
    """sha256 hex of a ``TaskBatch``'s prompt set: its task name, ``prepend_bos`` and the bytes of
    ``tokens``, ``answers``, ``answer_pos``, ``attention_mask`` and ``distractors`` (None when absent)."""
    h = hashlib.sha256()
    h.update(f"{getattr(batch, 'task', '')}|{getattr(batch, 'prepend_bos', '')}".encode())
    for name in ("tokens", "answers", "answer_pos", "attention_mask", "distractors"):
        value = getattr(batch, name, None)
        h.update(f"|{name}:".encode())
        if value is not None:
            _hash_tensor(h, value)
    return h.hexdigest()


def tensor_digest(tensor, *settings: Any) -> str:
    """sha256 hex of a tensor's shape, dtype and bytes and of ``settings`` (their ``repr``): the
    prompt-set part of a key for a measurement that runs on bare tokens (the head scores)."""
    h = hashlib.sha256()
    _hash_tensor(h, tensor)
    h.update(repr(settings).encode())
    return h.hexdigest()


def size_of(value: Any, _depth: int = 0) -> int:
    """Bytes ``value`` holds, estimated: numpy arrays and torch tensors by their data, pandas
    tables by ``memory_usage(deep=True)``, containers and dataclasses or objects by their items
    (10 levels deep), anything else by ``sys.getsizeof``."""
    if _depth > 10:
        return 0
    nbytes = getattr(value, "nbytes", None)
    if isinstance(nbytes, int) and not isinstance(value, (bytes, bytearray)):  # numpy arrays, torch tensors
        return nbytes
    if hasattr(value, "element_size") and hasattr(value, "numel"):
        return int(value.element_size() * value.numel())
    memory_usage = getattr(value, "memory_usage", None)
    if callable(memory_usage) and hasattr(value, "columns"):  # a pandas DataFrame
        return int(memory_usage(deep=True).sum())
    if isinstance(value, dict):
        return sum(size_of(k, _depth + 1) + size_of(v, _depth + 1) for k, v in value.items()) + 64
    if isinstance(value, (list, tuple, set, frozenset)):
        return sum(size_of(v, _depth + 1) for v in value) + 56
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return sum(size_of(getattr(value, f.name), _depth + 1) for f in dataclasses.fields(value)) + 56
    if hasattr(value, "__dict__") and not isinstance(value, type):
        return size_of(vars(value), _depth + 1)
    return sys.getsizeof(value)


class KeptEvaluations:
    """The process's store of answers: ``(weight digests, dtype, device, prompt-set digest, what)
    -> value``, at most ``max_bytes`` (:func:`size_of`) and ``max_items`` of them, least recently
    used dropped first.

    ``key`` builds the key (None when the source gives no digest), ``get``/``put`` read and
    write it; ``hits`` and ``misses`` count look-ups and ``nbytes`` the bytes held since the last
    :meth:`clear`.
    """

    def __init__(self, max_items: int = MAX_ITEMS, max_bytes: int = MAX_BYTES) -> None:
        self.max_items = max_items
        self.max_bytes = max_bytes
        self._store: OrderedDict[tuple, tuple[Any, int]] = OrderedDict()
        self.nbytes = 0
        self.hits = 0
        self.misses = 0

    @staticmethod
    def key(source, step: int | Sequence[int], batch_key: str, what: str, device: Any = None) -> tuple | None:
        """The key of ``what`` measured on ``source``'s ``step`` (or steps, in the order given:
        a ranking's pre and post) with the prompt set ``batch_key`` (:func:`batch_digest`) on
        ``device`` (None: the source's default), or None when the source has no digest for a step."""
        digest = getattr(source, "digest", None)
        if not callable(digest):
            return None
        steps = list(step) if isinstance(step, (list, tuple)) else [step]
        values = [digest(s) for s in steps]
        if not all(isinstance(value, str) and value for value in values):
            return None
        weights = values[0] if len(values) == 1 else tuple(values)
        return (weights, str(getattr(source, "dtype", "")), str(device), batch_key, what)

    def get(self, key: tuple | None) -> Any:
        """The kept value of ``key``, or None (a None key is never kept)."""
        if key is None or key not in self._store:
            self.misses += 1
            return None
        self.hits += 1
        self._store.move_to_end(key)
        return self._store[key][0]

    def put(self, key: tuple | None, value: Any) -> None:
        """Keep ``value`` under ``key`` (nothing for a None key, or a value larger than ``max_bytes``)."""
        if key is None:
            return
        size = size_of(value)
        if key in self._store:
            self.nbytes -= self._store.pop(key)[1]
        if size > self.max_bytes:
            return
        self._store[key] = (value, size)
        self.nbytes += size
        while len(self._store) > self.max_items or self.nbytes > self.max_bytes:
            self.nbytes -= self._store.popitem(last=False)[1][1]

    def clear(self) -> None:
        """Forget every kept answer and reset the counters."""
        self._store.clear()
        self.nbytes = self.hits = self.misses = 0

    def __len__(self) -> int:
        return len(self._store)


#: The process's one store (read and written by :class:`interp.evaluator.StepEvaluator` and the
#: measurements named in the module docstring).
KEPT = KeptEvaluations()
