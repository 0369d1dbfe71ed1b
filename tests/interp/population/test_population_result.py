"""One result type for every population statistic (issue 70, item 2): :class:`StatResult`, the
page's statistics rendered by one loop, and a new statistic as one function."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from interp.core.settings import StudyConfig
from interp.population.judge import Verdict, judge_components
from interp.population.page import population_fragment
from interp.population.result import StatResult
from interp.population.statistics import (
    POPULATION_STATISTICS,
    claim2_pair_result,
    logrank_result,
    p_cell,
    seed_split_result,
)
from interp.population.tables import population_from_curves
from tests.interp.population.test_population import hand_table

HOSTILE = "<img src=x onerror=window.__pwned=1>"


@pytest.fixture
def hand():
    return population_from_curves(hand_table(), StudyConfig(threshold=0.5, hold=1))


def _sections(html: str) -> list[str]:
    return re.findall(r'<section id="([^"]+)">', html)


def test_a_new_statistic_is_one_function_and_the_page_shows_it(hand):
    """A toy statistic (the share of runs emerged per arm, judged by nothing but a hand-made
    verdict) passed to the page becomes a section after the others, with its table, its verdict
    and its caption; every arm and run name escaped."""

    def emerged_share(result) -> StatResult:
        table = result.runs.groupby("arm", sort=False)["emerged"].mean().rename("share").reset_index()
        verdict = Verdict("not decidable", "robust null", f"toy {HOSTILE}", reason="two arms of four")
        return StatResult("toy", "Share emerged per arm", table, verdict=verdict, caption=f"by hand {HOSTILE}")

    html = population_fragment(hand, include_plotlyjs=False, statistics=[*POPULATION_STATISTICS, emerged_share])
    plain = population_fragment(hand, include_plotlyjs=False)
    assert _sections(html) == [*_sections(plain)[:-2], "toy", "heatmaps", "runs"]
    toy = html.split('<section id="toy">')[1].split("</section>")[0]
    shares = hand.runs.groupby("arm", sort=False)["emerged"].mean()
    assert [float(x) for x in re.findall(r"<td>([\d.]+)</td>", toy)] == shares.tolist() == [0.6, 1.0]
    assert "<th>arm</th><th>share</th>" in toy and "<td>A</td>" in toy and "<td>B</td>" in toy
    assert "toy &lt;img src=x onerror=window.__pwned=1&gt;: not decidable, robust null (two arms of four)" in toy
    assert HOSTILE not in html and "by hand &lt;img" in toy


def test_the_page_renders_every_statistic_by_one_loop(hand):
    """The default statistics in the page's order; a statistic with nothing to show (no claim 2
    rows) is left out; the log-rank section's p cells are the table's p-values as the docs write them."""
    html = population_fragment(hand, include_plotlyjs=False)
    assert _sections(html) == [
        "answer", "findings", "survival", "strip", "arms", "logrank", "cox", "contrasts", "robustness",
        "heatmaps", "runs",
    ]  # fmt: skip
    results = [fn(hand) for fn in POPULATION_STATISTICS]
    assert [r.name for r in results if r is not None] == _sections(html)[2:-2] and results[-1] is None
    section = html.split('<section id="logrank">')[1].split("</section>")[0]
    rows = re.findall(r"<tr><td>(.*?)</td></tr>", section, flags=re.S)
    cells = [row.split("</td><td>") for row in rows]
    assert [c[6] for c in cells] == [p_cell(p) for p in hand.tests["p"]]
    assert hand.tests["p"].notna().all() and len(cells) == len(hand.tests) == 2
    # the section's heading and caption, once
    assert section.count("<h2>Log-rank tests</h2>") == 1 and "each arm against A." in section


def test_stat_result_shows_itself_in_a_notebook_a_terminal_and_a_summary(hand, capsys):
    r = logrank_result(hand)
    assert r.summary is hand.tests and r.verdict is None
    assert repr(r) == "StatResult('logrank': Log-rank tests; 2 rows)"
    r.print_summary()
    out = capsys.readouterr().out
    assert out.startswith("Log-rank tests\n") and p_cell(hand.tests["p"].iloc[0]) in out
    assert r._repr_html_() == r.to_html() and r.to_html().startswith('<section id="logrank"><h2>')
    raw = StatResult("raw", "raw", pd.DataFrame({"x": [0.123456, float("nan")], "n": [1, 2]}))
    assert re.findall(r"<td>(.*?)</td>", raw.to_html()) == ["0.123", "1", "—", "2"]
    km = POPULATION_STATISTICS[0](hand)
    assert "<table" not in km.to_html() and km._repr_html_().count("* plotly.js v") == 1  # its figure draws alone


def test_bad_results_are_refused_in_one_line():
    with pytest.raises(
        ValueError, match=r"^StatResult name 'a b': must be letters, digits, '-' or '_' \(an HTML id\)$"
    ):
        StatResult("a b", "t", pd.DataFrame())
    with pytest.raises(ValueError, match=r"^StatResult 'x': table is list; expected a DataFrame$"):
        StatResult("x", "t", [])
    with pytest.raises(ValueError, match=r"^StatResult 'x': verdict is str; expected a Verdict$"):
        StatResult("x", "t", pd.DataFrame(), verdict="reproduced")


def test_claim_2_at_the_pair_carries_the_answer_tables_verdict():
    """The pair's result: its table is the per-arm count, its verdict the one the answer table's
    claim 2 row words (judge_claim over the per-arm verdicts), each arm a part."""
    from interp.population.answer import answer_row
    from interp.population.verdicts import PAPER
    from tests.interp.population.test_claim2_pair import _rows

    rows = _rows(dict.fromkeys(range(9), (0.2, 0.1, 0.3)) | {9: (0.53, 0.49, 0.56), 10: (5.0, -9.0, 9.0)}, noise=(10,))
    r = claim2_pair_result(rows)
    top = r.table.set_index(["metric", "component"]).loc[("p", "top-2 patterns")]
    assert (top["measurable"], top["above"], top["below"], top["straddle"]) == (10, 0, 9, 1)
    row, verdict = answer_row("Claim 2", PAPER["Claim 2"], list(r.verdict.parts), noun="arm")
    assert r.verdict == verdict and (r.verdict.word, r.verdict.robust) == ("contradicted", "robust")
    assert row["verdict"] == r.verdict.word and [p.label for p in r.verdict.parts] == ["Claim 2 (A, largest-jump pair)"]
    html = r.to_html()
    assert f"<li>{r.verdict.parts[0].text()}</li>".replace("'", "&#39;") in html and html.count("<li>") == 2


def test_the_seed_split_carries_the_judges_verdict():
    from interp.population.variance import variance_components
    from tests.interp.population.test_variance_components import _runs

    y = 5 + np.array([1, -1] * 4)[:, None] * 0.6 + np.zeros((8, 8)) + np.random.default_rng(0).normal(0, 0.05, (8, 8))
    vc = variance_components(_runs(y), "y", n_boot=200, n_perm=200)
    table = vc.table.set_index("component")
    verdict = judge_components(
        "Claim 1, seed", table.loc["initialisation", "p_perm"], table.loc["data order", "p_perm"]
    )
    r = seed_split_result(vc, verdict)
    assert r.table is vc.table and r.verdict.word == "reproduced" and r.verdict.side == "initialisation"
    assert r.caption == vc.sentence() + "." and "initialisation" in r.to_html()


def test_a_statistic_with_headline_lines_joins_the_headline(hand):
    """The page's headline is rendered from results: the claims' lines (one result per claim),
    then each shown statistic's headline lines under its own lead, escaped; a statistic without
    headline lines adds none."""
    from interp.population.result import headline
    from interp.population.statistics import CLAIMS_LEAD, claim_results

    claims = claim_results(hand)
    assert [line for r in claims for line in r.headline] == hand.claims and len(hand.claims) == 3
    assert headline([*claims, None, logrank_result(hand)]) == [(CLAIMS_LEAD, hand.claims)]

    def toy(result) -> StatResult:
        k = int(result.runs["emerged"].sum())
        return StatResult(
            "toy", "Toy", result.arms, headline=(f"Toy {HOSTILE}: {k} of {len(result.runs)} emerged",), lead="A toy:"
        )

    html = population_fragment(hand, include_plotlyjs=False, statistics=[*POPULATION_STATISTICS, toy])
    findings = html.split('<section id="findings">')[1].split("</section>")[0]
    line = "Toy &lt;img src=x onerror=window.__pwned=1&gt;: 7 of 9 emerged"
    assert int(hand.runs["emerged"].sum()) == 7 and len(hand.runs) == 9
    assert findings.index(hand.claims[-1][:40]) < findings.index('<p class="el-lead">A toy:</p>') < findings.index(line)
    assert findings.index(line) < findings.index("Per arm, per test, per fit:")
    plain = population_fragment(hand, include_plotlyjs=False)
    assert "A toy:" not in plain and findings.replace(
        f'<p class="el-lead">A toy:</p>\n<ul class="el-findings el-claims"><li>{line}</li></ul>', ""
    ).count("<li>") == plain.split('<section id="findings">')[1].split("</section>")[0].count("<li>")
    with pytest.raises(ValueError, match=r"^StatResult 'x': headline is 'a line'; expected a tuple of strings$"):
        StatResult("x", "t", pd.DataFrame(), headline="a line")
