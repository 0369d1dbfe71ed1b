"""The attention-pattern scrubber (interp/report/scrubber.py), ``emergence scrub`` and the report polish.

Without a browser: the page's bytes decode back to the recorded patterns, hostile token text stays
data, the report carries a scrubber per run that recorded one, bad CLI input is one line.
In headless Chromium (the Debian package, network cut; skipped without it unless CI=true): a
tiny local suite whose zoomed step changes only layer 1's attention weights, so a screenshot of
every head at two steps must differ exactly at layer 1's heads; frame time read back from the
page; hostile tokens drawn as text. On the trained quick suite (32 steps x 8 heads x 19-token
prompts; trained once by the ``quick_suite`` fixture, or reused from EMERGENCE_LENS_TEST_CACHE):
the page weighs at most 5 MB and a slider move draws within 50 ms.
"""

from __future__ import annotations

import base64
import json
import re
import shutil
import statistics
import zlib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from typer.testing import CliRunner

from conftest import save_tiny_neox
from interp.core.settings import StudyConfig
from interp.report import scrubber as scrub_module
from interp.report.scrubber import Scrubber, ScrubData
from interp.scrubbing import scrubber

HOSTILE = ["<!--", "<script>", "</script>", "a&amp;b", "\u2028", "'\"", "</SCRIPT >", "-->"]
#: Page weight goal for the quick suite's 32 steps x 8 heads x 19-token prompts (bytes).
MAX_QUICK_PAGE = 5_000_000
#: Frame goal: slider move -> new frame drawn (ms, measured in the page with performance.now()).
MAX_FRAME_MS = 50.0


def decode(payload: dict) -> np.ndarray:
    """What the page script does: inflate, undo the per-step change, fill the masked triangle
    with zeros; returns ``[prompt, step, layer, head, q, k]`` in payload levels."""
    raw = np.frombuffer(zlib.decompress(base64.b64decode(payload["data"])), dtype=np.uint8)
    n, steps = payload["n"], len(payload["steps"])
    cells = n * (n + 1) // 2 if payload["causal"] else n * n
    delta = raw.reshape(payload["prompts"], steps, payload["layers"], payload["heads"], cells)
    values = np.cumsum(delta.astype(np.int64), axis=1) % 256
    out = np.zeros((*values.shape[:4], n, n), dtype=np.int64)
    if payload["causal"]:
        out[..., ~np.triu(np.ones((n, n), dtype=bool), k=1)] = values
    else:
        out = values.reshape(*values.shape[:4], n, n)
    return out


def toy_data(tokens: list[str] | None = None, n_steps: int = 5, seed: int = 0) -> ScrubData:
    """Causal softmax patterns, 2 prompts x ``n_steps`` x 2 layers x 3 heads, random but fixed."""
    n = len(tokens or []) or 6
    generator = torch.Generator().manual_seed(seed)
    logits = torch.randn(2, n_steps, 2, 3, n, n, generator=generator) * 2
    logits = logits.masked_fill(torch.triu(torch.ones(n, n, dtype=torch.bool), 1), float("-inf"))
    patterns = scrub_module.quantise_patterns(logits.softmax(-1))
    steps = [0, 1, 2, 4, 8][:n_steps]
    labels = [list(tokens) for _ in range(2)] if tokens else [[f"t{i}" for i in range(n)] for _ in range(2)]
    curve = pd.DataFrame(
        {"step": steps, "accuracy": np.linspace(0, 1, n_steps), "p_answer": np.linspace(0, 0.8, n_steps)}
    )
    scores = pd.DataFrame(
        [
            (s, l, h, name, 0.1 * l + 0.01 * h + 0.001 * s)
            for s in steps
            for l in range(2)
            for h in range(3)
            for name in ("previous_token", "prefix_matching")
        ],
        columns=["step", "layer", "head", "score", "value"],
    )
    return ScrubData(
        label="toy seed 0",
        steps=steps,
        patterns=patterns,
        tokens=labels,
        curve=curve,
        zoom_steps=[1],
        head_scores=scores,
        delta_p=np.array([[0.1, -0.02, 0.0], [0.3, 0.01, np.nan]]),
        pre_step=2,
        post_step=4,
    )


