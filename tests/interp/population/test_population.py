"""Survival statistics of the point of emergence over seeds (issue 44): the statistics against
hand computations on a small table with ties and censoring, the point of emergence per run
against the hold rule, censoring at the budget, degenerate populations, save / load, the page in
headless Chromium, the command line and ``el.population`` on checkpoint sources.

The hand table (budget 500 steps, checkpoints every 100 steps, accuracy 0 then 1 from E on):

    arm A (n_heads 2): E = 200, 200, 400; one run stopped at its budget 300; one never (budget 500)
    arm B (n_heads 4): E = 100, 200, 200, 300

so step 200 holds tied events of both arms and A has a censoring (300) between its events.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from statsmodels.stats.proportion import proportion_confint

from interp.core.settings import StudyConfig
from interp.emergence import held_crossing
from interp.population.tables import CURVE_COLUMNS, PopulationResult, check_curves, population_from_curves

Z = 1.959963984540054
HOSTILE = "<script>alert(1)</script>"


def curve_rows(arm, run, seed, n_heads, accuracy, budget, steps=None, d_model=16, n_layers=1):
    """Rows of the capability table for one run: ``accuracy`` per step (steps 0, 100, ... by default)."""
    steps = steps if steps is not None else [100 * i for i in range(len(accuracy))]
    return [
        {
            "arm": arm,
            "run": run,
            "seed": seed,
            "n_layers": n_layers,
            "d_model": d_model,
            "n_heads": n_heads,
            "d_head": d_model // n_heads,
            "step": s,
            "p_answer": 0.1 + 0.8 * a,
            "accuracy": a,
            "budget": budget,
        }
        for s, a in zip(steps, accuracy)
    ]


def step_curve(E, last):
    """Accuracy 0 before E, 1 from E on, at steps 0, 100, ..., last (E None: never)."""
    return [1.0 if E is not None and s >= E else 0.0 for s in range(0, last + 1, 100)]


def hand_table() -> pd.DataFrame:
    rows = []
    for i, (E, budget) in enumerate([(200, 500), (200, 500), (400, 500), (None, 300), (None, 500)]):
        rows += curve_rows("A", f"A-seed{i}", i, 2, step_curve(E, budget), budget)
    for i, E in enumerate([100, 200, 200, 300]):
        rows += curve_rows("B", f"B-seed{i}", i, 4, step_curve(E, 500), 500)
    return pd.DataFrame(rows, columns=CURVE_COLUMNS)


@pytest.fixture
def hand():
    return population_from_curves(hand_table(), StudyConfig(threshold=0.5, hold=1))


# ------------------------------------------------------------------ point of emergence per run


def test_point_of_emergence_is_the_hold_rule_on_each_curve():
    touch = [0.0, 0.6, 0.2, 0.7, 0.8, 0.9]  # touches 0.5 at 100 and falls back; holds from 300
    curves = pd.DataFrame(curve_rows("A", "touch", 0, 2, touch, 500) + curve_rows("A", "flat", 1, 2, [0.1] * 6, 500))
    for hold, post in [(0, 100), (1, 300), (2, 300)]:
        runs = population_from_curves(curves, StudyConfig(hold=hold)).runs.set_index("run")
        assert (runs.loc["touch", "pre_step"], runs.loc["touch", "post_step"]) == (post - 100, post)
        assert (runs.loc["touch", "pre_step"], runs.loc["touch", "post_step"]) == held_crossing(
            [100 * i for i in range(6)], touch, threshold=0.5, hold=hold
        )
        assert runs.loc["touch", "E"] == post and runs.loc["touch", "emerged"]
        assert pd.isna(runs.loc["flat", "post_step"]) and not runs.loc["flat", "emerged"]


def test_runs_not_emerged_by_the_budget_are_censored_there_never_dropped():
    # "late" crosses at 400, after its budget 300 (its curve runs on to 500): censored at 300
    curves = pd.DataFrame(
        curve_rows("A", "late", 0, 2, step_curve(400, 500), 300)
        + curve_rows("A", "never", 1, 2, step_curve(None, 500), 500)
        + curve_rows("A", "early", 2, 2, step_curve(100, 500), 500)
    )
    runs = population_from_curves(curves, StudyConfig(hold=0)).runs.set_index("run")
    assert len(runs) == 3
    assert runs.loc["late", "post_step"] == 400 and not runs.loc["late", "emerged"]
    assert math.isnan(runs.loc["late", "E"]) and runs.loc["late", "censored_at"] == 300
    assert runs.loc["late", "duration"] == 300
    assert runs.loc["never", "censored_at"] == 500 and runs.loc["never", "duration"] == 500
    assert runs.loc["early", "E"] == 100 and math.isnan(runs.loc["early", "censored_at"])
    # the same run with --budget 500 for every run emerges at 400
    again = population_from_curves(curves, StudyConfig(hold=0), budget=500).runs.set_index("run")
    assert again.loc["late", "E"] == 400 and again.loc["late", "emerged"]


# ------------------------------------------------------------------ statistics by hand


def test_kaplan_meier_by_hand(hand):
    km = hand.km.set_index(["arm", "step"])
    # A: 200: 2 of 5 at risk emerge -> 3/5; 300: censoring only; 400: 1 of 2 -> 3/10
    # B: 100: 1 of 4 -> 3/4; 200: 2 of 3 -> 1/4; 300: 1 of 1 -> 0
    expected = {
        ("A", 0): (5, 0, 1.0),
        ("A", 200): (5, 2, 0.6),
        ("A", 400): (2, 1, 0.3),
        ("B", 0): (4, 0, 1.0),
        ("B", 100): (4, 1, 0.75),
        ("B", 200): (3, 2, 0.25),
        ("B", 300): (1, 1, 0.0),
    }
    assert set(km.index) == set(expected)
    for key, (at_risk, events, s) in expected.items():
        assert (km.loc[key, "n_at_risk"], km.loc[key, "n_events"]) == (at_risk, events), key
        assert km.loc[key, "survival"] == pytest.approx(s, abs=1e-12), key
    # Greenwood: S * sqrt(sum d / (n (n - d)))
    assert km.loc[("A", 200), "survival_se"] == pytest.approx(0.6 * math.sqrt(2 / 15), rel=1e-9)
    assert km.loc[("A", 400), "survival_se"] == pytest.approx(0.3 * math.sqrt(2 / 15 + 1 / 2), rel=1e-9)
    # log-log interval: S ** exp(±z se / (S log S))
    s, se = 0.6, 0.6 * math.sqrt(2 / 15)
    half = Z * se / (s * math.log(s))
    assert km.loc[("A", 200), "survival_lo"] == pytest.approx(s ** math.exp(-half), rel=1e-9)
    assert km.loc[("A", 200), "survival_hi"] == pytest.approx(s ** math.exp(half), rel=1e-9)
    assert 0 < km.loc[("A", 200), "survival_lo"] < 0.6 < km.loc[("A", 200), "survival_hi"] < 1


def test_arm_table_median_interval_and_share_by_hand(hand):
    arms = hand.arms.set_index("arm")
    assert arms.loc["A", ["n_runs", "n_emerged", "n_never", "budget"]].tolist() == [5, 3, 2, 500]
    assert arms.loc["B", ["n_runs", "n_emerged", "n_never", "n_heads", "d_head"]].tolist() == [4, 4, 0, 4, 4]
    # median: the first step where S falls below 0.5
    assert arms.loc["A", "median_E"] == 400 and arms.loc["B", "median_E"] == 200
    # Brookmeyer-Crowley on the cloglog scale: the event steps whose |g(S) - g(0.5)| <= z se_g
    # (g = log(-log S), se_g = se / |S log S|); lo = the first of them, hi = the event step after
    # the last (inf when that is the last event step)
    steps_a, s_a = [200, 400], np.array([0.6, 0.3])
    se_a = np.array([0.6 * math.sqrt(2 / 15), 0.3 * math.sqrt(2 / 15 + 1 / 2)])
    r = (np.log(-np.log(s_a)) - math.log(-math.log(0.5))) / (se_a / np.abs(s_a * np.log(s_a)))
    inside = [step for step, v in zip(steps_a, r) if abs(v) <= Z]
    assert inside == [200, 400]  # both: the upper bound is not reached by the budget
    assert (arms.loc["A", "median_E_lo"], arms.loc["A", "median_E_hi"]) == (200, math.inf)
    # Wilson score interval of 2 never emerged of 5
    k, n = 2, 5
    centre, half = (k + Z**2 / 2) / (n + Z**2), Z * math.sqrt(k * (n - k) / n + Z**2 / 4) / (n + Z**2)
    assert arms.loc["A", "share_never_emerged"] == pytest.approx(0.4)
    assert arms.loc["A", "share_never_lo"] == pytest.approx(centre - half, rel=1e-9)
    assert arms.loc["A", "share_never_hi"] == pytest.approx(centre + half, rel=1e-9)
    assert arms.loc["B", "share_never_lo"] == 0.0 and arms.loc["B", "share_never_hi"] == pytest.approx(
        Z**2 / (n - 1 + Z**2), rel=1e-9
    )


def logrank_by_hand(runs: pd.DataFrame, arm: str) -> float:
    """The textbook log-rank chi-square for two groups: (O - E)^2 / V summed over event steps,
    E = d n_arm / n, V = d (n_arm / n) (1 - n_arm / n) (n - d) / (n - 1); a run censored at a step
    is at risk at that step."""
    o = e = v = 0.0
    for t in sorted(runs.loc[runs["emerged"], "duration"].unique()):
        at_risk = runs[runs["duration"] >= t]
        n, n1 = len(at_risk), int((at_risk["arm"] == arm).sum())
        d = int(((runs["duration"] == t) & runs["emerged"]).sum())
        o += int(((runs["duration"] == t) & runs["emerged"] & (runs["arm"] == arm)).sum())
        e += d * n1 / n
        v += d * (n1 / n) * (1 - n1 / n) * (n - d) / (n - 1) if n > 1 else 0.0
    return (o - e) ** 2 / v


def test_logrank_by_hand(hand):
    chi2 = logrank_by_hand(hand.runs, "A")
    # O_A = 3; E_A = 5/9 + 4*5/8 + 3/4 + 1; V = 20/81 + 4*(5/8)(3/8)(4/7) + 3/16 + 0
    expected = (3 - (5 / 9 + 2.5 + 0.75 + 1)) ** 2 / (20 / 81 + 4 * (5 / 8) * (3 / 8) * (4 / 7) + 3 / 16)
    assert chi2 == pytest.approx(expected, rel=1e-12) and expected == pytest.approx(3.3604, abs=1e-4)
    tests = hand.tests.set_index("test")
    assert tests.loc["global", "chi2"] == pytest.approx(chi2, rel=1e-9) and tests.loc["global", "df"] == 1
    from scipy.stats import chi2 as chi2_dist

    assert tests.loc["global", "p"] == pytest.approx(chi2_dist.sf(chi2, 1), rel=1e-9)
    pair = tests.loc["vs reference"]
    assert (pair["arm"], pair["reference"]) == ("B", "A") and pair["chi2"] == pytest.approx(chi2, rel=1e-9)


def efron_score(beta: float, runs: pd.DataFrame) -> float:
    """The derivative of Efron's partial log-likelihood in beta (one covariate x = log2 heads)."""
    x = np.log2(runs["n_heads"].to_numpy(float))
    t, event = runs["duration"].to_numpy(float), runs["emerged"].to_numpy(bool)
    w = np.exp(beta * x)
    score = 0.0
    for step in np.unique(t[event]):
        died = event & (t == step)
        risk = t >= step
        d = int(died.sum())
        score += x[died].sum()
        for m in range(d):
            num = (w * x)[risk].sum() - m / d * (w * x)[died].sum()
            den = w[risk].sum() - m / d * w[died].sum()
            score -= num / den
    return score


