"""The answer first (issue 43): the findings a report opens with, and the intervals and noise
marks on every printed share, on hand-built reports whose tables the test wrote itself."""

from __future__ import annotations

import html
import warnings

import numpy as np
import pandas as pd
import pytest
import torch

from interp.emergence import MIN_ACCURACY_PROMPTS, EmergencePoint, warn_few_prompts
from interp.main_job.report import MainJobReport, RunAnalysis
from interp.report.findings import NOISY, findings, interval_text
from interp.tasks import TaskBatch


def make_run(seed: int, recovered=None, interval=(None, None), noisy=False, post=300, model="toy") -> RunAnalysis:
    """A run emerging between ``post - 100`` and ``post`` whose top 2 heads recover ``recovered``
    (None: the run did not emerge), with the top-2 interval ``interval`` and ``jump_too_small=noisy``."""
    emerged = recovered is not None
    steps = [0, 100, 200, 300, 400]
    curve = pd.DataFrame({"step": steps, "accuracy": [0.0, 0.1, 0.3, 0.7, 0.9], "p_answer": 0.1})
    point = EmergencePoint(
        model_id=f"{model}-seed{seed}",
        pre_step=post - 100 if emerged else None,
        post_step=post if emerged else None,
        emerged=emerged,
        threshold=0.5,
        monotone=True,
        n_evaluations=5,
        evaluations=curve.assign(order=range(1, 6)),
    )
    run = RunAnalysis(model=model, seed=seed, model_id=point.model_id, point=point, curve=curve)
    if emerged:
        run.value_pre, run.value_post, run.jump_se = 0.2, 0.6, 0.05
        run.delta = torch.tensor([[0.04, 0.01], [0.02, -0.01]])
        run.heads = pd.DataFrame(
            {
                "layer": [0, 1, 0, 1],
                "head": [0, 0, 1, 1],
                "delta": [0.04, 0.02, 0.01, -0.01],
                "rank": [1, 2, 3, 4],
                "delta_attribution": 0.0,
                "delta_lo": [0.03, 0.01, 0.0, -0.02],
                "delta_hi": [0.05, 0.03, 0.02, 0.0],
                "metric": "p",
                "unit": "probability",
                "jump_too_small": noisy,
            }
        )
        run.topk = pd.DataFrame(
            {
                "k": [1, 2],
                "value": [0.21, 0.2 + 0.4 * recovered],
                "recovered": [0.025, recovered],
                "recovered_lo": [0.0, interval[0]],
                "recovered_hi": [0.05, interval[1]],
                "metric": "p",
                "unit": "probability",
            }
        )
    return run


def three_runs() -> MainJobReport:
    return MainJobReport(
        runs=[
            make_run(1, 0.10, (0.05, 0.15), post=300),
            make_run(2, 0.65, (0.30, 1.70), noisy=True, post=700),
            make_run(3),
        ]
    )


def test_claim_one_words_one_emerged_step_against_a_seed_that_did_not():
    """One seed emerged and one did not: the seeds differ in whether they emerged, not in the step
    (the quick suite's case under the one end-of-run rule, issue 67)."""
    from interp.report.findings import _claim_one

    points = pd.DataFrame(
        {"model": ["toy", "toy"], "seed": [1, 2], "emerged": [False, True], "post_step": [None, 1900],
         "note": ["the crossing at step 2300 has 1 checkpoint after it", ""]}
    )  # fmt: skip
    line = _claim_one(points, 0.5, 2)
    assert "toy: post steps 1900 over 2 seed(s), not emerged by the last checkpoint: seed 1 (the crossing" in line
    assert line.count("(1 of 2 seeds emerged: the seeds differ in whether they emerged)") == 1
    assert "the step differs by seed" not in line