# --------------------------------------------------------------------------- no browser


def test_page_bytes_decode_to_the_recorded_patterns():
    data = toy_data()
    payload = data.payload()
    assert payload["levels"] == 255 and payload["causal"]
    np.testing.assert_array_equal(decode(payload), data.patterns.astype(np.int64))
    # a tight budget stores coarser levels; each value within half a level of the original
    coarse = data.payload(max_chars=len(payload["data"]) - 1)
    assert coarse["levels"] == 100
    back = decode(coarse) / 100
    assert np.abs(back - data.patterns / 255).max() <= 0.5 / 100 + 0.5 / 255 + 1e-9


def test_quantised_patterns_are_within_half_a_level():
    p = torch.rand(3, 4, 4).softmax(-1)
    q = scrub_module.quantise_patterns(p)
    assert q.dtype == np.uint8 and np.abs(q / 255 - p.numpy()).max() <= 0.5 / 255 + 1e-6


def test_hostile_tokens_stay_data_in_the_page():
    tokens = HOSTILE[:6]
    page = Scrubber(toy_data(tokens)).html()
    body = page[page.index("<body>") :]
    # the only script elements are the ones the page writes: data, mount (plotly's figure calls)
    data_block = re.search(r"<script type='application/json' class='el-scrub-data'>(.*?)</script>", body, re.S).group(1)
    assert "<" not in data_block and ">" not in data_block and "&" not in data_block and "\u2028" not in data_block
    assert json.loads(data_block)["tokens"][0] == tokens
    # script elements in the body: the data, one per plotly figure (capability, head scores, Δp), the mount
    assert len(re.findall(r"<script\b", body, re.I)) == 1 + 3 + 1 and "<!--" not in body


def test_notebook_output_is_a_whole_page_each_time():
    page = Scrubber(toy_data())
    for _ in range(2):  # self-contained whatever the notebook showed before
        out = page._repr_html_()
        assert out.count("* plotly.js v") == 1 and out.count("window.ELScrub)") == 1
        assert out.index("* plotly.js v") < out.index("ELScrub.mount(")


def test_ranking_table_and_sizes_are_checked():
    data = toy_data()
    with pytest.raises(ValueError, match="do not match"):
        ScrubData(label="x", steps=data.steps[:-1], patterns=data.patterns, tokens=data.tokens, curve=data.curve)
    with pytest.raises(ValueError, match="uint8"):
        ScrubData(
            label="x", steps=data.steps, patterns=data.patterns.astype(np.float32), tokens=data.tokens, curve=data.curve
        )
    with pytest.raises(ValueError, match="expected layer, head, delta"):
        scrub_module.ranking_values(pd.DataFrame({"layer": [0], "delta": [0.1]}))
    with pytest.raises(ValueError, match="expected layer, head, delta"):  # the column before it followed the metric
        scrub_module.ranking_values(pd.DataFrame({"layer": [0], "head": [1], "delta_p": [0.1]}))
    table, _, _, metric = scrub_module.ranking_values(
        pd.DataFrame({"layer": [0, 1], "head": [1, 0], "delta": [0.25, -0.5]})
    )
    assert table[0, 1] == 0.25 and table[1, 0] == -0.5 and np.isnan(table[0, 0]) and metric == "p"