def test_cox_hazard_ratio_per_doubling_of_heads(hand):
    (row,) = hand.cox.to_dict("records")
    assert (row["heads"], row["n_runs"], row["n_emerged"], row["note"]) == ("2, 4", 9, 7, "")
    # the estimate is the root of Efron's score, and the score changes sign around it
    assert efron_score(row["coef_log2_heads"], hand.runs) == pytest.approx(0.0, abs=1e-6)
    assert (
        efron_score(row["coef_log2_heads"] - 0.1, hand.runs) > 0 > efron_score(row["coef_log2_heads"] + 0.1, hand.runs)
    )
    # B (4 heads) emerges earlier than A (2 heads): the hazard per doubling is above 1
    assert row["hr_per_doubling"] == pytest.approx(math.exp(row["coef_log2_heads"])) and row["hr_per_doubling"] > 1
    assert row["hr_lo"] == pytest.approx(math.exp(row["coef_log2_heads"] - Z * row["se"]))
    assert row["hr_hi"] == pytest.approx(math.exp(row["coef_log2_heads"] + Z * row["se"]))
    from scipy.stats import norm

    assert row["p"] == pytest.approx(2 * norm.sf(abs(row["coef_log2_heads"] / row["se"])), rel=1e-9)


def test_an_arm_that_never_emerged_stays_in_the_cox_fit_and_is_refitted_without():
    """Arms of 1, 2 and 4 heads whose events overlap, and 8 heads that never emerge: the partial
    likelihood still has a maximum (the root of Efron's score over all runs), and a second row
    refits without the silent arm."""
    rows = []
    for heads, Es in [(1, [200, 300, 300, 500]), (2, [200, 400, 500, None]), (4, [300, 500, None, None])]:
        for i, E in enumerate(Es):
            rows += curve_rows(f"h{heads}", f"h{heads}-seed{i}", i, heads, step_curve(E, 600), 600)
    rows += [r for i in range(3) for r in curve_rows("h8", f"h8-seed{i}", i, 8, step_curve(None, 600), 600)]
    result = population_from_curves(pd.DataFrame(rows), StudyConfig(hold=0))
    full, refit = result.cox.to_dict("records")
    assert (full["fit"], full["heads"], full["n_runs"], full["note"]) == ("all arms", "1, 2, 4, 8", 15, "")
    assert efron_score(full["coef_log2_heads"], result.runs) == pytest.approx(0.0, abs=1e-6)
    assert full["hr_per_doubling"] < 1  # more heads, later: the hazard per doubling is below 1
    kept = result.runs[result.runs["n_heads"] != 8]
    assert (refit["fit"], refit["heads"], refit["n_runs"]) == ("without n_heads=8 (no run emerged)", "1, 2, 4", 12)
    assert efron_score(refit["coef_log2_heads"], kept) == pytest.approx(0.0, abs=1e-6)
    # leaving the silent arm out weakens the trend: its censored runs carried information
    assert full["coef_log2_heads"] < refit["coef_log2_heads"] < 0
    assert any(
        line.startswith("1 layers, d_model 16 (heads 1, 2, 4), without n_heads=8 (no run emerged): ")
        for line in result.findings
    )


