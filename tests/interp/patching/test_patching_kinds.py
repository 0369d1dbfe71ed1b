"""The table of patch kinds (``interp/patching/kinds.py``): every kind in it is handled by both
engines (fast == reference to 1e-5 where ``fast`` is declared, with the layer-skip path itself),
and adding a kind is one entry: toy kinds registered here (a head activation with a fast way, a
head weight kind with a fast way, a layer activation without one) are patched by the engines and
agree with a plain hooked forward / a plain forward with the weights copied in, to 1e-5.

Models, prompts: the GPT-NeoX bridge (parallel residual) and the native sequential bridge of
tests/interp/patching/test_patching_targets.py.
"""

from __future__ import annotations

import os
import warnings

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from interp.decomposition import COMPONENTS
from interp.patching import Target, answer_probability, capture_post, metric_values, patch_values
from interp.patching import kinds as kind_table
from interp.patching.fast import fast_path_applies, heads_mixing_kinds, target_units
from interp.patching.kinds import KIND_TABLE, Kind, get_kind, register, unregister
from tests.interp.patching.test_patching_targets import N_HEADS, N_LAYERS, models  # noqa: F401  (the module-scoped fixture)


def _target_of(name: str) -> Target:
    """A target of kind ``name`` whose scope fits it: two heads of the middle layer (head
    activations: plus one later head, which the fast path patches inside its tail), one layer, three
    neurons or key/value heads of two layers, a path into a later head, or the whole model."""
    scope = get_kind(name).scope
    if scope == "head":
        return Target(name, ((1, 0), (1, 2)) + (((2, 3),) if get_kind(name).fast == "hook" else ()))
    if scope == "layer":
        return Target(name, layers=(1,))
    if scope == "neuron":
        return Target(name, neurons=((1, 0), (1, 5), (2, 9)))
    if scope == "kv_head":
        return Target(name, kv_heads=((1, 0), (1, 2), (2, 3)))
    if scope == "path":
        return Target(name, ((0, 1),), receiver=(2, 3), receiver_input="k")
    return Target(name)


def _fast_computes(pre, target: Target) -> bool:
    units = target_units(target, N_LAYERS, N_HEADS)
    return fast_path_applies(units, N_HEADS, heads_mixing_kinds(pre))


