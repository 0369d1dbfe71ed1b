"""Ideal attention patterns as a patch source (interp.patching.ideal): the named rules on known
tokens, the one-line errors of a bad callable, and fast path == reference path == a plain
``run_with_hooks`` that writes the ideal pattern into ``hook_pattern``, to 1e-5, on a GPT-NeoX
bridge and a native TransformerLens transformer, for one head, joint sets across layers and every
head."""

from __future__ import annotations

import os
import warnings

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from interp.core.metrics import answer_probability
from interp.patching import IdealPatterns, ideal_pattern, patch_values, pattern, per_head_delta
from interp.patching._forward import answer_rows
from tests.interp.patching.test_patching_targets import N_HEADS, N_LAYERS, boot, make_batch, native, neox_hf

TOKENS = torch.tensor([[5, 7, 9, 5, 7, 3, 5]])


def test_named_patterns_on_known_tokens():
    prev = ideal_pattern("previous_token", TOKENS)[0]
    assert prev.argmax(-1).tolist() == [0, 0, 1, 2, 3, 4, 5]
    ind = ideal_pattern("induction", TOKENS)[0]
    # pos 3 (5): earlier 5 at 0 -> key 1; pos 4 (7): earlier 7 at 1 -> key 2; pos 6 (5): latest 5 at 3 -> key 4
    assert ind.argmax(-1).tolist() == [0, 0, 0, 1, 2, 0, 4]
    dup = ideal_pattern("duplicate_token", TOKENS)[0]
    assert dup[6].tolist() == pytest.approx([0.5, 0, 0, 0.5, 0, 0, 0])
    assert dup[3, 0] == 1.0 and dup[2, 0] == 1.0  # no earlier 9: the first token
    assert ideal_pattern("first_token", TOKENS)[0][:, 0].tolist() == [1.0] * 7
    uni = ideal_pattern("uniform", TOKENS)[0]
    assert uni[3].tolist() == pytest.approx([0.25] * 4 + [0.0] * 3)
    for name in ("previous_token", "induction", "duplicate_token", "first_token", "uniform"):
        p = ideal_pattern(name, TOKENS)
        assert torch.allclose(p.sum(-1), torch.ones(1, 7)) and float(p.triu(1).abs().max()) == 0.0


@pytest.mark.parametrize(
    "fn, message",
    [
        (lambda t: torch.ones(t.shape[0], t.shape[1], t.shape[1]) / t.shape[1], "not causal"),
        (lambda t: torch.eye(t.shape[1]).expand(t.shape[0], -1, -1) * 0.5, "summing to 0.5"),
        (lambda t: torch.eye(3)[None], "must be a [batch, pos, pos]"),
        (lambda t: -torch.eye(t.shape[1]).expand(t.shape[0], -1, -1), "negative or non-finite"),
    ],
)
def test_bad_callable_is_one_line_error(fn, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[")) as err:
        ideal_pattern(fn, TOKENS)
    assert "\n" not in str(err.value)


def test_unknown_name_lists_valid():
    with pytest.raises(ValueError, match="'inductoin' is unknown; valid: previous_token, induction"):
        IdealPatterns.of("inductoin", [(0, 0)])


@pytest.fixture(scope="module", params=["neox", "native"])
def model_and_batch(request, tmp_path_factory):
    torch.set_num_threads(1)
    if request.param == "neox":
        model = boot(neox_hf(0), tmp_path_factory.mktemp("ideal"))
    else:
        model = native(0)
    gen = torch.Generator().manual_seed(3)
    batch = make_batch(model)
    # repeats inside each prompt, so the induction and duplicate patterns are not all first-token
    tokens = torch.randint(0, 6, batch.tokens.shape, generator=gen)
    return request.param, model, type(batch)(tokens, batch.answers, batch.answer_pos, distractors=batch.distractors)


def hooked_reference(model, batch, source: IdealPatterns) -> torch.Tensor:
    """p(answer) per prompt with hook_pattern of the chosen heads overwritten by the ideal pattern."""
    hooks = []
    for (layer, head), rule in source.heads.items():
        ideal = ideal_pattern(rule, batch.tokens)

        def hook(act, hook, head=head, ideal=ideal):
            act = act.clone()
            act[:, head] = ideal.to(act.dtype)
            return act

        hooks.append((f"blocks.{layer}.attn.hook_pattern", hook))
    with torch.no_grad():
        logits = model.run_with_hooks(batch.tokens, fwd_hooks=hooks)
    return answer_probability(answer_rows(logits, batch), batch)


SOURCES = [
    IdealPatterns.of("previous_token", [(0, 1)]),
    IdealPatterns.of("induction", [(1, 2)]),
    IdealPatterns({(0, 2): "previous_token", (1, 0): "induction", (2, 3): "duplicate_token"}),
    IdealPatterns.of("first_token", [(l, h) for l in range(N_LAYERS) for h in range(N_HEADS)]),
    IdealPatterns({(1, 1): lambda t: ideal_pattern("uniform", t) * 0.5 + ideal_pattern("previous_token", t) * 0.5}),
]


@pytest.mark.parametrize("source", SOURCES, ids=lambda s: s.label()[:40])
def test_fast_equals_reference_equals_hooks(model_and_batch, source):
    name, model, batch = model_and_batch
    target = pattern(sorted(source.heads))
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # the layer-skip path itself, no fallback
        fast = patch_values(model, source, batch, [target], method="fast")[0]
    ref = patch_values(model, source, batch, [target], method="reference")[0]
    hooked = hooked_reference(model, batch, source)
    assert torch.allclose(fast, ref, atol=1e-5), (fast - ref).abs().max()
    assert torch.allclose(ref, hooked, atol=1e-5), (ref - hooked).abs().max()
    plain = patch_values(model, IdealPatterns.of("uniform", [(0, 0)]), batch, [pattern([(0, 0)])])[0]
    assert float((fast - plain).abs().max()) > 1e-3  # the patterns matter: not a no-op


def test_per_head_delta_defaults_to_chosen_heads(model_and_batch):
    name, model, batch = model_and_batch
    source = IdealPatterns({(0, 1): "previous_token", (1, 2): "induction"})
    delta = per_head_delta(model, source, batch)
    assert torch.isnan(delta).sum() == N_LAYERS * N_HEADS - 2
    each = [hooked_reference(model, batch, IdealPatterns({h: r})) for h, r in source.heads.items()]
    from interp.patching import metric_values

    base = metric_values(model, batch)
    assert float(delta[0, 1]) == pytest.approx(float((each[0] - base).mean()), abs=1e-5)
    assert float(delta[1, 2]) == pytest.approx(float((each[1] - base).mean()), abs=1e-5)


def test_targets_outside_the_chosen_heads_refused(model_and_batch):
    name, model, batch = model_and_batch
    source = IdealPatterns.of("induction", [(1, 0)])
    with pytest.raises(ValueError, match=r"patches heads \[\(1, 1\)\] that have no ideal pattern"):
        patch_values(model, source, batch, [pattern([(1, 0), (1, 1)])])
    from interp.patching import head_output

    with pytest.raises(ValueError, match="'pattern' targets only"):
        patch_values(model, source, batch, [head_output([(1, 0)])])
