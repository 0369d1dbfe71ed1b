"""Causal MLP-Mixer: token mixing by a lower-triangular-masked MLP across positions.

MLP-Mixer (Tolstikhin et al. 2021, arXiv 2105.01601) mixes tokens with an MLP applied across
the position axis, shared by all channels. For next-token prediction it must be causal: here
both token-mixing weight matrices (``n_ctx × n_ctx``, one pair per layer) are lower
triangular, so hidden unit ``h`` reads positions ``≤ h`` and output position ``q`` reads
hidden units ``≤ q``; position ``q`` never sees the future (the masking gMLP applies to its
spatial weights for language modelling: Liu et al. 2021, arXiv 2105.08050). No maintained
library ships it (neither transformers nor TransformerLens has a causal MLP-Mixer).
Baherwani et al. 2026 (arXiv 2606.25010, MLP-Mixer vs transformer figure) compare an MLP-Mixer with
the transformer on the linear map; their exact mixer is not stated, this is our choice.

Block (pre-norm, residual), repeated ``n_layers`` times::

    x = x + TokenMixing(LN(x))          # masked MLP over positions, hidden width n_ctx
    x = x + ChannelMLP(LN(x))           # only when d_mlp is not None (width d_mlp)

then ``LN`` and the unembedding. The lower triangles are stored as flat parameters
(``n_ctx (n_ctx + 1) / 2`` each), so the parameter count has no masked-out entries. Token
mixing weights are position specific, so no positional embedding is added
(``positional_embedding`` is ignored). Sequences shorter than ``n_ctx`` use the top-left block
of each matrix, which keeps outputs at ``q`` identical to the full-length forward.

Hooks (TransformerLens ``HookPoint``, ``run_with_cache`` / ``run_with_hooks`` work as on the
transformer): ``hook_embed``, ``blocks.{l}.hook_resid_pre``, ``blocks.{l}.token_mixing.hook_pre``
(hidden, after the GELU; ``[batch, n_ctx_hidden, d_model]``), ``blocks.{l}.hook_token_mixing_out``,
``blocks.{l}.hook_resid_mid``, ``blocks.{l}.hook_mlp_out``, ``blocks.{l}.hook_resid_post``.
``blocks.{l}.token_mixing.matrices()`` returns the two effective ``[n_ctx, n_ctx]`` matrices,
the analogue of an attention pattern fixed across inputs; ``has_attention`` is False.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from jaxtyping import Float, Int
from torch import Tensor, nn
from transformer_lens import HookedRootModule
from transformer_lens.hook_points import HookPoint

ARCH = "mlp-mixer"


class CausalTokenMixing(nn.Module):
    """``out[q] = Σ_{h≤q} W2[q,h] · GELU(Σ_{k≤h} W1[h,k] · x[k] + b1[h]) + b2[q]`` per channel."""

    def __init__(self, n_ctx: int):
        super().__init__()
        self.n_ctx = n_ctx
        rows, cols = torch.tril_indices(n_ctx, n_ctx)
        self.register_buffer("rows", rows, persistent=False)
        self.register_buffer("cols", cols, persistent=False)
        n_tri = rows.numel()
        # Fan-in of row q is q + 1 entries: uniform(±1/sqrt(fan_in)) as nn.Linear does.
        bound = 1.0 / torch.sqrt(rows.float() + 1.0)
        self.w1 = nn.Parameter((torch.rand(n_tri) * 2 - 1) * bound)
        self.w2 = nn.Parameter((torch.rand(n_tri) * 2 - 1) * bound)
        row_bound = 1.0 / torch.sqrt(torch.arange(n_ctx).float() + 1.0)
        self.b1 = nn.Parameter((torch.rand(n_ctx) * 2 - 1) * row_bound)
        self.b2 = nn.Parameter((torch.rand(n_ctx) * 2 - 1) * row_bound)
        self.hook_pre = HookPoint()

    def matrices(self) -> tuple[Float[Tensor, "n_ctx n_ctx"], Float[Tensor, "n_ctx n_ctx"]]:
        """The two lower-triangular token-mixing matrices ``(W1, W2)`` (zeros above the diagonal)."""
        shape = (self.n_ctx, self.n_ctx)
        w1 = self.w1.new_zeros(shape).index_put((self.rows, self.cols), self.w1)
        w2 = self.w2.new_zeros(shape).index_put((self.rows, self.cols), self.w2)
        return w1, w2

    def forward(self, x: Float[Tensor, "batch pos d_model"]) -> Float[Tensor, "batch pos d_model"]:
        """Causal token mixing of ``x`` over its ``pos`` positions (the top-left ``[pos, pos]`` block
        of each matrix; ``hook_pre`` sees the hidden ``[batch, pos, d_model]``).

        Raises:
            ValueError: ``pos > n_ctx``.
        """
        pos = x.shape[1]
        if pos > self.n_ctx:
            raise ValueError(f"sequence length {pos} is invalid: the mixer was built for n_ctx={self.n_ctx}")
        w1, w2 = (w[:pos, :pos] for w in self.matrices())
        hidden = F.gelu(torch.einsum("hk,bkd->bhd", w1, x) + self.b1[:pos, None])
        hidden = self.hook_pre(hidden)
        return torch.einsum("qh,bhd->bqd", w2, hidden) + self.b2[:pos, None]


class ChannelMLP(nn.Module):
    """Position-wise ``Linear(d_model, d_mlp) → GELU → Linear(d_mlp, d_model)``."""

    def __init__(self, d_model: int, d_mlp: int):
        super().__init__()
        self.fc_in = nn.Linear(d_model, d_mlp)
        self.fc_out = nn.Linear(d_mlp, d_model)

    def forward(self, x: Float[Tensor, "batch pos d_model"]) -> Float[Tensor, "batch pos d_model"]:
        """The MLP applied at each position independently (hidden ``[batch, pos, d_mlp]``)."""
        return self.fc_out(F.gelu(self.fc_in(x)))


class MixerBlock(nn.Module):
    """Pre-norm residual block: token mixing, then (optionally) the channel MLP."""

    def __init__(self, d_model: int, n_ctx: int, d_mlp: int | None):
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        self.token_mixing = CausalTokenMixing(n_ctx)
        self.ln2 = nn.LayerNorm(d_model) if d_mlp is not None else None
        self.mlp = ChannelMLP(d_model, d_mlp) if d_mlp is not None else None
        self.hook_resid_pre = HookPoint()
        self.hook_token_mixing_out = HookPoint()
        self.hook_resid_mid = HookPoint()
        self.hook_mlp_out = HookPoint()
        self.hook_resid_post = HookPoint()

    def forward(self, x: Float[Tensor, "batch pos d_model"]) -> Float[Tensor, "batch pos d_model"]:
        """The residual stream after the block: ``x + TokenMixing(LN(x))``, then ``+ ChannelMLP(LN(.))``
        when the block has an MLP.

        Raises:
            ValueError: ``pos > n_ctx`` (from the token mixing).
        """
        x = self.hook_resid_pre(x)
        x = self.hook_resid_mid(x + self.hook_token_mixing_out(self.token_mixing(self.ln1(x))))
        if self.mlp is not None:
            x = x + self.hook_mlp_out(self.mlp(self.ln2(x)))
        return self.hook_resid_post(x)


class CausalMLPMixer(HookedRootModule):
    """Causal MLP-Mixer language model (see module docstring).

    Args:
        d_vocab: vocabulary size. n_ctx: context length (token-mixing width).
        d_model: residual width. n_layers: blocks (≥ 1). d_mlp: channel-MLP width or None.

    Raises:
        ValueError: a non-positive size.
    """

    has_attention = False
    arch = ARCH

    def __init__(self, d_vocab: int, n_ctx: int, d_model: int, n_layers: int, d_mlp: int | None):
        super().__init__()
        for name, value in (("d_vocab", d_vocab), ("n_ctx", n_ctx), ("d_model", d_model), ("n_layers", n_layers)):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}={value!r} is invalid for arch 'mlp-mixer': it must be an integer ≥ 1")
        if d_mlp is not None and (not isinstance(d_mlp, int) or d_mlp < 1):
            raise ValueError(f"d_mlp={d_mlp!r} is invalid: give a positive channel-MLP width or None (no MLP)")
        self.d_vocab, self.n_ctx, self.d_model, self.n_layers, self.d_mlp = d_vocab, n_ctx, d_model, n_layers, d_mlp
        self.embed = nn.Embedding(d_vocab, d_model)
        nn.init.normal_(self.embed.weight, std=1.0 / math.sqrt(d_model))
        self.hook_embed = HookPoint()
        self.blocks = nn.ModuleList(MixerBlock(d_model, n_ctx, d_mlp) for _ in range(n_layers))
        self.ln_final = nn.LayerNorm(d_model)
        self.unembed = nn.Linear(d_model, d_vocab)
        self.setup()  # HookedRootModule: name every HookPoint

    def forward(self, tokens: Int[Tensor, "batch pos"]) -> Float[Tensor, "batch pos d_vocab"]:
        """Logits at every position; logits at ``q`` depend on ``tokens[:, :q+1]`` only."""
        x = self.hook_embed(self.embed(tokens))
        for block in self.blocks:
            x = block(x)
        return self.unembed(self.ln_final(x))


def build(cfg) -> CausalMLPMixer:
    """A randomly initialised :class:`CausalMLPMixer` for a :class:`synthetic.models.ModelConfig`.

    ``d_model`` (``n_heads * d_head`` when None), ``n_layers``, ``d_mlp`` (None: no channel
    MLP) come from ``cfg``; seeded by ``cfg.seed`` without touching the global RNG.
    """
    d_model = cfg.d_model if cfg.d_model is not None else cfg.n_heads * cfg.d_head
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed)
        return CausalMLPMixer(cfg.d_vocab, cfg.n_ctx, d_model, cfg.n_layers, cfg.d_mlp)


def _register() -> None:
    from synthetic.models import register_architecture

    register_architecture(ARCH, build)


_register()