def test_findings_state_what_the_tables_imply():
    report = three_runs()
    lines = report.findings()
    claim_one = (
        "Claim 1 (the capability appears at a seed-dependent step, or never): 2 of 3 runs emerged (greedy "
        "accuracy ≥ 0.5, held for 2 checkpoints); toy: post steps 300, 700 over 3 seed(s), never emerged: seed 3 "
        "(the step differs by seed); one model size: the size part of the claim is not tested."
    )
    claim_two = (
        "Claim 2 (patching the top 2 heads' attention patterns from post into pre recovers most, ≥ 0.5, of the "
        "jump): does not hold on 1 of 1 runs where the jump is measurable: the top 2 recover 0.10 (95 % bootstrap "
        "intervals: toy seed 1 0.10 [0.05, 0.15]); too noisy to say (jump below 3 standard errors): toy seed 2 "
        "(0.65 [0.30, 1.70]); not patched (no point of emergence between two checkpoints): toy seed 3."
    )
    # each run's top heads by Δ (issue 58, item 6); no head scores in these runs: "not scored"
    heads = (
        "Heads (each run's top 2 by Δ, patched alone from post into pre, and what its attention does at the post "
        "step: induction = prefix-matching, previous-token = previous-token score ≥ 0.2): toy seed 1: L0H0 "
        "(Δ +0.040; not scored), L1H0 (Δ +0.020; not scored); toy seed 2 ⚠ noisy: L0H0 (Δ +0.040; not scored), "
        "L1H0 (Δ +0.020; not scored)."
    )
    assert lines == [claim_one, claim_two, heads]
    # the same sentences from the tables alone (what a saved report's CSVs hold)
    assert findings(report.points, report.summary(), threshold=0.5, hold=2, heads=report.heads) == lines
    assert findings(report.points, report.summary(), threshold=0.5, hold=2) == lines[:2]


def test_the_heads_line_names_each_heads_mechanism_at_the_post_step():
    from interp.report.findings import head_mechanism

    rows = [
        # step, layer, head, score, value: L0H0 becomes a previous-token head, L1H0 an induction head
        (200, 0, 0, "previous_token", 0.10), (300, 0, 0, "previous_token", 0.85), (300, 0, 0, "prefix_matching", 0.02),
        (300, 1, 0, "previous_token", 0.05), (300, 1, 0, "prefix_matching", 0.71), (400, 1, 0, "prefix_matching", 0.9),
        (300, 0, 1, "previous_token", 0.12), (300, 0, 1, "prefix_matching", 0.05),
    ]  # fmt: skip
    scores = pd.DataFrame(rows, columns=["step", "layer", "head", "score", "value"])
    assert head_mechanism(scores, 0, 0, 300) == "previous-token, previous-token 0.85"
    assert head_mechanism(scores, 1, 0, 300) == "induction, prefix-matching 0.71"  # the post step's, not step 400's
    assert (
        head_mechanism(scores, 0, 1, 300)
        == "neither previous-token nor induction (prefix-matching 0.05, previous-token 0.12)"
    )
    assert head_mechanism(scores, 1, 1, 300) == "not scored"
    # issue 67 item 5: layer-0 heads with prefix-matching 0.24 and 0.22 are not induction (nothing
    # before them to compose with), nor a layer-1 head while no layer-0 head is a previous-token head
    layer0 = pd.DataFrame(
        [(300, 0, 0, "prefix_matching", 0.24), (300, 0, 0, "previous_token", 0.05)]
        + [(300, 0, 1, "prefix_matching", 0.22), (300, 0, 1, "previous_token", 0.08)]
        + [(300, 1, 0, "prefix_matching", 0.6), (300, 1, 0, "previous_token", 0.01)],
        columns=scores.columns,
    )
    assert head_mechanism(layer0, 0, 0, 300) == (
        "neither previous-token nor induction (prefix-matching 0.24, not induction: layer 0: no earlier layer to "
        "compose with, previous-token 0.05)"
    )
    assert head_mechanism(layer0, 1, 0, 300).startswith(
        "neither previous-token nor induction (prefix-matching 0.60, not induction: no previous-token head in layer 0"
    )
    # just under the rule's 0.2: three decimals, so the number shown does not seem to meet it
    near = pd.DataFrame(
        [(300, 0, 0, "prefix_matching", 0.19798), (300, 0, 0, "previous_token", 0.12)], columns=scores.columns
    )
    assert (
        head_mechanism(near, 0, 0, 300)
        == "neither previous-token nor induction (prefix-matching 0.198, previous-token 0.12)"
    )
    run = make_run(1, 0.8, (0.6, 0.95))
    run.head_scores = scores.assign(model="toy", seed=1)
    line = MainJobReport(runs=[run]).findings()[2]
    assert line.endswith(
        "toy seed 1: L0H0 (Δ +0.040; previous-token, previous-token 0.85), L1H0 (Δ +0.020; induction, "
        "prefix-matching 0.71)."
    )


def test_claim_two_holds_and_undecided_by_the_interval():
    report = MainJobReport(
        runs=[make_run(1, 0.8, (0.6, 0.95)), make_run(2, 0.55, (0.4, 0.7), post=500), make_run(3, 0.2, (0.1, 0.3))]
    )
    claim = report.findings()[1]
    assert "holds on 1, does not hold on 1 and is undecided (interval across 0.5) on 1 of 3 runs" in claim
    assert "the top 2 recover 0.20–0.80" in claim
    one = MainJobReport(runs=[make_run(1, 0.8, (0.6, 0.95))]).findings()
    assert "holds on 1 of 1 runs where the jump is measurable" in one[1]
    assert "one run: a worked example, not a spread" in one[0]


