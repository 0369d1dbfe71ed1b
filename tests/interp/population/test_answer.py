"""The answer on one screen (interp.population.answer, analyses.answer; issue 65, item 4)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from interp.population.answer import (
    ANSWER_COLUMNS,
    answer_html,
    answer_markdown,
    answer_row,
    answer_table,
    superseded,
    word_count,
)
from interp.population.judge import Verdict

ROOT = Path(__file__).resolve().parents[3]


def test_a_row_leaves_confounded_contrasts_out_of_the_verdict_and_lists_them_as_superseded():
    parts = [
        Verdict("contradicted", "robust", "NeoX 4 → 8 heads"),
        Verdict("confounded", "robust", "NeoX 2 → 4 heads", decide="arms differing in the compared factor alone (d_head 16 vs 32, rotary dims per head 4 vs 8 vary too)"),
        Verdict("not decidable", "robust null", "Phi 4 → 8 heads", decide="more seeds (HR ×0.55–1.77 still open)"),
    ]  # fmt: skip
    row, v = answer_row("Claim 4, heads", "more heads help", parts, "contrast")
    assert list(row) == ANSWER_COLUMNS
    assert (row["verdict"], row["robust"]) == ("contradicted in part", "robust")
    assert row["evidence"] == "NeoX 4 → 8 heads: contradicted; Phi 4 → 8 heads: not decidable"
    assert row["decide"] == "more seeds (HR ×0.55–1.77 still open)"
    assert superseded([v]) == ["Claim 4, heads: 1 confounded contrast (d_head, rotary dims per head vary too)"]


def test_the_markdown_and_the_html_carry_every_cell_as_data():
    hostile = "<script>window.__pwned = 1</script> | x"
    row, _ = answer_row("Claim 1, seed", "E depends on the seed", [Verdict("reproduced", "robust", hostile)])
    table = answer_table([row])
    md = answer_markdown(table, "**The answer**", ["a note"])
    assert "\\| x" in md and md.count("\n|") == 3 and md.endswith("- a note\n")
    html = answer_html(table)
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert word_count("| a | b c |\n| --- | --- |") == 3


@pytest.mark.slow
def test_docs_results_md_opens_on_the_answer_that_analyses_answer_builds_from_the_kept_data():
    """The block at the top of docs/results.md is what ``python -m analyses.answer --update-docs``
    writes from the kept curves and claim-2 runs, and it fits one screen (at most 300 words)."""
    from analyses.answer import MAX_WORDS, build, verdicts_by_population
    from interp.population.kept import PAIR_KEPT, read_kept_pairs

    text = (ROOT / "docs" / "results.md").read_text()
    assert text.index("<!-- answer:begin -->") < text.index("## ")  # it opens the page
    kept = re.search(r"<!-- answer:begin -->\n(.*?)<!-- answer:end -->", text, re.S).group(1)
    block, table, _ = build(verdicts_by_population(), read_kept_pairs(PAIR_KEPT)[0])
    assert kept == block
    assert word_count(block) <= MAX_WORDS
    assert list(table.columns) == ANSWER_COLUMNS and len(table) >= 5


def test_the_crossed_grids_give_one_row_judged_over_the_complete_ones_and_a_count_until_then(monkeypatch, tmp_path):
    """Claim 1's split (issue 72): the complete 8 × 8 grid kept in docs/data gives the row (its
    shares of log E's spread with intervals, the judge's word over the complete arms); a grid with
    3 of its 64 curves gives no part of it, only the count."""
    import shutil

    from analyses.answer import SPLIT_CLAIM, SPLIT_GRIDS, seed_split_rows
    from interp.population import kept

    partial = tmp_path / "partial"
    (partial / "curves").mkdir(parents=True)
    for path in sorted((kept.SEED_SPLIT_KEPT / "curves").glob("*.csv"))[:3]:
        shutil.copy(path, partial / "curves" / path.name)
    monkeypatch.setattr(kept, "SEED_SPLIT_128D_KEPT", partial)
    rows, notes = seed_split_rows()
    (_, arm), (_, other_arm) = SPLIT_GRIDS
    assert [r["claim"] for r in rows] == [SPLIT_CLAIM]
    assert re.fullmatch(
        rf"log E's spread: initialisation \d+ % \(\d+–\d+\); data order \d+ % \(\d+–\d+\) \({arm}\)",
        rows[0]["evidence"],
    )
    assert rows[0]["verdict"] in ("reproduced", "not decidable")
    assert notes == [f"{SPLIT_CLAIM} ({other_arm}, initialisation × data order): 3 of 64 runs trained, no verdict yet."]
