"""Issue 52 (items 1, 3-6) and issue 56 (item 4): the population's models checked before they are
quoted. What else varies with the compared factor; tied event times; the proportional-hazards test
against its formula on hand-computed Schoenfeld residuals; the log-linearity LR test with an arm
that never emerged; the grid of rules with a crossing that has no room to hold; the claim lines'
verdicts; the one rule of formation and E; the forecast's concordance; the command line
reproducing docs/results.md section 4 from the kept curves."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from interp.core.settings import StudyConfig
from interp.population.tables import population_from_curves

ROOT = Path(__file__).resolve().parents[3]


def rows(arm, seed, n_heads, accuracy, budget, d_model=16, steps=None):
    steps = steps if steps is not None else [100 * i for i in range(len(accuracy))]
    return [
        {"arm": arm, "run": f"{arm}-seed{seed}", "seed": seed, "n_layers": 1, "d_model": d_model, "n_heads": n_heads,
         "d_head": d_model // n_heads, "step": s, "p_answer": a, "accuracy": a, "budget": budget}
        for s, a in zip(steps, accuracy)
    ]  # fmt: skip


def step_curve(E, last):
    return [1.0 if E is not None and s >= E else 0.0 for s in range(0, last + 1, 100)]


def table(spec, budget=500, d_model=16):
    """``spec``: {(arm, n_heads): [E or None, ...]} -> a capability table."""
    out = []
    for (arm, heads), Es in spec.items():
        for i, E in enumerate(Es):
            out += rows(arm, i, heads, step_curve(E, budget), budget, d_model=d_model)
    return pd.DataFrame(out)


# ------------------------------------------------------------------ issue 56, item 4: tied times


def test_every_run_at_risk_emerging_at_one_step_leaves_the_cox_ratio_undetermined():
    """Two arms whose every run emerges at step 100: before the fix the Cox row read HR 1.00
    (0.20–4.95) and "no effect of the head count detected", an interval made by Efron's tie
    approximation alone; the log-rank row already said undetermined."""
    result = population_from_curves(
        table({("A", 2): [100, 100], ("B", 4): [100, 100]}), StudyConfig(hold=0), grid=False
    )
    cox = result.cox.iloc[0]
    assert math.isnan(cox["hr_per_doubling"]) and math.isnan(cox["hr_lo"])
    assert cox["note"].startswith("every run at risk emerged at the same step (100): a single tied event time")
    assert "undetermined" in result.tests.loc[0, "note"]
    line = next(x for x in result.findings if x.startswith("1 layers, d_model 16 (heads 2, 4)"))
    assert "undetermined (every run at risk emerged at the same step (100)" in line and "no effect" not in line
    assert not any(c.startswith("Claim 4") and "×1.00" in c for c in result.claims)


def test_a_singular_cox_fit_is_undetermined_not_a_crash():
    """The decoupled arms with 6 of 24 four-head runs kept (threshold 0.6 of the rule grid): five
    4-head runs emerge by 1800 and one 8-head run at 3800; statsmodels' Newton step met a singular
    information matrix and the whole docs block raised LinAlgError."""
    from interp.population.survival import cox_fit

    duration = np.array([1800, 4000, 1200, 1200, 1300, 1300] + [8000] * 13 + [3800] + [8000] * 10, float)
    emerged = np.array([1, 0, 1, 1, 1, 1] + [0] * 13 + [1] + [0] * 10, bool)
    x = np.array([2.0] * 6 + [3.0] * 24)
    row, fit = cox_fit(duration, emerged, x, "heads")
    assert fit is None and math.isnan(row["hr"]) and math.isnan(row["hr_lo"])
    assert row["note"].startswith("the Cox fit's information matrix is singular")


def test_a_fit_resting_on_one_tied_event_time_says_so():
    # every event at step 200, some runs at risk censored at 500: a ratio, with the warning
    result = population_from_curves(
        table({("A", 2): [200, None, None], ("B", 4): [200, 200, None]}), StudyConfig(hold=0), grid=False
    )
    cox = result.cox.iloc[0]
    assert math.isfinite(cox["hr_per_doubling"]) and cox["note"] == ""
    assert cox["caveat"] == "every event fell on step 200: the fit's information rests on a single tied event time"
    assert "rests on a single tied event time" in next(x for x in result.findings if x.startswith("1 layers"))


# ------------------------------------------------------------------ item 1: what else varies


def test_what_else_varies_with_the_head_count_is_named_and_the_contrast_called_confounded():
    from interp.population.shapes import also_varies, rotary_dims

    assert rotary_dims("neox-2l-64d-8h", 8) == 2 and rotary_dims("neox-2l-64d-8h-r8", 8) == 8
    spec = {("neox-1l-64d-1h", 1): [200, 300], ("neox-1l-64d-4h", 4): [300, 400]}
    result = population_from_curves(table(spec, d_model=64), StudyConfig(hold=0), grid=False)
    assert also_varies(result.runs, ["neox-1l-64d-1h", "neox-1l-64d-4h"], "n_heads") == (
        "d_head 64–16, rotary dims per head 16–4"
    )
    arms = result.arms.set_index("arm")
    assert arms.loc["neox-1l-64d-4h", "compared"] == "n_heads"
    assert arms.loc["neox-1l-64d-4h", "also_varies"] == "d_head 16 vs 64, rotary dims per head 4 vs 16"
    assert result.tests.loc[1, "also_varies"] == "d_head 16 vs 64, rotary dims per head 4 vs 16"
    assert result.findings[3].endswith("; confounded: d_head 16 vs 64, rotary dims per head 4 vs 16 vary with n_heads")
    # rotary dims fixed (the decoupled arms, "-r8"): d_head alone still varies
    fixed = {("neox-1l-64d-2h-r8", 2): [200, 300], ("neox-1l-64d-4h-r8", 4): [300, 400]}
    result = population_from_curves(table(fixed, d_model=64), StudyConfig(hold=0), grid=False)
    assert result.cox.loc[0, "also_varies"] == "d_head 32–16"
    assert result.claims[-1].startswith("Claim 4, heads (neox, d_model 64, 1 layers, heads 2, 4): confounded")
    assert "also varies: d_head 16 vs 32)" in result.claims[-1]


# ------------------------------------------------------------------ item 4: model checks


def _exponential(n, hr, seed, crossing=False):
    """Two arms (1 and 2 heads), exponential times, HR ``hr``; ``crossing``: arm 2 early-heavy then flat."""
    rng = np.random.default_rng(seed)
    x = np.repeat([0.0, 1.0], n)
    t = rng.exponential(1.0, 2 * n) / np.where(x == 1, hr, 1.0)
    if crossing:  # arm 2: half emerge almost at once, the rest very late: hazards cross
        late = (x == 1) & (rng.random(2 * n) < 0.5)
        t = np.where(x == 1, np.where(late, 3 + 3 * t, 0.05 * t), t)
    return x, t


def test_ph_test_is_grambsch_therneau_on_hand_computed_schoenfeld_residuals():
    from statsmodels.duration.hazard_regression import PHReg

    from interp.population.checks import ph_test

    x, t = _exponential(60, 2.0, 0)
    events = t < 2.0  # administrative censoring at 2
    t = np.minimum(t, 2.0)
    fit = PHReg(t, x[:, None], status=events.astype(float), ties="efron").fit()
    beta = float(fit.params[0])
    # Schoenfeld residual of each event (no ties): x minus the risk set's exp(beta x)-weighted mean
    r = np.array([x[i] - np.sum(x[t >= t[i]] * np.exp(beta * x[t >= t[i]])) / np.sum(np.exp(beta * x[t >= t[i]]))
                  for i in np.flatnonzero(events)])  # fmt: skip
    g = pd.Series(t[events]).rank().to_numpy()
    g = g - g.mean()
    stat = events.sum() * float(fit.cov_params()[0, 0]) * (g @ r) ** 2 / (g @ g)
    got, p = ph_test(fit, t, events)
    assert got == pytest.approx(stat, rel=1e-9) and p > 0.05  # generated with proportional hazards
    x, t = _exponential(60, 1.0, 1, crossing=True)
    fit = PHReg(t, x[:, None], status=np.ones_like(t), ties="efron").fit()
    assert ph_test(fit, t, np.ones_like(t, bool))[1] < 0.001  # crossing hazards: rejected


def test_loglinearity_lr_test_and_an_arm_with_no_events():
    from scipy.stats import chi2
    from statsmodels.duration.hazard_regression import PHReg

    # 1 and 2 heads alike, 4 heads later, 8 never: not log-linear in log2(heads)
    spec = {("h1", 1): [100, 200, 200, 300, 300] * 2, ("h2", 2): [100, 200, 200, 300, 400] * 2,
            ("h4", 4): [400, 600, 700, 800, None] * 2, ("h8", 8): [None] * 10}  # fmt: skip
    result = population_from_curves(table(spec, budget=900), StudyConfig(hold=0), grid=False)
    full = result.cox.iloc[0]
    runs = result.runs
    d, e = runs["duration"].to_numpy(float), runs["emerged"].to_numpy(float)
    lin = PHReg(d, np.log2(runs["n_heads"].to_numpy(float))[:, None], status=e, ties="efron").fit()
    dummies = np.column_stack([(runs["n_heads"] == h).to_numpy(float) for h in (2, 4, 8)])
    per_arm = PHReg(d, dummies, status=e, ties="efron")
    # the per-arm model's supremum: the 8-head coefficient run to minus infinity (its runs leave every risk set)
    live = runs["n_heads"] != 8
    sup = PHReg(d[live], dummies[live][:, :2], status=e[live], ties="efron").fit().llf
    params = np.r_[PHReg(d[live], dummies[live][:, :2], status=e[live], ties="efron").fit().params, -40.0]
    assert per_arm.loglike(params) == pytest.approx(sup, abs=1e-4)
    assert full["lr_chi2"] == pytest.approx(2 * (sup - lin.llf), rel=1e-9) and full["lr_df"] == 2
    assert full["lr_p"] == pytest.approx(chi2.sf(full["lr_chi2"], 2)) and full["lr_p"] < 0.05
    assert full["lr_note"].startswith("n_heads=8: no run emerged")
    assert full["silent_heads"] == "8"
    line = next(x for x in result.findings if x.startswith("1 layers, d_model 16 (heads 1, 2, 4, 8)"))
    assert "; this ratio leans on n_heads=8, where no run emerged (its runs enter censored at the budget)" in line
    # the headline gives the per-arm contrasts instead of a ratio per doubling, and names the silent arm
    (claim,) = [c for c in result.claims if c.startswith("Claim 4")]
    # every contrast also varies d_head: the judge gives no verdict on the claim, only on each test
    assert claim.startswith("Claim 4, heads (d_model 16, 1 layers, heads 1, 2, 4, 8): confounded")
    assert "1 → 2 heads: confounded, robust null" in claim and "4 → 8 heads: confounded" in claim
    c = result.contrasts.set_index("heads")
    assert math.isnan(c.loc["4 → 8", "hr"]) and c.loc["4 → 8", "logrank_p"] < 0.05
    assert c.loc["1 → 2", "hr_lo"] < 1 < c.loc["1 → 2", "hr_hi"]  # 1 and 2 heads alike


# ------------------------------------------------------------------ item 3: the grid of rules


def test_a_crossing_with_no_room_to_hold_is_censored_and_the_grid_says_what_holds():
    from interp.emergence import held_crossing
    from interp.population.robust import robustness
    from interp.population.statistics import grid_result

    # a crossing on the last checkpoint: no room to hold, no crossing (the study's one rule, issue 67)
    assert held_crossing([0, 100, 200, 300], [0, 0, 0, 1], 0.5, 2) == (None, None)
    assert held_crossing([0, 100, 200, 300], [0, 1, 1, 1], 0.5, 2) == (0, 100)
    # arm A's runs reach 0.55 early, 1.0 only 400 steps later; B's reach 1.0 at once: at threshold
    # 0.5 the 4-head arm B emerges later, at 0.6 earlier
    out = []
    for i, E1 in enumerate([100, 100, 200, 200, 300, 300, 400, 400]):
        acc = [0.0 if s < E1 else 0.55 if s < E1 + 400 else 1.0 for s in range(0, 1201, 100)]
        out += rows("A", i, 2, acc, 1200)
    for i, E in enumerate([300, 300, 400, 400, 500, 500, 600, 600]):
        out += rows("B", i, 4, step_curve(E, 1200), 1200)
    result = population_from_curves(pd.DataFrame(out), StudyConfig(threshold=0.5, hold=1))
    grid = result.grid
    assert sorted(set(zip(grid["threshold"], grid["hold"]))) == [(t, h) for t in (0.4, 0.5, 0.6) for h in (1, 2, 3)]
    size = grid[grid["key"] == "cox:1:16:all"].set_index(["threshold", "hold"])
    assert size.loc[(0.5, 1), "direction"] == "later" and size.loc[(0.6, 1), "direction"] == "earlier"
    verdict = robustness(grid).set_index("key").loc["cox:1:16:all"]
    assert not verdict["robust"] and verdict["verdict"].startswith("not robust: ")
    assert verdict["verdict"] == (  # the judge's word, the cells named
        "not robust: later at 0.4/1, 0.4/2, 0.4/3, 0.5/1, 0.5/2, 0.5/3; earlier at 0.6/1, 0.6/2, 0.6/3"
    )
    shown = grid_result(result).cells
    assert list(shown.columns) == ["finding", *[f"{t}/{h}" for t in (0.4, 0.5, 0.6) for h in (1, 2, 3)], "verdict"]
    (claim,) = [c for c in result.claims if c.startswith("Claim 4")]  # d_head varies too: confounded, whatever the test
    assert "2 → 4 heads: confounded, not robust (log-rank stratified by seed p = 0.0047, later;" in claim
    assert "; earlier at 0.6/1, 0.6/2, 0.6/3)" in claim and "contradicted" not in claim


def test_the_grids_robustness_words_are_the_judges():
    """robust.robustness words each finding with interp.population.judge.robustness: an effect
    significant one way in every cell is robust, significant in none a robust null, otherwise not
    robust with the judge's naming of the cells; a fact false in every cell is a robust null (as
    judge_fact says), one that holds in some cells only is not robust."""
    from interp.population.judge import Cell
    from interp.population.judge import robustness as judged
    from interp.population.robust import robustness

    cells = [(t, h) for t in (0.4, 0.5, 0.6) for h in (1, 2, 3)]

    def finding(key, kind, p, direction, holds):
        return [
            {"key": key, "finding": key, "label": key, "kind": kind, "threshold": t, "hold": h, "estimate": "",
             "direction": direction(t), "p": p(t), "holds": holds(t)}
            for t, h in cells
        ]  # fmt: skip

    grid = pd.DataFrame(
        finding("all", "effect", lambda t: 0.001, lambda t: "later", lambda t: True)
        + finding("none", "effect", lambda t: 0.4, lambda t: "earlier", lambda t: False)
        + finding("part", "effect", lambda t: 0.01 if t < 0.6 else 0.2, lambda t: "earlier", lambda t: t < 0.6)
        + finding("global", "effect", lambda t: 0.01 if t < 0.6 else 0.2, lambda t: "", lambda t: t < 0.6)
        + finding("false", "fact", lambda t: math.nan, lambda t: "", lambda t: False)
        + finding("some", "fact", lambda t: math.nan, lambda t: "", lambda t: t == 0.4)
    )
    out = robustness(grid).set_index("key")
    assert out.loc["all", "verdict"] == "robust: later in every cell (p < 0.05)" and out.loc["all", "robust"]
    assert out.loc["none", "verdict"] == "robust null: not significant in any cell (p ≥ 0.05)"
    assert bool(out.loc["none", "robust"])
    word, broken = judged(tuple(Cell(t, h, 0.01 if t < 0.6 else 0.2, 1) for t, h in cells))
    assert out.loc["part", "verdict"] == f"{word}: {broken}" and not out.loc["part", "robust"]
    assert out.loc["part", "verdict"] == (
        "not robust: earlier at 0.4/1, 0.4/2, 0.4/3, 0.5/1, 0.5/2, 0.5/3; not significant at 0.6/1, 0.6/2, 0.6/3"
    )
    assert out.loc["global", "verdict"].startswith("not robust: significant at 0.4/1, ")  # no direction to name
    assert out.loc["false", "verdict"] == "robust null: false in every cell"
    assert (
        out.loc["some", "verdict"]
        == "not robust: holds at 0.4/1, 0.4/2, 0.4/3; false at 0.5/1, 0.5/2, 0.5/3, 0.6/1, 0.6/2, 0.6/3"
    )
    short = robustness(pd.DataFrame(finding("all", "effect", lambda t: 0.001, lambda t: "later", lambda t: True)[:8]
                                    + finding("x", "effect", lambda t: 0.4, lambda t: "", lambda t: False)))  # fmt: skip
    assert (
        short.set_index("key").loc["all", "verdict"]
        == "not robust: later at 0.4/1, 0.4/2, 0.4/3, 0.5/1, 0.5/2, 0.5/3, 0.6/1, 0.6/2; undetermined at 0.6/3"
    )


# ------------------------------------------------------------------ item 6: one rule


def test_formation_events_and_e_are_dated_by_one_rule():
    from interp.population.formation import formation_order
    from interp.population.tables import runs_from_curves

    steps = list(range(0, 601, 100))
    series = [0.0, 0.0, 0.0, 0.0, 0.0, 0.4, 0.4]  # reaches 0.3 on the last two checkpoints: no room for hold 2
    heads = pd.DataFrame(
        [{"run": "A-seed0", "step": s, "layer": layer, "head": 0, "previous_token": v, "prefix_matching": v,
          "entropy": 1.0, "dist": 0.5} for s, v in zip(steps, series) for layer in (0, 1)]
    )  # fmt: skip
    runs = runs_from_curves(pd.DataFrame(rows("A", 0, 1, [0, 0, 0, 0, 0, 1, 1], 600)), threshold=0.5, hold=2)
    order = formation_order(runs, heads, prev_threshold=0.3, ind_threshold=0.3, hold=2).iloc[0]
    assert not runs.loc[0, "emerged"]  # E: no room to hold, censored
    assert math.isinf(order["t_prev"]) and math.isinf(order["t_ind"]) and math.isinf(order["E"])
    order = formation_order(runs, heads, prev_threshold=0.3, ind_threshold=0.3, hold=1).iloc[0]
    assert order["t_prev"] == order["t_ind"] == 500  # with room (hold 1) the same rule dates it


def test_insight_markers_at_one_step_do_not_hide_each_other():
    from interp.population.insight_page import formation_figure

    order = pd.DataFrame([{"run": "r", "t_prev": 300.0, "t_ind": 300.0, "E": 300.0},
                          {"run": "s", "t_prev": 200.0, "t_ind": math.inf, "E": 400.0}])  # fmt: skip
    fig = formation_figure(order)
    at_300 = [(float(x), float(y)) for trace in fig.data for x, y in zip(trace.x, trace.y) if x == 300]
    assert len(at_300) == 3 and len(set(at_300)) == 3  # three markers, three places
    assert sum(len(trace.x) for trace in fig.data) == 5  # the event that never happened has no marker


# ------------------------------------------------------------------ forecast concordance


def test_concordance_by_hand():
    from interp.population.forecast import concordance

    duration = np.array([100.0, 200, 300, 400])
    emerged = np.array([True, True, False, True])
    # comparable (shorter emerged): (0,1) (0,2) (0,3) (1,2) (1,3); run 2 censored before 3: not with 3
    assert concordance(duration, emerged, np.array([1.0, 2, 3, 4])) == (1.0, 5)
    assert concordance(duration, emerged, np.array([4.0, 3, 2, 1])) == (0.0, 5)
    c, n = concordance(duration, emerged, np.array([1.0, math.inf, math.inf, 2]))
    assert n == 5 and c == pytest.approx((1 + 1 + 1 + 0.5 + 0) / 5)  # (1,2) tie at never; (1,3) wrong


# ------------------------------------------------------------------ item 5: section 4 reproduced


def test_cli_from_curves_reproduces_section_4_with_the_specs_reference(tmp_path):
    from typer.testing import CliRunner

    from emergence_lens.cli import app
    from interp.population.kept import read_kept_curves

    curves = read_kept_curves()
    if curves["run"].nunique() < 120:
        pytest.skip("the kept curves of the population are not all here")
    path = tmp_path / "curves.csv"
    curves.to_csv(path, index=False)
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["population", "--from-curves", str(path), "--out", str(out)])
    assert result.exit_code == 0, result.output
    from interp.population.tables import PopulationResult

    loaded = PopulationResult.load(out)
    assert loaded.reference == "neox-2l-64d-4h"
    tests = loaded.tests.set_index("arm")
    assert round(tests.loc["", "chi2"], 2) == 140.61
    assert round(tests.loc["neox-2l-64d-1h", "chi2"], 2) == 20.12
    cox = loaded.cox
    assert (round(cox.loc[0, "hr_per_doubling"], 3), round(cox.loc[1, "hr_per_doubling"], 3)) == (0.355, 0.531)
    assert "log-rank test neox-2l-64d-2h vs neox-2l-64d-4h: χ² = 49.92 (1 df), p < 0.001" in result.output
    docs = (ROOT / "docs" / "results.md").read_text()
    assert "χ² = 140.61 (4 df)" in docs and "×0.35 (95 % CI 0.28–0.45" in docs
