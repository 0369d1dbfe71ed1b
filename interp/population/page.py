"""The population page (``population.html``): the findings in words, then the figures and tables.

Sections, in order: the findings (:func:`interp.population.findings.findings`); Kaplan-Meier
curves per arm (step functions with pointwise 95 % bands, a tick where a run was censored); the
point of emergence per seed as a strip plot per arm (censored runs marked at their budget; the
median with its 95 % interval beside each arm); the arm, log-rank and Cox tables, every estimate
with its interval; the findings over the grid of rules; where claim 2's per-run rows are attached
(:meth:`~interp.population.tables.PopulationResult.with_mechanism`), the share of the jump each
component recovers per width, a point per seed, with the per-width table; each arm's seed x step
heatmap of p(answer) with each run's ``E`` marked; the run table.

The page is a Jinja2 template with autoescape on (``interp/population/templates/``, rendered by the
toolkit's one environment, :mod:`interp.core.templating`): run names, arm names and titles are data,
never markup. The two pieces of trusted HTML it inlines are plotly.js
(:func:`interp.report.display.plotly_script`, once per page, in ``<head>``) and plotly's own
figure ``<div>``\\ s, whose labels are HTML-escaped first (:func:`interp.report.figures.plot_text`:
plotly reads its strings as a small HTML subset). The page opens offline.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio
from markupsafe import Markup

from interp.core.templating import package_text, render, trusted
from interp.core.terms import rule_text
from interp.population.findings import fmt_p, fmt_steps
from interp.report.display import PLOTLY_CONFIG, Assets, plotly_script
from interp.report.figures import plot_text

_PALETTE = pio.templates["plotly"].layout.colorway


def _figure(fig: go.Figure) -> Markup:
    """A plotly figure as a ``<div>`` (plotly.js not included: the page holds it once)."""
    body = pio.to_html(
        fig, full_html=False, include_plotlyjs=False, include_mathjax=False, config=PLOTLY_CONFIG, default_width="100%"
    )
    return Markup('<div class="el-figure">{}</div>').format(trusted(body))  # plotly's own div; labels: plot_text


def _rgba(colour: str, alpha: float) -> str:
    colour = colour.lstrip("#")
    r, g, b = (int(colour[i : i + 2], 16) for i in (0, 2, 4))
    return f"rgba({r},{g},{b},{alpha})"


def km_figure(result) -> go.Figure:
    """Kaplan-Meier curves per arm: survival (probability of not yet having emerged) vs step, as
    step functions with pointwise 95 % bands and a tick at each censored run's budget."""
    fig = go.Figure()
    for i, arm in enumerate(result.arms["arm"]):
        colour = _PALETTE[i % len(_PALETTE)]
        km = result.km[result.km["arm"] == arm]
        end = float(result.arms.loc[result.arms["arm"] == arm, "budget"].iloc[0])
        steps = [*km["step"].astype(float), max(end, float(km["step"].max()))]
        last = km.iloc[-1]
        surv, lo, hi = (
            [*km[c], last[c]] for c in ("survival", "survival_lo", "survival_hi")
        )  # the curve held to the budget
        name = plot_text(arm)
        band = {"mode": "lines", "line": {"width": 0, "shape": "hv"}, "showlegend": False, "hoverinfo": "skip"}
        fig.add_trace(go.Scatter(x=steps, y=hi, legendgroup=name, **band))  # the band: hi, then lo filled up to it
        fig.add_trace(
            go.Scatter(x=steps, y=lo, legendgroup=name, fill="tonexty", fillcolor=_rgba(colour, 0.15), **band)
        )
        fig.add_trace(
            go.Scatter(
                x=steps,
                y=surv,
                mode="lines",
                line={"shape": "hv", "color": colour, "width": 2},
                name=name,
                legendgroup=name,
                hovertemplate=f"{name}<br>step %{{x}}<br>not yet emerged %{{y:.3f}}<extra></extra>",
            )
        )
        censored = result.runs[(result.runs["arm"] == arm) & ~result.runs["emerged"]]
        if len(censored):
            at = censored["censored_at"].to_numpy(float)
            fig.add_trace(
                go.Scatter(
                    x=at,
                    y=[_survival_at(km, t) for t in at],
                    mode="markers",
                    marker={"symbol": "line-ns-open", "size": 14, "color": colour, "line": {"width": 2}},
                    name=f"{name}: censored",
                    legendgroup=name,
                    showlegend=False,  # one key for every arm's ticks, below
                    text=[plot_text(r) for r in censored["run"]],
                    hovertemplate="%{text}<br>censored at step %{x}<extra></extra>",
                )
            )
    if (~result.runs["emerged"]).any():  # the ticks' key, once, in grey: the tick's colour is its arm's
        fig.add_trace(
            go.Scatter(
                x=[None],
                y=[None],
                mode="markers",
                marker={"symbol": "line-ns-open", "size": 14, "color": "#666", "line": {"width": 2}},
                name="censored run (tick at its budget)",
                hoverinfo="skip",
            )
        )
    fig.update_layout(
        template="plotly_white",
        height=420,
        margin={"l": 60, "r": 20, "t": 30, "b": 50},
        xaxis_title="training step",
        yaxis={"title": "not yet emerged (probability)", "range": [-0.02, 1.04]},
        legend={"orientation": "h", "y": -0.2},
    )
    return fig


