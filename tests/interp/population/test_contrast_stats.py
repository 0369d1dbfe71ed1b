"""Statistics of one two-arm contrast (issue 65, item 2): each against a second implementation
written here (an exact product-limit estimator in fractions, Schoenfeld residuals and the
stratified log-rank by hand, Wilson and Newcombe formulas, the RMST and its variance) or a hand
computation, on constructed run tables and on the kept curves of population-heads-dhead."""

from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.integrate import trapezoid

from interp.population import contrast_stats as cs
from interp.population.survival import cox_fit, km_median, logrank_tests, median_interval

Z = 1.959963984540054
ROOT = Path(__file__).resolve().parents[3]
HEADS_DHEAD = ROOT / "docs" / "data" / "population-heads-dhead"


def runs(arm, durations, emerged, seeds=None):
    """A run table of one arm: ``durations`` (steps), ``emerged`` (booleans), seeds 0.. by default."""
    n = len(durations)
    return pd.DataFrame(
        {
            "arm": arm,
            "run": [f"{arm}-seed{s}" for s in (seeds if seeds is not None else range(n))],
            "seed": list(seeds if seeds is not None else range(n)),
            "duration": np.asarray(durations, float),
            "emerged": np.asarray(emerged, bool),
        }
    )


def hand_km(duration, emerged):
    """Product-limit estimator in exact fractions: [(step, n_at_risk, n_events, S)]."""
    out, s = [], Fraction(1)
    for t in sorted({d for d, e in zip(duration, emerged) if e}):
        n = sum(1 for d in duration if d >= t)
        k = sum(1 for d, e in zip(duration, emerged) if e and d == t)
        s *= Fraction(n - k, n)
        out.append((t, n, k, s))
    return out


def hand_median(duration, emerged, convention="midpoint"):
    """The median from the exact estimator: no tolerance needed, S is 1/2 or it is not."""
    km = hand_km(duration, emerged)
    for i, (t, _, _, s) in enumerate(km):
        if convention == "midpoint" and s == Fraction(1, 2):
            return (t + km[i + 1][0]) / 2 if i + 1 < len(km) else math.nan
        if s < Fraction(1, 2):
            return float(t)
    return math.nan


@pytest.fixture(scope="module")
def heads_dhead():
    """The run table of population-heads-dhead from its kept curves, by the project's own code, with level and auc."""
    from interp.population.kept import read_kept_curves
    from interp.population.tables import check_curves, runs_from_curves

    curves = check_curves(read_kept_curves(HEADS_DHEAD))
    table = runs_from_curves(curves, threshold=0.5, hold=2)
    return cs.add_run_measures(table, curves)


def arm(table, name):
    return table[table["arm"] == name].reset_index(drop=True)


# --- 1. the median ----------------------------------------------------------------------------


def test_median_eight_runs_sitting_at_one_half():
    duration, emerged = [100, 200, 300, 400, 500, 600, 700, 800], [True] * 8
    assert hand_km(duration, emerged)[3][3] == Fraction(1, 2)  # S is exactly 1/2 after 4 events
    assert km_median(np.array(duration), np.array(emerged)) == 450.0 == hand_median(duration, emerged)
    assert km_median(np.array(duration), np.array(emerged), convention="strict") == 500.0


def test_median_twenty_four_runs_twelve_emerged_ends_on_the_flat():
    # 12 emerge at 100..1200, 12 never by the budget 3000: S sits at 1/2 from 1200 to the end,
    # where the flat ends is unknown: not reached (R would say (1200 + 3000) / 2, set by the budget)
    duration = [100 * (i + 1) for i in range(12)] + [3000] * 12
    emerged = [True] * 12 + [False] * 12
    assert hand_km(duration, emerged)[-1][3] == Fraction(1, 2)
    assert math.isnan(km_median(np.array(duration), np.array(emerged))) and math.isnan(hand_median(duration, emerged))
    assert math.isnan(km_median(np.array(duration), np.array(emerged), convention="strict"))
    # one more emerged at 2500: the flat ends there
    duration[12], emerged[12] = 2500, True
    assert km_median(np.array(duration), np.array(emerged)) == (1200 + 2500) / 2
    assert km_median(np.array(duration), np.array(emerged), convention="strict") == 2500


