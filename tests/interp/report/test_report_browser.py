"""The report and the executed notebooks' HTML exports, opened in headless Chromium with the
network cut: no page or console error, every plotly figure drew its SVG with a legend, every
circuitsvis view mounted, no request left the page. A screenshot of each page is saved in the
test's output folder.

The browser is Debian's ``chromium`` driven by playwright (no browser download). ``make test``
installs it when it is missing and the machine allows it; under CI (``CI=true``) a missing
browser fails these tests instead of skipping them.
"""

from __future__ import annotations

import dataclasses
import os
import re
from itertools import pairwise
from pathlib import Path

import pandas as pd
import pytest

from browser import chromium_path, visit
from interp.main_job.report import MainJobReport
from interp.report.notebook import export_notebook_html

#: Page weight limit of the six-run demo report (bytes): plotly.js and the circuitsvis bundle are
#: 6.12 MB of it; the six scrubber sections (issue 26) about 0.35 MB. Raised from 7.0 MB when the
#: tables gained task, hold, unit and jump-noise columns (six-run demo page measured at 7.09 MB);
#: to 7.55 MB when each run's top heads gained their pre / post / post − pre comparison (issue 43:
#: twelve three-panel heatmaps, 7.46 MB measured); to 7.65 MB when the capability figures gained the
#: training loss on a second axis (issue 57), per-seed labels and heatmap cell values (issues 55, 58):
#: 7.59 MB measured (2026-12-03).
MAX_SIX_RUN_PAGE = 7_650_000


def _require_browser() -> None:
    if chromium_path() is None:
        message = (
            "headless Chromium not found (Debian package 'chromium'; `make test` installs it as root, "
            "or set EMERGENCE_LENS_CHROMIUM to its path)"
        )
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)


def _check_page(page: Path, screenshot: Path, probe_js: str | None = None):
    """Open ``page`` and assert everything the module docstring lists; returns the visit (with
    ``probe_js`` evaluated into its ``probe``, as :func:`browser.visit` does)."""
    html = page.read_text(encoding="utf-8")
    result = visit(page, screenshot, probe_js=probe_js)
    assert result.page_errors == [], result.page_errors
    assert result.console_errors == [], result.console_errors
    assert result.blocked == [], f"requests that tried to leave the page: {result.blocked[:5]}"
    assert set(result.requests) == {result.url}
    figures, views = result.state["figs"], result.state["views"]
    assert len(figures) == html.count('class="plotly-graph-div"') > 0
    for fig in figures:
        assert fig["svg"] and fig["traces"] > 0, f"plotly figure {fig['id']} did not draw: {fig}"
        assert fig["legend"] > 0, f"plotly figure {fig['id']} has no legend"
    assert len(views) == len(re.findall(r'<div[^>]*\bid="circuits-vis-', html))
    for view in views:
        assert view["children"] > 0 and view["canvas"] > 100, f"circuitsvis view {view['id']} did not mount: {view}"
    assert result.ready
    assert screenshot.stat().st_size > 10_000
    return result


