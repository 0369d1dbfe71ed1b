"""Head scores: the field's definitions on hand-made patterns and weights, and on a bridge."""

from __future__ import annotations

import pytest
import torch

from interp.scores import (
    copying_score_from_weights,
    head_scores,
    prefix_matching_score,
    previous_token_score,
    repeated_random_tokens,
    steps_around,
)

PERIOD, POS = 10, 20


def _causal_uniform() -> torch.Tensor:
    mask = torch.tril(torch.ones(POS, POS))
    return (mask / mask.sum(-1, keepdim=True))[None, None]


def _first_token() -> torch.Tensor:
    pattern = torch.zeros(1, 1, POS, POS)
    pattern[..., 0] = 1.0
    return pattern


def _induction() -> torch.Tensor:
    pattern = _causal_uniform().clone()
    for i in range(PERIOD, POS):
        pattern[0, 0, i] = 0.0
        pattern[0, 0, i, i - PERIOD + 1] = 1.0
    return pattern


def _previous() -> torch.Tensor:
    pattern = torch.zeros(1, 1, POS, POS)
    pattern[0, 0, 0, 0] = 1.0
    for i in range(1, POS):
        pattern[0, 0, i, i - 1] = 1.0
    return pattern


def test_prefix_matching_separates_induction_from_uniform_and_first_token():
    uniform = float(prefix_matching_score(_causal_uniform(), PERIOD))
    # a uniform causal row i puts 1/(i+1) on every key: the mean over i = 10..19 of 1/(i+1)
    assert uniform == pytest.approx(sum(1 / (i + 1) for i in range(PERIOD, POS)) / PERIOD, abs=1e-6)
    assert uniform < 0.1
    assert float(prefix_matching_score(_first_token(), PERIOD)) == 0.0
    assert float(prefix_matching_score(_induction(), PERIOD)) == pytest.approx(1.0, abs=1e-6)
    assert float(prefix_matching_score(_previous(), PERIOD)) == 0.0
    with pytest.raises(ValueError, match="period"):
        prefix_matching_score(_induction(), POS)


def test_previous_token_score():
    assert float(previous_token_score(_previous())) == pytest.approx(1.0)
    assert float(previous_token_score(_first_token())) == pytest.approx(1 / (POS - 1))  # only row 1 -> key 0
    assert float(previous_token_score(_induction())) < 0.2


def test_copying_score_signs():
    gen = torch.Generator().manual_seed(0)
    d_vocab, d_model = 30, 8
    W_E = torch.randn(d_vocab, d_model, generator=gen)
    W_U = W_E.T.clone()  # tied: W_E W_U is positive semi-definite
    W_V = torch.eye(d_model)[None].repeat(2, 1, 1)
    W_O = torch.stack([2 * torch.eye(d_model), -torch.eye(d_model)])
    score = copying_score_from_weights(W_E, W_V, W_O, W_U)
    assert score[0] == pytest.approx(1.0, abs=1e-5) and score[1] == pytest.approx(-1.0, abs=1e-5)
    rotation = torch.linalg.qr(torch.randn(d_model, d_model, generator=gen))[0]
    assert abs(float(copying_score_from_weights(W_E, W_V[:1], rotation[None], W_U)[0])) < 1.0
    with pytest.raises(ValueError, match="chain"):
        copying_score_from_weights(W_E, W_V, W_O, W_U[:3])


def test_head_scores_on_a_bridge_find_a_planted_previous_token_head():
    """A native transformer whose layer-0 head 0 attends to the previous token by construction
    (patterns overridden by a hook): the score reads it back; every score has [layer, head]."""
    from tests.interp.patching.test_patching import N_HEADS, N_LAYERS, native_bridge

    model = native_bridge()
    tokens = repeated_random_tokens(range(100), n_prompts=3, period=PERIOD)
    assert tokens.shape == (3, 2 * PERIOD) and torch.equal(tokens[:, :PERIOD], tokens[:, PERIOD:])

    def plant(pattern, hook):
        pattern = pattern.clone()
        pattern[:, 0] = _previous()[0, 0]
        return pattern

    with model.hooks(fwd_hooks=[("blocks.0.attn.hook_pattern", plant)]):
        scores = head_scores(model, tokens, PERIOD)
    assert set(scores) == {"previous_token", "prefix_matching", "copying"}
    for values in scores.values():
        assert values.shape == (N_LAYERS, N_HEADS)
    assert float(scores["previous_token"][0, 0]) == pytest.approx(1.0, abs=1e-6)
    assert ((scores["copying"] >= -1 - 1e-6) & (scores["copying"] <= 1 + 1e-6)).all()


def test_steps_around():
    steps = [0, 1, 2, 4, 100, 200, 300, 400, 500, 600]
    assert steps_around(steps, 300, 400, n_before=2, n_after=1) == [100, 200, 300, 400, 500]
