"""Forecast a seed's point of emergence from its checkpoints before it (issue 45, item 1).

Features of a run at a horizon ``h`` (steps), read off its kept head features
(:mod:`interp.population.heads`, :func:`interp.population.heads.summarise_heads`: the best head
of each kind, so that arms with different head counts share one feature set) at the last
checkpoint ``<= h``:

- ``prev_max`` (max previous-token score of a layer-0 head), ``ind_max`` (max prefix-matching
  score of a layer-1 head), ``entropy_min`` (nats), ``dist_min`` (distance to the ideal pattern),
  ``loss`` (nats, mean of the 100 training steps up to the checkpoint);
- their slopes per 1000 steps over the window ``(h - w, h]``, ``w = min(500, h)`` steps
  (``*_slope``);
- the arm: ``log2_heads`` and ``log2_d_model``.

Horizons: ``"half"`` (each run's own ``E / 2``: how far a seed is along when it is half way;
the horizon itself is not a feature, but the features read there carry it, the loss above all, so
this asks how far along a seed is rather than making a forecast in advance) or a fixed step (the
same for every run: a true forecast; runs that emerged at or before it are left out, named).

Model: two parts, so that censoring is handled (issue 52, item 4): the probability that the run
emerges by its budget (a ridge-penalised logistic regression on the same standardised features,
statsmodels ``GLM(Binomial).fit_regularized`` with ``L1_wt=0``; the penalty keeps it finite
where the arms separate the runs perfectly), and the time given that it emerges (ridge regression
of ``log2 E`` on the emerged runs, statsmodels ``OLS.fit_regularized`` with ``L1_wt=0``; penalty
:data:`ALPHA`). A run whose probability is below 0.5, or whose time falls past its budget, is
predicted never to emerge by the budget (``predicted_time`` = ``inf``): a run that never emerged
is not predicted to emerge at step 2400. The ridge on ``log2 E`` is kept for the time because
the goal is a per-seed time with an error in ``log2`` steps, which it minimises directly, while a
Cox model needs a baseline hazard to become a time; with ~5-20 emerged runs per fold and 12
correlated features an unpenalised fit overfits.

Evaluation: leave-one-seed-out (every run of one seed index held out at once, across arms; the
model and the baseline fit on the rest). Baseline: the held-out run's arm's Kaplan-Meier median
E over the training runs of that arm (censored runs included; the one median convention of the
population, :func:`interp.population.survival.median_interval`), "never" where that median is not
reached. Scores: Harrell's concordance C over every run (emerged or censored; :func:`concordance`),
overall and within each arm, beside the error ``|log2(predicted time / E)|`` of the emerged runs
(``inf`` for an emerged run predicted never); per arm the median error; the goal (issue 45) is
the model's median error at most half the baseline's, on every arm.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from interp.population.survival import median_interval

__all__ = ["ALPHA", "FEATURES", "ForecastResult", "concordance", "forecast", "forecast_features", "ratio_interval"]

#: Features of the model, in order (see the module docstring).
FEATURES = (
    "prev_max",
    "ind_max",
    "entropy_min",
    "dist_min",
    "loss",
    "prev_max_slope",
    "ind_max_slope",
    "entropy_min_slope",
    "dist_min_slope",
    "loss_slope",
    "log2_heads",
    "log2_d_model",
)
#: Ridge penalty on the standardised features (statsmodels' ``alpha``: per observation).
ALPHA = 0.1
#: Bootstrap resamples of the per-arm ratio's interval (:func:`ratio_interval`).
N_BOOT = 2000
#: The log2 error an emerged run predicted never counts as in the ratio's bootstrap (larger than any real one).
NEVER_ERROR = 1000.0
#: Slope window (steps).
SLOPE_WINDOW = 500
_BASE = ("prev_max", "ind_max", "entropy_min", "dist_min", "loss")


def _at(summary: pd.DataFrame, step: float) -> pd.Series:
    """The summary row of the last checkpoint at or before ``step``."""
    rows = summary[summary["step"] <= step]
    return rows.iloc[-1] if len(rows) else summary.iloc[0]


def _horizon_of(run: pd.Series, horizon: str | int) -> float:
    if horizon == "half":
        return run["E"] / 2 if run["emerged"] else run["budget"] / 2
    return float(horizon)


def _check_horizon(horizon) -> None:
    ok = horizon == "half" or (isinstance(horizon, int | np.integer) and not isinstance(horizon, bool) and horizon > 0)
    if not ok:
        raise ValueError(f"horizon={horizon!r} must be 'half' (each run's E / 2) or a step > 0 (int)")


def forecast_features(runs: pd.DataFrame, summary: pd.DataFrame, horizon: str | int = "half") -> pd.DataFrame:
    """One row per run that has head features: ``run``, ``horizon_step`` (the checkpoint read,
    steps) and :data:`FEATURES`.

    Args:
        runs: the population's run table (:attr:`interp.population.PopulationResult.runs`).
        summary: :func:`interp.population.heads.summarise_heads` of the runs' head features.
        horizon: ``"half"`` or a step (int > 0).

    Raises:
        ValueError: a bad horizon.
    """
    _check_horizon(horizon)
    rows = []
    by_run = {run: table.sort_values("step") for run, table in summary.groupby("run")}
    for _, run in runs.iterrows():
        table = by_run.get(run["run"])
        if table is None or table.empty:
            continue
        h = _horizon_of(run, horizon)
        now = _at(table, h)
        w = min(SLOPE_WINDOW, float(now["step"]))
        before = _at(table, now["step"] - w)
        dt = max(float(now["step"] - before["step"]), 1.0)
        row = {"run": run["run"], "horizon_step": int(now["step"])}
        for name in _BASE:
            row[name] = float(now[name])
            row[f"{name}_slope"] = float(now[name] - before[name]) / dt * 1000.0
        row["log2_heads"] = math.log2(float(run["n_heads"]))
        row["log2_d_model"] = math.log2(float(run["d_model"]))
        rows.append(row)
    return pd.DataFrame(rows, columns=["run", "horizon_step", *FEATURES])


def _ridge(X: np.ndarray, y: np.ndarray, alpha: float):
    """Fit the ridge on standardised columns; returns a predictor ``X -> log2 E``."""
    import statsmodels.api as sm

    mean, std = X.mean(0), X.std(0)
    std[std == 0] = 1.0
    y_mean = y.mean()
    fit = sm.OLS(y - y_mean, (X - mean) / std).fit_regularized(alpha=alpha, L1_wt=0.0)
    coef = np.asarray(fit.params, dtype=float)
    return (lambda Z: y_mean + ((Z - mean) / std) @ coef), coef


def _logistic(X: np.ndarray, y: np.ndarray, alpha: float):
    """Fit the ridge-penalised logistic regression of ``y`` (0/1) on standardised columns;
    returns a predictor ``X -> P(y = 1)`` (the constant share when ``y`` does not vary)."""
    import statsmodels.api as sm

    share = float(y.mean())
    if share in (0.0, 1.0):
        return lambda Z: np.full(len(Z), share)
    mean, std = X.mean(0), X.std(0)
    std[std == 0] = 1.0
    design = np.column_stack([np.ones(len(X)), (X - mean) / std])
    fit = sm.GLM(y, design, family=sm.families.Binomial()).fit_regularized(alpha=alpha, L1_wt=0.0)
    coef = np.asarray(fit.params, dtype=float)
    return lambda Z: 1.0 / (1.0 + np.exp(-(np.column_stack([np.ones(len(Z)), (Z - mean) / std]) @ coef)))


def concordance(duration: np.ndarray, emerged: np.ndarray, predicted: np.ndarray, groups=None) -> tuple[float, int]:
    """Harrell's concordance C of predicted times with observed, censored ones.

    A pair of runs is comparable when the one with the shorter duration emerged at it (a censored
    run is only known to outlast its budget); it is concordant when that run is also predicted
    earlier, half when the predictions tie (two runs both predicted never, ``inf``, tie).

    Args:
        duration: shape ``(n_runs,)``, steps to E or to censoring.
        emerged: shape ``(n_runs,)``, booleans.
        predicted: shape ``(n_runs,)``, predicted times (steps; ``inf`` = never by the budget).
        groups: shape ``(n_runs,)`` or None; when given, only pairs within one group count.

    Returns:
        ``(C, comparable pairs)``; C is NaN without a comparable pair. 1: every pair ordered
        right; 0.5: no better than chance.

    Source: Harrell, Califf, Pryor, Lee & Rosati 1982, "Evaluating the yield of medical tests",
    JAMA 247(18) (written here: statsmodels has no concordance index, lifelines does not install
    beside pandas 3).
    """
    duration, predicted = np.asarray(duration, float), np.asarray(predicted, float)
    emerged = np.asarray(emerged, bool)
    same = np.ones((len(duration),) * 2, bool) if groups is None else np.equal.outer(groups, groups)
    comparable = emerged[:, None] & (duration[:, None] < duration[None, :]) & same
    n = int(comparable.sum())
    if n == 0:
        return math.nan, 0
    with np.errstate(invalid="ignore"):
        earlier = predicted[:, None] < predicted[None, :]
        tied = predicted[:, None] == predicted[None, :]
    return float((earlier[comparable].sum() + 0.5 * tied[comparable].sum()) / n), n


def _km_median(rows: pd.DataFrame, fallback: pd.DataFrame) -> float:
    """The Kaplan-Meier median E of ``rows`` (``fallback`` when empty): steps, ``inf`` when not
    reached (the baseline then predicts never by the budget)."""
    rows = rows if len(rows) else fallback
    median = median_interval(rows)[0] if len(rows) else math.nan
    return math.inf if math.isnan(median) else median


def ratio_interval(error: np.ndarray, baseline_error: np.ndarray, n_boot: int = N_BOOT) -> tuple[float, float]:
    """95 % interval of ``median(error) / median(baseline_error)`` over an arm's scored runs.

    Args:
        error, baseline_error: shape ``(n_runs,)``, the model's and the baseline's
            ``|log2(pred / E)|`` of the same runs (paired: runs are resampled together).
        n_boot: bootstrap resamples.

    Returns:
        ``(lo, hi)``; NaN for fewer than 3 runs; ``inf`` where a resample's baseline median is 0.

    Method: percentile bootstrap over runs (Efron & Tibshirani 1993, ch. 13), through
    ``scipy.stats.bootstrap(paired=True)`` with a fixed seed.
    """
    from scipy.stats import bootstrap

    if len(error) < 3:
        return math.nan, math.nan

    def ratio(a, b, axis=-1):
        num, den = np.median(a, axis=axis), np.median(b, axis=axis)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.where(num > 0, np.inf, 0.0))

    with np.errstate(invalid="ignore"):  # resamples whose ratio is inf make scipy's spread check inf - inf
        res = bootstrap(
            (error, baseline_error),
            ratio,
            paired=True,
            vectorized=True,
            n_resamples=n_boot,
            method="percentile",
            rng=np.random.default_rng(0),
        )
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


@dataclass(frozen=True, eq=False)
class ForecastResult:
    """Predicted against actual points of emergence, leave-one-seed-out.

    Attributes:
        predictions: one row per run: ``run``, ``arm``, ``seed``, ``emerged``, ``E`` (steps; NaN if
            censored), ``budget``, ``horizon_step``, ``p_emerge`` (probability of emerging by the
            budget), ``predicted_E`` (the time given it emerges, steps), ``predicted_emerged``,
            ``predicted_time`` (``predicted_E``, or ``inf``: never by the budget), ``baseline_E``
            (steps; ``inf``: the arm's median is not reached), ``error`` and ``baseline_error``
            (``|log2(predicted / E)|``; ``inf`` for an emerged run predicted never; NaN for
            censored runs).
        arms: one row per arm: ``n_runs``, ``n_scored`` (emerged runs with a prediction),
            ``median_E`` (steps, over the scored runs), ``median_error``, ``median_baseline_error``,
            ``goal_error_steps`` (the goal's error in steps at ``median_E``: ``median_E *
            (2 ** (median_baseline_error / 2) - 1)``), ``ratio`` (model / baseline) with its 95 %
            bootstrap interval ``ratio_lo``, ``ratio_hi`` (:func:`ratio_interval`) and ``goal_met``
            (ratio <= 0.5, the issue's criterion on the point estimate) and ``goal_met_interval``
            (the whole interval <= 0.5); ``concordance`` (Harrell's C of the predicted times within
            the arm, censored runs included), ``baseline_concordance``, ``pairs`` (comparable pairs),
            ``n_censored``, ``censored_predicted_never`` (censored runs rightly predicted never by the
            budget), ``emerged_predicted_never`` (emerged runs wrongly predicted never).
        concordance, baseline_concordance: Harrell's C over every run of every arm (the model's
            and the baseline's).
        coefficients: the ridge fit on every emerged run (standardised features; log2 steps per sd).
        horizon: the horizon asked for.
        alpha: the ridge penalty.
    """

    predictions: pd.DataFrame
    arms: pd.DataFrame
    coefficients: pd.DataFrame
    horizon: str | int
    alpha: float = ALPHA
    notes: list[str] = field(default_factory=list)
    concordance: float = math.nan
    baseline_concordance: float = math.nan

    def lines(self) -> list[str]:
        """The result in words, one line per arm, then the notes."""
        out = []
        for r in self.arms.itertuples():
            never = (
                f"; {r.censored_predicted_never} of {r.n_censored} censored runs predicted never to emerge by the budget"
                if r.n_censored
                else ""
            )
            if r.emerged_predicted_never:
                never += f"; {r.emerged_predicted_never} emerged run(s) predicted never (error counted as infinite)"
            c = (
                f"; concordance C {r.concordance:.2f} over {r.pairs} pairs (baseline {r.baseline_concordance:.2f})"
                if r.pairs
                else "; no comparable pair for a concordance"
            )
            if r.n_scored == 0:
                out.append(f"{r.arm}: no emerged run to score the error ({r.n_runs} runs){never}{c}.")
                continue
            verdict = "goal met" if r.goal_met else "goal NOT met"
            if r.goal_met and not r.goal_met_interval:
                verdict += " on the point estimate, though its interval reaches above 0.5"
            if r.median_baseline_error == 0:
                verdict += ": the arm-median baseline is exact on most seeds (E on one checkpoint), nothing to halve"
            out.append(
                f"{r.arm}: median |log2(pred/E)| {r.median_error:.2f} against the arm-median baseline's "
                f"{r.median_baseline_error:.2f} (ratio {r.ratio:.2f}, 95 % CI {r.ratio_lo:.2f}–{r.ratio_hi:.2f}, "
                f"{verdict}; {r.n_scored} emerged runs scored; the goal asks for an error of about "
                f"{r.goal_error_steps:.0f} steps at the arm's median E of {r.median_E:.0f}{never}{c})."
            )
        return out + list(self.notes)


def forecast(population, heads: pd.DataFrame, horizon: str | int = "half", alpha: float = ALPHA) -> ForecastResult:
    """Forecast each seed's point of emergence E from its head features up to ``horizon``.

    Args:
        population: a :class:`interp.population.PopulationResult` (its ``runs``: E per run) or
            its run table.
        heads: the runs' head features (:data:`interp.population.heads.FEATURE_COLUMNS`, one
            row per run x step x head), e.g. the kept ``docs/data/population/heads/*.csv``.
        horizon: ``"half"`` (each run's features at E / 2, budget / 2 if censored) or a step
            (int > 0: every run at that step; a run that emerged at or before it is left out and
            named in the notes, since its features there would be read after E).
        alpha: ridge penalty (>= 0) on the standardised features.

    Returns:
        :class:`ForecastResult`: per-run predictions (steps) and per-arm errors (log2 units),
        leave-one-seed-out, against the arm-median baseline.

    Raises:
        ValueError: a bad horizon or alpha, or fewer than 3 emerged runs with features.

    Method: ridge regression of log2 E (Hoerl & Kennard 1970) through statsmodels; see the module
    docstring for the features, the evaluation and why not a survival model.
    """
    from interp.population.heads import summarise_heads

    _check_horizon(horizon)
    if not (isinstance(alpha, int | float) and alpha >= 0 and math.isfinite(alpha)):
        raise ValueError(f"alpha={alpha!r} must be a finite number >= 0")
    runs = getattr(population, "runs", population)
    notes = []
    if horizon != "half":
        # a run that emerged at or before a fixed horizon has nothing left to forecast, and its
        # features there would be read after E: it is left out and named
        done = runs["emerged"].astype(bool) & (runs["E"] <= float(horizon))
        if done.any():
            notes.append(
                f"{int(done.sum())} run(s) emerged by step {horizon}, nothing left to forecast, left out: "
                + ", ".join(runs.loc[done, "run"])
            )
            runs = runs[~done]
    feats = forecast_features(runs, summarise_heads(heads), horizon)
    table = runs[["run", "arm", "seed", "n_heads", "emerged", "E", "budget"]].merge(feats, on="run")
    fit_rows = table[table["emerged"]]
    if len(fit_rows) < 3:
        raise ValueError(f"forecast needs >= 3 emerged runs with head features, got {len(fit_rows)}")
    X_all = table[list(FEATURES)].to_numpy(float)
    table = table.assign(duration=np.where(table["emerged"], table["E"], table["budget"]).astype(float))
    pred, prob, base = (np.full(len(table), np.nan) for _ in range(3))
    for seed in sorted(table["seed"].unique()):
        others = (table["seed"] != seed).to_numpy()
        train = others & table["emerged"].to_numpy(bool)
        test = (table["seed"] == seed).to_numpy()
        if train.sum() < 3:
            continue
        predict, _ = _ridge(X_all[train], np.log2(table.loc[train, "E"].to_numpy(float)), alpha)
        pred[test] = 2.0 ** predict(X_all[test])
        prob[test] = _logistic(X_all[others], table.loc[others, "emerged"].to_numpy(float), alpha)(X_all[test])
        base[test] = [
            _km_median(table[others & (table["arm"] == a).to_numpy()], table[others]) for a in table.loc[test, "arm"]
        ]
    will = (prob >= 0.5) & (pred <= table["budget"].to_numpy(float))
    table = table.assign(
        predicted_E=pred,
        p_emerge=prob,
        predicted_emerged=np.where(np.isnan(pred), False, will),
        predicted_time=np.where(will, pred, np.where(np.isnan(pred), np.nan, np.inf)),
        baseline_E=base,
    )
    with np.errstate(divide="ignore", invalid="ignore"):
        emerged = table["emerged"].to_numpy(bool)
        table["error"] = np.where(emerged, np.abs(np.log2(table["predicted_time"] / table["E"])), np.nan)
        table["baseline_error"] = np.where(emerged, np.abs(np.log2(table["baseline_E"] / table["E"])), np.nan)
    _, coef = _ridge(
        X_all[table["emerged"].to_numpy()], np.log2(table.loc[table["emerged"], "E"].to_numpy(float)), alpha
    )
    known = table[table["predicted_time"].notna()]
    overall_c, overall_pairs = concordance(known["duration"], known["emerged"], known["predicted_time"])
    overall_base, _ = concordance(known["duration"], known["emerged"], known["baseline_E"])
    arms = []
    for arm, rows in table.groupby("arm", sort=False):
        scored = rows[rows["emerged"] & rows["error"].notna()]
        m, b = float(scored["error"].median()), float(scored["baseline_error"].median())
        ratio = m / b if b > 0 else (0.0 if m == 0 else math.inf) if len(scored) else math.nan
        # an emerged run predicted never has an infinite error: in the resamples it counts as an
        # error larger than any other (NEVER_ERROR log2 units), so the interval stays defined
        capped = np.minimum(scored[["error", "baseline_error"]].to_numpy(float), NEVER_ERROR)
        lo, hi = ratio_interval(capped[:, 0], capped[:, 1])
        median_e = median_interval(scored.assign(duration=scored["E"]))[0] if len(scored) else math.nan
        rows_known = rows[rows["predicted_time"].notna()]
        c, pairs = concordance(rows_known["duration"], rows_known["emerged"], rows_known["predicted_time"])
        c_base, _ = concordance(rows_known["duration"], rows_known["emerged"], rows_known["baseline_E"])
        censored_rows = rows_known[~rows_known["emerged"]]
        arms.append(
            {
                "arm": arm,
                "n_runs": len(rows),
                "n_scored": len(scored),
                "median_E": median_e,
                "median_error": m,
                "median_baseline_error": b,
                # the goal in steps: an error of half the baseline's log2 error, at the arm's median E
                "goal_error_steps": median_e * (2.0 ** (b / 2) - 1.0),
                "ratio": ratio,
                "ratio_lo": lo,
                "ratio_hi": hi,
                "goal_met": bool(len(scored) and ratio <= 0.5),
                "goal_met_interval": bool(len(scored) and hi <= 0.5),
                "concordance": c,
                "baseline_concordance": c_base,
                "pairs": pairs,
                "n_censored": len(censored_rows),
                "censored_predicted_never": int((~censored_rows["predicted_emerged"].astype(bool)).sum()),
                "emerged_predicted_never": int((scored["predicted_time"] == np.inf).sum()),
            }
        )
    censored = table[~table["emerged"]]
    missing = sorted(set(runs["run"]) - set(table["run"]))
    if missing:
        notes.append(f"{len(missing)} run(s) without head features left out: {', '.join(missing)}")
    if len(censored):
        right = censored[~censored["predicted_emerged"].astype(bool) & censored["predicted_time"].notna()]
        wrong = censored[censored["predicted_emerged"].astype(bool)]
        notes.append(
            f"{len(censored)} censored run(s) (no E within the budget): {len(right)} predicted never to emerge by the "
            "budget"
            + (
                "; predicted to emerge: " + ", ".join(f"{r.run} at {r.predicted_time:.0f}" for r in wrong.itertuples())
                if len(wrong)
                else ""
            )
        )
    notes.append(
        f"Concordance (Harrell's C, every run, censored ones included): {overall_c:.2f} over {overall_pairs} "
        f"comparable pairs, against the arm-median baseline's {overall_base:.2f}."
    )
    columns = [
        "run",
        "arm",
        "seed",
        "emerged",
        "E",
        "budget",
        "horizon_step",
        "p_emerge",
        "predicted_E",
        "predicted_emerged",
        "predicted_time",
        "baseline_E",
        "error",
        "baseline_error",
    ]
    return ForecastResult(
        predictions=table[columns].reset_index(drop=True),
        arms=pd.DataFrame(arms),
        coefficients=pd.DataFrame({"feature": list(FEATURES), "coefficient": coef}),
        horizon=horizon,
        alpha=float(alpha),
        notes=notes,
        concordance=overall_c,
        baseline_concordance=overall_base,
    )
