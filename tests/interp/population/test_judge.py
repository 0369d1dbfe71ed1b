"""The one judge (interp.population.judge): each verdict word from its decision table, on evidence
built by hand; the words on constructed populations are in tests/interp/population/test_contrast.py."""

from __future__ import annotations

import math

import pytest

from interp.population.judge import (
    CLAIM_WORDS,
    DECISION_TABLE,
    Cell,
    Evidence,
    FactEvidence,
    ShareEvidence,
    Verdict,
    judge,
    judge_claim,
    judge_fact,
    judge_share,
    robustness,
)

GRID = [(t, h) for t in (0.4, 0.5, 0.6) for h in (1, 2, 3)]


def cells(p: float, sign: int, broken: dict | None = None) -> tuple[Cell, ...]:
    """The same test in every cell of the grid, except those in ``broken`` (name -> (p, sign))."""
    broken = broken or {}
    out = []
    for t, h in GRID:
        q, s = broken.get(f"{t:g}/{h}", (p, sign))
        out.append(Cell(t, h, q, s))
    return tuple(out)


def test_a_significant_contrast_in_the_papers_direction_is_reproduced_and_robust():
    v = judge(Evidence("d_head 16 against 8", cells(1e-6, +1), hr=21.5, hr_lo=7.7, hr_hi=60.6))
    assert (v.word, v.robust, v.decide) == ("reproduced", "robust", "")
    assert "HR ×21.50 (95 % CI 7.70–60.60)" in v.reason and "p < 0.001" in v.reason


def test_a_significant_contrast_against_the_paper_is_contradicted():
    v = judge(Evidence("4 -> 8 heads", cells(1e-4, -1), wanted=+1))
    assert (v.word, v.robust) == ("contradicted", "robust")


def test_a_null_in_every_cell_is_not_decidable_and_a_robust_null_with_its_open_interval():
    # 8 heads against 4 at d_head 16: log-rank p 0.18-0.95 in all 9 cells (issue 65)
    ps = dict(zip([f"{t:g}/{h}" for t, h in GRID], [0.18, 0.3, 0.5, 0.6, 0.95, 0.7, 0.4, 0.8, 0.9]))
    ev = Evidence("8 heads against 4, d_head 16", cells(0.95, -1, {k: (p, -1) for k, p in ps.items()}),
                  hr=0.99, hr_lo=0.55, hr_hi=1.77)  # fmt: skip
    v = judge(ev)
    assert (v.word, v.robust) == ("not decidable", "robust null")
    assert v.decide == "more seeds (HR ×0.55–1.77 still open)"


def test_a_confounded_contrast_is_never_reproduced_or_contradicted_whatever_its_p():
    for sign in (+1, -1):
        v = judge(Evidence("8 heads of 8 against 4 of 16", cells(1e-9, sign), also_varies="d_head 16 vs 8"))
        assert (
            v.word == "confounded"
            and v.decide == "arms differing in the compared factor alone (d_head 16 vs 8 vary too)"
        )


def test_crossing_curves_with_proportional_hazards_rejected_give_no_hazard_ratio():
    ev = Evidence("8 heads against 4, d_head 8", cells(0.52, -1), hr=0.80, hr_lo=0.40, hr_hi=1.62, ph_p=0.012,
                  crossing="8 heads ahead until 5300 steps, behind after")  # fmt: skip
    v = judge(ev)
    assert v.word == "curves cross"
    assert "HR" not in v.reason and "ahead until 5300" in v.reason and "p = 0.012" in v.reason
    # proportional hazards rejected but the curves do not swap: the test still speaks
    assert judge(Evidence("x", cells(0.52, -1), ph_p=0.01)).word == "not decidable"


def test_a_ceiling_turns_a_null_into_ceiling_but_not_a_decisive_contrast():
    ceiling = "neox-2l-64d-8h: 20 of 24 runs level off at accuracy 0.25–0.47, below the threshold 0.5"
    assert judge(Evidence("forced vs plain", cells(0.2, +1), ceiling=ceiling)).word == "ceiling"
    v = judge(Evidence("d_head 16 vs 8", cells(1e-5, +1), ceiling=ceiling))
    assert v.word == "reproduced" and "level off" in v.reason


def test_robustness_names_the_cells_that_break_it():
    word, broken = robustness(cells(0.01, +1, {"0.4/1": (0.2, +1), "0.6/3": (0.01, -1)}))
    assert word == "not robust"
    assert (
        broken == "not significant at 0.4/1; earlier at 0.4/2, 0.4/3, 0.5/1, 0.5/2, 0.5/3, 0.6/1, 0.6/2; later at 0.6/3"
    )
    with pytest.raises(ValueError, match="no cell"):
        robustness(())


