"""Issue 45: head features per checkpoint (interp/population/heads.py), the forecast, the
formation order, the page and the docs blocks, on constructed tables; the control patterns."""

from __future__ import annotations

import math
import re
import shutil

import numpy as np
import pandas as pd
import pytest
import torch

from analyses import population_insight as entry
from interp.patching.ideal import ideal_pattern
from interp.population.forecast import forecast
from interp.population.formation import formation_order, formation_summary, kendalls_w
from interp.population.heads import FEATURE_COLUMNS, loss_at_steps, summarise_heads
from interp.population.insight_page import insight_page

STEPS = np.arange(0, 2001, 100)


def _run_row(arm: str, n_heads: int, seed: int, e: float | None, budget: int = 2000) -> dict:
    return {
        "arm": arm,
        "run": f"{arm}-seed{seed}",
        "seed": seed,
        "n_layers": 2,
        "d_model": 64,
        "n_heads": n_heads,
        "emerged": e is not None,
        "E": math.nan if e is None else float(e),
        "budget": budget,
        "pre_step": pd.NA if e is None else int(e) - 100,
        "post_step": pd.NA if e is None else int(e),
    }


def _heads(run: str, n_heads: int, t_prev: float, t_ind: float, level: float = 0.0) -> pd.DataFrame:
    """Head features: head 0 of each layer forms at its time (score 0.1 -> 0.6); ``level`` adds a
    constant to every layer-1 prefix-matching score (a feature that carries E)."""
    rows = []
    for step in STEPS:
        for layer in (0, 1):
            for head in range(n_heads):
                formed = head == 0 and step >= (t_prev if layer == 0 else t_ind)
                score = 0.6 if formed else 0.1
                rows.append(
                    {
                        "run": run,
                        "step": int(step),
                        "layer": layer,
                        "head": head,
                        "previous_token": score if layer == 0 else 0.05,
                        "prefix_matching": (score if layer == 1 else 0.02) + (level if layer == 1 else 0.0),
                        "entropy": 2.0 - score,
                        "dist_ideal": 1.0 - score,
                        "loss": 3.0 - step / 2000,
                    }
                )
    return pd.DataFrame(rows, columns=FEATURE_COLUMNS)


def test_loss_window_and_summary_of_heads():
    losses = pd.DataFrame({"step": np.arange(300), "loss": np.arange(300, dtype=float)})
    got = loss_at_steps(losses, [0, 100, 250])
    assert got == {0: 0.0, 100: float(np.arange(1, 101).mean()), 250: float(np.arange(151, 251).mean())}
    table = _heads("r", 2, 300, 500)
    s = summarise_heads(table).set_index("step")
    assert s.loc[200, "prev_max"] == 0.1 and s.loc[300, "prev_max"] == 0.6
    assert s.loc[400, "ind_max"] == 0.1 and s.loc[500, "ind_max"] == 0.6
    assert s.loc[500, "dist_min"] == pytest.approx(0.4) and s.loc[0, "entropy_min"] == pytest.approx(1.9)
    with pytest.raises(ValueError, match="window=0"):
        loss_at_steps(losses, [1], window=0)


def test_formation_order_steps_share_and_candidates():
    runs = pd.DataFrame([_run_row("a", 2, 0, 900), _run_row("a", 2, 1, 600), _run_row("a", 2, 2, None)])
    heads = pd.concat([_heads("a-seed0", 2, 300, 500), _heads("a-seed1", 2, 600, 400), _heads("a-seed2", 2, 200, 2100)])
    order = formation_order(runs, heads).set_index("run")
    assert order.loc["a-seed0", ["t_prev", "t_ind", "E"]].tolist() == [300, 500, 900]
    assert order.loc["a-seed0", "order"] == "t_prev < t_ind < E" and order.loc["a-seed0", "strict"]
    assert order.loc["a-seed1", "order"] == "t_ind < t_prev = E" and not order.loc["a-seed1", "weak"]
    # seed 2 never forms an induction head within 2000 steps, nor emerges: both placed after the run
    assert math.isinf(order.loc["a-seed2", "t_ind"]) and order.loc["a-seed2", "order"] == "t_prev < t_ind = E"
    # layer-1 heads past 0.2 before E (at or before pre_step): head 0 of seed 0 (formed at 500, pre 800)
    assert order["n_ind_heads_before_E"].tolist() == [1, 1, 0]
    # the carrier (top prefix-matching head at the end) formed first on seeds 0 and 1; seed 2: none formed
    assert order["carrier"].tolist() == ["L1H0"] * 3 and order["first_formed"].tolist() == ["L1H0", "L1H0", ""]
    assert order["carrier_first"].tolist()[:2] == [True, True] and math.isnan(order.loc["a-seed2", "carrier_first"])
    summary = formation_summary(order.reset_index(), n_boot=200).set_index("arm")
    assert summary.loc["a", "strict"] == 1 and summary.loc["a", "runs"] == 3
    assert summary.loc["a", ["carrier_runs", "carrier_first", "multi_candidates"]].tolist() == [2, 2, 0]
    assert summary.loc["a", "kendall_w_lo"] <= summary.loc["a", "kendall_w"] <= summary.loc["a", "kendall_w_hi"]
    with pytest.raises(ValueError, match=r"prev_threshold=1\.5"):
        formation_order(runs, heads, prev_threshold=1.5)


