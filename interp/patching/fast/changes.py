"""The layer-skip engine's per-unit changes of block ``l``: what patching one unit (a head's
activation or weights, a path into a head, the MLP's output) at layer ``l`` adds to the stream
leaving block ``l``, given the cached pre-run (:class:`~interp.patching.fast.engine.LayerSkipEngine`).

One call of block ``l`` with the change applied to *all* of its heads gives each head's new ``z``
(heads do not interact inside a layer); head ``h``'s change of the attention output is
``delta_h = a_h @ B_h`` (``a = z_new - z_pre``, ``B = W_O``; OV weights: ``a = [z_new, z_pre]``,
``B = [W_O_post; -W_O_pre]``), and the same call checks the reconstruction. Once one block passed
that check, the kinds with an entry in :data:`Z_SHORTCUTS` skip the call. Kind facts come from the
kinds table (:mod:`interp.patching.kinds`): the fast way (``hook``, ``weights``, ``path``,
``mlp_out``), the hook and head axis, the weight slices.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from jaxtyping import Float
from torch import Tensor

from interp.patching import _weights
from interp.patching._forward import query_mask, replace_hook
from interp.patching.fast.modules import _recording_norm_projections
from interp.patching.fast.plan import _RESID_CHECK_RTOL, FastPathUnsupported
from interp.patching.kinds import get_kind
from interp.patching.targets import hook_name

if TYPE_CHECKING:  # the engine imports this module; the type only
    from interp.patching.fast.engine import LayerSkipEngine

__all__ = ["Z_SHORTCUTS", "block_changes", "pattern_and_values"]


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


def _modification(engine: LayerSkipEngine, key: tuple, layer: int) -> tuple[list, list, Tensor | None]:
    """``(hooks, weight slices, input change)`` applying unit kind ``key`` to every head of ``layer``."""
    kind, qpos, sender, rinput = key
    spec = get_kind(kind)
    everything = torch.ones(1, engine.n_heads, dtype=torch.bool, device=engine.device)
    if spec.fast == "hook":
        post = engine.post.activation(kind, layer).to(engine.device, torch.float32)
        return (
            [
                (
                    hook_name(kind, layer),
                    replace_hook(post, everything, spec.head_axis, query_mask(qpos, engine.pos, engine.device)),
                )
            ],
            [],
            None,
        )
    if spec.fast == "weights":
        # W_O too (OV), so the block's own output checks the reconstruction; b_O stays (one head's target has none)
        return [], _weights.head_slices(engine.model, layer, range(engine.n_heads), spec.weights), None
    if spec.fast == "path":
        sl, sh = sender
        W_O = _W_O(engine, sl, post=False)[sh]
        dz = (
            engine.post.activation("z", sl)[:, :, sh].to(engine.device, torch.float32)
            - engine.pre("z", sl)[:, :, sh].float()
        )
        delta_s = dz @ W_O.float()
        captured: dict[str, Tensor] = {}
        name = hook_name(rinput, layer)
        with engine.model.hooks(fwd_hooks=[(name, lambda act, hook: captured.__setitem__("x", act.clone()) or act)]):
            engine._call_block(layer, engine.resid_pre[layer] + delta_s.to(engine.resid_pre[layer].dtype), 1)
        return [(name, replace_hook(captured["x"], everything, 2))], [], None
    raise FastPathUnsupported(f"no per-head change for kind {kind!r}")


def _W_O(engine: LayerSkipEngine, layer: int, post: bool) -> Float[Tensor, "head d_head d_model"]:
    if not post:
        W_O = getattr(engine.model.blocks[layer].attn, "W_O", None)
        if not isinstance(W_O, Tensor) or W_O.ndim != 3:
            raise FastPathUnsupported(f"block {layer} exposes no W_O [head, d_head, d_model]")
        return W_O.detach()
    return _weights.head_W_O(engine.model, engine.post.weights, layer).to(engine.device)


def block_changes(engine: LayerSkipEngine, key: tuple, layer: int) -> _Changes:
    """Per-unit change of block ``layer``'s output for units of ``key`` (cached).

    Runs block ``layer`` once with the change applied to every head; the reconstruction from
    the per-head changes must equal the block's output.

    Raises:
        FastPathUnsupported: the block cannot be called on its own, exposes no ``hook_z`` or
            ``W_O``, or is not ``x + attn + mlp`` (the reconstruction check).
        ValueError: the block's attention ignores edits of ``hook_pattern``.
    """
    if (key, layer) in engine._changes:
        return engine._changes[(key, layer)]
    kind = key[0]
    spec = get_kind(kind)
    if spec.fast == "mlp_out":  # the kind's hook is the MLP's contribution to the stream
        delta = (
            engine.post.activation(kind, layer).to(engine.device, torch.float32) - engine.pre(kind, layer).float()
        )[None]
        changes = _Changes(delta, None, None, after_mlp=True)
        engine._changes[(key, layer)] = changes
        rebuilt = _rebuild(engine, layer, key, changes, torch.ones(1, 1, dtype=torch.bool))
        hooks, slices = (
            [
                (
                    hook_name(kind, layer),
                    replace_hook(
                        engine.post.activation(kind, layer).to(engine.device, torch.float32),
                        torch.ones(1, 1, dtype=torch.bool, device=engine.device),
                        None,
                    ),
                )
            ],
            [],
        )
        _check_block(engine, layer, hooks, slices, rebuilt, key)
        return changes
    z_new, out_all = _z_without_block(engine, key, layer), None
    if z_new is None:
        z_new, out_all = _z_from_block(engine, key, layer)
    z_pre = engine.pre("z", layer).float()
    W_O = _W_O(engine, layer, post=False).float()
    if "o" in spec.weights:  # the head's output runs through the post W_O (OV weights)
        a = torch.cat([z_new, z_pre], dim=-1)
        B = torch.cat([_W_O(engine, layer, post=True).float(), -W_O], dim=1)
    else:
        a, B = z_new - z_pre, W_O
    delta = torch.einsum("bpur,urm->ubpm", a, B)
    changes = _Changes(delta, a, B, after_mlp=False)
    engine._changes[(key, layer)] = changes
    if out_all is not None:
        # The reconstruction with every head changed must equal the block itself.
        rebuilt = _rebuild(engine, layer, key, changes, torch.ones(1, engine.n_heads, dtype=torch.bool))
        err = float((rebuilt - out_all).abs().max())
        if err > _RESID_CHECK_RTOL * max(1.0, float(out_all.abs().max())):
            del engine._changes[(key, layer)]
            raise _not_rebuilt(layer, err, out_all)
        engine._structure_checked = True
    return changes


def _z_without_block(engine: LayerSkipEngine, key: tuple, layer: int) -> Float[Tensor, "batch pos head d_head"] | None:
    """Every head's new ``z`` without calling the block, once the block structure has been
    checked, by the kind's entry of :data:`Z_SHORTCUTS` (if any).  None: call the block."""
    shortcut = Z_SHORTCUTS.get(key[0])
    if not engine._structure_checked or shortcut is None:
        return None
    return shortcut(engine, layer, key[1])


