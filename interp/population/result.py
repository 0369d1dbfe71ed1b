"""One result type for every population statistic: :class:`StatResult`.

A statistic of a population of seeds (Kaplan-Meier, the arm table, log-rank, Cox, the per-pair
contrasts, the rule grid, claim 2, a forecast, the seed decomposition) is returned as one frozen
object: its table of numbers (:attr:`StatResult.table`, what a caller computes with), the judge's
verdict where the judge has one (:attr:`StatResult.verdict`, a
:class:`interp.population.judge.Verdict`; words are never typed here), the table as a reader sees
it (:attr:`StatResult.cells`: intervals and p-values as text, columns headed in words), a figure,
and a caption saying how it was computed; where it answers one of the paper's claims, its lines
in the headline (:attr:`StatResult.headline`, the verdict in words, under :attr:`StatResult.lead`).
It renders itself: :meth:`StatResult.to_html` (one ``<section>``, Jinja2 with autoescape on),
``_repr_html_`` (a notebook), ``repr`` and :meth:`StatResult.print_summary` (a terminal). The
population page renders its statistics by one loop over such results
(:data:`interp.population.statistics.POPULATION_STATISTICS`) and its headline from the same results
(:func:`headline`), so a new statistic is one function ``(PopulationResult) -> StatResult | None``
and its test.

The model is lifelines' ``StatisticalResult`` (``summary``, ``print_summary``, ``to_html``,
``_repr_html_``): one shape whatever the test, so a new test plugs into every view.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd
import plotly.graph_objects as go
from markupsafe import Markup

from interp.population.judge import Verdict

__all__ = ["StatResult", "figure_html", "headline"]


def figure_html(fig: go.Figure) -> Markup:
    """A plotly figure as a ``<div class="el-figure">`` (plotly.js not included: a page holds it
    once; labels are escaped where the figure is built, :func:`interp.report.figures.plot_text`)."""
    import plotly.io as pio

    from interp.core.templating import trusted
    from interp.report.display import PLOTLY_CONFIG

    body = pio.to_html(
        fig, full_html=False, include_plotlyjs=False, include_mathjax=False, config=PLOTLY_CONFIG, default_width="100%"
    )
    return Markup('<div class="el-figure">{}</div>').format(trusted(body))  # plotly's own div


def _cell(value) -> str:
    """A number of a raw table as text: floats to 3 significant digits, NaN as ``—``."""
    if isinstance(value, float):
        return "—" if math.isnan(value) else f"{value:.3g}"
    return str(value)


@dataclass(frozen=True, eq=False, repr=False)
class StatResult:
    """One statistic of a population: its table, the judge's verdict, and how it is shown.

    Attributes:
        name: a short identifier (``"logrank"``), the section's HTML ``id``: letters, digits, ``-``, ``_``.
        title: the heading, in words.
        table: the statistic's numbers, one row per arm / test / fit / cell (units in the
            defining function's docstring); what :attr:`summary` returns.
        verdict: the judge's verdict on what the statistic speaks to
            (:class:`interp.population.judge.Verdict`, its ``parts`` the per-arm or per-contrast
            verdicts), or None where the judge has no claim to read from it.
        cells: the table as a reader sees it (every cell text, columns headed in words); None:
            :attr:`table` with floats to 3 significant digits; a frame with no columns: no table
            (the figure speaks).
        caption: how it was computed, with its sources (text; :class:`markupsafe.Markup` only for
            markup written in the code, never for data).
        figure: a plotly figure drawn above the table, or None.
        wrap: whether long cells wrap (the rule grid, claim 2's table).
        headline: the statistic's lines in the headline (the page's and the docs' verdict lines
            above the tables: the verdict in words, from the judge), in order; empty: not in the
            headline.
        lead: the sentence introducing :attr:`headline` (text; :class:`markupsafe.Markup` only for
            markup written in the code); results in a row with the same lead share one.

    Raises:
        ValueError: a bad ``name``, a ``table`` that is not a DataFrame or a ``headline`` that is
            not a tuple of strings (at construction).
    """

    name: str
    title: str
    table: pd.DataFrame
    verdict: Verdict | None = None
    cells: pd.DataFrame | None = None
    caption: str = ""
    figure: go.Figure | None = None
    wrap: bool = False
    headline: tuple[str, ...] = ()
    lead: str = ""

    def __post_init__(self) -> None:
        if not self.name or not self.name.replace("-", "").replace("_", "").isalnum():
            raise ValueError(f"StatResult name {self.name!r}: must be letters, digits, '-' or '_' (an HTML id)")
        if not isinstance(self.table, pd.DataFrame):
            raise ValueError(f"StatResult {self.name!r}: table is {type(self.table).__name__}; expected a DataFrame")
        if self.verdict is not None and not isinstance(self.verdict, Verdict):
            raise ValueError(f"StatResult {self.name!r}: verdict is {type(self.verdict).__name__}; expected a Verdict")
        if not isinstance(self.headline, tuple) or not all(isinstance(x, str) for x in self.headline):
            raise ValueError(f"StatResult {self.name!r}: headline is {self.headline!r}; expected a tuple of strings")

    @property
    def summary(self) -> pd.DataFrame:
        """The statistic's table of numbers (:attr:`table`), as lifelines' ``summary``."""
        return self.table

    def shown(self) -> pd.DataFrame:
        """The table as a reader sees it: :attr:`cells`, else :attr:`table` with every cell as text."""
        if self.cells is not None:
            return self.cells
        return self.table.map(_cell) if len(self.table.columns) else self.table

    def verdict_lines(self) -> list[str]:
        """The verdict in words, then each of its parts (``"<label>: <word>, <robust> (<reason>)"``); empty without one."""
        if self.verdict is None:
            return []
        return [self.verdict.text(), *(p.text() for p in self.verdict.parts)]

    def to_html(self) -> str:
        """One ``<section id="<name>">``: heading, figure, table, verdict, caption (Jinja2,
        autoescaped: arm and run names are data). plotly.js is not included (:meth:`_repr_html_` adds it)."""
        from interp.core.templating import render

        cells = self.shown()
        return render(
            "population/templates/result.html.j2",
            name=self.name,
            title=self.title,
            figure=figure_html(self.figure) if self.figure is not None else "",
            columns=[str(c) for c in cells.columns],
            rows=[[str(v) for v in row] for row in cells.itertuples(index=False)],
            table_class="el-table el-wrap" if self.wrap else "el-table",
            verdicts=self.verdict_lines(),
            caption=self.caption,
        )

    def _repr_html_(self) -> str:
        """Jupyter display: :meth:`to_html`, with plotly.js once where it holds a figure."""
        from interp.core.templating import trusted
        from interp.report.display import Assets

        plotly = Assets().require("plotly") if self.figure is not None else ""
        return str(trusted(plotly)) + self.to_html()

    def text(self) -> str:
        """The result as plain text: the title, the verdict lines, the table, the caption."""
        shown = self.shown()
        table = shown.to_string(index=False) if len(shown.columns) else ""
        parts = [self.title, *(f"  {line}" for line in self.verdict_lines()), table, self.caption]
        return "\n".join(str(p) for p in parts if p)

    def print_summary(self) -> None:
        """Print :meth:`text` (a terminal's view, as lifelines' ``print_summary``)."""
        print(self.text())

    def __repr__(self) -> str:
        verdict = (
            f"; {self.verdict.word}" + (f", {self.verdict.robust}" if self.verdict.robust else "")
            if self.verdict
            else ""
        )
        return f"StatResult({self.name!r}: {self.title}; {len(self.table)} rows{verdict})"


def headline(results) -> list[tuple[str, list[str]]]:
    """The headline of some statistics: each result's :attr:`StatResult.headline` lines, in order,
    grouped under their :attr:`StatResult.lead` (consecutive results with the same lead share one
    group); None entries and results without headline lines are skipped.

    Args:
        results: :class:`StatResult` objects (or None), in the headline's order.

    Returns:
        ``[(lead, lines), ...]``: what the population page renders as its verdict lines.

    Raises:
        ValueError: an entry that is neither a StatResult nor None (named).
    """
    groups: list[tuple[str, list[str]]] = []
    for r in results:
        if r is None:
            continue
        if not isinstance(r, StatResult):
            raise ValueError(f"headline entry {r!r}: expected a StatResult or None")
        if not r.headline:
            continue
        if groups and groups[-1][0] == r.lead:
            groups[-1][1].extend(r.headline)
        else:
            groups.append((r.lead, list(r.headline)))
    return groups
