"""Which part of the seed decides: variance components over a crossed grid of initialisation seeds
× data-order seeds (issue 72).

A run's seed sets its initial weights and the order of its training data at once. Trained as a
full grid (every initialisation seed with every data-order seed, one run per cell:
``interp/data/suites/population-seed-split.yaml``), a per-run quantity ``y`` (log E, a run's
final level, the area under its accuracy curve) splits as the two-way random-effects model

    y_ij = mu + a_i + b_j + (ab)_ij,   a_i ~ N(0, s2_init), b_j ~ N(0, s2_data), (ab)_ij ~ N(0, s2_inter)

(Searle, Casella & McCulloch 1992, "Variance Components", ch. 4, balanced two-way crossed
classification without replication). With one run per cell the interaction and any run-level
noise are one term; the trainer is deterministic (the same two seeds give the same weights, bit
for bit), so that term is the interaction.

Estimates: the ANOVA (method-of-moments) estimators from the mean squares of a two-way additive
fit, ``s2_init = (MS_init - MS_inter) / n_data``, ``s2_data = (MS_data - MS_inter) / n_init``,
``s2_inter = MS_inter``, a negative estimate set to 0 (its share then 0); the mean squares come
from statsmodels (``ols`` + ``anova_lm``), and statsmodels' REML fit of the same crossed model
(``MixedLM`` with variance components, one group; the best likelihood over several optimisers)
is given beside them as a check (they agree for a balanced grid where no estimate is negative). Shares are each component over their sum.

Intervals: a parametric bootstrap of the fitted model (draws of a_i, b_j, (ab)_ij from normals
with the estimated variances, re-estimated each time: the percentile interval of each component
and share; Davison & Hinkley 1997, ch. 2), as lme4's ``bootMer`` does for mixed models.

Checked against a permutation test, which assumes no normality: for initialisation, the values are
permuted among initialisation seeds within each data-order seed (the data-order effect kept), and
``F = MS_init / MS_inter`` compared with its permutation distribution; for data order the same
within each initialisation seed (Anderson & ter Braak 2003, restricted permutations for
two-factor designs). The classical F test's p value is given beside it. The interaction has no
test without replicate runs per cell.

Censored runs (log E only): a run not emerged by its budget has E only known to exceed the
budget; it enters at the budget (a lower bound) and the result counts and names them
(:attr:`VarianceComponents.n_censored`), so a sentence says they are there. None censored is
said too.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd

#: The components, in table order.
COMPONENTS = ("initialisation", "data order", "interaction")
#: Per-run quantities of :func:`run_quantities`: name -> (description, unit).
QUANTITIES = {
    "log_E": ("log of the point of emergence", "log steps"),
    "level": ("mean greedy accuracy over the last 10 % of steps", "fraction"),
    "auc": ("area under the greedy-accuracy curve over the budget, divided by the budget", "fraction"),
}
#: Where the verdict word goes until the judge (``interp.population.judge``) words it.
VERDICT_PLACEHOLDER = "[verdict: the judge's word]"


@dataclass(frozen=True)
class VarianceComponents:
    """Variance components of one per-run quantity over an initialisation × data-order grid.

    Attributes:
        quantity: what was split (a key of :data:`QUANTITIES`, or the caller's column name).
        table: one row per component of :data:`COMPONENTS`: ``variance`` (the ANOVA estimate,
            in the quantity's unit squared, negative set to 0), ``lo`` / ``hi`` (its bootstrap
            interval), ``share`` (of the total, a fraction), ``share_lo`` / ``share_hi``,
            ``reml`` (statsmodels' REML estimate of the same component), ``p_f`` (the classical
            F test's p; NaN for the interaction) and ``p_perm`` (the permutation test's p; NaN
            for the interaction).
        n_init, n_data: seeds of each factor; ``n_runs`` = their product.
        n_censored: runs entered at their budget because they never emerged (log E only).
        censored_runs: their names.
        level: the interval's level (0.95).
        n_boot, n_perm: bootstrap draws and permutations.
        mean: the grand mean of the quantity.
    """

    quantity: str
    table: pd.DataFrame
    n_init: int
    n_data: int
    n_censored: int
    censored_runs: tuple[str, ...]
    level: float
    n_boot: int
    n_perm: int
    mean: float

    @property
    def n_runs(self) -> int:
        return self.n_init * self.n_data

    def share(self, component: str) -> tuple[float, float, float]:
        """``(share, lo, hi)`` of one component of :data:`COMPONENTS` (fractions)."""
        row = self.table.set_index("component").loc[component]
        return float(row["share"]), float(row["share_lo"]), float(row["share_hi"])

    def sentence(self) -> str:
        """The result in one plain factual sentence: each component's share with its interval,
        the permutation p of the two main effects, and how censored runs were handled (or, where
        every run has the same value, that there is no spread to split)."""
        what = QUANTITIES.get(self.quantity, (self.quantity, ""))[0]
        if not float(self.table["variance"].sum()) > 0:
            return (
                f"The {what} does not vary over the {self.n_runs} runs ({self.n_init} initialisation seeds × "
                f"{self.n_data} data-order seeds; every run {self.mean:.3g}): no spread to split"
            )
        parts = []
        for component in COMPONENTS:
            share, lo, hi = self.share(component)
            parts.append(f"{component} {100 * share:.0f} % ({100 * lo:.0f}–{100 * hi:.0f} %)")
        rows = self.table.set_index("component")
        p = "; ".join(f"permutation p {_p(rows.loc[c, 'p_perm'])} for {c}" for c in COMPONENTS[:2])
        censored = (
            "no run censored"
            if not self.n_censored
            else f"{self.n_censored} run(s) never emerged and entered at their budget, a lower bound on their E"
        )
        return (
            f"Of the spread of the {what} over {self.n_runs} runs ({self.n_init} initialisation seeds × "
            f"{self.n_data} data-order seeds), {', '.join(parts)} ({100 * self.level:.0f} % parametric-bootstrap "
            f"intervals; {p}; {censored})"
        )

    def claim_line(self, verdict: str | None = None) -> str:
        """The sentence with a verdict word in front (``verdict``; default
        :data:`VERDICT_PLACEHOLDER`, until the judge words it)."""
        return f"{verdict or VERDICT_PLACEHOLDER}: {self.sentence()}."


def _p(p: float) -> str:
    if p != p:
        return "n/a"
    return f"{p:.3f}" if p >= 0.001 else "< 0.001"


def seed_grid(runs: pd.DataFrame, value: str, init: str = "init_seed", data: str = "data_order_seed") -> pd.DataFrame:
    """``runs`` as a grid: rows the initialisation seeds, columns the data-order seeds, cells ``value``.

    Raises:
        ValueError: a missing column, a cell given twice, or a cell missing (the grid must be
            complete: every initialisation seed with every data-order seed; the first missing
            pair named).
    """
    missing = [c for c in (init, data, value) if c not in runs.columns]
    if missing:
        raise ValueError(f"the run table has no column {missing[0]!r}; it needs {init}, {data} and {value}")
    twice = runs.duplicated([init, data])
    if twice.any():
        row = runs[twice].iloc[0]
        raise ValueError(f"the run table gives {init}={row[init]}, {data}={row[data]} twice (one run per cell)")
    grid = runs.pivot(index=init, columns=data, values=value).sort_index().sort_index(axis=1)
    if grid.isna().any().any():
        i, j = np.argwhere(grid.isna().to_numpy())[0]
        raise ValueError(
            f"the grid is not complete: no run with {init}={grid.index[i]}, {data}={grid.columns[j]} "
            f"({int(grid.notna().sum().sum())} of {grid.size} cells); the components need every pair"
        )
    if grid.shape[0] < 2 or grid.shape[1] < 2:
        raise ValueError(f"the grid is {grid.shape[0]} × {grid.shape[1]}: each factor needs at least 2 seeds")
    return grid


def mean_squares(y: np.ndarray) -> np.ndarray:
    """``[..., 3]``: MS_init, MS_data, MS_inter of each ``[..., n_init, n_data]`` grid (two-way
    additive fit without replication; the formulas of ``anova_lm`` for a balanced grid,
    vectorised for the bootstrap and the permutations)."""
    a, b = y.shape[-2:]
    grand = y.mean(axis=(-2, -1), keepdims=True)
    rows = y.mean(axis=-1, keepdims=True)
    cols = y.mean(axis=-2, keepdims=True)
    ms_a = b * ((rows - grand) ** 2).sum(axis=(-2, -1)) / (a - 1)
    ms_b = a * ((cols - grand) ** 2).sum(axis=(-2, -1)) / (b - 1)
    ms_ab = ((y - rows - cols + grand) ** 2).sum(axis=(-2, -1)) / ((a - 1) * (b - 1))
    return np.stack([ms_a, ms_b, ms_ab], axis=-1)


def components_from_ms(ms: np.ndarray, n_init: int, n_data: int) -> np.ndarray:
    """``[..., 3]`` ANOVA estimates of (s2_init, s2_data, s2_inter) from mean squares, negatives set to 0."""
    est = np.stack(
        [(ms[..., 0] - ms[..., 2]) / n_data, (ms[..., 1] - ms[..., 2]) / n_init, ms[..., 2]],
        axis=-1,
    )
    return np.clip(est, 0.0, None)


def _shares(est: np.ndarray) -> np.ndarray:
    total = est.sum(axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, est / np.where(total > 0, total, 1.0), np.nan)


def _anova_lm_ms(grid: pd.DataFrame) -> np.ndarray:
    """MS_init, MS_data, MS_inter from statsmodels (``ols("y ~ C(init) + C(data)")``, ``anova_lm``)."""
    from statsmodels.formula.api import ols
    from statsmodels.stats.anova import anova_lm

    long = grid.stack().rename("y").reset_index()
    long.columns = ["init", "data", "y"]
    table = anova_lm(ols("y ~ C(init) + C(data)", data=long).fit(), typ=1)
    ms = table["sum_sq"] / table["df"]
    return np.array([ms["C(init)"], ms["C(data)"], ms["Residual"]])


#: statsmodels' optimisers tried for the REML fit; the fit with the highest REML likelihood is
#: kept (measured: on a grid whose data-order component is near 0, statsmodels' default gradient
#: fit stopped at half the initialisation component with a convergence warning; Nelder-Mead and
#: Powell reached the ANOVA estimates, which are the REML ones for a balanced grid).
_REML_METHODS = ("nm", "powell", "bfgs", "lbfgs")


def _reml(grid: pd.DataFrame) -> np.ndarray:
    """statsmodels' REML estimates (s2_init, s2_data, s2_inter) of the crossed model: ``MixedLM``
    with one group and a variance component per factor, the best of :data:`_REML_METHODS`; NaN
    where every fit fails."""
    from statsmodels.regression.mixed_linear_model import MixedLM

    long = grid.stack().rename("y").reset_index()
    long.columns = ["init", "data", "y"]
    long["group"] = 1
    model = MixedLM.from_formula(
        "y ~ 1", groups="group", re_formula="0", vc_formula={"init": "0 + C(init)", "data": "0 + C(data)"}, data=long
    )
    fits = []
    with warnings.catch_warnings():
        warnings.simplefilter(
            "ignore"
        )  # boundary and convergence notes (and log 0 on an exact grid): the likelihood decides
        for method in _REML_METHODS:  # the gradient optimisers can stop short of the maximum: keep the best
            try:
                fit = model.fit(reml=True, method=method)
            except (ValueError, np.linalg.LinAlgError):
                continue
            if np.isfinite(fit.llf):
                fits.append((float(fit.llf), fit))
    if not fits:
        return np.full(3, np.nan)
    fit = max(fits, key=lambda f: f[0])[1]
    names = list(fit.model.exog_vc.names)
    vc = dict(zip(names, np.asarray(fit.vcomp, float), strict=True))
    return np.array([vc["init"], vc["data"], float(fit.scale)])


def _permutation_p(y: np.ndarray, n_perm: int, rng: np.random.Generator) -> tuple[float, float]:
    """Permutation p of F_init = MS_init/MS_inter (values permuted among initialisation seeds
    within each data-order seed) and of F_data (within each initialisation seed)."""
    a, b = y.shape
    ms = mean_squares(y)
    f_obs = ms[:2] / ms[2] if ms[2] > 0 else np.where(ms[:2] > 0, np.inf, np.nan)
    # within each column (data-order seed): permute the rows
    rows = np.argsort(rng.random((n_perm, a, b)), axis=1)
    y_a = np.take_along_axis(np.broadcast_to(y, (n_perm, a, b)), rows, axis=1)
    cols = np.argsort(rng.random((n_perm, a, b)), axis=2)
    y_b = np.take_along_axis(np.broadcast_to(y, (n_perm, a, b)), cols, axis=2)
    out = []
    for k, perm in ((0, y_a), (1, y_b)):
        m = mean_squares(perm)
        with np.errstate(divide="ignore", invalid="ignore"):
            f = np.where(m[:, 2] > 0, m[:, k] / np.where(m[:, 2] > 0, m[:, 2], 1.0), np.inf)
        if np.isnan(f_obs[k]):  # the factor does not vary and nothing else does: nothing to test
            out.append(1.0)
            continue
        out.append(float((1 + np.sum(f >= f_obs[k] * (1 - 1e-12))) / (1 + n_perm)))
    return out[0], out[1]


def variance_components(
    runs: pd.DataFrame,
    value: str,
    init: str = "init_seed",
    data: str = "data_order_seed",
    censored: str | None = None,
    level: float = 0.95,
    n_boot: int = 2000,
    n_perm: int = 2000,
    seed: int = 0,
) -> VarianceComponents:
    """Split the spread of a per-run quantity into initialisation, data order and their interaction.

    Args:
        runs: one row per run with columns ``init``, ``data`` and ``value`` (and ``run``, to
            name censored runs); every initialisation seed with every data-order seed, once.
        value: the column to split (e.g. ``"log_E"``; its unit squared is the components' unit).
        init, data: the columns of the two seeds.
        censored: a boolean column marking runs whose value is a lower bound (log E of a run not
            emerged by its budget, entered at the budget); counted and named in the result.
        level: of the bootstrap intervals (in (0, 1)).
        n_boot, n_perm: parametric-bootstrap draws and permutations (>= 100 each).
        seed: of the bootstrap's and the permutations' generator.

    Returns:
        A :class:`VarianceComponents` (the method: this module's docstring).

    Raises:
        ValueError: an incomplete or repeated grid (:func:`seed_grid`), a non-finite value, a
            ``level`` outside (0, 1), ``n_boot`` or ``n_perm`` below 100.

    Source: Searle, Casella & McCulloch 1992 (ANOVA estimators, ch. 4); statsmodels ``anova_lm``
    and ``MixedLM`` (REML with variance components); Davison & Hinkley 1997 (parametric
    bootstrap); Anderson & ter Braak 2003 (restricted permutation tests).
    """
    from scipy import stats

    if not 0 < level < 1:
        raise ValueError(f"level={level!r} must be in (0, 1)")
    for name, n in (("n_boot", n_boot), ("n_perm", n_perm)):
        if isinstance(n, bool) or not isinstance(n, int) or n < 100:
            raise ValueError(f"{name}={n!r} must be an integer >= 100")
    grid = seed_grid(runs, value, init, data)
    y = grid.to_numpy(float)
    if not np.isfinite(y).all():
        raise ValueError(f"{value} has a value that is not finite; every run needs a finite {value}")
    n_init, n_data = y.shape
    ms = _anova_lm_ms(grid)
    est = components_from_ms(ms, n_init, n_data)
    reml = _reml(grid)
    rng = np.random.default_rng(seed)
    sd = np.sqrt(est)
    draws = (
        sd[0] * rng.standard_normal((n_boot, n_init, 1))
        + sd[1] * rng.standard_normal((n_boot, 1, n_data))
        + sd[2] * rng.standard_normal((n_boot, n_init, n_data))
    )
    boot = components_from_ms(mean_squares(draws), n_init, n_data)
    tail = 100 * (1 - level) / 2
    lo, hi = np.percentile(boot, [tail, 100 - tail], axis=0)
    shares = _shares(boot)
    if np.isnan(shares).all():  # no spread at all (every run the same value): no share to give
        share_lo = share_hi = np.full(3, np.nan)
    else:
        share_lo, share_hi = np.nanpercentile(shares, [tail, 100 - tail], axis=0)
    df = np.array([n_init - 1, n_data - 1, (n_init - 1) * (n_data - 1)])
    p_f = [  # an exact grid (no interaction at all): p 0 where the factor varies, 1 where it does not
        float(stats.f.sf(ms[k] / ms[2], df[k], df[2])) if ms[2] > 0 else float(not ms[k] > 0) for k in (0, 1)
    ]
    p_perm = _permutation_p(y, n_perm, rng)
    table = pd.DataFrame(
        {
            "component": list(COMPONENTS),
            "variance": est,
            "lo": lo,
            "hi": hi,
            "share": _shares(est),
            "share_lo": share_lo,
            "share_hi": share_hi,
            "reml": reml,
            "mean_square": ms,
            "df": df,
            "p_f": [*p_f, math.nan],
            "p_perm": [*p_perm, math.nan],
        }
    )
    names: tuple[str, ...] = ()
    if censored is not None:
        flagged = runs[runs[censored].astype(bool)]
        names = tuple(str(r) for r in flagged.get("run", flagged.index))
    return VarianceComponents(
        quantity=value,
        table=table,
        n_init=n_init,
        n_data=n_data,
        n_censored=len(names),
        censored_runs=names,
        level=level,
        n_boot=n_boot,
        n_perm=n_perm,
        mean=float(y.mean()),
    )


def run_quantities(curves: pd.DataFrame, threshold: float, hold: int) -> pd.DataFrame:
    """The per-run quantities split here (:data:`QUANTITIES`), one row per run of a capability
    table that carries ``init_seed`` and ``data_order_seed``: ``E`` (steps; the point of emergence
    by the population's rule, :func:`interp.population.tables.runs_from_curves`), ``censored``
    (not emerged by the budget), ``log_E`` (natural log of E; of the budget where censored, a
    lower bound), ``level`` (mean greedy accuracy over the checkpoints at or after 90 % of the
    budget, a fraction) and ``auc`` (trapezoid area under greedy accuracy against step up to the
    budget, divided by the budget: a fraction).

    Raises:
        ValueError: as :func:`interp.population.tables.check_curves` (a bad table), a threshold
            or hold the rule refuses.
    """
    from scipy.integrate import trapezoid

    from interp.population.tables import check_curves, runs_from_curves

    table = check_curves(curves)
    runs = runs_from_curves(table, threshold=threshold, hold=hold)
    rows = []
    for run, curve in table.groupby("run", sort=False):
        budget = float(curve["budget"].iloc[0])
        curve = curve[curve["step"] <= budget].sort_values("step")
        steps, acc = curve["step"].to_numpy(float), curve["accuracy"].to_numpy(float)
        late = acc[steps >= 0.9 * budget]
        rows.append(
            {
                "run": run,
                "level": float(late.mean()) if len(late) else math.nan,
                "auc": float(trapezoid(acc, steps) / budget) if budget > 0 else math.nan,
            }
        )
    out = runs.merge(pd.DataFrame(rows), on="run")
    out["censored"] = ~out["emerged"].astype(bool)
    out["log_E"] = np.log(out["duration"].astype(float))
    return out[["run", "arm", "seed", "init_seed", "data_order_seed", "E", "censored", "log_E", "level", "auc"]]


def seed_grid_figure(runs: pd.DataFrame, title: str = "point of emergence per initialisation and data-order seed"):
    """E on the initialisation × data-order grid as a plotly heatmap: rows the initialisation
    seed, columns the data-order seed, colour log-scaled E (steps; the colour bar labelled in
    steps), each cell's E written in it, "never" where the run is censored (its cell left grey),
    and each row's and column's median E in the axis labels.

    ``runs``: :func:`run_quantities`' table (a complete grid, :func:`seed_grid`).

    Raises:
        ValueError: as :func:`seed_grid`.
    """
    import plotly.graph_objects as go

    from interp.report.figures import plot_text

    e = runs.assign(E_shown=runs["E"].where(~runs["censored"].astype(bool)))
    grid = seed_grid(e.assign(E_cell=e["E_shown"].fillna(-1.0)), "E_cell").replace(-1.0, np.nan)
    z = np.log10(grid.to_numpy(float))
    text = [["never" if np.isnan(v) else f"{v:.0f}" for v in row] for row in grid.to_numpy(float)]
    row_med = grid.median(axis=1)
    col_med = grid.median(axis=0)
    y_labels = [plot_text(f"init {i} (median {row_med[i]:.0f})") for i in grid.index]
    x_labels = [plot_text(f"data {j} (median {col_med[j]:.0f})") for j in grid.columns]
    finite = grid.to_numpy(float)[np.isfinite(grid.to_numpy(float))]
    ticks = np.unique(np.round(np.geomspace(finite.min(), finite.max(), 5), -2)) if len(finite) else np.array([])
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=x_labels,
            y=y_labels,
            text=text,
            texttemplate="%{text}",
            colorscale="Viridis",
            reversescale=True,
            colorbar={
                "title": "E (steps)",
                "tickvals": np.log10(ticks).tolist() if len(ticks) else None,
                "ticktext": [f"{t:.0f}" for t in ticks] if len(ticks) else None,
            },
            hovertemplate="%{y}<br>%{x}<br>E = %{text}<extra></extra>",
            xgap=1,
            ygap=1,
        )
    )
    fig.update_layout(
        template="plotly_white",
        title=plot_text(title),
        height=120 + 40 * len(grid),
        width=200 + 90 * len(grid.columns),
        margin={"l": 170, "r": 20, "t": 60, "b": 120},
        xaxis={"title": "data-order seed", "side": "bottom", "tickangle": -40},
        yaxis={"title": "initialisation seed", "autorange": "reversed"},
        plot_bgcolor="#d0d0d0",
    )
    return fig