def test_median_matches_exact_estimator_on_random_populations():
    rng = np.random.default_rng(0)
    flats = 0
    for _ in range(300):
        n = int(rng.integers(2, 30))
        duration = (rng.integers(1, 12, n) * 100).tolist()
        emerged = (rng.random(n) < 0.7).tolist()
        if not any(emerged):
            continue
        flats += any(s == Fraction(1, 2) for *_, s in hand_km(duration, emerged))
        for convention in ("midpoint", "strict"):
            got = km_median(np.array(duration), np.array(emerged), convention=convention)
            want = hand_median(duration, emerged, convention)
            assert (math.isnan(got) and math.isnan(want)) or got == want, (duration, emerged, convention)
    assert flats >= 20  # the flat case is exercised, not only the plain one


def test_median_bad_input_one_line_errors():
    with pytest.raises(ValueError, match="convention='mean'"):
        km_median(np.array([1.0]), np.array([True]), convention="mean")
    with pytest.raises(ValueError, match=r"tol=0\.5"):
        km_median(np.array([1.0]), np.array([True]), tol=0.5)
    with pytest.raises(ValueError, match="one length"):
        km_median(np.array([1.0, 2.0]), np.array([True]))


def test_median_of_the_issue_real_arms(heads_dhead):
    from statsmodels.duration.survfunc import SurvfuncRight

    a = arm(heads_dhead, "phi-2l-64d-4h-dh16-r8")
    b = arm(heads_dhead, "phi-2l-64d-8h-dh8-r8")
    for rows, flat, strict, mid in ((a, (1300, 1400), 1400.0, 1350.0), (b, (5400, 7000), 7000.0, 6200.0)):
        d, e = rows["duration"].tolist(), rows["emerged"].tolist()
        km = {t: s for t, _, _, s in hand_km(d, e)}
        assert km[flat[0]] == Fraction(1, 2)  # S sits at exactly 1/2 over [flat[0], flat[1])
        assert min(t for t in km if t > flat[0]) == flat[1]
        # statsmodels' float product may sit a bit off 0.5 here (it does with the pinned versions, not
        # with numpy 1.26): the median below must not depend on which
        sf = SurvfuncRight(np.array(d, float), np.array(e, float))
        assert float(sf.surv_prob[list(sf.surv_times).index(flat[0])]) == pytest.approx(0.5, abs=1e-12)
        assert km_median(np.array(d), np.array(e), convention="strict") == strict == hand_median(d, e, "strict")
        assert km_median(np.array(d), np.array(e)) == mid == hand_median(d, e)
        median, lo, hi = median_interval(rows)
        assert median == mid and lo <= median <= hi
    assert median_interval(b)[1:] == (2600.0, math.inf)  # Brookmeyer-Crowley limits unchanged


# --- 2. proportional hazards and crossings ----------------------------------------------------


def crossing_arms(n=24):
    """Arm A: half its seeds emerge early (100..), the rest never by 10000; arm B: all later (2000..)."""
    half = n // 2
    a = runs("A", [100 * (i + 1) for i in range(half)] + [10000] * (n - half), [True] * half + [False] * (n - half))
    b = runs("B", [2000 + 100 * i for i in range(n)], [True] * n)
    return a, b


def proportional_arms(n=24, ratio=2.0):
    """Exponential quantiles with hazard ratio ``ratio`` (A faster), on a 100-step grid, no censoring."""
    q = -np.log(1 - (np.arange(n) + 0.5) / n)
    a = runs("A", np.round(q * 1000 / ratio / 100) * 100 + 100, [True] * n)
    b = runs("B", np.round(q * 1000 / 100) * 100 + 100, [True] * n)
    return a, b