def test_findings_in_words_are_computed_from_the_tables(hand):
    lines = hand.findings
    a, b = hand.arms.set_index("arm").loc["A"], hand.arms.set_index("arm").loc["B"]
    share = f"{100 * a['share_never_lo']:.0f} %–{100 * a['share_never_hi']:.0f} %"
    assert lines[0] == (
        f"A: 3 of 5 seeds emerged by step 500; median E 400 steps (95 % CI 200–not reached); "
        f"never emerged: 40 % (95 % CI {share})"
    )
    assert lines[1].startswith("B: 4 of 4 seeds emerged by step 500; median E 200 steps (95 % CI ")
    assert b["median_E_lo"] <= 200 and f"(95 % CI {b['median_E_lo']:.0f}–" in lines[1]
    chi2 = hand.tests.loc[0, "chi2"]
    p = hand.tests.loc[0, "p"]
    assert 0.01 < p < 0.1  # printed with two significant digits
    assert lines[2] == f"log-rank test across 2 arms (A, B): χ² = {chi2:.2f} (1 df), p = {p:.2g}"
    cox = hand.cox.iloc[0]
    assert lines[4].startswith(
        f"1 layers, d_model 16 (heads 2, 4): per doubling of heads the hazard of emergence is "
        f"×{cox['hr_per_doubling']:.2f} (95 % CI {cox['hr_lo']:.2f}–{cox['hr_hi']:.2f}, p = "
    )


