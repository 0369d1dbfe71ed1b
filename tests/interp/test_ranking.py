"""Head ranking, joint top-K recovery and the attribution pre-screen, on a native transformer.

The post checkpoint is the pre checkpoint with every W_Q scaled, so the two differ only through
the attention patterns: patching the top K = all heads must recover exactly 1.
"""

from __future__ import annotations

import math
import warnings

import pandas as pd
import pytest
import torch

from interp.core.settings import StudyConfig
from interp.decomposition import decompose_jump
from interp.patching import TaskBatch, answer_prob, cache_patterns, delta_p_all_heads, patch_heads
from interp.ranking import HeadRanking, RankingOptions, head_ranking
from interp.ranking_stats import TopkOptions, prescreen_rank_correlation, rank_heads, topk_recovery

N_LAYERS, N_HEADS, VOCAB, BATCH, POS = 3, 4, 256, 6, 9


# the same random native transformer as the patching tests (one definition)
from tests.interp.patching.test_patching import native_bridge  # noqa: E402


@pytest.fixture(scope="module")
def setup():
    torch.set_num_threads(1)
    pre, post = native_bridge(), native_bridge(q_scale=4.0)
    gen = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, VOCAB, (BATCH, POS), generator=gen)
    answer_pos = torch.full((BATCH,), POS - 1)
    with torch.no_grad():
        answers = post(tokens)[:, -1].argmax(-1)
    return pre, post, TaskBatch(tokens, answers, answer_pos)


def test_rank_heads_orders_by_delta_p_and_ranks_nan_last():
    delta_p = torch.tensor([[0.1, float("nan"), -0.2], [0.3, 0.1, 0.0]])
    frame = rank_heads(delta_p)
    assert list(frame.columns) == ["layer", "head", "delta", "rank"]
    assert list(zip(frame["layer"], frame["head"])) == [(1, 0), (0, 0), (1, 1), (1, 2), (0, 2), (0, 1)]
    assert frame["rank"].tolist()[:5] == [1, 2, 3, 4, 5] and frame["rank"].isna().tolist() == [False] * 5 + [True]
    with pytest.raises(ValueError, match=r"\[layer, head\]"):
        rank_heads(torch.zeros(4))


def test_topk_recovery_reaches_one_and_matches_joint_patches(setup):
    pre, post, inputs = setup
    patterns = cache_patterns(post, inputs.tokens)
    with torch.no_grad():
        p_pre = float(answer_prob(pre(inputs.tokens), inputs).mean())
        p_post = float(answer_prob(post(inputs.tokens), inputs).mean())
    ranking = rank_heads(delta_p_all_heads(pre, inputs, patterns))
    topk = topk_recovery(pre, inputs, patterns, ranking, options=TopkOptions(values=(p_pre, p_post)))
    assert list(topk.columns) == ["k", "value", "recovered"]
    assert topk["k"].tolist() == list(range(1, N_LAYERS * N_HEADS + 1))
    assert abs(p_post - p_pre) > 1e-2
    assert abs(topk["recovered"].iloc[-1] - 1.0) < 1e-4  # all heads patched == post checkpoint
    top = list(zip(ranking["layer"], ranking["head"]))
    for k in (1, 3):
        assert abs(topk["value"].iloc[k - 1] - patch_heads(pre, inputs, patterns, top[:k])) < 1e-6
    # K = 1 is the top head alone: its recovered value is its delta_p over the pre -> post change.
    assert abs(topk["recovered"].iloc[0] - ranking["delta"].iloc[0] / (p_post - p_pre)) < 1e-4
    with pytest.raises(ValueError, match=r"ks must lie in \[1, 12\]"):
        topk_recovery(pre, inputs, patterns, ranking, StudyConfig(ks=[13]), TopkOptions(values=(p_pre, p_post)))
    with pytest.raises(ValueError, match="post holds patterns only"):  # no answer logits to measure post by
        topk_recovery(pre, inputs, patterns, ranking)
    # Measured from the models (per-prompt values): the same values, and the 95 % interval around them.
    measured = topk_recovery(pre, inputs, post, ranking, StudyConfig(n_boot=200))
    assert list(measured.columns) == ["k", "value", "recovered", "recovered_lo", "recovered_hi"]
    assert (measured["value"] - topk["value"]).abs().max() < 1e-6
    assert (measured["recovered"] - topk["recovered"]).abs().max() < 1e-4
    assert (
        (measured["recovered_lo"] <= measured["recovered"] + 1e-9)
        & (measured["recovered"] <= measured["recovered_hi"] + 1e-9)
    ).all()


