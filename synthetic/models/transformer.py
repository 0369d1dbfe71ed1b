"""The transformer: a TransformerLens 4.x ``TransformerBridge`` booted natively from a config.

``TransformerBridge.boot_native`` builds a randomly initialised TL-native transformer (pre-LN,
split Q/K/V, causal). Its stock attention computes the softmax itself and fires
``hook_attn_scores`` *after* the fact with the post-softmax pattern, and discards edits
(transformer-lens 4.3, checked here). The attention-bias intervention needs a true
pre-softmax seam, so :func:`build_transformer` swaps each layer's attention for
:class:`PreSoftmaxAttention`, which computes exactly the same function but runs the
causally-masked scores through ``blocks.{l}.attn.hook_attn_scores`` before the softmax, as
``HookedTransformer`` did. When no hook is registered on the scores or the pattern (plain
training steps) it runs ``scaled_dot_product_attention`` instead, equal to float rounding
(1e-6; ``tests/synthetic/test_synth_training.py::test_unhooked_fast_attention_equals_the_hooked_path``)
and faster (``benchmarks/bench_synth_step.py``).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from jaxtyping import Float
from torch import Tensor
from transformer_lens.hook_points import HookPoint
from transformer_lens.model_bridge import TransformerBridge
from transformer_lens.model_bridge.sources.native.model import NativeAttention
from transformer_lens.utilities.activation_functions import apply_softcap

from synthetic.models import ModelConfig

# Our names → TransformerLens positional_embedding_type.
_TL_POSITIONAL = {"learned": "standard", "rotary": "rotary"}


class PreSoftmaxAttention(NativeAttention):
    """``NativeAttention`` whose pre-softmax scores pass through the bridge's
    ``hook_attn_scores`` (``[batch, n_heads, query_pos, key_pos]``, after the causal mask).

    Returns ``(output, None)`` so the bridge does not fire ``hook_attn_scores`` a second time
    post hoc with the pattern; ``hook_pattern`` still fires inside via ``pattern_fn``.
    """

    _scores_hook: HookPoint
    _pattern_hook: HookPoint

    def _hooks_active(self) -> bool:
        # A TransformerLens hook (run_with_hooks, run_with_cache, the attention-bias intervention)
        # is added through HookPoint.add_hook, which HookPoint.has_hooks sees.
        return self._scores_hook.has_hooks("fwd") or self._pattern_hook.has_hooks("fwd")

    def forward(  # type: ignore[override]
        self,
        hidden_states: Float[Tensor, "batch pos d_model"],
        attention_mask: Tensor | None = None,
        position_ids: Tensor | None = None,
        pattern_fn: Callable[[Tensor], Tensor] | None = None,
        **kwargs,
    ) -> tuple[Float[Tensor, "batch pos d_model"], None]:
        """Causal self-attention whose masked scores pass through ``hook_attn_scores`` before the
        softmax; without a mask, soft cap or hook, the fused ``scaled_dot_product_attention``.

        Args:
            hidden_states: the attention input.
            attention_mask: None; a padding mask ``Int[Tensor, "batch pos"]`` (1 = keep, 0 = mask
                the key); or a 4-D ``[batch, *, pos, pos]`` mask (bool, True = mask; or additive
                float, values below -1 mask). Combined with the causal mask.
            position_ids: ``Int[Tensor, "batch pos"]`` rotary positions (None: ``0 .. pos - 1``);
                read only with rotary embeddings.
            pattern_fn: applied to the pattern ``Float[Tensor, "batch n_heads query_pos key_pos"]``
                before the value product (the bridge's ``hook_pattern``).

        Returns:
            ``(output, None)``, ``output`` ``Float[Tensor, "batch pos d_model"]``.

        Raises:
            ValueError: an ``attention_mask`` that is neither 2-D nor 4-D (TransformerLens's
                ``_combine_attention_mask``).
        """
        batch, seq, _ = hidden_states.shape
        q = self.q(hidden_states).view(batch, seq, self.n_heads, self.d_head).transpose(1, 2)
        k = self.k(hidden_states).view(batch, seq, self.n_kv_heads, self.d_head).transpose(1, 2)
        v = self.v(hidden_states).view(batch, seq, self.n_kv_heads, self.d_head).transpose(1, 2)
        if self.rotary is not None:
            q, k = self.rotary.apply_rope(q, k, position_ids=position_ids)
        if self.kv_repeats > 1:
            k = k.repeat_interleave(self.kv_repeats, dim=1)
            v = v.repeat_interleave(self.kv_repeats, dim=1)

        no_softcap = (self.attn_scores_soft_cap or 0) <= 0
        if attention_mask is None and no_softcap and not self._hooks_active():
            # No hook wants the scores or the pattern: the fused kernel computes the same causal
            # softmax attention without materialising them (the training fast path).
            attn = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=1.0 / self.scale)
            return self.o(attn.transpose(1, 2).contiguous().view(batch, seq, -1)), None

        scores = torch.matmul(q, k.transpose(-2, -1)) / self.scale
        scores = apply_softcap(scores, self.attn_scores_soft_cap)
        block_mask = self.causal_mask[:seq, :seq]
        if attention_mask is not None:
            block_mask = self._combine_attention_mask(block_mask, attention_mask, batch=batch)
        scores = scores.masked_fill(block_mask, float("-inf"))
        scores = self._scores_hook(scores)

        pattern = F.softmax(scores, dim=-1).masked_fill(block_mask, 0.0)
        if pattern_fn is not None:
            pattern = pattern_fn(pattern)
        attn = torch.matmul(pattern, v).transpose(1, 2).contiguous().view(batch, seq, -1)
        return self.o(attn), None


def _install_presoftmax_attention(bridge: TransformerBridge) -> None:
    for block in bridge.blocks:
        attn_bridge = block.attn
        native = attn_bridge.original_component
        if type(native) is not NativeAttention:
            raise TypeError(f"expected NativeAttention in {attn_bridge.name}, got {type(native)}")
        # Same parameters and buffers, new forward: swapping the class keeps every weight.
        native.__class__ = PreSoftmaxAttention
        # object.__setattr__: a plain reference, not a second registration of the HookPoint.
        object.__setattr__(native, "_scores_hook", attn_bridge.hook_attn_scores)
        object.__setattr__(native, "_pattern_hook", attn_bridge.hook_pattern)


def transformer_bridge_config(cfg: ModelConfig) -> dict:
    """TransformerLens config dict for ``boot_native`` (pre-LN with LayerNorm, GELU MLP,
    GPT-2 init, ``attn_only`` when ``d_mlp`` is None)."""
    return {
        "n_layers": cfg.n_layers,
        "n_heads": cfg.n_heads,
        "d_head": cfg.d_head,
        "d_model": cfg.resolved_d_model,
        "d_mlp": cfg.d_mlp,
        "attn_only": cfg.d_mlp is None,
        "d_vocab": cfg.d_vocab,
        "n_ctx": cfg.n_ctx,
        "act_fn": "gelu",
        "normalization_type": "LN",
        "positional_embedding_type": _TL_POSITIONAL[cfg.positional_embedding],
        "seed": cfg.seed,
    }


def build_transformer(cfg: ModelConfig) -> TransformerBridge:
    """A hooked transformer (``TransformerBridge.boot_native``) with a pre-softmax
    ``blocks.{l}.attn.hook_attn_scores``.

    Hooks: the usual TransformerLens names (``hook_embed``, ``blocks.{l}.attn.hook_pattern``,
    ``blocks.{l}.attn.hook_attn_scores``, ``blocks.{l}.hook_resid_post``…). Initialisation is
    deterministic in ``cfg.seed`` and leaves the global RNG untouched.

    Raises:
        ValueError: a bad field (:meth:`ModelConfig.validate`) or rotary with an odd d_head.
    """
    cfg.validate()
    if cfg.positional_embedding == "rotary" and cfg.d_head % 2:
        raise ValueError(f"d_head={cfg.d_head} is invalid for rotary embeddings: must be even")
    bridge = TransformerBridge.boot_native(transformer_bridge_config(cfg))
    _install_presoftmax_attention(bridge)
    return bridge