def _survival_at(km: pd.DataFrame, step: float) -> float:
    before = km[km["step"] <= step]
    return float(before["survival"].iloc[-1]) if len(before) else 1.0


def strip_figure(result) -> go.Figure:
    """E per seed, one column per arm (jittered by seed order); censored runs as open triangles
    at their budget; each arm's median E with its 95 % interval as a black diamond and bar."""
    fig = go.Figure()
    arms = list(result.arms["arm"])
    median_shown = False
    for i, arm in enumerate(arms):
        colour = _PALETTE[i % len(_PALETTE)]
        rows = result.runs[result.runs["arm"] == arm]
        jitter = np.linspace(-0.25, 0.25, len(rows)) if len(rows) > 1 else np.zeros(1)
        x = i + jitter
        for emerged, symbol, label in ((True, "circle", "E"), (False, "triangle-up-open", "censored at budget")):
            pick = (rows["emerged"] == emerged).to_numpy()
            if not pick.any():
                continue
            y = rows["E"] if emerged else rows["censored_at"]
            fig.add_trace(
                go.Scatter(
                    x=x[pick],
                    y=y.to_numpy(float)[pick],
                    mode="markers",
                    marker={"symbol": symbol, "size": 9, "color": colour, "line": {"width": 1.5, "color": colour}},
                    name=plot_text(f"{arm}: {label}"),
                    text=[plot_text(f"{r} (seed {s})") for r, s in zip(rows["run"][pick], rows["seed"][pick])],
                    hovertemplate="%{text}<br>%{y} steps<extra></extra>",
                )
            )
        arm_row = result.arms.iloc[i]
        if not math.isnan(arm_row["median_E"]):
            hi = arm_row["median_E_hi"] if math.isfinite(arm_row["median_E_hi"]) else arm_row["budget"]
            lo = arm_row["median_E_lo"]
            fig.add_trace(
                go.Scatter(
                    x=[i + 0.38],
                    y=[arm_row["median_E"]],
                    mode="markers",
                    marker={"symbol": "diamond", "size": 11, "color": "black"},
                    error_y={
                        "type": "data",
                        "symmetric": False,
                        "array": [hi - arm_row["median_E"]],
                        "arrayminus": [arm_row["median_E"] - lo],
                        "color": "black",
                    },
                    name="median E (95 % CI)",
                    legendgroup="median",
                    showlegend=not median_shown,
                    hovertemplate=plot_text(arm) + "<br>median %{y} steps<extra></extra>",
                )
            )
            median_shown = True
    fig.update_layout(
        template="plotly_white",
        height=420,
        margin={"l": 60, "r": 20, "t": 30, "b": 50},
        xaxis={
            "tickmode": "array",
            "tickvals": list(range(len(arms))),
            "ticktext": [plot_text(a) for a in arms],
            "range": [-0.6, len(arms) - 0.4],
        },
        yaxis_title="point of emergence E (steps)",
        legend={"orientation": "h", "y": -0.2},
    )
    return fig


