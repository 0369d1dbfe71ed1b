"""The fast path: layer skip, patches stacked along the batch, exact shortcuts.

A patch whose first patched component sits in layer ``l`` leaves layers ``< l`` unchanged, so
one forward of the pre checkpoint caches each block's input and output, the attention
activations and the arguments the model hands every block (attention mask, rotary tables,
position ids); its logits are computed at the answer positions only (``logits_to_keep``).
Then, per layer ``l`` and kind of patch:

* every per-head target at layer ``l`` (pattern, q, k, v, z, QK weights, OV weights, a path
  into the head) changes only that head's output at layer ``l`` given the cached input of
  layer ``l``.  One call of block ``l`` with the change applied to *all* of its heads gives each
  head's new ``z`` (heads do not interact inside a layer), and head ``h``'s patched attention
  output is the cached one plus ``delta_h = a_h @ B_h`` (``a = z_new - z_pre``, ``B = W_O``; OV
  weights: ``a = [z_new, z_pre]``, ``B = [W_O_post; -W_O_pre]``).  The same call checks the
  reconstruction: cached block output plus every head's ``delta`` must equal the block's output.
  Once one block passed that check, patterns, values and head outputs skip the call: ``z_new``
  is the post ``z``, ``pattern_post @ v`` from the cached ``hook_v``, or ``pattern_pre @ v_post``
  (if that formula rebuilds the cached ``z``).  An MLP-output patch is ``mlp_post - mlp_pre``.
* the residual streams of a layer's patches are stacked along the batch (one copy of the
  prompts per patch, chunked to ``memory_budget_mb``) and only blocks ``l+1 ... n_layers-1`` run,
  by calling the bridge's own block modules; patched heads of later layers (activation kinds)
  are patched there by hooks;
* block ``l+1``'s query, key, value and MLP-in projections come from a rank-``r`` formula when
  the blocks have a parallel residual (``_LowRankProjections``, checked against the module on
  first use);
* the last block's keys and values run at every position but its query and output
  projections, its MLP and the unembedding at the answer position only (the metric reads
  nothing else); on a CPU the answer rows of several chunks are unembedded together
  (``_PendingUnembedding``).
* while the engine computes, element-wise modules take a faster form of the same function
  (``_shortcuts``, each checked against the module on first use): GPT-2's tanh GELU as one
  kernel instead of seven element-wise passes, and the bridge's norms as the module they wrap
  (the bridge otherwise normalises once more for its unhooked ``hook_scale`` /
  ``hook_normalized``).  The pre-run keeps the model's own modules, so the tail check below
  compares the swapped tail with the model itself.

Where the time goes (torch.profiler, CPU, 1 thread, OLMo-2 70m shape, 32 prompts x 17 tokens,
every head's ``z`` patched): ~57 % the matmuls of stacked copies (blocks ``l+1 .. n_layers-2``,
the own MLP's down projection, the last block's keys and values), ~20 % the answer-only
unembedding and softmax, ~10 % the one-copy matmuls of the pre-run, the checks and the
low-rank tables; the rest element-wise (rotary, norms, SwiGLU).  Counting matmul FLOPs,
TransformerLens's one full forward per head does ~4.3x the work of this layout on that shape,
the ceiling of the speedup at equal matmul efficiency.  Before the shortcuts, GPT-2's
seven-pass GELU alone took ~13 % of its fast path.  Chunks: ``CPU_CHUNK_TOKENS`` rows per
stacked call, half for a gated MLP (``cpu_chunk_tokens``).

Run-time checks against the model's own forward guard the shortcuts (the block-``l``
reconstruction above; the last two blocks called on stacked copies must reproduce the model's
metric).  If one fails, ``FastPathUnsupported`` tells the caller (``interp.patching.engine``)
to use full forwards.

Architecture-specific parts (how a block combines its attention and MLP, the answer-only last
block) are the methods in the section "block layout" of ``LayerSkipEngine``: a sequential
residual block reruns its MLP on the patched stream, a parallel one (GPT-NeoX) does not; the
norms are read from the block (pre-norms ``ln1``/``ln2``, or OLMo-2's output norms
``ln1_post``/``ln2_post``, through which a head's change passes before it reaches the stream).
In a sequential block a one-head patch reaches its own MLP input first, a rank-``d_head`` change
of a normalised stream, so those projections take the low-rank formula too
(``_own_mlp_low_rank``); the last block's MLP runs at the answer positions only. Where queries
and keys are normalised over all heads together (OLMo-2), q, k and QK-weight patches move every
head of the layer and go to the reference path (``heads_mixing_kinds``).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor

from interp.patching import _weights
from interp.patching._common import answer_logits_forward, first, heads_shape, model_device
from interp.patching.targets import HOOKS, Target, hook_name
from interp.tasks import TaskBatch

# Tolerances of the run-time checks of the fast path against the model's own forward.
_VALUE_CHECK_ATOL = 1e-5  # metric units (relative above 1), as the acceptance test of the engine
_RESID_CHECK_RTOL = 1e-4  # relative to the residual stream's largest entry
# On a CPU, stacked copies beyond ~2k token rows per call only add cache and allocator misses:
# 4 copies of 32 x 17 tokens ran 6-10 % faster than 8-12 on the benchmark shapes.  (GPUs: the
# memory budget alone sets the chunk.)  A gated MLP halves it (:func:`cpu_chunk_tokens`).
CPU_CHUNK_TOKENS = 2048
#: On a CPU, the answer-position streams of several chunks are unembedded together up to this
#: many rows (:class:`_PendingUnembedding`).
CPU_UNEMBED_ROWS = 512
#: activation kinds a later layer of a joint patch can take by a hook inside the tail
_TAIL_KINDS = ("pattern", "q", "k", "v", "z")


@dataclass(frozen=True)
class Unit:
    """One patched component of a joint patch: ``kind`` at ``(layer, index)`` (index: head; 0 for an MLP).

    ``sender`` / ``receiver_input`` for a path (the unit sits at the receiver head).
    """

    kind: str
    layer: int
    index: int
    query_pos: int | None = None
    sender: tuple[int, int] | None = None
    receiver_input: str = "q"

    @property
    def key(self) -> tuple:
        """Units with one key share one table of per-head changes at a layer."""
        return (self.kind, self.query_pos, self.sender, self.receiver_input)


def target_units(target: Target, n_layers: int, n_heads: int) -> list[Unit] | None:
    """The units of a target, or None if it is not a sum of per-head / per-MLP changes."""
    if target.kind == "path":
        target.resolved_heads(n_layers, n_heads)
        (rl, rh) = target.receiver
        return [Unit("path", rl, rh, sender=target.heads[0], receiver_input=target.receiver_input)]
    if target.kind == "mlp":
        return [Unit("mlp", l, 0) for l in target.resolved_layers(n_layers)]
    if target.kind in ("pattern", "q", "k", "v", "z", "qk", "ov"):
        return [Unit(target.kind, l, h, query_pos=target.query_pos) for l, h in target.resolved_heads(n_layers, n_heads)]
    return None


def heads_mixing_kinds(model: Any) -> frozenset[str]:
    """Per-head kinds whose change reaches the layer's *other* heads in this model.

    OLMo-2 normalises queries and keys over all heads together (``q_norm`` / ``k_norm`` over
    ``n_heads * d_head``, before the split into heads), so a head's query, key or QK weights move
    every head's attention and per-head changes do not add up; per-head norms (``d_head`` wide)
    and no norm keep heads separate.
    """
    attn = model.blocks[0].attn
    d_head = int(model.cfg.d_head)
    for name in ("q_norm", "k_norm"):
        norm = getattr(attn, name) if name in dict(attn.named_children()) else None
        weight = getattr(norm, "weight", None) if norm is not None else None
        if isinstance(weight, Tensor) and weight.numel() > d_head:
            return frozenset({"q", "k", "qk", "path"})
    return frozenset()


def fast_path_applies(units: Sequence[Unit] | None, n_heads: int, mixing: frozenset[str] = frozenset()) -> bool:
    """Whether the layer-skip engine computes this joint patch exactly.

    All units at the first patched layer may be of any unit kind (a path only alone; OV only
    without the layer's shared output bias, i.e. not every head of the layer), later ones must
    be head activations a hook can replace. Kinds in ``mixing`` (:func:`heads_mixing_kinds`)
    are left to the reference path.
    """
    if not units or any(u.kind in mixing for u in units):
        return False
    first_layer = min(u.layer for u in units)
    start = [u for u in units if u.layer == first_layer]
    if any(u.kind == "path" for u in units) and len(units) != 1:
        return False
    if any(u.kind not in _TAIL_KINDS for u in units if u.layer > first_layer):
        return False
    ov = {u.index for u in start if u.kind == "ov"}
    return len(ov) < n_heads


class FastPathUnsupported(RuntimeError):
    """A run-time check of the layer-skip (fast) patching path failed for this model: a block
    layout it does not handle, a hook it needs that the bridge does not expose, or a rebuilt
    block that differs from the model's own forward. The engine catches it and computes the same
    values with full forwards (the reference path), with a warning naming the reason.

    Fix: nothing is needed (the values are exact either way); to skip the check and its warning,
    pass ``method="reference"``. To make the fast path handle a new block layout, see
    docs/extending.md.
    """


def _sanitize_call_kwargs(kwargs: dict) -> dict:
    """Kwargs captured from the model's own block call, minus the per-forward KV cache."""
    out = {}
    for key, value in kwargs.items():
        if key in ("past_key_value", "past_key_values", "layer_past") or hasattr(value, "get_seq_length"):
            out[key] = None  # a HF Cache object: it belongs to that one forward
        elif key == "use_cache":
            out[key] = False
        else:
            out[key] = value
    return out


def _call_signature(args: tuple, kwargs: dict) -> tuple[str | None, tuple, dict]:
    """``(hidden-states keyword or None if positional, other args, sanitized kwargs)`` of a captured call."""
    if args:
        return None, tuple(args[1:]), _sanitize_call_kwargs(kwargs)
    if "hidden_states" in kwargs:
        rest = {k: v for k, v in kwargs.items() if k != "hidden_states"}
        return "hidden_states", (), _sanitize_call_kwargs(rest)
    raise FastPathUnsupported("a block was called without positional or hidden_states= residual stream")


def _repeat_batch(value: Any, batch: int, n_copies: int) -> Any:
    """Repeat every tensor whose leading dim is the prompt batch ``n_copies`` times (copy-major).

    Tensors with a leading dim of 1 broadcast (rotary tables, position ids) and are left alone;
    1-D tensors (cache positions) are never batched.
    """
    if n_copies == 1:
        return value
    if isinstance(value, Tensor):
        if value.ndim >= 2 and value.shape[0] == batch:
            return value.repeat(n_copies, *([1] * (value.ndim - 1)))
        return value
    if isinstance(value, tuple):
        return tuple(_repeat_batch(v, batch, n_copies) for v in value)
    if isinstance(value, list):
        return [_repeat_batch(v, batch, n_copies) for v in value]
    if isinstance(value, dict):
        return {k: _repeat_batch(v, batch, n_copies) for k, v in value.items()}
    return value


# --------------------------------------------------------------------------- low-rank input projections


def _norm_affine(norm: torch.nn.Module) -> tuple[bool, Tensor | None, Tensor | None, float] | None:
    """``(centred, gain, bias, eps)`` of a LayerNorm / RMSNorm module (bridge or torch), else None."""
    if isinstance(norm, torch.nn.LayerNorm):
        return True, norm.weight, norm.bias, float(norm.eps)
    if hasattr(norm, "uses_rms_norm") and getattr(norm, "original_component", None) is not None:
        inner = norm.original_component  # a TransformerBridge NormalizationBridge
        weight = getattr(norm, "weight", None)
        if not isinstance(weight, Tensor):
            return None
        rms = bool(norm.uses_rms_norm)
        gain = 1.0 + weight if norm.uses_weight_offset else weight
        eps = getattr(inner, "eps", None) or getattr(inner, "variance_epsilon", None) or \
            getattr(norm.config, "eps", 1e-5)
        return not rms, gain, None if rms else getattr(inner, "bias", None), float(eps)
    return None


def _is_projection(module: torch.nn.Module) -> bool:
    """A ``torch.nn.Linear``, or transformers' ``Conv1D`` (GPT-2: ``x @ weight + bias``, weight
    stored ``[in, out]``)."""
    return isinstance(module, torch.nn.Linear) or type(module).__name__ == "Conv1D"


def _projection_weight(module: torch.nn.Module) -> Tensor:
    """The projection's weight as ``[out, in]`` (a Linear's layout)."""
    return module.weight if isinstance(module, torch.nn.Linear) else module.weight.T


def _module_forward(module: torch.nn.Module, inp: Tensor) -> Tensor:
    """The module's class forward (not a swapped-in one)."""
    return type(module).forward(module, inp)


@contextlib.contextmanager
def _recording_norm_projections(block: torch.nn.Module) -> Iterator[list[tuple[str, str]]]:
    """Yield a list that, after the block has run once, holds ``(linear, norm)`` submodule names.

    A pair is a ``torch.nn.Linear`` called exactly once, on exactly the output of a norm module
    of the same block (a block's query/key/value and MLP-in projections).
    """
    norm_out: dict[str, Tensor] = {}
    linear_in: dict[str, list] = {}
    handles = []
    for name, module in block.named_modules():
        if _norm_affine(module) is not None:
            handles.append(module.register_forward_hook(
                lambda mod, args, out, name=name: norm_out.__setitem__(name, out)))
        elif _is_projection(module):
            handles.append(module.register_forward_pre_hook(
                lambda mod, args, name=name: linear_in.setdefault(name, []).append(args[0] if args else None)))
    found: list[tuple[str, str]] = []
    try:
        yield found
    finally:
        for handle in handles:
            handle.remove()
    for linear, inputs in linear_in.items():
        x = inputs[0] if len(inputs) == 1 else None
        if not isinstance(x, Tensor):
            continue
        # The very tensor first; equal values only as a fallback (hooks may copy), where two norms
        # with equal outputs here have equal parameters, so either one gives the same formula.
        same = [n for n, out in norm_out.items() if out is x] or \
            [n for n, out in norm_out.items() if isinstance(out, Tensor) and out.shape == x.shape and torch.equal(out, x)]
        if same:
            found.append((linear, same[0]))


@contextlib.contextmanager
def _swapped_forward(module: torch.nn.Module, forward: Callable) -> Iterator[None]:
    """Let ``module`` compute with ``forward`` inside the block (hooks on it still run).

    Written to the instance's ``__dict__`` itself: a TransformerBridge component's
    ``__setattr__`` may hand attributes on to the module it wraps.
    """
    previous = module.__dict__.get("forward")
    module.__dict__["forward"] = forward
    try:
        yield
    finally:
        if previous is None:
            module.__dict__.pop("forward", None)
        else:
            module.__dict__["forward"] = previous


#: activation modules (class names) that compute ``0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))``
#: as separate element-wise ops (GPT-2's ``gelu_new``): seven passes over ``[rows, pos, d_mlp]``
_TANH_GELU_MODULES = ("NewGELUActivation",)


class _Shortcut:
    """A module's forward replaced, while the engine computes, by a faster one of the same function.

    Checked on its first call against the module's own forward (one prompt); a mismatch beyond
    rounding restores the module's own forward for good.
    """

    def __init__(self, module: torch.nn.Module, fast: Callable[[Tensor], Tensor]):
        self.module = module
        self.fast = fast
        self.checked = False
        self.broken = False

    def __call__(self, x: Tensor, *args: Any, **kwargs: Any) -> Any:
        if self.broken or args or kwargs:
            return type(self.module).forward(self.module, x, *args, **kwargs)
        out = self.fast(x)
        if not self.checked:
            ref = _module_forward(self.module, x[:1])
            if out.shape != x.shape[:-1] + ref.shape[-1:] or not torch.allclose(out[:1], ref, rtol=1e-5, atol=1e-6):
                self.broken = True
                return _module_forward(self.module, x)
            self.checked = True
        return out


def _tanh_gelu(x: Tensor) -> Tensor:
    """torch's one-kernel tanh GELU: one pass instead of seven (GPT-2's MLP: the element-wise chain
    cost ~55 % of its input projection on a CPU)."""
    return torch.nn.functional.gelu(x, approximate="tanh")


def _norm_bridge_unhooked(norm: torch.nn.Module) -> Callable[[Tensor], Tensor] | None:
    """A TransformerBridge norm's forward as its wrapped module alone, or None if that is not equivalent.

    The bridge computes the normalisation itself for its ``hook_scale`` / ``hook_normalized``
    (and, on its native path, once more through the wrapped module): with neither hooked, the
    wrapped module's output (native path: the very result; Python path: the same function,
    e.g. ``F.layer_norm``) with ``hook_in`` / ``hook_out`` kept is the block's norm in one pass.
    """
    inner = getattr(norm, "original_component", None)
    hooks = [getattr(norm, name, None) for name in ("hook_scale", "hook_normalized")]
    if not isinstance(inner, torch.nn.Module) or isinstance(inner, torch.nn.Identity) or \
            not all(hasattr(norm, name) for name in ("hook_in", "hook_out")) or \
            any(h is None or getattr(h, "fwd_hooks", True) or getattr(h, "bwd_hooks", True) for h in hooks):
        return None

    def forward(x: Tensor) -> Tensor:
        return norm.hook_out(first(inner(norm.hook_in(x))).to(x.dtype))
    return forward


def _shortcuts(model: Any) -> list[_Shortcut]:
    """Faster equivalents of element-wise modules of the blocks and the final norm (see :class:`_Shortcut`)."""
    out = []
    modules = [m for block in model.blocks for m in block.modules()]
    if isinstance(getattr(model, "ln_final", None), torch.nn.Module):
        modules.append(model.ln_final)
    for module in modules:
        if "forward" in module.__dict__:
            continue
        if type(module).__name__ in _TANH_GELU_MODULES:
            out.append(_Shortcut(module, _tanh_gelu))
        elif any(cls.__name__ == "NormalizationBridge" for cls in type(module).__mro__):  # RMS one too
            fast = _norm_bridge_unhooked(module)
            if fast is not None:
                out.append(_Shortcut(module, fast))
    return out


def _answer_rows_linear(linear: torch.nn.Linear, rows: Int[Tensor, "n"], pos: Int[Tensor, "n"],
                        shape: tuple[int, int]) -> Callable:
    """``linear``'s forward evaluated at positions ``(rows, pos)`` only, zeros elsewhere.

    For the last block's query and output projections: the metric reads the attention output
    at the answer position alone, and each query position's output depends only on its own
    query, so the other positions' queries (zeros: a uniform pattern) and outputs are never read.
    """
    def forward(inp: Tensor) -> Tensor:
        if inp.ndim != 3 or tuple(inp.shape[:2]) != shape:
            return torch.nn.Linear.forward(linear, inp)
        out = inp.new_zeros(*shape, linear.out_features)
        out[rows, pos] = torch.nn.Linear.forward(linear, inp[rows, pos])
        return out
    return forward


class _LowRankProjections:
    """Norm-fed projections of the block after a one-head patch, without the d_model matmul.

    With a parallel residual (GPT-NeoX), patching head h of block l changes the stream entering
    block l+1 by ``delta_h = dz_h @ W_O[h]`` only (``dz = z_post - z_pre``, rank <= d_head).  A
    linear map ``(W, b)`` read from a LayerNorm ``(g, beta, eps)`` of that stream then splits:

        W ln(base + delta_h) + b = (A + dz_h @ M_h) / s + c
        A   = ((base - mean base) * g) @ W.T          [batch * pos, out]  once per layer
        M_h = ((W_O[h] - its mean over d_model) * g) @ W.T   [d_head, out]   once per layer
        c   = W @ beta + b,    s = sqrt(var(base + delta_h) + eps)   per position

    (RMSNorm: no centring, no beta.)  Each stacked copy then costs ``d_head x out`` per position
    for the query, key, value and MLP-in projections instead of ``d_model x out``: about 7/12
    of a block's matmuls at ``1 / n_heads`` of the price.  The module's own forward is swapped
    for the formula only while ``installed``; its first use is checked against the module on
    one prompt and, if it differs, the module's own forward is used from then on.
    """

    def __init__(self, block: torch.nn.Module, pairs: Sequence[tuple[str, str]],
                 base: Float[Tensor, "batch pos d_model"], W_O: Float[Tensor, "unit rank d_model"],
                 dz: Float[Tensor, "batch pos unit rank"], residual: Tensor | None = None):
        # ``residual`` (OLMo-2's own MLP): the projection reads ``residual + norm(base + delta)``,
        # so ``c`` gains ``residual @ W.T`` per position.
        self.dz = dz.float()
        self.entries: list[tuple[torch.nn.Module, str, Tensor, Tensor, Tensor]] = []
        self.norms: dict[str, tuple[bool, float]] = {}
        self.broken = False
        self._checked: set[torch.nn.Module] = set()  # projections already compared with the module
        for linear_name, norm_name in pairs:
            linear, affine = block.get_submodule(linear_name), _norm_affine(block.get_submodule(norm_name))
            if not _is_projection(linear) or affine is None or linear.weight.dtype != torch.float32:
                continue  # exactness: float32 weights only (bf16 keeps the module's own rounding)
            centred, gain, beta, eps = affine
            W = _projection_weight(linear)  # [out, d_model]
            g = torch.ones(W.shape[1], device=W.device) if gain is None else gain.float()
            base_c = base.float() - base.float().mean(-1, keepdim=True) if centred else base.float()
            W_O_c = W_O.float() - W_O.float().mean(-1, keepdim=True) if centred else W_O.float()
            A = ((base_c * g) @ W.T).reshape(-1, W.shape[0])  # [batch * pos, out]
            M = (W_O_c * g) @ W.T
            c = torch.zeros(W.shape[0], device=W.device)
            if beta is not None:
                c = c + W @ beta.float()
            if linear.bias is not None:
                c = c + linear.bias.float()
            if residual is not None:
                c = c + residual.float() @ W.T  # [batch, pos, out]
            self.entries.append((linear, norm_name, A, M, c))
            self.norms[norm_name] = (centred, eps)

    @contextlib.contextmanager
    def installed(self, heads: Int[Tensor, "copies"], stream: Float[Tensor, "rows pos d_model"]) -> Iterator[None]:
        """Swap the projections in for stacked copies of ``stream``; copy ``c`` patched head ``heads[c]``.

        ``heads`` lives on the CPU (read without a device sync); ``stream`` is ``[copies * batch,
        pos, d_model]``, the residual stream entering the block.
        """
        n_copies = heads.numel()
        batch, pos = self.dz.shape[:2]
        heads_list = heads.tolist()
        dz = self.dz[:, :, heads.to(self.dz.device)].permute(2, 0, 1, 3).reshape(n_copies, batch * pos, -1)
        scales: dict[str, Tensor] = {}

        def scale(norm_name: str) -> Tensor:
            if norm_name not in scales:
                centred, eps = self.norms[norm_name]
                x = stream.float()
                var = x.var(-1, unbiased=False, keepdim=True) if centred else x.pow(2).mean(-1, keepdim=True)
                scales[norm_name] = (var + eps).sqrt()
            return scales[norm_name]

        def make_forward(linear: torch.nn.Linear, norm_name: str, A: Tensor, M: Tensor, c: Tensor) -> Callable:
            def forward(inp: Tensor) -> Tensor:
                if self.broken or inp.shape != stream.shape:  # e.g. the last block's answer-only MLP
                    return _module_forward(linear, inp)
                # One addmm per copy (faster on CPU than a bmm over gathered M), A added in the same call.
                out = torch.empty(n_copies, batch * pos, A.shape[-1], device=A.device)
                for i, head in enumerate(heads_list):
                    torch.addmm(A, dz[i], M[head], out=out[i])
                out = out.view(n_copies, batch, pos, -1).div_(scale(norm_name).view(n_copies, batch, pos, 1)).add_(c)
                out = out.view(n_copies * batch, pos, -1)
                if linear not in checked:
                    ref = _module_forward(linear, inp[:1])
                    if float((out[:1] - ref).abs().max()) > _RESID_CHECK_RTOL * max(1.0, float(ref.abs().max())):
                        self.broken = True
                        return _module_forward(linear, inp)
                    checked.add(linear)
                return out.to(inp.dtype)
            return forward

        checked = self._checked
        with contextlib.ExitStack() as stack:
            for entry in self.entries:
                stack.enter_context(_swapped_forward(entry[0], make_forward(*entry)))
            yield




def replace_hook(post: Tensor, mask: Bool[Tensor, "copies unit"], head_axis: int | None,
                 query_mask: Bool[Tensor, "pos"] | None = None) -> Callable:
    """Hook: copy ``c`` of a stacked batch takes ``post`` on the heads ``mask[c]``.

    ``post``: the post activation of one copy of the prompts (``[batch, head, q, k]`` for a
    pattern, ``[batch, pos, head, d_head]`` for q/k/v/z, ``[batch, pos, d_model]`` for an MLP
    output: ``head_axis`` None, one unit); ``query_mask`` restricts a pattern to query positions.
    """
    n_copies = mask.shape[0]
    if head_axis is None:
        select = mask[:, :1].reshape(n_copies, 1, 1, 1)
    else:
        shape = [n_copies] + [1] * post.ndim
        shape[head_axis + 1] = mask.shape[1]
        select = mask.reshape(shape)
        if query_mask is not None:
            qshape = [1] * (post.ndim + 1)
            qshape[head_axis + 2] = query_mask.numel()
            select = select & query_mask.reshape(qshape)

    def hook(act: Tensor, hook: Any = None) -> Tensor:
        stacked = act.reshape(n_copies, -1, *act.shape[1:])
        return torch.where(select, post[None].to(act.dtype), stacked).reshape(act.shape)

    return hook


def query_mask(query_pos: int | None, pos: int, device: torch.device) -> Tensor | None:
    """Boolean mask of the one patched destination position (None: every position).

    Raises:
        ValueError: a position outside ``[-pos, pos - 1]``.
    """
    if query_pos is None:
        return None
    if not -pos <= query_pos < pos:
        raise ValueError(f"query_pos={query_pos} out of range for prompts of {pos} tokens")
    mask = torch.zeros(pos, dtype=torch.bool, device=device)
    mask[query_pos % pos] = True
    return mask


def bytes_per_copy(model: Any, batch: TaskBatch, full_logits: bool) -> int:
    """Rough peak activation bytes of one copy of the prompts in a layer-skip (or full) run."""
    cfg = model.cfg
    d_model = int(cfg.d_model)
    d_mlp = int(getattr(cfg, "d_mlp", None) or 4 * d_model)
    n_heads, d_vocab = int(cfg.n_heads), int(cfg.d_vocab)
    n, pos = batch.tokens.shape
    per_token = 8 * d_model + 3 * d_mlp + 4 * n_heads * pos
    logits = 3 * d_vocab * (pos if full_logits else 1)
    return 4 * n * (pos * per_token + logits)


def cpu_chunk_tokens(model: Any) -> int:
    """Token rows per stacked call on a CPU: ``CPU_CHUNK_TOKENS``, half for a gated MLP.

    A gated MLP (SwiGLU: OLMo-2, Llama) keeps four ``d_mlp``-wide tensors per token alive
    (gate, up, activation, product) where a plain one keeps two; on the OLMo-2 70m shape 2-3
    copies of 32 x 17 tokens ran ~8 % faster than 4 (GPT-2: 2-4 copies alike).
    """
    return CPU_CHUNK_TOKENS // 2 if getattr(model.cfg, "gated_mlp", False) else CPU_CHUNK_TOKENS


def chunk_size(model: Any, batch: TaskBatch, memory_budget_mb: float, full_logits: bool = False) -> int:
    """Copies of the prompts per stacked call within ``memory_budget_mb`` MiB.

    Raises:
        ValueError: a budget that is not a positive number.
    """
    if isinstance(memory_budget_mb, bool) or not isinstance(memory_budget_mb, (int, float)) or memory_budget_mb <= 0:
        raise ValueError(f"memory_budget_mb must be a positive number of MiB, got {memory_budget_mb!r}")
    return max(1, int(memory_budget_mb * 2**20) // bytes_per_copy(model, batch, full_logits))


class _PendingUnembedding:
    """Answer-position streams of stacked chunks, unembedded together once ``max_rows`` are pending.

    The unembedding is one ``[rows, d_model] x [d_model, d_vocab]`` product per call; on a CPU
    (vocabulary 50k, d_model 512) it ran ~15 % faster per row at 512 rows than at the 64 of
    two stacked copies of 32 prompts.  ``max_rows`` 0: every chunk at once (GPUs, where the
    memory budget sets the chunk).
    """

    def __init__(self, engine: "LayerSkipEngine", out: Float[Tensor, "sets batch"], max_rows: int):
        self.engine, self.out, self.max_rows = engine, out, max_rows
        self.sets: list[int] = []
        self.rows: list[Tensor] = []

    def add(self, sets: Sequence[int], rows: Float[Tensor, "rows d_model"]) -> None:
        """Queue the final stream of copies ``sets`` (``[len(sets) * batch, d_model]``, copy-major)."""
        self.sets.extend(sets)
        self.rows.append(rows)
        if len(self.sets) * self.engine.n >= self.max_rows:
            self.flush()

    def flush(self) -> None:
        """Write the metric of every queued copy into ``out``."""
        if self.sets:
            values = self.engine.values_of_rows(torch.cat(self.rows), len(self.sets))
            self.out[torch.tensor(self.sets, device=self.out.device)] = values
            self.sets, self.rows = [], []


@dataclass
class _Changes:
    """Per-unit change of block ``layer``'s output for one unit key.

    ``delta[u]`` is added to the stream leaving the block's attention (``after_mlp`` False) or
    replaces the MLP's contribution (``after_mlp`` True: an MLP-output patch); ``a``, ``B`` its
    factors ``delta[u] = a[..., u, :] @ B[u]`` when it has low rank (else None).
    """

    delta: Float[Tensor, "unit batch pos d_model"]
    a: Tensor | None
    B: Tensor | None
    after_mlp: bool


class LayerSkipEngine:
    """Cached pre-checkpoint run plus the layer-skip machinery (see the module docstring).

    Args:
        model: the pre checkpoint (``TransformerBridge``, eval mode).
        batch: prompts (on any device; moved to the model's).
        metric: ``(logits [n, d_vocab], batch) -> [n]`` (see ``interp.patching.metrics``).
        post: a ``interp.patching.engine.PostCheckpoint`` of the same prompts.

    Raises:
        FastPathUnsupported: the pre-run does not expose what the engine needs.
    """

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
        self.parallel = bool(getattr(self.model.cfg, "parallel_attn_mlp", False))
        self._detect_layout()
        names, optional = set(), set()
        for l in range(L):
            names |= {f"blocks.{l}.hook_in", f"blocks.{l}.hook_out", hook_name("z", l), hook_name("pattern", l)}
            optional |= {hook_name(k, l) for k in ("q", "k", "v", "mlp")}
            if not self.parallel:  # a sequential block's MLP reads resid_pre + attn_out
                names.add(f"blocks.{l}.attn.hook_out")
        block_calls: dict[int, tuple] = {}
        attn_call: dict[str, tuple] = {}
        handles = []
        for l, block in enumerate(self.model.blocks):
            handles.append(block.register_forward_pre_hook(
                lambda mod, args, kwargs, l=l: block_calls.__setitem__(l, (args, kwargs)), with_kwargs=True))
        last = self.model.blocks[L - 1]
        if hasattr(last, "attn"):
            handles.append(last.attn.register_forward_pre_hook(
                lambda mod, args, kwargs: attn_call.__setitem__("last", (args, kwargs)), with_kwargs=True))
        try:
            rows, (cache,) = answer_logits_forward(
                lambda tokens, **kw: self.model.run_with_cache(tokens, names_filter=lambda n: n in names or n in optional, **kw),
                self.batch)
        finally:
            for h in handles:
                h.remove()
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
        name = hook_name(kind, layer)
        if name not in self.cache.keys():
            raise FastPathUnsupported(f"the pre-run exposes no {name}")
        return self.cache[name]

    # ---- block layout (architecture-specific)
    def _detect_layout(self) -> None:
        """Which norms a block applies where, from the bridge's block submodules.

        ``ln1`` / ``ln2``: pre-norms of the attention / MLP input (GPT-NeoX, GPT-2, Llama);
        ``ln1_post`` / ``ln2_post``: norms of the attention / MLP *output* before the residual add
        (OLMo-2, whose attention and MLP read the raw stream). Blocks are checked alike, so one
        block's layout stands for all of them; a parallel block with output norms is not handled.
        """
        block = self.model.blocks[0]
        self.attn_norm = "ln1" if hasattr(block, "ln1") else None
        self.attn_out_norm = "ln1_post" if hasattr(block, "ln1_post") else None
        self.mlp_norm = "ln2" if hasattr(block, "ln2") else None
        self.mlp_out_norm = "ln2_post" if hasattr(block, "ln2_post") else None
        if not hasattr(block, "attn") or (self.parallel and (self.attn_out_norm or self.mlp_out_norm)):
            raise FastPathUnsupported("block layout not handled (no attention, or a parallel block with output norms)")

    def _attn_input(self, block: Any, resid: Tensor) -> Tensor:
        """What the attention reads: ``ln1(resid)`` for a pre-norm block, the stream itself otherwise."""
        return first(block.ln1(resid)) if self.attn_norm else resid

    def _attn_to_stream(self, block: Any, attn: Tensor) -> Tensor:
        """The attention output's contribution to the residual stream (OLMo-2: ``ln1_post(attn)``)."""
        return first(block.ln1_post(attn)) if self.attn_out_norm else attn

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

    def _stream_after(self, layer: int, attn_delta: Tensor, mlp_delta: Tensor | None,
                      mlp_replaced: Tensor | None, answer_only: bool = False,
                      own_mlp: Callable[[Tensor], Any] | None = None) -> Tensor:
        """Stacked stream leaving block ``layer`` given the attention-output change per copy.

        ``attn_delta``, ``mlp_delta``: ``[copies, batch, pos, d_model]``; ``mlp_replaced``:
        ``[copies]`` bool, copies whose MLP output is the post checkpoint's (``mlp_delta`` holds
        ``mlp_post - mlp_pre`` there, ``hook_mlp_out`` being the MLP's contribution to the
        stream).  Parallel residual (GPT-NeoX): the MLP reads the block input, unchanged by an
        attention patch.  Sequential: the MLP reruns on the patched stream; with an output norm
        on the attention (OLMo-2) the change passes through it first, so heads do not add
        linearly in the stream. ``answer_only``: the MLP runs at the answer positions only (it
        is position-wise; for the last block, whose other positions nobody reads). ``own_mlp``:
        given the stacked input of the norm the MLP's input projections read through (``mid``
        for a pre-norm block, the attention output for OLMo-2), a context that swaps in their
        low-rank formula (:meth:`_own_mlp_low_rank`).
        """
        n = attn_delta.shape[0]
        attn = None
        if self.attn_out_norm:  # OLMo-2: the stream gets ln1_post(attn_out + delta), not + delta
            block = self.model.blocks[layer]
            attn = (self.attn_out[layer][None] + attn_delta).reshape(n * self.n, self.pos, -1)
            stream = self._attn_to_stream(block, attn).reshape(attn_delta.shape)
            mid = self.resid_pre[layer][None] + stream
        elif not self._has_mlp(layer) or self.parallel:
            out = self.resid_post[layer][None] + attn_delta
            if mlp_delta is not None:
                out = out + mlp_delta
            return out.reshape(n * self.n, self.pos, -1)
        else:
            mid = (self.resid_pre[layer] + self.attn_out[layer])[None] + attn_delta
        if not self._has_mlp(layer):
            return mid.reshape(n * self.n, self.pos, -1)
        mid = mid.reshape(n * self.n, self.pos, -1)
        if answer_only:
            rows, pos = self._answer_rows(n)
            mlp_new = torch.zeros_like(mid)
            mlp_new[rows, pos] = self._mlp(layer, mid[rows, pos][:, None])[:, 0]
        else:
            low_rank = own_mlp is not None and mlp_replaced is None
            with own_mlp(mid if attn is None else attn) if low_rank else contextlib.nullcontext():
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
        its query and output projections at the answer), then the MLP."""
        layer = self.n_layers - 1
        block = self.model.blocks[layer]
        rows, pos = self._answer_rows(n_copies)
        with contextlib.ExitStack() as stack:
            for name in ("q", "o"):  # TransformerBridge's names for the query / output projections
                linear = getattr(getattr(block.attn, name, None), "original_component", None)
                if isinstance(linear, torch.nn.Linear) and "forward" not in linear.__dict__:
                    stack.enter_context(_swapped_forward(linear, _answer_rows_linear(
                        linear, rows, pos, (n_copies * self.n, self.pos))))
            attn = self._call(block.attn, self.attn_args, self._attn_input(block, resid), n_copies)
        x, a = resid[rows, pos], attn[rows, pos]
        if self.attn_out_norm:
            a = self._attn_to_stream(block, a[:, None])[:, 0]
        if not self._has_mlp(layer):
            return x + a
        if self.parallel:
            return self._mlp(layer, x[:, None])[:, 0] + a + x
        mid = a + x
        return self._mlp(layer, mid[:, None])[:, 0] + mid

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
            hooks.append((hook_name(kind, layer), replace_hook(post, mask.to(self.device), HOOKS[kind][1],
                                                               query_mask(qpos, self.pos, self.device))))
        return hooks

    def run_tail(self, resid: Tensor, first_block: int, n_copies: int, hooks: Sequence = ()) -> Float[Tensor, "copies batch"]:
        """Metric per copy and prompt, running blocks ``first_block ..`` from the stacked ``resid``.

        ``first_block == n_layers`` means ``resid`` is already the final residual stream.
        """
        return self.values_of_rows(self.tail_rows(resid, first_block, n_copies, hooks), n_copies)

    def tail_rows(self, resid: Float[Tensor, "rows pos d_model"], first_block: int, n_copies: int,
                  hooks: Sequence = ()) -> Float[Tensor, "rows d_model"]:
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
        """Blocks called with stacked copies + answer-only head must reproduce the model's metric."""
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

    # ---- layer l: per-unit change of the block output
    def _modification(self, key: tuple, layer: int) -> tuple[list, list, Tensor | None]:
        """``(hooks, weight slices, input change)`` applying unit kind ``key`` to every head of ``layer``."""
        kind, qpos, sender, rinput = key
        everything = torch.ones(1, self.n_heads, dtype=torch.bool, device=self.device)
        if kind in ("pattern", "q", "k", "v", "z"):
            post = self.post.activation(kind, layer).to(self.device, torch.float32)
            return [(hook_name(kind, layer), replace_hook(post, everything, HOOKS[kind][1],
                                                          query_mask(qpos, self.pos, self.device)))], [], None
        if kind == "qk":
            return [], _weights.head_slices(self.model, layer, range(self.n_heads), ("q", "k")), None
        if kind == "ov":
            # W_O too, so the block's own output checks the reconstruction; b_O stays (one head's target has none)
            return [], _weights.head_slices(self.model, layer, range(self.n_heads), ("v", "o")), None
        if kind == "path":
            sl, sh = sender
            W_O = self._W_O(sl, post=False)[sh]
            dz = self.post.activation("z", sl)[:, :, sh].to(self.device, torch.float32) - self.pre("z", sl)[:, :, sh].float()
            delta_s = dz @ W_O.float()
            captured: dict[str, Tensor] = {}
            name = hook_name(rinput, layer)
            with self.model.hooks(fwd_hooks=[(name, lambda act, hook: captured.__setitem__("x", act.clone()) or act)]):
                self._call_block(layer, self.resid_pre[layer] + delta_s.to(self.resid_pre[layer].dtype), 1)
            return [(name, replace_hook(captured["x"], everything, 2))], [], None
        raise FastPathUnsupported(f"no per-head change for kind {kind!r}")

    def _W_O(self, layer: int, post: bool) -> Float[Tensor, "head d_head d_model"]:
        if not post:
            W_O = getattr(self.model.blocks[layer].attn, "W_O", None)
            if not isinstance(W_O, Tensor) or W_O.ndim != 3:
                raise FastPathUnsupported(f"block {layer} exposes no W_O [head, d_head, d_model]")
            return W_O.detach()
        return _weights.head_W_O(self.model, self.post.weights, layer).to(self.device)

    def changes(self, key: tuple, layer: int) -> _Changes:
        """Per-unit change of block ``layer``'s output for units of ``key`` (cached).

        Runs block ``layer`` once with the change applied to every head; the reconstruction from
        the per-head changes must equal the block's output.
        """
        if (key, layer) in self._changes:
            return self._changes[(key, layer)]
        kind = key[0]
        if kind == "mlp":
            delta = (self.post.activation("mlp", layer).to(self.device, torch.float32) - self.pre("mlp", layer).float())[None]
            changes = _Changes(delta, None, None, after_mlp=True)
            self._changes[(key, layer)] = changes
            rebuilt = self._rebuild(layer, key, changes, torch.ones(1, 1, dtype=torch.bool))
            hooks, slices = [(hook_name("mlp", layer), replace_hook(
                self.post.activation("mlp", layer).to(self.device, torch.float32),
                torch.ones(1, 1, dtype=torch.bool, device=self.device), None))], []
            self._check_block(layer, hooks, slices, rebuilt, key)
            return changes
        z_new, out_all = self._z_without_block(key, layer), None
        if z_new is None:
            z_new, out_all = self._z_from_block(key, layer)
        z_pre = self.pre("z", layer).float()
        W_O = self._W_O(layer, post=False).float()
        if kind == "ov":
            a = torch.cat([z_new, z_pre], dim=-1)
            B = torch.cat([self._W_O(layer, post=True).float(), -W_O], dim=1)
        else:
            a, B = z_new - z_pre, W_O
        delta = torch.einsum("bpur,urm->ubpm", a, B)
        changes = _Changes(delta, a, B, after_mlp=False)
        self._changes[(key, layer)] = changes
        if out_all is not None:
            # The reconstruction with every head changed must equal the block itself.
            rebuilt = self._rebuild(layer, key, changes, torch.ones(1, self.n_heads, dtype=torch.bool))
            err = float((rebuilt - out_all).abs().max())
            if err > _RESID_CHECK_RTOL * max(1.0, float(out_all.abs().max())):
                del self._changes[(key, layer)]
                raise FastPathUnsupported(f"block {layer} is not x + attn + mlp (reconstruction error {err:.2e})")
            self._structure_checked = True
        return changes

    def _z_without_block(self, key: tuple, layer: int) -> Float[Tensor, "batch pos head d_head"] | None:
        """Every head's new ``z`` without calling the block, once the block structure has been
        checked: a head output is the post one; a pattern gives ``pattern_post @ v_pre``, a value
        ``pattern_pre @ v_post`` (a value patch leaves the pattern alone), where the cached
        ``hook_v`` and that formula rebuild the cached ``z`` (layout and grouped-query mapping
        checked).  None: call the block."""
        kind, qpos = key[0], key[1]
        if not self._structure_checked or kind not in ("pattern", "v", "z"):
            return None
        if kind == "z":
            return self.post.activation("z", layer).to(self.device, torch.float32)
        pattern_pre, v_pre = self._pattern_and_values(layer)
        if pattern_pre is None:
            return None
        if kind == "v":
            v_post = self.post.activation("v", layer).to(self.device, torch.float32)
            if v_post.shape != v_pre.shape:  # grouped-query values: one per kv head, not per head
                return None
            return torch.einsum("bhqk,bkhd->bqhd", pattern_pre, v_post)
        post = self.post.activation("pattern", layer).to(self.device, torch.float32)
        mask = query_mask(qpos, self.pos, self.device)
        if mask is not None:
            post = torch.where(mask[None, None, :, None], post, pattern_pre)
        return torch.einsum("bhqk,bkhd->bqhd", post, v_pre)

    def _pattern_and_values(self, layer: int) -> tuple[Tensor | None, Tensor | None]:
        """``(pattern [batch, head, q, k], v per head [batch, pos, head, d_head])`` of the pre-run
        at ``layer`` if ``z = pattern @ v`` rebuilds its cached ``z``, else ``(None, None)``."""
        name = hook_name("v", layer)
        v = self.cache[name] if name in self.cache.keys() else None
        z_pre, pattern_pre = self.pre("z", layer), self.pre("pattern", layer).float()
        if v is None or v.ndim != 4 or z_pre.ndim != 4 or v.shape[2] == 0 or self.n_heads % v.shape[2]:
            return None, None
        v = v.float().repeat_interleave(self.n_heads // v.shape[2], dim=2)  # GQA: kv head of each head
        rebuilt = torch.einsum("bhqk,bkhd->bqhd", pattern_pre, v)
        if rebuilt.shape != z_pre.shape or not torch.allclose(rebuilt, z_pre.float(), rtol=1e-4, atol=1e-5):
            return None, None
        return pattern_pre, v

    def _z_from_block(self, key: tuple, layer: int) -> tuple[Tensor, Tensor]:
        """``(every head's new z, block output)`` from one call of block ``layer`` with the change
        applied to every head (and the block's norm-fed projections recorded for the low-rank path)."""
        hooks, slices, _ = self._modification(key, layer)
        captured: dict[str, Tensor] = {}
        hooks = hooks + [(hook_name("z", layer), lambda z, hook: captured.__setitem__("z", z) or z)]
        block = self.model.blocks[layer]
        try:
            with self.model.hooks(fwd_hooks=hooks), _weights.swapped(self.model, self.post.weights or {}, slices), \
                    _recording_norm_projections(block) as pairs:
                out_all = self._call_block(layer, self.resid_pre[layer], 1)
            self._norm_pairs = self._norm_pairs or pairs
        except (TypeError, RuntimeError, IndexError, AttributeError) as err:
            raise FastPathUnsupported(f"block {layer} cannot be called on its own: {err}") from err
        if "z" not in captured:
            raise FastPathUnsupported(f"block {layer} exposes no hook_z")
        z_new = captured["z"].float()
        if z_new.ndim != 4 or z_new.shape[2] != self.n_heads:
            raise FastPathUnsupported(f"hook_z of block {layer} has shape {tuple(z_new.shape)}, not [batch, pos, head, d_head]")
        if torch.equal(z_new, self.pre("z", layer).float()) and key[0] == "pattern" and \
                not torch.equal(self.post.activation("pattern", layer).to(self.device, torch.float32),
                                self.pre("pattern", layer).float()):
            raise ValueError(f"block {layer}'s attention ignores edits of hook_pattern (z is unchanged); "
                             "this architecture's bridge cannot be pattern-patched")
        return z_new, out_all

    def _check_block(self, layer: int, hooks: list, slices: list, rebuilt: Tensor, key: tuple) -> None:
        try:
            with self.model.hooks(fwd_hooks=hooks), _weights.swapped(self.model, self.post.weights or {}, slices):
                out = self._call_block(layer, self.resid_pre[layer], 1)
        except (TypeError, RuntimeError, IndexError, AttributeError) as err:
            raise FastPathUnsupported(f"block {layer} cannot be called on its own: {err}") from err
        err = float((rebuilt - out).abs().max())
        if err > _RESID_CHECK_RTOL * max(1.0, float(out.abs().max())):
            del self._changes[(key, layer)]
            raise FastPathUnsupported(f"block {layer} is not x + attn + mlp (reconstruction error {err:.2e})")

    def _rebuild(self, layer: int, key: tuple, changes: _Changes, mask: Tensor) -> Tensor:
        return self.start_residual(layer, {key: mask})

    def start_residual(self, layer: int, masks: dict[tuple, Bool[Tensor, "copies unit"]],
                       answer_only: bool = False, own_mlp: Callable | None = None) -> Float[Tensor, "rows pos d_model"]:
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
        ``delta`` (parallel residual, or no MLP) and at least one norm-fed projection found.
        """
        changes = self._changes[(key, layer)]
        direct = (self.parallel or not self._has_mlp(layer)) and not self.attn_out_norm
        if not (direct and changes.a is not None and self._norm_pairs and layer + 1 < self.n_layers
                and all(len(s) == 1 for s in sets)):
            return None
        low_rank = _LowRankProjections(self.model.blocks[layer + 1], self._norm_pairs, self.resid_post[layer],
                                       changes.B, changes.a)
        return low_rank if low_rank.entries else None

    def _own_mlp_low_rank(self, layer: int, key: tuple, sets: Sequence[Sequence[Unit]]) -> _LowRankProjections | None:
        """Low-rank MLP-input projections of a *sequential* block ``layer`` itself, when every set
        patches one unit of it (the patch reaches its own block's MLP input first).

        Pre-norm (GPT-2, Llama): the projections read ``ln2(mid_pre + delta_h)``, ``delta_h =
        dz_h @ W_O[h]``: the formula of :class:`_LowRankProjections` with base ``mid_pre``.
        OLMo-2: they read ``resid_pre + ln1_post(attn_pre + delta_h)`` with no norm of their own;
        an RMSNorm is a per-position scale, so ``W mid = W resid_pre + (A + dz_h @ M_h) / s_h``
        (base ``attn_pre``, ``resid_pre @ W.T`` added per position). Other layouts: None.
        ``torch.nn.Linear`` and GPT-2's ``Conv1D`` projections qualify.
        """
        changes = self._changes[(key, layer)]
        if (self.parallel or not self._has_mlp(layer) or changes.a is None or changes.after_mlp
                or layer >= self.n_layers - 1 or not all(len(s) == 1 for s in sets)):
            return None
        block = self.model.blocks[layer]
        if self.mlp_norm:
            norms = {id(block.ln2), id(getattr(block.ln2, "original_component", None))}
            pairs = [(lin, norm) for lin, norm in self._norm_pairs if id(block.get_submodule(norm)) in norms]
            base, residual = self.resid_pre[layer] + self.attn_out[layer], None
        elif self.attn_out_norm:
            pairs = [(lin, self.attn_out_norm) for lin in self._mlp_input_linears(layer)]
            base, residual = self.attn_out[layer], self.resid_pre[layer]
        else:
            return None
        if not pairs:
            return None
        low_rank = _LowRankProjections(block, pairs, base, changes.B, changes.a, residual=residual)
        return low_rank if low_rank.entries else None

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
                    handles.append(module.register_forward_pre_hook(
                        lambda mod, args, name=name: seen.setdefault(name, args[0] if args else None)))
            try:
                self._mlp(layer, self.resid_post[layer])
            finally:
                for handle in handles:
                    handle.remove()
            self._mlp_linears = [name for name, x in seen.items() if "x" in given and x is given["x"]]
        return self._mlp_linears

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
                sel = idx[lo:lo + chunk]
                masks = {key: torch.zeros(len(sel), units_count[key], dtype=torch.bool) for key in keys}
                for c, i in enumerate(sel):
                    for u in sets[i]:
                        if u.layer == layer:
                            masks[u.key][c, u.index] = True
                units = masks[keys[0]].float().argmax(dim=1)  # on the CPU: planning only
                own_mlp = None if own is None else (lambda stream, units=units: own.installed(units, stream))
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
