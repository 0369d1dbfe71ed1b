"""The layer-skip engine's shared machinery: the pre-run, the stacked tail, the answer-only
unembedding.  See :mod:`interp.patching.fast` for the method.

:class:`LayerSkipEngine` holds everything that does not depend on how a block combines its
attention and MLP; the block layouts (:mod:`interp.patching.fast.layouts`) fill in the rest and
register themselves as they are defined (:meth:`LayerSkipEngine.fits`), so this module imports
none of them. ``LayerSkipEngine(model, ...)`` returns the instance of the layout that fits
``model`` (:meth:`LayerSkipEngine.layout_of`). The per-unit changes of block ``l`` are
:mod:`interp.patching.fast.changes` (exact shortcuts of single kinds: its ``Z_SHORTCUTS``). Kind
facts come from the kinds table (:mod:`interp.patching.kinds`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any, ClassVar

import torch
from jaxtyping import Bool, Float
from torch import Tensor

from interp.core.task_batch import TaskBatch
from interp.patching._forward import answer_logits_forward, first, heads_shape, model_device, query_mask, replace_hook
from interp.patching.fast.changes import _Changes, block_changes
from interp.patching.fast.modules import (
    _answer_rows_linear,
    _call_signature,
    _LowRankProjections,
    _PendingUnembedding,
    _repeat_batch,
    _shortcuts,
    _swapped_forward,
)
from interp.patching.fast.plan import (
    _VALUE_CHECK_ATOL,
    CPU_UNEMBED_ROWS,
    FastPathUnsupported,
    Unit,
)
from interp.patching.kinds import KIND_TABLE, get_kind
from interp.patching.targets import hook_name

__all__ = ["LayerSkipEngine"]


class LayerSkipEngine:
    """Cached pre-checkpoint run plus the layer-skip machinery (see :mod:`interp.patching.fast`).

    ``LayerSkipEngine(model, batch, metric, post)`` returns an instance of the block layout that
    fits ``model`` (:meth:`layout_of`; the layouts of :mod:`interp.patching.fast.layouts`:
    parallel, sequential or post-norm); the layouts override :meth:`_stream_after`,
    :meth:`_combine_at_answer`, :meth:`_next_block_reads_delta` and :meth:`_own_mlp_inputs`.

    Args:
        model: the pre checkpoint (``TransformerBridge``, eval mode).
        batch: prompts (on any device; moved to the model's).
        metric: ``(logits [n, d_vocab], batch) -> [n]`` (see ``interp.core.metrics``).
        post: a ``interp.patching.engine.PostCheckpoint`` of the same prompts.

    Raises:
        FastPathUnsupported: no block layout fits ``model``, or the pre-run does not expose what
            the engine needs.
    """

    #: the block's MLP reads the block input (GPT-NeoX), not the stream after the attention
    parallel = False
    #: the block layouts, in the order they were defined: each subclass that defines :meth:`fits`
    layouts: ClassVar[list[type[LayerSkipEngine]]] = []

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "fits" in cls.__dict__:  # a block layout (a subclass that only tunes one inherits none)
            LayerSkipEngine.layouts.append(cls)

    @classmethod
    def fits(cls, model: Any) -> bool:
        """Whether ``model``'s blocks have this layout (each layout says; exactly one may)."""
        return False

    @staticmethod
    def layout_of(model: Any) -> type[LayerSkipEngine]:
        """The block layout's class for ``model``: the one registered layout that :meth:`fits` it.

        Raises:
            FastPathUnsupported: a model without blocks, or not exactly one layout fits it.
        """
        blocks = getattr(model, "blocks", None)
        if blocks is None or len(blocks) == 0:
            raise FastPathUnsupported("the model exposes no blocks")
        fitting = [layout for layout in LayerSkipEngine.layouts if layout.fits(model)]
        if len(fitting) != 1:
            fit = ", ".join(layout.__name__ for layout in fitting) or "none"
            known = (
                ", ".join(layout.__name__ for layout in LayerSkipEngine.layouts) or "none (import interp.patching.fast)"
            )
            raise FastPathUnsupported(
                f"block layouts that fit {type(model).__name__}: {fit}; exactly one of {known} must"
            )
        return fitting[0]

    def __new__(cls, model: Any, *args: Any, **kwargs: Any) -> LayerSkipEngine:
        if cls is LayerSkipEngine:  # the small factory: the subclass of this model's block layout
            cls = LayerSkipEngine.layout_of(model)
        return super().__new__(cls)

    def __init__(self, model: Any, batch: TaskBatch, metric: Callable, post: Any):
        self.model = model
        self.n_layers, self.n_heads = heads_shape(model)
        self.device = model_device(model)
        self.batch = batch.to(self.device)
        self.metric = metric
        self.post = post
        self.n, self.pos = (int(x) for x in self.batch.tokens.shape)
        self._changes: dict[tuple, _Changes] = {}
        self._norm_pairs: list[tuple[str, str]] = []  # (linear, norm) names inside a block
        self.low_rank_layers: list[int] = []  # blocks whose projections took the low-rank path
        self.own_mlp_low_rank_layers: list[int] = []  # sequential blocks whose own MLP input did
        self._mlp_linears: list[str] | None = None
        self._structure_checked = False  # set once a block call confirmed the reconstruction
        self._shortcuts = _shortcuts(model)
        self._pre_run()

    @contextlib.contextmanager
    def fused_kernels(self) -> Iterator[None]:
        """Swap faster equivalents in for element-wise modules while the engine computes (GPT-2's
        tanh GELU, the bridge's norms: :func:`_shortcuts`); the pre-run keeps the model's own,
        so :meth:`check_tail` compares the swapped tail with it."""
        with contextlib.ExitStack() as stack:
            for shortcut in self._shortcuts:
                stack.enter_context(_swapped_forward(shortcut.module, shortcut))
            yield

    # ---- the one forward of the pre checkpoint
    def _pre_run(self) -> None:
        L = self.n_layers
        self._detect_layout()
        # activations of kinds the engine may patch (q, k, v, mlp, ...): z and pattern are required
        self._hooked_kinds = [name for name, k in KIND_TABLE.items() if k.hook is not None and k.fast is not None]
        names, optional = set(), set()
        for l in range(L):
            names |= {f"blocks.{l}.hook_in", f"blocks.{l}.hook_out", hook_name("z", l), hook_name("pattern", l)}
            optional |= {hook_name(k, l) for k in self._hooked_kinds}
            if not self.parallel:  # a sequential block's MLP reads resid_pre + attn_out
                names.add(f"blocks.{l}.attn.hook_out")
        block_calls: dict[int, tuple] = {}
        attn_call: dict[str, tuple] = {}
        handles = []
        for l, block in enumerate(self.model.blocks):
            handles.append(
                block.register_forward_pre_hook(
                    lambda mod, args, kwargs, l=l: block_calls.__setitem__(l, (args, kwargs)), with_kwargs=True
                )
            )
        last = self.model.blocks[L - 1]
        if hasattr(last, "attn"):
            handles.append(
                last.attn.register_forward_pre_hook(
                    lambda mod, args, kwargs: attn_call.__setitem__("last", (args, kwargs)), with_kwargs=True
                )
            )
        try:
            rows, (cache,) = answer_logits_forward(
                lambda tokens, **kw: self.model.run_with_cache(
                    tokens, names_filter=lambda n: n in names or n in optional, **kw
                ),
                self.batch,
            )
        finally:
            for h in handles:
                h.remove()
        self.answer_rows = rows  # the pre checkpoint's logits at the answer positions
        self.values_pre = self.metric(rows, self.batch).float()
        missing = sorted(n for n in names if n not in cache.keys())
        if missing or len(block_calls) != L or "last" not in attn_call:
            raise FastPathUnsupported(f"the pre-run did not expose {missing[:3] or 'block/attention calls'}")
        self.cache = cache
        self.resid_pre = [cache[f"blocks.{l}.hook_in"] for l in range(L)]
        self.resid_post = [cache[f"blocks.{l}.hook_out"] for l in range(L)]
        self.attn_out = None if self.parallel else [cache[f"blocks.{l}.attn.hook_out"] for l in range(L)]
        # Positional args after the hidden states, and kwargs, exactly as the model passed them.
        self.block_args = [_call_signature(*block_calls[l]) for l in range(L)]
        self.attn_args = _call_signature(*attn_call["last"])

    def pre(self, kind: str, layer: int) -> Tensor:
        """The pre-run's cached activation of ``kind`` at ``layer`` (the model's dtype and device).

        Returns:
            ``pattern`` ``Float[Tensor, "batch head query_pos key_pos"]``, ``q``/``k``/``v``/``z``
            ``Float[Tensor, "batch pos head d_head"]``, ``mlp`` ``Float[Tensor, "batch pos d_model"]``.

        Raises:
            FastPathUnsupported: the pre-run's cache holds no ``hook_name(kind, layer)``.
        """
        name = hook_name(kind, layer)
        if name not in self.cache.keys():
            raise FastPathUnsupported(f"the pre-run exposes no {name}")
        return self.cache[name]

    # ---- block layout: the shared parts here, the rest in interp.patching.fast.layouts
    def _detect_layout(self) -> None:
        """Which norms a block applies where, from the bridge's block submodules.

        ``ln1`` / ``ln2``: pre-norms of the attention / MLP input (GPT-NeoX, GPT-2, Llama);
        ``ln1_post`` / ``ln2_post``: norms of the attention / MLP *output* before the residual add
        (OLMo-2, whose attention and MLP read the raw stream). Blocks are checked alike, so one
        block's layout stands for all of them.

        Raises:
            FastPathUnsupported: a block without attention.
        """
        block = self.model.blocks[0]
        self.attn_norm = "ln1" if hasattr(block, "ln1") else None
        self.attn_out_norm = "ln1_post" if hasattr(block, "ln1_post") else None
        self.mlp_norm = "ln2" if hasattr(block, "ln2") else None
        self.mlp_out_norm = "ln2_post" if hasattr(block, "ln2_post") else None
        if not hasattr(block, "attn"):
            raise FastPathUnsupported("block layout not handled (no attention)")

    def _attn_input(self, block: Any, resid: Tensor) -> Tensor:
        """What the attention reads: ``ln1(resid)`` for a pre-norm block, the stream itself otherwise."""
        return first(block.ln1(resid)) if self.attn_norm else resid

    def _call(self, module: Any, signature: tuple, hidden: Tensor, n_copies: int) -> Tensor:
        """Call ``module`` as the model did, with ``hidden`` as its hidden states, on stacked copies."""
        key, args, kwargs = signature
        args = _repeat_batch(args, self.n, n_copies)
        kwargs = _repeat_batch(kwargs, self.n, n_copies)
        if key is None:
            return first(module(hidden, *args, **kwargs))
        return first(module(*args, **{**kwargs, key: hidden}))

    def _call_block(self, layer: int, resid: Tensor, n_copies: int) -> Tensor:
        return self._call(self.model.blocks[layer], self.block_args[layer], resid, n_copies)

    def _mlp(self, layer: int, x: Tensor) -> Tensor:
        """The MLP's contribution to the stream given its block's stream ``x`` (pre- or post-norm)."""
        block = self.model.blocks[layer]
        out = first(block.mlp(first(block.ln2(x)) if self.mlp_norm else x))
        return first(block.ln2_post(out)) if self.mlp_out_norm else out

    def _has_mlp(self, layer: int) -> bool:
        block = self.model.blocks[layer]
        has_norm = hasattr(block, "ln2") or hasattr(block, "ln2_post")
        return hasattr(block, "mlp") and has_norm and not getattr(self.model.cfg, "attn_only", False)

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
        attention-output change per copy (the block layout's; see
        :meth:`interp.patching.fast.layouts.SequentialEngine._stream_after`)."""
        raise NotImplementedError(f"{type(self).__name__} is not a block layout (interp.patching.fast.layouts)")

    def _rerun_mlp(
        self,
        layer: int,
        mid: Tensor,
        mlp_delta: Tensor | None,
        mlp_replaced: Tensor | None,
        answer_only: bool,
        own_mlp: Callable[[Tensor], Any] | None,
        own_input: Tensor,
    ) -> Tensor:
        """``mid + MLP(mid)`` of a sequential block on the patched stream ``mid`` (``[copies *
        batch, pos, d_model]``); copies in ``mlp_replaced`` take ``mlp_pre + mlp_delta`` as the
        MLP's output. ``answer_only``: the MLP at the answer positions only; ``own_mlp(own_input)``:
        the context of the low-rank MLP-input projections (:meth:`_own_mlp_low_rank`)."""
        n = mid.shape[0] // self.n
        if answer_only:
            rows, pos = self._answer_rows(n)
            mlp_new = torch.zeros_like(mid)
            mlp_new[rows, pos] = self._mlp(layer, mid[rows, pos][:, None])[:, 0]
        else:
            low_rank = own_mlp is not None and mlp_replaced is None
            with own_mlp(own_input) if low_rank else contextlib.nullcontext():
                mlp_new = self._mlp(layer, mid)
        if mlp_replaced is not None and bool(mlp_replaced.any()):
            mlp_post = (self.pre("mlp", layer)[None] + mlp_delta).reshape(mid.shape)
            replaced = mlp_replaced.to(self.device).repeat_interleave(self.n).reshape(-1, 1, 1)
            mlp_new = torch.where(replaced, mlp_post, mlp_new)
        return mid + mlp_new

    def _answer_rows(self, n_copies: int) -> tuple[Tensor, Tensor]:
        rows = torch.arange(n_copies * self.n, device=self.device)
        return rows, self.batch.answer_pos.repeat(n_copies)

    def _final_block_at_answer(self, resid: Tensor, n_copies: int) -> Float[Tensor, "rows d_model"]:
        """Last block at the answer position only: attention (its keys and values at all positions,
        its query and output projections at the answer), then the MLP (:meth:`_combine_at_answer`)."""
        layer = self.n_layers - 1
        block = self.model.blocks[layer]
        rows, pos = self._answer_rows(n_copies)
        with contextlib.ExitStack() as stack:
            for name in ("q", "o"):  # TransformerBridge's names for the query / output projections
                linear = getattr(getattr(block.attn, name, None), "original_component", None)
                if isinstance(linear, torch.nn.Linear) and "forward" not in linear.__dict__:
                    stack.enter_context(
                        _swapped_forward(linear, _answer_rows_linear(linear, rows, pos, (n_copies * self.n, self.pos)))
                    )
            attn = self._call(block.attn, self.attn_args, self._attn_input(block, resid), n_copies)
        return self._combine_at_answer(layer, resid[rows, pos], attn[rows, pos])

    def _combine_at_answer(
        self, layer: int, x: Float[Tensor, "rows d_model"], a: Float[Tensor, "rows d_model"]
    ) -> Float[Tensor, "rows d_model"]:
        """The block's output at the answer rows from its input ``x`` and attention output ``a``
        (the block layout's)."""
        raise NotImplementedError(f"{type(self).__name__} is not a block layout (interp.patching.fast.layouts)")

    def _next_block_reads_delta(self, layer: int) -> bool:
        """Whether the stream entering block ``layer + 1`` is the cached one plus a head's
        ``delta`` (then its norm-fed projections take the low-rank formula; the layout's)."""
        return False

    def _own_mlp_inputs(self, layer: int) -> tuple[list[tuple[str, str]], Tensor, Tensor | None] | None:
        """``(linear, norm) pairs, base, residual`` of block ``layer``'s own MLP-input projections for
        :class:`_LowRankProjections`, or None where the layout has no such shortcut."""
        return None

    def _unembed_rows(self, x: Float[Tensor, "rows d_model"]) -> Float[Tensor, "rows d_vocab"]:
        logits = first(self.model.unembed(first(self.model.ln_final(x[:, None]))))[:, 0]
        cap = float(getattr(self.model.cfg, "output_logits_soft_cap", 0.0) or 0.0)
        return cap * torch.tanh(logits / cap) if cap > 0 else logits

    # ---- the tail: blocks after the first patched one
    def _tail_hooks(self, sets: Sequence[Sequence[Unit]], first_block: int) -> list:
        """Hooks for the units of later layers (head activations), one mask per (layer, kind)."""
        groups: dict[tuple, Tensor] = {}
        for c, units in enumerate(sets):
            for u in units:
                if u.layer >= first_block:
                    key = (u.layer, u.kind, u.query_pos)
                    if key not in groups:
                        groups[key] = torch.zeros(len(sets), self.n_heads, dtype=torch.bool)
                    groups[key][c, u.index] = True
        hooks = []
        for (layer, kind, qpos), mask in groups.items():
            post = self.post.activation(kind, layer).to(self.device, torch.float32)
            hooks.append(
                (
                    hook_name(kind, layer),
                    replace_hook(
                        post, mask.to(self.device), get_kind(kind).head_axis, query_mask(qpos, self.pos, self.device)
                    ),
                )
            )
        return hooks

    def run_tail(
        self, resid: Tensor, first_block: int, n_copies: int, hooks: Sequence = ()
    ) -> Float[Tensor, "copies batch"]:
        """Metric per copy and prompt, running blocks ``first_block ..`` from the stacked ``resid``.

        ``first_block == n_layers`` means ``resid`` is already the final residual stream.

        Args:
            resid: ``Float[Tensor, "rows pos d_model"]``, the stream entering block
                ``first_block``, ``rows = n_copies * batch`` (copy-major).
            first_block: the first block run (``0 .. n_layers``).
            n_copies: stacked copies of the batch in ``resid``.
            hooks: ``(hook name, hook function)`` pairs active while the blocks run.
        """
        return self.values_of_rows(self.tail_rows(resid, first_block, n_copies, hooks), n_copies)

    def tail_rows(
        self, resid: Float[Tensor, "rows pos d_model"], first_block: int, n_copies: int, hooks: Sequence = ()
    ) -> Float[Tensor, "rows d_model"]:
        """The final residual stream at each copy's answer positions (copy-major), running blocks
        ``first_block ..`` from the stacked ``resid``."""
        L = self.n_layers
        with self.model.hooks(fwd_hooks=list(hooks)):
            for j in range(first_block, L - 1):
                resid = self._call_block(j, resid, n_copies)
            if first_block <= L - 1:
                return self._final_block_at_answer(resid, n_copies)
            rows, pos = self._answer_rows(n_copies)
            return resid[rows, pos]

    def values_of_rows(self, x: Float[Tensor, "rows d_model"], n_copies: int) -> Float[Tensor, "copies batch"]:
        """Metric per copy and prompt from the final stream at the answer positions (``tail_rows``)."""
        logits = self._unembed_rows(x)
        return self.metric(logits, self.batch.repeat(n_copies)).float().reshape(n_copies, self.n)

    def check_tail(self) -> None:
        """Blocks called with stacked copies + answer-only head must reproduce the model's metric.

        Raises:
            FastPathUnsupported: calling the last blocks on two stacked copies raises
                ``TypeError``, ``RuntimeError``, ``IndexError`` or ``AttributeError``, or the
                tail's metric differs from the pre-run's by more than ``1e-5`` (metric units;
                relative when the metric exceeds 1).
        """
        first_block = max(0, self.n_layers - 2)
        resid = self.resid_pre[first_block].repeat(2, 1, 1)
        try:
            with self.fused_kernels():
                values = self.run_tail(resid, first_block, 2)
        except (TypeError, RuntimeError, IndexError, AttributeError) as err:
            raise FastPathUnsupported(f"blocks cannot be called on stacked copies: {err}") from err
        err = float((values - self.values_pre[None]).abs().max())
        if err > _VALUE_CHECK_ATOL * max(1.0, float(self.values_pre.abs().max())):
            raise FastPathUnsupported(f"layer-skip tail differs from the model's forward by {err:.2e} in the metric")

    # ---- layer l: per-unit change of the block output (interp.patching.fast.changes)
    def changes(self, key: tuple, layer: int) -> _Changes:
        """Per-unit change of block ``layer``'s output for units of ``key`` (cached;
        :func:`interp.patching.fast.changes.block_changes`)."""
        return block_changes(self, key, layer)

    def start_residual(
        self,
        layer: int,
        masks: dict[tuple, Bool[Tensor, "copies unit"]],
        answer_only: bool = False,
        own_mlp: Callable | None = None,
    ) -> Float[Tensor, "rows pos d_model"]:
        """Stacked stream leaving block ``layer`` with units ``masks[key][c]`` patched in copy ``c``
        (``answer_only``: correct at the answer positions only, see :meth:`_stream_after`)."""
        n = next(iter(masks.values())).shape[0]
        attn = torch.zeros(n, self.n, self.pos, self.resid_post[layer].shape[-1], device=self.device)
        mlp, mlp_replaced = None, None
        for key, mask in masks.items():
            changes = self._changes[(key, layer)]
            d = torch.einsum("cu,ubpm->cbpm", mask.to(self.device, changes.delta.dtype), changes.delta)
            if changes.after_mlp:
                mlp, mlp_replaced = d, mask.any(dim=1)
            else:
                attn = attn + d
        return self._stream_after(layer, attn.to(self.resid_post[layer].dtype), mlp, mlp_replaced, answer_only, own_mlp)

    def _low_rank(self, layer: int, key: tuple, sets: Sequence[Sequence[Unit]]) -> _LowRankProjections | None:
        """Low-rank projections for block ``layer + 1`` when every set patches one unit of ``layer``.

        Needs the stream entering block ``layer + 1`` to be the cached one plus the unit's
        ``delta`` (:meth:`_next_block_reads_delta`: parallel residual, or no MLP) and at least one
        norm-fed projection found.
        """
        changes = self._changes[(key, layer)]
        if not (
            self._next_block_reads_delta(layer)
            and changes.a is not None
            and self._norm_pairs
            and layer + 1 < self.n_layers
            and all(len(s) == 1 for s in sets)
        ):
            return None
        low_rank = _LowRankProjections(
            self.model.blocks[layer + 1], self._norm_pairs, self.resid_post[layer], changes.B, changes.a
        )
        return low_rank if low_rank.entries else None

    def _own_mlp_low_rank(self, layer: int, key: tuple, sets: Sequence[Sequence[Unit]]) -> _LowRankProjections | None:
        """Low-rank MLP-input projections of a *sequential* block ``layer`` itself, when every set
        patches one unit of it (the patch reaches its own block's MLP input first).

        The block layout says what the projections read (:meth:`_own_mlp_inputs`: pre-norm blocks
        ``ln2(mid_pre + delta_h)``, OLMo-2 ``resid_pre + ln1_post(attn_pre + delta_h)``; parallel
        blocks: nothing, their MLP reads the block input). ``torch.nn.Linear`` and GPT-2's
        ``Conv1D`` projections qualify.
        """
        changes = self._changes[(key, layer)]
        if (
            not self._has_mlp(layer)
            or changes.a is None
            or changes.after_mlp
            or layer >= self.n_layers - 1
            or not all(len(s) == 1 for s in sets)
        ):
            return None
        inputs = self._own_mlp_inputs(layer)
        if inputs is None or not inputs[0]:
            return None
        pairs, base, residual = inputs
        low_rank = _LowRankProjections(self.model.blocks[layer], pairs, base, changes.B, changes.a, residual=residual)
        return low_rank if low_rank.entries else None

    def values_of_sets(self, sets: Sequence[Sequence[Unit]], chunk: int) -> Float[Tensor, "sets batch"]:
        """Metric per prompt for each joint patch (copies grouped by first layer and unit keys)."""
        with self.fused_kernels():
            return self._values_of_sets(sets, chunk)

    def _values_of_sets(self, sets: Sequence[Sequence[Unit]], chunk: int) -> Float[Tensor, "sets batch"]:
        out = self.values_pre[None].repeat(len(sets), 1)
        unembed = _PendingUnembedding(self, out, CPU_UNEMBED_ROWS if self.device.type == "cpu" else 0)
        groups: dict[tuple, list[int]] = {}
        for i, units in enumerate(sets):
            if units:
                layer = min(u.layer for u in units)
                keys = tuple(sorted({u.key for u in units if u.layer == layer}, key=repr))
                groups.setdefault((layer, keys), []).append(i)
        for (layer, keys), idx in sorted(groups.items(), key=lambda item: item[0][0]):
            for key in keys:
                self.changes(key, layer)
            members = [sets[i] for i in idx]
            low_rank = self._low_rank(layer, keys[0], members) if len(keys) == 1 else None
            own = self._own_mlp_low_rank(layer, keys[0], members) if len(keys) == 1 and low_rank is None else None
            units_count = {key: self._changes[(key, layer)].delta.shape[0] for key in keys}
            for lo in range(0, len(idx), chunk):
                sel = idx[lo : lo + chunk]
                masks = {key: torch.zeros(len(sel), units_count[key], dtype=torch.bool) for key in keys}
                for c, i in enumerate(sel):
                    for u in sets[i]:
                        if u.layer == layer:
                            masks[u.key][c, u.index] = True
                units = masks[keys[0]].float().argmax(dim=1)  # on the CPU: planning only
                own_mlp = None if own is None else (lambda stream, units=units: own.installed(units, stream))  # noqa: B023
                # The last block's stream is read at the answer positions only (run_tail).
                resid = self.start_residual(layer, masks, answer_only=layer == self.n_layers - 1, own_mlp=own_mlp)
                hooks = self._tail_hooks([[u for u in sets[i] if u.layer > layer] for i in sel], layer + 1)
                if low_rank is not None:
                    context = low_rank.installed(units, resid)
                else:
                    context = contextlib.nullcontext()
                with context:
                    unembed.add(sel, self.tail_rows(resid, layer + 1, len(sel), hooks))
            if low_rank is not None and not low_rank.broken:
                self.low_rank_layers.append(layer + 1)
            if own is not None and not own.broken:
                self.own_mlp_low_rank_layers.append(layer)
            for key in keys:  # [unit, batch, pos, d_model] per layer: one at a time
                self._changes.pop((key, layer), None)
        unembed.flush()
        return out