def hand_ph(a, b, transform):
    """Schoenfeld residuals at the fitted coefficient and the Grambsch-Therneau statistic, by hand."""
    from scipy.stats import chi2, rankdata

    d = np.concatenate([a["duration"], b["duration"]]).astype(float)
    e = np.concatenate([a["emerged"], b["emerged"]]).astype(bool)
    x = np.concatenate([np.ones(len(a)), np.zeros(len(b))])
    row, _ = cox_fit(d, e, x)
    beta, var = row["coef"], row["se"] ** 2
    res, times = [], []
    for i in np.flatnonzero(e):
        risk = d >= d[i]
        w = np.exp(beta * x[risk])
        res.append(x[i] - (w * x[risk]).sum() / w.sum())
        times.append(d[i])
    res, times = np.array(res), np.array(times)
    if transform == "rank":
        g = rankdata(times)
    else:  # 1 - S(t-) of the pooled exact KM
        km = hand_km(d.tolist(), e.tolist())
        g = np.array([1 - float(next((s for t, *_, s in reversed(km) if t < u), Fraction(1))) for u in times])
    g = g - g.mean()
    stat = len(res) * var * (g * res).sum() ** 2 / (g**2).sum()
    return stat, chi2.sf(stat, 1)


@pytest.mark.parametrize("transform", ["rank", "km"])
def test_ph_test_matches_hand_schoenfeld(transform):
    for a, b in (crossing_arms(), proportional_arms()):
        got = cs.ph_test_pair(a, b, transform=transform)
        stat, p = hand_ph(a, b, transform)
        assert got.chi2 == pytest.approx(stat, rel=1e-6) and got.p == pytest.approx(p, rel=1e-6)


def test_ph_rejected_for_crossing_curves_not_for_proportional_ones():
    a, b = crossing_arms()
    assert cs.ph_test_pair(a, b).p < 0.001
    a, b = proportional_arms()
    ph = cs.ph_test_pair(a, b)
    assert ph.p > 0.2 and ph.n_events == 48 and ph.note == ""


def test_ph_undetermined_says_why():
    a = runs("A", [100, 200], [True, True])
    b = runs("B", [1000, 1000], [False, False])  # separated: no finite ratio
    ph = cs.ph_test_pair(a, b)
    assert math.isnan(ph.p) and ph.note.startswith("every run that emerged was of A among the runs still at risk")
    assert "infinite on its estimate" in ph.note
    assert cs.pair_contrast(b, a, paired_on=None).hr_note.endswith("not estimable (zero on its estimate)")
    none = cs.pair_contrast(b, b.assign(arm="C"), paired_on=None)  # nothing emerged: every number says so
    assert math.isnan(none.hr) and math.isnan(none.logrank_p) and none.crossings == () and none.rmst.diff == 0


def test_crossings_of_crossing_curves():
    a, b = crossing_arms()
    (c,) = cs.km_crossings(a, b)
    # A leads from step 100 (one run = 1/24 is the resolution: the lead counts from 2 runs, step 200);
    # B's runs at 2000.. catch up: at 2000 + 100 i B has i+1 emerged, A 12; B leads once i+1 >= 14
    assert (c.ahead_before, c.ahead_after) == ("A", "B")
    assert c.last_step_before == 2900.0  # A 12 vs B 10 emerged: the last lead of more than one run
    assert c.step == 3300.0  # B 14 vs A 12
    assert c.gap_before == pytest.approx(12 / 24) and c.gap_after == pytest.approx(12 / 24)


def test_no_crossing_for_proportional_arms_and_resolution():
    a, b = proportional_arms()
    assert cs.km_crossings(a, b) == ()
    a, b = crossing_arms()
    assert cs.km_crossings(a, b, resolution=0.6) == ()  # no lead beyond 60 %
    with pytest.raises(ValueError, match=r"resolution=1\.5"):
        cs.km_crossings(a, b, resolution=1.5)


# --- 3. shares at steps, RMST -----------------------------------------------------------------


def wilson(k, n):
    centre, half = (k + Z**2 / 2) / (n + Z**2), Z * math.sqrt(k * (n - k) / n + Z**2 / 4) / (n + Z**2)
    return max(0.0, centre - half), min(1.0, centre + half)


