"""Pre-pretraining generators (k-Shuffle Dyck, neural cellular automata) and the two-stage run."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
import torch
import torch.nn.functional as F

from synthetic.models import ARCHITECTURES, ModelConfig, build_model
from synthetic.pretraining import (
    PretrainSpec,
    compare_pretraining,
    dyck_bayes_loss,
    dyck_sequences,
    gzip_ratio,
    is_shuffle_dyck_prefix,
    nca_sequences,
    nca_vocab,
    pretrain_model,
    pretrain_then_train,
    pretrained_state,
    vocab_dependent_keys,
)
from synthetic.training import TrainConfig

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_dyck_strings_are_balanced_shuffles_of_k_types():
    k, length = 5, 24
    tokens = dyck_sequences(k, 300, length, seed=3)
    assert tokens.shape == (300, length) and tokens.min() >= 0 and tokens.max() < 2 * k
    assert all(is_shuffle_dyck_prefix(row, k) for row in tokens)
    depth = (F.one_hot(tokens // 2, k) * torch.where(tokens % 2 == 1, -1, 1)[..., None]).sum(dim=1)
    assert (depth == 0).all()  # even length: every type closes
    # interleaving really happens: some string closes a type other than the last one opened
    assert any(_closes_out_of_order(row) for row in tokens)
    assert torch.equal(tokens, dyck_sequences(k, 300, length, seed=3))
    assert not torch.equal(tokens, dyck_sequences(k, 300, length, seed=4))


def _closes_out_of_order(row: torch.Tensor) -> bool:
    stack = []
    for tok in row.tolist():
        if tok % 2 == 0:
            stack.append(tok // 2)
        elif stack.pop() != tok // 2:
            return True
    return False


def test_dyck_validity_check_rejects_a_bad_close():
    assert not is_shuffle_dyck_prefix(torch.tensor([0, 3]), k=2)  # closes type 1, never opened
    assert is_shuffle_dyck_prefix(torch.tensor([0, 2, 1, 3]), k=2)  # ( [ ) ]: fine in the shuffle


def test_dyck_opening_rate_follows_p_open():
    length = 64
    for p_open in (0.3, 0.51):
        tokens = dyck_sequences(3, 1000, length, seed=0, p_open=p_open)
        is_open = (tokens % 2 == 0).long()
        total = torch.cumsum(2 * is_open - 1, dim=1) - (2 * is_open - 1)  # open brackets before t
        free = (total > 0) & (total < length - torch.arange(length))  # neither forced move
        assert abs(is_open[free].float().mean().item() - p_open) < 0.01
    with pytest.raises(ValueError, match="p_open"):
        dyck_sequences(3, 2, 8, seed=0, p_open=1.0)


def test_nca_tokens_follow_one_deterministic_rule_per_sequence():
    grid, n_states = 4, 3
    frame = grid * grid + 1
    tokens = nca_sequences(64, 5 * frame, seed=1, grid_size=grid, n_states=n_states)
    delimiter = nca_vocab(n_states) - 1
    assert tokens.shape == (64, 5 * frame) and tokens.max() == delimiter
    frames = tokens.reshape(64, 5, frame)
    assert (frames[:, :, 0] == delimiter).all() and (frames[:, :, 1:] < delimiter).all()
    cells = frames[:, :, 1:].reshape(64, 5, grid, grid)
    # The rule is a function of the periodic 3×3 neighbourhood: no neighbourhood maps to two states.
    for seq in cells:
        seen: dict[tuple, int] = {}
        for t in range(4):
            padded = F.pad(seq[t][None, None].float(), (1, 1, 1, 1), mode="circular")[0, 0].long()
            for i in range(grid):
                for j in range(grid):
                    key = tuple(padded[i : i + 3, j : j + 3].flatten().tolist())
                    assert seen.setdefault(key, int(seq[t + 1, i, j])) == int(seq[t + 1, i, j])
    # different sequences have different rules: their first transitions differ from a shared map
    assert len({tuple(c[1].flatten().tolist()) for c in cells}) > 32


def test_nca_patches_and_gzip_filter():
    tokens = nca_sequences(4, 40, seed=0, grid_size=4, n_states=2, patch=2)
    assert tokens.max() == nca_vocab(2, 2) - 1 == 16
    assert (tokens.reshape(4, 8, 5)[:, :, 0] == 16).all()  # 4 patch tokens + delimiter per frame
    filtered = nca_sequences(8, 64, seed=0, min_gzip_ratio=0.5)
    assert all(gzip_ratio(row) >= 0.5 for row in filtered)
    with pytest.raises(ValueError, match="min_gzip_ratio"):
        nca_sequences(1, 64, seed=0, min_gzip_ratio=2.0)


def test_dyck_bayes_loss_is_the_generator_entropy():
    k = 2
    tokens = dyck_sequences(k, 4000, 2, seed=0, p_open=0.51)
    # length 2: the first token is an open (uniform over k), the second is forced: its close.
    assert dyck_bayes_loss(tokens, k) == pytest.approx(0.0, abs=1e-12)
    tokens = dyck_sequences(k, 20000, 4, seed=0, p_open=0.51)
    # Position 1 (one open, 3 left): open either type 0.255 each, close 0.49. Position 2: after
    # "(( same type" the close is forced (0 nats); after "( [" either may close (ln 2); after
    # "( )" either type opens (ln 2). Position 3 is always forced.
    h1 = -(2 * 0.255 * math.log(0.255) + 0.49 * math.log(0.49))
    h2 = (0.255 + 0.49) * math.log(2)
    assert dyck_bayes_loss(tokens, k) == pytest.approx((h1 + h2) / 3, rel=0.02)


def test_pretraining_on_dyck_approaches_the_generator_entropy():
    k, n_ctx = 4, 16
    spec = PretrainSpec(source="dyck", dyck_k=k)
    model = build_model(ModelConfig(d_vocab=2 * k, n_ctx=n_ctx, n_heads=4, d_head=8))
    losses = pretrain_model(model, spec, steps=150, batch_size=32, n_ctx=n_ctx, lr=1e-2)
    floor = dyck_bayes_loss(dyck_sequences(k, 4000, n_ctx, seed=99), k)
    final = sum(losses[-10:]) / 10
    assert losses[0] > math.log(2 * k) - 0.1
    assert floor - 0.05 < final < floor + 0.5 * (math.log(2 * k) - floor), (floor, final)


def _tiny_train_config(**overrides) -> TrainConfig:
    fields = dict(
        task="linear-map",
        S=4,
        s=1,
        n_heads=4,
        d_head=8,
        steps=60,
        eval_every=10,
        tokens_per_step=256,
        eval_tokens=512,
        warmup_steps=5,
        lr=1e-2,
        seed=0,
    )
    fields.update(overrides)
    return TrainConfig(**fields)


def test_vocab_dependent_keys_are_the_embedding_and_unembedding():
    keys = vocab_dependent_keys(ModelConfig(d_vocab=2, n_ctx=8, arch="mlp-mixer"))
    assert keys == {"embed.weight", "unembed.weight", "unembed.bias"}


@pytest.mark.parametrize("arch", ["transformer", "mlp-mixer"])
def test_pretrained_weights_reach_the_task_model_except_the_vocabulary(arch):
    config = _tiny_train_config(arch=arch, steps=1, lr=1e-12, warmup_steps=0)
    state, losses = pretrained_state(config, PretrainSpec(source="nca"), 5, lr=1e-2)
    assert len(losses) == 5 and state
    result = pretrain_then_train(config, "nca", 5, pretrain_lr=1e-2)
    trained = result.model.state_dict()
    scratch = build_model(config.model_config(result.task)).state_dict()
    for key, value in state.items():
        torch.testing.assert_close(trained[key].cpu(), value, atol=1e-6, rtol=0)
    moved = [k for k in state if not torch.allclose(scratch[k], state[k])]
    assert moved  # pre-pretraining changed weights that were then transferred
    for key in vocab_dependent_keys(config.model_config(result.task)):
        torch.testing.assert_close(trained[key].cpu(), scratch[key], atol=1e-6, rtol=0)
    assert result.summary["pretrain"] == "nca" and result.summary["pretrain_steps"] == 5
    assert ARCHITECTURES[arch].__module__.startswith("synthetic.models")  # registry restored


def test_pretrain_then_train_writes_its_summary(tmp_path):
    result = pretrain_then_train(_tiny_train_config(steps=20), "dyck", 10, out_dir=tmp_path)
    saved = json.loads((tmp_path / "summary.json").read_text())
    assert saved["pretrain"] == "dyck" and saved["pretrain_vocab"] == 128
    assert saved["pretrain_final_loss"] == pytest.approx(result.summary["pretrain_final_loss"])


@pytest.mark.slow
def test_compare_pretraining_reports_both_arms_per_seed():
    config = _tiny_train_config()
    table = compare_pretraining(config, "dyck", 20, seeds=[0, 1])
    assert list(table["seed"]) == [0, 1]
    for row in table.itertuples():
        assert row.scratch_steps is not None and row.pretrained_steps is not None  # both emerge here
        assert row.delta_steps == row.pretrained_steps - row.scratch_steps
    # the scratch arm is exactly a plain training run
    from synthetic.training import train

    plain = train(dataclasses.replace(config, seed=1), progress=False).summary
    assert table.loc[1, "scratch_steps"] == plain["steps_to_threshold"]


def test_bad_pretraining_input():
    with pytest.raises(ValueError, match="pretrain='lm'"):
        PretrainSpec(source="lm")
    with pytest.raises(ValueError, match="pretrain_steps"):
        pretrain_then_train(_tiny_train_config(), "dyck", -1)
    with pytest.raises(ValueError, match="grid_size"):
        nca_sequences(1, 8, seed=0, grid_size=5, patch=2)
