"""Training-curve and attention metrics for the synthetic tasks.

Per-position loss, attention entropy and alignment with the true pattern (from
``hook_pattern``), and two curve statistics, the loss-plateau length and the steps to a loss
threshold. Definitions follow the conventions of :mod:`synthetic.datasets` (the logits at
query position ``q`` predict token ``q + 1``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from jaxtyping import Bool, Float, Int
from torch import Tensor


def per_position_loss(
    logits: Float[Tensor, "batch pos d_vocab"], tokens: Int[Tensor, "batch pos"]
) -> Float[Tensor, "batch query_pos"]:
    """Cross-entropy (nats) of the prediction at each query position ``q < pos − 1``.

    Column ``q`` is ``−log p(tokens[:, q+1] | tokens[:, :q+1])``.
    """
    return F.cross_entropy(logits[:, :-1].transpose(1, 2).float(), tokens[:, 1:], reduction="none")


def masked_mean(values: Float[Tensor, "batch query_pos"], mask: Bool[Tensor, " pos"]) -> Float[Tensor, ""]:
    """Mean of ``values`` over the query positions where ``mask`` (length ``pos``) is True."""
    return values[:, mask[: values.shape[1]]].mean()


def loss_per_output(
    losses: Float[Tensor, "batch query_pos"], output_index: Int[Tensor, " pos"], S: int
) -> Float[Tensor, " S"]:
    """Mean loss of each output cell ``i`` of the predicted states, over all transitions.

    ``output_index[q]`` is the cell that query ``q`` predicts (``-1``: not a transition
    token). For the linear map with ``T = 1`` entry ``i`` is the loss on bit ``i`` of the
    second state: the paper's per-position "staircase".
    """
    idx = output_index[: losses.shape[1]].to(losses.device)
    keep = idx >= 0
    per_q = losses.mean(0)[keep]
    sums = torch.zeros(S, dtype=per_q.dtype, device=per_q.device).index_add_(0, idx[keep], per_q)
    counts = torch.bincount(idx[keep], minlength=S).to(per_q.dtype)
    return sums / counts


def attention_entropy(
    pattern: Float[Tensor, "batch n_heads query_pos key_pos"], query_mask: Bool[Tensor, " pos"]
) -> Float[Tensor, " n_heads"]:
    """Mean Shannon entropy (nats) of each head's attention distribution.

    Averaged over the batch and the query positions where ``query_mask`` is True (the target
    positions in training). A head attending uniformly to ``q + 1`` keys has ``ln(q + 1)``;
    one attending to a single key has 0.
    """
    p = pattern[:, :, query_mask]
    ent = -(torch.xlogy(p, p)).sum(-1)
    return ent.mean(dim=(0, 2))


def attention_alignment(
    pattern: Float[Tensor, "batch n_heads query_pos key_pos"],
    true_mask: Float[Tensor, "query_pos key_pos"],
    query_mask: Bool[Tensor, " pos"],
) -> Float[Tensor, " n_heads"]:
    """Attention mass each head puts on the true keys, probability in [0, 1].

    ``Σ_k pattern[b, h, q, k] · true_mask[q, k]`` averaged over the batch and the query
    positions where ``query_mask`` is True. 1: all mass on true keys. A uniform causal head
    scores ``Σ_k mask[q, k] / (q + 1)``.
    """
    mass = (pattern * true_mask).sum(-1)  # [batch, n_heads, query_pos]
    return mass[:, :, query_mask].mean(dim=(0, 2))


def _first_step(steps: Sequence[int], losses: Sequence[float], below: float) -> int | None:
    steps_arr = np.asarray(steps)
    hit = np.flatnonzero(np.asarray(losses, dtype=float) <= below)
    return int(steps_arr[hit[0]]) if hit.size else None


def plateau_length(
    steps: Sequence[int],
    losses: Sequence[float],
    plateau_loss: float,
    floor: float | None,
    margin: float = 0.05,
) -> int | None:
    """Length of the initial loss plateau, steps.

    Definition (ours; the paper does not state its own): the first evaluated step at which
    the loss is at or below ``plateau_loss − margin · (plateau_loss − floor)``, i.e. the loss has
    covered ``margin`` of the way from the plateau to the floor. ``plateau_loss`` is the loss of
    the best context-free predictor (``ln d_vocab`` for both tasks, where the curve sits until
    the first true-pattern row is learned); ``floor`` None counts as 0. Resolution is the
    evaluation interval. Returns None when the loss never leaves the plateau.
    """
    gap = plateau_loss - (floor or 0.0)
    return _first_step(steps, losses, plateau_loss - margin * gap)


def default_threshold(plateau_loss: float, floor: float | None, margin: float = 0.05) -> float:
    """``floor + margin · (plateau_loss − floor)``: the loss counted as "learned", nats."""
    base = floor or 0.0
    return base + margin * (plateau_loss - base)


def steps_to_threshold(steps: Sequence[int], losses: Sequence[float], threshold: float) -> int | None:
    """First evaluated step with loss ≤ ``threshold``; None when never reached."""
    return _first_step(steps, losses, threshold)
