"""Attention-pattern patching engine: fast path == TransformerLens reference, on two bridges.

Models: (a) a random GPT-NeoX bridge (parallel residual, rotary_pct 0.25, booted offline from a
saved directory with a byte tokenizer) and (b) a native TransformerLens transformer (sequential
residual).  Each "post" checkpoint is its "pre" checkpoint with every head's W_Q scaled, so the
two differ only through the attention patterns: patching all heads must give p_post exactly.
"""

from __future__ import annotations

import os
import warnings

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from interp.patching import (
    TaskBatch,
    answer_prob,
    attribution_delta_p,
    cache_patterns,
    delta_p_all_heads,
    mean_answer_prob,
    patch_head_sets,
    patch_heads,
)
from interp.patching import fast as fastpath

N_LAYERS, N_HEADS, D_MODEL, VOCAB = 3, 4, 64, 256
BATCH, POS = 6, 9


def _byte_tokenizer(path):
    """The project's byte tokenizer, saved into ``path`` and reloaded (a bridge boots from a folder)."""
    from transformers import AutoTokenizer

    from interp.sources import make_byte_tokenizer

    make_byte_tokenizer().save_pretrained(path)
    return AutoTokenizer.from_pretrained(path)


def neox_bridge(path, q_scale: float = 1.0):
    """Random GPT-NeoX bridge; ``q_scale`` multiplies every head's query weights before boot."""
    from transformer_lens.model_bridge import TransformerBridge
    from transformers import GPTNeoXForCausalLM

    from interp.sources.catalogue import neox_config

    torch.manual_seed(0)
    cfg = neox_config(D_MODEL, N_LAYERS, N_HEADS, VOCAB, 64, initializer_range=0.4)
    model = GPTNeoXForCausalLM(cfg).eval()
    with torch.no_grad():
        for module in model.modules():  # trained-looking norms: distinct gains and biases per norm
            if isinstance(module, torch.nn.LayerNorm):
                module.weight.copy_(1 + 0.3 * torch.randn_like(module.weight))
                module.bias.copy_(0.2 * torch.randn_like(module.bias))
        for layer in model.gpt_neox.layers:  # fused qkv, interleaved per head: [head, (q k v), d_head, d_model]
            layer.attention.query_key_value.weight.view(N_HEADS, 3, D_MODEL // N_HEADS, D_MODEL)[:, 0] *= q_scale
    model.save_pretrained(path)
    tokenizer = _byte_tokenizer(path)
    return TransformerBridge.boot_transformers(str(path), hf_model=model, tokenizer=tokenizer).eval()


def native_bridge(q_scale: float = 1.0):
    """Random native TransformerLens transformer; weights x3 so patterns and logits are sharp."""
    from transformer_lens.model_bridge import TransformerBridge

    bridge = TransformerBridge.boot_native(
        dict(
            n_layers=N_LAYERS,
            d_model=D_MODEL,
            n_heads=N_HEADS,
            d_head=D_MODEL // N_HEADS,
            d_vocab=VOCAB,
            n_ctx=64,
            act_fn="gelu",
            normalization_type="LN",
            seed=0,
        )
    )
    with torch.no_grad():
        for p in bridge.parameters():
            if p.ndim >= 2:
                p.mul_(3.0)
        for block in bridge.blocks:
            block.attn.q.original_component.weight.mul_(q_scale)
    return bridge.eval()


def make_inputs(post):
    gen = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, VOCAB, (BATCH, POS), generator=gen)
    answer_pos = torch.randint(POS // 2, POS, (BATCH,), generator=gen)
    with torch.no_grad():
        answers = post(tokens)[torch.arange(BATCH), answer_pos].argmax(-1)
    return TaskBatch(tokens, answers, answer_pos)


@pytest.fixture(scope="module", params=["neox", "native"])
def pair(request, tmp_path_factory):
    """(name, pre, post, inputs, post_patterns)."""
    torch.set_num_threads(1)
    if request.param == "neox":
        pre = neox_bridge(tmp_path_factory.mktemp("pre"))
        post = neox_bridge(tmp_path_factory.mktemp("post"), q_scale=6.0)
    else:
        pre, post = native_bridge(), native_bridge(q_scale=4.0)
    inputs = make_inputs(post)
    return request.param, pre, post, inputs, cache_patterns(post, inputs.tokens)


def hooks_reference(model, inputs, patterns, heads):
    """Independent joint patch: one run_with_hooks forward replacing the heads' patterns."""
    by_layer: dict[int, list[int]] = {}
    for layer, head in heads:
        by_layer.setdefault(layer, []).append(head)

    def hook_for(layer):
        def hook(pattern, hook):
            pattern = pattern.clone()
            pattern[:, by_layer[layer]] = patterns[layer][:, by_layer[layer]]
            return pattern

        return hook

    with torch.no_grad():
        logits = model.run_with_hooks(
            inputs.tokens, fwd_hooks=[(f"blocks.{l}.attn.hook_pattern", hook_for(l)) for l in by_layer]
        )
    return float(answer_prob(logits, inputs).mean())


def test_fast_equals_transformer_lens_reference(pair):
    name, pre, post, inputs, patterns = pair
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # the layer-skip path, not the fallback
        fast = delta_p_all_heads(pre, inputs, patterns, method="fast")
    reference = delta_p_all_heads(pre, inputs, patterns, method="reference")  # TL get_act_patch_..._all_pos
    assert fast.shape == (N_LAYERS, N_HEADS)
    assert fast.abs().max() > 1e-3, f"{name}: patches too weak to test anything"
    assert torch.allclose(fast, reference, atol=1e-5, rtol=0), (fast - reference).abs().max()


def test_reference_equals_hand_written_hooks(pair):
    _, pre, _, inputs, patterns = pair
    reference = delta_p_all_heads(pre, inputs, patterns, method="reference")
    p_pre = mean_answer_prob(pre, inputs)
    for layer, head in [(0, 0), (1, 3), (N_LAYERS - 1, 2)]:
        expected = hooks_reference(pre, inputs, patterns, [(layer, head)]) - p_pre
        assert abs(float(reference[layer, head]) - expected) < 1e-5


def test_patching_every_head_gives_the_post_checkpoint(pair):
    _, pre, post, inputs, patterns = pair
    every = [(l, h) for l in range(N_LAYERS) for h in range(N_HEADS)]
    p_post, p_pre = mean_answer_prob(post, inputs), mean_answer_prob(pre, inputs)
    assert abs(p_post - p_pre) > 1e-2
    assert abs(patch_heads(pre, inputs, patterns, every) - p_post) < 1e-5
    assert abs(patch_heads(pre, inputs, patterns, []) - p_pre) < 1e-6


def test_joint_sets_equal_hooks_reference(pair):
    _, pre, _, inputs, patterns = pair
    sets = [[(0, 1)], [(1, 0), (1, 2)], [(2, 3), (0, 2), (1, 1)], [(2, 0)]]
    got = patch_head_sets(pre, inputs, patterns, sets)
    for p, heads in zip(got.tolist(), sets):
        assert abs(p - hooks_reference(pre, inputs, patterns, heads)) < 1e-5


def test_head_subset_and_small_memory_budget(pair):
    _, pre, _, inputs, patterns = pair
    full = delta_p_all_heads(pre, inputs, patterns)
    subset = [(0, 3), (2, 1), (1, 1)]
    # A 10 KiB budget forces one copy of the prompts per chunk.
    assert fastpath.chunk_size(pre, inputs, 0.01) == 1
    part = delta_p_all_heads(pre, inputs, patterns, heads=subset, memory_budget_mb=0.01)
    mask = torch.zeros(N_LAYERS, N_HEADS, dtype=torch.bool)
    for l, h in subset:
        mask[l, h] = True
    assert torch.isnan(part[~mask]).all()
    assert torch.allclose(part[mask], full[mask], atol=1e-6, rtol=0)


def test_fallback_full_forwards_when_layer_skip_check_fails(pair, monkeypatch):
    _, pre, _, inputs, patterns = pair
    reference = delta_p_all_heads(pre, inputs, patterns, method="reference")

    def fail(self):
        raise fastpath.FastPathUnsupported("forced by the test")

    monkeypatch.setattr(fastpath.LayerSkipEngine, "check_tail", fail)
    with pytest.warns(RuntimeWarning, match="full forwards"):
        fallback = delta_p_all_heads(pre, inputs, patterns, memory_budget_mb=2)
    assert torch.allclose(fallback, reference, atol=1e-5, rtol=0)


def test_attribution_is_exact_to_first_order(pair):
    """On patterns moved a small step eps toward the post checkpoint, attribution == exact delta_p."""
    _, pre, _, inputs, patterns = pair
    pre_patterns = cache_patterns(pre, inputs.tokens)
    eps = 1e-2
    nudged = pre_patterns + eps * (patterns - pre_patterns)  # convex combination: still a pattern
    exact = delta_p_all_heads(pre, inputs, nudged)
    estimate = attribution_delta_p(pre, inputs, nudged)
    scale = float(exact.abs().max())
    assert scale > 1e-5
    assert float((estimate - exact).abs().max()) < 0.05 * scale
    # Attribution is linear in the pattern change: the full step is 1/eps times the nudge.
    full = attribution_delta_p(pre, inputs, patterns)
    assert torch.allclose(full * eps, estimate, atol=1e-6, rtol=1e-3)


def test_answer_prob_is_softmax_at_answer_position():
    gen = torch.Generator().manual_seed(1)
    logits = torch.randn(3, 5, 11, generator=gen)
    inputs = TaskBatch(torch.zeros(3, 5, dtype=torch.long), torch.tensor([1, 7, 10]), torch.tensor([4, 0, 2]))
    expected = torch.stack([logits[b, inputs.answer_pos[b]].softmax(-1)[inputs.answers[b]] for b in range(3)])
    assert torch.allclose(answer_prob(logits, inputs), expected, atol=1e-7)
    with pytest.raises(ValueError, match="logits must have shape"):
        answer_prob(logits[:, :4], inputs)


def test_bad_inputs_raise_one_line_errors(pair):
    _, pre, _, inputs, patterns = pair
    from types import SimpleNamespace

    no_heads = SimpleNamespace(cfg=SimpleNamespace(n_layers=2, n_heads=0), hook_dict={})
    cases = [
        (lambda: cache_patterns(no_heads, inputs.tokens), "no attention heads"),
        (lambda: delta_p_all_heads(pre, inputs, patterns[:, :, :2]), "patterns must have shape"),
        (lambda: delta_p_all_heads(pre, inputs, patterns, method="slow"), "method must be"),
        (lambda: delta_p_all_heads(pre, inputs, patterns, heads=[(N_LAYERS, 0)]), "out of range"),
        (lambda: delta_p_all_heads(pre, inputs, patterns, memory_budget_mb=0), "memory_budget_mb"),
        (lambda: TaskBatch(inputs.tokens, inputs.answers[:2], inputs.answer_pos), "must both be"),
        (
            lambda: mean_answer_prob(pre, TaskBatch(inputs.tokens, inputs.answers, inputs.answer_pos + POS)),
            "answer_pos must lie",
        ),
        (lambda: mean_answer_prob(pre, TaskBatch(inputs.tokens.float(), inputs.answers, inputs.answer_pos)), "integer"),
    ]
    for call, message in cases:
        with pytest.raises(ValueError, match=message) as err:
            call()
        assert "\n" not in str(err.value)


def test_wrong_block_structure_is_caught_and_falls_back(pair, monkeypatch):
    """Lie about parallel vs sequential residual: the block-l check must reject the shortcut."""
    _, pre, _, inputs, patterns = pair
    reference = delta_p_all_heads(pre, inputs, patterns, method="reference")
    monkeypatch.setattr(pre.cfg, "parallel_attn_mlp", not bool(getattr(pre.cfg, "parallel_attn_mlp", False)))
    monkeypatch.setattr(fastpath.LayerSkipEngine, "check_tail", lambda self: None)
    with pytest.warns(RuntimeWarning, match="is not x \\+ attn \\+ mlp"):
        fast = delta_p_all_heads(pre, inputs, patterns)
    assert torch.allclose(fast, reference, atol=1e-5, rtol=0)


def _single_head_units(n_layers: int, n_heads: int) -> list:
    return [[fastpath.Unit("pattern", l, h)] for l in range(n_layers) for h in range(n_heads)]


def _engine(pre, inputs, patterns):
    from interp.patching import answer_probability, post_from_patterns

    return fastpath.LayerSkipEngine(pre, inputs, answer_probability, post_from_patterns(pre, inputs, patterns))


def _swapped_modules(model) -> list[str]:
    return [name for name, module in model.named_modules() if "forward" in module.__dict__]


def test_low_rank_projections_and_answer_only_last_block_are_used_and_exact(pair):
    """GPT-NeoX: block l+1's query/key/value/MLP-in come from the rank-d_head formula, the last
    block's query/output projections run at the answer only; values equal the reference."""
    name, pre, _, inputs, patterns = pair
    reference = delta_p_all_heads(pre, inputs, patterns, method="reference")
    with torch.inference_mode():
        engine = _engine(pre, inputs, patterns)
        engine.check_tail()
        p = engine.values_of_sets(_single_head_units(N_LAYERS, N_HEADS), chunk=N_HEADS)
    got = (p.mean(1) - engine.values_pre.mean()).reshape(N_LAYERS, N_HEADS)
    assert torch.allclose(got, reference, atol=1e-5, rtol=0), (got - reference).abs().max()
    assert _swapped_modules(pre) == []  # every swapped forward was put back
    if name == "neox":
        linears = {linear.rsplit(".", 1)[0].split(".")[-1] for linear, _ in engine._norm_pairs}
        assert {"q", "k", "v", "dense_h_to_4h"} <= linears, engine._norm_pairs
        assert engine.low_rank_layers == list(range(1, N_LAYERS))
    else:  # sequential residual: block l+1 reads the MLP's full-rank output, no shortcut
        assert engine.low_rank_layers == []


def test_low_rank_self_check_falls_back_to_the_module(pair, monkeypatch):
    """A wrong norm description (gain doubled) fails the first-use check: exact values anyway
    (GPT-NeoX; the sequential native model never takes the shortcut)."""
    _, pre, _, inputs, patterns = pair
    reference = delta_p_all_heads(pre, inputs, patterns, method="reference")
    from interp.patching.fast import modules

    real = modules._norm_affine

    def wrong(norm):
        found = real(norm)
        return None if found is None else (found[0], 2 * found[1], found[2], found[3])

    monkeypatch.setattr(modules, "_norm_affine", wrong)
    with torch.inference_mode():
        engine = _engine(pre, inputs, patterns)
        p = engine.values_of_sets(_single_head_units(N_LAYERS, N_HEADS), chunk=N_HEADS)
    assert engine._norm_pairs and engine.low_rank_layers == []
    got = (p.mean(1) - engine.values_pre.mean()).reshape(N_LAYERS, N_HEADS)
    assert torch.allclose(got, reference, atol=1e-5, rtol=0)


def test_integrated_gradients_is_complete_per_layer(pair):
    """IG moving one layer's patterns along the straight line (mode="layer"): the estimates of that
    layer's heads sum to the exact effect of patching all of its patterns (Sundararajan et al.
    2017, completeness), up to the midpoint rule's error; one gradient point is not complete."""
    from interp.patching import Target, metric_values, patch_values, post_from_patterns

    _, pre, _, inputs, patterns = pair
    estimate = attribution_delta_p(pre, inputs, patterns, steps=32, mode="layer")
    post = post_from_patterns(pre, inputs, patterns)
    whole = (
        patch_values(
            pre, post, inputs, [Target("pattern", tuple((l, h) for h in range(N_HEADS))) for l in range(N_LAYERS)]
        ).mean(1)
        - metric_values(pre, inputs).mean()
    )
    assert whole.abs().max() > 1e-3
    assert torch.allclose(estimate.sum(dim=1), whole, atol=2e-3 * float(whole.abs().max()) + 1e-6, rtol=0), (
        estimate.sum(dim=1),
        whole,
    )
    tangent = attribution_delta_p(pre, inputs, patterns, steps=1)
    assert float((tangent.sum(dim=1) - whole).abs().max()) > 10 * float((estimate.sum(dim=1) - whole).abs().max())


def test_integrated_gradients_from_the_cached_prefix_equals_full_forwards(pair, monkeypatch):
    """Layer mode runs only the blocks from the moved layer on; full forwards give the same numbers."""
    from interp.patching import attribution

    _, pre, _, inputs, patterns = pair
    fast = attribution_delta_p(pre, inputs, patterns, steps=3, mode="layer")
    monkeypatch.setattr(attribution, "_tail_runner", lambda *args: None)
    full = attribution_delta_p(pre, inputs, patterns, steps=3, mode="layer")
    assert float(full.abs().max()) > 1e-4
    assert torch.allclose(fast, full, atol=1e-6, rtol=1e-4), (fast - full).abs().max()


@pytest.mark.parametrize(
    "steps, mode, engine", [(1, "layer", True), (2, "layer", True), (2, "joint", True), (2, "layer", False)]
)
def test_the_screen_returns_what_its_forward_of_the_pre_checkpoint_saw(pair, monkeypatch, steps, mode, engine):
    """attribution_screen's values and patterns equal a separate forward's (metric_values,
    capture_post) to 1e-6, on every path: the screen's own forward (1 point), the layer-skip
    engine's pre-run (layer IG), joint IG's pre-run and, where the engine does not take the model,
    one more forward; its estimate is attribution_delta_p's, bit for bit."""
    from interp.patching import attribution, capture_post, metric_values

    _, pre, _, inputs, patterns = pair
    if not engine:
        monkeypatch.setattr(attribution, "_tail_runner", lambda *args: None)
    screen = attribution.attribution_screen(pre, inputs, patterns, metric="logprob", steps=steps, mode=mode)
    separate = capture_post(pre, inputs, kinds=["pattern"], weights=False)
    assert torch.allclose(screen.values_pre, metric_values(pre, inputs, "logprob"), atol=1e-6, rtol=0)
    assert float(screen.values_pre.std()) > 1e-3  # prompts differ: a shuffled row would be caught
    assert torch.allclose(screen.pre.answer_logits, separate.answer_logits, atol=1e-5, rtol=0)
    for layer in range(N_LAYERS):
        assert torch.allclose(
            screen.pre.activation("pattern", layer), separate.activation("pattern", layer), atol=1e-6, rtol=0
        )
    assert torch.equal(screen.estimate, attribution_delta_p(pre, inputs, patterns, "logprob", steps, mode))
    assert torch.equal(screen.pre.tokens, inputs.tokens)
