"""The page of the forecast and the formation order (``insight.html``; issue 45, items 1-2).

Sections: the forecast's predicted against actual E per seed (log axes, one panel per horizon,
the diagonal and the factor-2 band), its per-arm error table; the three formation events per
seed; the formation summary. A Jinja2 template with autoescape on, as the population page
(:mod:`interp.population.page`): names are data; the only trusted HTML is plotly's.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from interp.core.templating import package_text, render, trusted
from interp.population.findings import fmt_pct
from interp.population.result import figure_html
from interp.report.display import plotly_script
from interp.report.figures import plot_text

__all__ = ["forecast_figure", "formation_figure", "formation_table", "insight_findings", "insight_page"]


def forecast_figure(predictions: dict[str, pd.DataFrame]) -> go.Figure:
    """Predicted against actual E (steps, log axes): one panel per horizon, one colour per arm
    (the same in every panel); emerged runs only; the diagonal and the factor-2 band."""
    import plotly.express as px

    horizons = list(predictions)
    fig = make_subplots(
        rows=1,
        cols=max(len(horizons), 1),
        shared_yaxes=True,
        subplot_titles=[plot_text(f"horizon {h}") for h in horizons],
        horizontal_spacing=0.06,
    )
    palette, colours, values = px.colors.qualitative.Plotly, {}, []
    for col, horizon in enumerate(horizons, start=1):
        table = predictions[horizon]
        y = "predicted_time" if "predicted_time" in table else "predicted_E"
        rows = table[table["emerged"] & np.isfinite(table[y].to_numpy(float))]
        for arm, sub in rows.groupby("arm", sort=False):
            first = arm not in colours
            colour = colours.setdefault(arm, palette[len(colours) % len(palette)])
            values += list(sub["E"]) + list(sub[y])
            fig.add_trace(
                go.Scatter(
                    x=sub["E"],
                    y=sub[y],
                    mode="markers",
                    name=plot_text(arm),
                    legendgroup=plot_text(arm),
                    showlegend=first,
                    marker={"color": colour, "size": 7},
                    text=[plot_text(r) for r in sub["run"]],
                    hovertemplate="%{text}<br>E %{x:.0f}<br>predicted %{y:.0f}<extra></extra>",
                ),
                row=1,
                col=col,
            )
    if values:
        lo, hi = min(values) / 1.2, max(values) * 1.2
        for col in range(1, len(horizons) + 1):
            for factor, dash in ((1, "solid"), (2, "dash"), (0.5, "dash")):
                fig.add_trace(
                    go.Scatter(
                        x=[lo, hi], y=[lo * factor, hi * factor], mode="lines", showlegend=False,
                        line={"color": "gray", "dash": dash, "width": 1}, hoverinfo="skip",
                    ),
                    row=1, col=col,
                )  # fmt: skip
        fig.update_xaxes(range=[math.log10(lo), math.log10(hi)])
        fig.update_yaxes(range=[math.log10(lo), math.log10(hi)])
    fig.update_xaxes(type="log", title_text="actual E (steps)")
    fig.update_yaxes(type="log")
    fig.update_yaxes(title_text="predicted E (steps)", row=1, col=1)
    fig.update_layout(
        height=480,
        margin={"l": 60, "r": 20, "t": 60, "b": 40},
        legend={"orientation": "h", "y": -0.18, "x": 0},
        title="Leave-one-seed-out forecast of the point of emergence",
    )
    return fig


#: The three formation events: column, legend name, marker, and the vertical offset of its marker
#: within the run's row (so that events at one step sit side by side instead of hiding each other).
EVENT_MARKERS = (
    ("t_prev", "previous-token head forms", "circle", -0.3),
    ("t_ind", "induction head forms", "diamond", 0.0),
    ("E", "capability (E)", "star", 0.3),
)


def formation_figure(order: pd.DataFrame) -> go.Figure:
    """The three events (steps) per seed: one row per run, each event's marker at its own offset
    within the row (:data:`EVENT_MARKERS`), so events at the same step never hide each other; an
    event that did not happen within the run (``inf``) has no marker."""
    fig = go.Figure()
    labels = [plot_text(r) for r in order["run"]]
    rows = np.arange(len(order), dtype=float)
    for column, name, symbol, offset in EVENT_MARKERS:
        values = order[column].to_numpy(float)
        shown = np.isfinite(values)
        fig.add_trace(
            go.Scatter(
                x=values[shown],
                y=rows[shown] + offset,
                mode="markers",
                name=name,
                marker={"symbol": symbol, "size": 8},
                text=[labels[i] for i in np.flatnonzero(shown)],
                hovertemplate="%{text}<br>" + plot_text(name) + " at step %{x}<extra></extra>",
            )
        )
    fig.update_xaxes(title_text="training step")
    fig.update_yaxes(
        tickmode="array", tickvals=rows.tolist(), ticktext=labels, range=[len(order) - 0.5, -0.5], showgrid=False
    )
    # 30 px a row: the three offsets (9 px apart) keep markers of one step apart
    fig.update_layout(height=max(320, 30 * len(order) + 120), title="When each event happens, per seed")
    return fig


def insight_findings(forecasts: dict, summary: pd.DataFrame) -> list[str]:
    """What the forecast and the formation order found, in words computed from their tables.

    Args:
        forecasts: horizon -> :class:`interp.population.forecast.ForecastResult`.
        summary: :func:`interp.population.formation.formation_summary` (one row per arm and
            ``all``).

    Returns:
        The horizons where the forecast's goal is met on every arm; one line per horizon (arms
        where the goal is met, not met with their ratio and interval, not scorable); one on the forecasts made at fixed steps (the arm × step cells where the
        model beats the baseline with its interval below 1), then the formation order over all
        runs, the count of induction-head candidates before E and how often the carrier formed
        first.
    """
    whole = [
        h
        for h, fc in forecasts.items()
        if (scored := fc.arms[fc.arms["n_scored"] > 0]).size and scored["goal_met"].all()
    ]
    lines = [
        f"The forecast's goal (an error at most half the arm-median baseline's on every arm that can be scored) is "
        f"met at {len(whole)} of {len(forecasts)} horizons" + (f" ({', '.join(map(str, whole))})." if whole else ".")
    ]
    for horizon, fc in forecasts.items():
        arms = fc.arms
        scored = arms[arms["n_scored"] > 0]
        met = scored[scored["goal_met"]]
        missed = scored[~scored["goal_met"]]
        text = (
            f"Forecast at horizon {horizon}: the error is at most half the arm-median baseline's on "
            f"{len(met)} of {len(scored)} arms that can be scored"
        )
        if len(met):
            text += (
                " ("
                + ", ".join(
                    f"{r.arm}: ratio {r.ratio:.2f}, 95 % CI {r.ratio_lo:.2f}–{r.ratio_hi:.2f}"
                    + ("" if r.goal_met_interval else ", the interval reaching above 0.5")
                    for r in met.itertuples()
                )
                + ")"
            )
        if len(missed):
            text += "; not on " + ", ".join(
                f"{r.arm} (ratio {r.ratio:.2f}, 95 % CI {r.ratio_lo:.2f}–{r.ratio_hi:.2f})" for r in missed.itertuples()
            )
        silent = arms[arms["n_scored"] == 0]["arm"].tolist()
        if silent:
            text += f"; {', '.join(silent)}: no run emerged, no error to score"
        if math.isfinite(getattr(fc, "concordance", math.nan)):
            never = int(arms["censored_predicted_never"].sum()) if "censored_predicted_never" in arms else 0
            censored = int(arms["n_censored"].sum()) if "n_censored" in arms else 0
            within = arms[arms["pairs"] > 0] if "pairs" in arms else arms.iloc[0:0]
            text += (
                f"; concordance (Harrell's C, censored runs included) {fc.concordance:.2f} against the baseline's "
                f"{fc.baseline_concordance:.2f}"
                + (
                    f", within arms {within['concordance'].min():.2f}–{within['concordance'].max():.2f}"
                    if len(within)
                    else ""
                )
                + (f"; {never} of {censored} censored runs predicted never to emerge by the budget" if censored else "")
            )
        lines.append(text + ".")
    fixed = {h: fc for h, fc in forecasts.items() if str(h) != "half"}
    cells = [(h, r) for h, fc in fixed.items() for r in fc.arms.itertuples() if r.n_scored > 0]
    if cells:
        better = [(h, r) for h, r in cells if r.ratio_hi == r.ratio_hi and r.ratio_hi < 1]
        where = ", ".join(f"{r.arm} at step {h}" for h, r in better)
        lines.append(
            f"Made in advance (fixed steps {', '.join(str(h) for h in fixed)}), the forecast beats the arm median with "
            f"its interval below 1 on {len(better)} of {len(cells)} arm × step cells"
            + (f" ({where})" if where else "")
            + (
                ": within an arm, where a seed's E falls is mostly not told by these head features ahead of time."
                if len(better) * 2 < len(cells)
                else "."
            )
        )
    if "all" in set(summary["arm"]):
        s = summary.set_index("arm").loc["all"]
        w = (
            "Kendall's W undetermined"
            if not math.isfinite(s["kendall_w"])
            else f"agreement across seeds Kendall's W {s['kendall_w']:.2f} (95 % CI {s['kendall_w_lo']:.2f}–{s['kendall_w_hi']:.2f})"
        )
        lines.append(
            f"Formation order over {int(s['runs'])} runs: previous-token head, then induction head, then the capability "
            f"strictly in {int(s['strict'])} ({fmt_pct(s['share_strict'])}, 95 % CI {fmt_pct(s['share_strict_lo'])}–"
            f"{fmt_pct(s['share_strict_hi'])}); with two events at one checkpoint allowed in {int(s['weak'])} "
            f"({fmt_pct(s['share_weak'])}, 95 % CI {fmt_pct(s['share_weak_lo'])}–{fmt_pct(s['share_weak_hi'])}); {w}."
        )
        candidates = (
            f"Induction-head candidates before E: median {s['median_ind_heads_before_E']:g} per run, at most "
            f"{int(s['max_ind_heads_before_E'])}; two or more in {int(s['multi_candidates'])} of {int(s['runs'])} runs."
        )
        if s["carrier_runs"] > 0:
            candidates += (
                f" The head that ends with the highest prefix-matching score formed first (or tied first) in "
                f"{int(s['carrier_first'])} of {int(s['carrier_runs'])} runs with two or more layer-1 heads where an induction head formed "
                f"({fmt_pct(s['share_carrier_first'])}, 95 % CI {fmt_pct(s['share_carrier_first_lo'])}–"
                f"{fmt_pct(s['share_carrier_first_hi'])})."
            )
        lines.append(candidates)
    return lines


def formation_table(summary: pd.DataFrame) -> pd.DataFrame:
    """The formation summary as the page shows it: one row per arm (and "all"), each count with its
    share and 95 % interval in one cell, so that the table fits a laptop's width.

    Args:
        summary: :func:`interp.population.formation.formation_summary` (the CSV keeps every column).

    Returns:
        Columns arm, "strict order", "order with ties", "Kendall's W" (each with "(95 % CI)"),
        "induction candidates before E", "final head formed first (95 % CI)"; strings ("k of n:
        share (lo–hi)"; "no contest" where no run has two layer-1 heads and one formed,
        "undetermined" where a value cannot be computed).
    """

    def share(k, n, p, lo, hi) -> str:
        pct = (fmt_pct(p), fmt_pct(lo), fmt_pct(hi))  # no break inside a share or its interval when it wraps
        return f"{int(k)} of {int(n)}: " + "\u00a0".join(f"{pct[0]} ({pct[1]}–\u2060{pct[2]})".split(" "))

    def kendall(r) -> str:
        if not math.isfinite(r.kendall_w):
            return "undetermined"
        return f"{r.kendall_w:.2f}\u00a0({r.kendall_w_lo:.2f}–\u2060{r.kendall_w_hi:.2f})"

    rows = [
        {
            "arm": r.arm,
            "strict order (95 % CI)": share(r.strict, r.runs, r.share_strict, r.share_strict_lo, r.share_strict_hi),
            "order with ties (95 % CI)": share(r.weak, r.runs, r.share_weak, r.share_weak_lo, r.share_weak_hi),
            "Kendall's W (95 % CI)": kendall(r),
            "induction candidates before E": f"median {r.median_ind_heads_before_E:g}, max "
            f"{int(r.max_ind_heads_before_E)}; ≥ 2 in {int(r.multi_candidates)} runs",
            "final head formed first (95 % CI)": "no contest"
            if r.carrier_runs == 0
            else share(
                r.carrier_first,
                r.carrier_runs,
                r.share_carrier_first,
                r.share_carrier_first_lo,
                r.share_carrier_first_hi,
            ),
        }
        for r in summary.itertuples()
    ]
    return pd.DataFrame(rows)


def insight_page(
    forecasts: dict,
    order: pd.DataFrame,
    summary: pd.DataFrame,
    caption: str,
    title: str = "Forecast and formation order over seeds",
) -> str:
    """``insight.html``: the findings in words (:func:`insight_findings`), then the forecast per
    horizon and the formation order; self-contained (plotly.js inlined once, no network), rendered
    from ``population/templates/insight.html.j2`` with autoescape on (names are data).

    Args:
        forecasts: horizon -> :class:`interp.population.forecast.ForecastResult`.
        order: :func:`interp.population.formation.formation_order`.
        summary: :func:`interp.population.formation.formation_summary`.
        caption: the formation section's caption.
        title: the page's title.
    """
    shown = formation_table(summary)
    forecast_lines = [f"horizon {h}: {line}" for h, fc in forecasts.items() for line in fc.lines()]
    return render(
        "population/templates/insight.html.j2",
        title=title,
        style=trusted(package_text("population/templates/style.css")),
        plotly=trusted(plotly_script()),  # plotly.js itself
        findings=insight_findings(forecasts, summary),
        forecast_figure=figure_html(forecast_figure({h: fc.predictions for h, fc in forecasts.items()})),
        forecast_lines=forecast_lines,
        formation_figure=figure_html(formation_figure(order)),
        summary_columns=list(shown.columns),
        summary_rows=shown.values.tolist(),
        formation_caption=caption,
    )