def test_formation_order_names_a_candidate_that_formed_first_and_lost():
    # head 1 of layer 1 reaches 0.3 at step 200 and stays there; head 0 forms at 500 with 0.6 and
    # ends on top: two candidates before E (pre_step 800), the carrier formed second
    heads = _heads("a-seed0", 2, 100, 500)
    early = (heads["layer"] == 1) & (heads["head"] == 1) & (heads["step"] >= 200)
    heads.loc[early, "prefix_matching"] = 0.3
    one_head = formation_order(pd.DataFrame([_run_row("b", 1, 0, 900)]), _heads("b-seed0", 1, 100, 500)).iloc[0]
    assert one_head["carrier"] == "L1H0" and math.isnan(one_head["carrier_first"])  # no contest with one head
    order = formation_order(pd.DataFrame([_run_row("a", 2, 0, 900)]), heads).iloc[0]
    assert (order["carrier"], order["first_formed"], order["carrier_first"]) == ("L1H0", "L1H1", False)
    assert order["n_ind_heads_before_E"] == 2 and order["t_ind"] == 200
    summary = formation_summary(pd.DataFrame([order]), n_boot=10).iloc[0]
    assert (summary["carrier_first"], summary["carrier_runs"], summary["multi_candidates"]) == (0, 1, 1)
    assert summary["share_carrier_first"] == 0.0 and 0 < summary["share_carrier_first_hi"] < 1


def test_kendalls_w_against_hand_computation():
    assert kendalls_w(np.array([[1, 2, 3]] * 4)) == pytest.approx(1.0)
    # two raters in opposite orders: rank sums all equal -> W = 0
    assert kendalls_w(np.array([[1, 2, 3], [3, 2, 1]])) == pytest.approx(0.0)
    # m=3, n=3, ranks (1,2,3),(1,3,2),(2,1,3): sums 4,6,8, S=8, W = 12*8 / (9*24) = 0.4444
    assert kendalls_w(np.array([[1, 2, 3], [1, 3, 2], [2, 1, 3]])) == pytest.approx(96 / 216)


def _population(rng_seed: int = 0):
    rng = np.random.default_rng(rng_seed)
    runs, heads = [], []
    for arm, n_heads, centre in (("a", 2, 800), ("b", 4, 1500)):
        for seed in range(6):
            e = float(centre * 2 ** rng.uniform(-1, 1)) // 100 * 100
            runs.append(_run_row(arm, n_heads, seed, e, budget=3200))
            heads.append(_heads(f"{arm}-seed{seed}", n_heads, 100, 200, level=math.log2(e) / 40))
    runs.append(_run_row("b", 4, 6, None, budget=3200))
    heads.append(_heads("b-seed6", 4, 100, 200, level=0.3))
    return pd.DataFrame(runs), pd.concat(heads, ignore_index=True)


