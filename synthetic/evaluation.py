"""The evaluation of a synthetic-task run: :class:`Evaluator`, the metrics of a model on a fixed
evaluation set (losses in nats, per-output losses, per-head attention entropy and alignment with
the task's true pattern), as :func:`synthetic.training.train` and
:func:`synthetic.ensemble.train_ensemble` record them at every evaluation step.

Metrics follow Baherwani et al. 2026 (loss per output bit / cell; attention entropy and alignment
with the true sparse pattern); their definitions live in :mod:`synthetic.metrics`.
"""

from __future__ import annotations

import torch
from jaxtyping import Int
from torch import Tensor, nn

from synthetic.datasets import SyntheticTask
from synthetic.interventions import AttentionBias
from synthetic.metrics import (
    attention_alignment,
    attention_entropy,
    loss_per_output,
    masked_mean,
    per_position_loss,
)
from synthetic.models import has_attention

__all__ = ["Evaluator"]


class Evaluator:
    """Metrics of a model on a fixed evaluation set (see :func:`train` for the columns).

    With an active ``bias`` (:class:`synthetic.interventions.AttentionBias`, β ≠ 0) the losses
    are measured with the bias in force (the objective being trained) and ``loss_nobias`` and
    every head metric (entropy, alignment, per-row entropy) from a second forward with β = 0: a
    biased pattern measures the bias (β = 3 alone puts most of a head's mass on the true keys),
    not what the weights learned.
    """

    def __init__(
        self,
        task: SyntheticTask,
        model: nn.Module,
        tokens: Int[Tensor, "batch pos"],
        row_entropy: bool = False,
        bias: AttentionBias | None = None,
    ):
        self.task, self.model, self.tokens = task, model, tokens
        self.row_entropy, self.bias = row_entropy, bias
        device = tokens.device
        self.loss_mask = task.loss_mask.to(device)
        self.target_mask = task.target_mask.to(device)
        self.output_index = task.output_index.to(device)
        self.pattern_mask = task.pattern_mask.to(device)
        self.attention = has_attention(model)
        cfg = getattr(model, "cfg", None)
        self.n_layers = cfg.n_layers if self.attention else 0
        self.n_heads = cfg.n_heads if self.attention else 0
        L = task.seq_len
        # Bound cached patterns to ~2^24 floats per chunk.
        per_seq = max(1, self.n_layers * self.n_heads * L * L)
        self.chunk = max(1, min(len(tokens), 2**24 // per_seq))

    @torch.no_grad()
    def __call__(self) -> dict[str, float]:
        beta = self.bias.beta if self.bias is not None else 0.0
        if beta == 0.0:
            per_pos, heads = self._forward(self.attention)
            per_pos_nobias = per_pos
        else:
            per_pos, _ = self._forward(False)
            self.bias.beta = 0.0
            try:
                per_pos_nobias, heads = self._forward(self.attention)
            finally:
                self.bias.beta = beta
        row = {
            "loss": masked_mean(per_pos, self.loss_mask).item(),
            "loss_target": masked_mean(per_pos, self.target_mask).item(),
        }
        if self.bias is not None:
            row["loss_nobias"] = masked_mean(per_pos_nobias, self.loss_mask).item()
        per_out = loss_per_output(per_pos, self.output_index, self.task.S).tolist()
        row.update({f"loss_out_{i}": v for i, v in enumerate(per_out)})
        if heads is not None:
            row.update(self._head_columns(*heads))
        return row

    def _forward(self, with_heads: bool) -> tuple[Tensor, tuple[Tensor, Tensor, Tensor | None] | None]:
        """One pass over the evaluation set: per-position losses ``[batch, query_pos]`` (nats)
        and, ``with_heads``, the batch means of entropy and alignment ``[layer, head]`` and of
        per-query entropy ``[layer, head, query_pos]`` (None unless ``row_entropy``)."""
        losses, entropy, alignment, query_entropy = [], 0.0, 0.0, 0.0
        names = [f"blocks.{l}.attn.hook_pattern" for l in range(self.n_layers)]
        for chunk in self.tokens.split(self.chunk):
            if not with_heads:
                losses.append(per_position_loss(self.model(chunk), chunk))
                continue
            logits, cache = self.model.run_with_cache(chunk, names_filter=lambda n: n in names)
            patterns = [cache[n] for n in names]  # per layer [batch, head, q, k]
            entropy = entropy + len(chunk) * torch.stack([attention_entropy(p, self.target_mask) for p in patterns])
            alignment = alignment + len(chunk) * torch.stack(
                [attention_alignment(p, self.pattern_mask, self.target_mask) for p in patterns]
            )
            if self.row_entropy:  # per query position: [layer, head, query_pos], summed over the batch
                query_entropy = query_entropy + torch.stack([-(torch.xlogy(p, p)).sum(-1).sum(0) for p in patterns])
            del cache
            losses.append(per_position_loss(logits, chunk))
        if not with_heads:
            return torch.cat(losses), None
        n = len(self.tokens)
        return torch.cat(losses), (entropy / n, alignment / n, query_entropy / n if self.row_entropy else None)

    def _head_columns(self, entropy: Tensor, alignment: Tensor, per_query: Tensor | None) -> dict[str, float]:
        """``entropy_L{l}H{h}``, ``alignment_L{l}H{h}`` and, with per-query entropy, the per-row
        columns of :meth:`_row_entropy`."""
        ent, ali = entropy.tolist(), alignment.tolist()
        out = {}
        for l in range(self.n_layers):
            for h in range(self.n_heads):
                out[f"entropy_L{l}H{h}"] = ent[l][h]
                out[f"alignment_L{l}H{h}"] = ali[l][h]
        if per_query is not None:
            out.update(self._row_entropy(per_query))
        return out

    def _row_entropy(self, per_query: Tensor) -> dict[str, float]:
        """``entropy_L{l}H{h}_out{i}``: head entropy (nats) averaged over the queries that predict
        output ``i`` (bit / cell i of a next state) -- what tells which row of the true pattern a
        head has learned, where the all-query mean blurs it (the staircase of Baherwani et al.
        2026, where each output's loss drop should coincide with a head's entropy drop)."""
        out = {}
        for i in range(self.task.S):
            queries = self.target_mask & (self.output_index == i)
            values = per_query[:, :, queries].mean(-1).tolist()
            for l in range(self.n_layers):
                for h in range(self.n_heads):
                    out[f"entropy_L{l}H{h}_out{i}"] = values[l][h]
        return out
