"""TransformerLens's private names that the project uses, behind public-looking names of ours.

Checked on transformer-lens 4.3.0 (the declared range is ``>=4.3,<5``). What moves breaks loading a
bridge in float16 or bfloat16 (``interp.sources.loading.upcast_softmax``: the attention pattern
would again be a half-precision softmax, NaN on pythia-70m-deduped, TransformerLens issue #104);
float32, the default, never calls it.

* :func:`upcast_attention_softmax` wraps ``AttentionBridge._softmax_dropout_pattern`` of one
  attention module so that it always takes the softmax in float32 (its own ``upcast_to_fp32``
  argument) and casts back to the scores' dtype. The argument exists, but the GPT-NeoX and
  Phi bridges call the method without it, and no public option of the bridge or its config sets it
  (4.3: ``TransformerBridgeConfig`` has no such field; ``attn_scores_soft_cap`` and
  ``compatibility_mode`` are other things).
"""

from __future__ import annotations

import functools

from torch import nn

__all__ = ["softmax_upcast", "upcast_attention_softmax"]

_METHOD = "_softmax_dropout_pattern"


def upcast_attention_softmax(module: nn.Module) -> bool:
    """Make ``module`` (any module of a bridge) take its attention softmax in float32 and cast the
    pattern back to the scores' dtype before its ``hook_pattern``; True when ``module`` is a
    TransformerLens attention (has the softmax step) and was changed, False otherwise (untouched).
    """
    original = getattr(type(module), _METHOD, None)
    if original is None:
        return False

    def softmax_fp32(attn_scores, target_dtype=None, upcast_to_fp32=False, *, _module=module, _original=original):
        return _original(_module, attn_scores, target_dtype=target_dtype or attn_scores.dtype, upcast_to_fp32=True)

    setattr(module, _METHOD, functools.update_wrapper(softmax_fp32, original))
    return True


def softmax_upcast(module: nn.Module) -> bool:
    """Whether :func:`upcast_attention_softmax` changed ``module`` (its softmax is the float32 wrapper)."""
    return hasattr(getattr(module, _METHOD, None), "__wrapped__")
