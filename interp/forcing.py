"""Forcing the pattern during training: the attention-bias intervention in the embedded trainer.

Baherwani et al. 2026 add the true attention pattern to the attention logits of a synthetic task
and the loss plateau disappears (``synthetic.interventions.AttentionBias``).  Here the same idea
runs in the embedded trainer (:func:`interp.sources.embedded.train_run` ``forcing=``, which calls
:meth:`Forcing.attention_context` and so needs no import of this module): for the chosen
heads, ``β(t) · log(ideal + ε)`` is added to the attention scores before the softmax, ``ideal``
the head's ideal pattern on the training batch's tokens (:mod:`interp.patching.ideal`;
``[batch, query_pos, key_pos]``, computed per step from that step's tokens).  Where the ideal
pattern is 1 the bias is ``β·log(1 + ε) ≈ 0``; elsewhere ``β·log ε`` (−6.9 β nats at ε = 1e-3),
so ``softmax(scores + bias)`` multiplies the attention to every key off the ideal pattern by
``ε^β``.

Schedule (:meth:`Forcing.beta_at`, ``t`` = optimizer steps done): ``β`` for ``t < steps``, then
linearly to 0 over ``anneal_steps``, then 0.  β is a function of the step alone and the ideal
pattern of the step's tokens alone, so a forced run resumed from a saved step continues exactly
(tests/interp/test_forcing.py: bit for bit).  When ``β(t) = 0`` nothing is installed, so the step is
computed by exactly the plain trainer's code.

How the bias enters: a forward pre-hook on each chosen layer's ``GPTNeoXAttention`` replaces its
``attention_mask`` argument by an additive float mask ``[batch, n_heads, query_pos, key_pos]``
(``-inf`` above the diagonal, the bias on chosen heads, 0 on the others), which HF's eager and
SDPA attention add to ``q·kᵀ/√d_head`` before the softmax.  Only the training forward runs under
it: checkpoints are plain weights, and the capability is always measured without the bias.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from typing import Any

import torch
from jaxtyping import Int
from torch import Tensor

__all__ = ["Forcing", "attention_bias", "forced_attention"]


@dataclass(frozen=True)
class Forcing:
    """Which heads are biased toward which ideal pattern, how strongly and for how long.

    Attributes:
        heads: ``((layer, head, pattern name), ...)``; names of
            :data:`interp.patching.ideal.IDEAL_PATTERNS`.
        beta: bias scale (nats per unit of ``log(ideal + eps)``), ``>= 0``.
        steps: optimizer steps at full ``beta`` (N).
        anneal_steps: steps over which ``beta`` falls linearly to 0 after ``steps`` (0: at once).
        eps: ``ε`` in ``log(ideal + ε)``, ``> 0``.

    Raises:
        ValueError: an unknown pattern, a malformed head, a negative beta / steps, or ``eps <= 0``.

    Source: the attention-bias intervention of Baherwani et al. 2026, "Emergent Capabilities Arise
    Randomly from Learning Sparse Attention Patterns" (``beta · log(ideal + eps)`` added to the
    chosen heads' attention scores), applied here to a real model's training.
    """

    heads: tuple[tuple[int, int, str], ...]
    beta: float = 1.0
    steps: int = 500
    anneal_steps: int = 250
    eps: float = 1e-3

    def __post_init__(self) -> None:
        from interp.patching.ideal import IDEAL_PATTERNS

        heads = []
        for item in self.heads:
            try:
                layer, head, name = item
                layer, head = int(layer), int(head)
            except (TypeError, ValueError):
                raise ValueError(f"forcing head {item!r} must be (layer, head, pattern name)") from None
            if name not in IDEAL_PATTERNS:
                raise ValueError(f"forcing pattern {name!r} is unknown; valid: {', '.join(IDEAL_PATTERNS)}")
            if layer < 0 or head < 0:
                raise ValueError(f"forcing head L{layer}H{head}: layer and head must be >= 0")
            heads.append((layer, head, name))
        if not heads:
            raise ValueError("forcing needs at least one (layer, head, pattern) head")
        object.__setattr__(self, "heads", tuple(heads))
        if not (self.beta >= 0 and math.isfinite(self.beta)):
            raise ValueError(f"forcing beta={self.beta} must be a finite number >= 0")
        if self.steps < 0 or self.anneal_steps < 0:
            raise ValueError(f"forcing steps={self.steps} and anneal_steps={self.anneal_steps} must be >= 0")
        if not self.eps > 0:
            raise ValueError(f"forcing eps={self.eps} must be > 0")

    @classmethod
    def of(cls, heads: Mapping[tuple[int, int], str], **kw) -> Forcing:
        """From ``{(layer, head): pattern name}``."""
        return cls(tuple((l, h, p) for (l, h), p in sorted(heads.items())), **kw)

    def beta_at(self, step: int) -> float:
        """β in force for optimizer step ``step`` (0-based): ``beta`` before ``steps``, then linear to 0."""
        if step < self.steps:
            return float(self.beta)
        if self.anneal_steps and step < self.steps + self.anneal_steps:
            return float(self.beta) * (1.0 - (step - self.steps + 1) / (self.anneal_steps + 1))
        return 0.0

    @property
    def last_forced_step(self) -> int:
        """The last step with ``β > 0`` (``-1`` if none)."""
        return self.steps + self.anneal_steps - 1 if self.beta > 0 else -1

    def label(self) -> str:
        """``L0H0=previous_token+L1H0=induction beta=1 N=500+250``."""
        heads = "+".join(f"L{l}H{h}={p}" for l, h, p in self.heads)
        return f"{heads} beta={self.beta:g} N={self.steps}+{self.anneal_steps}"

    def as_dict(self) -> dict:
        """JSON-ready fields (recorded beside a forced run)."""
        return {**asdict(self), "heads": [list(h) for h in self.heads]}

    def attention_context(
        self, model: Any, tokens: Int[Tensor, "batch pos"], step: int
    ) -> contextlib.AbstractContextManager[float]:
        """:func:`forced_attention` of this forcing: the context the embedded trainer runs the
        training forward of ``step`` in (:func:`interp.sources.embedded.train_run` ``forcing=``)."""
        return forced_attention(model, self, tokens, step)


def attention_bias(
    forcing: Forcing, tokens: Int[Tensor, "batch pos"], layer: int, n_heads: int, beta: float
) -> torch.Tensor:
    """The additive mask of ``layer``: ``[batch, n_heads, pos, pos]`` float32, ``-inf`` above the
    diagonal, ``beta · log(ideal + eps)`` on the chosen heads of the layer, 0 on the others."""
    from interp.patching.ideal import ideal_pattern

    n, pos = tokens.shape
    bias = torch.zeros(n, n_heads, pos, pos)
    for l, head, name in forcing.heads:
        if l == layer:
            bias[:, head] = beta * torch.log(ideal_pattern(name, tokens) + forcing.eps)
    causal = torch.ones(pos, pos, dtype=torch.bool).tril()
    return bias.masked_fill(~causal, float("-inf"))


def _attention_modules(model: torch.nn.Module) -> list[torch.nn.Module]:
    layers = getattr(getattr(model, "gpt_neox", None), "layers", None)
    if layers is None:
        raise ValueError(f"forcing needs a GPTNeoXForCausalLM (model.gpt_neox.layers), got {type(model).__name__}")
    return [layer.attention for layer in layers]


@contextlib.contextmanager
def forced_attention(
    model: Any, forcing: Forcing | None, tokens: Int[Tensor, "batch pos"], step: int
) -> Iterator[float]:
    """While active, the chosen heads' attention scores of ``model`` get the bias of ``step``.

    Yields β of the step; installs nothing when ``forcing`` is None or β is 0.

    Raises:
        ValueError: not a GPT-NeoX causal LM, or a head outside the model.
    """
    beta = 0.0 if forcing is None else forcing.beta_at(step)
    if forcing is None or beta == 0.0:
        yield beta
        return
    modules = _attention_modules(model)
    n_heads = int(model.config.num_attention_heads)
    for layer, head, _ in forcing.heads:
        if not (layer < len(modules) and head < n_heads):
            raise ValueError(
                f"forcing head L{layer}H{head} is outside the model "
                f"(layers 0..{len(modules) - 1}, heads 0..{n_heads - 1})"
            )
    tokens = tokens.cpu()
    handles = []
    for layer in sorted({l for l, _, _ in forcing.heads}):
        mask = attention_bias(forcing, tokens, layer, n_heads, beta)

        def pre_hook(module, args, kwargs, mask=mask):
            hidden = args[0] if args else kwargs["hidden_states"]
            kwargs["attention_mask"] = mask.to(hidden.device, hidden.dtype)
            return args, kwargs

        handles.append(modules[layer].register_forward_pre_hook(pre_hook, with_kwargs=True))
    try:
        yield beta
    finally:
        for handle in handles:
            handle.remove()
