"""Mamba-2 (Dao & Gu 2024, "Transformers are SSMs", arXiv 2405.21060) via transformers.

``transformers.Mamba2ForCausalLM`` runs on CPU without ``mamba-ssm`` through its pure-torch
chunked scan (``mamba2_chunk_scan`` in transformers' Mamba-2 modeling file). If ``mamba-ssm`` or
``causal-conv1d`` is installed, transformers binds their triton/CUDA kernels at import time and,
from 5.25, calls them for CUDA tensors only; on an older transformers the build is refused
(:func:`synthetic.models.hf.check_cpu_kernels`).

Mapping from :class:`synthetic.models.ModelConfig` (our choice; the paper gives no Mamba
configuration):

* ``hidden_size = d_model`` (``n_heads * d_head`` when ``d_model`` is None), ``expand = 2``
  (Mamba-2 default), SSM heads of size ``head_dim = d_head``, so
  ``num_heads = 2 * d_model / d_head``; one B/C group; ``state_size = 16``; conv kernel 4.
* ``n_layers`` Mamba-2 blocks. A Mamba-2 block has no separate MLP: ``d_mlp`` must be None.
* No positional embedding (the recurrence is position-aware); ``positional_embedding`` is
  ignored.
* Untied embedding / unembedding, like the transformer.

The model is wrapped in a TransformerLens bridge (adapter ``Mamba2ForCausalLM``; hooks such as
``blocks.{l}.mixer.hook_ssm_out``) when its logits equal the HF model's; see
:func:`synthetic.models.hf.wrap_hf_model`.
"""

from __future__ import annotations

import torch
from torch import nn

from synthetic.models.hf import TOY_LM_SETTINGS, check_cpu_kernels, wrap_hf_model

ARCH = "mamba2"
EXPAND = 2  # Mamba-2 default inner expansion
STATE_SIZE = 16  # N in the paper's notation; transformers' default 128 is far larger than our toys
CONV_KERNEL = 4  # Mamba-2 default
# Packages whose kernels transformers' Mamba-2 modeling file binds when they are installed.
KERNEL_PACKAGES = ("mamba_ssm", "causal_conv1d")


def mamba2_config(cfg):
    """The ``transformers.Mamba2Config`` for a :class:`ModelConfig` (mapping in module doc).

    Raises:
        ValueError: ``d_mlp`` given (Mamba-2 blocks have no MLP), or ``2 * d_model`` not a
            multiple of ``d_head`` (SSM heads must tile the inner width).
    """
    from transformers import Mamba2Config

    d_model = cfg.resolved_d_model
    if cfg.d_mlp is not None:
        raise ValueError(
            f"d_mlp={cfg.d_mlp!r} is invalid for arch 'mamba2': a Mamba-2 block has no MLP, use d_mlp=None"
        )
    if (EXPAND * d_model) % cfg.d_head:
        raise ValueError(
            f"d_model={d_model} is invalid for arch 'mamba2': {EXPAND}*d_model must be a multiple of d_head={cfg.d_head}"
        )
    return Mamba2Config(
        vocab_size=cfg.d_vocab,
        hidden_size=d_model,
        num_hidden_layers=cfg.n_layers,
        expand=EXPAND,
        head_dim=cfg.d_head,
        num_heads=EXPAND * d_model // cfg.d_head,
        n_groups=1,
        state_size=STATE_SIZE,
        conv_kernel=CONV_KERNEL,
        chunk_size=max(1, min(cfg.n_ctx, 256)),
        **TOY_LM_SETTINGS,
    )


def build(cfg) -> nn.Module:
    """A randomly initialised Mamba-2 LM: ``forward(tokens Int[batch,pos]) -> Float[batch,pos,d_vocab]``.

    Seeded by ``cfg.seed`` without touching the global RNG. Returns a TransformerBridge (or the
    plain wrapper, see :func:`synthetic.models.hf.wrap_hf_model`) with ``has_attention=False``
    and ``arch="mamba2"``.

    Raises:
        ValueError: see :func:`mamba2_config`; or ``mamba-ssm`` / ``causal-conv1d`` installed
            beside a transformers older than 5.25 (:func:`synthetic.models.hf.check_cpu_kernels`).
    """
    hf_cfg = mamba2_config(cfg)
    check_cpu_kernels(ARCH, KERNEL_PACKAGES)
    from transformers import Mamba2ForCausalLM

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed)
        hf_model = Mamba2ForCausalLM(hf_cfg).float()
    return wrap_hf_model(
        hf_model, cfg.d_vocab, cfg.n_ctx, cfg.seed, arch=ARCH, implementation="transformers.Mamba2ForCausalLM"
    )


def _register() -> None:
    from synthetic.models import register_architecture

    register_architecture(ARCH, build)


_register()
