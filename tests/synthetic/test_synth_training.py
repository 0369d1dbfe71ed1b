"""Training loop and metrics on real short runs (linear map S = 4, s = 1 learns in ~200 steps)."""

import json
import math

import pandas as pd
import pytest
import torch
from torch import nn
from typer.testing import CliRunner

from synthetic.cli import app
from synthetic.datasets import LinearMapTask
from synthetic.metrics import (
    attention_entropy,
    default_threshold,
    loss_per_output,
    plateau_length,
    steps_to_threshold,
)
from synthetic.models import ARCHITECTURES, register_architecture
from synthetic.training import TrainConfig, load_checkpoint, train

torch.set_num_threads(1)

SMALL = dict(
    task="linear-map",
    S=4,
    s=1,
    n_heads=4,
    d_head=8,
    tokens_per_step=512,
    warmup_steps=20,
    eval_every=25,
    eval_tokens=2048,
    device="cpu",
)
FLOOR_S4 = 3 / 7 * math.log(2)  # (S−1)/(2S−1)·ln 2


@pytest.fixture(scope="module")
def plain_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("plain")
    config = TrainConfig(**SMALL, steps=300, checkpoint_every=150)
    return train(config, out_dir=out, progress=False), out


@pytest.fixture(scope="module")
def bias_run():
    return train(TrainConfig(**SMALL, steps=300, bias=3.0), progress=False)


def test_short_run_reaches_the_floor(plain_run):
    result, _ = plain_run
    s = result.summary
    assert s["floor"] == pytest.approx(FLOOR_S4, abs=1e-12)
    # Transition bits are deterministic; the first state's 3 predicted bits cost ln 2 each
    # (a constant learning rate leaves some jitter around 1/2 on those).
    assert s["final_loss_target"] < 0.02
    assert s["final_loss"] == pytest.approx(FLOOR_S4, abs=0.015)
    assert result.metrics["loss"].iloc[-4:].min() == pytest.approx(FLOOR_S4, abs=0.008)
    assert s["emerged"] and s["steps_to_threshold"] <= 300
    assert s["threshold"] == pytest.approx(FLOOR_S4 + 0.05 * (math.log(2) - FLOOR_S4))
    assert 0 < s["plateau_length"] < s["steps_to_threshold"]
    m = result.metrics
    assert m["step"].tolist() == list(range(0, 301, 25))
    # Every output bit of the second state is learned (the end of the staircase).
    assert all(m[f"loss_out_{i}"].iloc[-1] < 0.05 for i in range(4))
    assert m["loss"].iloc[0] > m["loss"].iloc[-1] + 0.3


def test_head_metrics_track_the_true_pattern(plain_run):
    m = plain_run[0].metrics
    heads = [f"L0H{h}" for h in range(4)]
    align = m[[f"alignment_{h}" for h in heads]]
    assert align.iloc[-1].max() > align.iloc[0].max() + 0.2
    best = align.iloc[-1].idxmax().replace("alignment_", "")
    assert m[f"entropy_{best}"].iloc[-1] < m[f"entropy_{best}"].iloc[0] - 0.1
    # Entropies are nats of a distribution over ≤ 8 keys.
    ent = m[[f"entropy_{h}" for h in heads]].to_numpy()
    assert (ent >= 0).all() and (ent <= math.log(8)).all()


