"""Variance components over an initialisation × data-order grid (issue 72, item 4), on constructed
grids whose answer is known."""

import math

import numpy as np
import pandas as pd
import pytest

from interp.population.variance import (
    VERDICT_PLACEHOLDER,
    components_from_ms,
    mean_squares,
    run_quantities,
    seed_grid,
    seed_grid_figure,
    variance_components,
)


def _runs(y: np.ndarray) -> pd.DataFrame:
    return pd.DataFrame(
        [
            dict(run=f"r-init{i}-data{j}", init_seed=i, data_order_seed=j, y=float(y[i, j]))
            for i in range(y.shape[0])
            for j in range(y.shape[1])
        ]
    )


def _double_centred(rng, shape) -> np.ndarray:
    c = rng.standard_normal(shape)
    return c - c.mean(1, keepdims=True) - c.mean(0, keepdims=True) + c.mean()


def test_exact_components_of_a_constructed_grid():
    """Row effects, column effects and a double-centred interaction of known sums of squares give
    the ANOVA components exactly: s2_init = (MS_init - MS_inter) / 8 and so on."""
    rng = np.random.default_rng(0)
    rows = np.array([1, -1] * 4) * 0.6  # sum of squares 8 * 0.36
    cols = np.array([1, 1, -1, -1] * 2) * 0.3
    inter = _double_centred(rng, (8, 8))
    inter *= 0.2 / math.sqrt((inter**2).sum() / 49)  # MS_inter = 0.04 exactly
    y = 5 + rows[:, None] + cols[None, :] + inter
    result = variance_components(_runs(y), "y", n_boot=500, n_perm=500)
    table = result.table.set_index("component")
    ms_init, ms_data = 8 * (rows**2).sum() / 7, 8 * (cols**2).sum() / 7
    expected = [(ms_init - 0.04) / 8, (ms_data - 0.04) / 8, 0.04]
    assert table["variance"].tolist() == pytest.approx(expected, rel=1e-9)
    assert table["mean_square"].tolist() == pytest.approx([ms_init, ms_data, 0.04], rel=1e-9)
    assert table["reml"].tolist() == pytest.approx(expected, rel=1e-4)  # statsmodels' REML agrees
    assert table["share"].sum() == pytest.approx(1.0)
    assert result.mean == pytest.approx(5.0)
    for c in table.index:  # each estimate inside its bootstrap interval
        assert table.loc[c, "lo"] <= table.loc[c, "variance"] <= table.loc[c, "hi"]
        assert table.loc[c, "share_lo"] <= table.loc[c, "share"] <= table.loc[c, "share_hi"]


def test_mean_squares_are_anova_lms():
    from statsmodels.formula.api import ols
    from statsmodels.stats.anova import anova_lm

    y = np.random.default_rng(3).standard_normal((5, 7))
    long = _runs(y).rename(columns={"init_seed": "a", "data_order_seed": "b"})
    table = anova_lm(ols("y ~ C(a) + C(b)", data=long).fit(), typ=1)
    ms = (table["sum_sq"] / table["df"]).to_numpy()
    assert mean_squares(y).tolist() == pytest.approx(ms.tolist(), rel=1e-10)
    assert components_from_ms(np.array([1.0, 0.1, 0.5]), 5, 7).tolist() == pytest.approx([0.5 / 7, 0.0, 0.5])


@pytest.mark.parametrize("which", ["initialisation", "data order"])
def test_one_factor_alone_takes_nearly_all_the_spread(which):
    """E set by one seed part alone (plus a little noise): that part's share is near 1, its
    permutation test rejects, the other part's does not."""
    rng = np.random.default_rng(7)
    effect = np.log(rng.uniform(1000, 2600, 8))
    noise = 0.01 * rng.standard_normal((8, 8))
    y = (effect[:, None] if which == "initialisation" else effect[None, :]) + noise
    result = variance_components(_runs(y), "y", n_boot=500, n_perm=999, seed=1)
    other = "data order" if which == "initialisation" else "initialisation"
    share, lo, hi = result.share(which)
    assert share > 0.99 and lo > 0.95
    assert result.share(other)[0] < 0.01 and result.share("interaction")[0] < 0.01
    table = result.table.set_index("component")
    assert table.loc[which, "p_perm"] == pytest.approx(1 / 1000)  # no permutation reaches the observed F
    assert table.loc[other, "p_perm"] > 0.05 and table.loc[other, "p_f"] > 0.05
    assert table.loc[which, "p_f"] < 1e-10


