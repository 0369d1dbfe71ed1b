"""Rich display, the report's section list, save/load and provenance, on hand-built runs (no model).

A run here is a RunAnalysis filled with known tables and tensors, so every check compares with
values the test wrote itself.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest
import torch

from interp.core.provenance import make_provenance, package_versions, source_digests
from interp.emergence import EmergencePoint
from interp.main_job.report import MainJobReport, RunAnalysis
from interp.report import display, notebook
from interp.report import page as vis
from interp.tasks import CapabilityScore

N_LAYERS, N_HEADS, N_TOKENS = 2, 3, 7


def make_run(seed: int, emerged: bool = True) -> RunAnalysis:
    """A run whose accuracy crosses 0.5 between steps 200 and 300 (when ``emerged``)."""
    steps = [0, 100, 200, 300, 400]
    accuracy = [0.0, 0.1, 0.3, 0.7, 0.9] if emerged else [0.0, 0.1, 0.1, 0.2, 0.2]
    curve = pd.DataFrame({"step": steps, "accuracy": accuracy, "p_answer": [a * 0.8 for a in accuracy]})
    evaluations = curve.assign(order=range(1, len(steps) + 1))
    point = EmergencePoint(
        model_id=f"toy/model-seed{seed}",
        pre_step=200 if emerged else None,
        post_step=300 if emerged else None,
        emerged=emerged,
        threshold=0.5,
        monotone=True,
        n_evaluations=len(steps),
        evaluations=evaluations,
        excluded_steps={100: 0} if seed == 2 else {},
    )
    run = RunAnalysis(model="toy", seed=seed, model_id=point.model_id, point=point, curve=curve)
    if emerged:
        generator = torch.Generator().manual_seed(seed)
        run.delta = torch.rand(N_LAYERS, N_HEADS, generator=generator) * 0.1 - 0.02
        order = torch.argsort(run.delta.flatten(), descending=True)
        run.heads = pd.DataFrame(
            {
                "layer": (order // N_HEADS).numpy(),
                "head": (order % N_HEADS).numpy(),
                "delta": run.delta.flatten()[order].double().numpy(),
                "rank": np.arange(1, N_LAYERS * N_HEADS + 1),
                "delta_attribution": 0.0,
                "delta_lo": 0.0,
                "delta_hi": 0.0,
                "metric": "p",
                "unit": "probability",
            }
        )
        run.value_pre, run.value_post = 0.24, 0.56
        run.topk = pd.DataFrame({"k": [1, 2, 3], "value": [0.3, 0.4, 0.45], "metric": "p", "unit": "probability"})
        run.topk["recovered"] = (run.topk["value"] - run.value_pre) / (run.value_post - run.value_pre)
        scores = torch.rand(4, N_TOKENS, N_TOKENS, generator=generator).tril()
        run.example_patterns = scores / scores.sum(-1, keepdim=True)
        run.example_tokens = [f"t{i}" for i in range(N_TOKENS)]
        run.example_names = ["L1H0 pre", "L1H0 post", "L0H2 pre", "L0H2 post"]
    return run


@pytest.fixture
def report() -> MainJobReport:
    return MainJobReport(runs=[make_run(1), make_run(2), make_run(3, emerged=False)], title="toy report")


@pytest.fixture(autouse=True)
def no_network_probe(monkeypatch):
    """Rendering must never reach circuitsvis's network probe (a request to google.com)."""
    import circuitsvis.utils.render as render

    def refuse(*_, **__):
        raise AssertionError("circuitsvis probed the network")

    monkeypatch.setattr(render, "internet_on", refuse)


def test_report_page_inlines_each_library_once_and_loads_nothing(report):
    page = report.html()
    assert page.count("* plotly.js v") == 1 and page.count("window.CircuitsVis = CircuitsVis") == 1
    assert page.index("window.CircuitsVis") < page.index("<body>")  # libraries in <head>, before any view
    assert not re.search(r"<script[^>]*\bsrc=|<link[^>]*\bhref=|from\s+[\"']https?://|unpkg\.com", page)
    emerged = [r for r in report.runs if r.example_patterns is not None]
    assert len(re.findall(r'<div id="circuits-vis-', page)) == len(emerged) == 2
    assert not re.search(r'<div id="circuits-vis-[^>]*/>', page)  # no self-closing mount
    # the attention props are the run's own patterns (second query row of the first head, 4 decimals)
    row = [round(v, 4) for v in emerged[0].example_patterns[0, 1, :2].double().tolist()]
    assert f"[{row[0]}, {row[1]}, 0.0, 0.0, 0.0, 0.0, 0.0]" in page
    # a library adds its weight once: a page with twice the runs grows by the runs only
    double = MainJobReport(runs=report.runs * 2, title="toy").html()
    libraries = len(display.plotly_script()) + len(display.circuitsvis_script())
    assert len(double) - len(page) < len(page) - libraries


