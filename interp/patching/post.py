"""What the engine needs from the post checkpoint, detached from its model: :class:`PostCheckpoint`.

Built by :func:`interp.patching.engine.capture_post` (one forward of the post model), by
:func:`interp.patching.engine.post_from_patterns`, and by
:meth:`interp.patching.ideal.IdealPatterns.post` (ideal patterns in place of a model); read by
the reference and fast engines. A module of its own so that the ideal patterns build one without
importing the engine (which takes ``IdealPatterns``); ``interp.patching.engine.PostCheckpoint``
and ``interp.patching.PostCheckpoint`` are this class.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from jaxtyping import Float
from torch import Tensor

from interp.core.metrics import MetricLike, resolve_metric
from interp.core.objects import results_equal, short_repr
from interp.core.task_batch import TaskBatch
from interp.patching.targets import hook_name

__all__ = ["PostCheckpoint"]


@dataclass
class PostCheckpoint:
    """What the engine needs from the post checkpoint, detached from its model.

    Attributes:
        activations: hook name -> activation on the batch's tokens (float32, on the model's
            device): ``hook_pattern`` ``[batch, head, query_pos, key_pos]``, ``hook_q/k/v/z``
            ``[batch, pos, head, d_head]``, ``hook_mlp_out`` ``[batch, pos, d_model]`` per block.
        answer_logits: ``Float[Tensor, "batch d_vocab"]`` the post logits at the answer positions.
        weights: parameter name -> tensor (None if not captured: weight targets then fail).
        n_layers, n_heads: the shape the pre checkpoint must share.
        tokens: ``Int[Tensor, "batch pos"]`` the prompts the activations were captured on (None:
            not recorded, as from ``post_from_patterns``); the engine raises ``ValueError`` when a
            batch's tokens differ.
    """

    activations: dict[str, Tensor]
    answer_logits: Tensor | None
    weights: dict[str, Tensor] | None
    n_layers: int
    n_heads: int
    tokens: Tensor | None = field(default=None, repr=False)

    __eq__ = results_equal
    __repr__ = short_repr

    def activation(self, kind: str, layer: int) -> Tensor:
        """The captured activation of ``kind`` at ``layer``.

        Returns:
            The activation at ``hook_name(kind, layer)``, float32: ``pattern``
            ``Float[Tensor, "batch head query_pos key_pos"]``, ``q``/``k``/``v``/``z``
            ``Float[Tensor, "batch pos head d_head"]``, ``mlp`` ``Float[Tensor, "batch pos d_model"]``.

        Raises:
            ValueError: it was not captured.
        """
        name = hook_name(kind, layer)
        if name not in self.activations:
            raise ValueError(f"post checkpoint has no {name} captured; capture_post(..., kinds=) must include {kind!r}")
        return self.activations[name]

    def values(self, batch: TaskBatch, metric: MetricLike = "p") -> Float[Tensor, " batch"]:
        """The metric of the post checkpoint per prompt (metric units, CPU).

        Raises:
            ValueError: no answer logits were captured (a ``PostCheckpoint`` built from patterns
                or ideal patterns).
        """
        if self.answer_logits is None:
            raise ValueError("post checkpoint has no answer logits captured")
        return resolve_metric(metric)(self.answer_logits, batch.to(self.answer_logits.device)).float().cpu()