def test_summary_carries_intervals_and_the_noise_mark():
    summary = three_runs().summary()
    row = summary.iloc[1]
    assert (row["recovered_top2"], row["recovered_top2_lo"], row["recovered_top2_hi"]) == (0.65, 0.30, 1.70)
    assert (row["top_delta_lo"], row["top_delta_hi"]) == (0.03, 0.05) and bool(row["jump_too_small"])
    assert row["jump_se"] == 0.05
    assert interval_text(0.65, 0.3, 1.7, 2, noisy=True) == f"0.65 [0.30, 1.70] {NOISY}"
    assert interval_text(0.04, 0.03, 0.05, signed=True) == "+0.040 [+0.030, +0.050]"
    assert interval_text(None) == "—" and interval_text(0.5, np.nan, np.nan, 2) == "0.50"


def test_report_page_opens_on_the_findings():
    report = three_runs()
    page = report.html()
    box = page.index('class="el-findings"')
    assert box < page.index("<table")
    assert "<b>does not hold on 1 of 1 runs</b>" in page and "<b>too noisy to say</b>" in page
    # the summary's recovered and jump cells carry their interval and the noise mark (a cell wraps
    # only before its interval or the mark: no-break spaces inside them)
    nb = "\u00a0"
    assert f"0.65 [0.30,{nb}1.70] ⚠{nb}noisy" in page and f"0.10 [0.05,{nb}0.15]<" in page
    assert f"<b>jump ± s.e.</b> 0.400 ± 0.050 {NOISY}<" in page and "jump below 3 s.e.</" not in page
    # the glossary is folded under the table, not in front of the numbers
    assert page.index('<details class="el-caption"><summary>What the columns mean') > page.index("<table")


def test_cli_summary_prints_intervals_noise_and_findings(capsys, tmp_path):
    from interp.cli.main_job import _print_summary

    _print_summary(three_runs(), tmp_path)
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if "toy seed 2" in line)
    assert f"0.65 [0.30, 1.70] {NOISY}" in row and "L0H0 +0.040 [+0.030, +0.050]" in row and "600 → 700" in row
    assert "0.10 [0.05, 0.15]" in out
    findings_at = out.index("findings (computed from the tables")
    assert out.index("Claim 2 (patching") > findings_at
    assert f"{NOISY}: the run's jump is below 3 standard errors" in out


def test_report_without_intervals_loads_and_says_no_interval(tmp_path):
    """A topk table saved before the intervals existed: NaN bounds, the share marked as such."""
    run = make_run(1, 0.1, (0.05, 0.15))
    run.topk = run.topk.drop(columns=["recovered_lo", "recovered_hi"])
    report = MainJobReport(runs=[run])
    assert report.topk["recovered_lo"].isna().all()
    assert "toy seed 1 0.10 (no interval)" in report.findings()[1]


def test_accuracy_rule_warns_below_the_stated_prompt_count():
    def batch(n):
        return TaskBatch(
            tokens=torch.zeros(n, 4, dtype=torch.long),
            answers=torch.zeros(n, dtype=torch.long),
            answer_pos=torch.full((n,), 3),
        )

    with pytest.warns(RuntimeWarning, match=rf"sees 1 prompt\(s\), fewer than {MIN_ACCURACY_PROMPTS}"):
        warn_few_prompts(batch(1), "toy")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warn_few_prompts(batch(MIN_ACCURACY_PROMPTS), "toy")


def test_topk_figure_draws_the_interval_band():
    from interp.report.figures import recovery_run_figure

    run = make_run(1, 0.1, (0.05, 0.15))
    fig = recovery_run_figure(run.topk, noisy=True)
    band = [t for t in fig.data if t.fill == "tonexty"]
    assert len(band) == 1 and band[0].name == "95 % bootstrap interval over prompts"
    assert list(band[0].y) == [0.0, 0.05] and list(fig.data[-2].y) == [0.05, 0.15]
    assert "noisy" in fig.layout.title.text
    assert "tonexty" in three_runs().html()


