"""The page of the forcing control (``forcing_control.html``; issue 45, item 3).

Is it the pattern? Per cell ``(β, N)`` of the grid, each seed's shift of the point of emergence
(forced − plain, steps) under the true patterns and under a wrong pattern of the same sparsity
(the control), drawn as pairs joined per seed with each condition's mean and 95 % t-interval,
then the summary table (each mean with its interval in one cell). The findings in words come
first, computed by the caller from the same tables (``analyses.forcing_control.headline``). A
Jinja2 template with autoescape on, as the other population pages: run names are data.
"""

from __future__ import annotations

import math

import pandas as pd
import plotly.graph_objects as go

from interp.core.templating import package_text, render, trusted
from interp.population.result import figure_html
from interp.report.display import plotly_script
from interp.report.figures import plot_text

__all__ = ["control_figure", "control_page", "control_table"]

#: Colour and x offset of each condition within its cell.
_STYLE = {"true": ("#1f77b4", -0.15, "true pattern"), "control": ("#d62728", 0.15, "control (wrong, as sparse)")}


def _cell(beta: float, n: int) -> str:
    return f"β={beta:g}, N={int(n)}"


def control_figure(table: pd.DataFrame, summary: pd.DataFrame) -> go.Figure:
    """Shift of E (steps, forced − plain) per seed, true and control side by side in each cell,
    a grey line joining one seed's pair; each condition's mean with its 95 % t-interval (the
    summary's); forced runs that never emerged (counted at the budget) as open markers.

    Args:
        table: one row per forced run (``run``, ``condition``, ``beta``, ``force_steps``,
            ``shift``, ``forced_censored``; ``analyses.forcing_control.evaluate``).
        summary: one row per cell (``beta``, ``force_steps``, ``true``, ``true_lo``,
            ``true_hi``, ``control``, ...; ``analyses.forcing_control.summarise``).
    """
    cells = [(r.beta, r.force_steps) for r in summary.itertuples()]
    x_of = {cell: i for i, cell in enumerate(cells)}
    fig = go.Figure()
    xs: list = []
    ys: list = []
    for cell, rows in table.groupby(["beta", "force_steps"], sort=False):
        wide = rows.pivot(index="run", columns="condition", values="shift")
        if cell not in x_of or not {"true", "control"} <= set(wide.columns):
            continue
        for true, control in wide[["true", "control"]].dropna().itertuples(index=False):
            xs += [x_of[cell] + _STYLE["true"][1], x_of[cell] + _STYLE["control"][1], None]
            ys += [true, control, None]
    fig.add_trace(
        go.Scatter(x=xs, y=ys, mode="lines", name="one seed's pair", hoverinfo="skip",
                   line={"color": "rgba(120,120,120,0.35)", "width": 1})
    )  # fmt: skip
    for condition, (colour, offset, name) in _STYLE.items():
        rows = table[(table["condition"] == condition) & table["shift"].notna()]
        rows = rows[[(b, n) in x_of for b, n in zip(rows["beta"], rows["force_steps"], strict=True)]]
        x = [x_of[b, n] + offset for b, n in zip(rows["beta"], rows["force_steps"], strict=True)]
        fig.add_trace(
            go.Scatter(
                x=x, y=rows["shift"], mode="markers", name=f"{name}, one seed", legendgroup=condition,
                marker={"color": colour, "size": 7, "opacity": 0.7,
                        "symbol": ["circle-open" if c else "circle" for c in rows["forced_censored"]]},
                text=[plot_text(f"{r} (never emerged: counted at the budget)" if c else r)
                      for r, c in zip(rows["run"], rows["forced_censored"], strict=True)],
                hovertemplate="%{text}<br>shift %{y:.0f} steps<extra></extra>",
            )
        )  # fmt: skip
        mean = summary[condition]
        fig.add_trace(
            go.Scatter(
                x=[x_of[c] + 2 * offset for c in cells], y=mean, mode="markers", name=f"{name}, mean (95 % CI)",
                legendgroup=condition, marker={"color": colour, "size": 12, "symbol": "diamond"},
                error_y={"type": "data", "symmetric": False, "array": summary[f"{condition}_hi"] - mean,
                         "arrayminus": mean - summary[f"{condition}_lo"], "color": colour},
                hovertemplate="mean %{y:.0f} steps<extra></extra>",
            )
        )  # fmt: skip
    fig.add_hline(y=0, line={"color": "black", "width": 1, "dash": "dot"})
    fig.update_xaxes(
        tickvals=list(range(len(cells))), ticktext=[plot_text(_cell(*c)) for c in cells], range=[-0.6, len(cells) - 0.4]
    )
    fig.update_yaxes(title_text="shift of E, forced − plain (steps)")
    fig.update_layout(
        height=460,
        margin={"l": 70, "r": 20, "t": 60, "b": 40},
        legend={"orientation": "h", "y": -0.12, "x": 0},
        title="Shift of the point of emergence per seed: true pattern against the control",
    )
    return fig


def control_table(summary: pd.DataFrame) -> pd.DataFrame:
    """The summary as the page shows it: one row per cell, each mean shift (steps) with its 95 %
    t-interval in one cell, and whether the goal (the paired difference's interval below 0 on
    >= 12 runs) is met. "undetermined" where fewer than two runs give an interval."""

    def mean(m: float, lo: float, hi: float) -> str:
        if not math.isfinite(m):
            return "undetermined"
        return f"{m:.0f}" + ("" if not math.isfinite(lo) else f"\u00a0({lo:.0f} to\u00a0{hi:.0f})")

    rows = [
        {
            "cell": _cell(r.beta, r.force_steps),
            "runs": int(r.paired_n),
            "true − control (95 % CI)": mean(r.difference, r.difference_lo, r.difference_hi),
            "true pattern (95 % CI)": mean(r.true, r.true_lo, r.true_hi),
            "control (95 % CI)": mean(r.control, r.control_lo, r.control_hi),
            "never emerged (true, control)": f"{int(r.true_censored)}, {int(r.control_censored)}",
            "goal met": "yes" if r.goal_met else "no",
        }
        for r in summary.itertuples()
    ]
    return pd.DataFrame(rows)


def control_page(
    table: pd.DataFrame,
    summary: pd.DataFrame,
    findings: list[str],
    caption: str,
    title: str = "Is it the pattern? Forcing against a control of the same sparsity",
) -> str:
    """``forcing_control.html``: the findings in words, the per-seed figure
    (:func:`control_figure`) and the summary table (:func:`control_table`); self-contained
    (plotly.js inlined once, no network), rendered from ``population/templates/control.html.j2``
    with autoescape on (run names are data).

    Args:
        table: the forced runs (``analyses.forcing_control.evaluate``).
        summary: per cell (``analyses.forcing_control.summarise``).
        findings: the lines that open the page (``analyses.forcing_control.headline`` and
            ``verdict``).
        caption: the figure's caption (the settings of the runs).
        title: the page's title.
    """
    shown = control_table(summary)
    return render(
        "population/templates/control.html.j2",
        title=title,
        style=trusted(package_text("population/templates/style.css")),
        plotly=trusted(plotly_script()),
        findings=findings,
        figure=figure_html(control_figure(table, summary)),
        columns=list(shown.columns),
        rows=shown.values.tolist(),
        caption=caption,
    )
