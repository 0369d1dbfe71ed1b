"""Labels that say what is there (issue 43, item 8): help text, captions, titles, axis ticks,
names a user types, and result objects' repr and pages."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from typer.testing import CliRunner


def _help(*args: str) -> str:
    from emergence_lens.cli import app

    result = CliRunner().invoke(app, [*args, "--help"])
    assert result.exit_code == 0, result.output
    return result.output


def test_help_is_wide_and_says_only_what_exists(monkeypatch):
    from interp.core.metrics import metric_help

    # through a pipe with no width in the environment (a library imported earlier in a test worker
    # may have left COLUMNS=80, LINES=24 there: the user's COLUMNS rightly wins over ours)
    for name in ("COLUMNS", "LINES", "TERMINAL_WIDTH"):
        monkeypatch.delenv(name, raising=False)

    assert "probability of the answer token (softmax, float32))" in metric_help()
    assert metric_help().count("probability") == 2  # p's description once, nothing else repeats it
    run_help = _help("run")
    assert max(len(line) for line in run_help.splitlines()) > 100, run_help[:300]  # 120 columns through a pipe, not 80
    # 87 lines at 120 columns (27 options, 17 of them StudyConfig's fields), 198 at 80
    assert len(run_help.splitlines()) <= 100
    scrub_help = _help("scrub")
    assert "--task-file" not in scrub_help and "default: repetition." in scrub_help
    assert "interp/readiness.py" not in _help()


def test_a_bare_embedded_run_name_suggests_the_name_that_works():
    from interp.cli.options import check_sources

    with pytest.raises(ValueError, match=r"did you mean 'embedded/neox-2l-128d-seed2'\?"):
        check_sources(["neox-2l-128d-seed2"])
    with pytest.raises(ValueError, match="expected a Pythia"):
        check_sources(["no-such-thing"])
    import emergence_lens as el  # the Python door answers the same, before anything loads

    with pytest.raises(ValueError, match=r"did you mean 'embedded-quick/neox-2l-64d-seed1'|did you mean 'embedded/"):
        el.open_source("neox-2l-64d-seed1")


def test_report_title_names_its_runs():
    from interp.main_job.report import MainJobReport
    from tests.interp.report.test_findings import make_run

    report = MainJobReport(runs=[make_run(1, 0.1), make_run(2, 0.2)])
    assert report.title == "emergence-lens: toy seeds 1, 2 · repetition"
    assert "<title>emergence-lens: toy seeds 1, 2 · repetition</title>" in report.html()
    assert MainJobReport(runs=[make_run(1, 0.1)], title="mine").title == "mine"


def test_captions_and_axes_match_the_figures():
    from interp.report import page as vis
    from interp.report.figures import loss_curve_figure
    from tests.interp.report.test_findings import make_run

    run = make_run(1, 0.1, (0.05, 0.15))
    run.head_scores = pd.DataFrame(
        {"step": [200, 300] * 2, "layer": 0, "head": [0, 0, 1, 1], "score": "copying", "value": [0.1, 0.2, 0.3, 0.4]}
    )
    section = vis.head_scores_section(run, vis.ReportContext(assets=vis.Assets()))
    assert "one panel per score" not in section.body and "One line per head and score" in section.body
    loss = pd.DataFrame({"step": range(100), "loss": np.linspace(5, 0.05, 100)})
    fig = loss_curve_figure(loss, run.curve, smooth=1)
    accuracy_axis = fig.layout.yaxis2
    assert (accuracy_axis.tickmode, accuracy_axis.tick0, accuracy_axis.dtick) == ("linear", 0, 0.2)
    assert tuple(accuracy_axis.range) == (0, 1)


def test_head_ranking_display_counts_its_heads():
    from interp.ranking import HeadRanking
    from interp.report.display import head_ranking_html

    heads = pd.DataFrame(
        {"layer": [0, 0, 1, 1], "head": [0, 1, 0, 1], "delta": [0.3, 0.2, 0.1, 0.0], "rank": [1, 2, 3, 4]}
    ).assign(delta_lo=0.0, delta_hi=0.4, delta_attribution=0.0, metric="p", unit="probability")
    ranking = HeadRanking(
        value_pre=0.1,
        value_post=0.5,
        delta=torch.tensor([[0.3, 0.2], [0.1, 0.0]]),
        heads=heads,
        topk=pd.DataFrame({"k": [1], "value": [0.4], "recovered": [0.75]}),
        post_patterns=torch.ones(2, 1, 2, 3, 3) / 3,
    )
    html = head_ranking_html(ranking, __import__("interp.report.display", fromlist=["Assets"]).Assets())
    assert "The 4 top heads by delta" in html and "ten top heads" not in html


def test_readiness_result_repr_is_one_line_and_saves_a_page(tmp_path):
    from interp.readiness import ReadinessResult

    curve = pd.DataFrame(
        {
            "step": range(0, 2800, 100),
            "accuracy": np.linspace(0, 1, 28),
            "p_answer": 0.5,
            "ideal_accuracy": 1.0,
            "ideal_p_answer": 0.9,
        }
    )
    result = ReadinessResult(
        model="toy",
        seed=1,
        heads={(1, 3): "induction"},
        curve=curve,
        emergence=(1300, 1400),
        ready=(0, 100),
        e_minus_r=1300,
        interval=(1100, 1500),
        boot_defined=1.0,
        n_boot=100,
        threshold=0.5,
        hold=2,
    )
    text = repr(result)
    assert "\n" not in text and "E - R = 1300 steps [1100, 1500]" in text and "curve: 28 checkpoints" in text
    page = result.save_html(tmp_path / "readiness.html")
    assert page.is_file() and "<title>Readiness: toy seed 1</title>" in page.read_text(encoding="utf-8")
