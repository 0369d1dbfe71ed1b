"""The scrubber's controls in headless Chromium (issue 43 item 4): keys step, the enlarged head
writes its tokens out, the heads follow Δp, any two steps compare (post − pre equal to numpy's),
the fixed difference range keeps one colour scale across steps, the point of emergence sits on
the slider's track; and the template and static files the page is made of (issue 42 item 5).

The pages are toy data (:func:`test_scrubber.toy_data`: random causal patterns, 2 prompts x 5
steps x 2 layers x 3 heads), so each visit takes a few seconds; the browser is the Debian Chromium
(skipped without it unless CI=true).
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

from interp.report import scrub_script
from interp.report.scrubber import Scrubber
from tests.interp.report.test_scrubber import HOSTILE, _ready, _require_browser, toy_data

pytestmark = pytest.mark.slow  # the browser


def _lut(stops: list[tuple[float, tuple[int, int, int]]]) -> list[tuple[int, ...]]:
    """The page script's colour table (``lut`` in static/scrubber.js), written again in Python."""
    out = []
    for i in range(256):
        t, j = i / 255, 0
        while j < len(stops) - 2 and t > stops[j + 1][0]:
            j += 1
        (t0, c0), (t1, c1) = stops[j], stops[j + 1]
        u = (t - t0) / (t1 - t0)
        out.append(tuple(int(np.floor(c + (d - c) * u + 0.5)) for c, d in zip(c0, c1)))
    return out


#: The diverging scale of the difference view (red: attention lost, blue: gained).
DIVERGING = _lut(
    [(0, (178, 24, 43)), (0.25, (239, 138, 98)), (0.5, (247, 247, 247)), (0.75, (103, 169, 207)), (1, (33, 102, 172))]
)


def _pixel(page, layer: int, head: int, q: int, k: int) -> tuple[int, int, int]:
    """The colour the grid's canvas of head (layer, head) draws at cell (query q, key k)."""
    return tuple(
        page.evaluate(
            """([l, h, q, k]) => {
              const c = document.querySelector(`.el-scrub-grid canvas[data-layer="${l}"][data-head="${h}"]`);
              const n = JSON.parse(document.querySelector('.el-scrub-data').textContent).n;
              const cs = (c.width / (window.devicePixelRatio || 1) - 32) / n;
              const r = window.devicePixelRatio || 1;
              const d = c.getContext('2d').getImageData(Math.floor((30 + k * cs + cs / 2) * r),
                                                       Math.floor((q * cs + cs / 2) * r), 1, 1).data;
              return [d[0], d[1], d[2]];
            }""",
            [layer, head, q, k],
        )
    )


def test_the_page_is_made_from_the_template_and_the_package_files():
    """No Python string holds the page's script, style or markup: they are the package data files,
    inlined once, and they are listed for the wheel (pyproject's package-data)."""
    import tomllib
    from pathlib import Path

    root = Path(scrub_script.__file__).resolve().parent
    script = (root / "static" / "scrubber.js").read_text(encoding="utf-8")
    page = Scrubber(toy_data()).html()
    assert page.count("<script type='text/javascript'>" + scrub_script.static_text("scrubber.js")) == 1
    assert page.count(scrub_script.static_text("scrubber.css")) == 1
    assert "if (window.ELScrub) return;" in script and "function mount(id)" in page
    assert "class='el-scrub-big'" in (root / "templates" / "scrubber.html.j2").read_text(encoding="utf-8")
    data = tomllib.loads((root.parents[1] / "pyproject.toml").read_text(encoding="utf-8"))
    shipped = data["tool"]["setuptools"]["package-data"]["interp.report"]
    for name in ("static/scrubber.js", "static/scrubber.css", "templates/scrubber.html.j2"):
        assert any(Path(name).match(pattern) for pattern in shipped), (name, shipped)
    with pytest.raises(ValueError, match=re.escape("no static file 'missing.js'; valid: scrubber.css, scrubber.js")):
        scrub_script.static_text("missing.js")


def test_hostile_tokens_stay_data_in_every_control():
    """Token text reaches the page only through autoescaping (the prompt chooser) and tojson (the
    payload): no element of it can open a tag, a comment or a script."""
    page = Scrubber(toy_data(HOSTILE[:6])).html()
    body = page[page.index("<body>") :]
    options = re.findall(r"<option value='\d+'>([^<]*)</option>", body)
    assert options == [f"{i}: &lt;!-- &lt;script&gt; &lt;/script&gt; a&amp;amp;b \u2028 &#39;&#34;" for i in range(2)]
    assert "<!--" not in body and body.count("</script>") == len(re.findall(r"<script\b", body))


