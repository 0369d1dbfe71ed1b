"""The fast patching path on sequential-residual families, each in its real block structure:
GPT-2 (pre-LayerNorm), Llama (pre-RMSNorm, SwiGLU) and OLMo-2 (RMSNorm *after* the attention
and after the MLP, QK-norm over all heads). Fast == TransformerLens / the reference path to 1e-5,
with the layer-skip path itself (a fallback to full forwards raises here).

Pre and post are two random models of one shape with non-trivial norm gains, so every component
differs between them. Helpers (TransformerLens all-position reference, prompts) come from
tests/interp/patching/test_patching_targets.py, whose sizes this file shares.
"""

from __future__ import annotations

import os
import warnings

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from interp.patching import (
    capture_post,
    head_output,
    metric_values,
    mlp_output,
    ov_weights,
    patch_values,
    pattern,
    per_head_delta,
    qk_weights,
)
from interp.patching.targets import Target
from tests.interp.patching.test_patching_targets import (
    D_MODEL,
    N_HEADS,
    N_LAYERS,
    VOCAB,
    boot,
    make_batch,
    tl_all_pos,
    tl_mlp_outputs,
)


def hf_model(family: str, seed: int):
    """A random HF model of ``family`` (3 layers x 4 heads, d_model 64) with random norm gains."""
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM, Olmo2Config, Olmo2ForCausalLM

    torch.manual_seed(seed)
    common = dict(
        vocab_size=VOCAB,
        num_hidden_layers=N_LAYERS,
        num_attention_heads=N_HEADS,
        initializer_range=0.3,
        max_position_embeddings=64,
        tie_word_embeddings=False,
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=None,
    )
    if family == "gpt2":
        model = GPT2LMHeadModel(
            GPT2Config(
                vocab_size=VOCAB,
                n_embd=D_MODEL,
                n_layer=N_LAYERS,
                n_head=N_HEADS,
                n_positions=64,
                initializer_range=0.3,
                bos_token_id=None,
                eos_token_id=None,
            )
        )
    elif family == "llama":
        model = LlamaForCausalLM(
            LlamaConfig(hidden_size=D_MODEL, intermediate_size=3 * D_MODEL, num_key_value_heads=N_HEADS, **common)
        )
    else:
        model = Olmo2ForCausalLM(
            Olmo2Config(hidden_size=D_MODEL, intermediate_size=3 * D_MODEL, num_key_value_heads=N_HEADS, **common)
        )
    with torch.no_grad():  # norms with gains away from 1 (and biases for LayerNorm), so they matter
        for name, param in model.named_parameters():
            if "norm" in name or ".ln_" in name:
                param.copy_(
                    (1 + 0.3 * torch.randn_like(param)) if name.endswith("weight") else 0.2 * torch.randn_like(param)
                )
    return model.eval()


@pytest.fixture(scope="module", params=["gpt2", "llama", "olmo2"])
def models(request, tmp_path_factory):
    """(family, pre bridge, post capture, batch)."""
    torch.set_num_threads(1)
    pre = boot(hf_model(request.param, 0), tmp_path_factory.mktemp("pre"))
    post = boot(hf_model(request.param, 1), tmp_path_factory.mktemp("post"))
    batch = make_batch(post)
    return request.param, pre, capture_post(post, batch), batch


@pytest.mark.parametrize("kind", ["pattern", "z"])
def test_head_targets_equal_transformer_lens(models, kind):
    family, pre, post, batch = models
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        fast = per_head_delta(pre, post, batch, kind)
    reference = tl_all_pos(pre, batch, post, kind)
    assert fast.abs().max() > 1e-3, f"{family} {kind}: patches too weak to test anything"
    assert torch.allclose(fast, reference, atol=1e-5, rtol=0), (family, (fast - reference).abs().max())


def test_mlp_outputs_equal_transformer_lens(models):
    family, pre, post, batch = models
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        fast = patch_values(pre, post, batch, [mlp_output([l]) for l in range(N_LAYERS)])
    tl = tl_mlp_outputs(pre, batch, post)
    assert (fast - metric_values(pre, batch)).abs().max() > 1e-3
    assert torch.allclose(fast, tl, atol=1e-5, rtol=0), (family, (fast - tl).abs().max())


