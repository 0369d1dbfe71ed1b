"""Summaries and plotly figures of a synthetic-task sweep's results store (see :mod:`sweeps.store`).

Every function takes the DataFrames that :func:`sweeps.store.load_results` (one row per run)
and :func:`sweeps.store.load_metrics` (one row per run × evaluation step) return, so they work
on any sweep folder. Seeds are never averaged away silently: figures draw one dot per seed
beside the mean, and loss curves a band over seeds. Figures follow Baherwani et al. 2026
(final loss vs s/S with seed dots; loss curves; plateau length vs S, cellular-automata part).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.express as px
import plotly.graph_objects as go

COLORS = px.colors.qualitative.Plotly


def _ok_runs(results: pd.DataFrame) -> pd.DataFrame:
    if "status" in results.columns:
        return results[results["status"] == "ok"]
    return results


def _check_columns(df: pd.DataFrame, columns: Sequence[str], what: str) -> None:
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(f"{what} has no column(s) {', '.join(missing)}; columns: {', '.join(map(str, df.columns))}")


def _emerged(df: pd.DataFrame) -> pd.Series:
    """The ``emerged`` column as bool (None, i.e. failed or unknown, counts as not emerged)."""
    return df["emerged"].map(lambda v: bool(v) if v is not None and v == v else False).astype(bool)


def success_table(results: pd.DataFrame, by: str | Sequence[str]) -> pd.DataFrame:
    """Per value of ``by``: runs, failures, success fraction and final-loss statistics over seeds.

    Args:
        results: one row per run (``status``, ``emerged``, ``final_loss`` and the ``by`` columns;
            ``plateau_length``, ``steps_to_threshold`` used when present).
        by: swept parameter(s), e.g. ``"s"`` or ``["S", "s"]``.

    Returns:
        One row per group: ``n_runs``, ``n_failed``, ``n_emerged``, ``success_fraction``
        (emerged / finished, probability), ``final_loss_mean|std|min|max`` (nats, finished runs),
        ``plateau_length_mean`` and ``steps_to_threshold_mean`` (steps, runs where defined).

    Raises:
        ValueError: a needed column is missing.
    """
    by = [by] if isinstance(by, str) else list(by)
    _check_columns(results, [*by, "final_loss", "emerged"], "results")
    df = results.copy()
    df["_ok"] = df["status"] == "ok" if "status" in df.columns else True
    df["_emerged"] = _emerged(df) & df["_ok"]
    df["_loss"] = pd.to_numeric(df["final_loss"], errors="coerce").where(df["_ok"])
    aggregations = {
        "n_runs": ("_ok", "size"),
        "n_ok": ("_ok", "sum"),
        "n_emerged": ("_emerged", "sum"),
        "final_loss_mean": ("_loss", "mean"),
        "final_loss_std": ("_loss", "std"),
        "final_loss_min": ("_loss", "min"),
        "final_loss_max": ("_loss", "max"),
    }
    for col in ("plateau_length", "steps_to_threshold"):
        if col in df.columns:
            df[f"_{col}"] = pd.to_numeric(df[col], errors="coerce").where(df["_ok"])
            aggregations[f"{col}_mean"] = (f"_{col}", "mean")
    table = df.groupby(by, dropna=False).agg(**aggregations).reset_index()
    table["n_failed"] = table["n_runs"] - table["n_ok"]
    table["success_fraction"] = table["n_emerged"] / table["n_ok"].where(table["n_ok"] > 0)
    first = [*by, "n_runs", "n_failed", "n_emerged", "success_fraction"]
    return table[first + [c for c in table.columns if c not in first and c != "n_ok"]]


def plot_vs_param(
    results: pd.DataFrame,
    param: str,
    y: str = "final_loss",
    color: str | None = None,
    log_y: bool = False,
    title: str | None = None,
) -> go.Figure:
    """One dot per run (seed) and the mean over seeds of ``y`` against swept ``param``.

    ``y="success"`` plots the success fraction (line) with each seed's emerged 0/1 as dots.
    ``param`` values are shown as ordered categories (e.g. S = 8, 16, 32 evenly spaced).

    Raises:
        ValueError: ``param``, ``y`` or ``color`` is not a column of ``results``.
    """
    value_col = "emerged" if y == "success" else y
    _check_columns(results, [param, value_col] + ([color] if color else []), "results")
    df = _ok_runs(results).copy()
    df["_y"] = _emerged(df).astype(float) if y == "success" else pd.to_numeric(df[value_col], errors="coerce")
    df = df[np.isfinite(df["_y"])]
    order = sorted(df[param].unique(), key=_sort_key)
    df["_x"] = df[param].map(str)
    groups = [(None, df)] if color is None else list(df.groupby(color, sort=True))
    fig = go.Figure()
    for i, (key, group) in enumerate(groups):
        c = COLORS[i % len(COLORS)]
        label = f"{color}={key}" if color else "mean"
        hover = [
            f"seed={s} run={r}"
            for s, r in zip(group.get("seed", [""] * len(group)), group.get("run_id", [""] * len(group)))
        ]
        fig.add_trace(
            go.Box(
                x=group["_x"],
                y=group["_y"],
                boxpoints="all",
                jitter=0.4,
                pointpos=0,
                fillcolor="rgba(0,0,0,0)",
                line=dict(width=0),
                marker=dict(color=c, size=6, opacity=0.6),
                name=f"{label} seeds",
                hovertext=hover,
                legendgroup=label,
                offsetgroup=str(i),
            )
        )
        means = group.groupby("_x")["_y"].mean()
        xs = [str(v) for v in order if str(v) in means.index]
        fig.add_trace(
            go.Scatter(
                x=xs, y=[means[x] for x in xs], mode="lines+markers", name=label, line=dict(color=c), legendgroup=label
            )
        )
    y_label = {
        "success": "success fraction (probability)",
        "final_loss": "final loss (nats)",
        "plateau_length": "plateau length (steps)",
    }.get(y, y)
    fig.update_layout(
        title=title or f"{y_label} vs {param}",
        xaxis_title=param,
        yaxis_title=y_label,
        boxmode="group",
        template="plotly_white",
    )
    fig.update_xaxes(type="category", categoryorder="array", categoryarray=[str(v) for v in order])
    if log_y:
        fig.update_yaxes(type="log")
    return fig


def plot_success_vs(results: pd.DataFrame, param: str, color: str | None = None) -> go.Figure:
    """Success fraction (emerged / finished runs) vs ``param``, with each seed's 0/1 as a dot."""
    return plot_vs_param(results, param, y="success", color=color)