@pytest.mark.parametrize(
    "metric, label",
    [("p", "Δp"), ("logit-diff", "Δ logit difference"), ("logprob", "Δ log p(answer)"), ("my_margin", "Δ my_margin")],
)
def test_head_labels_follow_the_rankings_metric(metric, label):
    """The per-head label, the heatmap's title, colour bar and caption name the ranking's metric
    (a heads table's ``metric`` column, or a ranking's ``metric``), never Δp for another metric."""
    from interp.core.metrics import metric_spec

    assert metric_spec(metric).delta_label == label
    table = pd.DataFrame({"layer": [0, 1], "head": [1, 0], "delta": [0.25, -0.5], "metric": [metric, metric]})
    values, _, _, found = scrub_module.ranking_values(table)
    assert found == metric
    data = toy_data()
    data.delta_p, data.metric = values, metric
    assert data.payload()["delta_label"] == label
    heatmap = [fig for fig, _, caption in scrub_module._figures(data) if caption.startswith(label + " = ")]
    assert len(heatmap) == 1
    assert heatmap[0].layout.title.text.startswith(f"{label} per head")
    assert heatmap[0].data[0].colorbar.title.text.startswith(label)
    assert ("Δp" in json.dumps(heatmap[0].to_plotly_json(), ensure_ascii=False)) == (metric == "p")


def test_report_shows_a_scrubber_for_a_run_that_recorded_one(tmp_path):
    from interp.main_job.report import MainJobReport
    from tests.interp.report.test_display import make_run

    run, other = make_run(1), make_run(2)
    data = toy_data(n_steps=5)
    run.scrub_steps, run.scrub_tokens = [0, 100, 200, 300, 400], data.tokens
    run.scrub_patterns = torch.from_numpy(data.patterns)
    report = MainJobReport(runs=[run, other], title="toy")
    page = report.html()
    assert page.count("<h3>Attention patterns across checkpoints — toy seed 1 · repetition</h3>") == 1
    assert page.count("class='el-scrub'") == 1 and page.count("window.ELScrub)") == 1  # script once per page
    again = MainJobReport.load(report.save(tmp_path)["report.html"].parent)
    assert again.runs[0].scrub_steps == run.scrub_steps and again.runs[0].scrub_tokens == run.scrub_tokens
    assert again.runs[0].scrub_patterns.dtype == torch.uint8
    assert torch.equal(again.runs[0].scrub_patterns, run.scrub_patterns)


def test_summary_headers_are_words_and_threshold_is_listed_once():
    from interp.main_job.report import MainJobReport
    from interp.report import display
    from interp.report import page as vis
    from tests.interp.report.test_display import make_run

    report = MainJobReport(runs=[make_run(1)], title="toy")
    fragment = vis.summary_fragment(report.summary())
    headers = re.findall(r"<th>([^<]*)</th>", fragment)
    assert headers[:5] == ["model", "seed", "task", "emerged", "pre → post step"]
    details = re.findall(r"<span><b>([^<]*)</b>", fragment)  # the details line under the run's row
    assert details[:4] == ["BOS prepended", "monotone", "checkpoints evaluated", "pre → post value"]
    assert "overflow-wrap:anywhere" not in display.STYLE
    two_models = report.emergence.assign(model="a")
    two_models = pd.concat([two_models, report.emergence.assign(model="b")])
    points = pd.concat([report.points.assign(model="a"), report.points.assign(model="b")])
    fig = vis.capability_figure(two_models, points)
    shapes = [s for s in fig.layout.shapes if s.name == "threshold (0.5)"]
    assert len(shapes) == 2 and [s.showlegend for s in shapes] == [True, False]


@pytest.mark.parametrize(
    "args, message",
    [
        (["scrub", "SUITE", "--out", "page.txt"], "expected a page path ending with .html"),
        (["scrub", "SUITE", "--out", "p.html", "--steps", "0,x"], "'x' is not an integer step"),
        (["scrub", "SUITE", "--out", "p.html", "--steps", "3"], "has no checkpoint at step 3; nearest: 2"),
        (["scrub", "SUITE", "--out", "p.html", "--heads", "HEADS"], "expected layer, head, delta"),
        (["scrub", "SUITE", "--out", "p.html", "--heads", "EMPTY"], "is neither a file nor a folder holding heads.csv"),
        (["scrub", "SUITE", "--out", "p.html", "--metric", "pp"], "metric='pp'; valid: "),
        (["scrub", "embedded-quick", "--out", "p.html"], "scrub takes one run"),
    ],
)
def test_scrub_cli_refuses_bad_input_in_one_line(args, message, scrub_suite, tmp_path, monkeypatch):
    from emergence_lens.cli import app

    monkeypatch.chdir(tmp_path)
    (tmp_path / "heads.csv").write_text("layer,delta\n0,0.1\n")
    (tmp_path / "empty").mkdir()  # a folder without heads.csv
    names = {"SUITE": str(scrub_suite), "HEADS": str(tmp_path / "heads.csv"), "EMPTY": str(tmp_path / "empty")}
    args = [names.get(a, a) for a in args]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: emergence scrub: ") and message in lines[0], result.output
    assert not list(tmp_path.glob("*.htm*"))