def heatmap_figure(result, arm: str) -> go.Figure:
    """One arm's capability: greedy accuracy (the quantity E is read from) per seed (rows) and
    checkpoint step (columns), p(answer) in the hover, each run's E marked by a white diamond."""
    curves = result.curves[result.curves["arm"] == arm]
    runs = result.runs[result.runs["arm"] == arm]
    labels = {r: plot_text(f"{r} (seed {s})") for r, s in zip(runs["run"], runs["seed"])}
    grid = curves.pivot_table(index="run", columns="step", values="accuracy", aggfunc="first")
    grid = grid.reindex([r for r in runs["run"] if r in grid.index])
    p_answer = curves.pivot_table(index="run", columns="step", values="p_answer", aggfunc="first")
    p_answer = p_answer.reindex(index=grid.index, columns=grid.columns)
    steps = [int(s) for s in grid.columns]
    fig = go.Figure(
        go.Heatmap(
            z=grid.to_numpy(float),
            x=steps,
            y=[labels[r] for r in grid.index],
            zmin=0,
            zmax=1,
            colorscale="Viridis",
            colorbar={"title": "greedy<br>accuracy"},
            customdata=p_answer.to_numpy(float),
            hovertemplate="%{y}<br>step %{x}<br>greedy accuracy %{z:.3f}<br>p(answer) %{customdata:.3f}<extra></extra>",
        )
    )
    emerged = runs[runs["emerged"]]
    fig.add_trace(
        go.Scatter(
            x=emerged["E"].to_numpy(float),
            y=[labels[r] for r in emerged["run"]],
            mode="markers",
            marker={"symbol": "diamond", "size": 10, "color": "white", "line": {"width": 1, "color": "black"}},
            name="point of emergence E",
            hovertemplate="%{y}<br>E = step %{x}<extra></extra>",
            showlegend=True,
        )
    )
    fig.update_layout(
        template="plotly_white",
        title=plot_text(f"{arm}: greedy accuracy per seed and step"),
        height=max(240, 60 + 26 * len(grid)),
        margin={"l": 180, "r": 20, "t": 50, "b": 50},
        xaxis={"title": "training step"},
        legend={"orientation": "h", "y": 1.02, "x": 1, "xanchor": "right", "yanchor": "bottom"},
    )
    return fig


def population_rule(hold: int) -> str:
    """The point-of-emergence rule of a population in words: the project's rule
    (:func:`interp.core.terms.rule_text`) without its end-of-run clause, since a population
    censors a crossing with no room left to hold (:func:`interp.population.tables.held_post`)."""
    text = rule_text(hold)
    end = " (at every remaining one near the end of the run)"
    room = " (which must exist: a crossing with no room left to hold is none)" if hold else ""
    return text.replace(end, room) if end in text else text


def _p_cell(p: float) -> str:
    """A p-value for a table cell: ``0.0037``, ``< 0.001``, ``—``."""
    return "—" if math.isnan(p) else fmt_p(p).removeprefix("p = ").removeprefix("p ")


def _interval(value: float, lo: float, hi: float, fmt) -> str:
    return f"{fmt(value)} ({fmt(lo)}–{fmt(hi)})"


def _mechanism_context(rows: pd.DataFrame) -> dict:
    """Claim 2's figure and per-width table (:mod:`interp.population.mechanism`) for the page."""
    from interp.population.mechanism import claim_table
    from interp.population.mechanism import figure as mechanism_figure

    table = []
    for c in claim_table(rows).to_dict("records"):
        share = "—" if not c["measurable"] else _interval(c["top2_share"], c["top2_lo"], c["top2_hi"], "{:.2f}".format)
        width = f"{c['width']} steps" if c["width"].isdigit() else "±500 (wide)"
        table.append(c | {"width": width, "share": share, "noise_seeds": c["noise_seeds"] or "—"})
    return {"mechanism_figure": _figure(mechanism_figure(rows)), "mechanism_rows": table}