def plot_final_loss_vs(results: pd.DataFrame, param: str, color: str | None = None) -> go.Figure:
    """Final loss (nats) vs ``param`` with seed dots; the dashed line is the mean loss floor
    (``floor`` column, e.g. (S−1)/(2S−1)·ln 2 for the linear map) when present."""
    fig = plot_vs_param(results, param, y="final_loss", color=color)
    if "floor" in results.columns:
        floors = _ok_runs(results).groupby(results[param].map(str))["floor"].mean().dropna()
        if len(floors):
            fig.add_trace(
                go.Scatter(
                    x=list(floors.index),
                    y=list(floors.values),
                    mode="lines",
                    name="floor",
                    line=dict(color="black", dash="dash"),
                )
            )
    return fig


def plot_plateau_vs_S(results: pd.DataFrame, color: str | None = "bias") -> go.Figure:
    """Plateau length (steps, log scale) vs state size S, seed dots and means; one colour per
    ``color`` value (default: attention bias β, as in the paper's cellular-automata figure)."""
    if color is not None and color not in results.columns:
        color = None
    return plot_vs_param(results, "S", y="plateau_length", color=color, log_y=True, title="plateau length vs S")


def plot_loss_curves(
    metrics: pd.DataFrame,
    results: pd.DataFrame,
    color: str | None = None,
    x: str = "step",
    y: str = "loss",
    band: str = "minmax",
) -> go.Figure:
    """Loss curves: the mean over seeds per ``color`` value, with a band over seeds.

    Args:
        metrics: per-step rows with ``run_id``, ``x`` and ``y`` columns.
        results: per-run rows with ``run_id`` and ``color``.
        color: swept parameter that separates curves; None = one curve over all runs.
        x, y: metric columns (steps; nats).
        band: ``"minmax"`` (range over seeds) or ``"std"`` (mean ± one standard deviation).

    Raises:
        ValueError: missing columns or an unknown ``band``.
    """
    if band not in ("minmax", "std"):
        raise ValueError(f"band={band!r}; valid: 'minmax', 'std'")
    _check_columns(metrics, ["run_id", x, y], "metrics")
    if color is not None:
        _check_columns(results, ["run_id", color], "results")
        df = metrics.merge(results[["run_id", color]], on="run_id", how="inner")
    else:
        df = metrics.assign(_all="all")
        color = "_all"
    fig = go.Figure()
    for i, (key, group) in enumerate(df.groupby(color, sort=True)):
        c = COLORS[i % len(COLORS)]
        stats = group.groupby(x)[y].agg(["mean", "std", "min", "max", "count"]).reset_index()
        if band == "minmax":
            low, high = stats["min"], stats["max"]
        else:
            low, high = stats["mean"] - stats["std"].fillna(0), stats["mean"] + stats["std"].fillna(0)
        label = "all runs" if color == "_all" else f"{color}={key}"
        fig.add_trace(
            go.Scatter(
                x=list(stats[x]) + list(stats[x])[::-1],
                y=list(high) + list(low)[::-1],
                fill="toself",
                fillcolor=_rgba(c, 0.2),
                line=dict(width=0),
                hoverinfo="skip",
                showlegend=False,
                legendgroup=label,
            )
        )
        fig.add_trace(
            go.Scatter(
                x=stats[x],
                y=stats["mean"],
                mode="lines",
                line=dict(color=c),
                name=f"{label} (n={int(stats['count'].max())})",
                legendgroup=label,
            )
        )
    fig.update_layout(
        title=f"{y} vs {x} (mean over seeds, band = {band})",
        xaxis_title=f"{x} (steps)",
        yaxis_title=f"{y} (nats)",
        template="plotly_white",
    )
    return fig


def _rgba(hex_color: str, alpha: float) -> str:
    h = hex_color.lstrip("#")
    r, g, b = (int(h[i : i + 2], 16) for i in (0, 2, 4))
    return f"rgba({r},{g},{b},{alpha})"


def _sort_key(value: object) -> tuple:
    """Numbers in numeric order before everything else in string order."""
    if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool):
        return (0, float(value), "")
    return (1, 0.0, str(value))