@pytest.mark.parametrize("name", list(KIND_TABLE))
def test_every_kind_in_the_table_is_patched_alike_by_both_engines(models, name):  # noqa: F811
    _, pre, post_model, batch, post, _, _ = models
    target = _target_of(name)
    if get_kind(name).scope == "neuron":  # not in the fixture's capture (capture_post leaves neurons out unless named)
        post = capture_post(post_model, batch, kinds=(name,), weights=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # a fallback to full forwards fails the test
        fast = patch_values(pre, post, batch, [target])
    reference = patch_values(pre, post, batch, [target], method="reference")
    assert (reference - metric_values(pre, batch)).abs().max() > 1e-4, f"{target.label()}: the patch changes nothing"
    assert torch.allclose(fast, reference, atol=1e-5, rtol=0), (target.label(), (fast - reference).abs().max())
    kind = get_kind(name)
    if kind.fast is not None:  # declared: the layer-skip engine computes it (no silent full forwards)
        assert _fast_computes(pre, target), f"{name}: fast={kind.fast!r} declared, but the fast path does not take it"
        if kind.fast == "hook":  # head activations also ride in the tail of a joint patch
            joint = Target(name, ((0, 1), (2, 0)))
            assert _fast_computes(pre, joint)
            assert torch.allclose(
                patch_values(pre, post, batch, [joint]),
                patch_values(pre, post, batch, [joint], method="reference"),
                atol=1e-5,
                rtol=0,
            )
    else:
        assert target_units(target, N_LAYERS, N_HEADS) is None


def test_decomposition_components_and_target_checks_come_from_the_table():
    assert list(COMPONENTS) == [name for name, kind in KIND_TABLE.items() if kind.component]
    assert all(COMPONENTS[name].kind == name for name in COMPONENTS)
    with pytest.raises(ValueError, match="valid: pattern, q, k"):
        Target("nonsense")
    with pytest.raises(ValueError, match="fast='hook' does not fit scope 'layer'"):
        Kind("bad", "layer", "a layer kind with a head shortcut", hook="hook_mlp_out", fast="hook")
    with pytest.raises(ValueError, match="already in the table"):
        register(get_kind("pattern"))
    with pytest.raises(ValueError, match="was not added by register"):
        unregister("pattern")


# --------------------------------------------------------------------------- toy kinds: one entry each

TOY_KINDS = (
    # a head activation with a fast way and no exact shortcut of its own (the values under another
    # name: the fast engine calls the block, as for any new activation kind). (The bridges here
    # discard edits of ``attn.hook_attn_scores``, so the scores cannot serve.)
    Kind(
        "values_again",
        "head",
        "values, [batch, pos, head, d_head]",
        hook="attn.hook_v",
        head_axis=2,
        tl_setter="layer_head_vector_patch_setter",
        tl_activation="v",
        fast="hook",
    ),
    # a head weight kind with a fast way: W_O alone (the head's output runs through the post W_O)
    Kind("o_only", "head", "weight W_O of the head", weights=("o",), fast="weights"),
    # a layer activation without a fast way: the attention output of the layer
    Kind("attn_out", "layer", "attention output, [batch, pos, d_model]", hook="attn.hook_out"),
)


@pytest.fixture
def toy_kinds():
    added = [register(kind) for kind in TOY_KINDS]
    try:
        yield {kind.name: kind for kind in added}
    finally:
        for kind in added:
            unregister(kind.name)
    assert not set(KIND_TABLE) & {k.name for k in TOY_KINDS}


def _plain_hooked(pre, post_model, batch, hook: str, layer: int, head: int | None, head_axis: int | None):
    """p(answer) of ``pre`` with ``blocks.{layer}.{hook}`` (one head's slice, or all of it) taken
    from ``post_model`` on the same prompts: one run_with_cache, one run_with_hooks."""
    name = f"blocks.{layer}.{hook}"
    _, cache = post_model.run_with_cache(batch.tokens, names_filter=lambda n: n == name)
    post_act = cache[name]

    def replace(act, hook):
        act = act.clone()
        if head is None:
            return post_act.to(act.dtype)
        index = [slice(None)] * act.ndim
        index[head_axis] = head
        act[tuple(index)] = post_act[tuple(index)].to(act.dtype)
        return act

    logits = pre.run_with_hooks(batch.tokens, fwd_hooks=[(name, replace)])
    rows = logits[torch.arange(batch.tokens.shape[0]), batch.answer_pos]
    return answer_probability(rows, batch)


def _plain_swapped_W_O(pre, post_model, batch, layer: int, head: int):
    """p(answer) of ``pre`` with head ``head``'s slice of the output projection copied from ``post_model``
    (a Linear: ``weight[:, h*d_head:(h+1)*d_head]``), one plain forward."""
    d_head = pre.cfg.d_head
    cols = slice(head * d_head, (head + 1) * d_head)
    weight = pre.blocks[layer].attn.o.original_component.weight
    saved = weight.detach().clone()
    try:
        with torch.no_grad():
            weight[:, cols] = post_model.blocks[layer].attn.o.original_component.weight[:, cols]
        logits = pre(batch.tokens)
    finally:
        with torch.no_grad():
            weight.copy_(saved)
    rows = logits[torch.arange(batch.tokens.shape[0]), batch.answer_pos]
    return answer_probability(rows, batch)


@pytest.mark.parametrize("name", [kind.name for kind in TOY_KINDS])
def test_a_kind_added_as_one_entry_is_patched_by_both_engines(models, toy_kinds, name):  # noqa: F811
    """Registered at run time (the same entry in ``_BUILT_IN`` would make it built in): targets,
    ``capture_post``, the reference engine and, where ``fast`` is declared, the layer-skip engine
    take it from the table alone and agree with a plain forward to 1e-5."""
    _, pre, post_model, batch, _, _, _ = models
    kind = toy_kinds[name]
    layer, head = 1, 2
    target = Target(name, layers=(layer,)) if kind.scope == "layer" else Target(name, ((layer, head),))
    with torch.inference_mode():
        if kind.is_weights:
            expected = _plain_swapped_W_O(pre, post_model, batch, layer, head)
        else:
            expected = _plain_hooked(
                pre, post_model, batch, kind.hook, layer, None if kind.scope == "layer" else head, kind.head_axis
            )
    base = metric_values(pre, batch)
    assert (expected - base).abs().max() > 1e-4, f"{name}: the plain patch changes nothing"
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no fallback to full forwards
        fast = patch_values(pre, post_model, batch, [target])
    reference = patch_values(pre, post_model, batch, [target], method="reference")
    assert torch.allclose(reference[0], expected, atol=1e-5, rtol=0), (name, (reference[0] - expected).abs().max())
    assert torch.allclose(fast[0], expected, atol=1e-5, rtol=0), (name, (fast[0] - expected).abs().max())
    assert _fast_computes(pre, target) == (kind.fast is not None)
    assert target.label().startswith(name)


def test_unregistered_kinds_are_gone():
    """After the fixture the toy kinds are unknown again (one-line error naming the valid kinds)."""
    with pytest.raises(ValueError, match="target kind 'values_again'; valid: ") as err:
        Target("values_again")
    assert "\n" not in str(err.value) and "values_again" not in str(err.value).split("valid:")[1]
    assert kind_table.kind_names("head") == ("pattern", "q", "k", "v", "z", "qk", "ov")


def test_the_reference_engine_and_the_kinds_table_import_nothing_from_the_fast_engine():
    """Shared helpers live in ``_forward``: the reference path, the table, targets and weight
    swapping stand without the fast engine (imports read from the source with ``ast``)."""
    import ast
    from pathlib import Path

    import interp.patching as package

    root = Path(package.__file__).parent
    for name in ("reference.py", "kinds.py", "targets.py", "_weights.py", "_forward.py"):
        tree = ast.parse((root / name).read_text())
        imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module} | {
            alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names
        }
        assert not {m for m in imported if m.startswith(("interp.patching.fast", "interp.patching.engine"))}, (
            name,
            sorted(imported),
        )
    assert {p.name for p in (root / "fast").glob("*.py")} >= {"engine.py", "layouts.py", "plan.py", "modules.py"}