def test_recovered_is_nan_with_a_warning_when_p_post_equals_p_pre(setup):
    pre, post, inputs = setup
    patterns = cache_patterns(post, inputs.tokens)
    ranking = rank_heads(torch.arange(N_LAYERS * N_HEADS, dtype=torch.float32).reshape(N_LAYERS, N_HEADS))
    with pytest.warns(RuntimeWarning, match="value_post == value_pre"):
        topk = topk_recovery(pre, inputs, patterns, ranking, StudyConfig(ks=[1, 2]), TopkOptions(values=(0.25, 0.25)))
    assert topk["recovered"].isna().all() and topk["value"].notna().all()


def test_head_ranking_end_to_end_and_prescreen(setup):
    pre, post, inputs = setup
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        report = head_ranking(pre, post, inputs, options=RankingOptions(attribution=False))
    assert isinstance(report, HeadRanking)
    exact = delta_p_all_heads(pre, inputs, report.post_patterns)
    assert torch.allclose(report.delta, exact, atol=1e-6, rtol=0)
    assert report.heads["rank"].tolist() == list(range(1, N_LAYERS * N_HEADS + 1))
    assert abs(report.topk["recovered"].iloc[-1] - 1.0) < 1e-4
    assert report.delta_attribution is None

    screened = head_ranking(pre, post, inputs, StudyConfig(prescreen_top_n=3))
    attribution = screened.delta_attribution
    top3 = torch.topk(attribution.flatten(), 3).indices
    computed = torch.nonzero(~torch.isnan(screened.delta.flatten())).flatten()
    assert sorted(computed.tolist()) == sorted(top3.tolist())
    assert torch.allclose(screened.delta.flatten()[computed], exact.flatten()[computed], atol=1e-6, rtol=0)
    assert len(screened.topk) == 3 and screened.heads["rank"].notna().sum() == 3
    assert "delta_attribution" in screened.heads.columns
    with pytest.raises(ValueError, match="prescreen_top_n"):
        head_ranking(pre, post, inputs, StudyConfig(prescreen_top_n=0))
    n_heads_total = pre.cfg.n_layers * pre.cfg.n_heads
    with pytest.raises(
        ValueError, match=f"prescreen_top_n={n_heads_total + 1} is more than the model's {n_heads_total} heads"
    ):
        head_ranking(pre, post, inputs, StudyConfig(prescreen_top_n=n_heads_total + 1))
    with pytest.raises(TypeError, match=r"head_ranking: config is .*; expected a StudyConfig"):
        head_ranking(pre, post, inputs, "logprob")  # the old third keyword, metric, given by position


def test_prescreen_rank_correlation_is_spearman():
    exact = torch.tensor([[0.5, -0.1, 0.3], [0.0, 0.2, -0.4]])
    assert prescreen_rank_correlation(exact, exact * 7) == pytest.approx(1.0)
    assert prescreen_rank_correlation(exact, -exact) == pytest.approx(-1.0)
    attr = torch.tensor([[0.4, 0.0, 0.1], [-0.2, 0.3, -0.5]])
    # No ties: Spearman = 1 - 6 sum d^2 / (n (n^2 - 1)).
    rank_e = pd.Series(exact.flatten().numpy()).rank().to_numpy()
    rank_a = pd.Series(attr.flatten().numpy()).rank().to_numpy()
    n = 6
    expected = 1 - 6 * ((rank_e - rank_a) ** 2).sum() / (n * (n * n - 1))
    assert prescreen_rank_correlation(exact, attr) == pytest.approx(expected)
    with_nan = exact.clone()
    with_nan[0, 0] = float("nan")
    assert math.isfinite(prescreen_rank_correlation(with_nan, attr))
    with pytest.raises(ValueError, match="same"):
        prescreen_rank_correlation(exact, attr[:1])