def test_heatmap_as_a_fraction_of_each_runs_jump():
    report = MainJobReport(runs=[make_run(1, 0.1, (0.05, 0.15)), make_run(2, 0.2, (0.1, 0.3), post=500)])
    report.runs[1].value_post = 0.3  # a jump of 0.1 instead of 0.4
    absolute, relative = report.heatmaps(), report.heatmaps(relative=True)
    np.testing.assert_allclose(np.asarray(absolute[1].data[0].z), [[0.04, 0.01], [0.02, -0.01]], atol=1e-7)
    np.testing.assert_allclose(
        np.asarray(relative[0].data[0].z), np.array([[0.04, 0.01], [0.02, -0.01]]) / 0.4, atol=1e-6
    )
    np.testing.assert_allclose(
        np.asarray(relative[1].data[0].z), np.array([[0.04, 0.01], [0.02, -0.01]]) / 0.1, atol=1e-6
    )
    # one range in fractions of the jump: the larger run's top head, 0.04 / 0.1
    assert relative[0].data[0].zmax == relative[1].data[0].zmax == pytest.approx(0.4)
    np.testing.assert_allclose(np.asarray(relative[1].data[0].customdata), absolute[1].data[0].z)
    assert "as a fraction of the run's jump" in html.unescape(report.html())  # a figure's title is HTML text


def bisected_run() -> RunAnalysis:
    """A run whose search evaluated 9 of its 28 checkpoints by bisection."""
    run = make_run(1, 0.1, (0.05, 0.15))
    steps = [0, 100, 400, 900, 1300, 1400, 1500, 1600, 2700]
    run.curve = pd.DataFrame({"step": steps, "accuracy": np.linspace(0, 1, 9), "p_answer": np.linspace(0, 0.8, 9)})
    run.point.pre_step, run.point.post_step, run.point.search = 1300, 1400, "bisection"
    steps = range(0, 2800, 100)
    run.checkpoints = pd.DataFrame(
        {
            "step": steps,
            "revision": [f"step{s}" for s in steps],
            "tokens": 0,
            "digest": [f"d{s}" for s in steps],
            "status": "searchable",
            "same_weights_as": pd.NA,
            "detail": "",
            "listing": "",
        }
    )
    return run


def test_a_bisection_curve_draws_evaluated_points_only_and_says_so():
    from interp.report import page as vis

    run = bisected_run()
    section = vis.capability_section(run, vis.ReportContext(assets=vis.Assets()))
    assert "bisection: 9 of 28 checkpoints evaluated" in section.body
    fig = vis.run_capability_figure(run.curve, 1300, 1400, search="bisection", n_checkpoints=28)
    assert [t.mode for t in fig.data[:2]] == ["markers", "markers"]
    assert fig.layout.annotations[0].text.startswith("bisection: 9 of 28 checkpoints")
    scanned = vis.run_capability_figure(run.curve, 1300, 1400)
    assert [t.mode for t in scanned.data[:2]] == ["lines+markers"] * 2 and not scanned.layout.annotations
    scan, unknown = make_run(2, 0.2, (0.1, 0.3)), make_run(3, 0.2, (0.1, 0.3))
    scan.point.search = "scan"  # unknown: a bisection whose run has no checkpoint table
    overview = MainJobReport(runs=[run, scan, unknown]).capability_figure()
    modes = {t.name: t.mode for t in overview.data if t.name and "seed" in t.name and not t.name.startswith("★")}
    # each run's legend entry says its span (issue 55, item 3; in the legend since issue 71: a label
    # drawn beside each star was cut at the panel's edge and overlapped the next at 800 px)
    assert modes == {
        "toy seed 1: 1300→1400 (bisection: 9 of 28 checkpoints)": "markers",
        "toy seed 2: 200→300": "lines+markers",
        "toy seed 3: 200→300 (bisection: 5 checkpoints)": "markers",
    }
    assert sorted(t.text[0] for t in overview.data if t.name and t.name.startswith("★")) == [
        "seed 1: 1300→1400",
        "seed 2: 200→300",
        "seed 3: 200→300",
    ]  # and each star's hover
    assert not [a.text for a in overview.layout.annotations if a.text.startswith("seed")]  # nothing on the plot
    assert overview.layout.xaxis.type == "linear"
    # names past half an 800 px plot get a row each; short ones two a row
    assert overview.layout.legend.entrywidth == 1.0
    other = make_run(4, 0.2, (0.1, 0.3))
    other.point.search = "scan"
    short = MainJobReport(runs=[scan, other]).capability_figure()
    assert short.layout.legend.entrywidth == 0.5