def test_shares_at_steps_wilson_and_newcombe_by_hand():
    a, b = crossing_arms()
    s1, s2 = cs.shares_at(a, b, [1000, 3000])
    assert (s1.k_a, s1.k_b, s2.k_a, s2.k_b) == (10, 0, 12, 11)
    for s in (s1, s2):
        la, ua = wilson(s.k_a, 24)
        lb, ub = wilson(s.k_b, 24)
        pa, pb = s.k_a / 24, s.k_b / 24
        assert (s.share_a_lo, s.share_a_hi, s.share_b_lo, s.share_b_hi) == pytest.approx((la, ua, lb, ub), rel=1e-9)
        # Newcombe 1998, method 10 (hybrid score)
        lo = pa - pb - math.sqrt((pa - la) ** 2 + (ub - pb) ** 2)
        hi = pa - pb + math.sqrt((ua - pa) ** 2 + (pb - lb) ** 2)
        assert s.diff == pytest.approx(pa - pb) and (s.diff_lo, s.diff_hi) == pytest.approx((lo, hi), rel=1e-9)
    with pytest.raises(ValueError, match="step 20000 is past the follow-up"):
        cs.shares_at(a, b, [20000])


def test_rmst_by_hand_with_censoring():
    # KM: 100 (5 at risk, 1) -> 4/5; 200 censored; 300 (3, 1) -> 8/15; 400 (2, 1) -> 4/15; 500 censored
    d, e = np.array([100, 200, 300, 400, 500.0]), np.array([True, False, True, True, False])
    r = cs.rmst(d, e, tau=450)
    s = [Fraction(1), Fraction(4, 5), Fraction(8, 15), Fraction(4, 15)]
    area = 100 * s[0] + 200 * s[1] + 100 * s[2] + 50 * s[3]
    a100, a300, a400 = area - 100 * s[0], 100 * s[2] + 50 * s[3], 50 * s[3]
    var = a100**2 / (5 * 4) + a300**2 / (3 * 2) + a400**2 / (2 * 1)
    assert r.rmst == pytest.approx(float(area), rel=1e-12) and r.se == pytest.approx(math.sqrt(var), rel=1e-12)
    assert (r.n_runs, r.n_emerged, r.tau) == (5, 3, 450.0)
    with pytest.raises(ValueError, match="tau=600"):
        cs.rmst(d, e, tau=600)


def test_rmst_without_censoring_is_the_mean_of_min_e_tau():
    rng = np.random.default_rng(1)
    d = rng.integers(1, 50, 30) * 100.0
    for tau in (1500.0, d.max()):
        r = cs.rmst(d, np.ones(30, bool), tau)
        m = np.minimum(d, tau)
        assert r.rmst == pytest.approx(m.mean(), rel=1e-12)
        assert r.se == pytest.approx(math.sqrt(m.var() / 30), rel=1e-9)  # divisor n, over n


def test_rmst_difference_interval():
    a, b = crossing_arms()
    r = cs.rmst_difference(a, b)
    assert r.a.tau == 4300.0  # the smaller last step followed (B's last event)
    se = math.hypot(r.a.se, r.b.se)
    assert r.diff == pytest.approx(r.a.rmst - r.b.rmst)
    assert (r.diff_lo, r.diff_hi) == pytest.approx((r.diff - Z * se, r.diff + Z * se))
    # A: 12 runs at 100..1200 (mean 650), 12 at tau; B: 2000..4300 (mean 3150)
    assert r.a.rmst == pytest.approx((650 * 12 + 4300 * 12) / 24) and r.b.rmst == pytest.approx(3150)


# --- 4. paired tests --------------------------------------------------------------------------


