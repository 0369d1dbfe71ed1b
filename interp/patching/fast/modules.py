"""Module-level machinery of the layer-skip engine: calling blocks as the model did, swapping a
module's forward, faster equivalents of element-wise modules, and the low-rank projections.

Nothing here depends on the block layout; :mod:`interp.patching.fast.engine` and
:mod:`interp.patching.fast.layouts` use it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
from jaxtyping import Float, Int
from torch import Tensor

from interp.patching._forward import first
from interp.patching.fast.plan import _RESID_CHECK_RTOL, FastPathUnsupported


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
        eps = (
            getattr(inner, "eps", None) or getattr(inner, "variance_epsilon", None) or getattr(norm.config, "eps", 1e-5)
        )
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
            handles.append(
                module.register_forward_hook(lambda mod, args, out, name=name: norm_out.__setitem__(name, out))
            )
        elif _is_projection(module):
            handles.append(
                module.register_forward_pre_hook(
                    lambda mod, args, name=name: linear_in.setdefault(name, []).append(args[0] if args else None)
                )
            )
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
        same = [n for n, out in norm_out.items() if out is x] or [
            n for n, out in norm_out.items() if isinstance(out, Tensor) and out.shape == x.shape and torch.equal(out, x)
        ]
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
    if (
        not isinstance(inner, torch.nn.Module)
        or isinstance(inner, torch.nn.Identity)
        or not all(hasattr(norm, name) for name in ("hook_in", "hook_out"))
        or any(h is None or getattr(h, "fwd_hooks", True) or getattr(h, "bwd_hooks", True) for h in hooks)
    ):
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


def _answer_rows_linear(
    linear: torch.nn.Linear, rows: Int[Tensor, " n"], pos: Int[Tensor, " n"], shape: tuple[int, int]
) -> Callable:
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

    def __init__(
        self,
        block: torch.nn.Module,
        pairs: Sequence[tuple[str, str]],
        base: Float[Tensor, "batch pos d_model"],
        W_O: Float[Tensor, "unit rank d_model"],
        dz: Float[Tensor, "batch pos unit rank"],
        residual: Tensor | None = None,
    ):
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
    def installed(self, heads: Int[Tensor, " copies"], stream: Float[Tensor, "rows pos d_model"]) -> Iterator[None]:
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


class _PendingUnembedding:
    """Answer-position streams of stacked chunks, unembedded together once ``max_rows`` are pending.

    The unembedding is one ``[rows, d_model] x [d_model, d_vocab]`` product per call; on a CPU
    (vocabulary 50k, d_model 512) it ran ~15 % faster per row at 512 rows than at the 64 of
    two stacked copies of 32 prompts.  ``max_rows`` 0: every chunk at once (GPUs, where the
    memory budget sets the chunk).
    """

    # engine: a LayerSkipEngine (interp.patching.fast.engine), not imported here: that module imports this one
    def __init__(self, engine: Any, out: Float[Tensor, "sets batch"], max_rows: int):
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