def test_component_table_shows_each_value_with_its_interval_in_one_cell():
    from interp.core.html_fragments import table_fragment
    from interp.report.findings import COMPONENT_WRAPPING, components_display

    components = pd.DataFrame(
        {
            "target": ["pattern", "interaction"], "scope": ["top-2", "all"], "heads": ["L1H1 L0H1", "qk ov"],
            "value": [0.2852, np.nan], "value_lo": [0.2235, np.nan], "value_hi": [0.3534, np.nan],
            "recovered": [0.9775, -0.22], "recovered_lo": [0.5627, -0.73], "recovered_hi": [2.2571, -0.03],
            "jump_se": [0.018, 0.018],
        }
    )  # fmt: skip
    shown = components_display(components)
    assert list(shown.columns) == ["target", "scope", "heads", "value [95 % CI]", "recovered [95 % CI]", "jump_se"]
    assert list(shown["value [95 % CI]"]) == ["0.285 [0.224, 0.353]", "—"]
    assert list(shown["recovered [95 % CI]"]) == ["0.98 [0.56, 2.26]", "-0.22 [-0.73, -0.03]"]
    html = table_fragment(shown, fold_constant=True, wrap=COMPONENT_WRAPPING)
    assert '<td class="el-wrap">L1H1 L0H1</td>' in html and "<td>0.285 [0.224, 0.353]</td>" in html
    assert "Every row: jump_se <b>0.018</b>" in html  # the run's own value, folded above the table
    assert components_display(components.drop(columns=["value_hi"]))["value"].iloc[0] == 0.2852  # no pair: as is


def test_the_page_a_reader_opens_answers_first(tmp_path):
    """Headless Chromium, network cut: the findings box is the first thing on the page (inside the
    first 900 px), the summary fits 1280 px, the top-K band and the head comparison drew."""
    from tests.interp.report.test_report_browser import _check_page, _require_browser

    _require_browser()
    run = bisected_run()
    pre, post = torch.rand(6, 6).tril().softmax(-1), torch.rand(6, 6).tril().softmax(-1)
    run.example_patterns = torch.stack([pre, post])
    run.example_names = ["L0H1 pre (step 1300)", "L0H1 post (step 1400)"]
    run.example_tokens = [" 7", " 3", "\n", "<b>", " 7", " 3"]
    report = three_runs()
    report.runs[0] = run
    page = report.save(tmp_path / "report")["report.html"]
    probe = """() => {
        const box = document.querySelector('.el-findings').getBoundingClientRect();
        const table = document.querySelector('table.el-table').getBoundingClientRect();
        const plots = Array.from(document.querySelectorAll('.plotly-graph-div'));
        return {box_top: box.top, box_bottom: box.bottom, table_top: table.top, table_right: table.right,
                band: plots.some(p => p.data.some(t => t.fill === 'tonexty')),
                triple: plots.filter(p => p.data.filter(t => t.type === 'heatmap').length === 3).length,
                text: document.querySelector('.el-findings').innerText};
    }"""
    result = _check_page(page, tmp_path / "report.png", probe_js=probe)
    probe = result.probe
    assert probe["box_bottom"] < 900 and probe["box_top"] < probe["table_top"]
    assert probe["table_right"] <= 1280
    assert probe["band"] and probe["triple"] == 1
    assert "does not hold on 1 of 1 runs" in probe["text"] and "too noisy to say" in probe["text"]


def test_a_noisy_runs_heatmap_keeps_its_own_range_and_says_so():
    from interp.report import page as vis

    report = three_runs()  # seed 2 is noisy: its own range; seed 1 the page's
    ctx = vis.page_context(report.runs, vis.Assets(), 0.5)
    # the captions as text (the templates write an apostrophe as &#39;)
    noisy = html.unescape(vis.delta_p_section(report.runs[1], ctx).body)
    clean = html.unescape(vis.delta_p_section(report.runs[0], ctx).body)
    assert "on this run's own range (its jump is below 3 s.e." in noisy and "own range" not in clean
    assert "on one range for every run of the page whose jump stands above its noise" in clean


def test_run_with_a_one_prompt_task_file_warns_and_marks_the_noise(tmp_path, tiny_local_suite):
    from typer.testing import CliRunner

    from emergence_lens.cli import app

    task = tmp_path / "one.jsonl"
    task.write_text('{"prompt": "7 3 1 2 0 2 3 0 7 3 1 2 0 2 ", "answer": "3"}\n')
    result = CliRunner().invoke(
        app, ["run", str(tiny_local_suite), "--task-file", str(task), "--out", str(tmp_path / "o")]
    )
    assert result.exit_code == 0, result.output
    assert f"the accuracy rule sees 1 prompt(s), fewer than {MIN_ACCURACY_PROMPTS}" in result.output
    assert "findings (computed from the tables" in result.output
