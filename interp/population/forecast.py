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

Model: ridge regression of ``log2 E`` on the standardised features (statsmodels
``OLS.fit_regularized`` with ``L1_wt=0``, the closed-form ridge; penalty :data:`ALPHA`). Why
not a survival model: the goal is a per-seed time with an error in ``log2`` steps, which a
regression on ``log2 E`` minimises directly, while a Cox model gives hazard ratios and needs a
baseline hazard to turn into a time; with ~5-20 emerged runs per fold and 12 correlated features
an unpenalised fit overfits, the ridge shrinks. The cost: censored runs (no E within the budget)
are left out of the fit and of the error (they are listed, with their prediction), so an arm
where no seed emerges cannot be scored.

Evaluation: leave-one-seed-out (every run of one seed index held out at once, across arms; the
model and the baseline fit on the rest). Baseline: the held-out run's arm's median E over the
emerged training runs of that arm. Error: ``|log2(predicted E / actual E)|``; per arm the median
over its emerged runs; the goal (issue 45) is the model's median error at most half the
baseline's, on every arm.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

__all__ = ["ALPHA", "FEATURES", "ForecastResult", "forecast", "forecast_features", "ratio_interval"]

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
            censored), ``horizon_step``, ``predicted_E`` and ``baseline_E`` (steps), ``error`` and
            ``baseline_error`` (``|log2(pred / E)|``; NaN for censored runs).
        arms: one row per arm: ``n_runs``, ``n_scored`` (emerged runs with a prediction),
            ``median_E`` (steps, over the scored runs), ``median_error``, ``median_baseline_error``,
            ``goal_error_steps`` (the goal's error in steps at ``median_E``: ``median_E *
            (2 ** (median_baseline_error / 2) - 1)``), ``ratio`` (model / baseline) with its 95 %
            bootstrap interval ``ratio_lo``, ``ratio_hi`` (:func:`ratio_interval`) and ``goal_met``
            (ratio <= 0.5, the issue's criterion on the point estimate) and ``goal_met_interval``
            (the whole interval <= 0.5).
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

    def lines(self) -> list[str]:
        """The result in words, one line per arm, then the notes."""
        out = []
        for r in self.arms.itertuples():
            if r.n_scored == 0:
                out.append(f"{r.arm}: no emerged run to score ({r.n_runs} runs, all censored or without features).")
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
                f"{r.goal_error_steps:.0f} steps at the arm's median E of {r.median_E:.0f})."
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
    pred = np.full(len(table), np.nan)
    base = np.full(len(table), np.nan)
    for seed in sorted(table["seed"].unique()):
        train = (table["seed"] != seed) & table["emerged"]
        test = (table["seed"] == seed).to_numpy()
        if train.sum() < 3:
            continue
        predict, _ = _ridge(X_all[train.to_numpy()], np.log2(table.loc[train, "E"].to_numpy(float)), alpha)
        pred[test] = 2.0 ** predict(X_all[test])
        medians = table[train].groupby("arm")["E"].median()
        overall = float(table.loc[train, "E"].median())
        base[test] = [float(medians.get(a, overall)) for a in table.loc[test, "arm"]]
    table = table.assign(predicted_E=pred, baseline_E=base)
    table["error"] = np.abs(np.log2(table["predicted_E"] / table["E"]))
    table["baseline_error"] = np.abs(np.log2(table["baseline_E"] / table["E"]))
    _, coef = _ridge(
        X_all[table["emerged"].to_numpy()], np.log2(table.loc[table["emerged"], "E"].to_numpy(float)), alpha
    )
    arms = []
    for arm, rows in table.groupby("arm", sort=False):
        scored = rows[rows["emerged"] & rows["error"].notna()]
        m, b = float(scored["error"].median()), float(scored["baseline_error"].median())
        ratio = m / b if b > 0 else (0.0 if m == 0 else math.inf) if len(scored) else math.nan
        lo, hi = ratio_interval(scored["error"].to_numpy(float), scored["baseline_error"].to_numpy(float))
        median_e = float(scored["E"].median()) if len(scored) else math.nan
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
            }
        )
    censored = table[~table["emerged"]]
    missing = sorted(set(runs["run"]) - set(table["run"]))
    if missing:
        notes.append(f"{len(missing)} run(s) without head features left out: {', '.join(missing)}")
    if len(censored):
        notes.append(
            f"{len(censored)} censored run(s) not scored (no E within the budget); their predictions: "
            + ", ".join(f"{r.run} {r.predicted_E:.0f}" for r in censored.itertuples() if r.predicted_E == r.predicted_E)
        )
    columns = [
        "run",
        "arm",
        "seed",
        "emerged",
        "E",
        "horizon_step",
        "predicted_E",
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
    )