def test_the_papers_claims_in_words_from_the_tables(hand):
    """Every verdict word from the judge (interp.population.judge), on the hand population."""
    from interp.population.statistics import claim_results

    found = claim_results(hand)
    assert [r.name for r in found] == ["claim-1-seed", "claim-1-never", "claim-4-heads"]
    assert [r.verdict.word for r in found] == ["reproduced", "reproduced", "confounded"]
    assert len(found[2].table) == 1 and found[2].table.iloc[0]["word"] == "confounded"  # its one contrast
    seed, never, heads = hand.claims
    assert [line for r in found for line in r.headline] == hand.claims
    assert seed.startswith("Claim 1, seed: reproduced, not robust at threshold 0.5, hold 1 (") and (
        "A 200–400 (×2.00, 3 seeds); B 100–300 (×3.00, 4 seeds); holds at 0.4/1, 0.5/1, 0.6/1 only" in seed
    )
    assert (
        never
        == "Claim 1, never: reproduced, robust at threshold 0.5, hold 1 (mixed arms: A 2 of 5 never); the paper: or never."
    )
    # the one head-count contrast also varies d_head and the rotary dims: confounded, never a verdict on the claim
    p = float(hand.contrasts.iloc[0]["logrank_p"])
    assert heads.startswith("Claim 4, heads (d_model 16, 1 layers, heads 2, 4): confounded at threshold 0.5, hold 1 (")
    assert f"2 → 4 heads: confounded, robust null (log-rank p = {p:.2g}; also varies: d_head 4 vs 8" in heads
    assert "reproduced" not in heads and "contradicted" not in heads
    # a larger d_model at the same heads: the size claim, with the pair's own log-rank test, confounded
    bigger = pd.DataFrame(
        [
            r
            for i, E in enumerate([100, 100, 200])
            for r in curve_rows("C", f"C{i}", i, 4, step_curve(E, 500), 500, d_model=32)
        ]
    )
    both = population_from_curves(pd.concat([hand_table(), bigger]), StudyConfig(hold=0))
    (size,) = [line for line in both.claims if line.startswith("Claim 1, size")]
    assert size.startswith(
        "Claim 1, size (d_model 32 vs 16, 4 heads): confounded, robust null at threshold 0.5, hold 0"
    )
    assert "also varies: d_head 8 vs 4, rotary dims per head 2 vs 1" in size