def test_summary_first_then_every_run_with_its_sections(report):
    page = report.html()
    body = page[page.index("<body>") :]
    assert body.index("<table") < body.index("plotly-graph-div")
    for run in report.runs:
        assert f'id="{vis.run_anchor(run)}"' in page and f'href="#{vis.run_anchor(run)}"' in page
    run_part = page[
        page.index(f'id="{vis.run_anchor(report.runs[0])}"') : page.index(f'id="{vis.run_anchor(report.runs[1])}"')
    ]
    headings = re.findall(r"<h3>([^<]*)</h3>", run_part)
    assert headings == [
        "Capability and point of emergence",
        "Δp per head",
        "Top-K recovery",
        "Attention patterns of the top heads — toy seed 1 · repetition (prompt 0)",
    ]
    assert "did not emerge between two checkpoints" in page[page.index(f'id="{vis.run_anchor(report.runs[2])}"') :]
    assert "duplicate of step 0" in page  # seed 2's excluded step is reported as a hazard


def test_a_new_section_is_one_line(report, monkeypatch):
    def loss_marker(run, ctx):
        return vis.Section("Marker section", f"<p>marker for seed {run.seed}</p>")

    monkeypatch.setattr(vis, "RUN_SECTIONS", vis.RUN_SECTIONS + [loss_marker])
    page = report.html()
    assert [int(s) for s in re.findall(r"marker for seed (\d+)", page)] == [1, 2, 3]


def test_slot_sections_show_when_a_run_carries_their_table(report):
    run = report.runs[0]
    run.training_loss = pd.DataFrame({"step": [0, 100, 200, 300], "loss": [5.0, 3.0, 2.9, 1.0]})
    run.components = pd.DataFrame({"target": ["pattern", "hook_z"], "scope": ["all", "all"], "recovered": [0.4, 0.6]})
    run.head_scores = pd.DataFrame(
        {
            "step": [0, 300, 0, 300],
            "layer": 1,
            "head": 0,
            "score": ["prefix-matching"] * 2 + ["previous-token"] * 2,
            "value": [0.1, 0.9, 0.2, 0.3],
        }
    )
    page = report.html()
    for heading in ("Training loss", "Where the jump lives: component decomposition", "Head scores per checkpoint"):
        assert page.count(f"<h3>{heading}</h3>") == 1


def test_every_figure_has_a_legend(report):
    run = report.runs[0]
    figures = [
        report.capability_figure(),
        report.recovery_figure(),
        *report.heatmaps(),
        vis.run_capability_figure(run.curve, 200, 300),
        vis.recovery_run_figure(run.topk),
    ]
    for fig in figures:
        assert fig.layout.showlegend is True
        named = [t.name for t in fig.data if t.showlegend is not False and t.name]
        assert named, fig.layout.title.text


@pytest.mark.slow
def test_every_notebook_output_carries_its_libraries(report):
    """Assets are deduplicated per output, not per process: the same display twice (a cell run
    again), a run after the report, and a second attention view each carry what they draw with,
    once."""
    for html in (
        report._repr_html_(),
        report._repr_html_(),
        report.runs[0]._repr_html_(),
        report.runs[0]._repr_html_(),
    ):
        assert html.count("* plotly.js v") == 1 and html.count("window.CircuitsVis = CircuitsVis") == 1
    run = report.runs[0]
    views = [display.show_attention(run.example_tokens, run.example_patterns, run.example_names) for _ in range(2)]
    for view in views + views:
        html = view._repr_html_()
        assert html.count("window.CircuitsVis = CircuitsVis") == 1 and "* plotly.js v" not in html
        assert len(html) > len(display.circuitsvis_script())
    assert "* plotly.js v" in run.point._repr_html_() and "* plotly.js v" in run.point._repr_html_()


