"""Attention bias: the scores hook is pre-softmax, the bias moves mass onto the true keys."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from transformer_lens.model_bridge import TransformerBridge

from synthetic.datasets import LinearMapTask
from synthetic.interventions import AttentionBias, bias_beta, parse_indices
from synthetic.metrics import attention_alignment
from synthetic.models import ModelConfig, build_model, count_parameters, has_attention
from synthetic.models.transformer import transformer_bridge_config

torch.set_num_threads(1)

SCORES, PATTERN = "blocks.{}.attn.hook_attn_scores", "blocks.{}.attn.hook_pattern"


@pytest.fixture(scope="module")
def setup():
    task = LinearMapTask(S=6, s=2, data_seed=0)
    cfg = ModelConfig(d_vocab=2, n_ctx=task.seq_len, n_layers=2, n_heads=4, d_head=8, seed=1)
    model = build_model(cfg)
    tokens = task.sample(8, torch.Generator().manual_seed(0))
    return task, cfg, model, tokens


def _cache(model, tokens, layers=(0, 1)):
    names = [SCORES.format(l) for l in layers] + [PATTERN.format(l) for l in layers]
    with torch.no_grad():
        logits, cache = model.run_with_cache(tokens, names_filter=lambda n: n in names)
    return logits, cache


def test_transformer_matches_stock_boot_native(setup):
    _, cfg, model, tokens = setup
    stock = TransformerBridge.boot_native(transformer_bridge_config(cfg))
    with torch.no_grad():
        # equal up to float rounding: unhooked, ours runs the fused attention kernel
        assert torch.allclose(model(tokens), stock(tokens), atol=1e-5)
    assert has_attention(model) and count_parameters(model) == count_parameters(stock)


def test_scores_hook_is_pre_softmax(setup):
    _, _, model, tokens = setup
    _, cache = _cache(model, tokens)
    for l in (0, 1):
        scores, pattern = cache[SCORES.format(l)], cache[PATTERN.format(l)]
        assert scores.shape == pattern.shape == (8, 4, 12, 12)
        assert torch.isinf(scores[..., 0, 1:]).all()  # causal mask already applied
        assert torch.allclose(F.softmax(scores, dim=-1), pattern, atol=1e-6)


def test_bias_equals_softmax_of_biased_scores_on_chosen_heads(setup):
    task, _, model, tokens = setup
    logits, clean = _cache(model, tokens)
    with AttentionBias(model, task.pattern_mask, beta=3.0, layers=[1], heads=[0, 2]):
        biased_logits, biased = _cache(model, tokens)
    mask = task.pattern_mask
    for h in range(4):
        p_clean = clean[PATTERN.format(1)][:, h]
        p_biased = biased[PATTERN.format(1)][:, h]
        if h in (0, 2):
            # The cache hook runs after the bias hook, so it records the biased scores.
            s_clean, s_biased = clean[SCORES.format(1)][:, h], biased[SCORES.format(1)][:, h]
            assert torch.allclose(s_biased, s_clean + 3.0 * mask, atol=1e-6)
            reference = F.softmax(s_clean + 3.0 * mask, dim=-1)
            assert torch.allclose(p_biased, reference, atol=1e-6)
            assert not torch.allclose(p_biased, p_clean)
        else:
            assert torch.equal(p_biased, p_clean)
    assert torch.equal(biased[PATTERN.format(0)], clean[PATTERN.format(0)])  # layer 0 untouched
    assert not torch.allclose(biased_logits, logits)  # the edit reaches the output
    # Hooks are gone after the context.
    with torch.no_grad():
        assert torch.allclose(model(tokens), logits, atol=1e-5)


def test_bias_puts_more_mass_on_true_keys(setup):
    task, _, model, tokens = setup
    _, clean = _cache(model, tokens)
    with AttentionBias(model, task.pattern_mask, beta=4.0) as bias:
        _, biased = _cache(model, tokens)
        bias.beta = 0.0  # β = 0 is exactly the unbiased model
        _, zero = _cache(model, tokens)
    for l in (0, 1):
        before = attention_alignment(clean[PATTERN.format(l)], task.pattern_mask, task.target_mask)
        after = attention_alignment(biased[PATTERN.format(l)], task.pattern_mask, task.target_mask)
        assert (after > before + 0.3).all()
        assert torch.equal(zero[PATTERN.format(l)], clean[PATTERN.format(l)])


def test_bias_schedules():
    assert bias_beta(5.0, "constant", 900, 100) == 5.0
    assert [bias_beta(4.0, "linear-anneal", s, 100) for s in (0, 25, 100, 150)] == [4.0, 3.0, 0.0, 0.0]
    with pytest.raises(ValueError, match="warm"):
        bias_beta(1.0, "warm", 0, 10)


def test_parse_indices():
    assert parse_indices(None, 4, "head") is None and parse_indices("all", 4, "head") is None
    assert parse_indices("3, 1,1", 4, "head") == [1, 3]
    with pytest.raises(ValueError, match="head index 4 is out of range"):
        parse_indices("0,4", 4, "head")
    with pytest.raises(ValueError, match="'x'"):
        parse_indices("x", 4, "head")


class _NoAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(2, 2)

    def forward(self, tokens):
        return self.embed(tokens)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(heads=[4]), "head index 4 is out of range"),
        (dict(heads="0,-1"), "head index -1 is out of range"),
        (dict(layers=[2]), "layer index 2 is out of range"),
        (dict(mask=torch.zeros(12, 11)), r"bias mask shape \(12, 11\)"),
        (dict(mask=torch.zeros(13, 13)), r"bias mask shape \(13, 13\)"),
        (dict(model=_NoAttention()), "_NoAttention has none"),
    ],
)
def test_bias_bad_input(setup, kwargs, match):
    task, _, model, _ = setup
    args = dict(model=model, mask=task.pattern_mask, beta=1.0)
    args.update(kwargs)
    with pytest.raises(ValueError, match=match) as info:
        AttentionBias(**args)
    assert "\n" not in str(info.value)


def test_bias_mask_shape_checked_against_the_input(setup):
    task, _, model, tokens = setup
    with (
        AttentionBias(model, task.pattern_mask[:10, :10], beta=1.0),
        pytest.raises(ValueError, match=r"does not match attention scores"),
    ):
        model(tokens)


def test_build_model_errors():
    with pytest.raises(ValueError, match=r"arch='lstm' is unknown: choose one of .*transformer"):
        build_model(ModelConfig(d_vocab=2, n_ctx=8, arch="lstm"))
    with pytest.raises(ValueError, match="positional_embedding='alibi'"):
        build_model(ModelConfig(d_vocab=2, n_ctx=8, positional_embedding="alibi"))
    with pytest.raises(ValueError, match="d_head=3 is invalid for rotary"):
        build_model(ModelConfig(d_vocab=2, n_ctx=8, d_head=3, positional_embedding="rotary"))


def test_rotary_transformer_and_mlp_are_built():
    cfg = ModelConfig(d_vocab=3, n_ctx=8, n_heads=2, d_head=4, d_mlp=16, positional_embedding="rotary")
    model = build_model(cfg)
    logits = model(torch.zeros(2, 8, dtype=torch.long))
    assert logits.shape == (2, 8, 3)
    assert any("mlp" in name for name, _ in model.named_parameters())
    assert not any(name.startswith("pos") for name, _ in model.named_parameters())
