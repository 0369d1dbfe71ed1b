"""The head timeline (issue 69): every head's pattern-patching effect at every checkpoint pair.

Checked on a tiny local suite of GPT-NeoX checkpoints (steps 0, 100, 200: one sharp random
initialisation, initializer_range 0.3, plus independent noise per step, so that a head's pattern
moves the answer's log probability by up to ~0.15 nats): the exact deltas
equal a hand-written TransformerLens hook loop to 1e-5; with the screen, the verified heads are
the estimate's top N plus a random sample and the bound is the largest sampled |delta|; a
resumed call computes only the pairs without a stored row (a damaged one redone); bad input is
refused in one line before anything loads; the findings' words come from the table.
"""

from __future__ import annotations

import itertools
import math
import os

import numpy as np
import pandas as pd
import pytest
import torch

import interp.timeline as timeline_module
from interp.core.settings import StudyConfig
from interp.report.timeline_page import head_onsets, timeline_findings
from interp.sources import open_source
from interp.tasks import RepetitionTask
from interp.timeline import TABLE_COLUMNS, HeadTimeline, head_timeline, timeline_pairs

TASK = RepetitionTask(n_prompts=20, length=6)
#: Every head exact, log probability (nats).
EXACT = StudyConfig(method="fast", metric="logprob", n_boot=200)


def _hand_loop(folder, pre: int, post: int) -> np.ndarray:
    """delta[layer, head] = mean logprob(answer) of ``pre`` with that head's hook_pattern replaced by
    ``post``'s, minus the unpatched mean: one forward per head, written out with hooks."""
    source = open_source(folder)
    try:
        batch = TASK.build(source.tokenizer())
        assert batch.attention_mask is None
        rows = torch.arange(batch.tokens.shape[0])

        def logprob(logits):
            return torch.log_softmax(logits[rows, batch.answer_pos].float(), dim=-1)[rows, batch.answers].mean()

        post_model = source.load(post).model
        with torch.inference_mode():
            _, cache = post_model.run_with_cache(batch.tokens, names_filter=lambda n: n.endswith("hook_pattern"))
            post_patterns = {name: cache[name].clone() for name in cache.keys()}
        pre_model = source.load(pre).model
        n_layers, n_heads = pre_model.cfg.n_layers, pre_model.cfg.n_heads
        out = np.zeros((n_layers, n_heads))
        with torch.inference_mode():
            base = float(logprob(pre_model(batch.tokens)))
            for layer in range(n_layers):
                name = f"blocks.{layer}.attn.hook_pattern"
                for head in range(n_heads):

                    def hook(pattern, hook, head=head, name=name):
                        pattern = pattern.clone()
                        pattern[:, head] = post_patterns[name][:, head]
                        return pattern

                    logits = pre_model.run_with_hooks(batch.tokens, fwd_hooks=[(name, hook)])
                    out[layer, head] = float(logprob(logits)) - base
        return out
    finally:
        source.close()


@pytest.fixture(scope="module")
def tiny_local_suite(tmp_path_factory):
    """Steps 0, 100, 200 of a 2-layer, 4-head GPT-NeoX (d_model 32, byte vocabulary): one random
    initialisation (initializer_range 0.3: sharp patterns) plus N(0, 0.1^2) noise per step."""
    from transformers import GPTNeoXForCausalLM

    from interp.sources.catalogue import neox_config
    from tests.conftest import save_byte_tokenizer

    root = tmp_path_factory.mktemp("sharp-suite")
    config = neox_config(32, 2, 4, 256, 64)
    config.initializer_range = 0.3
    torch.manual_seed(0)
    base = GPTNeoXForCausalLM(config).eval().state_dict()
    for i, step in enumerate([0, 100, 200]):
        model = GPTNeoXForCausalLM(config).eval()
        model.load_state_dict(base)
        noise = torch.Generator().manual_seed(i + 1)
        with torch.no_grad():
            for p in model.parameters():
                p.add_(torch.randn(p.shape, generator=noise) * 0.1)
        model.save_pretrained(root / f"step{step}")
    save_byte_tokenizer(root / "tokenizer")
    return root


@pytest.fixture(scope="module")
def reference(tiny_local_suite):
    return {pair: _hand_loop(tiny_local_suite, *pair) for pair in [(0, 100), (100, 200)]}


@pytest.fixture(scope="module")
def exact_timeline(tiny_local_suite):
    return head_timeline(str(tiny_local_suite), TASK, EXACT, progress=False)