def pattern_and_values(engine: LayerSkipEngine, layer: int) -> tuple[Tensor | None, Tensor | None]:
    """``(pattern [batch, head, q, k], v per head [batch, pos, head, d_head])`` of the pre-run
    at ``layer`` if ``z = pattern @ v`` rebuilds its cached ``z``, else ``(None, None)``."""
    name = hook_name("v", layer)
    v = engine.cache[name] if name in engine.cache.keys() else None
    z_pre, pattern_pre = engine.pre("z", layer), engine.pre("pattern", layer).float()
    if v is None or v.ndim != 4 or z_pre.ndim != 4 or v.shape[2] == 0 or engine.n_heads % v.shape[2]:
        return None, None
    v = v.float().repeat_interleave(engine.n_heads // v.shape[2], dim=2)  # GQA: kv head of each head
    rebuilt = torch.einsum("bhqk,bkhd->bqhd", pattern_pre, v)
    if rebuilt.shape != z_pre.shape or not torch.allclose(rebuilt, z_pre.float(), rtol=1e-4, atol=1e-5):
        return None, None
    return pattern_pre, v


def _z_from_block(engine: LayerSkipEngine, key: tuple, layer: int) -> tuple[Tensor, Tensor]:
    """``(every head's new z, block output)`` from one call of block ``layer`` with the change
    applied to every head (and the block's norm-fed projections recorded for the low-rank path)."""
    hooks, slices, _ = _modification(engine, key, layer)
    captured: dict[str, Tensor] = {}
    hooks = hooks + [(hook_name("z", layer), lambda z, hook: captured.__setitem__("z", z) or z)]
    block = engine.model.blocks[layer]
    try:
        with (
            engine.model.hooks(fwd_hooks=hooks),
            _weights.swapped(engine.model, engine.post.weights or {}, slices),
            _recording_norm_projections(block) as pairs,
        ):
            out_all = engine._call_block(layer, engine.resid_pre[layer], 1)
        engine._norm_pairs = engine._norm_pairs or pairs
    except (TypeError, RuntimeError, IndexError, AttributeError) as err:
        raise FastPathUnsupported(f"block {layer} cannot be called on its own: {err}") from err
    if "z" not in captured:
        raise FastPathUnsupported(f"block {layer} exposes no hook_z")
    z_new = captured["z"].float()
    if z_new.ndim != 4 or z_new.shape[2] != engine.n_heads:
        raise FastPathUnsupported(
            f"hook_z of block {layer} has shape {tuple(z_new.shape)}, not [batch, pos, head, d_head]"
        )
    if (
        torch.equal(z_new, engine.pre("z", layer).float())
        and key[0] == "pattern"
        and not torch.equal(
            engine.post.activation("pattern", layer).to(engine.device, torch.float32),
            engine.pre("pattern", layer).float(),
        )
    ):
        raise ValueError(
            f"block {layer}'s attention ignores edits of hook_pattern (z is unchanged); "
            "this architecture's bridge cannot be pattern-patched"
        )
    return z_new, out_all


def _check_block(engine: LayerSkipEngine, layer: int, hooks: list, slices: list, rebuilt: Tensor, key: tuple) -> None:
    try:
        with engine.model.hooks(fwd_hooks=hooks), _weights.swapped(engine.model, engine.post.weights or {}, slices):
            out = engine._call_block(layer, engine.resid_pre[layer], 1)
    except (TypeError, RuntimeError, IndexError, AttributeError) as err:
        raise FastPathUnsupported(f"block {layer} cannot be called on its own: {err}") from err
    err = float((rebuilt - out).abs().max())
    if err > _RESID_CHECK_RTOL * max(1.0, float(out.abs().max())):
        del engine._changes[(key, layer)]
        raise _not_rebuilt(layer, err, out)


def _not_rebuilt(layer: int, err: float, out: Tensor) -> FastPathUnsupported:
    """The block's rebuilt output differs from its own forward by ``err`` (largest entry).

    In a float16 / bfloat16 model the two differ by rounding alone (measured: 1-2 units in the
    last place of the largest entry), which a check at float32's tolerance cannot tell from
    another block layout; the message then says so, and how to get the fast path.
    """
    if out.dtype.is_floating_point and torch.finfo(out.dtype).bits < 32:
        _, exponent = math.frexp(max(float(out.abs().max()), torch.finfo(out.dtype).tiny))
        ulps = err / (torch.finfo(out.dtype).eps * 2.0 ** (exponent - 1))  # spacing at the largest entry
        dtype = str(out.dtype).removeprefix("torch.")
        return FastPathUnsupported(
            f"block {layer} could not be checked in {dtype}: its rebuilt "
            f"output differs by {err:.2e} ({ulps:.0f} ulp at the largest entry), "
            "which float32's check cannot tell from another block layout; for the fast path load the "
            "model in float32 (--dtype float32, or source.dtype = torch.float32)"
        )
    return FastPathUnsupported(f"block {layer} is not x + attn + mlp (reconstruction error {err:.2e})")


def _rebuild(engine: LayerSkipEngine, layer: int, key: tuple, changes: _Changes, mask: Tensor) -> Tensor:
    return engine.start_residual(layer, {key: mask})


# --------------------------------------------------------------------------- exact shortcuts of single kinds


def _z_of_head_output(engine: LayerSkipEngine, layer: int, query_pos: int | None) -> Tensor:
    """A head-output patch: the new ``z`` is the post ``z``."""
    return engine.post.activation("z", layer).to(engine.device, torch.float32)


def _z_of_values(engine: LayerSkipEngine, layer: int, query_pos: int | None) -> Tensor | None:
    """A value patch leaves the pattern alone: ``pattern_pre @ v_post`` (None for grouped-query values)."""
    pattern_pre, v_pre = pattern_and_values(engine, layer)
    if pattern_pre is None:
        return None
    v_post = engine.post.activation("v", layer).to(engine.device, torch.float32)
    if v_post.shape != v_pre.shape:  # grouped-query values: one per kv head, not per head
        return None
    return torch.einsum("bhqk,bkhd->bqhd", pattern_pre, v_post)


def _z_of_pattern(engine: LayerSkipEngine, layer: int, query_pos: int | None) -> Tensor | None:
    """A pattern patch: ``pattern_post @ v_pre`` (the pre pattern outside ``query_pos``)."""
    pattern_pre, v_pre = pattern_and_values(engine, layer)
    if pattern_pre is None:
        return None
    post = engine.post.activation("pattern", layer).to(engine.device, torch.float32)
    mask = query_mask(query_pos, engine.pos, engine.device)
    if mask is not None:
        post = torch.where(mask[None, None, :, None], post, pattern_pre)
    return torch.einsum("bhqk,bkhd->bqhd", post, v_pre)


#: kind -> ``(engine, layer, query_pos) -> every head's new z [batch, pos, head, d_head]`` (or None: call
#: the block), used once a block call confirmed the block's structure; where the cached ``hook_v``
#: and ``z = pattern @ v`` rebuild the cached ``z`` (layout and grouped-query mapping checked). A
#: new kind's exact shortcut, if it has one, is one entry here.
Z_SHORTCUTS: dict[str, Callable[[LayerSkipEngine, int, int | None], Tensor | None]] = {
    "z": _z_of_head_output,
    "v": _z_of_values,
    "pattern": _z_of_pattern,
}
