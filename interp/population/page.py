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

from collections.abc import Callable, Sequence

import pandas as pd

from interp.core.templating import package_text, render, trusted
from interp.core.terms import rule_text
from interp.population.figures import heatmap_figure
from interp.population.findings import fmt_steps
from interp.population.result import figure_html, headline
from interp.population.statistics import POPULATION_STATISTICS, claim_results
from interp.report.display import Assets, plotly_script


def _context(result, include_plotlyjs: bool, statistics) -> dict:
    from interp.population.answer import answer_html

    runs = [
        r
        | {
            "E": fmt_steps(r["E"]) if r["emerged"] else f"censored at {r['budget']}",
            "pre_step": "—" if pd.isna(r["pre_step"]) else r["pre_step"],
            "post_step": "—" if pd.isna(r["post_step"]) else r["post_step"],
        }
        for r in result.runs.to_dict("records")
    ]
    shown = [s for s in (fn(result) for fn in statistics) if s is not None]
    claims = claim_results(result)
    return {
        "title": result.title,
        "findings": result.findings,
        # the verdict lines above the tables: the claims', then each shown statistic's headline
        "headline": headline([*claims, *shown]) if claims else [],
        "answer": trusted(answer_html(result.answer)),
        # plotly.js, script-safe; in a notebook set up by el.init_notebook() its one copy serves (Assets)
        "plotly": trusted(Assets().require("plotly")) if include_plotlyjs else "",
        "n_runs": len(result.runs),
        "n_arms": len(result.arms),
        "rule": rule_text(result.hold),
        "threshold": f"{result.threshold:g}",
        "hold": result.hold,
        "statistics": [trusted(s.to_html()) for s in shown],
        "heatmaps": [figure_html(heatmap_figure(result, arm)) for arm in result.arms["arm"]],
        "runs": runs,
    }


def population_fragment(result, include_plotlyjs: bool = True, statistics: Sequence[Callable] | None = None) -> str:
    """The page's content as one HTML fragment (a notebook output).

    Args:
        result: a :class:`interp.population.tables.PopulationResult`.
        include_plotlyjs: the fragment draws on its own (plotly.js inlined), unless the notebook
            already holds plotly.js (:func:`interp.report.notebook.init_notebook`: then no copy, as
            every other display).
        statistics: the statistics shown between the findings and the heatmaps, each
            ``(result) -> StatResult | None`` rendered by one loop (None: skipped); default
            :data:`interp.population.statistics.POPULATION_STATISTICS`. The findings open on the
            headline (:func:`interp.population.result.headline`): the claims'
            (:func:`interp.population.statistics.claim_results`), then each shown statistic's
            headline lines, under their leads.
    """
    chosen = POPULATION_STATISTICS if statistics is None else statistics
    return render("population/templates/body.html.j2", **_context(result, include_plotlyjs, chosen))


def population_page(result) -> str:
    """``population.html``: a self-contained page (plotly.js inlined once in ``<head>``, no network)."""
    return render(
        "population/templates/page.html.j2",
        title=result.title,
        style=trusted(package_text("population/templates/style.css")),
        plotly=trusted(plotly_script()),
        body=trusted(population_fragment(result, include_plotlyjs=False)),  # rendered with autoescape
    )
