"""The page of the forecast and the formation order (``insight.html``; issue 45, items 1-2).

Sections: the forecast's predicted against actual E per seed (log axes, one panel per horizon,
the diagonal and the factor-2 band), its per-arm error table; the three formation events per
seed; the formation summary. A Jinja2 template with autoescape on, as the population page
(:mod:`interp.population.page`): names are data; the only trusted HTML is plotly's.
"""

from __future__ import annotations

import math

import pandas as pd
import plotly.graph_objects as go
from jinja2 import Environment
from markupsafe import Markup

from interp.population.page import _figure
from interp.report.display import plotly_script
from interp.report.figures import plot_text

__all__ = ["forecast_figure", "formation_figure", "insight_page"]

_ENV = Environment(autoescape=True)
_PAGE = """\
<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{{ title }}</title>
<style>body{font-family:system-ui,sans-serif;max-width:1240px;margin:16px auto}
table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}</style>
{{ plotly }}</head><body><h1>{{ title }}</h1>
<section id="forecast"><h2>Forecast: predicted against actual E per seed</h2>{{ forecast_figure }}
<ul>{% for line in forecast_lines %}<li>{{ line }}</li>{% endfor %}</ul>
<p>Ridge regression of log2 E on head features up to the horizon, leave-one-seed-out; baseline: the arm's median E
of the other seeds. Dashed: the factor-2 band.</p></section>
<section id="formation"><h2>Formation order per seed</h2>{{ formation_figure }}
<table><thead><tr>{% for c in summary_columns %}<th>{{ c }}</th>{% endfor %}</tr></thead><tbody>
{% for row in summary_rows %}<tr>{% for v in row %}<td>{{ v }}</td>{% endfor %}</tr>{% endfor %}</tbody></table>
<p>{{ formation_caption }}</p></section></body></html>
"""


def forecast_figure(predictions: dict[str, pd.DataFrame]) -> go.Figure:
    """Predicted against actual E (steps, log axes), one trace per horizon x arm; emerged runs only."""
    fig = go.Figure()
    values = []
    for horizon, table in predictions.items():
        rows = table[table["emerged"] & table["predicted_E"].notna()]
        for arm, sub in rows.groupby("arm", sort=False):
            values += list(sub["E"]) + list(sub["predicted_E"])
            fig.add_trace(
                go.Scatter(
                    x=sub["E"],
                    y=sub["predicted_E"],
                    mode="markers",
                    name=plot_text(f"{arm}, horizon {horizon}"),
                    text=[plot_text(r) for r in sub["run"]],
                    hovertemplate="%{text}<br>E %{x:.0f}<br>predicted %{y:.0f}<extra></extra>",
                )
            )
    if values:
        lo, hi = min(values) / 1.5, max(values) * 1.5
        for factor, dash in ((1, "solid"), (2, "dash"), (0.5, "dash")):
            fig.add_trace(
                go.Scatter(
                    x=[lo, hi], y=[lo * factor, hi * factor], mode="lines", showlegend=False,
                    line={"color": "gray", "dash": dash, "width": 1}, hoverinfo="skip",
                )
            )  # fmt: skip
    fig.update_xaxes(type="log", title_text="actual E (steps)")
    fig.update_yaxes(type="log", title_text="predicted E (steps)")
    fig.update_layout(height=520, title="Leave-one-seed-out forecast of the point of emergence")
    return fig


def formation_figure(order: pd.DataFrame) -> go.Figure:
    """The three events (steps) per seed: one row per run; never = not drawn."""
    fig = go.Figure()
    labels = [plot_text(r) for r in order["run"]]
    for column, name, symbol in (
        ("t_prev", "previous-token head forms", "circle"),
        ("t_ind", "induction head forms", "diamond"),
        ("E", "capability (E)", "star"),
    ):
        x = [v if math.isfinite(v) else None for v in order[column]]
        fig.add_trace(go.Scatter(x=x, y=labels, mode="markers", name=name, marker={"symbol": symbol, "size": 10}))
    fig.update_xaxes(title_text="training step")
    fig.update_layout(height=max(320, 22 * len(order) + 120), title="When each event happens, per seed")
    return fig


def insight_page(
    predictions: dict[str, pd.DataFrame],
    forecast_lines: list[str],
    order: pd.DataFrame,
    summary: pd.DataFrame,
    caption: str,
    title: str = "Forecast and formation order over seeds",
) -> str:
    """``insight.html``: self-contained (plotly.js inlined once, no network)."""
    shown = summary.round(3)
    return _ENV.from_string(_PAGE).render(
        title=title,
        plotly=Markup(plotly_script()),  # trusted: plotly.js itself
        forecast_figure=_figure(forecast_figure(predictions)),
        forecast_lines=forecast_lines,
        formation_figure=_figure(formation_figure(order)),
        summary_columns=list(shown.columns),
        summary_rows=shown.astype(str).values.tolist(),
        formation_caption=caption,
    )