def test_forecast_beats_the_arm_median_when_a_feature_carries_e():
    runs, heads = _population()
    result = forecast(runs, heads, horizon=500)
    scored = result.predictions[result.predictions["emerged"]]
    assert (scored.groupby("arm")["error"].median() < 0.2).all()  # log2 units: within 15 % (ridge shrinks the ends)
    assert np.corrcoef(np.log2(scored["E"]), np.log2(scored["predicted_E"]))[0, 1] > 0.9
    assert (result.arms["goal_met"]).all() and (result.arms["ratio"] < 0.5).all()
    assert result.arms.set_index("arm").loc["b", "n_runs"] == 7  # the censored run is listed, not scored
    assert math.isnan(result.predictions.set_index("run").loc["b-seed6", "error"])
    # the baseline is the arm's Kaplan-Meier median E over the other seeds still to emerge at the
    # horizon (the population's one median convention, survival.km_median: where S sits at exactly
    # 0.5 the midpoint of the flat, so with no run censored it is the sample median)
    row = result.predictions.set_index("run").loc["a-seed0"]
    others = runs[(runs["arm"] == "a") & (runs["seed"] != 0) & ~(runs["E"] <= 500)]["E"].sort_values()
    assert len(others) % 2 == 0 and others.notna().all()  # the midpoint case
    assert row["baseline_E"] == np.median(others) != others.iloc[len(others) // 2]
    # the censored run is predicted never to emerge by its budget, and the concordance counts it
    censored = result.predictions.set_index("run").loc["b-seed6"]
    assert not censored["predicted_emerged"] and censored["predicted_time"] == np.inf
    assert result.arms.set_index("arm").loc["b", "censored_predicted_never"] == 1
    assert result.concordance > 0.9 and result.concordance > result.baseline_concordance
    arms = result.arms.set_index("arm")
    assert (arms["goal_met_interval"] == (arms["ratio_hi"] <= 0.5)).all()
    assert (arms["ratio_lo"] <= arms["ratio"]).all() and (arms["ratio"] <= arms["ratio_hi"]).all()
    # the goal in steps: half the baseline's log2 error at the arm's median E, by hand for arm a
    a = scored[scored["arm"] == "a"]
    median_e, half_error = a["E"].sort_values().iloc[len(a) // 2], a["baseline_error"].median() / 2
    assert arms.loc["a", "goal_error_steps"] == pytest.approx(median_e * (2**half_error - 1), rel=1e-12)
    assert (
        f"about {arms.loc['a', 'goal_error_steps']:.0f} steps at the arm's median E of {median_e:.0f}"
        in (result.lines()[0])
    )
    # a run without head features is left out and named, not dropped silently
    fewer = forecast(runs, heads[heads["run"] != "a-seed0"], horizon=300)  # (no run emerged by 300)
    assert fewer.notes[0] == "1 run(s) without head features left out: a-seed0"
    assert "a-seed0" not in set(fewer.predictions["run"])
    # a fixed horizon at or after a run's E leaves that run out, named (its features would be read after E)
    late = forecast(runs, heads, horizon=800)
    done = sorted(runs.loc[runs["emerged"] & (runs["E"] <= 800), "run"])
    assert done and not set(done) & set(late.predictions["run"])
    assert late.notes[0] == f"{len(done)} run(s) emerged by step 800, nothing left to forecast, left out: " + ", ".join(
        runs.loc[runs["run"].isin(done), "run"]
    )
    half = forecast(runs, heads, horizon="half").predictions.set_index("run")
    assert half.loc["a-seed0", "horizon_step"] == runs.set_index("run").loc["a-seed0", "E"] // 2 // 100 * 100
    with pytest.raises(ValueError, match="horizon='soon'"):
        forecast(runs, heads, horizon="soon")


def test_page_escapes_names_and_docs_block_round_trip(tmp_path):
    runs, heads = _population()
    runs.loc[0, "run"] = heads.loc[heads["run"] == "a-seed0", "run"] = "<script>x</script>"
    population = type("P", (), {"runs": runs})()
    result = entry.analyse(population, heads, horizons=("half", 500), n_boot=50)
    page = insight_page(result["forecasts"], result["order"], result["summary"], "c")
    assert "<script>x" not in page and "&lt;script&gt;x&lt;" in page  # plot_text escapes, plotly writes \u002f
    from interp.population.insight_page import insight_findings

    findings = insight_findings(result["forecasts"], result["summary"])
    fc = result["forecasts"]["500"].arms
    scored = fc[fc["n_scored"] > 0]
    goal = [h for h, f in result["forecasts"].items() if f.arms.loc[f.arms["n_scored"] > 0, "goal_met"].all()]
    assert findings[0].startswith(f"The forecast's goal (an error at most half the arm-median baseline's on every arm "
                                  f"that can be scored) is met at {len(goal)} of 2 horizons")  # fmt: skip
    assert findings[2].startswith(
        f"Forecast at horizon 500: the error is at most half the arm-median baseline's on "
        f"{int(scored['goal_met'].sum())} of {len(scored)} arms that can be scored"
    )
    # the fixed-step line: cells where the model beats the baseline with its interval below 1
    better = scored[scored["ratio_hi"] < 1]
    assert findings[3].startswith(
        f"Made in advance (fixed steps 500), the forecast beats the arm median with its interval below 1 on "
        f"{len(better)} of {len(scored)} arm × step cells"
    )
    s = result["summary"].set_index("arm").loc["all"]
    assert f"strictly in {int(s['strict'])} (" in findings[4] and f"allowed in {int(s['weak'])} (" in findings[4]
    assert page.index("Findings") < page.index("Forecast: predicted against actual E")
    block = entry.docs_block(result, 120, 60.0)
    assert block.startswith("Runs with head features and a kept curve: 13 of the spec's 120 (12 emerged).")
    docs = tmp_path / "results.md"
    docs.write_text(f"# x\n{entry.BEGIN}\nOLD BLOCK\n{entry.END}\ntail\n")
    entry.update_docs(block, docs)
    text = docs.read_text()
    assert "OLD BLOCK" not in text and block in text and text.endswith("tail\n")


def test_page_formation_table_puts_each_share_with_its_interval_in_one_cell():
    from interp.population.insight_page import formation_table

    base = dict(runs=18, strict=4, share_strict=4 / 18, share_strict_lo=0.09, share_strict_hi=0.452, weak=14,
                share_weak=14 / 18, share_weak_lo=0.548, share_weak_hi=0.91, kendall_w=0.414, kendall_w_lo=0.213,
                kendall_w_hi=0.702, median_ind_heads_before_E=1.0, max_ind_heads_before_E=2, multi_candidates=3,
                carrier_runs=18, carrier_first=18, share_carrier_first=1.0, share_carrier_first_lo=0.824,
                share_carrier_first_hi=1.0)  # fmt: skip
    lone = {**base, "arm": "1h", "kendall_w": math.nan, "carrier_runs": 0, "carrier_first": 0}
    table = formation_table(pd.DataFrame([{**base, "arm": "2h"}, lone]))
    nb, wj = "\u00a0", "\u2060"  # no break inside a share or an interval
    first = table.iloc[0]
    assert first["strict order (95 % CI)"] == f"4 of 18: 22{nb}%{nb}(9{nb}%–{wj}45{nb}%)"
    assert first["order with ties (95 % CI)"] == f"14 of 18: 78{nb}%{nb}(55{nb}%–{wj}91{nb}%)"
    assert first["Kendall's W (95 % CI)"] == f"0.41{nb}(0.21–{wj}0.70)"
    assert first["induction candidates before E"] == "median 1, max 2; ≥ 2 in 3 runs"
    assert first["final head formed first (95 % CI)"] == f"18 of 18: 100{nb}%{nb}(82{nb}%–{wj}100{nb}%)"
    assert table.iloc[1]["Kendall's W (95 % CI)"] == "undetermined"
    assert table.iloc[1]["final head formed first (95 % CI)"] == "no contest"
    assert table.columns[0] == "arm" and len(table.columns) == 6


def test_insight_page_in_headless_chromium_opens_on_findings_and_its_table_fits_800_px(tmp_path):
    from browser import visit
    from tests.interp.report.test_report_browser import _check_page, _require_browser

    _require_browser()
    runs, heads = _population()
    hostile = "<img src=x onerror=window.__pwned=1>"
    runs.loc[runs["arm"] == "a", "arm"] = hostile
    population = type("P", (), {"runs": runs})()
    result = entry.analyse(population, heads, horizons=("half", 500), n_boot=50)
    page = tmp_path / "insight.html"
    page.write_text(insight_page(result["forecasts"], result["order"], result["summary"], "c"), encoding="utf-8")
    probe = (
        "() => ({first: document.querySelector('h2').textContent, pwned: window.__pwned === 1, "
        "text: document.body.innerText, heads: [...document.querySelectorAll('#formation th')].map(t => t.textContent),"
        "wrap: (w => [w.scrollWidth, w.clientWidth])(document.querySelector('#formation .el-table-wrap'))})"
    )
    seen = _check_page(page, tmp_path / "insight.png", probe_js=probe).probe
    assert seen["first"] == "Findings" and not seen["pwned"] and hostile in seen["text"]
    assert seen["heads"][0] == "arm" and len(seen["heads"]) == 6
    narrow = visit(page, tmp_path / "insight_800.png", width=800, probe_js=probe).probe
    assert narrow["wrap"][0] <= narrow["wrap"][1], f"the formation table scrolls at 800 px: {narrow['wrap']}"


def test_control_patterns_are_as_sparse_and_off_the_true_keys():
    tokens = torch.tensor([[5, 6, 7, 8, 9, 5, 6, 7, 8, 9]])
    offset = ideal_pattern("offset_3", tokens)[0].argmax(-1).tolist()
    assert offset == [0, 0, 0, 0, 1, 2, 3, 4, 5, 6]
    ind = ideal_pattern("induction", tokens)[0].argmax(-1).tolist()
    wrong = ideal_pattern("induction_offset_3", tokens)[0].argmax(-1).tolist()
    assert ind[5:] == [1, 2, 3, 4, 5] and wrong[5:] == [3, 4, 5, 6, 7]
    assert wrong[:5] == [0] * 5
    for name in ("offset_3", "induction_offset_3"):
        assert (ideal_pattern(name, tokens).amax(-1) == 1).all()  # one key per row


TINY_STEPS = 24


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """One 2-layer run of 24 steps (checkpoints every 8) trained as a local suite run."""
    import dataclasses

    from interp.forcing import Forcing
    from interp.population.forced import train_forced
    from interp.sources import catalogue

    cfg = dataclasses.replace(
        catalogue.QUICK, steps=TINY_STEPS, size_steps=(), checkpoint_every=8, seeds=(1,), warmup_steps=4, batch_size=4
    )
    off = Forcing(((0, 0, "previous_token"),), beta=0.0, steps=0, anneal_steps=0)  # beta 0: the plain trainer
    folder = train_forced(catalogue.SMALL, 1, cfg, off, tmp_path_factory.mktemp("suite") / "neox-tiny-seed1")
    return cfg, folder


@pytest.mark.slow
def test_head_features_of_a_tiny_run_match_the_scores_and_are_kept_once(tiny_run, tmp_path):
    from interp.population.heads import run_head_features
    from interp.scores import head_scores, repeated_random_tokens
    from interp.sources import LocalSuiteSource
    from interp.tasks import alnum_token_pool

    cfg, folder = tiny_run
    table = run_head_features(folder)
    n_layers, n_heads = cfg.sizes[0].n_layers, cfg.sizes[0].n_heads
    steps = sorted(table["step"].unique())
    assert steps[-1] == TINY_STEPS and len(table) == len(steps) * n_layers * n_heads
    source = LocalSuiteSource(folder)
    tokens = repeated_random_tokens(alnum_token_pool(source.tokenizer()), n_prompts=16, period=20)
    with torch.inference_mode():
        ref = head_scores(source.load(8).model, tokens, 20)
    source.close()
    at8 = table[table["step"] == 8].sort_values(["layer", "head"])
    np.testing.assert_allclose(at8["previous_token"], ref["previous_token"].flatten().numpy(), atol=1e-6)
    np.testing.assert_allclose(at8["prefix_matching"], ref["prefix_matching"].flatten().numpy(), atol=1e-6)
    # layer 0's ideal pattern is the previous-token one: distance = 1 - attention on key i - 1
    l0 = table[table["layer"] == 0]
    np.testing.assert_allclose(l0["dist_ideal"], 1 - l0["previous_token"], atol=1e-5)
    assert (table["entropy"] >= 0).all() and (table["entropy"] <= math.log(40) + 1e-5).all()
    losses = pd.read_csv(folder / "loss.csv")
    assert at8["loss"].iloc[0] == pytest.approx(losses[losses["step"] <= 8]["loss"].mean())
    kept = tmp_path / "kept"
    assert list(entry.keep_head_features([folder], kept, echo=lambda s: None)) == [folder.name]
    assert entry.keep_head_features([folder], kept, echo=lambda s: None) == {}  # kept: never recomputed
    assert len(entry.read_kept_heads(kept)) == len(table)
    path = entry.kept_heads(folder.name, kept)
    path.write_text(path.read_text()[:-30])  # the last row cut: named and computed again, never trusted
    assert entry.read_kept_heads(kept).empty and not path.exists()
    assert list(entry.keep_head_features([folder], kept, echo=lambda s: None)) == [folder.name]


@pytest.mark.slow
def test_forcing_control_trains_true_and_control_on_the_chosen_heads_resumably(tiny_run, tmp_path):
    from analyses import forcing_control as control
    from interp.population import forced
    from interp.population.heads import run_head_features

    cfg, folder = tiny_run
    heads = run_head_features(folder).assign(run=f"{cfg.sizes[0].name}-seed1")
    prev, ind = forced.chosen_heads(heads, f"{cfg.sizes[0].name}-seed1")
    last = heads[heads["step"] == TINY_STEPS]
    assert prev[1] == int(last[last["layer"] == 0].set_index("head")["previous_token"].idxmax())
    units = forced.plan([(cfg.sizes[0], 1)], heads, [(2.0, 8)], 4, tmp_path / "sweep")
    assert [u["condition"] for u in units] == ["true", "control"]
    kept = tmp_path / "kept"
    assert forced.train_missing(units, cfg, jobs=1, kept=kept, echo=lambda s: None) == 2
    assert len(list((kept / "runs").glob("*.csv"))) == 2  # each evaluated and kept as it finished
    true, wrong = ((u["folder"] / "step24" / "model.safetensors").read_bytes() for u in units)
    assert true != wrong
    for u in units:  # the run folders gone (another clone): the kept curves alone resume the entry
        shutil.rmtree(u["folder"])
    assert forced.train_missing(units, cfg, jobs=1, kept=kept, echo=lambda s: None) == 0
    damaged = forced.forced_curve(units[1], kept)
    assert damaged.name == f"{cfg.sizes[0].name}-seed1-control-b2-n8-a4.csv"
    damaged.write_text(damaged.read_text()[:200])  # cut short: named and redone, never trusted
    said = []
    assert forced.read_forced(units[1], kept, echo=said.append) is None and not damaged.exists()
    assert said == [f"warning: {damaged} is not a whole curve; its run is trained and evaluated again"]
    assert forced.train_missing(units, cfg, jobs=1, kept=kept, echo=lambda s: None) == 1  # only it, again
    table = control.evaluate(units, cfg, {}, kept)
    assert table["heads"].tolist() == [
        f"L0H{prev[1]}=previous_token+L1H{ind[1]}=induction",
        f"L0H{prev[1]}=offset_3+L1H{ind[1]}=induction_offset_3",
    ]
    assert (table["train_seconds"] > 0).all()
    summary = control.summarise(table)
    assert summary["paired_n"].tolist() == [0] and not summary["goal_met"].iloc[0]


def test_forcing_control_refuses_bad_input_before_training(tmp_path):
    from analyses import forcing_control as control
    from interp.population import forced
    from interp.population.forced import select_runs
    from interp.sources.catalogue import load_suite_spec

    assert len(select_runs(load_suite_spec("population"), control.DEFAULT_RUNS)) == 12
    for bad in ("1,x", "1:500,x:500", "1:0", "-1:500", "nan:500", "inf:500", "", "1:2.5"):
        with pytest.raises(SystemExit, match=rf"^error: --cells '{re.escape(bad)}' must be comma-separated β:N pairs"):
            control.main([f"--cells={bad}"])
    assert forced.parse_cells(" 1:500, 0.25:500,1:500 ") == [(1.0, 500), (0.25, 500)]
    assert forced.parse_cells(forced.DEFAULT_CELLS) == [(1.0, 500), (1.0, 250), (0.25, 500)]
    with pytest.raises(SystemExit, match=r"no forced run of this command is kept in .*runs yet"):
        control.main(["--finished-only", "--kept", str(tmp_path), "--out", str(tmp_path / "out")])
    with pytest.raises(ValueError, match=r"condition 'other' is unknown; valid: true, control"):
        forced.forcing_of("other", (0, 0), (1, 0), 1.0, 10, 0)
    with pytest.raises(ValueError, match=r"no head features of run 'r'"):
        forced.chosen_heads(_heads("s", 2, 100, 200), "r")


def test_forcing_control_names_the_grid_cells_not_complete():
    from analyses import forcing_control as control

    def units(cells, runs=2):
        return [{"beta": b, "force_steps": n} for b, n in cells for _ in range(2 * runs)]  # true + control per run

    asked = units([(1.0, 500), (1.0, 250), (0.25, 500), (0.25, 250)])
    kept = units([(1.0, 500), (1.0, 250)]) + units([(0.25, 500)], runs=1)
    assert control.cells_line(asked, kept) == (
        "Cells of the grid not complete: β=0.25, N=500 (2 of 4 forced runs kept); β=0.25, N=250 (0 of 4 forced "
        "runs kept); a line below counts its cell's runs kept."
    )
    assert control.cells_line(asked, asked) == ""


def test_forcing_control_summary_counts_a_censored_control_at_the_budget():
    from analyses import forcing_control as control

    rows = []
    for i, (true_shift, control_shift, censored) in enumerate(
        [(-600, 2600, True), (-400, 100, False), (-500, 0, False)]
    ):
        for condition, shift, cens in (("true", true_shift, False), ("control", control_shift, censored)):
            rows.append(
                dict(run=f"r{i}", condition=condition, beta=1.0, force_steps=500, heads="", E_plain=1400.0,
                     E_forced=np.nan if cens else 1400.0 + shift, forced_censored=cens, shift=float(shift))
            )  # fmt: skip
    summary = control.summarise(pd.DataFrame(rows, columns=control.COLUMNS)).iloc[0]
    diff = np.array([-3200, -500, -500])
    half = 4.303 * diff.std(ddof=1) / math.sqrt(3)  # t quantile, 2 degrees of freedom
    assert summary["difference"] == pytest.approx(diff.mean())
    assert summary["difference_hi"] == pytest.approx(diff.mean() + half)
    assert summary["control_censored"] == 1 and summary["paired_n"] == 3 and not summary["goal_met"]  # < 12 runs
    assert "control 1)" in control.verdict(pd.DataFrame([summary]))[0]


def _control_table(rng_seed: int = 0, hostile: str = "r0") -> pd.DataFrame:
    """Forced runs of 12 seeds in two cells: the true pattern shifts E by about −1000 steps, the
    control by about 0 in (β 1, N 500), by about +600 (it slows) in (β 4, N 500)."""
    from analyses import forcing_control as control

    rng = np.random.default_rng(rng_seed)
    rows = []
    for beta, control_mean in ((1.0, 0.0), (4.0, 600.0)):
        for i in range(12):
            for condition, mean in (("true", -1000.0), ("control", control_mean)):
                shift = float(round(mean + rng.normal(0, 150), -2))
                rows.append(
                    dict(run=hostile if i == 0 else f"r{i}", condition=condition, beta=beta, force_steps=500,
                         heads="", E_plain=2000.0, E_forced=2000.0 + shift, forced_censored=False, shift=shift)
                )  # fmt: skip
    return pd.DataFrame(rows, columns=control.COLUMNS)


def test_forcing_control_headline_and_page_table_come_from_the_summary():
    from analyses import forcing_control as control
    from interp.population.control_page import control_table

    summary = control.summarise(_control_table())
    assert summary["goal_met"].tolist() == [True, True]
    slow = summary.iloc[1]
    assert slow["control_lo"] > 0  # the strong wrong bias slows the runs down
    assert control.headline(summary) == (
        "Goal met in 2 of 2 cells of the grid (β=1, N=500; β=4, N=500): the true pattern's shift of E below the "
        "control's, the paired interval below 0 on >= 12 seeds. The control by itself moved E in 1 cell(s): "
        f"β=4, N=500 ({slow['control']:+.0f} steps)."
    )
    calm = summary.iloc[[0]]
    assert control.headline(calm).endswith("its mean shift's interval contains 0 in every cell.")
    shown = control_table(summary)
    first = summary.iloc[0]
    assert shown.iloc[0]["true − control (95 % CI)"] == (
        f"{first['difference']:.0f}\u00a0({first['difference_lo']:.0f} to\u00a0{first['difference_hi']:.0f})"
    )
    assert shown["cell"].tolist() == ["β=1, N=500", "β=4, N=500"] and shown["goal met"].tolist() == ["yes", "yes"]
    assert shown["runs"].tolist() == [12, 12] and shown["never emerged (true, control)"].tolist() == ["0, 0", "0, 0"]


def test_forcing_control_page_in_headless_chromium(tmp_path):
    from analyses import forcing_control as control
    from browser import visit
    from interp.population.control_page import control_page
    from tests.interp.report.test_report_browser import _check_page, _require_browser

    _require_browser()
    hostile = "<img src=x onerror=window.__pwned=1>"
    table = _control_table(hostile=hostile)
    summary = control.summarise(table)
    findings = [control.headline(summary), *control.verdict(summary)]
    page = tmp_path / "forcing_control.html"
    page.write_text(control_page(table, summary, findings, "caption <b>c</b>"), encoding="utf-8")
    probe = (
        "() => ({first: document.querySelector('h2').textContent, pwned: window.__pwned === 1, "
        "text: document.body.innerText, rows: document.querySelectorAll('#summary tbody tr').length, "
        "points: document.querySelectorAll('#per-seed .scatterlayer .point').length, "
        "wrap: (w => [w.scrollWidth, w.clientWidth])(document.querySelector('#summary .el-table-wrap'))})"
    )
    seen = _check_page(page, tmp_path / "control.png", probe_js=probe).probe
    assert seen["first"] == "Findings" and not seen["pwned"] and "caption <b>c</b>" in seen["text"]
    assert seen["text"].index(findings[0]) < seen["text"].index("Per seed")  # the page opens on its answer
    assert seen["rows"] == 2 and seen["points"] == 2 * 2 * 12 + 2 * 2  # each seed, each condition; the means
    narrow = visit(page, tmp_path / "control_800.png", width=800, probe_js=probe).probe
    assert narrow["wrap"][0] <= narrow["wrap"][1], f"the summary table scrolls at 800 px: {narrow['wrap']}"


def test_forecast_ratio_interval_resamples_runs_in_pairs():
    from interp.population.forecast import ratio_interval

    rng = np.random.default_rng(1)
    baseline = rng.uniform(0.05, 0.4, size=12)
    # paired resampling: the model's error is half the baseline's on every run, so every resample's ratio is 0.5
    lo, hi = ratio_interval(0.5 * baseline, baseline)
    assert lo == pytest.approx(0.5, abs=1e-12) and hi == pytest.approx(0.5, abs=1e-12)
    error = rng.uniform(0.05, 0.4, size=12)
    lo, hi = ratio_interval(error, baseline)
    point = np.median(error) / np.median(baseline)
    assert lo < point < hi and hi - lo > 0.1
    assert all(math.isnan(v) for v in ratio_interval(error[:2], baseline[:2]))


@pytest.mark.slow
def test_train_for_heads_retrains_pinned_runs_checks_them_against_the_kept_curves_and_resumes(tmp_path, monkeypatch):
    import dataclasses

    from interp.population.kept import evaluate_run
    from interp.sources import catalogue, embedded
    from interp.sources.catalogue import suite_dir

    monkeypatch.setenv("EMERGENCE_LENS_CACHE", str(tmp_path / "cache"))
    cfg = dataclasses.replace(
        catalogue.QUICK,
        sizes=(catalogue.SMALL,),
        steps=16,
        size_steps=(),
        checkpoint_every=8,
        seeds=(0, 1),
        warmup_steps=4,
        batch_size=4,
    )
    # the population's way: train, keep the curves; then the checkpoints are gone (a fresh clone)
    runs = dict(embedded.iter_suite(cfg, n_jobs=1, progress=False))
    curves = pd.concat(
        [evaluate_run(runs[f"{catalogue.SMALL.name}-seed{s}"], cfg, catalogue.SMALL, s) for s in (0, 1)],
        ignore_index=True,
    )
    shutil.rmtree(suite_dir(cfg))
    other = f"{catalogue.SMALL.name}-seed1"
    curves.loc[(curves["run"] == other) & (curves["step"] == 8), "p_answer"] += 0.01  # a kept curve that differs
    kept = tmp_path / "kept"
    said: list[str] = []
    table = entry.train_for_heads(cfg, curves, jobs=1, kept=kept, echo=said.append).set_index("run")
    assert table.loc[f"{catalogue.SMALL.name}-seed0", "identical"]  # pinned: the same bits again
    assert not table.loc[other, "identical"]
    assert table.loc[other, "max_abs_diff_p_answer"] == pytest.approx(0.01, abs=1e-9)
    assert (
        table["pins_applied"].all() and (table["checkpoints"] == len(cfg.checkpoint_steps_for(catalogue.SMALL))).all()
    )
    assert sorted(p.name for p in (kept / "heads").glob("*.csv")) == [f"{r}.csv" for r in sorted(table.index)]
    assert not any(suite_dir(cfg).glob(f"{catalogue.SMALL.name}-seed*"))  # run folders removed
    assert any(line.startswith(f"{other}: trained again, curve not bit-identical to the kept one") for line in said)
    line = entry.retrained_line(table.reset_index())
    assert line.startswith("2 of these runs were trained again for their head features")
    assert "(accuracy exactly, p(answer) to 1e-05) on 1 of 2, bit for bit on 1" in line
    assert f"; differing: {other}; training time per run median" in line
    assert table.loc[f"{catalogue.SMALL.name}-seed0", "max_abs_diff_accuracy"] == 0
    said.clear()  # resumed: every run has its head features, nothing is trained
    again = entry.train_for_heads(cfg, curves, jobs=1, kept=kept, echo=said.append)
    assert said == [] and len(again) == 2
    with pytest.raises(ValueError, match="jobs=0 must be >= 1"):
        entry.train_for_heads(cfg, curves, jobs=0, kept=kept)
    (kept / "retrained.csv").write_text("run,identical\nx")  # damaged: named and started again
    assert entry.read_retrained(kept / "retrained.csv", echo=said.append).empty
    assert said == [f"warning: {kept / 'retrained.csv'} lacks columns; it is started again"]