@pytest.mark.slow
def test_save_html_writes_a_self_contained_page_whatever_was_displayed(report, tmp_path):
    from interp.decomposition import COMPONENT_COLUMNS
    from interp.ranking import HeadRanking

    run = report.runs[0]
    report._repr_html_()  # displayed before: must not matter
    ranking = HeadRanking(
        value_pre=run.value_pre,
        value_post=run.value_post,
        delta=run.delta,
        heads=run.heads.assign(jump_too_small=False),
        topk=run.topk,
        post_patterns=torch.zeros(1),
        example_tokens=run.example_tokens,
        example_patterns=run.example_patterns,
        example_names=run.example_names,
        jump_se=0.01,
    )
    components = pd.DataFrame(
        [
            dict.fromkeys(COMPONENT_COLUMNS)
            | {
                "model": "toy",
                "seed": 1,
                "target": "pattern",
                "scope": "all",
                "k": 6,
                "heads": "",
                "metric": "p",
                "value": 0.5,
                "recovered": 0.8,
                "recovered_lo": 0.7,
                "recovered_hi": 0.9,
                "value_pre": 0.24,
                "value_post": 0.56,
            }
        ]
    )
    view = display.show_attention(run.example_tokens, run.example_patterns, run.example_names)
    view._repr_html_()
    cases = [
        (report, 1, 1),
        (run, 1, 1),
        (ranking, 1, 1),
        (view, 0, 1),
        (run.point, 1, 0),
        (CapabilityScore(accuracy=0.5, p_answer=0.25, n_prompts=8), 0, 0),
        (components, 1, 0),
    ]
    for i, (obj, plotly, circuitsvis) in enumerate(cases):
        path = tmp_path / "pages" / f"{i}.html"
        written = display.save_html(obj, path) if isinstance(obj, pd.DataFrame) else obj.save_html(path)
        page = written.read_text()
        assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>"), type(obj)
        assert page.count("* plotly.js v") == plotly and page.count("window.CircuitsVis = CircuitsVis") == circuitsvis
        assert not [p for p in path.parent.iterdir() if p.name.startswith(".")]  # atomic: no temporary left
    assert "<th>jump standard error</th><td>0.01</td>" in (tmp_path / "pages" / "2.html").read_text()
    with pytest.raises(TypeError, match="int has no HTML form"):
        display.save_html(3, tmp_path / "x.html")


def test_point_and_score_display_their_values():
    run = make_run(1)
    html = run.point._repr_html_()
    assert "<th>pre_step</th><td>200</td>" in html and "<th>post_step</th><td>300</td>" in html
    assert "plotly-graph-div" in html
    score = CapabilityScore(accuracy=0.625, p_answer=0.4375, n_prompts=64)._repr_html_()
    assert "0.6250" in score and "0.4375" in score and "<td>64</td>" in score and "width:62.5%" in score


def test_the_rule_is_stated_in_legend_and_captions_and_kept_by_save_load(tmp_path):
    from interp.core.terms import rule_text

    report = MainJobReport(runs=[make_run(1), make_run(3, emerged=False)], hold=3)
    page = report.html()
    assert f"the point of emergence: {rule_text(3)}" in page  # the summary legend, with the report's hold
    assert f"Point of emergence: {rule_text(2)}." in page  # each run's caption, with its point's hold
    assert "No checkpoint crosses the threshold and holds." in page
    assert "<th>hold (checkpoints)</th><td>2</td>" in report.runs[0].point._repr_html_()
    assert report.summary()["monotone"].tolist() == [True, True]
    report.save(tmp_path)
    again = MainJobReport.load(tmp_path)
    assert again.hold == 3 and again.summary_legend == report.summary_legend
    assert again.points[["hold", "search"]].values.tolist() == [[2, "bisection"], [2, "bisection"]]


@pytest.mark.slow
def test_save_load_brings_back_tables_tensors_and_figures(report, tmp_path):
    report.provenance = make_provenance("tests.interp.report.test_display", {"threshold": 0.5})
    report.runs[0].training_loss = pd.DataFrame({"step": [0, 100], "loss": [5.0, 4.0]})  # a field added later
    written = report.save(tmp_path)
    assert {"report.html", "provenance.json", "state/report.json"} <= set(written)
    again = MainJobReport.load(tmp_path)
    for name in ("emergence", "points", "heads", "topk"):
        pd.testing.assert_frame_equal(getattr(again, name), getattr(report, name))
    pd.testing.assert_frame_equal(again.summary(), report.summary())
    for a, b in zip(again.runs, report.runs):
        assert (a.delta is None) == (b.delta is None)
        if b.delta is not None:
            assert torch.equal(a.delta, b.delta) and torch.equal(a.example_patterns, b.example_patterns)
            assert a.example_names == b.example_names and a.value_pre == b.value_pre
        assert a.point.excluded_steps == b.point.excluded_steps
        pd.testing.assert_frame_equal(a.point.evaluations, b.point.evaluations)
    pd.testing.assert_frame_equal(again.runs[0].training_loss, report.runs[0].training_loss)
    assert again.provenance == json.loads((tmp_path / "provenance.json").read_text())
    assert re.sub(r"[0-9a-f]{8}-[0-9a-f-]{27}|circuits-vis-[0-9a-f-]{13}", "", again.html()) == re.sub(
        r"[0-9a-f]{8}-[0-9a-f-]{27}|circuits-vis-[0-9a-f-]{13}", "", report.html()
    )


