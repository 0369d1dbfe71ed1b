"""The answer on one screen: one table, claim | the paper | our best one-factor evidence | verdict |
robust? | what would decide it, every cell from the judge (:mod:`interp.population.judge`).

One row per claim. A row's verdict combines the verdicts that speak to the claim (one per
population or arm, :func:`interp.population.judge.judge_claim`), leaving out the confounded ones
where one-factor evidence exists; the confounded verdicts are listed below the table as
superseded (:func:`superseded`), never as verdicts. The same table opens docs/results.md
(``python -m analyses.answer --update-docs``), the population page and
``PopulationResult._repr_html_`` (:func:`population_answer`).
"""

from __future__ import annotations

import re

import pandas as pd

from interp.population.judge import Verdict, judge_claim

__all__ = [
    "ANSWER_COLUMNS",
    "answer_html",
    "answer_markdown",
    "answer_row",
    "answer_table",
    "population_answer",
    "superseded",
    "word_count",
]

#: Columns of the answer table, in order.
ANSWER_COLUMNS = ["claim", "paper", "evidence", "verdict", "robust", "decide"]
#: Column headings as the page and the docs show them.
HEADINGS = {
    "claim": "claim",
    "paper": "the paper",
    "evidence": "our best one-factor evidence",
    "verdict": "verdict",
    "robust": "robust?",
    "decide": "what would decide it",
}


def _evidence(v: Verdict) -> str:
    if not v.parts:
        return v.label
    return "; ".join(f"{p.label}: {p.word}" for p in v.parts if p.word != "confounded") or "; ".join(
        f"{p.label}: {p.word}" for p in v.parts
    )


def answer_row(
    claim: str, paper: str, parts: list[Verdict], noun: str = "population", also_decide: str = ""
) -> tuple[dict, Verdict]:
    """One claim's row: the verdicts that speak to it judged together.

    Args:
        claim: the claim's short name (``"Claim 1, seed"``).
        paper: the paper's statement in a few words.
        parts: one verdict per population or arm that speaks to the claim (a part's label names
            where it comes from).
        noun: what a part is, for the combined verdict's reason.
        also_decide: what else would decide the claim beyond its parts (e.g. the head-size claim's
            "more than two head sizes").

    Returns:
        ``(row, verdict)``: the row (:data:`ANSWER_COLUMNS`) and the combined :class:`Verdict`.

    Raises:
        ValueError: no parts.
    """
    v = judge_claim(claim, parts, noun=noun)
    decide = "; ".join(dict.fromkeys(x for p in parts if p.word != "confounded" for x in [p.decide] if x)) or (
        v.decide if v.word == "confounded" else ""
    )
    if also_decide:
        decide = "; ".join(dict.fromkeys(x for x in (*decide.split("; "), *also_decide.split("; ")) if x))
    row = {
        "claim": claim,
        "paper": paper,
        "evidence": _evidence(v),
        "verdict": v.word,
        "robust": v.robust or "—",
        "decide": decide or "—",
    }
    return row, v


def answer_table(rows: list[dict]) -> pd.DataFrame:
    """The rows as one table (:data:`ANSWER_COLUMNS`)."""
    return pd.DataFrame(rows, columns=ANSWER_COLUMNS)


def superseded(verdicts: list[Verdict]) -> list[str]:
    """One line per claim with confounded contrasts: which, and what else varied in them (listed
    below the table, never as a verdict)."""
    out = []
    for v in verdicts:
        bad = [p for p in (v.parts or (v,)) if p.word == "confounded"]
        if bad:
            varied = sorted({re.sub(r"[\d\s]+vs[\d\s]+", "", x).strip() for p in bad for x in _varied(p)})
            out.append(
                f"{v.label}: {len(bad)} confounded contrast{'s' if len(bad) != 1 else ''} ({', '.join(varied)} vary too)"
            )
    return out


def _varied(p: Verdict) -> list[str]:
    """The factors a confounded verdict's decide text names (``"d_head 32 vs 16, rotary dims ..."``)."""
    inner = p.decide.split("(", 1)[-1].rstrip(")").replace(" vary too", "")
    return [x.strip() for x in inner.split(",") if x.strip()]


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def answer_markdown(table: pd.DataFrame, lead: str, notes: list[str] = ()) -> str:
    """The answer as Markdown: ``lead`` (a sentence or two), the table, then ``notes`` as bullets."""
    lines = [lead, "", "| " + " | ".join(HEADINGS[c] for c in ANSWER_COLUMNS) + " |"]
    lines.append("|" + " --- |" * len(ANSWER_COLUMNS))
    for row in table.itertuples(index=False):
        lines.append("| " + " | ".join(_cell(getattr(row, c)) for c in ANSWER_COLUMNS) + " |")
    if notes:
        lines += [""] + [f"- {n}" for n in notes]
    return "\n".join(lines) + "\n"


def word_count(text: str) -> int:
    """Words in ``text`` as a reader counts them: runs of characters between spaces and table
    bars, not counting Markdown's table rules."""
    return len([w for w in text.replace("|", " ").split() if w.strip("-") and w != "---"])


def answer_html(table: pd.DataFrame) -> str:
    """The answer table as an HTML fragment (autoescaped: labels are data, never markup)."""
    from interp.core.templating import render

    return render(
        "population/templates/answer.html.j2",
        heads=[HEADINGS[c] for c in ANSWER_COLUMNS],
        rows=[[str(x) for x in r] for r in table[ANSWER_COLUMNS].itertuples(index=False)],
    )


def population_answer(result) -> pd.DataFrame:
    """The answer table of one population (:class:`interp.population.tables.PopulationResult`):
    a row per claim its results speak to (the verdicts of
    :func:`interp.population.statistics.claim_results`), and claim 2 at the largest-jump pair
    where its rows are attached (``result.pair_rows``: the parts of
    :func:`interp.population.statistics.claim2_pair_result`'s verdict)."""
    from interp.population.statistics import claim2_pair_result, claim_results
    from interp.population.verdicts import PAPER

    rows = []
    for found in claim_results(result):
        v = found.verdict
        base = v.label.split(" (")[0]
        parts = list(v.parts) if v.parts else [v]
        extra = v.decide if v.parts and v.word != "confounded" else ""
        row, _ = answer_row(base, PAPER.get(base, ""), parts, "contrast" if v.parts else "population", extra)
        if not v.parts:
            row["evidence"] = v.reason
        rows.append(row)
    pair_rows = getattr(result, "pair_rows", None)
    if pair_rows is not None and len(pair_rows):
        parts = list(claim2_pair_result(pair_rows).verdict.parts)
        row, _ = answer_row("Claim 2", PAPER["Claim 2"], parts, noun="arm")
        rows.append(row)
    return answer_table(rows)
