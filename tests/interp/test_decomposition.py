"""The jump decomposed by component, on a post checkpoint that differs from pre only in W_Q.

Then patterns, QK weights and head outputs (all heads) must recover exactly 1, OV weights,
MLP weights, the embedding and the unembedding exactly 0, and the bootstrap intervals of the
first rows collapse onto their values.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from interp.core.settings import StudyConfig
from interp.decomposition import COMPONENT_COLUMNS, DecomposeOptions, decompose_jump
from interp.patching import TaskBatch
from interp.ranking import RankingOptions, head_ranking
from interp.ranking_stats import bootstrap_interval
from tests.interp.patching.test_patching import native_bridge

N_LAYERS, N_HEADS, VOCAB, BATCH, POS = 3, 4, 256, 8, 9
NO_PRESCREEN = RankingOptions(attribution=False)
PATTERNS = DecomposeOptions(targets=["pattern"])


@pytest.fixture(scope="module")
def setup():
    torch.set_num_threads(1)
    pre, post = native_bridge(), native_bridge(q_scale=4.0)
    gen = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, VOCAB, (BATCH, POS), generator=gen)
    with torch.no_grad():
        answers = post(tokens)[:, -1].argmax(-1)
    distractors = torch.stack([torch.tensor([t for t in range(11) if t != int(a)][:9]) for a in answers])
    return pre, post, TaskBatch(tokens, answers, torch.full((BATCH,), POS - 1), distractors=distractors)


@pytest.mark.parametrize("metric", ["p", "logit-diff"])
def test_decomposition_of_a_query_weight_jump(setup, metric):
    pre, post, batch = setup
    table = decompose_jump(
        pre,
        post,
        batch,
        StudyConfig(metric=metric, ks=[1, 2, N_LAYERS * N_HEADS], n_boot=200),
        DecomposeOptions(labels={"model": "toy", "seed": 3, "pre_step": 10, "post_step": 20}),
    )
    assert list(table.columns) == COMPONENT_COLUMNS
    assert set(table["metric"]) == {metric} and set(table["seed"]) == {3}
    assert abs(table["value_post"].iloc[0] - table["value_pre"].iloc[0]) > 1e-2
    full = table[table["scope"] == "all"].set_index("target")
    for target in ("pattern", "qk", "z"):
        assert abs(full.loc[target, "recovered"] - 1) < 1e-4, target
        assert abs(full.loc[target, "recovered_lo"] - 1) < 1e-4 and abs(full.loc[target, "recovered_hi"] - 1) < 1e-4
    for target in ("ov", "embed", "unembed", "mlp_weights"):  # (values of later layers move with the stream)
        assert abs(full.loc[target, "recovered"]) < 1e-4, target
    assert full.loc["pattern", "k"] == N_LAYERS * N_HEADS and full.loc["mlp", "k"] == N_LAYERS
    # the whole (every block's parameters at once) carries the jump; its parts qk + ov + mlp_weights
    # sum to 1 + 0 + 0, so the interaction row (whole - sum of parts, bootstrapped per prompt) is 0
    assert abs(full.loc["block", "recovered"] - 1) < 1e-4 and full.loc["block", "k"] == N_LAYERS
    assert abs(full.loc["interaction", "recovered"]) < 1e-4 and full.loc["interaction", "heads"] == "qk ov mlp_weights"
    assert abs(full.loc["interaction", "recovered_lo"]) < 1e-4 and abs(full.loc["interaction", "recovered_hi"]) < 1e-4
    for kind in ("pattern", "z"):
        top = table[(table["target"] == kind) & (table["scope"] != "all")].set_index("k")
        assert list(top.index) == [1, 2, N_LAYERS * N_HEADS]
        assert abs(top.loc[N_LAYERS * N_HEADS, "recovered"] - 1) < 1e-4
        assert len(top.loc[2, "heads"].split()) == 2
    measured = table[table["target"] != "interaction"]  # the interaction has a share, not a value
    inside = (measured["value_lo"] <= measured["value"] + 1e-9) & (measured["value"] <= measured["value_hi"] + 1e-9)
    assert inside.all()


def test_interaction_is_whole_minus_the_sum_of_parts(setup):
    """On a post checkpoint that differs in W_Q and the MLP, the interaction row equals the block
    row minus the qk, ov and mlp_weights rows (in recovered units), to float precision."""
    pre, _, batch = setup
    post = native_bridge(q_scale=4.0)
    with torch.no_grad():
        for block in post.blocks:
            for p in block.mlp.parameters():
                p.mul_(1.5)
    table = decompose_jump(pre, post, batch, StudyConfig(ks=[1], n_boot=50)).query("scope == 'all'").set_index("target")
    parts = table.loc[["qk", "ov", "mlp_weights"], "recovered"].sum()
    assert table.loc["interaction", "recovered"] == pytest.approx(table.loc["block", "recovered"] - parts, abs=1e-5)
    assert abs(table.loc["mlp_weights", "recovered"]) > 1e-3  # the MLP change is seen


def test_components_are_checked_before_any_checkpoint_is_loaded():
    from interp.decomposition import decompose_between

    class Source:
        model_id = "toy/toy-seed1"

        def load(self, step, device=None):
            raise AssertionError("loaded a checkpoint before checking the components")

    with pytest.raises(ValueError, match=r"unknown components \['bogus'\]"):
        decompose_between(Source(), 0, 100, None, options=DecomposeOptions(targets=["bogus"]))
    with pytest.raises(ValueError, match="not per-head kinds"):
        decompose_between(Source(), 0, 100, None, options=DecomposeOptions(topk_kinds=["mlp"]))
    with pytest.raises(ValueError, match=r"ks item=0: must be an integer >= 1"):  # refused when the config is made
        decompose_between(Source(), 0, 100, None, StudyConfig(ks=[0]))
    with pytest.raises(TypeError, match=r"decompose_between: config is .*; expected a StudyConfig"):
        decompose_between(Source(), 0, 100, None, {"metric": "p"})


def test_bootstrap_interval_contains_the_mean_and_is_exact_for_a_shift():
    gen = torch.Generator().manual_seed(0)
    pre = torch.rand(50, generator=gen)
    post = pre + 0.5
    patched = torch.stack([pre + 0.25, pre + torch.rand(50, generator=gen)])
    ci = bootstrap_interval(patched, pre, post, n_boot=500)
    assert np.allclose([ci["delta_lo"][0], ci["delta_hi"][0]], 0.25) and np.allclose(ci["recovered_lo"][0], 0.5)
    mean = float(patched[1].mean())
    assert ci["value_lo"][1] < mean < ci["value_hi"][1]
    assert 0 < ci["value_hi"][1] - ci["value_lo"][1] < 0.3  # about 4 standard errors of 50 uniforms (0.16)
    with pytest.raises(ValueError, match=r"n_boot=-1: must be an integer >= 0 \(0: no intervals\)"):
        bootstrap_interval(patched, pre, post, n_boot=-1)
    none = bootstrap_interval(patched, pre, post, n_boot=0)  # StudyConfig(n_boot=0): no intervals asked for
    assert sorted(none) == sorted(ci) and all(np.isnan(v).all() and v.shape == (2,) for v in none.values())


def test_head_ranking_intervals_and_metric_names(setup):
    pre, post, batch = setup
    ranking = head_ranking(pre, post, batch, StudyConfig(metric="logprob", n_boot=200))
    heads = ranking.heads
    assert set(heads["metric"]) == {"logprob"} and set(ranking.topk["metric"]) == {"logprob"}
    assert ((heads["delta_lo"] <= heads["delta"] + 1e-9) & (heads["delta"] <= heads["delta_hi"] + 1e-9)).all()
    assert abs(ranking.topk["recovered"].iloc[-1] - 1) < 1e-4
    assert ranking.rank_correlation_prescreen is not None and ranking.prescreen_top2_found is not None


def test_bad_components_raise(setup):
    pre, post, batch = setup
    with pytest.raises(ValueError, match="unknown components"):
        decompose_jump(pre, post, batch, options=DecomposeOptions(targets=["attention"]))
    with pytest.raises(ValueError, match="ks must lie"):
        decompose_jump(pre, post, batch, StudyConfig(ks=[N_LAYERS * N_HEADS + 1]))
    table = decompose_jump(pre, post, batch, StudyConfig(ks=[1], n_boot=10), DecomposeOptions(targets=["pattern"]))
    assert list(table["target"]) == ["pattern", "pattern", "z"] and list(table["scope"]) == ["all", "top-1", "top-1"]


def test_cli_decompose_writes_components(tmp_path, tiny_local_suite):
    from typer.testing import CliRunner

    from emergence_lens.cli import app

    out = tmp_path / "out"
    result = CliRunner().invoke(
        app,
        ["decompose", str(tiny_local_suite), "--pre", "0", "--post", "200", "--out", str(out), "--metric", "logprob"],
    )
    assert result.exit_code == 0, result.output
    table = pd.read_csv(out / "components.csv")
    assert list(table.columns) == [*COMPONENT_COLUMNS, "task", "prepend_bos"] and set(table["metric"]) == {"logprob"}
    assert set(table["pre_step"]) == {0} and set(table["post_step"]) == {200}
    bad = CliRunner().invoke(app, ["decompose", str(tiny_local_suite), "--pre", "200", "--post", "0"])
    assert bad.exit_code == 2 and "earlier" in bad.output


def test_analysis_tables_render(setup):
    """analyses/decomposition.py's markdown: one column per run, the components and top-K rows."""
    from tests.conftest import load_analysis

    module = load_analysis("decomposition")
    pre, post, batch = setup
    table = decompose_jump(
        pre,
        post,
        batch,
        StudyConfig(ks=[1, 2], n_boot=50),
        DecomposeOptions(labels={"model": "toy", "seed": 0, "pre_step": 1, "post_step": 2}),
    )
    prescreen = pd.DataFrame(
        [{"model": "toy", "seed": 0, "method": "attribution patching", "spearman": 0.5, "top2_found": True}]
    )
    text = module.markdown(table, prescreen, "settings")
    assert "| component | toy seed 0 |" in text and "| pattern | 1.00 [1.00, 1.00] |" in text
    assert "| top-2 z |" in text and "| toy seed 0 | attribution patching | 0.50 | yes |" in text