def test_exact_deltas_equal_a_hand_written_hook_loop(exact_timeline, reference):
    table = exact_timeline.table
    assert list(table.columns) == TABLE_COLUMNS
    assert (table["how"] == "exact").all()
    assert sorted(set(zip(table["step"], table["post_step"]))) == [(0, 100), (100, 200)]
    for (pre, _post), expected in reference.items():
        rows = table[table["step"] == pre].sort_values(["layer", "head"])
        got = rows["delta"].to_numpy().reshape(expected.shape)
        assert np.abs(expected).max() > 0.05  # the comparison is not between zeros
        np.testing.assert_allclose(got, expected, atol=1e-5, rtol=0)
        assert (rows["lo"] <= rows["delta"] + 1e-12).all() and (rows["delta"] <= rows["hi"] + 1e-12).all()
    # capability and head scores ride along, one value per pair / per head
    assert table.groupby("step")["value_pre"].nunique().eq(1).all()
    assert table["previous_token"].between(0, 1).all() and table["prefix_matching"].between(0, 1).all()
    assert exact_timeline.pairs["bound"].isna().all()  # every head exact: nothing sampled, no bound


def test_screen_verifies_top_n_and_a_sample_and_bounds_from_it(tiny_local_suite, reference):
    config = EXACT.replace(method="attribution", prescreen_top_n=2)
    result = head_timeline(str(tiny_local_suite), TASK, config, sample=3, seed=7, progress=False)
    for pair in result.pairs.itertuples():
        rows = result.table[result.table["step"] == pair.step]
        top, sampled = rows[rows["chosen"] == "top"], rows[rows["chosen"] == "sample"]
        assert len(top) == 2 and len(sampled) == 3 and pair.n_exact == 5 and pair.n_sampled == 3
        # the top N are the largest estimates by size; every other head is estimated or sampled
        assert top["estimate"].abs().min() >= rows[rows["chosen"] != "top"]["estimate"].abs().max()
        estimated = rows[rows["how"] == "estimated"]
        assert len(estimated) == len(rows) - 5 and estimated["lo"].isna().all()
        assert (estimated["delta"] == estimated["estimate"]).all()
        # exact rows equal the hand loop; the bound is the largest sampled |delta|, named
        expected = reference[pair.step, pair.post_step]
        for r in rows[rows["how"] == "exact"].itertuples():
            assert r.delta == pytest.approx(expected[r.layer, r.head], abs=1e-5)
        worst = sampled.loc[sampled["delta"].abs().idxmax()]
        assert pair.bound == pytest.approx(abs(worst["delta"]), abs=0)
        assert (pair.bound_layer, pair.bound_head) == (worst["layer"], worst["head"])
    again = head_timeline(str(tiny_local_suite), TASK, config, sample=3, seed=7, progress=False)
    pd.testing.assert_frame_equal(again.table, result.table)  # the sample is drawn from the seed


def test_resume_skips_finished_pairs_and_redoes_a_damaged_one(tiny_local_suite, tmp_path, monkeypatch, caplog):
    out = tmp_path / "timeline"
    first = head_timeline(str(tiny_local_suite), TASK, EXACT, out_dir=out, progress=False)
    assert {p.name for p in out.iterdir()} >= {"timeline.csv", "timeline.parquet", "pairs.csv", "timeline.html"}
    calls = []
    real = timeline_module.pair_effects
    monkeypatch.setattr(timeline_module, "pair_effects", lambda *a, **k: calls.append(1) or real(*a, **k))
    again = head_timeline(str(tiny_local_suite), TASK, EXACT, out_dir=out, progress=False)
    assert calls == []  # every pair stored: none computed
    pd.testing.assert_frame_equal(again.table, first.table)
    rows = sorted((out / "pairs" / "runs").glob("pair-*.parquet"))
    assert len(rows) == 2
    rows[0].unlink()  # a pair killed before its row was written
    rows[1].write_bytes(rows[1].read_bytes()[:20])  # a pair's row cut short
    with caplog.at_level("WARNING"):
        resumed = head_timeline(str(tiny_local_suite), TASK, EXACT, out_dir=out, progress=False)
    assert len(calls) == 2
    assert any(rows[1].name in message and "run again" in message for message in caplog.messages)
    pd.testing.assert_frame_equal(
        resumed.table[["step", "layer", "head", "delta"]], first.table[["step", "layer", "head", "delta"]]
    )
    with pytest.raises(ValueError, match=r"holds a timeline of other settings .*sample"):
        head_timeline(str(tiny_local_suite), TASK, EXACT, sample=1, out_dir=out, progress=False)


