"""train_ensemble (synthetic/ensemble.py) equals one-at-a-time train() to float rounding."""

from __future__ import annotations

import json

import pytest

from synthetic.ensemble import check_same_shape, train_ensemble
from synthetic.state import drop_state
from synthetic.training import TrainConfig, train

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


@pytest.mark.slow
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


@pytest.mark.slow
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


class _Stop(Exception):
    pass


def _stop_at(step: int):
    def on_eval(rows):
        if rows[0]["step"] == step:
            raise _Stop

    return on_eval


@pytest.mark.slow
def test_an_ensemble_stopped_half_way_continues_bit_for_bit_from_its_state(tmp_path, one_torch_thread):
    import torch

    shape = {"task": "linear-map", "S": 8, "steps": 60, "tokens_per_step": 256, "eval_every": 10, "eval_tokens": 512}
    configs = [TrainConfig(**shape, s=s, seed=seed) for s, seed in ((1, 0), (2, 1), (3, 2))]
    whole = train_ensemble(configs)
    with pytest.raises(_Stop):
        train_ensemble(configs, state_dir=tmp_path, state_every=20, on_eval=_stop_at(50))
    assert json.loads((tmp_path / "state" / "trainer_state.json").read_text())["step"] == 40
    other = [*configs[:2], TrainConfig(**shape, s=4, seed=2)]
    with pytest.raises(ValueError, match="holds the state of other configs"):
        train_ensemble(other, state_dir=tmp_path, state_every=20)
    resumed = train_ensemble(configs, state_dir=tmp_path, state_every=20)
    for a, b in zip(resumed, whole, strict=True):
        assert a.metrics.drop(columns="elapsed_s").equals(b.metrics.drop(columns="elapsed_s"))
        assert all(torch.equal(x, y) for x, y in zip(a.model.state_dict().values(), b.model.state_dict().values()))
    assert (tmp_path / "state").is_dir()  # kept until the caller knows the result is safe ...
    drop_state(tmp_path)
    assert not tmp_path.exists()  # ... and removed whole
    with pytest.raises(ValueError, match="state_every=15 must be a multiple of eval_every=10"):
        train_ensemble(configs, state_dir=tmp_path, state_every=15)


@pytest.mark.slow
def test_a_single_run_stopped_half_way_continues_bit_for_bit_from_its_state(tmp_path, one_torch_thread):
    import torch

    config = TrainConfig(task="linear-map", S=8, s=2, steps=60, tokens_per_step=256, eval_every=10, eval_tokens=512)
    whole = train(config, progress=False)
    with pytest.raises(_Stop):
        train(config, progress=False, state_dir=tmp_path, state_every=20, on_eval=lambda r: _stop_at(30)([r]))
    resumed = train(config, progress=False, state_dir=tmp_path, state_every=20)
    assert resumed.metrics.drop(columns="elapsed_s").equals(whole.metrics.drop(columns="elapsed_s"))
    assert all(
        torch.equal(x, y) for x, y in zip(resumed.model.state_dict().values(), whole.model.state_dict().values())
    )
    assert resumed.summary["final_loss"] == whole.summary["final_loss"]