def test_bootstrap_over_too_few_prompts_gives_nan_bounds_and_says_why(setup):
    from interp.ranking_stats import MIN_BOOTSTRAP_PROMPTS

    gen = torch.Generator().manual_seed(1)
    pre, post = torch.rand(MIN_BOOTSTRAP_PROMPTS, generator=gen), torch.rand(MIN_BOOTSTRAP_PROMPTS, generator=gen) + 1
    patched = (pre + post)[None] / 2
    with pytest.warns(
        RuntimeWarning, match=f"bootstrap over 4 prompt\\(s\\): a 95 % interval needs at least {MIN_BOOTSTRAP_PROMPTS}"
    ):
        few = bootstrap_interval(patched[:, :4], pre[:4], post[:4], n_boot=200)
    assert all(np.isnan(v).all() for v in few.values())
    enough = bootstrap_interval(patched, pre, post, n_boot=200)  # 5 prompts: finite, non-degenerate bounds
    assert enough["value_lo"][0] < float(patched.mean()) < enough["value_hi"][0]
    # Through head_ranking and decompose_jump: one prompt gives NaN bounds, never lo == hi == value.
    model_pre, model_post, batch = setup
    one = TaskBatch(batch.tokens[:1], batch.answers[:1], batch.answer_pos[:1], distractors=batch.distractors[:1])
    with pytest.warns(RuntimeWarning, match="bootstrap over 1 prompt"):
        ranking = head_ranking(model_pre, model_post, one, StudyConfig(n_boot=50), options=NO_PRESCREEN)
        table = decompose_jump(model_pre, model_post, one, StudyConfig(ks=[1], n_boot=50), PATTERNS)
    assert ranking.heads["delta"].notna().all() and ranking.heads[["delta_lo", "delta_hi"]].isna().all().all()
    assert table["recovered"].notna().all() and table[["recovered_lo", "recovered_hi"]].isna().all().all()
    # One prompt has no standard error: the jump is flagged.
    assert ranking.jump_too_small and ranking.heads["jump_too_small"].all() and table["jump_too_small"].all()


