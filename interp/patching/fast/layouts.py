"""Block layouts of the layer-skip engine: how a block combines its attention and MLP.

One class per layout, each a :class:`~interp.patching.fast.engine.LayerSkipEngine`:

* :class:`ParallelEngine` (GPT-NeoX / Pythia, ``cfg.parallel_attn_mlp``): ``x + attn(ln1(x)) +
  mlp(ln2(x))``. The MLP reads the block input, so an attention patch leaves it alone and the
  stream entering block ``l + 1`` is the cached one plus the head's change: block ``l + 1``'s
  norm-fed projections take the low-rank formula.
* :class:`SequentialEngine` (GPT-2, Llama, TransformerLens's native blocks): ``mid = x +
  attn(ln1(x))``, ``mid + mlp(ln2(mid))``. The MLP reruns on the patched stream; a one-head
  patch reaches the block's own MLP input first, a rank-``d_head`` change of a normalised
  stream, so those projections take the low-rank formula.
* :class:`PostNormEngine` (OLMo-2): norms on the attention / MLP *output*, ``mid = x +
  ln1_post(attn(x))``, ``mid + ln2_post(mlp(mid))``. A head's change passes through
  ``ln1_post`` before it reaches the stream, so heads do not add linearly there; the own MLP's
  input projections take the low-rank formula through that RMSNorm's per-position scale.

:func:`layout_class` picks the class from the model: the one whose ``fits(model)`` holds. Each
class registers itself with the engine as it is defined (``LayerSkipEngine.layouts``), and
``LayerSkipEngine(model, ...)`` returns the instance of the layout that fits; the engine module
imports none of this one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from jaxtyping import Float
from torch import Tensor

from interp.patching._forward import first
from interp.patching.fast.engine import LayerSkipEngine
from interp.patching.fast.modules import _is_projection
from interp.patching.fast.plan import FastPathUnsupported

__all__ = ["ParallelEngine", "PostNormEngine", "SequentialEngine", "layout_class"]


class ParallelEngine(LayerSkipEngine):
    """Parallel residual (GPT-NeoX): attention and MLP both read the block input."""

    parallel = True

    @classmethod
    def fits(cls, model: Any) -> bool:
        """``cfg.parallel_attn_mlp``: attention and MLP read the block input."""
        return _parallel(model)

    def _detect_layout(self) -> None:
        super()._detect_layout()
        if self.attn_out_norm or self.mlp_out_norm:
            raise FastPathUnsupported("block layout not handled (a parallel block with output norms)")

    def _stream_after(
        self,
        layer: int,
        attn_delta: Tensor,
        mlp_delta: Tensor | None,
        mlp_replaced: Tensor | None,
        answer_only: bool = False,
        own_mlp: Callable[[Tensor], Any] | None = None,
    ) -> Tensor:
        """``resid_post + attn_delta (+ mlp_delta)``: the MLP reads the block input, unchanged by
        an attention patch; an MLP-output patch adds ``mlp_post - mlp_pre`` (``mlp_delta``)."""
        n = attn_delta.shape[0]
        out = self.resid_post[layer][None] + attn_delta
        if mlp_delta is not None:
            out = out + mlp_delta
        return out.reshape(n * self.n, self.pos, -1)

    def _combine_at_answer(
        self, layer: int, x: Float[Tensor, "rows d_model"], a: Float[Tensor, "rows d_model"]
    ) -> Float[Tensor, "rows d_model"]:
        if not self._has_mlp(layer):
            return x + a
        return self._mlp(layer, x[:, None])[:, 0] + a + x

    def _next_block_reads_delta(self, layer: int) -> bool:
        return True


class SequentialEngine(LayerSkipEngine):
    """Sequential residual with pre-norms (GPT-2, Llama): the MLP reads the stream after the attention."""

    @classmethod
    def fits(cls, model: Any) -> bool:
        """Not parallel, and no norm on the attention output (``ln1_post``)."""
        return not _parallel(model) and not hasattr(model.blocks[0], "ln1_post")

    def _stream_after(
        self,
        layer: int,
        attn_delta: Tensor,
        mlp_delta: Tensor | None,
        mlp_replaced: Tensor | None,
        answer_only: bool = False,
        own_mlp: Callable[[Tensor], Any] | None = None,
    ) -> Tensor:
        """Stacked stream ``[copies * batch, pos, d_model]`` leaving block ``layer`` given the
        attention-output change per copy.

        ``attn_delta``, ``mlp_delta``: ``[copies, batch, pos, d_model]``; ``mlp_replaced``:
        ``[copies]`` bool, copies whose MLP output is the post checkpoint's (``mlp_delta`` holds
        ``mlp_post - mlp_pre`` there, ``hook_mlp_out`` being the MLP's contribution to the
        stream).  The MLP reruns on the patched stream ``mid`` (:meth:`_rerun_mlp`);
        ``answer_only``: at the answer positions only (it is position-wise; for the last block,
        whose other positions nobody reads). ``own_mlp``: given the stacked ``mid``, a context
        that swaps in the low-rank formula of the MLP's input projections (:meth:`_own_mlp_low_rank`).
        """
        n = attn_delta.shape[0]
        if not self._has_mlp(layer):
            out = self.resid_post[layer][None] + attn_delta
            if mlp_delta is not None:
                out = out + mlp_delta
            return out.reshape(n * self.n, self.pos, -1)
        mid = ((self.resid_pre[layer] + self.attn_out[layer])[None] + attn_delta).reshape(n * self.n, self.pos, -1)
        return self._rerun_mlp(layer, mid, mlp_delta, mlp_replaced, answer_only, own_mlp, mid)

    def _combine_at_answer(
        self, layer: int, x: Float[Tensor, "rows d_model"], a: Float[Tensor, "rows d_model"]
    ) -> Float[Tensor, "rows d_model"]:
        if not self._has_mlp(layer):
            return x + a
        mid = a + x
        return self._mlp(layer, mid[:, None])[:, 0] + mid

    def _next_block_reads_delta(self, layer: int) -> bool:
        return not self._has_mlp(layer)  # attention-only: the stream is the cached one plus delta

    def _own_mlp_inputs(self, layer: int) -> tuple[list[tuple[str, str]], Tensor, Tensor | None] | None:
        """Pre-norm: the projections read ``ln2(mid_pre + delta_h)``, ``delta_h = dz_h @ W_O[h]``:
        the formula of :class:`~interp.patching.fast.modules._LowRankProjections` with base ``mid_pre``."""
        if not self.mlp_norm:
            return None
        block = self.model.blocks[layer]
        norms = {id(block.ln2), id(getattr(block.ln2, "original_component", None))}
        pairs = [(lin, norm) for lin, norm in self._norm_pairs if id(block.get_submodule(norm)) in norms]
        return pairs, self.resid_pre[layer] + self.attn_out[layer], None


class PostNormEngine(SequentialEngine):
    """Sequential residual with norms on the attention / MLP output (OLMo-2: ``ln1_post``, ``ln2_post``)."""

    @classmethod
    def fits(cls, model: Any) -> bool:
        """Not parallel, and a norm on the attention output (``ln1_post``)."""
        return not _parallel(model) and hasattr(model.blocks[0], "ln1_post")

    def _attn_to_stream(self, block: Any, attn: Tensor) -> Tensor:
        """The attention output's contribution to the residual stream: ``ln1_post(attn)``."""
        return first(block.ln1_post(attn))

    def _stream_after(
        self,
        layer: int,
        attn_delta: Tensor,
        mlp_delta: Tensor | None,
        mlp_replaced: Tensor | None,
        answer_only: bool = False,
        own_mlp: Callable[[Tensor], Any] | None = None,
    ) -> Tensor:
        """As :meth:`SequentialEngine._stream_after`, but the stream gets ``ln1_post(attn_out +
        delta)``, not ``+ delta``; ``own_mlp`` is given the stacked attention output."""
        n = attn_delta.shape[0]
        block = self.model.blocks[layer]
        attn = (self.attn_out[layer][None] + attn_delta).reshape(n * self.n, self.pos, -1)
        stream = self._attn_to_stream(block, attn).reshape(attn_delta.shape)
        mid = (self.resid_pre[layer][None] + stream).reshape(n * self.n, self.pos, -1)
        if not self._has_mlp(layer):
            return mid
        return self._rerun_mlp(layer, mid, mlp_delta, mlp_replaced, answer_only, own_mlp, attn)

    def _combine_at_answer(
        self, layer: int, x: Float[Tensor, "rows d_model"], a: Float[Tensor, "rows d_model"]
    ) -> Float[Tensor, "rows d_model"]:
        a = self._attn_to_stream(self.model.blocks[layer], a[:, None])[:, 0]
        return super()._combine_at_answer(layer, x, a)

    def _next_block_reads_delta(self, layer: int) -> bool:
        return False  # the change passes through ln1_post first

    def _own_mlp_inputs(self, layer: int) -> tuple[list[tuple[str, str]], Tensor, Tensor | None] | None:
        """With a pre-norm ``ln2`` as well: as :class:`SequentialEngine`. OLMo-2 (no ``ln2``): the
        projections read ``resid_pre + ln1_post(attn_pre + delta_h)`` with no norm of their own;
        an RMSNorm is a per-position scale, so ``W mid = W resid_pre + (A + dz_h @ M_h) / s_h``
        (base ``attn_pre``, ``resid_pre @ W.T`` added per position)."""
        if self.mlp_norm:
            return super()._own_mlp_inputs(layer)
        pairs = [(lin, self.attn_out_norm) for lin in self._mlp_input_linears(layer)]
        return pairs, self.attn_out[layer], self.resid_pre[layer]

    def _mlp_input_linears(self, layer: int) -> list[str]:
        """Names (inside a block) of the linears that read the MLP's input itself (OLMo-2's gate
        and up projections), found by running block ``layer``'s MLP once; the same in every block."""
        if getattr(self, "_mlp_linears", None) is None:
            block = self.model.blocks[layer]
            seen: dict[str, Tensor] = {}
            given: dict[str, Tensor] = {}
            handles = [block.mlp.register_forward_pre_hook(lambda mod, args: given.__setitem__("x", args[0]))]
            for name, module in block.named_modules():
                if _is_projection(module):
                    handles.append(
                        module.register_forward_pre_hook(
                            lambda mod, args, name=name: seen.setdefault(name, args[0] if args else None)
                        )
                    )
            try:
                self._mlp(layer, self.resid_post[layer])
            finally:
                for handle in handles:
                    handle.remove()
            self._mlp_linears = [name for name, x in seen.items() if "x" in given and x is given["x"]]
        return self._mlp_linears


def _parallel(model: Any) -> bool:
    return bool(getattr(model.cfg, "parallel_attn_mlp", False))


def layout_class(model: Any) -> type[LayerSkipEngine]:
    """The engine class of ``model``'s block layout: :class:`ParallelEngine` if
    ``cfg.parallel_attn_mlp``, :class:`PostNormEngine` if blocks have an attention output norm
    (``ln1_post``), else :class:`SequentialEngine` (:meth:`LayerSkipEngine.layout_of`: the one
    whose ``fits(model)`` holds).

    Raises:
        FastPathUnsupported: a model without blocks.
    """
    return LayerSkipEngine.layout_of(model)