def hand_stratified_logrank(a, b):
    o_e, v = 0.0, 0.0
    for seed in sorted(set(a["seed"]) & set(b["seed"])):
        ra, rb = a[a["seed"] == seed].iloc[0], b[b["seed"] == seed].iloc[0]
        d = [(ra["duration"], ra["emerged"], 1), (rb["duration"], rb["emerged"], 0)]
        for t in sorted({t for t, e, _ in d if e}):
            risk = [x for x in d if x[0] >= t]
            n, na = len(risk), sum(g for *_, g in risk)
            k = sum(1 for x in risk if x[0] == t and x[1])
            ka = sum(1 for x in risk if x[0] == t and x[1] and x[2])
            o_e += ka - k * na / n
            v += k * (na / n) * (1 - na / n) * (n - k) / (n - 1) if n > 1 else 0.0
    return o_e**2 / v


def test_stratified_logrank_by_hand_and_pairing_matters():
    from scipy.stats import chi2

    # the seed sets when a run emerges (spread 1000..12500); arm A is 200 steps earlier in every seed
    base = [1000 + 500 * i for i in range(24)]
    a = runs("A", [t - 200 for t in base], [True] * 24)
    b = runs("B", base, [True] * 23 + [False])
    got = cs.stratified_logrank(a, b)
    stat = hand_stratified_logrank(a, b)
    assert got.statistic == pytest.approx(stat, rel=1e-9) and got.p == pytest.approx(chi2.sf(stat, 1), rel=1e-9)
    assert got.n_pairs == 24 and got.p < 1e-4
    unpaired = logrank_tests(pd.concat([a, b]).assign(n_layers=1, d_model=1, n_heads=1, d_head=1), reference="B")
    assert unpaired.iloc[-1]["p"] > 0.3  # the seed spread hides the shift unpaired


def test_paired_tests_keep_shared_seeds_only_and_refuse_duplicates():
    a = runs("A", [100, 200, 300], [True] * 3, seeds=[0, 1, 2])
    b = runs("B", [150, 250, 400], [True] * 3, seeds=[1, 2, 3])
    assert cs.stratified_logrank(a, b).n_pairs == 2
    with pytest.raises(ValueError, match="seed=1 appears twice"):
        cs.stratified_logrank(a, runs("B", [1, 2], [True, True], seeds=[1, 1]))
    with pytest.raises(ValueError, match="no column 'auc'"):
        cs.paired_wilcoxon(a, b)


def test_paired_wilcoxon_exact_by_hand():
    a = runs("A", [100] * 6, [True] * 6).assign(auc=[0.5, 0.6, 0.7, 0.8, 0.9, 0.95])
    b = runs("B", [100] * 6, [True] * 6).assign(auc=[0.4, 0.45, 0.52, 0.5, 0.55, 0.6])
    w = cs.paired_wilcoxon(a, b)
    # all 6 differences positive, no ties: exact two-sided p = 2 / 2^6
    assert w.p == pytest.approx(2 / 64) and w.statistic == 0 and w.n_pairs == 6
    assert w.estimate == pytest.approx(np.median(a["auc"] - b["auc"]))
    same = cs.paired_wilcoxon(a, a)
    assert math.isnan(same.p) and "no nonzero difference" in same.note


# --- 5. level and area ------------------------------------------------------------------------


def test_run_level_and_auc_by_hand():
    steps = [0, 1, 2, 100, 200, 300, 400, 500, 600, 700, 800, 900, 1000]
    acc = [0, 0, 0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95]
    curve = pd.DataFrame({"run": "r", "step": steps, "accuracy": acc})
    assert cs.run_level(curve) == pytest.approx((0.9 + 0.95) / 2)  # steps >= 900
    area = sum((s1 - s0) * (a0 + a1) / 2 for s0, s1, a0, a1 in zip(steps, steps[1:], acc, acc[1:]))
    assert cs.run_auc(curve) == pytest.approx(area / 1000)
    assert cs.run_auc(curve.iloc[::-1]) == pytest.approx(area / 1000)  # order of rows does not matter
    with pytest.raises(ValueError, match="at least 2 distinct steps"):
        cs.run_level(curve.iloc[:1])
    with pytest.raises(ValueError, match="holds 2 runs"):
        cs.run_auc(pd.concat([curve, curve.assign(run="s")]))