def test_bad_input_is_refused_before_loading(tiny_local_suite, monkeypatch, tmp_path):
    import interp.sources.door as door

    monkeypatch.setattr(door, "open_source", lambda *a, **k: pytest.fail("a source was opened"))
    with pytest.raises(ValueError, match=r"pairs='next'; valid: consecutive, to-post, to-final"):
        head_timeline(str(tiny_local_suite), TASK, pairs="next")
    with pytest.raises(ValueError, match="sample=-1: must be an integer >= 0"):
        head_timeline(str(tiny_local_suite), TASK, sample=-1)
    with pytest.raises(TypeError, match="head_timeline: task"):
        head_timeline(str(tiny_local_suite), "repetition")
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="existing file"):
        head_timeline(str(tiny_local_suite), TASK, out_dir=tmp_path / "file")


def test_pairs_of_a_run():
    steps = [200, 0, 100, 300]
    assert timeline_pairs(steps, "consecutive") == [(0, 100), (100, 200), (200, 300)]
    assert timeline_pairs(steps, "to-final") == [(0, 300), (100, 300), (200, 300)]
    assert timeline_pairs(steps, "to-post", post_step=200) == [(0, 200), (100, 200)]
    with pytest.raises(ValueError, match="did not emerge"):
        timeline_pairs(steps, "to-post", post_step=None)


def _synthetic(model_id: str = "toy") -> HeadTimeline:
    """A timeline whose L1H0 rises at step 200 (interval above 0) and E is step 400."""
    rows = []
    steps = [0, 100, 200, 300, 400, 500]
    for step, post in itertools.pairwise(steps):
        for layer in range(2):
            for head in range(2):
                d = {0: 0.0, 100: 0.01, 200: 0.06, 300: 0.1, 400: 0.08}[step] if (layer, head) == (1, 0) else 0.001
                how = "exact" if (layer, head) in ((1, 0), (0, 1)) else "estimated"
                lo, hi = (d - 0.005, d + 0.005) if how == "exact" else (math.nan, math.nan)
                rows.append((step, post, layer, head, d, lo, hi, how, "top" if how == "exact" else "", d,
                             0.1, 0.1, 0.2, 0.5, 0.5, 0.1))  # fmt: skip
    table = pd.DataFrame(rows, columns=TABLE_COLUMNS)
    pairs = pd.DataFrame({"step": steps[:-1], "post_step": steps[1:], "value_pre": 0.1, "value_post": 0.2,
                          "n_exact": 3, "n_sampled": 1, "bound": [0.001, 0.002, 0.004, 0.003, 0.001],
                          "bound_layer": 0, "bound_head": 1, "spearman": 0.9, "seconds": 1.0})  # fmt: skip
    curve = pd.DataFrame(
        {"step": steps, "accuracy": [0, 0, 0.1, 0.3, 0.7, 0.9], "p_answer": [0, 0, 0.1, 0.2, 0.5, 0.7]}
    )
    point = {"emerged": True, "pre_step": 300, "post_step": 400, "threshold": 0.5, "hold": 0}
    return HeadTimeline(
        table, pairs, curve, point, model_id, "repetition", "p", "probability", {"pairs": "consecutive"}
    )


def test_findings_are_computed_from_the_table():
    t = _synthetic()
    onsets = head_onsets(t.table)
    assert (onsets.loc[0, "layer"], onsets.loc[0, "head"], onsets.loc[0, "onset_step"]) == (1, 0, 200)
    lines = timeline_findings(t.table, t.pairs, t.point, t.unit, "consecutive")
    assert (
        "L1H0's effect rises to half its peak at step 200, 200 steps before E; peak Δ +0.1 [+0.095, +0.105] at step 300."
        in lines
    )
    assert any("is 0.004 probability (L0H1 at step 200)" in line for line in lines)
    html = t._repr_html_()
    assert "rises to half its peak at step 200" in html and "plotly" in html


def test_a_negative_peak_falls_to_its_onset():
    """The words follow the peak's sign: the same head with every delta negated falls (a new
    user's report: a -0.0475 peak was said to rise)."""
    t = _synthetic()
    table = t.table.assign(delta=-t.table["delta"], lo=-t.table["hi"], hi=-t.table["lo"])
    lines = timeline_findings(table, t.pairs, t.point, t.unit, "consecutive")
    assert (
        "L1H0's effect falls to half its peak at step 200, 200 steps before E; peak Δ -0.1 [-0.105, -0.095] at step 300."
        in lines
    )
    assert not any("rises" in line for line in lines)