# --------------------------------------------------------------------------- a tiny local suite


@pytest.fixture(scope="module")
def scrub_suite(tmp_path_factory, byte_tokenizer_dir) -> Path:
    """ROOT/step0, ROOT/step2 (another model) and the zoom overlay ROOT/zoom/step1: step 0's
    weights with only layer 1's query/key/value weights moved, so layer 0's patterns at step 1
    equal step 0's and layer 1's differ."""
    from transformers import GPTNeoXForCausalLM

    root = tmp_path_factory.mktemp("scrub-suite")
    shutil.copytree(byte_tokenizer_dir, root / "tokenizer")
    save_tiny_neox(root / "step0", seed=0)
    save_tiny_neox(root / "step2", seed=2)
    model = GPTNeoXForCausalLM.from_pretrained(root / "step0")
    with torch.no_grad():
        weight = model.gpt_neox.layers[1].attention.query_key_value.weight
        weight.add_(torch.randn(weight.shape, generator=torch.Generator().manual_seed(1)) * 0.5)
    model.save_pretrained(root / "zoom" / "step1")
    (root / "suite.json").write_text(json.dumps({"model_id": "tiny-scrub-seed4", "steps": [0, 2]}))
    return root


@pytest.mark.slow
def test_scrubber_records_every_step_with_the_zoom_overlay(scrub_suite):
    page = scrubber(str(scrub_suite), n_prompts=3)
    data = page.data
    assert data.steps == [0, 1, 2] and data.zoom_steps == [1] and data.label == "tiny-scrub seed 4"
    assert data.patterns.shape == (3, 3, 2, 4, 19, 19) and len(data.tokens) == 3 and len(data.tokens[0]) == 19
    rows = data.patterns.astype(int).sum(-1)  # each query row sums to 1 (to within the rounding)
    assert np.abs(rows - 255).max() <= 19 // 2 + 1
    assert np.array_equal(data.patterns[:, 1, 0], data.patterns[:, 0, 0])  # layer 0 unchanged at the zoomed step
    assert not np.array_equal(data.patterns[:, 1, 1], data.patterns[:, 0, 1])
    assert set(data.head_scores["step"]) == {0, 1, 2} and len(data.curve) == 3