def test_degenerate_populations_say_why_instead_of_failing():
    never = pd.DataFrame(
        curve_rows("A", "a0", 0, 2, [0.0] * 4, 300)
        + curve_rows("A", "a1", 1, 2, [0.0] * 4, 300)
        + curve_rows("B", "b0", 0, 4, [0.0, 1, 1, 1], 300)
        + curve_rows("B", "b1", 1, 4, [0.0, 0, 0, 0], 300)
    )
    result = population_from_curves(never, StudyConfig(hold=0))
    cox = result.cox.iloc[0]
    # B0 (4 heads) is the only run that emerged and had the most heads at risk: no maximum
    assert math.isnan(cox["hr_per_doubling"]) and cox["note"].startswith("every run that emerged had the most heads")
    assert "no run with n_heads=2 emerged" in cox["note"] and len(result.cox) == 1  # one head count left: no refit
    a, b = (result.arms.set_index("arm").loc[arm] for arm in "AB")
    assert (
        math.isnan(a["median_E"])
        and "A: 0 of 2 seeds emerged by step 300; median not reached: no seed" in (result.findings[0])
    )
    # B: S = 1/2 exactly after step 100, never below: the median is not reached
    assert math.isnan(b["median_E"]) and "median not reached: no more than half emerged" in result.findings[1]
    one_arm = population_from_curves(never[never["arm"] == "A"], StudyConfig(hold=0))
    assert one_arm.tests["note"].tolist() == ["one arm: nothing to compare"]
    assert "one head count (2): no variation to fit" in one_arm.cox.loc[0, "note"]
    assert "undetermined (one arm: nothing to compare)" in one_arm.findings[1]
    assert one_arm.km["step"].tolist() == [0] and one_arm.km["survival"].tolist() == [1.0]
    all_censored = population_from_curves(never[never["run"] != "b0"], StudyConfig(hold=0))
    assert all_censored.tests.loc[0, "note"] == "no run emerged in these arms: the test is undetermined"
    assert any("hazard ratio per doubling of heads undetermined (no run emerged" in x for x in all_censored.findings)


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda t: t.iloc[0:0], "the capability table is empty"),
        (lambda t: t.drop(columns="p_answer"), "missing column(s) 'p_answer'"),
        (lambda t: t.rename(columns={"accuracy": "acc"}), "unknown column(s) 'acc'; missing column(s) 'accuracy'"),
        (lambda t: t.assign(budget=-5), "budget=-5 is not an integer >= 0"),
        (lambda t: t.assign(accuracy=1.5), "accuracy=1.5 is not in [0, 1]"),
        (lambda t: pd.concat([t, t.iloc[:1]]), "run 'A-seed0' lists step 0 twice"),
        (lambda t: t.assign(n_heads=np.where(t["step"] == 0, 8, t["n_heads"])), "has more than one n_heads"),
    ],
)
def test_bad_tables_are_refused_in_one_line(change, message):
    with pytest.raises(ValueError) as error:
        check_curves(change(hand_table()))
    assert message in str(error.value) and "\n" not in str(error.value)