def test_decisive_contrasts_going_both_ways_are_non_monotone():
    # the rotary-fixed arms (issue 65): 1->2 earlier robust, 2->4 robust null, 4->8 later robust
    parts = [
        judge(Evidence("1 -> 2 heads", cells(1e-4, +1), hr=3.82, hr_lo=1.88, hr_hi=7.77)),
        judge(Evidence("2 -> 4 heads", cells(0.73, -1), hr=0.83, hr_lo=0.45, hr_hi=1.54)),
        judge(Evidence("4 -> 8 heads", cells(1e-6, -1), hr=0.02, hr_lo=0.0, hr_hi=0.10)),
    ]
    v = judge_claim("Claim 4, heads", parts)
    assert (v.word, v.robust) == ("non-monotone", "robust")
    assert v.reason == "3 one-factor contrasts: 1 reproduced, 1 not decidable, 1 contradicted"


@pytest.mark.parametrize(
    "words, expected",
    [
        (["reproduced", "reproduced"], "reproduced"),
        (["contradicted", "contradicted"], "contradicted"),
        (["reproduced", "not decidable"], "reproduced in part"),
        (["contradicted", "curves cross"], "contradicted in part"),
        (["curves cross", "not decidable"], "curves cross"),
        (["ceiling", "not decidable"], "ceiling"),
        (["not decidable", "not decidable"], "not decidable"),
        (["confounded", "confounded"], "confounded"),
        (["confounded", "reproduced"], "reproduced"),
    ],
)
def test_the_claim_combination_rules(words, expected):
    parts = [
        Verdict(w, "robust" if w in ("reproduced", "contradicted") else "robust null", f"c{i}")
        for i, w in enumerate(words)
    ]
    assert judge_claim("claim", parts).word == expected


def test_a_claim_whose_contrasts_are_all_confounded_says_so_and_nothing_else():
    # the population's arms: every head-count contrast also varies d_head (issue 65: was "contradicted")
    parts = [judge(Evidence(f"{a} -> {b} heads", cells(1e-4, -1), also_varies="d_head")) for a, b in ((2, 4), (4, 8))]
    v = judge_claim("Claim 4, heads (population)", parts)
    assert v.word == "confounded" and v.robust == ""


def test_shares_of_seeds_decide_claim_2_by_their_wilson_intervals():
    # 20 of 24 seeds firmly below half: the share below has its interval above one half
    v = judge_share(ShareEvidence("64d", above=1, below=20, n=24, above_point=3, below_point=19))
    assert (v.word, v.robust) == ("contradicted", "robust")
    v = judge_share(ShareEvidence("128d", above=7, below=5, n=16, above_point=8, below_point=6, noise="3 9"))
    assert v.word == "not decidable" and "seeds 3 9" in v.reason and v.decide
    v = judge_share(ShareEvidence("x", above=18, below=0, n=20, above_point=19, below_point=0))
    assert v.word == "reproduced"
    # the looser criterion flips it: not robust, and the reason says so
    v = judge_share(ShareEvidence("y", above=9, below=2, n=16, above_point=14, below_point=1))
    assert (v.word, v.robust) == ("not decidable", "not robust") and "point estimate alone: reproduced" in v.reason
    assert judge_share(ShareEvidence("z", 0, 0, 0, 0, 0)).word == "not decidable"


def test_a_fact_over_the_grid():
    holds = {f"{t:g}/{h}": t >= 0.5 for t, h in GRID}
    v = judge_fact(FactEvidence("Claim 1, seed", holds, detail="×1.5 or more in every arm"))
    assert (v.word, v.robust) == ("reproduced", "not robust")
    assert "holds at 0.5/1, 0.5/2, 0.5/3, 0.6/1, 0.6/2, 0.6/3 only" in v.reason
    with pytest.raises(ValueError, match=r"no cell '0\.7/2'"):
        judge_fact(FactEvidence("x", holds, operating="0.7/2"))


def test_only_the_tables_words_exist():
    assert set(CLAIM_WORDS) == set(DECISION_TABLE)
    with pytest.raises(ValueError, match="verdict word 'later'"):
        Verdict("later", "robust", "x")
    with pytest.raises(ValueError, match="robustness word 'NOT robust'"):
        Verdict("reproduced", "NOT robust", "x")
    with pytest.raises(ValueError, match="no cell at the operating point"):
        judge(Evidence("x", cells(0.1, 1), operating=(0.7, 2)))
    assert math.isnan(Evidence("x", ()).hr)


def test_docs_population_md_prints_the_decision_table_as_it_is():
    from pathlib import Path

    text = (Path(__file__).resolve().parents[3] / "docs" / "population.md").read_text()
    block = text.split("<!-- judge-table:begin -->")[1].split("<!-- judge-table:end -->")[0]
    rows = [line.split(" | ") for line in block.strip().splitlines()[2:]]
    assert {r[0].strip("| "): r[1].strip("| ") for r in rows} == DECISION_TABLE
    assert [r[0].strip("| ") for r in rows] == list(DECISION_TABLE)
