"""One head before and after (issue 43, item 3): ``show_head`` on a ranking and on a run, three
panels whose third is post − pre, with readable, unique token labels."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from interp.core.settings import StudyConfig
from interp.report.head_view import head_comparison_figure, token_axis_labels


def test_ranking_show_head_three_panels_post_minus_pre(tiny_local_suite):
    from interp.ranking import rank_heads_between
    from interp.sources import LocalSuiteSource
    from interp.tasks import RepetitionTask

    source = LocalSuiteSource(tiny_local_suite, model_id="toy/toy-2l-seed2")
    batch = RepetitionTask(n_prompts=5, length=5).build(source.tokenizer())
    ranking = rank_heads_between(source, 0, 200, batch, StudyConfig(n_boot=20, ks=[1], decompose=False))
    fig = ranking.show_head(1, 2)
    assert [t.type for t in fig.data] == ["heatmap"] * 3
    pre = ranking.pre_patterns[1, 0, 2].double().numpy()
    post = ranking.post_patterns[1, 0, 2].double().cpu().numpy()
    np.testing.assert_allclose(np.asarray(fig.data[0].z), pre, atol=1e-6)
    np.testing.assert_allclose(np.asarray(fig.data[1].z), post, atol=1e-6)
    np.testing.assert_allclose(np.asarray(fig.data[2].z), post - pre, atol=1e-6)
    assert float(np.abs(post - pre).max()) > 0  # two different checkpoints
    labels = list(fig.data[0].y)
    assert len(labels) == len(set(labels)) == batch.tokens.shape[1]
    assert labels[1] == ranking.example_tokens[1].replace(" ", "␣") + " (1)"
    # another prompt: positions, no tokens of prompt 0
    assert list(ranking.show_head(0, 0, prompt=3).data[0].y)[:2] == ["0", "1"]
    with pytest.raises(ValueError, match=r"L5H0 prompt 0 is out of range: layers 0..1"):
        ranking.show_head(5, 0)


def test_run_show_head_uses_the_kept_patterns():
    from tests.interp.report.test_findings import make_run

    run = make_run(1, 0.1, (0.05, 0.15))
    pre, post = torch.rand(6, 6).softmax(-1), torch.rand(6, 6).softmax(-1)
    run.example_patterns = torch.stack([pre, post])
    run.example_names = ["L0H1 pre (step 200)", "L0H1 post (step 300)"]
    run.example_tokens = [" 7", " 3", "\n", "<b>", " 7", " 3"]
    fig = run.show_head(0, 1)
    np.testing.assert_allclose(np.asarray(fig.data[2].z), (post - pre).double().numpy(), atol=1e-6)
    assert [a.text for a in fig.layout.annotations][:3] == [
        "pre (step 200)",
        "post (step 300)",
        "post (step 300) − pre (step 200)",
    ]
    assert list(fig.data[0].x) == ["␣7 (0)", "␣3 (1)", "⏎ (2)", "&lt;b&gt; (3)", "␣7 (4)", "␣3 (5)"]
    with pytest.raises(ValueError, match="kept no patterns for L1H0; it kept L0H1"):
        run.show_head(1, 0)
    from interp.main_job.report import MainJobReport

    page = MainJobReport(runs=[run]).html()
    assert "L0H1 before, after and the change" in page
    assert '"&lt;b&gt; (3)"' in page  # the token is data in the figure, escaped for plotly


def test_comparison_refuses_mismatched_shapes():
    with pytest.raises(ValueError, match="one shape"):
        head_comparison_figure(np.zeros((3, 3)), np.zeros((3, 4)))
    assert token_axis_labels(["a"], 3) == ["a (0)", "1", "2"]