def six_run_report(report: MainJobReport) -> MainJobReport:
    """A six-run report made of ``report``'s runs repeated under distinct seeds (the demo's shape:
    two sizes x three seeds; only the page's size and layout depend on the run count)."""
    runs = [
        dataclasses.replace(run, seed=run.seed + 10 * k)
        for k in range(6 // len(report.runs) + 1)
        for run in report.runs
    ][:6]
    return MainJobReport(runs=runs, threshold=report.threshold, title=report.title + " (six runs)")


def test_chromium_is_installed_under_ci():
    _require_browser()
    assert Path(chromium_path()).is_file()


def test_report_in_headless_chromium(notebook_runs, tmp_path):
    _require_browser()
    _, out, _ = notebook_runs("main_job")
    report = six_run_report(MainJobReport.load(out / "results"))
    written = report.save(tmp_path / "report")
    page = written["report.html"]
    # plotly.js and the circuitsvis bundle once per page, whatever the number of runs
    html = page.read_text(encoding="utf-8")
    assert html.count("window.CircuitsVis = CircuitsVis") == 1 and html.count("* plotly.js v") == 1
    assert page.stat().st_size <= MAX_SIX_RUN_PAGE, f"report page weighs {page.stat().st_size / 1e6:.2f} MB"
    emerged = sum(r.example_patterns is not None for r in report.runs)
    result = _check_page(page, tmp_path / "report.png")
    # one view per run with patterns: the six-run page repeats each quick run three times, and
    # every run that emerged within the quick suite (at least one, under every kernel level) has them
    shown = sum(r.point.emerged and r.point.pre_step is not None for r in report.runs)
    assert len(result.state["views"]) == emerged == shown >= 3
    # the summary table is first and fits a 1280 px window without cutting columns
    table = result.state["table"]
    assert result.state["width"] == 1280 and table["right"] <= 1280 and table["scroll"] <= table["client"]
    assert html.index("<table") < html.index("plotly-graph-div")


@pytest.mark.parametrize("name", ["main_job", "hub_pythia", "synthetic", "first_hour"])
def test_notebook_export_in_headless_chromium(notebook_runs, tmp_path, name):
    from interp.report.notebook import library_copies

    _require_browser()
    nb, _, _ = notebook_runs(name)
    page = tmp_path / f"{name}.html"
    export_notebook_html(nb, page)
    html = page.read_text(encoding="utf-8")  # each library once, however many outputs carry it
    assert library_copies(html, "plotly") == 1 and library_copies(html, "circuitsvis") <= 1
    result = _check_page(page, tmp_path / f"{name}.png")
    if name != "synthetic":
        assert result.state["views"], "the notebook shows no attention pattern"


#: What the capability overview and the page's tables look like at a width (issue 71): the
#: overview's step axes against its data, its legend's scroll bar, its annotations, where its loss
#: traces are drawn, and every element wider than the window.
_FIT_JS = """() => {
  const heading = [...document.querySelectorAll('h2')].find(h => h.textContent === 'Capability of every run');
  const gd = [...document.querySelectorAll('.plotly-graph-div')].find(
      g => heading.compareDocumentPosition(g) & Node.DOCUMENT_POSITION_FOLLOWING);
  const L = gd._fullLayout, axes = {};
  for (const t of gd._fullData) {
    if (!t.x || !t.x.length) continue;
    const name = t.xaxis, root = L['xaxis' + name.slice(1)].matches || name;
    const xs = Array.from(t.x).filter(v => v !== null);
    axes[root] = axes[root] || {lo: Infinity, hi: -Infinity};
    axes[root].lo = Math.min(axes[root].lo, ...xs); axes[root].hi = Math.max(axes[root].hi, ...xs);
  }
  const ranges = Object.entries(axes).map(([name, d]) => ({name, data: [d.lo, d.hi],
      range: L['xaxis' + name.slice(1)].range}));
  const domain = name => L['yaxis' + name.slice(1)].domain;
  const box = gd.getBoundingClientRect();
  const labels = [...gd.querySelectorAll('g.annotation')].map(a => {
      const r = a.getBoundingClientRect(); return {text: a.textContent, left: r.left - box.left, right: r.right - box.left}; });
  const scroll = gd.querySelector('g.legend .scrollbar');
  const entries = [...gd.querySelectorAll('g.legend g.traces')].map(t => {
      const r = t.getBoundingClientRect(); return {text: t.textContent, left: r.left - box.left, right: r.right - box.left, top: Math.round(r.top)}; });
  const wide = [...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect().right > window.innerWidth + 1)
      .map(e => e.tagName + '.' + e.className);
  const scrolled = [...document.querySelectorAll('.el-table-wrap')].filter(w => w.scrollWidth > w.clientWidth + 1)
      .map(w => w.scrollWidth);
  return {ranges, labels, entries, width: box.width, wide, scrolled, tables: document.querySelectorAll('.el-table-wrap').length,
          legend_scroll: scroll ? scroll.getBoundingClientRect().height : 0,
          loss_domains: gd._fullData.filter(t => t.name.endsWith('training loss (nats)')).map(t => domain(t.yaxis)),
          accuracy_domains: gd._fullData.filter(t => / seed \\d+: /.test(t.name) && !t.name.includes('loss')).map(t => domain(t.yaxis))};
}"""


def demo_shaped_report() -> MainJobReport:
    """Six runs shaped as the demo's (two sizes x three seeds, the d64 runs 3000 steps and the d128
    runs 2000, each with its training loss and a 22-column component table of 21 rows whose values,
    intervals and head lists differ from row to row, as the demo writes)."""
    from tests.interp.report.test_display import make_run

    runs = []
    for model, last in (("neox-2l-64d", 3000), ("neox-2l-128d", 2000)):
        for seed in range(3):
            run = make_run(seed + 1)
            scale = last / 400  # make_run's steps are 0..400
            curve = run.curve.assign(step=(run.curve["step"] * scale).astype(int))
            point = dataclasses.replace(
                run.point, pre_step=int(200 * scale), post_step=int(300 * scale), evaluations=curve.assign(order=1)
            )
            steps = pd.Series(range(0, last, 5))
            loss = pd.DataFrame({"step": steps, "loss": 5.5 - 4 * steps / last, "lr": 1e-3})
            # the demo's rows: every component kind over all heads, then the top-k heads' patterns
            # (k = 1..8, their heads named), each value and share with its own interval
            heads = ["L1H1", "L0H1", "L1H0", "L0H0", "L1H3", "L0H3", "L1H2", "L0H2"]
            kinds = ("pattern", "q", "k", "v", "z", "qk", "ov", "mlp", "mlp_weights", "embed", "unembed", "block")
            rows = [(target, "all", 8, "") for target in kinds]
            rows += [("interaction", "all", 2, "qk ov mlp_weights")]
            rows += [("pattern", f"top-{k}", k, " ".join(heads[:k])) for k in range(1, 9)]
            components = pd.DataFrame(
                [
                    {
                        "model": model, "seed": seed, "pre_step": point.pre_step, "post_step": point.post_step,
                        "target": target, "scope": scope, "k": k, "heads": named, "metric": "p", "unit": "probability",
                        "value": 0.2 + 0.01 * i, "value_lo": 0.15 + 0.01 * i, "value_hi": 0.35 + 0.01 * i,
                        "recovered": -0.5 + 0.2 * i, "recovered_lo": -1.25 + 0.2 * i, "recovered_hi": 2.25 + 0.2 * i,
                        "value_pre": 0.237, "value_post": 0.286, "jump_se": 0.018,
                        "jump_too_small": True, "task": "repetition", "prepend_bos": False,
                    }
                    for i, (target, scope, k, named) in enumerate(rows)
                ]
            )  # fmt: skip
            runs.append(
                dataclasses.replace(
                    run, model=model, seed=seed, point=point, curve=curve, training_loss=loss, components=components
                )
            )
    return MainJobReport(runs=runs, threshold=0.5, title="demo-shaped report (six runs)")


@pytest.mark.parametrize("width", [1280, 800])
def test_the_capability_overview_and_the_tables_fit_the_window(tmp_path, width):
    """At 1280 and 800 px: the overview's step axes end where its data end (plotly's own autorange
    ran on to 10k steps where the data stop at 3k), no label drawn on the plot but the panels'
    titles (no point label to cut or to overlap), a legend with no scroll bar whose entries
    neither overlap nor run past the figure, the loss in panels
    of its own under the accuracy, and at both widths no table scrolled sideways (the component
    tables were 928 px wide at 800 px, their bounds in columns of their own) nor any element
    wider than the window."""
    _require_browser()
    report = demo_shaped_report()
    page = report.save(tmp_path / "report")["report.html"]
    shot = tmp_path / f"report-{width}.png"
    result = visit(page, shot, width=width, probe_js=_FIT_JS)
    assert result.ready and result.page_errors == []
    fit = result.probe
    assert len(fit["ranges"]) == 2  # one step axis per model, shared by its accuracy and loss panels
    for axis in fit["ranges"]:
        lo, hi = axis["data"]
        span = hi - lo
        assert axis["range"][0] >= lo - 0.05 * span and axis["range"][1] <= hi + 0.05 * span, axis
    assert sorted(axis["data"][1] for axis in fit["ranges"]) == [2000, 3000]
    assert sorted(label["text"] for label in fit["labels"]) == ["neox-2l-128d", "neox-2l-64d"]
    assert all(label["left"] >= 0 and label["right"] <= fit["width"] for label in fit["labels"]), fit["labels"]
    assert fit["legend_scroll"] == 0
    # every legend entry inside the figure, none over the next one in its row (at 800 px two a
    # row overlapped: the bisected runs' names are longer than half the plot)
    entries = fit["entries"]
    assert len(entries) == 8 and all(e["left"] >= 0 and e["right"] <= fit["width"] for e in entries), entries
    for row in {e["top"] for e in entries}:
        line = sorted((e for e in entries if e["top"] == row), key=lambda e: e["left"])
        assert all(a["right"] <= b["left"] for a, b in pairwise(line)), line
    assert len(fit["loss_domains"]) == 6 and len(fit["accuracy_domains"]) == 6
    assert max(top for _, top in fit["loss_domains"]) < min(bottom for bottom, _ in fit["accuracy_domains"])
    assert fit["tables"] >= 7  # the summary and the six runs' component tables were measured
    assert fit["scrolled"] == [] and fit["wide"] == [], fit