@pytest.mark.slow
def test_scrub_ranks_between_the_point_or_reads_a_run_folder(scrub_suite, tmp_path):
    """``rank=True`` puts rank_heads_between's per-head delta into the page (the same numbers); the
    command reads a run folder's heads.csv (its rows for this run); a curve that never emerges is
    left unranked with a one-line warning."""
    from emergence_lens.cli import app
    from interp.ranking import rank_heads_between
    from interp.scrubbing import _rank_into, scrub_data
    from interp.sources import open_source
    from interp.tasks import RepetitionTask

    source = open_source(str(scrub_suite))
    try:
        data = scrub_data(source, steps=[0, 2], n_prompts=1, config=StudyConfig(scores=False))
        assert data.delta_p is None and data.pre_step is None  # the tiny suite does not emerge
        data.pre_step, data.post_step = 0, 2
        _rank_into(data, source, None, StudyConfig(device="cpu"))
        want = rank_heads_between(
            source, 0, 2, RepetitionTask().build(source.tokenizer()), StudyConfig(device="cpu", decompose=False)
        ).delta
        np.testing.assert_allclose(data.delta_p, want.numpy(), atol=1e-6)
        assert data.metric == "p" and np.isfinite(data.delta_p).all() and data.delta_p.shape == (2, 4)
    finally:
        source.close()
    run = tmp_path / "run"
    run.mkdir()
    rows = [("tiny-scrub", 4, layer, head, 0.01 * (4 * layer + head)) for layer in range(2) for head in range(4)]
    other = [("tiny-scrub", 5, 0, 0, 9.0)]
    pd.DataFrame(rows + other, columns=["model", "seed", "layer", "head", "delta"]).to_csv(run / "heads.csv")
    result = CliRunner().invoke(
        app, ["scrub", str(scrub_suite), "--out", str(tmp_path / "p.html"), "--heads", str(run)]
    )
    assert result.exit_code == 0, result.output
    assert "heads ordered by Δp (--heads)" in result.output
    page = (tmp_path / "p.html").read_text(encoding="utf-8")
    spec = json.loads(re.search(r"class='el-scrub-data'>(.*?)</script>", page, re.S).group(1))
    assert spec["delta_p"] == [[round(0.01 * (4 * layer + head), 4) for head in range(4)] for layer in range(2)]
    result = CliRunner().invoke(app, ["scrub", str(scrub_suite), "--out", str(tmp_path / "q.html"), "--steps", "0,2"])
    assert result.exit_code == 0, result.output
    assert "warning: tiny-scrub seed 4: no point of emergence on the scrubbed curve" in result.output
    assert "heads ordered by" not in result.output


# --------------------------------------------------------------------------- headless Chromium


def _require_browser():
    from tests.interp.report.test_report_browser import _require_browser as require

    require()


def _ready(page) -> None:
    page.wait_for_function(
        "() => [...document.querySelectorAll('.el-scrub')].every(e => e.dataset.ready)", timeout=90_000
    )
    page.wait_for_timeout(300)


def _slider_frames(page, moves: int, key: str = "ArrowRight") -> list[float]:
    """Move the slider with the keyboard ``moves`` times; the frame times the page measured (ms)."""
    page.evaluate("window.ELScrubFrames = []")
    page.focus(".el-scrub input[type=range]")
    for _ in range(moves):
        page.keyboard.press(key)
        page.wait_for_timeout(80)
    page.wait_for_timeout(200)
    return page.evaluate("window.ELScrubFrames")


@pytest.mark.slow
def test_scrubber_page_in_headless_chromium(scrub_suite, tmp_path):
    _require_browser()
    from browser import open_page

    path = scrubber(str(scrub_suite), n_prompts=2).save_html(tmp_path / "scrub.html")
    html = path.read_text(encoding="utf-8")
    assert html.count("* plotly.js v") == 1 and html.count("window.ELScrub)") == 1
    for width in (1280, 800):
        with open_page(path, width=width) as (page, visit):
            _ready(page)
            heads = page.locator(".el-scrub-grid canvas")
            assert heads.count() == 8
            before = [heads.nth(i).screenshot() for i in range(8)]
            page.screenshot(path=str(tmp_path / f"scrub-{width}-step0.png"), full_page=True)
            frames = _slider_frames(page, 1)
            assert len(frames) == 1 and frames[0] <= MAX_FRAME_MS * 4  # one move (the median is checked below)
            assert "step 1 (zoomed)" in page.inner_text(".el-scrub-step")
            after = [heads.nth(i).screenshot() for i in range(8)]
            page.screenshot(path=str(tmp_path / f"scrub-{width}-step1.png"), full_page=True)
            # the screenshots differ exactly where the patterns changed: layer 1's heads
            assert [a != b for a, b in zip(before, after)] == [False] * 4 + [True] * 4
            # the marker moved with the slider: it sits over step 1 on the capability curve
            assert page.evaluate("document.querySelector('.el-scrub-marker').style.display") == "block"
            page.check(".el-scrub input[type=checkbox]")
            assert "minus step 0" in page.inner_text(".el-scrub-step")
            page.screenshot(path=str(tmp_path / f"scrub-{width}-change.png"), full_page=True)
            frames = _slider_frames(page, 6, "ArrowLeft") + _slider_frames(page, 6, "ArrowRight")
            assert statistics.median(frames) <= MAX_FRAME_MS, frames
            page.select_option(".el-scrub-prompt", "1")
            assert page.evaluate("ELScrub.all[0].index") == 2
        assert visit.page_errors == [] and visit.console_errors == [], (visit.page_errors, visit.console_errors)
        assert visit.blocked == [] and set(visit.requests) == {visit.url}