def test_bad_settings_are_refused_in_one_line():
    for call, message in [
        (lambda: population_from_curves(hand_table(), budget=-1), "budget=-1: must be an integer >= 0"),
        (lambda: population_from_curves(hand_table(), StudyConfig(threshold=0.0)), "threshold=0.0 must be in (0, 1]"),
        (lambda: population_from_curves(hand_table(), StudyConfig(hold=-1)), "hold=-1: must be an integer >= 0"),
        (
            lambda: population_from_curves(hand_table(), reference="C"),
            "reference arm 'C' is not in the table; arms: A, B",
        ),
    ]:
        with pytest.raises(ValueError, match=None) as error:
            call()
        assert message in str(error.value) and "\n" not in str(error.value)
    with pytest.raises(TypeError, match=r"population_from_curves: config is float 0.5; expected a StudyConfig"):
        population_from_curves(hand_table(), 0.5)  # the old second parameter, threshold, by position


def test_save_and_load_round_trip(hand, tmp_path):
    written = hand.save(tmp_path / "pop")
    names = {
        f"{t}.{ext}"
        for t in ("runs", "arms", "tests", "cox", "contrasts", "grid", "km", "curves")
        for ext in ("csv", "parquet")
    }
    assert set(written) == names | {"population.json", "population.html"}
    loaded = PopulationResult.load(tmp_path / "pop")
    assert loaded == hand and loaded.findings == hand.findings
    assert pd.read_csv(tmp_path / "pop" / "arms.csv")["median_E"].tolist() == [400, 200]
    assert not list((tmp_path / "pop").glob(".*.tmp"))  # nothing half-written left behind
    text = repr(hand)
    assert text.startswith("PopulationResult(2 arms, 9 runs, 7 emerged; threshold 0.5, hold 1") and len(text) < 3000
    assert "<h2>Findings</h2>" in hand._repr_html_() and hand._repr_html_().count("* plotly.js v") == 1


# ------------------------------------------------------------------ the page in a browser


def test_page_in_headless_chromium(tmp_path):
    from tests.interp.report.test_report_browser import _check_page, _require_browser

    _require_browser()
    table = hand_table()
    table.loc[table["run"] == "B-seed1", "run"] = HOSTILE
    table.loc[table["arm"] == "B", "arm"] = "B <b>bold</b>"
    result = population_from_curves(table, StudyConfig(hold=1), title="population <i>test</i>")
    page = result.save(tmp_path / "pop")["population.html"]
    html = page.read_text(encoding="utf-8")
    assert html.count("* plotly.js v") == 1 and HOSTILE not in html and "<b>bold</b>" not in html
    probe = (
        "() => ({text: document.body.innerText, pwned: window.__pwned === 1, "
        "first: document.querySelector('h2').textContent, scripts: document.scripts.length})"
    )
    visit = _check_page(page, tmp_path / "population.png", probe_js=probe)
    text = visit.probe["text"]
    assert visit.probe["first"] == "The answer" and not visit.probe["pwned"]
    for line in result.findings + result.claims:
        assert line in text, line
    assert text.index("Claim 1, seed:") < text.index("B <b>bold</b>: 4 of 4")  # the claims open the page
    assert "B <b>bold</b>: 4 of 4 seeds emerged" in text and "population <i>test</i>" in text
    assert len(visit.state["figs"]) == 2 + 2  # Kaplan-Meier, strip, one heatmap per arm
    # the hostile run name is shown as text in the run table
    from browser import open_page

    with open_page(page) as (tab, seen):
        tab.click("summary")
        assert HOSTILE in tab.inner_text("#runs")
        assert seen.console_errors == [] and seen.page_errors == []