@pytest.mark.parametrize("width", [1280, 800])
def test_page_in_a_browser(tmp_path, width):
    """The page in headless Chromium with the network cut, at 1280 and 800 px: the figure draws
    (curve, heatmap, dots, bound), no request leaves the page, no error; a run name that looks like
    markup is shown as text; the findings open the page."""
    from browser import chromium_path, visit

    if chromium_path() is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("headless Chromium not found (Debian package 'chromium')")
        pytest.skip("headless Chromium not found (Debian package 'chromium')")
    page = _synthetic(model_id='<img src=x onerror="document.title=1">run').save_html(tmp_path / "timeline.html")
    probe = """() => ({imgs: document.querySelectorAll('img').length,
        first: document.querySelector('.el-findings li').textContent,
        heatmap: document.querySelectorAll('.plotly-graph-div .hm, .plotly-graph-div .heatmaplayer image').length,
        scroll: document.documentElement.scrollWidth, title: document.title})"""
    visit_ = visit(page, tmp_path / f"timeline-{width}.png", width=width, probe_js=probe)
    assert visit_.ready and visit_.page_errors == [] and visit_.console_errors == [] and visit_.blocked == []
    (fig,) = visit_.state["figs"]
    assert fig["svg"] and fig["legend"] == 5 and fig["traces"] >= 4  # two curves, dots of both kinds, bound
    assert visit_.probe["heatmap"] >= 1 and visit_.probe["imgs"] == 0
    assert visit_.probe["title"].startswith("Head timeline: <img")  # text, not an element
    assert visit_.probe["first"].startswith("5 checkpoint pairs")
    assert visit_.probe["scroll"] <= width  # nothing wider than the window


def test_the_report_links_a_runs_timeline_saved_in_its_folder(tmp_path):
    """Issue 69 item 2: a report saved where a run's timeline page is (OUT/timelines/<run>/) links
    it in that run's part; the timeline written there with the report as its scrubber links back
    to ../../report.html; a run without one gets no link."""
    from interp.main_job.report import MainJobReport
    from interp.report.timeline_page import report_timeline_path
    from tests.interp.report.test_display import make_run

    report = MainJobReport(runs=[make_run(1), make_run(2)])
    (first, second) = report.runs
    href = report_timeline_path(first.model, first.seed)
    assert href == f"timelines/{first.model}-seed{first.seed}/timeline.html"
    report.save(tmp_path)  # no timeline yet: no link
    assert "Head timeline" not in (tmp_path / "report.html").read_text(encoding="utf-8")
    timeline = _synthetic(model_id=f"{first.model}-seed{first.seed}")
    page = timeline.save_html(tmp_path / href, scrubber=tmp_path / "report.html")
    assert 'href="../../report.html"' in page.read_text(encoding="utf-8")
    report.save(tmp_path)
    html = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert html.count(f"<a href='{href}'>the head timeline</a>") == 1  # the first run only
    assert f"Head timeline — {first.model} seed {first.seed}" in html
    assert f"Head timeline — {second.model} seed {second.seed}" not in html


#: Where a heatmap cell of the timeline's figure is on the page (viewport pixels), by its step's
#: column and its head's row (the heatmap is the second row of panels: axes x2, y2).
_CELL_JS = """([column, row]) => {
  const gd = document.querySelector('.el-timeline-map .plotly-graph-div');
  gd.scrollIntoView({block: 'center'});
  const L = gd._fullLayout, xa = L.xaxis2, ya = L.yaxis2, box = gd.getBoundingClientRect();
  return [box.left + xa._offset + xa.l2p(column), box.top + ya._offset + ya.l2p(row)];
}"""