def test_joint_and_weight_targets_fast_equal_reference(models):
    """Joint head sets (the top-K path), every head of a layer, MLP outputs, QK and OV weights."""
    family, pre, post, batch = models
    targets = [
        pattern([(0, 1), (2, 3)]),
        pattern([(1, 0), (1, 2)]),
        head_output([(1, 0), (0, 2), (2, 1)]),
        Target("q", ((0, 0), (1, 2))),
        pattern(None),
        mlp_output([0, 2]),
        pattern([(2, 0)], query_pos=-1),
        qk_weights([(0, 1)]),
        qk_weights([(1, 0), (1, 3)]),
        ov_weights([(1, 3)]),
        ov_weights([(2, h) for h in range(N_HEADS)]),
    ]
    fast = patch_values(pre, post, batch, targets)
    reference = patch_values(pre, post, batch, targets, method="reference")
    assert (reference - metric_values(pre, batch)).abs().max() > 1e-3
    assert torch.allclose(fast, reference, atol=1e-5, rtol=0), (family, (fast - reference).abs().max(dim=1))


def test_own_mlp_low_rank_shortcut_is_used_and_exact(models):
    """Single-head patches of a sequential block reach its own MLP input first: GPT-2 (pre-norm,
    Conv1D MLP), Llama (pre-norm) and OLMo-2 (norm after attention) take the rank-d_head formula
    there for every block but the last (answer positions only); all equal the reference."""
    from interp.core.metrics import resolve_metric
    from interp.patching.fast import LayerSkipEngine, Unit

    family, pre, post, batch = models
    with torch.inference_mode():
        engine = LayerSkipEngine(pre, batch, resolve_metric("p"), post)
        sets = [[Unit("pattern", layer, head)] for layer in range(N_LAYERS) for head in range(N_HEADS)]
        fast = (engine.values_of_sets(sets, 4).mean(1) - engine.values_pre.mean()).reshape(N_LAYERS, N_HEADS)
    reference = per_head_delta(pre, post, batch, "pattern", method="reference")
    assert torch.allclose(fast, reference, atol=1e-5, rtol=0), (family, (fast - reference).abs().max())
    assert engine.own_mlp_low_rank_layers == list(range(N_LAYERS - 1))


def test_gpt2_weight_targets_equal_a_model_built_with_the_swapped_weights(tmp_path):
    """GPT-2 keeps q, k, v in one Conv1D ``c_attn`` ([d_model, 3 d_model]: q | k | v columns, head-major)
    and ``c_proj`` as Conv1D ([n_heads d_head, d_model]: a head's rows). QK and OV weight targets equal
    a Hugging Face GPT-2 whose columns / rows of that head were copied from post, booted afresh."""
    torch.set_num_threads(1)
    d_head = D_MODEL // N_HEADS
    _hf_pre, hf_post = hf_model("gpt2", 0), hf_model("gpt2", 1)
    pre = boot(hf_model("gpt2", 0), tmp_path / "pre")
    batch = make_batch(pre)
    post = capture_post(boot(hf_model("gpt2", 1), tmp_path / "post"), batch)

    def columns(parts, head):  # c_attn columns of ``parts`` (0 q, 1 k, 2 v) of one head
        return [slice(part * D_MODEL + head * d_head, part * D_MODEL + (head + 1) * d_head) for part in parts]

    def built(layer, head, parts, output_rows):
        model = hf_model("gpt2", 0)
        state = dict(hf_post.named_parameters())
        prefix = f"transformer.h.{layer}.attn."
        with torch.no_grad():
            for name, param in model.named_parameters():
                if name.startswith(prefix + "c_attn."):
                    for cols in columns(parts, head):
                        param[..., cols] = state[name][..., cols]
                if output_rows and name == prefix + "c_proj.weight":
                    param[head * d_head : (head + 1) * d_head] = state[name][head * d_head : (head + 1) * d_head]
        return boot(model, tmp_path / f"built-{layer}-{head}-{len(parts)}")

    cases = [(qk_weights([(1, 2)]), built(1, 2, (0, 1), False)), (ov_weights([(0, 3)]), built(0, 3, (2,), True))]
    targets = [target for target, _ in cases]
    fast = patch_values(pre, post, batch, targets)
    reference = patch_values(pre, post, batch, targets, method="reference")
    base = metric_values(pre, batch)
    for i, (target, model) in enumerate(cases):
        expected = metric_values(model, batch)
        assert (expected - base).abs().max() > 1e-4, f"{target.label()}: the swap changes nothing"
        assert torch.allclose(reference[i], expected, atol=1e-5, rtol=0), (
            target.label(),
            (reference[i] - expected).abs().max(),
        )
        assert torch.allclose(fast[i], expected, atol=1e-5, rtol=0), (target.label(), (fast[i] - expected).abs().max())