def test_the_page_carries_claim_2_over_the_seeds_when_its_rows_are_attached(hand, tmp_path):
    """``with_mechanism``: claim 2's per-run rows (issue 53) join the result; the page opens on
    their lines beside claims 1 and 4 and shows the per-width figure and table; save/load keeps them."""
    from interp.population.statistics import claim2_widths_result
    from tests.interp.population.test_population_mechanism import _rows
    from tests.interp.report.test_report_browser import _check_page, _require_browser

    rows = _rows()
    rows.loc[rows["run"] == "B-seed1", "run"] = HOSTILE
    with pytest.raises(
        ValueError, match=r"^mechanism rows name arms \['C'\] that are not in this result; valid: \['A', 'B'\]$"
    ):
        hand.with_mechanism(rows.assign(arm="C"))
    with pytest.raises(ValueError, match=r"^per-run rows lack columns \['recovered'\]$"):
        hand.with_mechanism(rows.drop(columns="recovered"))
    result = hand.with_mechanism(rows.iloc[::-1])  # listed in the result's arm order, whatever the rows' order
    assert list(dict.fromkeys(result.mechanism["arm"])) == ["A", "B"]
    assert result.mechanism_claims == list(claim2_widths_result(rows).headline) and hand.mechanism_claims == []
    written = result.save(tmp_path / "pop")
    assert {"mechanism.csv", "mechanism.parquet"} <= set(written)
    assert PopulationResult.load(tmp_path / "pop") == result and PopulationResult.load(tmp_path / "pop") != hand
    hand.save(tmp_path / "plain")
    result.save(tmp_path / "plain")
    hand.save(tmp_path / "plain")  # saved again without claim 2: the earlier rows do not load back
    assert (
        PopulationResult.load(tmp_path / "plain") == hand
        and PopulationResult.load(tmp_path / "plain").mechanism is None
    )
    _require_browser()
    probe = "() => ({text: document.body.innerText, pwned: window.__pwned === 1})"
    visit = _check_page(written["population.html"], tmp_path / "population.png", probe_js=probe)
    text = visit.probe["text"]
    assert not visit.probe["pwned"] and HOSTILE not in written["population.html"].read_text(encoding="utf-8")
    for line in result.mechanism_claims:
        assert line in text, line
    assert (
        text.index("Claim 1, seed:")
        < text.index("Claim 2 over interval widths on A")
        < text.index("Is it a few heads?")
    )
    assert len(visit.state["figs"]) == 2 + 2 + 1  # Kaplan-Meier, strip, claim 2, one heatmap per arm
    # the table: arm A at 5 steps, 4 seeds of which 3 measurable, 2 firm; seed 3 within noise
    lo, hi = proportion_confint(2, 3, method="wilson")
    assert f"A\t5 steps\t4 (3)\t2\t0.67 ({lo:.2f}–{hi:.2f})\t0 of 3\tinduction 2, previous-token 1\t3" in text


# ------------------------------------------------------------------ command line and sources


def test_cli_from_curves(hand, tmp_path):
    from typer.testing import CliRunner

    from emergence_lens.cli import app

    hand_table().to_csv(tmp_path / "curves.csv", index=False)
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["population", "--from-curves", str(tmp_path / "curves.csv"), "--out", str(out),
                                      "--hold", "1"])  # fmt: skip
    assert result.exit_code == 0, result.output
    lines = result.output.strip().splitlines()
    assert lines[:-1] == hand.claims + hand.findings and lines[-1].startswith(f"wrote 18 files to {out}")
    assert PopulationResult.load(out) == hand
    bad = CliRunner().invoke(app, ["population", "--from-curves", str(tmp_path / "nope.csv"), "--out", str(out)])
    assert bad.exit_code == 2 and "no such file" in bad.output