@pytest.mark.parametrize("width", [1280, 800])
def test_a_heatmap_cell_opens_the_scrubber_on_that_head_at_that_step(tmp_path, width):
    """Issue 69 item 2: on a timeline page saved with the run's scrubber, clicking a cell of the
    heatmap opens the scrubber (another page, linked by its relative path) with that head enlarged
    at the recorded step nearest the cell's step, saying so when it is not the same step."""
    import dataclasses

    from browser import chromium_path, open_page
    from tests.interp.report.test_scrubber import toy_data

    if chromium_path() is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("headless Chromium not found (Debian package 'chromium')")
        pytest.skip("headless Chromium not found (Debian package 'chromium')")
    recorded = [0, 100, 250, 400, 500]  # the scrubber recorded step 250, not 200
    data = toy_data()  # 2 layers x 3 heads, labelled "toy seed 0", the timeline's run
    data = dataclasses.replace(
        data, steps=recorded, curve=data.curve.assign(step=recorded), zoom_steps=[], pre_step=250, post_step=400
    )
    from interp.report.scrubber import Scrubber

    scrub_page = Scrubber(data).save_html(tmp_path / "scrub" / "toy.html")
    timeline = _synthetic()
    page = timeline.save_html(tmp_path / "timeline" / "timeline.html", scrubber=scrub_page)
    html = page.read_text(encoding="utf-8")
    assert 'href="../scrub/toy.html"' in html  # relative: the two folders move together
    assert timeline.save_html(tmp_path / "alone.html").read_text(encoding="utf-8").count("el-timeline-scrubber") == 0
    wanted = {(1, 0, 200): 250, (0, 1, 100): 100}  # (layer, head, the cell's step): the step the scrubber shows
    for (layer, head, step), shown in wanted.items():
        with open_page(page, width=width, also=(scrub_page,)) as (browser_page, visit_):
            browser_page.wait_for_function(
                "() => !!document.querySelector('.el-timeline-map .plotly-graph-div svg.main-svg')"
            )
            row = [(0, 0), (0, 1), (1, 0), (1, 1)].index((layer, head))  # the heatmap's rows, by layer then head
            x, y = browser_page.evaluate(_CELL_JS, [step // 100, row])
            browser_page.mouse.click(x, y)
            browser_page.wait_for_url("**/scrub/toy.html#*")
            browser_page.wait_for_function(
                "() => document.querySelector('.el-scrub')?.dataset.ready === '1' && !!ELScrub.all[0].enlarged"
            )
            state = browser_page.evaluate(
                """() => { const s = ELScrub.all[0]; return {enlarged: s.enlarged, step: s.steps[s.index],
                    title: document.querySelector('.el-scrub-big-title').textContent,
                    note: document.querySelector('.el-scrub-big-step').textContent,
                    hidden: document.querySelector('.el-scrub-big').hidden, hash: location.hash}; }"""
            )
            if (layer, head) == (1, 0):
                browser_page.screenshot(path=str(tmp_path / f"scrubber-from-timeline-{width}.png"))
            assert visit_.page_errors == [] and visit_.console_errors == [] and visit_.blocked == []
        assert state["enlarged"] == [layer, head] and state["step"] == shown and not state["hidden"], state
        assert (
            state["title"].startswith(f"L{layer}H{head}")
            and state["hash"] == f"#run=toy+seed+0&head=L{layer}H{head}&step={step}"
        )
        assert (f"the recorded step nearest step {step}" in state["note"]) == (shown != step), state["note"]


def test_a_trainer_layout_gives_the_same_timeline(tiny_local_suite, exact_timeline, tmp_path):
    """The door reads a Trainer's ``checkpoint-{N}`` folders (tokenizer inside each): same table."""
    import shutil

    for step in (0, 100, 200):
        shutil.copytree(tiny_local_suite / f"step{step}", tmp_path / f"checkpoint-{step}")
        shutil.copytree(tiny_local_suite / "tokenizer", tmp_path / f"checkpoint-{step}", dirs_exist_ok=True)
    result = head_timeline(str(tmp_path), TASK, EXACT, progress=False)
    pd.testing.assert_frame_equal(result.table, exact_timeline.table)


def test_hub_cache_source_skips_duplicate_steps(tiny_hub_cache, hub_offline):
    """A hub source (opened, left open): steps 1 and 2 serve the same weights, so at most one label
    is right and both are left out (the hazards rule, ``CheckpointSource.duplicate_steps``)."""
    from interp.sources import HubSource

    source = HubSource(tiny_hub_cache["repo_id"], cache_dir=tiny_hub_cache["cache_dir"], allow_pickle=True)
    try:
        result = head_timeline(source, TASK, EXACT.replace(allow_pickle=True), pairs="to-final", progress=False)
    finally:
        source.close()
    assert [(r.step, r.post_step) for r in result.pairs.itertuples()] == [(0, 4)]
    assert list(result.curve["step"]) == [0, 4]
    assert len(result.table) == 8 and (result.table["how"] == "exact").all()