def test_keys_step_enlarge_and_order_heads(tmp_path):
    _require_browser()
    from browser import open_page

    data = toy_data(HOSTILE)
    path = Scrubber(data).save_html(tmp_path / "keys.html")
    for width in (1280, 800):
        with open_page(path, width=width) as (page, visit):
            _ready(page)
            # heads ordered by Δp, largest first, the head without a value last
            order = page.evaluate("ELScrub.all[0].order()")
            values = np.nan_to_num(np.asarray(data.delta_p, float), nan=-np.inf)
            expected = sorted(((l, h) for l in range(2) for h in range(3)), key=lambda lh: -values[lh])
            assert [tuple(x) for x in order] == expected
            titles = page.locator(".el-scrub-head span").all_text_contents()
            assert titles[0].startswith("#1 L1H0  Δp +0.300") and titles[-1] == "L1H2"
            # keys change the step (the scrubber has focus once clicked)
            page.click(".el-scrub-step")
            page.keyboard.press("Home")  # the page opens at the point of emergence (issue 58); start from step 0
            page.keyboard.press("ArrowRight")
            assert page.evaluate("ELScrub.all[0].index") == 1 and "step 1 (zoomed)" in page.inner_text(".el-scrub-step")
            page.keyboard.press("End")
            assert page.evaluate("ELScrub.all[0].index") == 4
            page.keyboard.press("Home")
            assert page.evaluate("ELScrub.all[0].index") == 0
            page.keyboard.press("d")
            assert page.is_checked(".el-scrub-diff")
            page.keyboard.press("ArrowRight")
            page.keyboard.press("ArrowRight")
            page.keyboard.press("r")  # the step shown (index 2, step 2) becomes the reference
            page.keyboard.press("End")
            assert page.evaluate("ELScrub.all[0].reference") == 2
            assert "step 8 · checkpoint 5 of 5 · minus step 2" in page.inner_text(".el-scrub-step")
            page.keyboard.press("d")
            # Enter on a head enlarges it with its tokens written out (as text: hostile text stays data)
            page.focus(".el-scrub-head")
            page.keyboard.press("Enter")
            assert page.is_visible(".el-scrub-big") and page.evaluate("ELScrub.all[0].enlarged") == [1, 0]
            queries = page.locator(".el-scrub-qlabels span").all_text_contents()
            keys = page.locator(".el-scrub-klabels span").all_text_contents()
            assert queries == HOSTILE and keys == HOSTILE
            # readable: each label at least 16 px high, inside the window, the labels beside the cells
            boxes = [page.locator(".el-scrub-qlabels span").nth(i).bounding_box() for i in range(len(HOSTILE))]
            assert all(b["height"] >= 16 for b in boxes) and boxes[-1]["y"] + boxes[-1]["height"] <= 900
            canvas = page.locator(".el-scrub-big-matrix canvas").bounding_box()
            assert canvas["x"] + canvas["width"] <= width and canvas["height"] >= 16 * len(HOSTILE)
            assert abs(boxes[0]["y"] - canvas["y"]) <= 1 and boxes[0]["x"] + boxes[0]["width"] <= canvas["x"] + 1
            assert page.text_content(".el-scrub-big-title") == "L1H0  Δp +0.300"
            page.screenshot(path=str(tmp_path / f"big-{width}.png"))
            page.keyboard.press("ArrowDown")  # the next head in Δp order
            assert page.evaluate("ELScrub.all[0].enlarged") == list(expected[1])
            page.keyboard.press("ArrowLeft")
            assert page.evaluate("ELScrub.all[0].index") == 3 and "step 4" in page.inner_text(".el-scrub-big-step")
            page.keyboard.press("Escape")
            assert not page.is_visible(".el-scrub-big") and page.evaluate("ELScrub.all[0].enlarged") is None
            # the order by layer, back again
            page.select_option(".el-scrub-order", "layer")
            assert page.locator(".el-scrub-head span").all_text_contents()[0] == "L0H0  Δp +0.100"
        assert visit.page_errors == [] and visit.console_errors == [] and visit.blocked == []