def test_cli_attaches_claim_2_rows_and_refuses_bad_ones_in_one_line(hand, tmp_path):
    from typer.testing import CliRunner

    from emergence_lens.cli import app
    from tests.interp.population.test_population_mechanism import _rows

    hand_table().to_csv(tmp_path / "curves.csv", index=False)
    _rows().to_csv(tmp_path / "rows.csv", index=False)
    _rows().drop(columns="jump").to_csv(tmp_path / "short.csv", index=False)
    base = ["population", "--from-curves", str(tmp_path / "curves.csv"), "--hold", "1"]
    out = tmp_path / "out"
    result = CliRunner().invoke(app, [*base, "--out", str(out), "--mechanism", str(tmp_path / "rows.csv")])
    assert result.exit_code == 0, result.output
    expected = hand.with_mechanism(_rows())
    lines = result.output.strip().splitlines()
    assert lines[:-1] == expected.claims + expected.mechanism_claims + expected.findings
    assert lines[-1].startswith(f"wrote 20 files to {out}") and PopulationResult.load(out) == expected
    for path, message in (
        ("short.csv", "per-run rows lack columns ['jump']"),
        ("nope.csv", "no such file (claim 2's per-run rows, CSV or parquet)"),
    ):
        bad = CliRunner().invoke(app, [*base, "--out", str(tmp_path / "bad"), "--mechanism", str(tmp_path / path)])
        assert bad.exit_code == 2 and f"--mechanism {str(tmp_path / path)!r}: {message}" in bad.output, bad.output
        assert not (tmp_path / "bad" / "population.html").exists()  # refused before anything is written


def test_population_from_checkpoint_sources(tmp_path):
    import emergence_lens as el
    from interp.emergence import StepEvaluator, scan_emergence
    from interp.sources.door import open_source
    from interp.tasks import RepetitionTask
    from tests.conftest import save_byte_tokenizer, save_tiny_neox

    folders = []
    for k, seed in enumerate([1, 2]):
        folder = tmp_path / f"tiny-seed{seed}"
        for i, step in enumerate([0, 100, 200]):
            save_tiny_neox(folder / f"step{step}", seed=10 * k + i)
        save_byte_tokenizer(folder / "tokenizer")
        folders.append(folder)
    task = RepetitionTask(n_prompts=8)
    result = el.population(
        [str(f) for f in folders], task=task, config=el.StudyConfig(threshold=0.125, hold=0, device="cpu")
    )
    assert el.population_from_curves is population_from_curves and isinstance(result, el.PopulationResult)
    assert result.runs["arm"].tolist() == ["L2-d32-h4"] * 2 and result.runs["seed"].tolist() == [1, 2]
    assert result.runs["budget"].tolist() == [200, 200] and result.curves["d_head"].unique().tolist() == [8]
    for folder in folders:
        source = open_source(folder)
        batch = task.build(source.tokenizer())
        evaluator = StepEvaluator(source, batch, device="cpu")
        point = scan_emergence(source, batch, threshold=0.125, hold=0, device="cpu", evaluator=evaluator)
        rows = result.curves[result.curves["run"] == source.model_id]
        assert rows["step"].tolist() == [0, 100, 200]
        assert rows["accuracy"].tolist() == [evaluator.scores[s].accuracy for s in (0, 100, 200)]
        assert rows["p_answer"].tolist() == pytest.approx([evaluator.scores[s].p_answer for s in (0, 100, 200)])
        run = result.runs.set_index("run").loc[source.model_id]
        assert run["emerged"] == point.emerged
        assert (None if pd.isna(run["post_step"]) else run["post_step"]) == point.post_step
        source.close()
    with pytest.raises(ValueError, match="budget=-1: must be an integer >= 0"):
        el.population([str(folders[0])], budget=-1)
    assert Path(folders[0]).exists()


def test_p_values_keep_two_significant_digits_below_0_1():
    from interp.population.findings import fmt_p

    assert [fmt_p(p) for p in (0.0004, 0.0049, 0.055, 0.0999, 0.31, math.nan)] == [
        "p < 0.001",
        "p = 0.0049",
        "p = 0.055",
        "p = 0.1",
        "p = 0.31",
        "p undetermined",
    ]


def test_kaplan_meier_legend_has_one_key_for_the_censoring_ticks(hand):
    from interp.population.figures import km_figure

    fig = km_figure(hand)
    shown = [t.name for t in fig.data if t.showlegend is not False]
    censored = hand.runs[~hand.runs["emerged"]]
    assert len(censored)  # the hand population has censored runs
    # one key per arm's line, one for every arm's ticks; each arm's ticks drawn in its colour, keyless
    assert shown == [*hand.arms["arm"], "censored run (tick at its budget)"]
    ticks = [t for t in fig.data if t.name and t.name.endswith(": censored")]
    assert sum(len(t.x) for t in ticks) == len(censored) and all(t.showlegend is False for t in ticks)
