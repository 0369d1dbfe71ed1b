"""Every patch target: fast path == reference path == TransformerLens (activations) or a model
built with the swapped weights (weights), to 1e-5, on a GPT-NeoX bridge (parallel residual) and
a native TransformerLens transformer (sequential residual).  Pre and post are two random models
of the same shape, so every component differs between them.
"""

from __future__ import annotations

import os
import warnings

import pandas as pd
import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from interp.patching import (
    TaskBatch,
    answer_probability,
    block_weights,
    capture_post,
    embedding,
    head_output,
    logit_diff,
    metric_values,
    mlp_output,
    mlp_weights,
    ov_weights,
    patch_values,
    path,
    pattern,
    per_head_delta,
    qk_weights,
    unembedding,
)
from interp.patching.targets import Target

N_LAYERS, N_HEADS, D_MODEL, VOCAB = 3, 4, 64, 256
D_HEAD = D_MODEL // N_HEADS
BATCH, POS = 6, 9


def neox_hf(seed: int):
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

    torch.manual_seed(seed)
    cfg = GPTNeoXConfig(
        vocab_size=VOCAB,
        hidden_size=D_MODEL,
        num_hidden_layers=N_LAYERS,
        num_attention_heads=N_HEADS,
        intermediate_size=4 * D_MODEL,
        rotary_pct=0.25,
        use_parallel_residual=True,
        max_position_embeddings=64,
        initializer_range=0.3,
        tie_word_embeddings=False,
    )
    model = GPTNeoXForCausalLM(cfg).eval()
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, torch.nn.LayerNorm):
                module.weight.copy_(1 + 0.3 * torch.randn_like(module.weight))
                module.bias.copy_(0.2 * torch.randn_like(module.bias))
    return model


def boot(hf_model, path):
    from transformer_lens.model_bridge import TransformerBridge
    from transformers import AutoTokenizer

    from interp.sources import make_byte_tokenizer

    hf_model.save_pretrained(path)
    make_byte_tokenizer().save_pretrained(path)
    tokenizer = AutoTokenizer.from_pretrained(path)
    return TransformerBridge.boot_transformers(str(path), hf_model=hf_model, tokenizer=tokenizer).eval()


def native(seed: int):
    from transformer_lens.model_bridge import TransformerBridge

    bridge = TransformerBridge.boot_native(
        dict(
            n_layers=N_LAYERS,
            d_model=D_MODEL,
            n_heads=N_HEADS,
            d_head=D_HEAD,
            d_vocab=VOCAB,
            n_ctx=64,
            act_fn="gelu",
            normalization_type="LN",
            seed=seed,
        )
    )
    with torch.no_grad():
        for p in bridge.parameters():
            if p.ndim >= 2:
                p.mul_(3.0)
    return bridge.eval()