def test_cli_metric_option_names_the_metric_in_the_tables(tmp_path, tiny_local_suite):
    """``rank-heads --metric logit-diff``: the tables say which metric; an unknown metric is a
    one-line error before any work."""
    from typer.testing import CliRunner

    from emergence_lens.cli import app

    runner = CliRunner()
    out = tmp_path / "out"
    result = runner.invoke(
        app,
        [
            "rank-heads",
            str(tiny_local_suite),
            "--pre",
            "0",
            "--post",
            "200",
            "--out",
            str(out),
            "--metric",
            "logit-diff",
        ],
    )
    assert result.exit_code == 0, result.output
    heads, topk = pd.read_csv(out / "heads.csv"), pd.read_csv(out / "topk.csv")
    assert set(heads["metric"]) == {"logit-diff"} and set(topk["metric"]) == {"logit-diff"}
    assert (heads["delta_lo"] <= heads["delta"] + 1e-9).all() and (heads["delta"] <= heads["delta_hi"] + 1e-9).all()
    # every printed share carries its interval, as topk.csv holds it
    first = topk.iloc[0]
    assert (first["recovered_lo"] <= first["recovered"] + 1e-9) and (first["recovered"] <= first["recovered_hi"] + 1e-9)
    shown = f"K=1 {first['recovered']:.2f} [{first['recovered_lo']:.2f}, {first['recovered_hi']:.2f}]"
    assert f"recovered by the top K heads' patterns [95 % CI]: {shown}" in result.output
    bad = runner.invoke(
        app, ["rank-heads", str(tiny_local_suite), "--pre", "0", "--post", "200", "--metric", "accuracy"]
    )
    assert bad.exit_code == 2 and "metric='accuracy'" in bad.output and "Traceback" not in bad.output


@pytest.mark.parametrize("function", [head_ranking, topk_recovery, decompose_jump], ids=lambda f: f.__name__)
def test_the_analyses_take_the_settings_as_one_object_and_at_most_six_parameters(function):
    """The study settings arrive as one StudyConfig (issue 54): no function of the ranking road
    grows past 6 parameters, and none takes a setting of StudyConfig as a loose keyword."""
    import dataclasses
    import inspect

    name = function.__name__
    parameters = inspect.signature(function).parameters
    assert len(parameters) <= 6, f"{name} takes {len(parameters)} parameters: {list(parameters)}"
    assert parameters["config"].default == StudyConfig() and parameters["config"].annotation == "StudyConfig"
    loose = set(parameters) & {field.name for field in dataclasses.fields(StudyConfig)}
    assert not loose, f"{name} takes the settings {sorted(loose)} one by one"


@pytest.mark.parametrize(
    "where",
    [
        "interp.readiness:readiness",
        "interp.dense:dense_point",
        "interp.report.scrubber:run_scrub_data",
        "interp.scrubbing:scrub_data",
        "interp.scrubbing:scrubber",
        "interp.population.collect:population",
        "interp.population.collect:source_curve",
        "interp.population.tables:population_from_curves",
        "interp.decomposition:decompose_between",
    ],
)
def test_every_side_road_carries_the_settings_as_one_object(where):
    """The scrubber, the population, zoom's dense point and readiness read threshold, hold,
    device, method, n_boot, ... from one StudyConfig whose defaults are the one place's
    (DEFAULT_THRESHOLD, DEFAULT_HOLD, N_BOOT): none takes a setting one by one."""
    import dataclasses
    import importlib
    import inspect

    from interp.core.settings import N_BOOT
    from interp.core.terms import DEFAULT_HOLD, DEFAULT_THRESHOLD

    module, name = where.split(":")
    parameters = inspect.signature(getattr(importlib.import_module(module), name)).parameters
    loose = set(parameters) & {field.name for field in dataclasses.fields(StudyConfig)}
    assert not loose, f"{where} takes the settings {sorted(loose)} one by one"
    default = parameters["config"].default
    assert default == StudyConfig() and (default.threshold, default.hold, default.n_boot) == (
        DEFAULT_THRESHOLD,
        DEFAULT_HOLD,
        N_BOOT,
    )