@pytest.mark.slow
def test_hostile_token_text_is_drawn_as_text(tmp_path):
    _require_browser()
    from browser import open_page

    path = Scrubber(toy_data(HOSTILE)).save_html(tmp_path / "hostile.html")
    with open_page(path) as (page, visit):
        _ready(page)
        assert page.evaluate("JSON.parse(document.querySelector('.el-scrub-data').textContent).tokens[0]") == HOSTILE
        option = page.evaluate("document.querySelector('.el-scrub-prompt option').textContent")
        assert option == "0: " + " ".join(HOSTILE)[:48]
        assert page.evaluate("document.querySelectorAll('script').length") == len(
            re.findall(r"<script\b", path.read_text(encoding="utf-8"))
        )
        assert page.evaluate("ELScrub.all.length") == 1
        # hovering a cell names its tokens as text
        box = page.locator(".el-scrub canvas").first.bounding_box()
        cell = (box["width"] - 32) / len(HOSTILE)  # the canvas: 30 px of labels, the cells, 2 px
        page.mouse.move(box["x"] + 30 + 1.5 * cell, box["y"] + 2.5 * cell)
        assert 'query 2 "</script>" → key 1 "<script>"' in page.inner_text(".el-scrub-tip")
        page.screenshot(path=str(tmp_path / "hostile.png"), full_page=True)
        # the play button animates through the checkpoints
        page.click(".el-scrub button")
        page.wait_for_timeout(2000)
        assert page.evaluate("ELScrub.all[0].index") >= 1
        page.click(".el-scrub button")
    assert visit.page_errors == [] and visit.console_errors == [] and visit.blocked == []


def test_quick_suite_page_weight_and_frame_time(quick_suite, tmp_path):
    """The goal of issue 26 on the trained quick suite: 32 steps x 8 heads x 19-token prompts."""
    _require_browser()
    from browser import open_page

    folders, _ = quick_suite
    page = scrubber(str(folders[0]))
    data = page.data
    assert data.patterns.shape[1:] == (32, 2, 4, 19, 19) and len(data.tokens) == scrub_module.DEFAULT_PROMPTS
    path = page.save_html(tmp_path / "quick.html")
    size = path.stat().st_size
    print(f"quick-suite scrubber page: {size} bytes")
    assert size <= MAX_QUICK_PAGE, f"{size / 1e6:.3f} MB"
    for width in (1280, 800):
        with open_page(path, width=width) as (browser_page, visit):
            _ready(browser_page)
            browser_page.evaluate("ELScrub.all[0].go(0)")  # it opens at the point of emergence: 12 steps right from 0
            frames = _slider_frames(browser_page, 12) + _slider_frames(browser_page, 12, "ArrowLeft")
            print(f"{width} px frame times (ms): {[round(f, 1) for f in frames]}")
            assert len(frames) == 24 and statistics.median(frames) <= MAX_FRAME_MS, frames
            browser_page.evaluate("ELScrub.all[0].go(20)")
            browser_page.wait_for_timeout(200)
            browser_page.screenshot(path=str(tmp_path / f"quick-{width}.png"), full_page=True)
        assert visit.page_errors == [] and visit.console_errors == [] and visit.blocked == []
        assert set(visit.requests) == {visit.url}
