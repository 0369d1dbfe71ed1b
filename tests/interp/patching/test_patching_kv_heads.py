"""Key/value heads as a patch location (issue 70, item 3): under grouped-query attention
(``n_key_value_heads < n_heads``; Ainslie et al. 2023, "GQA") ``hook_k`` / ``hook_v`` hold the
key/value heads, so the per-head kinds ``k`` / ``v`` are refused there in one line and the kinds
``k_kv`` / ``v_kv`` (scope ``kv_head``, index set ``(layer, kv_head)``) patch them, equal to a
hand-written TransformerLens hook to 1e-5. Without grouping a key/value head is a head: ``k_kv``
equals ``k``.

Models: a tiny Llama bridge (3 layers, 4 query heads sharing 2 key/value heads, d_model 64) and
the GPT-NeoX bridge of tests/interp/patching/test_patching_targets.py.
"""

from __future__ import annotations

import os

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from interp.patching import (
    Target,
    answer_probability,
    capture_post,
    keys,
    kv_keys,
    kv_values,
    metric_values,
    patch_values,
    per_head_delta,
)
from tests.interp.patching.test_patching_targets import N_HEADS, N_LAYERS, VOCAB, boot, make_batch, models  # noqa: F401

N_KV = 2


def llama_gqa(seed: int):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=64,
        intermediate_size=192,
        num_hidden_layers=N_LAYERS,
        num_attention_heads=N_HEADS,
        num_key_value_heads=N_KV,
        max_position_embeddings=64,
        initializer_range=0.3,
        tie_word_embeddings=False,
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=None,
    )
    return LlamaForCausalLM(cfg).eval()


@pytest.fixture(scope="module")
def gqa(tmp_path_factory):
    torch.set_num_threads(1)
    pre = boot(llama_gqa(0), tmp_path_factory.mktemp("gqa-pre"))
    post = boot(llama_gqa(1), tmp_path_factory.mktemp("gqa-post"))
    return pre, post, make_batch(post)


def _hand(pre, post_model, batch, hook: str, layer: int, kv_head: int) -> torch.Tensor:
    name = f"blocks.{layer}.{hook}"
    with torch.inference_mode():
        _, cache = post_model.run_with_cache(batch.tokens, names_filter=lambda n: n == name)

        def replace(act, hook):
            act = act.clone()
            act[:, :, kv_head] = cache[name][:, :, kv_head]
            return act

        logits = pre.run_with_hooks(batch.tokens, fwd_hooks=[(name, replace)])
    return answer_probability(logits[torch.arange(batch.tokens.shape[0]), batch.answer_pos], batch)


def test_kv_heads_equal_a_hand_written_hook_under_grouped_query_attention(gqa):
    pre, post_model, batch = gqa
    assert pre.cfg.n_key_value_heads == N_KV < pre.cfg.n_heads
    post = capture_post(post_model, batch, weights=False)
    assert post.activation("k", 1).shape[2] == N_KV  # the hook holds the key/value heads
    base = metric_values(pre, batch)
    for target, hook, (layer, kv_head) in (
        (kv_keys([(1, 1)]), "attn.hook_k", (1, 1)),
        (kv_values([(2, 0)]), "attn.hook_v", (2, 0)),
    ):
        expected = _hand(pre, post_model, batch, hook, layer, kv_head)
        assert (expected - base).abs().max() > 1e-5, f"{target.label()}: the patch changes nothing"
        got = patch_values(pre, post, batch, [target])[0]  # method="fast": full forwards, no warning
        assert torch.allclose(got, expected, atol=1e-5, rtol=0), (target.label(), (got - expected).abs().max())
    assert kv_keys([(1, 1)]).label() == "k_kv L1KV1"
    with pytest.raises(ValueError, match=r"kv_head \(1, 2\) out of range: layer in \[0, 2\], kv_head in \[0, 1\]"):
        patch_values(pre, post, batch, [kv_keys([(1, 2)])])


def test_per_head_keys_are_refused_under_grouped_query_attention(gqa):
    """``k`` ranges over n_heads = 4 but ``hook_k`` holds 2 key/value heads: one line, naming the fix."""
    pre, post_model, batch = gqa
    post = capture_post(post_model, batch, weights=False)
    with pytest.raises(ValueError, match=r"units range over n_heads=4: .*\(key/value heads: kinds k_kv, v_kv\)"):
        patch_values(pre, post, batch, [keys([(1, 3)])], method="reference")
    with pytest.raises(ValueError, match="units range over n_heads=4"):
        per_head_delta(pre, post, batch, "v")
    with pytest.raises(ValueError, match=r"is per kv_head: give kv_heads=\(\(layer, kv_head\), \.\.\.\), not heads="):
        Target("k_kv", heads=((1, 0),))


def test_without_grouping_a_kv_head_is_a_head(models):  # noqa: F811
    _, pre, _, batch, post, _, _ = models
    together = patch_values(pre, post, batch, [kv_keys([(1, 2)]), keys([(1, 2)]), kv_values(), Target("v")])
    assert (together[0] - metric_values(pre, batch)).abs().max() > 1e-5
    assert torch.allclose(together[0], together[1], atol=1e-5, rtol=0)
    assert torch.allclose(together[2], together[3], atol=1e-5, rtol=0)
