"""Attention-bias intervention: add ``β · mask`` to the pre-softmax attention scores.

Paper (Baherwani et al. 2026, arXiv 2606.25010, abstract): adding the true pattern to the attention
logits removes the loss plateau; scale, layers, heads and schedule are unknown, so all four
are parameters here. Default: every layer, every head, constant β for the whole run.

The bias is a forward hook on ``blocks.{l}.attn.hook_attn_scores``
(``[batch, n_heads, query_pos, key_pos]``, after the causal mask, before the softmax), so it
needs a model whose scores hook is genuinely pre-softmax: the transformer of
:mod:`synthetic.models.transformer`. ``softmax(scores + β·mask)`` multiplies the attention to
each true key by ``e^β`` before renormalising.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from jaxtyping import Float
from torch import Tensor, nn

from synthetic.models import has_attention
from synthetic.models.transformer import PreSoftmaxAttention

BIAS_SCHEDULES = ("constant", "linear-anneal")


def bias_beta(beta: float, schedule: str, step: int, anneal_steps: int) -> float:
    """β in force at ``step`` (optimizer updates done so far).

    ``"constant"``: ``beta`` throughout. ``"linear-anneal"``: ``beta · max(0, 1 − step /
    anneal_steps)``, reaching 0 at ``anneal_steps`` and staying there.

    Raises:
        ValueError: unknown schedule or ``anneal_steps < 1`` for the anneal.
    """
    if schedule == "constant":
        return float(beta)
    if schedule == "linear-anneal":
        if anneal_steps < 1:
            raise ValueError(f"anneal_steps={anneal_steps} is invalid: must be ≥ 1")
        return float(beta) * max(0.0, 1.0 - step / anneal_steps)
    raise ValueError(f"bias schedule={schedule!r} is unknown: choose one of {', '.join(BIAS_SCHEDULES)}")


def parse_indices(text: str | None, n: int, what: str) -> list[int] | None:
    """Parse ``"0,2,3"`` (or None / ``"all"`` → None, meaning all) into indices ``< n``.

    Raises:
        ValueError: a non-integer item, or an index outside ``[0, n)`` (``what`` names it).
    """
    if text is None or str(text).strip().lower() in ("", "all"):
        return None
    out = []
    for item in str(text).split(","):
        try:
            idx = int(item)
        except ValueError:
            raise ValueError(f"{what} index {item.strip()!r} is not an integer (e.g. '0,2' or 'all')") from None
        out.append(idx)
    check_indices(out, n, what)
    return sorted(set(out))


def check_indices(indices: list[int] | None, n: int, what: str) -> None:
    """Raise ValueError when an index is outside ``[0, n)``.

    Raises:
        ValueError: an index of ``indices`` outside ``[0, n)`` (the message names ``what``).
    """
    for idx in indices or []:
        if not 0 <= idx < n:
            raise ValueError(f"{what} index {idx} is out of range: valid {what} indices are 0..{n - 1}")


class AttentionBias:
    """Adds ``beta · mask`` to the chosen heads' pre-softmax scores while active.

    Use as a context manager (hooks removed on exit)::

        with AttentionBias(model, task.pattern_mask, beta=5.0) as bias:
            logits = model(tokens)
            bias.beta = 2.5   # schedules change β without re-registering hooks

    Source: Baherwani et al. 2026, "Emergent Capabilities Arise Randomly from Learning Sparse
    Attention Patterns" (the attention-bias intervention).

    Args:
        model: a transformer from :func:`synthetic.models.build_model` (``arch="transformer"``).
        mask: ``Float[Tensor, "query_pos key_pos"]``, the true pattern (0/1, or any weights);
            must match the inputs' sequence length and fit in ``model.cfg.n_ctx``.
        beta: bias scale, logits (nats) added per unit of mask.
        layers, heads: indices to bias (a list, or a string such as ``"0,2"``); None or
            ``"all"`` → all.

    Raises:
        ValueError: a model without pre-softmax attention hooks, a mask that is not square
            2-D or longer than ``n_ctx``, or a layer/head index out of range; at forward
            time, a mask whose shape differs from the scores' ``[query_pos, key_pos]``.
    """

    def __init__(
        self,
        model: nn.Module,
        mask: Float[Tensor, "query_pos key_pos"],
        beta: float,
        layers: list[int] | str | None = None,
        heads: list[int] | str | None = None,
    ) -> None:
        if not has_attention(model) or not _scores_are_presoftmax(model):
            raise ValueError(
                f"attention bias needs a transformer with pre-softmax hook_attn_scores; "
                f"{type(model).__name__} has none (arch must be 'transformer')"
            )
        cfg = model.cfg
        if mask.dim() != 2 or mask.shape[0] != mask.shape[1] or mask.shape[0] > cfg.n_ctx:
            raise ValueError(
                f"bias mask shape {tuple(mask.shape)} is invalid: need a square "
                f"[query_pos, key_pos] mask with at most n_ctx={cfg.n_ctx} positions"
            )
        if isinstance(layers, str):
            layers = parse_indices(layers, cfg.n_layers, "layer")
        if isinstance(heads, str):
            heads = parse_indices(heads, cfg.n_heads, "head")
        check_indices(layers, cfg.n_layers, "layer")
        check_indices(heads, cfg.n_heads, "head")
        self.model = model
        self.beta = float(beta)
        self.layers = list(range(cfg.n_layers)) if layers is None else list(layers)
        head_weight = torch.zeros(cfg.n_heads)
        head_weight[list(range(cfg.n_heads)) if heads is None else heads] = 1.0
        device = next(model.parameters()).device
        # [n_heads, q, k]: mask on the chosen heads, zeros elsewhere; scaled by β per call.
        self._bias = (head_weight[:, None, None] * mask.float()[None]).to(device)
        self._ctx = None

    def _hook(self, scores: Float[Tensor, "batch n_heads q k"], hook) -> Tensor:
        if scores.shape[-2:] != self._bias.shape[-2:]:
            raise ValueError(
                f"bias mask shape {tuple(self._bias.shape[-2:])} does not match attention "
                f"scores [query_pos, key_pos] = {tuple(scores.shape[-2:])} at {hook.name}"
            )
        if self.beta == 0.0:
            return scores
        return scores + self.beta * self._bias.to(scores.dtype)

    def hooks(self) -> list[tuple[str, Callable]]:
        """``(hook name, fn)`` pairs for ``model.hooks(fwd_hooks=…)`` / ``run_with_hooks``."""
        return [(f"blocks.{layer}.attn.hook_attn_scores", self._hook) for layer in self.layers]

    def __enter__(self) -> AttentionBias:
        self._ctx = self.model.hooks(fwd_hooks=self.hooks())
        self._ctx.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        ctx, self._ctx = self._ctx, None
        if ctx is not None:
            ctx.__exit__(*exc)


def _scores_are_presoftmax(model: nn.Module) -> bool:
    blocks = getattr(model, "blocks", None)
    if blocks is None:
        return False
    return all(isinstance(getattr(block.attn, "original_component", None), PreSoftmaxAttention) for block in blocks)
