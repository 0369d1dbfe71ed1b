"""Gated DeltaNet (Yang, Kautz & Hatamizadeh 2025, "Gated Delta Networks", arXiv 2412.06464).

Built from the pure-torch layers transformers ships: a ``Qwen3_5ForCausalLM`` whose every
layer is ``linear_attention`` (``Qwen3_5GatedDeltaNet``: short causal conv on q/k/v, gated
delta rule with per-head decay ``g`` and write strength ``beta``, gated RMSNorm output).

The CPU trap (reproduced by ``tests/synthetic/test_synth_architectures.py``,
``test_cpu_runs_when_triton_kernels_are_installed``): with ``flash-linear-attention`` and triton
installed, transformers binds ``fla``'s triton kernels at import time; before 5.25 it called them
for CPU tensors too, which crashes, and from 5.25 it runs its own ``torch_chunk_gated_delta_rule``
on the CPU. :func:`build` refuses the old case with a message naming the fix
(:func:`synthetic.models.hf.check_cpu_kernels`).

Mapping from :class:`synthetic.models.ModelConfig` (our choice; the paper gives no
configuration):

* ``hidden_size = d_model``; ``n_heads`` key and value heads of size ``d_head`` (as the
  transformer's q/k/v); conv kernel 4 (the Qwen3.5 default).
* ``d_mlp``: width of the SwiGLU MLP after each layer. ``None`` means no MLP, like the
  attention-only transformer: the MLP gets zero width (it outputs exactly 0, and the norm in
  front of it is frozen) so the module tree stays the one the TransformerLens adapter expects.
* No positional embedding (rotary embeddings only feed full-attention layers; there are none).
"""

from __future__ import annotations

import warnings

import torch
from torch import nn

from synthetic.models.hf import TOY_LM_SETTINGS, check_cpu_kernels, freeze_dead_parameters, wrap_hf_model

ARCH = "gated-deltanet"
CONV_KERNEL = 4  # Qwen3.5 default linear_conv_kernel_dim
# Packages whose kernels transformers' Qwen3.5 modeling file binds when they are installed.
KERNEL_PACKAGES = ("fla", "causal_conv1d")


def _modeling_module():
    """The transformers modeling module, looked up at call time (tests may reload it)."""
    import importlib

    return importlib.import_module("transformers.models.qwen3_5.modeling_qwen3_5")


def gated_deltanet_config(cfg):
    """The ``Qwen3_5TextConfig`` (all layers ``linear_attention``) for a :class:`ModelConfig`."""
    from transformers.models.qwen3_5.configuration_qwen3_5 import Qwen3_5TextConfig

    return Qwen3_5TextConfig(
        vocab_size=cfg.d_vocab,
        hidden_size=cfg.resolved_d_model,
        num_hidden_layers=cfg.n_layers,
        layer_types=["linear_attention"] * cfg.n_layers,
        intermediate_size=cfg.d_mlp or 0,
        linear_num_key_heads=cfg.n_heads,
        linear_num_value_heads=cfg.n_heads,
        linear_key_head_dim=cfg.d_head,
        linear_value_head_dim=cfg.d_head,
        linear_conv_kernel_dim=CONV_KERNEL,
        # Full-attention fields are unused (no such layer) but validated by the config.
        num_attention_heads=cfg.n_heads,
        num_key_value_heads=cfg.n_heads,
        head_dim=cfg.d_head,
        max_position_embeddings=cfg.n_ctx,
        **TOY_LM_SETTINGS,
    )


def build(cfg) -> nn.Module:
    """A randomly initialised Gated DeltaNet LM: ``forward(tokens) -> logits``.

    ``tokens``: ``Int[Tensor, "batch pos"]``; logits ``Float[Tensor, "batch pos d_vocab"]``.
    Seeded by ``cfg.seed`` without touching the global RNG; runs on CPU whether or not ``fla``
    is installed. Returns a TransformerBridge (hooks ``blocks.{l}.linear_attn.hook_q`` …,
    ``hook_beta``, ``hook_ssm_decay``) or the plain wrapper, with ``has_attention=False``.

    Raises:
        ValueError: ``d_mlp`` < 1, or ``flash-linear-attention`` / ``causal-conv1d`` installed
            beside a transformers older than 5.25 (:func:`synthetic.models.hf.check_cpu_kernels`).
    """
    if cfg.d_mlp is not None and cfg.d_mlp < 1:
        raise ValueError(f"d_mlp={cfg.d_mlp!r} is invalid: give a positive MLP width or None (no MLP)")
    check_cpu_kernels(ARCH, KERNEL_PACKAGES)
    modeling = _modeling_module()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # zero-width MLP: "Initializing zero-element tensors is a no-op"
            hf_model = modeling.Qwen3_5ForCausalLM(gated_deltanet_config(cfg)).float()
    if cfg.d_mlp is None:
        # A zero-width SwiGLU outputs exactly 0, so the norm feeding it is dead weight.
        freeze_dead_parameters(layer.post_attention_layernorm.weight for layer in hf_model.model.layers)
    return wrap_hf_model(
        hf_model,
        cfg.d_vocab,
        cfg.n_ctx,
        cfg.seed,
        arch=ARCH,
        implementation="transformers.Qwen3_5ForCausalLM (all layers linear_attention)",
    )


def _register() -> None:
    from synthetic.models import register_architecture

    register_architecture(ARCH, build)


_register()
