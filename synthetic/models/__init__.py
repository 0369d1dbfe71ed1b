"""Model registry for the synthetic tasks: any ``nn.Module`` mapping tokens to logits.

Every architecture is a builder ``ModelConfig -> nn.Module`` whose forward takes
``Int[Tensor, "batch pos"]`` tokens and returns ``Float[Tensor, "batch pos d_vocab"]`` logits
(causal: position ``q`` sees tokens ``≤ q``). The transformer (``models/transformer.py``) is a
TransformerLens ``TransformerBridge``; alternative architectures live one per module and call
:func:`register_architecture` when imported.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

from torch import nn

POSITIONAL_EMBEDDINGS = ("learned", "rotary")


@dataclass
class ModelConfig:
    """Architecture-independent model description.

    Attributes:
        d_vocab: vocabulary size (tokens are ``0 … d_vocab−1``).
        n_ctx: longest sequence the model accepts, tokens.
        arch: key of :data:`ARCHITECTURES`.
        n_layers, n_heads, d_head: depth, heads per layer, width per head.
        d_model: residual-stream width; None → ``n_heads * d_head``.
        d_mlp: MLP width; None → attention-only (no MLP), as in the paper's 1-layer
            attention-pattern models (our reading; the paper states no MLP width).
        positional_embedding: ``"learned"`` (absolute, trained, GPT-2 style) or ``"rotary"``
            (RoPE on queries and keys; needs an even ``d_head``). Architectures without
            attention may ignore it.
        seed: weight-initialisation seed.
        rwkv_version: RWKV only: 4 (transformers, CPU or CUDA) or 7 (fla, CUDA); None → 4. The
            trainer resolves it from the run's device (:func:`synthetic.models.rwkv.rwkv_version`).
    """

    d_vocab: int
    n_ctx: int
    arch: str = "transformer"
    n_layers: int = 1
    n_heads: int = 4
    d_head: int = 16
    d_model: int | None = None
    d_mlp: int | None = None
    positional_embedding: str = "learned"
    seed: int = 0
    rwkv_version: int | None = None

    @property
    def resolved_d_model(self) -> int:
        """``d_model`` or, when None, ``n_heads * d_head``."""
        return self.d_model if self.d_model is not None else self.n_heads * self.d_head

    def validate(self) -> None:
        """Raise a one-line ValueError naming the first bad field.

        Raises:
            ValueError: ``d_vocab``, ``n_ctx``, ``n_layers``, ``n_heads`` or ``d_head`` not an
                integer ≥ 1; ``d_model`` or ``d_mlp`` neither None nor an integer ≥ 1; or an
                unknown ``positional_embedding``.
        """
        for name in ("d_vocab", "n_ctx", "n_layers", "n_heads", "d_head"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name}={value!r} is invalid: must be an integer ≥ 1")
        for name in ("d_model", "d_mlp"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < 1):
                raise ValueError(f"{name}={value!r} is invalid: must be None or an integer ≥ 1")
        if self.positional_embedding not in POSITIONAL_EMBEDDINGS:
            raise ValueError(
                f"positional_embedding={self.positional_embedding!r} is invalid: "
                f"choose one of {', '.join(POSITIONAL_EMBEDDINGS)}"
            )


Builder = Callable[[ModelConfig], nn.Module]
ARCHITECTURES: dict[str, Builder] = {}
# Optional architecture modules that failed to import, with the reason (shown by build_model).
UNAVAILABLE: dict[str, str] = {}


def register_architecture(name: str, builder: Builder) -> None:
    """Make ``build_model(ModelConfig(arch=name, …))`` call ``builder``.

    Raises:
        ValueError: ``name`` is empty.
    """
    if not name:
        raise ValueError("architecture name must be a non-empty string")
    ARCHITECTURES[name] = builder
    UNAVAILABLE.pop(name, None)


def build_model(cfg: ModelConfig) -> nn.Module:
    """Build the model ``cfg.arch`` describes, initialised from ``cfg.seed``.

    Returns:
        A module with ``forward(tokens: Int[Tensor, "batch pos"]) ->
        Float[Tensor, "batch pos d_vocab"]``.

    Raises:
        ValueError: unknown ``arch`` (the message lists :data:`ARCHITECTURES` and any that
            failed to import) or a bad config field.
    """
    cfg.validate()
    if cfg.arch not in ARCHITECTURES:
        missing = "".join(f"; {k} unavailable ({v})" for k, v in UNAVAILABLE.items())
        raise ValueError(f"arch={cfg.arch!r} is unknown: choose one of {', '.join(sorted(ARCHITECTURES))}{missing}")
    return ARCHITECTURES[cfg.arch](cfg)


def has_attention(model: nn.Module) -> bool:
    """True when ``model`` exposes TransformerLens attention hooks (``…attn.hook_pattern``)."""
    hook_dict = getattr(model, "hook_dict", None)
    if not isinstance(hook_dict, dict):
        return False
    return any(name.endswith("attn.hook_pattern") for name in hook_dict)


def count_parameters(model: nn.Module) -> int:
    """Number of trainable scalars (shared tensors counted once)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def _register_builtin() -> None:
    from synthetic.models.transformer import build_transformer

    register_architecture("transformer", build_transformer)
    # Alternative architectures register themselves on import; a missing optional dependency
    # leaves the rest of the package usable.
    for module in ("mixer", "mamba", "deltanet", "rwkv"):
        try:
            importlib.import_module(f"synthetic.models.{module}")
        except ImportError as err:
            UNAVAILABLE.setdefault(module, str(err))


_register_builtin()

__all__ = [
    "ARCHITECTURES",
    "POSITIONAL_EMBEDDINGS",
    "ModelConfig",
    "build_model",
    "count_parameters",
    "has_attention",
    "register_architecture",
]
