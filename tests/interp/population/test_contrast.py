"""Each verdict word on a constructed population (issue 65, item 1): the judge's inputs read from
curves by interp.population.contrast.contrast_evidence, then interp.population.judge."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from interp.population.contrast import FLAT, NEAR, ceiling_text, contrast_evidence, o_minus_e
from interp.population.judge import judge, judge_claim

STEPS = list(range(0, 4001, 100))


def arm(name: str, n_heads: int, d_head: int, Es, level_never: float = 0.05, d_model: int = 64, budget: int = 4000):
    """Curves of one arm: seed i jumps from accuracy 0.05 to 0.9 at step ``Es[i]`` (None: never,
    its accuracy rising to ``level_never`` by step 1000 and flat after)."""
    rows = []
    for seed, E in enumerate(Es):
        for step in STEPS:
            if E is not None:
                acc = 0.9 if step >= E else 0.05
            else:
                acc = 0.05 + (level_never - 0.05) * min(step, 1000) / 1000
            rows.append(
                dict(arm=name, run=f"{name}-seed{seed}", seed=seed, n_layers=2, d_model=d_model, n_heads=n_heads,
                     d_head=d_head, budget=budget, step=step, accuracy=acc, p_answer=acc * 0.8)
            )  # fmt: skip
    return pd.DataFrame(rows)


def test_o_minus_e_is_the_log_rank_numerator_and_its_sign_the_direction():
    # b's two runs emerge at 100 and 200, a's at 300 and 400: b ahead
    d, e, b = [100, 200, 300, 400], [True] * 4, [True, True, False, False]
    # at 100: 4 at risk, 2 in b -> expected 0.5, observed 1; at 200: 3 at risk, 1 in b -> 1/3, observed 1
    assert o_minus_e(d, e, b) == pytest.approx((1 - 0.5) + (1 - 1 / 3) + (0 - 0) + (0 - 0))
    assert o_minus_e(d, e, [not x for x in b]) < 0
    # stratified by pairs: each stratum is (b, a) = (100, 300), (200, 400): b ahead in both
    assert o_minus_e(d, e, b, strata=[0, 1, 0, 1]) == pytest.approx(1.0)


def test_an_arm_much_earlier_in_every_seed_is_reproduced_robustly():
    a = arm("phi-2l-64d-4h-dh8", 4, 8, [2000 + 100 * (i % 10) for i in range(16)])
    b = arm("phi-2l-64d-4h-dh16", 4, 16, [800 + 100 * (i % 5) for i in range(16)])
    ev, pc = contrast_evidence(pd.concat([a, b]), b["arm"][0], a["arm"][0], "d_head 16 against 8", wanted=+1)
    assert ev.test == "log-rank stratified by seed"
    assert all(c.sign == +1 and c.p < 1e-3 for c in ev.cells)
    v = judge(ev)
    assert (v.word, v.robust, v.side) == ("reproduced", "robust", "earlier")
    assert "attention width 64 vs 32" in v.reason  # named, never a confounder
    assert pc.median_a < pc.median_b


def test_a_contrast_that_also_varies_another_design_factor_is_confounded():
    a = arm("neox-2l-64d-4h", 4, 16, [2000] * 12)
    b = arm("neox-2l-64d-8h", 8, 8, [3000] * 12)
    ev, _ = contrast_evidence(pd.concat([a, b]), b["arm"][0], a["arm"][0], "4 -> 8 heads", also_varies="d_head 8 vs 16")
    assert judge(ev).word == "confounded"


def test_crossing_curves_with_opposite_early_and_late_effects_are_called_so():
    # b: half its seeds very early, the rest never; a: every seed in the middle
    b_es = [300 + 50 * (i % 4) for i in range(10)] + [None] * 10
    a_es = [1800 + 100 * (i % 5) for i in range(20)]
    a = arm("phi-2l-64d-4h-dh8", 4, 8, a_es)
    b = arm("phi-2l-64d-8h-dh8", 8, 8, b_es)
    ev, pc = contrast_evidence(pd.concat([a, b]), b["arm"][0], a["arm"][0], "4 -> 8 heads at d_head 8", wanted=+1)
    assert pc.ph.p < 0.05 and pc.crossings
    v = judge(ev)
    assert v.word == "curves cross"
    assert "HR" not in v.reason and "restricted mean time to E" in v.reason
    assert np.isnan(ev.hr)  # no single ratio for crossing curves


def test_a_population_sitting_on_a_ceiling_near_the_threshold_is_a_ceiling_not_a_never():
    # 20 of 24 seeds of b level off at 0.42, just under the threshold 0.5: not significant against a
    a = arm("phi-2l-64d-4h-dh8", 4, 8, [None] * 21 + [3000, 3500, 3800], level_never=0.40)
    b = arm("phi-2l-64d-8h-dh8", 8, 8, [None] * 20 + [3100, 3400, 3700, 3900], level_never=0.42)
    curves = pd.concat([a, b])
    ev, _ = contrast_evidence(curves, b["arm"][0], a["arm"][0], "forced against plain")
    assert "level off" not in ev.ceiling and "below the threshold 0.5" in ev.ceiling
    v = judge(ev)
    assert v.word == "ceiling"
    # a flat level far below the threshold is a plateau the budget cut short, not a ceiling
    low = pd.concat(
        [
            arm("x-2l-64d-4h", 4, 16, [None] * 24, level_never=0.1),
            arm("x-2l-64d-8h", 8, 8, [None] * 24, level_never=0.1),
        ]
    )
    from interp.population.tables import check_curves, runs_from_curves

    table = check_curves(low)
    assert ceiling_text(table, runs_from_curves(table, 0.5, 2), 0.5) == ""
    assert 0 < FLAT < NEAR < 0.5


def test_a_robust_null_and_a_non_monotone_claim():
    es = [1000 + 100 * (i % 8) for i in range(16)]
    one = arm("phi-2l-64d-1h-dh16", 1, 16, [E + 1500 for E in es])
    two = arm("phi-2l-64d-2h-dh16", 2, 16, es)
    four = arm("phi-2l-64d-4h-dh16", 4, 16, [E + (100 if i % 2 else -100) for i, E in enumerate(es)])
    eight = arm("phi-2l-64d-8h-dh16", 8, 16, [E + 1500 for E in es])
    curves = pd.concat([one, two, four, eight])
    parts = []
    for lo, hi in ((one, two), (two, four), (four, eight)):
        ev, _ = contrast_evidence(curves, hi["arm"][0], lo["arm"][0], f"{lo['n_heads'][0]} -> {hi['n_heads'][0]} heads")
        parts.append(judge(ev))
    assert [p.word for p in parts] == ["reproduced", "not decidable", "contradicted"]
    assert parts[1].robust == "robust null"
    v = judge_claim("Claim 4, heads", parts)
    assert (v.word, v.robust) == ("non-monotone", "robust")


def test_an_arm_missing_from_the_curves_is_named():
    a = arm("phi-2l-64d-4h-dh8", 4, 8, [2000] * 4)
    with pytest.raises(ValueError, match="arm 'nope' not in the curves"):
        contrast_evidence(a, "phi-2l-64d-4h-dh8", "nope", "x")