def test_interaction_alone_and_the_sentence():
    rng = np.random.default_rng(11)
    y = 7 + _double_centred(rng, (6, 6))
    result = variance_components(_runs(y), "y", n_boot=500, n_perm=500)
    assert result.share("interaction")[0] == pytest.approx(1.0)  # no main effect in the mean squares' excess
    assert result.share("initialisation")[0] == result.share("data order")[0] == 0.0
    text = result.sentence()
    assert text.startswith("Of the spread of the y over 36 runs (6 initialisation seeds × 6 data-order seeds)")
    assert "interaction 100 %" in text and "no run censored" in text
    assert result.claim_line().startswith(VERDICT_PLACEHOLDER + ": Of the spread")
    assert result.claim_line("reproduced").startswith("reproduced: ")


def test_an_incomplete_or_repeated_grid_is_refused():
    runs = _runs(np.zeros((3, 3)))
    with pytest.raises(ValueError, match=r"not complete: no run with init_seed=2, data_order_seed=1 \(8 of 9 cells\)"):
        seed_grid(runs.drop(index=7), "y")
    with pytest.raises(ValueError, match="gives init_seed=0, data_order_seed=0 twice"):
        seed_grid(pd.concat([runs, runs.iloc[:1]]), "y")
    with pytest.raises(ValueError, match="n_boot=10 must be an integer >= 100"):
        variance_components(runs.assign(y=np.arange(9.0)), "y", n_boot=10)
    with pytest.raises(ValueError, match="no column 'E'"):
        seed_grid(runs, "E")


def _curves() -> pd.DataFrame:
    """A 2 x 2 grid: E 200, 300, 400 and one run never emerged by its budget of 1000."""
    rows = []
    for i, j, e in ((0, 0, 200), (0, 1, 300), (1, 0, 400), (1, 1, None)):
        for step in range(0, 1001, 100):
            acc = 1.0 if e is not None and step >= e else 0.0
            rows.append(dict(arm="x", run=f"x-init{i}-data{j}", seed=i, n_layers=1, d_model=8, n_heads=2, d_head=4,
                             step=step, p_answer=acc, accuracy=acc, budget=1000, init_seed=i,
                             data_order_seed=j))  # fmt: skip
    return pd.DataFrame(rows)


def test_run_quantities_level_auc_and_censoring():
    runs = run_quantities(_curves(), threshold=0.5, hold=1).set_index("run")
    assert runs.loc["x-init0-data0", "E"] == 200 and runs.loc["x-init0-data0", "log_E"] == pytest.approx(math.log(200))
    assert bool(runs.loc["x-init1-data1", "censored"]) and runs.loc["x-init1-data1", "log_E"] == pytest.approx(
        math.log(1000)
    )  # entered at the budget
    # level: checkpoints 900 and 1000; auc: trapezoid of a step from 0 to 1 between e-100 and e
    assert runs.loc["x-init0-data0", "level"] == 1.0 and runs.loc["x-init1-data1", "level"] == 0.0
    assert runs.loc["x-init0-data0", "auc"] == pytest.approx((1000 - 200 + 50) / 1000)
    assert runs.loc["x-init1-data1", "auc"] == 0.0
    result = variance_components(runs.reset_index(), "log_E", censored="censored", n_boot=100, n_perm=100)
    assert result.n_censored == 1 and result.censored_runs == ("x-init1-data1",)
    assert "1 run(s) never emerged and entered at their budget" in result.sentence()


def test_seed_grid_figure():
    runs = run_quantities(_curves(), threshold=0.5, hold=1)
    runs.loc[0, "run"] = "<b>x</b>"
    fig = seed_grid_figure(runs, title="E <grid>")
    heat = fig.data[0]
    assert heat.type == "heatmap" and [list(r) for r in heat.text] == [["200", "300"], ["400", "never"]]
    assert np.isnan(heat.z[1][1]) and heat.z[0][0] == pytest.approx(math.log10(200))
    assert heat.colorbar.title.text == "E (steps)"
    assert list(heat.y) == ["init 0 (median 250)", "init 1 (median 400)"]
    assert "<grid>" not in fig.layout.title.text  # labels are text, not markup
