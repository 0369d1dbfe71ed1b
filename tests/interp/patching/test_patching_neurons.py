"""MLP neurons as a patch location (issue 70, item 3): the kind ``neuron`` is one entry of the kinds
table (scope ``neuron``, hook ``mlp.hook_post``, index set ``(layer, neuron)`` bounded by ``d_mlp``),
patched across checkpoints by the generic engine, and ``rank_neurons`` equals a hand-written
TransformerLens hook loop to 1e-5; a neuron declared as a head kind is refused.

Models, prompts: the GPT-NeoX bridge (parallel residual) and the native sequential bridge of
tests/interp/patching/test_patching_targets.py (two random checkpoints of one shape; ``d_mlp`` = 256).
"""

from __future__ import annotations

import os
import warnings

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from interp.core.settings import StudyConfig
from interp.neuron_ranking import rank_neurons
from interp.patching import Target, answer_probability, capture_post, metric_values, neurons, patch_values, pattern
from interp.patching.kinds import Kind, get_kind, register, unregister
from tests.interp.patching.test_patching_targets import N_HEADS, N_LAYERS, models  # noqa: F401  (the module-scoped fixture)

LAYER = 1


def _hand_loop(pre, post_model, batch, layer: int, units: list[int]) -> torch.Tensor:
    """p(answer) per prompt of ``pre`` with the given neurons of ``blocks.{layer}.mlp.hook_post``
    taken from ``post_model``, one ``run_with_hooks`` per neuron: ``[len(units), batch]``."""
    name = f"blocks.{layer}.mlp.hook_post"
    with torch.inference_mode():
        _, cache = post_model.run_with_cache(batch.tokens, names_filter=lambda n: n == name)
        post_act = cache[name]
        rows = []
        for n in units:

            def replace(act, hook, n=n):
                act = act.clone()
                act[:, :, n] = post_act[:, :, n].to(act.dtype)
                return act

            logits = pre.run_with_hooks(batch.tokens, fwd_hooks=[(name, replace)])
            rows.append(answer_probability(logits[torch.arange(batch.tokens.shape[0]), batch.answer_pos], batch))
    return torch.stack(rows)


def test_neuron_kind_is_one_entry_of_the_table():
    kind = get_kind("neuron")
    assert (kind.scope, kind.hook, kind.head_axis, kind.fast) == ("neuron", "mlp.hook_post", 2, None)
    target = neurons([(1, 7), (1, 30)])
    assert target.label() == "neuron L1N7+L1N30" and neurons().label() == "neuron all"
    assert target.resolved_units(N_LAYERS, 256) == ((1, 7), (1, 30))
    with pytest.raises(ValueError, match=r"neuron \(1, 256\) out of range: layer in \[0, 2\], neuron in \[0, 255\]"):
        neurons([(1, 256)]).resolved_units(N_LAYERS, 256)
    with pytest.raises(ValueError, match="is per neuron: give neurons="):
        Target("neuron", heads=((1, 2),))
    with pytest.raises(ValueError, match="takes no neurons="):
        Target("pattern", neurons=((1, 2),))


def test_a_neuron_declared_as_a_head_kind_is_refused(models):  # noqa: F811
    """The table refuses an MLP hook under scope 'head' (it would be ranked with n_heads), and the
    engine refuses any per-unit kind whose captured axis does not hold the scope's units."""
    with pytest.raises(ValueError, match=r"scope 'head' \(units up to n_heads\) but hook 'mlp.hook_post'.*'neuron'"):
        Kind("neuron_as_head", "head", "MLP neurons", hook="mlp.hook_post", head_axis=2)
    with pytest.raises(ValueError, match=r"scope 'neuron' \(units up to d_mlp\) but hook 'attn.hook_z'.*'head'"):
        Kind("head_as_neuron", "neuron", "head outputs", hook="attn.hook_z", head_axis=2)
    # an attention hook whose axis 2 is not the head (d_model wide): passes the table, not the engine
    _, pre, _, batch, _, _, _ = models
    wrong = register(Kind("attn_in_as_head", "head", "attention input", hook="attn.hook_in", head_axis=2))
    try:
        post = capture_post(models[2], batch, kinds=("attn_in_as_head",), weights=False)
        with pytest.raises(ValueError, match=r"units range over n_heads=4: declare the kind"):
            patch_values(pre, post, batch, [Target("attn_in_as_head", ((1, 0),))], method="reference")
    finally:
        unregister(wrong.name)


def test_neurons_out_of_range_are_refused_before_the_post_checkpoint_is_read(models):  # noqa: F811
    _, pre, _, batch, _, _, _ = models
    with pytest.raises(ValueError, match=r"neuron \(1, 999\) out of range"):
        patch_values(pre, "not a checkpoint", batch, [neurons([(1, 999)])])


