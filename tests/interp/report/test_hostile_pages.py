"""Token and prompt text is data, never markup (issue 20, items 3 and 4; issue 22, item 3).

Every place where tokenizer or user text reaches a page (the attention views through circuitsvis,
plotly titles, legends and hover text, tables, the notebook displays, the report's sections) is
fed hostile text: ``"<!--"`` then ``"<script>"`` (which would put the HTML parser into the
"script data double escaped" state and swallow the rest of the page), ``"</script>"``, U+2028,
quotes, ``"&"`` and an ``<img onerror>``. Each page is parsed by Python's ``html.parser`` (no
hostile tag appears as an element, no script body can leave or re-enter the script state, the
text comes back as text) and opened in headless Chromium (every figure and view draws, no
error, no request, the tokens shown as text).

A notebook whose figure, attention and report cells are each run twice, then exported to HTML,
draws every output in Chromium: the libraries sit once in the first cell's output
(``init_notebook``, :mod:`interp.report.notebook`), above every output that draws with them.
"""

from __future__ import annotations

import dataclasses
import re
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest
import torch

from browser import visit
from conftest import execute_cells_twice
from interp.decomposition import COMPONENT_COLUMNS
from interp.main_job.report import MainJobReport
from interp.ranking import HeadRanking
from interp.report import display, notebook
from tests.interp.report.test_display import make_run
from tests.interp.report.test_report_browser import _check_page, _require_browser

#: The hostile tokens, in the order that triggers the double-escaped state.
HOSTILE = ["<!--", "<script>", "</script>", "\u2028", "\"q'", "&amp;", "<img src=x onerror=window.__pwned=1>", "<b>"]
HOSTILE_MODEL = "m<!--<script>&\"'"
HOSTILE_TITLE = 'report <!-- <script> </script> & "q"'
#: Tags the hostile text would create if it were read as markup.
FORBIDDEN_TAGS = {"img"}


class _Page(HTMLParser):
    """Script bodies, start tags and the text outside scripts and styles of a page."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.scripts: list[str] = []
        self.tags: list[str] = []
        self.text: list[str] = []
        self._in: str | None = None

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag in ("script", "style"):
            self._in = tag
            if tag == "script":
                self.scripts.append("")

    def handle_endtag(self, tag):
        if tag == self._in:
            self._in = None

    def handle_data(self, data):
        if self._in == "script":
            self.scripts[-1] += data
        elif self._in is None:
            self.text.append(data)


def parse(page: str) -> _Page:
    parser = _Page()
    parser.feed(page)
    parser.close()
    return parser


def hostile_run(seed: int = 1):
    run = make_run(seed)
    n = run.example_patterns.shape[-1]
    run.model, run.model_id = HOSTILE_MODEL, f"org/{HOSTILE_MODEL}-seed{seed}"
    run.point = dataclasses.replace(run.point, model_id=run.model_id)
    run.example_tokens = (HOSTILE * 2)[:n]
    run.example_names = [f"{name} {HOSTILE[i % 3]}" for i, name in enumerate(run.example_names)]
    run.components = pd.DataFrame(
        [
            dict.fromkeys(COMPONENT_COLUMNS)
            | {
                "model": HOSTILE_MODEL,
                "seed": seed,
                "target": "pattern",
                "scope": "all",
                "k": 6,
                "heads": "</script>",
                "metric": "p",
                "value": 0.5,
                "recovered": 0.8,
                "recovered_lo": 0.7,
                "recovered_hi": 0.9,
                "value_pre": 0.24,
                "value_post": 0.56,
                "jump_se": 0.01,
                "jump_too_small": False,
            }
        ]
    )
    run.head_scores = pd.DataFrame(
        {
            "model": HOSTILE_MODEL,
            "seed": seed,
            "step": [0, 300, 0, 300],
            "layer": 1,
            "head": 0,
            "score": ["prefix_matching"] * 2 + ["previous_token"] * 2,
            "value": [0.1, 0.9, 0.2, 0.3],
        }
    )
    run.checkpoints = pd.DataFrame(
        {
            "step": [0, 100],
            "revision": ["step0", HOSTILE[1]],
            "tokens": [0, 1],
            "digest": ["a", "a"],
            "status": ["searchable", "duplicate-excluded"],
            "same_weights_as": [None, "0"],
            "listing": [None, None],
        }
    )
    return run


def check_parsed(page: str, texts: list[str]) -> _Page:
    """No hostile element, no script body that can leave or re-enter the script state, and each
    of ``texts`` back as text outside the scripts."""
    parsed = parse(page)
    assert not FORBIDDEN_TAGS & set(parsed.tags), sorted(FORBIDDEN_TAGS & set(parsed.tags))
    for body in parsed.scripts:
        assert "<!--" not in body and "</script" not in body.lower(), body[:200]
    text = "".join(parsed.text)
    for expected in texts:
        assert expected in text, expected
    return parsed


#: The text the circuitsvis views show (head names; the tokens themselves are drawn on a canvas).
_VIEW_TEXT_JS = (
    """() => [...document.querySelectorAll('div[id^="circuits-vis-"]')].map(el => el.innerText).join('\\n')"""
)
_PWNED_JS = "() => window.__pwned === undefined"


def check_drawn(page: Path, screenshot: Path):
    """``_check_page``'s checks for a page that may hold no figure (an attention view alone)."""
    html = page.read_text(encoding="utf-8")
    result = visit(page, screenshot)
    assert result.page_errors == [] and result.console_errors == [], (result.page_errors, result.console_errors)
    assert result.blocked == [] and set(result.requests) == {result.url}
    figures, views = result.state["figs"], result.state["views"]
    assert len(figures) == html.count('class="plotly-graph-div"') and all(f["svg"] and f["traces"] for f in figures)
    assert len(views) == len(re.findall(r'<div[^>]*\bid="circuits-vis-', html)) and figures + views
    assert all(v["children"] and v["canvas"] > 100 for v in views) and result.ready
    return result


