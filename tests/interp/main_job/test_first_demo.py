"""The first demo and its page (issue 55): tables that fill their key columns, the pre-screen's
last bits, arguments refused in one line, the demo's settings from Python, and a page that fits
1280 and 800 px with readable head tiles and values in the heatmap's cells.

The page tests open a demo-shaped report (six runs, the demo's widest cells) in headless
Chromium; the names are the embedded suite's, the numbers hand-written (no model is trained)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from interp.main_job.report import MainJobReport
from tests.interp.report.test_display import make_run

ROOT = Path(__file__).resolve().parents[3]


def test_topk_and_every_per_task_table_name_the_task_and_bos(tmp_path):
    """topk.csv had empty ``task`` and ``prepend_bos`` in every row (the reindex made them empty
    columns that the labelling then kept)."""
    runs = [dataclasses.replace(make_run(1), task="repetition", prepend_bos=True), make_run(2)]
    report = MainJobReport(runs=runs, title="toy")
    for name in ("topk", "heads", "points", "emergence"):
        table = getattr(report, name)
        assert table["task"].tolist() == ["repetition"] * len(table), name
        assert table["prepend_bos"].tolist() == [True] * (len(table) // 2) + [False] * (len(table) // 2), name
    report.save(tmp_path)
    saved = pd.read_csv(tmp_path / "topk.csv")
    assert saved["task"].notna().all() and saved["prepend_bos"].notna().all() and len(saved) == 6


def test_the_pre_screen_repeats_bit_for_bit_at_one_thread_count(tiny_local_suite):
    """``delta_attribution`` is a gradient: its backward pass's reductions split over torch's
    threads, so its last bits depend on the thread count (measured on the quick suite: equal
    bits at 1 thread twice and at 2 threads twice, 5.8e-11 apart between 1 and 2 threads, while
    the exact per-head deltas were equal). At one thread count the pre-screen repeats exactly;
    across thread counts it agrees to float32 rounding."""
    from interp.patching.attribution import attribution_delta_p
    from interp.patching.engine import cache_patterns
    from interp.sources import LocalSuiteSource
    from interp.tasks import RepetitionTask

    source = LocalSuiteSource(tiny_local_suite)
    batch = RepetitionTask(n_prompts=16, length=6).build(source.tokenizer())
    post = cache_patterns(source.load(200).model, batch.tokens).float()
    pre = source.load(0).model
    threads = torch.get_num_threads()
    try:
        estimates = {}
        for count in (1, 2, 1, 2):
            torch.set_num_threads(count)
            estimates.setdefault(count, []).append(attribution_delta_p(pre, batch, post, steps=2))
    finally:
        torch.set_num_threads(threads)
    for count, (first, again) in estimates.items():
        assert torch.equal(first, again), f"the pre-screen at {count} thread(s) changed between two calls"
    one, two = estimates[1][0], estimates[2][0]
    scale = float(one.abs().max())
    assert scale > 0 and float((one - two).abs().max()) <= 1e-5 * scale


def test_the_runner_records_the_folder_and_threads_of_each_run(tiny_local_suite, tmp_path):
    """provenance.json names, per source name, the folder its weights were read from and the
    torch threads of its analysis (the suite folder's digest for a run of a trained suite)."""
    from interp.core.settings import StudyConfig
    from interp.main_job.runner import run_study
    from interp.tasks import RepetitionTask

    config = StudyConfig(scan=True, decompose=False, scores=False, scrub=False, n_boot=0)
    report = run_study(
        [str(tiny_local_suite)], RepetitionTask(n_prompts=20, length=4), config, out_dir=tmp_path, progress=False
    )
    read = report.provenance["runs"][str(tiny_local_suite)]
    assert read["folder"] == str(tiny_local_suite.resolve()) and read["torch_threads"] == torch.get_num_threads()
    assert read["suite"] is None  # a folder without suite.json: not a run of a trained suite
    import json

    assert json.loads((tmp_path / "provenance.json").read_text())["runs"] == report.provenance["runs"]


def test_a_trained_runs_suite_folder_is_named(tmp_path):
    from interp.main_job.runner import _run_read

    run = tmp_path / "embedded" / "ad5aea722ce5-66090669" / "neox-2l-64d-seed1"
    run.mkdir(parents=True)
    (run / "suite.json").write_text("{}")
    row = pd.Series({"model_id": "embedded/neox-2l-64d-seed1", "folder": str(run), "torch_threads": 2})
    assert _run_read(row) == {
        "model_id": "embedded/neox-2l-64d-seed1",
        "folder": str(run),
        "suite": "ad5aea722ce5-66090669",
        "torch_threads": 2,
    }
    old = pd.Series({"model_id": "x"})  # a unit stored before these were recorded
    assert _run_read(old) == {"model_id": "x", "folder": None, "suite": None, "torch_threads": None}


def test_wrong_arguments_are_refused_in_one_line(tiny_local_suite):
    from interp.core.settings import StudyConfig
    from interp.main_job.runner import analyse_run, run_study
    from interp.sources import LocalSuiteSource
    from interp.tasks import IOITask, RepetitionTask

    source = LocalSuiteSource(tiny_local_suite)
    cases = [
        (
            lambda: RepetitionTask().build(source),
            (
                "RepetitionTask.build: got the checkpoint source LocalSuiteSource "
                f"{source.model_id!r}; pass its tokenizer: source.tokenizer()"
            ),
        ),
        (
            lambda: IOITask().build("gpt2"),
            "IOITask.build: expected a Hugging Face tokenizer (e.g. source.tokenizer()), got str 'gpt2'",
        ),
        (
            lambda: analyse_run("embedded/neox-2l-64d-seed1"),
            (
                "analyse_run: source is str 'embedded/neox-2l-64d-seed1'; expected a checkpoint source; "
                "open a name with el.open_source(name)"
            ),
        ),
        (
            lambda: analyse_run(source, "repetition"),
            "analyse_run: task is str 'repetition'; expected a CapabilityTask such as el.RepetitionTask()",
        ),
        (
            lambda: analyse_run(source, RepetitionTask(), {"scan": True}),
            "analyse_run: config is dict {'scan': True}; expected an el.StudyConfig",
        ),
        (
            lambda: run_study("embedded-quick", RepetitionTask(), StudyConfig()),
            "run_study: sources is str 'embedded-quick'; expected a list of source names or opened sources",
        ),
        (
            lambda: run_study(["embedded-quick"], ["repetition"]),
            "run_study: a task is str 'repetition'; expected CapabilityTask objects such as el.RepetitionTask()",
        ),
    ]
    from interp.emergence import find_emergence, scan_emergence
    from interp.ranking import rank_heads_between

    batch = RepetitionTask(n_prompts=2, length=4).build(source.tokenizer())
    cases += [
        (
            lambda: find_emergence("embedded-quick/neox-2l-64d-seed1", batch),
            (
                "find_emergence: source is str 'embedded-quick/neox-2l-64d-seed1'; expected a checkpoint source; "
                "open a name with el.open_source(name)"
            ),
        ),
        (
            lambda: scan_emergence(source.root, batch),
            f"scan_emergence: source is {type(source.root).__name__} {source.root!r}; expected a checkpoint source",
        ),
        (
            lambda: rank_heads_between(source, 0, 200, "0 1 2 0 1"),
            "rank_heads_between: batch is str '0 1 2 0 1'; expected a TaskBatch (task.build(source.tokenizer()))",
        ),
    ]
    for call, message in cases:
        with pytest.raises(TypeError) as caught:
            call()
        assert str(caught.value) == message and "\n" not in message
    assert RepetitionTask(n_prompts=2, length=4).build(source.tokenizer()).tokens.shape == (2, 7)  # still builds


def test_the_demo_runs_the_documented_config(monkeypatch, tmp_path):
    """``emergence demo`` analyses with ``el.DEMO_CONFIG`` (a scan), what README's Python example
    names; ``el.StudyConfig()`` bisects, and README says so."""
    from typer.testing import CliRunner

    import emergence_lens as el
    from emergence_lens.cli import app
    from interp.main_job import runner

    seen = {}

    def record(sources, tasks, config, **kwargs):
        seen.update(sources=sources, tasks=tasks, config=config)
        raise KeyboardInterrupt  # stop before anything trains

    monkeypatch.setattr(runner, "run_study", record)
    CliRunner().invoke(app, ["demo", "--out", str(tmp_path / "demo")])
    assert seen["sources"] == ["embedded"] and seen["tasks"] == [el.RepetitionTask()]
    assert seen["config"] == el.DEMO_CONFIG.replace(device=seen["config"].device)
    assert el.StudyConfig(scan=True) == el.DEMO_CONFIG and el.StudyConfig().scan is False
    readme = (ROOT / "README.md").read_text()
    assert 'el.run_study(["embedded"], el.RepetitionTask(), el.DEMO_CONFIG, out_dir="results/demo")' in readme


def test_heatmap_cells_carry_their_values_while_few():
    from interp.report.figures import MAX_CELL_TEXT, delta_p_heatmap

    small = delta_p_heatmap(np.array([[0.1, -0.02], [0.0, 0.3]]), jump=0.5)
    assert small.data[0].texttemplate == "%{z:+.2f}"  # the colour's number: a fraction of the jump
    assert delta_p_heatmap(np.zeros((2, 4))).data[0].texttemplate == "%{z:+.3f}"
    assert MAX_CELL_TEXT == 64 and delta_p_heatmap(np.zeros((12, 12))).data[0].texttemplate is None


def _channel(c: float) -> float:
    c /= 255
    return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4


def luminance(rgb) -> float:
    """WCAG 2.x relative luminance of an sRGB colour (0-255 channels)."""
    r, g, b = (_channel(float(v)) for v in rgb)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(a, b) -> float:
    """WCAG 2.x contrast ratio of two colours (1 to 21)."""
    la, lb = sorted((luminance(a), luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)


def _rgb(text: str) -> tuple[float, ...]:
    return tuple(float(v) for v in re.findall(r"[\d.]+", text)[:3])


def _hsl(hue: float, s: float = 0.7, light: float = 0.5) -> tuple[float, float, float]:
    """circuitsvis's tile colour ``hsla(hue, 70%, 50%)`` in 0-255 channels (CSS Color 4's hsl)."""

    def f(n: int) -> float:
        k = (n + hue / 30) % 12
        return light - s * min(light, 1 - light) * max(-1, min(k - 3, 9 - k, 1))

    return (255 * f(0), 255 * f(8), 255 * f(4))


def _overlaid(background, white: float):
    return tuple(white * 255 + (1 - white) * c for c in background)


def test_head_tile_labels_reach_wcag_aa_on_every_hue():
    """circuitsvis colours tile i of n ``hsla(round(360 i / n), 70 %, 50 %)`` with white text
    (1.5:1 on yellow); the page lays half white over it and writes near-black (TILE_STYLE)."""
    from interp.report.display import TILE_STYLE, TILE_TEXT, TILE_WHITE_OVERLAY

    text = tuple(int(TILE_TEXT[i : i + 2], 16) for i in (1, 3, 5))
    assert f"color:{TILE_TEXT}!important" in TILE_STYLE and f"255,255,255,{TILE_WHITE_OVERLAY}" in TILE_STYLE
    assert contrast((255, 255, 255), _hsl(60)) < 2  # what circuitsvis alone shows on yellow
    ratios = [
        contrast(text, _overlaid(_hsl(round(360 * i / n)), TILE_WHITE_OVERLAY)) for n in range(1, 33) for i in range(n)
    ]
    assert min(ratios) >= 4.5, min(ratios)


def demo_shaped_report() -> MainJobReport:
    """Six runs named as the full suite's, with the demo's widest cells: signed intervals, a
    noisy share, four-digit steps (the numbers are hand-written)."""
    runs = []
    for k, (model, seed) in enumerate((m, s) for m in ("neox-2l-64d", "neox-2l-128d") for s in (0, 1, 2)):
        run = make_run(1 + k % 2)
        run = dataclasses.replace(run, model=model, seed=seed, model_id=f"embedded/{model}-seed{seed}", jump_se=0.025)
        run.point = dataclasses.replace(run.point, pre_step=1800 + 100 * k, post_step=1900 + 100 * k, monotone=False)
        run.heads = run.heads.assign(delta_lo=-0.011, delta_hi=0.037, delta_attribution=0.01, jump_too_small=k == 1)
        run.topk = run.topk.assign(recovered_lo=-0.31, recovered_hi=1.74)
        run.rank_correlation_prescreen = 0.976
        runs.append(run)
    return MainJobReport(runs=runs, title="emergence-lens: embedded default suite")


#: Per width, the summary table's wrapper (scroll and client widths), its right edge, the page's
#: width, and every head tile label's computed colours.
PROBE = """() => { const table = document.querySelector('table.el-summary'); const wrap = table.parentElement;
  const tiles = [...document.querySelectorAll('.el-circuitsvis h4[style*=background], .el-circuitsvis h2[style*=background]')]
    .map(h => { const s = getComputedStyle(h); return [s.color, s.backgroundColor, s.backgroundImage]; });
  return {scroll: wrap.scrollWidth, client: wrap.clientWidth, right: table.getBoundingClientRect().right,
          page: document.documentElement.scrollWidth, tiles,
          cells: document.querySelectorAll('.plotly-graph-div .hm text, .plotly-graph-div g.textpoint').length,
          heads: [...table.querySelectorAll('th')].map(t => t.textContent)}; }"""


@pytest.mark.slow
def test_demo_page_fits_1280_and_800_px_with_readable_tiles(tmp_path):
    """The summary table fits the window at 1280 px and at 800 px (its run columns in the row,
    the rest in a details line under it; cells wrap only before an interval), measured against
    the viewport in headless Chromium; the head tiles' label colours as the browser computed
    them reach 4.5:1; the per-head heatmaps carry values in their cells. Screenshots of both
    widths are saved beside the page."""
    from browser import visit
    from tests.interp.report.test_report_browser import _require_browser

    _require_browser()
    page = demo_shaped_report().save(tmp_path / "report")["report.html"]
    for width in (1280, 800):
        seen = visit(page, tmp_path / f"report_{width}.png", width=width, probe_js=PROBE)
        assert seen.page_errors == [] and seen.ready, seen.page_errors
        probe = seen.probe
        assert probe["heads"][:2] == ["model", "seed"] and "monotone" not in probe["heads"]
        assert probe["scroll"] <= probe["client"], f"the summary table scrolls at {width} px: {probe}"
        assert probe["right"] <= width and probe["page"] <= width, f"wider than the {width} px window: {probe}"
        assert probe["tiles"], "no head tile on the page"
        for color, background, image in probe["tiles"]:
            overlay = float(re.search(r"rgba\(255, 255, 255, ([\d.]+)\)", image).group(1))
            assert contrast(_rgb(color), _overlaid(_rgb(background), overlay)) >= 4.5, (color, background, image)
        assert probe["cells"] >= 6 * 2 * 3, "the per-head heatmaps show no values in their cells"