def test_add_run_measures(heads_dhead):
    from interp.population.kept import read_kept_curves

    row = heads_dhead[heads_dhead["run"] == "phi-2l-64d-8h-dh8-r8-seed0"].iloc[0]
    curve = pd.read_csv(HEADS_DHEAD / "curves" / "phi-2l-64d-8h-dh8-r8-seed0.csv")
    tail = curve[curve["step"] >= 7200]
    assert len(tail) == 9 and row["level"] == pytest.approx(tail["accuracy"].mean())
    assert row["auc"] == pytest.approx(trapezoid(curve["accuracy"], curve["step"]) / 8000)
    with pytest.raises(ValueError, match="has no curve"):
        cs.add_run_measures(heads_dhead.assign(run="nowhere"), read_kept_curves(HEADS_DHEAD).head(2))


# --- 6. one contrast --------------------------------------------------------------------------


def test_pair_contrast_holds_every_number():
    a, b = crossing_arms()
    a, b = a.assign(auc=np.linspace(0.5, 0.7, 24), level=0.5), b.assign(auc=np.linspace(0.4, 0.6, 24), level=0.9)
    c = cs.pair_contrast(a, b, steps=(1000, 3000), tau=4000)
    both = pd.concat([a, b])
    row, _ = cox_fit(
        both["duration"].to_numpy(float), both["emerged"].to_numpy(bool), (both["arm"] == "A").to_numpy(float)
    )
    assert (c.hr, c.hr_lo, c.hr_hi, c.hr_p) == (row["hr"], row["hr_lo"], row["hr_hi"], row["p"])
    table = both.assign(n_layers=1, d_model=1, n_heads=1, d_head=1)
    assert c.logrank_p == pytest.approx(logrank_tests(table, reference="B").iloc[-1]["p"], rel=1e-12)
    assert c.ph == cs.ph_test_pair(a, b) and c.crossings == cs.km_crossings(a, b)
    assert c.shares == cs.shares_at(a, b, (1000, 3000)) and c.rmst == cs.rmst_difference(a, b, 4000)
    assert c.stratified == cs.stratified_logrank(a, b) and c.wilcoxon == cs.paired_wilcoxon(a, b)
    assert math.isnan(c.median_a) and c.median_b == 3150.0 and (c.level_a, c.level_b) == (0.5, 0.9)
    r = c.to_row()
    assert r["share_a@1000"] == 10 / 24 and r["share_diff@3000"] == pytest.approx(1 / 24)
    assert r["crossings"] == 1 and r["crossing_order"] == "A → B" and r["wilcoxon_n_pairs"] == 24
    assert all(np.isscalar(v) for v in r.values())
    unpaired = cs.pair_contrast(a.drop(columns="auc"), b.drop(columns="auc"), paired_on=None)
    assert unpaired.stratified is None and unpaired.to_row()["stratified_n_pairs"] == 0
    assert [s.step for s in unpaired.shares] == [2500.0, 5000.0, 7500.0, 10000.0]
    with pytest.raises(ValueError, match="no column 'auc'"):
        cs.pair_contrast(a.drop(columns="auc"), b)


def test_pair_contrast_of_the_issue_crossing_pair(heads_dhead):
    a, b = arm(heads_dhead, "phi-2l-64d-8h-dh8-r8"), arm(heads_dhead, "phi-2l-64d-4h-dh8-r8")
    c = cs.pair_contrast(a, b)
    assert (c.n_a, c.emerged_a, c.n_b, c.emerged_b) == (24, 14, 24, 18)
    assert c.median_a == 6200.0 and c.median_b == (5300 + 5600) / 2
    assert c.hr == pytest.approx(0.8003, abs=1e-4) and c.ph.p == pytest.approx(0.0112, abs=1e-4)
    (x,) = c.crossings  # 8 heads ahead early, 4 heads after
    assert (x.ahead_before, x.ahead_after) == ("phi-2l-64d-8h-dh8-r8", "phi-2l-64d-4h-dh8-r8")
    assert x.last_step_before < x.step <= 6000
    assert c.stratified.n_pairs == 24 and c.wilcoxon.n_pairs == 24