def test_a_page_without_attention_views_carries_no_circuitsvis_bundle():
    page = MainJobReport(runs=[make_run(5, emerged=False)], title="none emerged").html()
    assert "window.CircuitsVis" not in page and page.count("* plotly.js v") == 1


def test_load_refuses_a_folder_without_a_report(tmp_path):
    with pytest.raises(ValueError, match="holds no saved report"):
        MainJobReport.load(tmp_path)


def test_provenance_records_call_settings_versions_and_sources():
    from importlib import metadata

    record = make_provenance(
        "interp.main_job.runner.run_study", {"threshold": 0.5, "sources": ["a"]}, {"a": {"step1": "ff"}}
    )
    assert record["call"] == "interp.main_job.runner.run_study" and record["settings"]["threshold"] == 0.5
    assert record["packages"]["torch"] == metadata.version("torch") == package_versions()["torch"]
    digests = source_digests()
    assert "interp/main_job/runner.py" in digests["files"] and record["source"]["combined"] == digests["combined"]
    import hashlib
    from pathlib import Path

    here = Path(__file__).resolve().parents[3] / "interp" / "report" / "display.py"
    assert digests["files"]["interp/report/display.py"] == hashlib.sha256(here.read_bytes()).hexdigest()
    assert record["checkpoints"] == {"a": {"step1": "ff"}}
    import subprocess

    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=here.parents[1], capture_output=True, text=True
    ).stdout.strip()
    assert digests["git_commit"] == (head or None)


def test_assets_reject_an_unknown_library():
    with pytest.raises(ValueError, match="unknown library 'd3'"):
        display.Assets().require("d3")


def test_train_result_displays_summary_and_figures():
    from synthetic.training import TrainConfig, train

    result = train(
        TrainConfig(
            task="linear-map",
            S=4,
            s=2,
            n_heads=2,
            d_head=4,
            steps=20,
            tokens_per_step=64,
            eval_every=10,
            eval_tokens=64,
        ),
        progress=False,
    )
    html = result._repr_html_()
    assert f"{result.summary['final_loss']:.4g}" in html
    assert html.count("plotly-graph-div") == 4  # loss, staircase, entropy, alignment


def test_a_per_step_loss_curve_is_thinned_for_the_page():
    loss = pd.DataFrame({"step": np.arange(3001), "loss": np.linspace(5.0, 1.0, 3001)})
    thinned = vis.thin_curve(loss)
    steps = list(thinned["step"])
    assert len(steps) <= vis.MAX_CURVE_POINTS + 1 and steps[-1] == 3000 and steps[0] == 0
    assert np.all(np.diff(steps) > 0)
    fig = vis.loss_curve_figure(thinned, smooth=1)
    assert len(fig.data[0].x) == len(steps)


@pytest.mark.slow
def test_notebook_export_keeps_each_library_once():
    """Every output carries plotly.js (so it works alone in Jupyter); the exported page, where all
    outputs share one window, keeps the first copy only (nbconvert rewrites the tags' quotes)."""
    import nbformat

    library = display.plotly_script()
    nb = nbformat.v4.new_notebook()
    for k in range(3):
        cell = nbformat.v4.new_code_cell(f"figure {k}")
        html = display.Assets().require("plotly") + f"<div id='fig{k}'>figure {k}</div>"
        cell.outputs = [nbformat.v4.new_output("display_data", data={"text/html": html})]
        nb.cells.append(cell)
    page = notebook.export_notebook_html(nb)
    assert page.count("* plotly.js v") == 1
    assert len(library) < len(page) < 1.5 * len(library)
    assert all(f"figure {k}" in page for k in range(3))
    assert page.index("* plotly.js v") < page.index("fig0")  # before the first output that uses it


def test_keep_first_copy_drops_whole_elements_only():
    body = "var lib = 1;" * 200
    library = f"<script type='text/javascript'>{body}</script><script>var config = 1;</script>"
    page = (
        f'<script type="text/javascript">{body}</script><script>var config = 1;</script><p>one</p>'
        f'<script type="text/javascript">{body}</script><script>var config = 1;</script><p>two</p>'
        f"<pre>{body}</pre><p>three</p>"
    )
    kept = notebook._keep_first_copy(page, [library])
    assert kept == (
        f'<script type="text/javascript">{body}</script><script>var config = 1;</script><p>one</p>'
        f"<script>var config = 1;</script><p>two</p><pre>{body}</pre><p>three</p>"
    )
    assert notebook._keep_first_copy("<p>no library here</p>", [library]) == "<p>no library here</p>"
