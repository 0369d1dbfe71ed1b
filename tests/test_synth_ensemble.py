"""train_ensemble (synthetic/ensemble.py) equals one-at-a-time train() to float rounding."""

from __future__ import annotations

import json

import pytest

from synthetic.ensemble import check_same_shape
from synthetic.training import TrainConfig, train, train_ensemble

# Relative tolerance for weights after 50 AdamW steps: batched matmuls sum in another order
# (measured ≤ 2e-6 here); attn.k.bias is left out, its gradient is zero in exact arithmetic
# (softmax ignores a per-query constant), so Adam turns rounding noise into ±lr steps and the
# bias is noise in any two runs alike; the model's function does not depend on it.
WEIGHT_RTOL = 1e-4
LOSS_ATOL = 1e-5


def _assert_same_run(a, b):
    assert list(a.metrics.columns) == list(b.metrics.columns)
    assert a.metrics["step"].tolist() == b.metrics["step"].tolist()
    cols = [c for c in b.metrics.columns if c.startswith(("loss", "entropy", "alignment", "train_loss"))]
    diff = (a.metrics[cols].iloc[1:] - b.metrics[cols].iloc[1:]).abs().max().max()
    assert diff < LOSS_ATOL, diff
    assert set(a.summary) == set(b.summary)
    sa, sb = a.model.state_dict(), b.model.state_dict()
    for key, ref in sb.items():
        if ref.is_floating_point() and not key.endswith("attn.k.bias"):
            rel = ((sa[key] - ref).abs().max() / ref.abs().max().clamp_min(1e-12)).item()
            assert rel < WEIGHT_RTOL, (key, rel)


def test_ensemble_of_three_equals_three_single_runs(tmp_path):
    kw = dict(steps=50, eval_every=25, eval_tokens=512, device="cpu")
    configs = [TrainConfig(seed=i, data_seed=10 + i, s=2 + i, **kw) for i in range(3)]
    out_dirs = [tmp_path / f"m{i}" for i in range(3)]
    ensemble = train_ensemble(configs, out_dirs=out_dirs)
    for config, member, out in zip(configs, ensemble, out_dirs):
        single = train(config, progress=False)
        _assert_same_run(member, single)
        assert member.metrics["loss"].iloc[-1] < member.metrics["loss"].iloc[0]  # it trained
        saved = json.loads((out / "summary.json").read_text())
        assert saved["config"]["seed"] == config.seed and (out / "metrics.parquet").is_file()


def test_ensemble_with_mlp_two_layers_on_cellular_automata():
    # the masked loss (CA: only transition tokens), the MLP and a second layer
    kw = dict(
        task="cellular-automata",
        S=8,
        n_layers=2,
        d_mlp=32,
        steps=20,
        eval_every=10,
        eval_tokens=256,
        device="cpu",
        tokens_per_step=512,
    )
    configs = [TrainConfig(seed=i, data_seed=i, **kw) for i in range(2)]
    for member, config in zip(train_ensemble(configs), configs):
        _assert_same_run(member, train(config, progress=False))


def test_shape_mismatch_names_the_field():
    with pytest.raises(ValueError, match=r"configs\[1\]\.n_heads=4 differs"):
        check_same_shape([TrainConfig(), TrainConfig(n_heads=4, seed=3)])
    with pytest.raises(ValueError, match="out_dirs has 1 entries for 2 configs"):
        train_ensemble([TrainConfig(), TrainConfig(seed=1)], out_dirs=["a"])


def test_unsupported_arch_trains_one_at_a_time():
    kw = dict(arch="mlp-mixer", steps=4, eval_every=2, eval_tokens=64, device="cpu", tokens_per_step=256)
    configs = [TrainConfig(seed=i, **kw) for i in range(2)]
    members = train_ensemble(configs)
    single = train(configs[1], progress=False)
    assert members[1].metrics["loss"].tolist() == single.metrics["loss"].tolist()
    assert members[0].metrics["loss"].tolist() != members[1].metrics["loss"].tolist()  # own seeds