def make_batch(post) -> TaskBatch:
    gen = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, VOCAB, (BATCH, POS), generator=gen)
    answer_pos = torch.randint(POS // 2, POS, (BATCH,), generator=gen)
    with torch.no_grad():
        answers = post(tokens)[torch.arange(BATCH), answer_pos].argmax(-1)
    distractors = torch.stack([torch.tensor([t for t in range(12) if t != int(a)][:10]) for a in answers])
    return TaskBatch(tokens, answers, answer_pos, distractors=distractors)


@pytest.fixture(scope="module", params=["neox", "native"])
def models(request, tmp_path_factory):
    """(name, pre, post, batch, post checkpoint, HF pre state, HF post state) (None for native)."""
    torch.set_num_threads(1)
    if request.param == "neox":
        hf_pre, hf_post = neox_hf(0), neox_hf(1)
        # booting rewrites the HF module tree: keep plain copies of both state dicts first
        states = [{k: v.clone() for k, v in m.state_dict().items()} for m in (hf_pre, hf_post)]
        pre, post = boot(hf_pre, tmp_path_factory.mktemp("pre")), boot(hf_post, tmp_path_factory.mktemp("post"))
    else:
        hf_pre = hf_post = None
        pre, post = native(0), native(0)
        with torch.no_grad():  # post = pre moved halfway towards another random model: answers pre can reach
            for p, q in zip(post.parameters(), native(1).parameters()):
                p.lerp_(q, 0.5)
    batch = make_batch(post)
    if hf_pre is not None:
        hf_pre, hf_post = states
    return request.param, pre, post, batch, capture_post(post, batch), hf_pre, hf_post


def tl_mlp_outputs(pre, batch, post) -> torch.Tensor:
    """TransformerLens's reference for each layer's MLP output patched from post: p(answer) per
    prompt, ``[layer, batch]`` (``generic_activation_patch``, ``reduce="none"``)."""
    from transformer_lens import ActivationCache
    from transformer_lens.patching import generic_activation_patch

    from interp.patching.targets import hook_name

    cache = ActivationCache({hook_name("mlp", l): post.activation("mlp", l) for l in range(N_LAYERS)}, pre)
    with torch.no_grad():
        return generic_activation_patch(
            pre,
            batch.tokens,
            cache,
            lambda logits: answer_probability(logits[torch.arange(BATCH), batch.answer_pos], batch),
            patch_setter=lambda act, index, clean: clean,
            activation_name="mlp_out",
            index_df=pd.DataFrame({"layer": range(N_LAYERS)}),
            reduce="none",
        ).values


def tl_all_pos(model, batch, post_ckpt, kind):
    """TransformerLens's get_act_patch_attn_head_{kind}_all_pos: mean p change per (layer, head)."""
    from transformer_lens import ActivationCache
    from transformer_lens import patching as tlp

    from interp.patching.targets import hook_name

    fn = {
        "pattern": tlp.get_act_patch_attn_head_pattern_all_pos,
        "q": tlp.get_act_patch_attn_head_q_all_pos,
        "k": tlp.get_act_patch_attn_head_k_all_pos,
        "v": tlp.get_act_patch_attn_head_v_all_pos,
        "z": tlp.get_act_patch_attn_head_out_all_pos,
    }[kind]
    cache = ActivationCache({hook_name(kind, l): post_ckpt.activation(kind, l) for l in range(N_LAYERS)}, model)
    with torch.no_grad():
        base = answer_probability(model(batch.tokens)[torch.arange(BATCH), batch.answer_pos], batch).mean()

        def metric(logits):
            return answer_probability(logits[torch.arange(BATCH), batch.answer_pos], batch).mean() - base

        return fn(model, batch.tokens, cache, metric)


@pytest.mark.parametrize("kind", ["pattern", "q", "k", "v", "z"])
def test_head_activation_targets_equal_transformer_lens(models, kind):
    name, pre, _, batch, post, _, _ = models
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # the layer-skip path, not its fallback
        fast = per_head_delta(pre, post, batch, kind)
    reference = tl_all_pos(pre, batch, post, kind)
    assert fast.abs().max() > 1e-3, f"{name} {kind}: patches too weak to test anything"
    assert torch.allclose(fast, reference, atol=1e-5, rtol=0), (fast - reference).abs().max()
    ours = per_head_delta(pre, post, batch, kind, method="reference", heads=[(0, 1), (N_LAYERS - 1, 3)])
    assert torch.allclose(ours[[0, N_LAYERS - 1], [1, 3]], reference[[0, N_LAYERS - 1], [1, 3]], atol=1e-5, rtol=0)


def test_pattern_at_one_destination_equals_transformer_lens(models):
    from transformer_lens import ActivationCache
    from transformer_lens.patching import get_act_patch_attn_head_pattern_by_pos

    from interp.patching.targets import hook_name

    _, pre, _, batch, post, _, _ = models
    heads = [(l, h) for l in range(N_LAYERS) for h in range(N_HEADS)]
    values = patch_values(pre, post, batch, [pattern([hd], query_pos=-1) for hd in heads])
    fast = values.mean(1) - metric_values(pre, batch).mean()
    cache = ActivationCache({hook_name("pattern", l): post.activation("pattern", l) for l in range(N_LAYERS)}, pre)
    base = metric_values(pre, batch).mean()
    with torch.no_grad():
        tl = get_act_patch_attn_head_pattern_by_pos(
            pre,
            batch.tokens,
            cache,
            lambda logits: answer_probability(logits[torch.arange(BATCH), batch.answer_pos], batch).mean() - base,
        )
    assert torch.allclose(fast.reshape(N_LAYERS, N_HEADS), tl[:, :, POS - 1], atol=1e-5, rtol=0)


def test_mlp_output_equals_transformer_lens_generic_patch(models):
    _, pre, _, batch, post, _, _ = models
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        fast = patch_values(pre, post, batch, [mlp_output([l]) for l in range(N_LAYERS)])
    tl = tl_mlp_outputs(pre, batch, post)
    assert (fast - metric_values(pre, batch)).abs().max() > 1e-3
    assert torch.allclose(fast, tl, atol=1e-5, rtol=0)


def test_joint_sets_fast_equal_reference(models):
    _, pre, _, batch, post, _, _ = models
    targets = [
        pattern([(0, 1), (2, 3)]),
        head_output([(1, 0), (0, 2), (2, 1)]),
        Target("q", ((0, 0), (0, 3), (1, 2))),
        Target("v", ((1, 1), (2, 2))),
        pattern(None),
        head_output(None),
        mlp_output(None),
        Target("k", ((2, 0),)),
        pattern([(1, 2), (2, 0)], query_pos=-1),
        qk_weights([(0, 1), (0, 2)]),
        ov_weights([(1, 3)]),
        ov_weights([(0, h) for h in range(N_HEADS)]),
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        fast = patch_values(pre, post, batch, targets)
    reference = patch_values(pre, post, batch, targets, method="reference")
    assert torch.allclose(fast, reference, atol=1e-5, rtol=0), (fast - reference).abs().max(dim=1)


def test_metrics_fast_equal_reference(models):
    _, pre, _, batch, post, _, _ = models
    targets = [pattern([(1, 1)]), head_output([(0, 2)]), qk_weights([(2, 3)])]
    for metric in ("logprob", "logit-diff"):
        fast = patch_values(pre, post, batch, targets, metric=metric)
        reference = patch_values(pre, post, batch, targets, metric=metric, method="reference")
        assert torch.allclose(fast, reference, atol=1e-4, rtol=1e-5), (metric, (fast - reference).abs().max())


def test_path_fast_equals_reference(models):
    _, pre, _, batch, post, _, _ = models
    targets = [path((0, 1), (1, 2), "q"), path((0, 3), (2, 0), "k"), path((1, 0), (2, 2), "v")]
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        fast = patch_values(pre, post, batch, targets)
    reference = patch_values(pre, post, batch, targets, method="reference")
    assert (fast - metric_values(pre, batch)).abs().max() > 1e-4
    assert torch.allclose(fast, reference, atol=1e-5, rtol=0)
    # TransformerLens's get_act_patch_direct_path refuses both bridges here (GPT-NeoX: parallel
    # attention and MLP; native: no pre-Q/K/V fork), so the reference is our own two forwards.


def _swapped_hf(pre_state, post_state, swap) -> torch.nn.Module:
    """A fresh pre HF model with parameters from post, chosen by ``swap(name, pre, post)``."""
    model = neox_hf(0)
    model.load_state_dict(pre_state)
    with torch.no_grad():
        for name, param in model.named_parameters():
            swap(name, param, post_state[name])
    return model


def _heads_of_fused(param, post, heads, parts):
    """GPT-NeoX's fused query_key_value, [head, (q k v), d_head, ...]: copy ``parts`` of ``heads``."""
    shape = (N_HEADS, 3, D_HEAD) + tuple(param.shape[1:])
    view, post_view = param.view(shape), post.view(shape)
    for head in heads:
        for part in parts:
            view[head, part] = post_view[head, part]


def _weight_cases():
    layer = 1

    def qk_head(name, p, q):
        if f"layers.{layer}.attention.query_key_value" in name:
            _heads_of_fused(p, q, [2], [0, 1])

    def ov_head(name, p, q):
        if f"layers.{layer}.attention.query_key_value" in name:
            _heads_of_fused(p, q, [2], [2])
        if name == f"gpt_neox.layers.{layer}.attention.dense.weight":
            p[:, 2 * D_HEAD : 3 * D_HEAD] = q[:, 2 * D_HEAD : 3 * D_HEAD]

    def ov_all(name, p, q):
        if "attention.query_key_value" in name:
            _heads_of_fused(p, q, range(N_HEADS), [2])
        if "attention.dense" in name:
            p.copy_(q)

    def prefix(*prefixes):
        return lambda name, p, q: p.copy_(q) if name.startswith(prefixes) else None

    return [
        (qk_weights([(layer, 2)]), qk_head),
        (ov_weights([(layer, 2)]), ov_head),
        (ov_weights(None), ov_all),
        (mlp_weights([0]), prefix("gpt_neox.layers.0.mlp")),
        (block_weights([2]), prefix("gpt_neox.layers.2.")),
        (embedding(), prefix("gpt_neox.embed_in")),
        (unembedding(), prefix("lm_head")),
    ]


def test_weight_targets_equal_a_model_built_with_the_swapped_weights(models, tmp_path):
    name, pre, _, batch, post, hf_pre, hf_post = models
    if name != "neox":  # the independent build goes through Hugging Face's fused GPT-NeoX layout
        assert hf_pre is None
        return
    cases = _weight_cases()
    fast = patch_values(pre, post, batch, [t for t, _ in cases])
    reference = patch_values(pre, post, batch, [t for t, _ in cases], method="reference")
    base = metric_values(pre, batch)
    for i, (target, swap) in enumerate(cases):
        built = boot(_swapped_hf(hf_pre, hf_post, swap), tmp_path / f"case{i}")
        expected = metric_values(built, batch)
        assert (expected - base).abs().max() > 1e-4, f"{target.label()}: swap changes nothing"
        assert torch.allclose(reference[i], expected, atol=1e-5, rtol=0), target.label()
        assert torch.allclose(fast[i], expected, atol=1e-5, rtol=0), target.label()


def test_patching_a_checkpoint_into_itself_changes_nothing(models):
    """Calibration (ARENA style): post = pre gives the pre metric for every target; the captured
    post metric equals the post model's own forward."""
    _, pre, post_model, batch, post, _, _ = models
    itself = capture_post(pre, batch)
    targets = [
        pattern(),
        Target("q"),
        Target("k"),
        Target("v"),
        head_output(),
        qk_weights([(1, 1)]),
        ov_weights([(2, 0)]),
        mlp_output(None),
        path((0, 1), (2, 3), "k"),
        block_weights(None),
        embedding(),
        unembedding(),
    ]
    values = patch_values(pre, itself, batch, targets)
    assert torch.allclose(values, metric_values(pre, batch)[None].expand_as(values), atol=1e-6, rtol=0)
    assert torch.allclose(post.values(batch), metric_values(post_model, batch), atol=1e-6, rtol=0)


def test_logit_diff_is_answer_minus_best_distractor():
    logits = torch.tensor([[0.0, 3.0, 1.0, 2.0], [5.0, 0.0, 4.0, -1.0]])
    batch = TaskBatch(
        torch.zeros(2, 3, dtype=torch.long),
        torch.tensor([1, 0]),
        torch.tensor([2, 2]),
        distractors=torch.tensor([[2, 3], [2, 3]]),
    )
    assert torch.allclose(logit_diff(logits, batch), torch.tensor([1.0, 1.0]))
    with pytest.raises(ValueError, match="distractor"):
        logit_diff(logits, TaskBatch(batch.tokens, batch.answers, batch.answer_pos))


def test_bad_targets_raise_one_line_errors(models):
    _, pre, _, batch, post, _, _ = models
    cases = [
        (lambda: Target("attention"), "target kind"),
        (lambda: pattern([(N_LAYERS, 0)]).resolved_heads(N_LAYERS, N_HEADS), "out of range"),
        (lambda: patch_values(pre, post, batch, [pattern([(0, N_HEADS)])]), "out of range"),
        (lambda: patch_values(pre, post, batch, [pattern([(0, 0)], query_pos=POS)]), "query_pos"),
        (lambda: Target("mlp", heads=((0, 0),)), "per layer"),
        (lambda: path((1, 0), (0, 1)), "later layer"),
        (lambda: patch_values(pre, post, batch, [pattern()], metric="accuracy"), "metric="),
        (lambda: patch_values(pre, post, batch, [pattern()], method="slow"), "method must be"),
    ]
    for call, message in cases:
        with pytest.raises(ValueError, match=message) as err:
            call()
        assert "\n" not in str(err.value)