def _context(result, include_plotlyjs: bool) -> dict:
    pct = lambda x: f"{100 * x:.0f} %"  # noqa: E731
    arms = []
    for a in result.arms.to_dict("records"):
        if a["n_emerged"] == 0 or math.isnan(a["median_E"]):
            median = "not reached: " + ("no seed emerged" if a["n_emerged"] == 0 else "no more than half emerged")
        else:
            median = _interval(a["median_E"], a["median_E_lo"], a["median_E_hi"], fmt_steps)
        never = _interval(a["share_never_emerged"], a["share_never_lo"], a["share_never_hi"], pct)
        arms.append(a | {"median": median, "never": never})
    tests = [
        t
        | {
            "arms": t["arms"] if t["test"] == "global" else f"{t['arm']} vs {t['reference']}",
            "chi2": "—" if math.isnan(t["chi2"]) else f"{t['chi2']:.2f}",
            "p": _p_cell(t["p"]),
        }
        for t in result.tests.to_dict("records")
    ]
    cox = [
        c
        | {
            "hr": "—"
            if math.isnan(c["hr_per_doubling"])
            else f"×{c['hr_per_doubling']:.2f} ({c['hr_lo']:.2f}–{c['hr_hi']:.2f})",
            "p": _p_cell(c["p"]),
            "ph": _p_cell(c["ph_p"]),
            "lr": "—" if math.isnan(c["lr_p"]) else f"{_p_cell(c['lr_p'])} ({c['lr_df']} df)",
            "note": "; ".join(x for x in (c["note"], c["caveat"], c["lr_note"]) if isinstance(x, str) and x),
        }
        for c in result.cox.to_dict("records")
    ]
    contrasts = [
        c
        | {
            "hr": "—" if math.isnan(c["hr"]) else f"×{c['hr']:.2f} ({c['hr_lo']:.2f}–{c['hr_hi']:.2f})",
            "p": _p_cell(c["p"]),
            "logrank_p": _p_cell(c["logrank_p"]),
            "note": "; ".join(x for x in (c["note"], c["caveat"]) if isinstance(x, str) and x),
        }
        for c in result.contrasts.to_dict("records")
    ]
    from interp.population.answer import answer_html
    from interp.population.robust import wide

    grid = wide(result.grid) if len(result.grid) else None
    runs = [
        r
        | {
            "E": fmt_steps(r["E"]) if r["emerged"] else f"censored at {r['budget']}",
            "pre_step": "—" if pd.isna(r["pre_step"]) else r["pre_step"],
            "post_step": "—" if pd.isna(r["post_step"]) else r["post_step"],
        }
        for r in result.runs.to_dict("records")
    ]
    mechanism = _mechanism_context(result.mechanism) if result.mechanism is not None else {"mechanism_rows": []}
    return mechanism | {
        "title": result.title,
        "findings": result.findings,
        "claims": result.claims,
        "answer": trusted(answer_html(result.answer)),
        "mechanism_lines": result.mechanism_claims,
        # plotly.js, script-safe; in a notebook set up by el.init_notebook() its one copy serves (Assets)
        "plotly": trusted(Assets().require("plotly")) if include_plotlyjs else "",
        "n_runs": len(result.runs),
        "n_arms": len(result.arms),
        "rule": population_rule(result.hold),
        "threshold": f"{result.threshold:g}",
        "hold": result.hold,
        "reference": result.reference,
        "km_figure": _figure(km_figure(result)),
        "strip_figure": _figure(strip_figure(result)),
        "heatmaps": [_figure(heatmap_figure(result, arm)) for arm in result.arms["arm"]],
        "arms": arms,
        "tests": tests,
        "cox": cox,
        "contrasts": contrasts,
        "grid_columns": list(grid.columns) if grid is not None else [],
        "grid_rows": grid.values.tolist() if grid is not None else [],
        "runs": runs,
    }


def population_fragment(result, include_plotlyjs: bool = True) -> str:
    """The page's content as one HTML fragment (a notebook output). ``include_plotlyjs``: the
    fragment draws on its own (plotly.js inlined), unless the notebook already holds plotly.js
    (:func:`interp.report.notebook.init_notebook`: then no copy, as every other display)."""
    return render("population/templates/body.html.j2", **_context(result, include_plotlyjs))


def population_page(result) -> str:
    """``population.html``: a self-contained page (plotly.js inlined once in ``<head>``, no network)."""
    return render(
        "population/templates/page.html.j2",
        title=result.title,
        style=trusted(package_text("population/templates/style.css")),
        plotly=trusted(plotly_script()),
        body=trusted(population_fragment(result, include_plotlyjs=False)),  # rendered with autoescape
    )