def test_jump_below_three_standard_errors_is_flagged(setup):
    from interp.emergence import jump_noise

    pre = torch.tensor([0.0040, 0.0041, 0.0039, 0.0040])
    noisy = pre + torch.tensor([0.0010, -0.0008, 0.0006, -0.0000])  # mean 0.0002, se 0.0004
    jump, se, too_small = jump_noise(pre, noisy)
    assert jump == pytest.approx(0.0002, abs=1e-9) and se == pytest.approx(
        float((noisy - pre).double().std()) / 2, rel=1e-9
    )
    assert too_small
    clear = pre + torch.tensor([0.30, 0.31, 0.29, 0.30])
    assert not jump_noise(pre, clear)[2]
    # The ranking and the decomposition carry the same flag as the rule on their own metric values.
    from interp.patching import metric_values

    model_pre, model_post, batch = setup
    ranking = head_ranking(model_pre, model_post, batch, StudyConfig(n_boot=50), options=NO_PRESCREEN)
    table = decompose_jump(model_pre, model_post, batch, StudyConfig(ks=[1], n_boot=50), PATTERNS)
    expected = jump_noise(metric_values(model_pre, batch, "p"), metric_values(model_post, batch, "p"))
    assert ranking.jump_se == pytest.approx(expected[1], rel=1e-9) and ranking.jump_too_small == expected[2]
    assert set(ranking.heads["jump_too_small"]) == {expected[2]} and set(table["jump_too_small"]) == {expected[2]}
    assert table["jump_se"].iloc[0] == pytest.approx(expected[1], rel=1e-9)


def test_whole_and_interaction_rows_sit_with_the_components(setup):
    pre, post, batch = setup
    table = decompose_jump(pre, post, batch, StudyConfig(ks=[1], n_boot=20))
    scopes = list(table["scope"])
    assert scopes[: scopes.index("top-1")] == ["all"] * (len(scopes) - scopes.count("top-1"))
    interaction = table[table["target"] == "interaction"].iloc[0]
    assert np.isnan(interaction["value"]) and not np.isnan(interaction["recovered"])
    chosen = decompose_jump(pre, post, batch, StudyConfig(ks=[1], n_boot=20), DecomposeOptions(targets=["qk"]))
    assert list(chosen["target"].unique()) == [
        "qk",
        "pattern",
        "z",
    ]  # chosen components: no whole (its parts need not be there)