def open_in_chromium(page: Path, screenshot: Path, width: int = 1280):
    """One visit (the full checks at 1280 px) that also reads the views' text, whether any
    injected script ran, and the title: ``(visit, [view text, clean, title])``."""
    probe = f"() => [({_VIEW_TEXT_JS})(), ({_PWNED_JS})(), document.title]"
    if width == 1280:
        result = _check_page(page, screenshot, probe_js=probe)
    else:
        result = visit(page, screenshot, width=width, probe_js=probe)
    return result, result.probe


@pytest.mark.slow
def test_hostile_tokens_in_the_report_page(tmp_path):
    _require_browser()
    report = MainJobReport(runs=[hostile_run(1), hostile_run(2)], title=HOSTILE_TITLE)
    page = report.save_html(tmp_path / "report.html")
    html = page.read_text(encoding="utf-8")
    check_parsed(html, [HOSTILE_TITLE, HOSTILE_MODEL, "</script>"])  # title, summary table, components table
    assert "<h3>Attention patterns of the top heads" in html and "Checkpoint hazards" in html
    result, (view_text, clean, title) = open_in_chromium(page, tmp_path / "report.png")
    assert len(result.state["views"]) == 2 and len(result.state["figs"]) == html.count('class="plotly-graph-div"') >= 8
    assert clean and title == HOSTILE_TITLE
    for token in ("<!--", "<script>", "</script>"):  # the head names, shown as text (the tokens go to a canvas)
        assert token in view_text, (token, view_text[:300])
    visit(page, tmp_path / "report-800.png", width=800)


@pytest.mark.slow
def test_hostile_tokens_in_every_notebook_display_and_saved_view(tmp_path):
    _require_browser()
    run = hostile_run(3)
    ranking = HeadRanking(
        value_pre=run.value_pre,
        value_post=run.value_post,
        delta=run.delta,
        heads=run.heads.assign(jump_too_small=True),
        topk=run.topk,
        post_patterns=torch.zeros(1),
        example_tokens=run.example_tokens,
        example_patterns=run.example_patterns,
        example_names=run.example_names,
        components=run.components,
        metric="p<script>",
    )
    view = display.show_attention(run.example_tokens, run.example_patterns, run.example_names)
    # The notebook outputs, each shown twice (a cell run again), on one page as a notebook shows them.
    outputs = [obj._repr_html_() for obj in (run, ranking, view, run.point) for _ in range(2)]
    page = tmp_path / "outputs.html"
    page.write_text(
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>outputs</title></head><body>"
        + "\n".join(f"<div class='output'>{o}</div>" for o in outputs)
        + "</body></html>",
        encoding="utf-8",
    )
    check_parsed(page.read_text(), [HOSTILE_MODEL, "p<script>"])
    result, (view_text, clean, _) = open_in_chromium(page, tmp_path / "outputs.png")
    assert clean and len(result.state["views"]) == 6  # run, ranking and view, twice each
    assert "</script>" in view_text and "<!--" in view_text
    # Each object saved alone after all of that: a page that works.
    for name, obj in (("run", run), ("ranking", ranking), ("view", view), ("point", run.point)):
        saved = obj.save_html(tmp_path / f"{name}.html")
        check_parsed(saved.read_text(), [])
        check_drawn(saved, tmp_path / f"{name}.png")


NOTEBOOK_CELLS = [
    (
        "from interp.report.display import show_attention\n"
        "from interp.report.notebook import init_notebook\n"
        "import plotly.graph_objects as go, torch\n"
        "from tests.interp.report.test_hostile_pages import HOSTILE, hostile_run\n"
        "from interp.main_job.report import MainJobReport\n"
        "init_notebook()"
    ),
    "go.Figure(go.Scatter(x=[1, 2, 3], y=[3, 1, 2], name='<!--<script>'), layout=dict(showlegend=True))",
    "run = hostile_run(1)\nshow_attention(run.example_tokens, run.example_patterns, run.example_names)",
    "MainJobReport(runs=[hostile_run(1)], title='twice')",
]


@pytest.mark.slow
def test_a_notebook_whose_cells_run_twice_draws_every_figure_after_export(tmp_path):
    """nbclient runs each display cell twice (the second output replaces the first, as in
    Jupyter), then the notebook is exported to HTML: every figure and view draws in Chromium."""
    _require_browser()
    nb = execute_cells_twice(NOTEBOOK_CELLS, tmp_path)
    for cell in nb.cells[1:]:
        assert cell.execution_count > len(nb.cells) - 1, "the cell ran a second time"
        (output,) = [o for o in cell.outputs if "text/html" in o.get("data", {})]
        assert output["data"]["text/html"]
    page = tmp_path / "twice.html"
    notebook.export_notebook_html(nb, page)
    html = page.read_text(encoding="utf-8")
    check_parsed(html, [])
    result, (view_text, clean, _) = open_in_chromium(page, tmp_path / "twice.png")
    assert clean and len(result.state["views"]) == 2 and len(result.state["figs"]) >= 4
    assert "</script>" in view_text