def test_outputs_written_and_checkpoint_round_trip(plain_run):
    result, out = plain_run
    table = pd.read_parquet(out / "metrics.parquet")
    assert {"step", "loss", "loss_target", "alignment_L0H0"} <= set(table.columns)
    pd.testing.assert_frame_equal(table, result.metrics)
    summary = json.loads((out / "summary.json").read_text())
    for key in ("final_loss", "floor", "plateau_length", "steps_to_threshold", "emerged", "n_params", "wall_time_s"):
        assert key in summary
    # attention-only 1-layer transformer, d_model 32, d_vocab 2, n_ctx 8 (S = 4, one transition):
    # embedding + positions + [LN + Q, K, V, O with biases] + final LN + unembedding (no bias)
    d_model, d_vocab, n_ctx = 4 * 8, 2, 2 * 4
    expected = (
        d_vocab * d_model
        + n_ctx * d_model
        + (2 * d_model + 4 * (d_model * d_model + d_model))
        + 2 * d_model
        + d_model * d_vocab
    )
    assert summary["n_params"] == expected
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["step0", "step150", "step300"]
    assert not list((out / "checkpoints").rglob("*.pt"))  # safetensors and JSON, no pickle
    model, config, step = load_checkpoint(out / "checkpoints" / "step300")
    assert step == 300 and config == result.config
    tokens = LinearMapTask(S=4, s=1).sample(16, torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert torch.equal(model(tokens), result.model(tokens))


@pytest.mark.slow
def test_resume_continues_exactly(plain_run, tmp_path):
    result, out = plain_run
    resumed = train(result.config, out_dir=tmp_path, progress=False, resume_from=out / "checkpoints" / "step150")
    # the rows after step 150 and the final weights equal those of the uninterrupted run
    later = result.metrics[result.metrics["step"] > 150].reset_index(drop=True)
    pd.testing.assert_frame_equal(resumed.metrics.drop(columns="elapsed_s"), later.drop(columns="elapsed_s"))
    for name, value in result.model.state_dict().items():
        assert torch.equal(value, resumed.model.state_dict()[name]), name


def _head_metrics(result, beta: float = 0.0) -> tuple[list[float], list[float]]:
    """Each layer-0 head's (alignment, entropy) on the run's own evaluation set (data_seed 0 →
    generator seed 7, 2048 tokens = 256 sequences of 8), recomputed by hand with the attention
    bias at ``beta`` (``train`` removes its bias hook when it returns, so 0 is the plain model)."""
    from synthetic.interventions import AttentionBias
    from synthetic.metrics import attention_alignment

    task, name = result.task, "blocks.0.attn.hook_pattern"
    tokens = task.sample(256, torch.Generator().manual_seed(7))
    with torch.no_grad(), AttentionBias(result.model, task.pattern_mask, beta):
        _, cache = result.model.run_with_cache(tokens, names_filter=lambda n: n == name)
    pattern = cache[name]
    return (
        attention_alignment(pattern, task.pattern_mask, task.target_mask).tolist(),
        attention_entropy(pattern, task.target_mask).tolist(),
    )


def test_alignment_is_measured_with_the_bias_off(plain_run, bias_run):
    align_cols, entropy_cols = [f"alignment_L0H{h}" for h in range(4)], [f"entropy_L0H{h}" for h in range(4)]
    for result in (plain_run[0], bias_run):
        own_alignment, own_entropy = _head_metrics(result)
        last = result.metrics.iloc[-1]
        # recorded head metrics are the model's own: equal to a bias-off forward on the same tokens
        assert last[align_cols].tolist() == pytest.approx(own_alignment, abs=1e-5)
        assert last[entropy_cols].tolist() == pytest.approx(own_entropy, abs=1e-5)
        assert result.summary["final_max_alignment"] == pytest.approx(max(own_alignment), abs=1e-5)
    # the plain run learned the true pattern: its best head puts at least half its mass on the true keys
    assert max(_head_metrics(plain_run[0])[0]) > 0.5
    # the bias alone moves attention: with β = 3 in force the biased run's mean alignment exceeds
    # its own by > 0.2, so a biased measurement would have reported the bias, not the weights
    own, forced = _head_metrics(bias_run)[0], _head_metrics(bias_run, beta=3.0)[0]
    assert sum(forced) / 4 > sum(own) / 4 + 0.2
    assert bias_run.metrics[align_cols].iloc[-1].mean() < sum(forced) / 4 - 0.2
    # losses stay those of the trained objective (bias in force); loss_nobias is the plain model's
    assert (bias_run.metrics["beta"] == 3.0).all()
    assert bias_run.metrics["loss"].iloc[-1] < bias_run.metrics["loss_nobias"].iloc[-1]
    assert bias_run.summary["final_loss"] == pytest.approx(FLOOR_S4, abs=0.02)


@pytest.mark.slow
def test_same_seed_same_curve_on_cpu():
    config = dict(SMALL, steps=30, eval_every=10)
    a = train(TrainConfig(**config), progress=False).metrics
    b = train(TrainConfig(**config), progress=False).metrics
    c = train(TrainConfig(**config, seed=1), progress=False).metrics
    for col in ("loss", "train_loss", "alignment_L0H2"):
        assert a[col].tolist()[1:] == b[col].tolist()[1:]
    assert a["loss"].tolist() != c["loss"].tolist()


def test_linear_anneal_schedule_reaches_zero():
    m = train(
        TrainConfig(**dict(SMALL, steps=20, eval_every=5), bias=2.0, bias_schedule="linear-anneal", bias_heads="1"),
        progress=False,
    ).metrics
    assert m["beta"].tolist() == [2.0, 1.5, 1.0, 0.5, 0.0]
    # At β = 0 the biased and unbiased losses coincide.
    assert m["loss"].iloc[-1] == pytest.approx(m["loss_nobias"].iloc[-1], abs=1e-7)


class _CausalBigram(nn.Module):
    """A non-attention model: logits depend on the current token only."""

    def __init__(self, d_vocab):
        super().__init__()
        self.table = nn.Embedding(d_vocab, d_vocab)

    def forward(self, tokens):
        return self.table(tokens)


def test_any_module_trains_and_bias_needs_attention():
    if "test-bigram" not in ARCHITECTURES:
        register_architecture("test-bigram", lambda cfg: _CausalBigram(cfg.d_vocab))
    config = TrainConfig(**{**SMALL, "steps": 60, "eval_every": 30, "lr": 0.05}, arch="test-bigram")
    result = train(config, progress=False)
    m = result.metrics
    assert not any(c.startswith(("alignment_", "entropy_")) for c in m.columns)
    assert m["loss"].iloc[-1] < m["loss"].iloc[0]  # it does train
    # but, seeing only the current token, it cannot compute the map (a transformer gets < 0.02).
    assert m["loss_target"].iloc[-1] > 0.3
    assert result.summary["final_max_alignment"] is None and not result.summary["emerged"]
    with pytest.raises(ValueError, match="attention bias needs a transformer"):
        train(TrainConfig(**dict(SMALL, steps=2), arch="test-bigram", bias=1.0), progress=False)


@pytest.mark.parametrize(
    "overrides,match",
    [
        (dict(tokens_per_step=7), "tokens_per_step=7 is smaller than one sequence"),
        (dict(bias=1.0, bias_heads="4"), "head index 4 is out of range"),
        (dict(bias=1.0, bias_layers="1"), "layer index 1 is out of range"),
        (dict(n_ctx=6), "exceeds the model context n_ctx=6"),
        (dict(s=9), "s=9"),
        (dict(task="cellular-automata", S=2), "S=2"),
        (dict(steps=0), "steps=0"),
        (dict(bias_schedule="cosine"), "cosine"),
        (dict(checkpoint_every=5), "needs an out_dir"),
    ],
)
def test_train_bad_input(overrides, match):
    with pytest.raises(ValueError, match=match) as info:
        train(TrainConfig(**{**SMALL, "steps": 2, **overrides}), progress=False)
    assert "\n" not in str(info.value)


def test_cli_train_writes_metrics_and_summary(tmp_path):
    out = tmp_path / "run"
    result = CliRunner().invoke(
        app,
        [
            "train",
            "--task",
            "linear-map",
            "--S",
            "4",
            "--s",
            "1",
            "--n-layers",
            "1",
            "--n-heads",
            "2",
            "--d-head",
            "4",
            "--steps",
            "10",
            "--seed",
            "3",
            "--bias",
            "1.5",
            "--eval-every",
            "5",
            "--tokens-per-step",
            "256",
            "--device",
            "cpu",
            "--no-progress",
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    table = pd.read_parquet(out / "metrics.parquet")
    assert table["step"].tolist() == [0, 5, 10] and table["loss"].notna().all()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["floor"] == pytest.approx(FLOOR_S4)
    assert summary["config"]["S"] == 4 and summary["config"]["s"] == 1
    assert summary["config"]["bias"] == 1.5 and summary["config"]["seed"] == 3
    # Defaults left at None are reported as used: T = 1, d_model = 2 heads x 4, n_ctx = (T+1)*S.
    assert summary["config"]["d_model"] is None and summary["config"]["n_ctx"] is None
    assert summary["resolved"] == {"T": 1, "d_model": 8, "n_ctx": 8}
    from emergence_lens.cli import app as emergence

    bad = CliRunner().invoke(emergence, ["synth", "train", "--S", "4", "--s", "0", "--out", str(tmp_path / "x")])
    assert bad.exit_code == 2 and "s=0 is invalid" in bad.output


def test_cli_train_options_are_the_config_fields():
    """`synth train` offers one option per TrainConfig field (flag, default and help from the
    dataclass) besides --out, --progress and --wandb; the flags users typed before stay."""
    import dataclasses

    import typer.main

    from synthetic.training import TrainConfig

    command = typer.main.get_command(app).commands["train"]
    options = {p.name: p for p in command.params}
    fields = dataclasses.fields(TrainConfig)
    assert list(options) == ["out", "progress", "wandb", *(f.name for f in fields)]  # own options, then the fields
    for f in fields:
        assert options[f.name].default == f.default and options[f.name].help == f.metadata["help"], f.name
    flags = {flag for p in command.params for flag in (*p.opts, *p.secondary_opts)}
    before = "--S --s --T --k --n-rules --data-seed --arch --n-layers --n-heads --d-head --d-model --d-mlp"
    before += " --positional-embedding --n-ctx --steps --lr --warmup-steps --weight-decay --tokens-per-step --seed"
    before += " --eval-every --eval-tokens --loss-threshold --plateau-margin --bias --bias-layers --bias-heads"
    before += " --bias-schedule --bias-anneal-steps --checkpoint-every --device --progress --no-progress --wandb"
    before += " --no-wandb --out --task"
    assert set(before.split()) <= flags
    assert {"--row-entropy", "--no-row-entropy", "--rwkv-version"} <= flags  # the two fields it lacked


def test_curve_statistics_on_a_hand_made_curve():
    steps = [0, 10, 20, 30, 40, 50]
    loss = [0.80, 0.69, 0.68, 0.60, 0.35, 0.30]
    # plateau 0.69, floor 0.30: left at ≤ 0.69 − 0.05·0.39 = 0.6705 (step 30).
    assert plateau_length(steps, loss, 0.69, 0.30, margin=0.05) == 30
    assert steps_to_threshold(steps, loss, default_threshold(0.69, 0.30, 0.05)) == 50
    assert steps_to_threshold(steps, loss, 0.2) is None
    assert plateau_length(steps, [0.7] * 6, 0.69, 0.30) is None


def test_loss_per_output_and_entropy_by_hand():
    losses = torch.tensor([[9.0, 1.0, 2.0, 3.0, 4.0], [9.0, 3.0, 4.0, 5.0, 6.0]])
    output_index = torch.tensor([-1, 0, 1, 0, 1, -1])  # two transitions of S = 2
    assert loss_per_output(losses, output_index, 2).tolist() == [3.0, 4.0]
    uniform = torch.tril(torch.ones(4, 4)) / torch.arange(1, 5)[:, None]
    ent = attention_entropy(uniform.expand(3, 2, 4, 4), torch.tensor([False, True, False, True]))
    assert torch.allclose(ent, torch.full((2,), (math.log(2) + math.log(4)) / 2))


def test_wandb_logging_is_offline_by_default(monkeypatch):
    calls = {"log": []}

    class _Run:
        def log(self, row, step):
            calls["log"].append(step)

        def finish(self):
            calls["finished"] = True

    class _Wandb:
        @staticmethod
        def init(**kwargs):
            calls["init"] = kwargs
            return _Run()

    monkeypatch.setitem(__import__("sys").modules, "wandb", _Wandb)
    monkeypatch.delenv("WANDB_MODE", raising=False)
    train(TrainConfig(**{**SMALL, "steps": 10, "eval_every": 5}), progress=False, wandb=True)
    assert calls["init"]["mode"] == "offline" and calls["init"]["config"]["S"] == 4
    assert calls["log"] == [0, 5, 10] and calls["finished"]


def test_unhooked_fast_attention_equals_the_hooked_path():
    """Without hooks the transformer uses scaled_dot_product_attention; with any hook it takes
    the explicit pre-softmax path. Both give the same logits."""
    import torch

    from synthetic.models import ModelConfig, build_model

    model = build_model(ModelConfig(d_vocab=2, n_ctx=32, n_layers=2, n_heads=4, d_head=8, d_mlp=64))
    tokens = torch.randint(0, 2, (3, 32), generator=torch.Generator().manual_seed(0))
    attention = model.blocks[0].attn.original_component
    assert not attention._hooks_active()
    fast = model(tokens)
    hooked = model.run_with_hooks(tokens, fwd_hooks=[("blocks.0.attn.hook_attn_scores", lambda x, hook: x)])
    assert torch.allclose(fast, hooked, atol=1e-5)
    assert not attention._hooks_active()  # run_with_hooks removed its hook again


def test_row_entropy_equals_a_direct_computation_per_output():
    """entropy_L{l}H{h}_out{i}: each head's attention entropy averaged over the queries that
    predict output i, equal to a direct computation from hook_pattern."""
    import torch

    from synthetic.datasets import make_task
    from synthetic.models import ModelConfig, build_model
    from synthetic.training import Evaluator

    task = make_task("linear-map", S=4, s=2)
    model = build_model(ModelConfig(d_vocab=task.d_vocab, n_ctx=task.seq_len, n_heads=2, d_head=4)).eval()
    tokens = task.sample(16, torch.Generator().manual_seed(0))
    row = Evaluator(task, model, tokens, row_entropy=True)()
    _, cache = model.run_with_cache(tokens)
    pattern = cache["blocks.0.attn.hook_pattern"]  # [batch, head, q, k]
    entropy = -(torch.xlogy(pattern, pattern)).sum(-1)  # [batch, head, q]
    for i in range(4):
        queries = task.target_mask & (task.output_index == i)
        assert int(queries.sum()) >= 1
        for h in range(2):
            expected = entropy[:, h, queries].mean().item()
            assert abs(row[f"entropy_L0H{h}_out{i}"] - expected) < 1e-5
    assert "entropy_L0H0_out0" not in Evaluator(task, model, tokens)()  # off by default