def test_neuron_patch_equals_a_hand_written_hook_loop(models):  # noqa: F811
    name, pre, post_model, batch, default, _, _ = models
    # capture_post leaves the neurons out unless named ([batch, pos, d_mlp] per layer): a clear error
    assert "blocks.0.mlp.hook_post" not in default.activations
    with pytest.raises(
        ValueError, match=r"no blocks.0.mlp.hook_post captured; capture_post\(..., kinds=\) must include 'neuron'"
    ):
        patch_values(pre, default, batch, [neurons([(LAYER, 0)])])
    post = capture_post(post_model, batch, kinds=("neuron", "pattern"), weights=False)
    units = [0, 17, 255]
    expected = _hand_loop(pre, post_model, batch, LAYER, units)
    base = metric_values(pre, batch)
    assert (expected - base).abs().max() > 1e-5, f"{name}: the neuron patches change nothing"
    targets = [neurons([(LAYER, n)]) for n in units]
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # fast: full forwards without a fallback warning
        fast = patch_values(pre, post, batch, targets)
    reference = patch_values(pre, post, batch, targets, method="reference")
    assert torch.allclose(reference, expected, atol=1e-5, rtol=0), (reference - expected).abs().max()
    assert torch.equal(fast, reference)
    # the post model in place of a checkpoint: patch_values captures the neurons its targets need
    assert torch.allclose(patch_values(pre, post_model, batch, targets), reference, atol=1e-6, rtol=0)
    # a joint set of two layers equals one hook per layer; a head target beside it is unchanged
    joint = patch_values(pre, post, batch, [neurons([(0, 3), (2, 5)]), pattern([(1, 0)])], method="reference")
    name0, name2 = "blocks.0.mlp.hook_post", "blocks.2.mlp.hook_post"
    with torch.inference_mode():
        _, cache = post_model.run_with_cache(batch.tokens, names_filter=lambda n: n in (name0, name2))

        def put(hook_name, n):
            def hook(act, hook):
                act = act.clone()
                act[:, :, n] = cache[hook_name][:, :, n]
                return act

            return hook

        logits = pre.run_with_hooks(batch.tokens, fwd_hooks=[(name0, put(name0, 3)), (name2, put(name2, 5))])
    by_hand = answer_probability(logits[torch.arange(batch.tokens.shape[0]), batch.answer_pos], batch)
    assert torch.allclose(joint[0], by_hand, atol=1e-5, rtol=0)
    assert torch.allclose(joint[1], patch_values(pre, post, batch, [pattern([(1, 0)])])[0], atol=1e-5, rtol=0)


def test_rank_neurons_equals_a_hand_written_hook_loop(models):  # noqa: F811
    """Every neuron of a layer: delta = mean patched - mean pre, sorted, equal to the hand loop to 1e-5."""
    name, pre, post_model, batch, _, _, _ = models
    post = capture_post(post_model, batch, kinds=("neuron",), weights=False)
    table = rank_neurons(pre, post, batch, LAYER, StudyConfig(n_boot=200))
    d_mlp = pre.cfg.d_mlp
    expected = (_hand_loop(pre, post_model, batch, LAYER, list(range(d_mlp))) - metric_values(pre, batch)).mean(1)
    assert len(table) == d_mlp and sorted(table["neuron"]) == list(range(d_mlp))
    got = torch.tensor(table.sort_values("neuron")["delta"].to_numpy(), dtype=torch.float32)
    assert torch.allclose(got, expected, atol=1e-5, rtol=0), (got - expected).abs().max()
    assert expected.abs().max() > 1e-4, f"{name}: no neuron moves p(answer)"
    top = int(torch.argmax(expected))
    assert int(table["neuron"].iloc[0]) == top and list(table["rank"]) == list(range(1, d_mlp + 1))
    assert (table["delta"].diff().dropna() <= 0).all()
    assert (table["delta_lo"] <= table["delta"] + 1e-9).all() and (table["delta"] <= table["delta_hi"] + 1e-9).all()
    assert set(table["metric"]) == {"p"} and set(table["unit"]) == {"probability"}
    # the post model in place of its checkpoint gives the same ranking; top_n keeps the head of it
    top5 = rank_neurons(pre, post_model, batch, LAYER, StudyConfig(n_boot=0), top_n=5)
    assert list(top5["neuron"]) == list(table["neuron"].head(5)) and top5["delta_lo"].isna().all()
    with pytest.raises(ValueError, match=r"layer=3 out of range: an integer in \[0, 2\]"):
        rank_neurons(pre, post, batch, N_LAYERS)
    with pytest.raises(ValueError, match="top_n=0"):
        rank_neurons(pre, post, batch, LAYER, top_n=0)
    assert d_mlp > N_HEADS  # ranked over d_mlp units, not n_heads


def test_another_neuron_location_is_one_entry(models):  # noqa: F811
    """The MLP's pre-activation neurons (``mlp.hook_pre``) registered as one ``Kind`` of scope
    ``neuron``: patched by the engine like the built-in kind, equal to a hand-written hook to 1e-5."""
    _, pre, post_model, batch, _, _, _ = models
    added = register(
        Kind("neuron_pre", "neuron", "MLP pre-activations, [batch, pos, d_mlp]", hook="mlp.hook_pre", head_axis=2)
    )
    try:
        post = capture_post(post_model, batch, kinds=("neuron_pre",), weights=False)
        got = patch_values(pre, post, batch, [Target("neuron_pre", neurons=((LAYER, 40),))], method="reference")[0]
    finally:
        unregister(added.name)
    name = f"blocks.{LAYER}.mlp.hook_pre"
    with torch.inference_mode():
        _, cache = post_model.run_with_cache(batch.tokens, names_filter=lambda n: n == name)

        def replace(act, hook):
            act = act.clone()
            act[:, :, 40] = cache[name][:, :, 40]
            return act

        logits = pre.run_with_hooks(batch.tokens, fwd_hooks=[(name, replace)])
    expected = answer_probability(logits[torch.arange(batch.tokens.shape[0]), batch.answer_pos], batch)
    assert (expected - metric_values(pre, batch)).abs().max() > 1e-6
    assert torch.allclose(got, expected, atol=1e-5, rtol=0), (got - expected).abs().max()