def test_any_two_steps_compare_on_a_fixed_range(tmp_path):
    _require_browser()
    from browser import open_page

    data = toy_data()
    path = Scrubber(data).save_html(tmp_path / "compare.html")
    n = data.patterns.shape[-1]
    lower = ~np.triu(np.ones((n, n), dtype=bool), k=1)
    with open_page(path) as (page, visit):
        _ready(page)
        api = "ELScrub.all[0]"
        for a, b in ((0, 4), (3, 1), (2, 2)):
            page.evaluate(f"{api}.setRef({a}); {api}.setDiff(true); {api}.go({b})")
            for layer in range(2):
                for head in range(3):
                    shown = np.array(page.evaluate(f"{api}.difference({layer}, {head})"), dtype=float).reshape(n, n)
                    want = (data.patterns[0, b, layer, head].astype(float) - data.patterns[0, a, layer, head]) / 255
                    np.testing.assert_allclose(shown[lower], want[lower], atol=1e-5)
                    assert np.isnan(shown[~lower]).all()
            assert f"minus step {data.steps[a]}" in page.inner_text(".el-scrub-step")
        # per step: the scale is the step's largest change (so it moves); fixed: the same at every step
        page.evaluate(f"{api}.setRef(0)")
        per_step = []
        for b in (1, 4):
            page.evaluate(f"{api}.go({b})")
            largest = np.abs(data.patterns[0, b].astype(int) - data.patterns[0, 0]).max() / 255
            per_step.append(page.evaluate(f"{api}.scale"))
            assert per_step[-1] == pytest.approx(largest, abs=1e-9)
        assert per_step[0] != per_step[1]
        page.evaluate(f"{api}.setFixed(true, 0.25)")
        assert page.evaluate(f"{api}.scale") == pytest.approx(0.25)
        for b in (1, 4):
            page.evaluate(f"{api}.go({b})")
            assert page.evaluate(f"{api}.scale") == pytest.approx(0.25)
            assert "−0.250 … +0.250 (change in attention; fixed range)" in page.inner_text(
                ".el-scrub-controls >> nth=1"
            )
            for layer, head, q, k in ((0, 0, 3, 1), (1, 2, 5, 0), (0, 1, 4, 4)):
                change = int(data.patterns[0, b, layer, head, q, k]) - int(data.patterns[0, 0, layer, head, q, k])
                index = min(255, max(0, int(np.floor((change / (0.25 * 255) + 1) * 127.5 + 0.5))))
                assert _pixel(page, layer, head, q, k) == DIVERGING[index], (b, layer, head, q, k, change)
        page.keyboard.press("f")  # the key turns the fixed range off again
        assert page.evaluate(f"{api}.scale") == pytest.approx(per_step[1], abs=1e-9)
        page.fill(".el-scrub-range", "0.1")  # a range typed in turns it on, at that range
        page.press(".el-scrub-range", "Enter")
        assert page.is_checked(".el-scrub-fixed") and page.evaluate(f"{api}.scale") == pytest.approx(0.1)
        # the point of emergence (pre step 2 -> post step 4: indices 2 and 3 of 5) on the slider's track
        slider = page.locator(".el-scrub-slider").bounding_box()
        band = page.locator(".el-scrub-band").bounding_box()
        track = slider["width"] - 16
        assert band["x"] == pytest.approx(slider["x"] + 8 + track * 2 / 4, abs=1.5)
        assert band["width"] == pytest.approx(track / 4, abs=1.5)
        assert "emergence 2→4" in page.inner_text(".el-scrub-marks")
        page.screenshot(path=str(tmp_path / "compare.png"), full_page=True)
    assert visit.page_errors == [] and visit.console_errors == [] and visit.blocked == []


def test_keys_are_documented_on_the_page_in_the_guide_and_in_help():
    """Every key the page script handles is listed on the page, in docs/guide.md and in
    ``emergence scrub --help``."""
    from pathlib import Path

    from typer.testing import CliRunner

    from emergence_lens.cli import app

    script = scrub_script.static_text("scrubber.js")
    handled = set(re.findall(r"k==='(\w+)'", script))
    assert handled == {"Escape", "ArrowRight", "ArrowLeft", "Home", "End", "ArrowUp", "ArrowDown", "d", "r", "f", "p"}
    words = {"ArrowRight": "→", "ArrowLeft": "←", "ArrowUp": "↑", "ArrowDown": "↓", "Escape": "Esc"}
    page = Scrubber(toy_data()).html()
    keys_on_page = re.sub(r"<[^>]+>", "", re.search(r"<p class='el-caption el-scrub-keys'>(.*?)</p>", page, re.S)[1])
    guide = (Path(scrub_script.__file__).resolve().parents[2] / "docs" / "guide.md").read_text(encoding="utf-8")
    guide = guide[guide.index("### Watching it happen") :]
    result = CliRunner().invoke(app, ["scrub", "--help"], env={"COLUMNS": "120"})
    assert result.exit_code == 0
    for key in [*handled, "Enter"]:
        word = words.get(key, key)
        pattern = rf"(?<![\w-]){re.escape(word)}(?![\w-])"
        for where, text in (("page", keys_on_page), ("guide", guide), ("help", result.output)):
            assert re.search(pattern, text), (key, where)


def test_a_heads_delta_p_reads_the_same_in_the_scrubber_and_the_summary(tmp_path):
    """Δp 0.015501: the summary and the findings print +0.016 (interval_text); the scrubber once
    rounded it to 4 digits for the page (0.0155) and rounded that again in the browser (+0.015).
    Now the page shows the summary's own text (issue 71)."""
    from interp.report.findings import interval_text

    data = dataclasses.replace(toy_data(), delta_p=np.array([[0.015501, -0.02, 0.0], [0.3, 0.01, np.nan]]))
    spec = data.payload()
    assert spec["delta_text"][0][0] == interval_text(0.015501, signed=True) == "+0.016"
    assert spec["delta_text"][1][2] is None and spec["delta_p"][0][0] == 0.0155  # the order's number
    _require_browser()
    from browser import open_page

    path = Scrubber(data).save_html(tmp_path / "dp.html")
    with open_page(path, width=1280) as (page, visit):
        _ready(page)
        titles = page.locator(".el-scrub-head span").all_text_contents()
        assert "#2 L0H0  Δp +0.016" in titles, titles
