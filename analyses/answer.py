"""The answer on one screen: docs/results.md opens on one table of the paper's claims, each row's
verdict from the judge over every kept population (issue 65, item 4).

Reads the kept curves of every population (docs/data/population*, no training) and the kept
claim-2 runs at the largest-jump pair (docs/data/population-mechanism-pair); judges each claim
(:mod:`interp.population.judge`), reading every verdict from a statistic's result
(:class:`interp.population.result.StatResult`: :func:`interp.population.statistics.claim_results`,
:func:`~interp.population.statistics.claim2_pair_result`,
:func:`~interp.population.statistics.seed_split_result`); writes the table
(:mod:`interp.population.answer`) to ``--out`` (``answer.md``, ``answer.csv``) and, with
``--update-docs``, between ``answer:begin`` / ``answer:end`` at the top of docs/results.md.

Usage: ``python -m analyses.answer [--update-docs]`` (about a minute: the rule grid of every
contrast is read again).
"""

from __future__ import annotations

import argparse
import re
import time
from dataclasses import replace
from pathlib import Path

from interp.cli.options import description
from interp.core.terms import DEFAULT_HOLD, DEFAULT_THRESHOLD

ROOT = Path(__file__).resolve().parents[1]
NAME = "answer"
DOCS = ROOT / "docs" / "results.md"
BEGIN, END = "<!-- answer:begin -->", "<!-- answer:end -->"
#: The populations read, with the short name a table cell gives each.
POPULATIONS = {
    "population": "NeoX",
    "population-decoupled": "NeoX-r8",
    "population-heads-dhead": "Phi cross",
    "population-8h-long": "NeoX-8h long",
}
#: The most words the block may hold (issue 65: the answer fits one screen).
MAX_WORDS = 300


def verdicts_by_population(threshold: float = DEFAULT_THRESHOLD, hold: int = DEFAULT_HOLD) -> dict[str, list]:
    """Each kept population's claim verdicts: the verdicts of its claims' results
    (:func:`interp.population.statistics.claim_results`)."""
    from interp.core.settings import StudyConfig
    from interp.population.kept import SPECS, read_kept_curves
    from interp.population.statistics import claim_results
    from interp.population.tables import population_from_curves

    out = {}
    for spec in POPULATIONS:
        curves = read_kept_curves(SPECS[spec][0])
        if len(curves):
            result = population_from_curves(curves, StudyConfig(threshold=threshold, hold=hold), grid=False)
            out[spec] = [r.verdict for r in claim_results(result)]
    return out


def _named(found: dict[str, list], claim: str) -> list:
    """The verdict on ``claim`` (its label's start) from each population, labelled by the population."""
    return [
        replace(v, label=POPULATIONS[spec]) for spec, vs in found.items() for v in vs if v.label.split(" (")[0] == claim
    ]


def _parts(found: dict[str, list], claim: str) -> list:
    """The contrasts behind ``claim`` in every population, each labelled with its population."""
    out = []
    for spec, vs in found.items():
        for v in vs:
            if v.label.split(" (")[0] == claim:
                for p in v.parts or (v,):
                    inner = p.label.split(" (", 1)[1].rstrip(")") if p.label.startswith(claim + " (") else p.label
                    out.append(replace(p, label=f"{POPULATIONS[spec]} {inner}"))
    return out


def _claim_decide(found: dict[str, list], claim: str) -> str:
    """What the claim-level verdicts of ``claim`` add to their contrasts' (one-factor claims only)."""
    return "; ".join(
        v.decide
        for vs in found.values()
        for v in vs
        if v.label.split(" (")[0] == claim and v.parts and v.word != "confounded"
    )


def build(found: dict[str, list], pair_rows) -> tuple[str, object, list]:
    """(the Markdown block, the table, every verdict) from the populations' verdicts and the
    claim-2 rows at the largest-jump pair."""
    from interp.population.answer import answer_markdown, answer_row, answer_table, superseded
    from interp.population.verdicts import PAPER

    rows, verdicts = [], []
    for claim, parts, noun in (
        ("Claim 1, seed", _named(found, "Claim 1, seed"), "population"),
        ("Claim 1, never", _named(found, "Claim 1, never"), "population"),
        ("Claim 1, size", _parts(found, "Claim 1, size"), "contrast"),
        ("Claim 4, heads", _parts(found, "Claim 4, heads"), "contrast"),
        ("Claim 4, head size", _parts(found, "Claim 4, head size"), "contrast"),
    ):
        if parts:
            row, v = answer_row(claim, PAPER[claim], parts, noun, _claim_decide(found, claim))
            rows.append(row)
            verdicts.append(v)
    if pair_rows is not None and len(pair_rows):
        from interp.population.statistics import claim2_pair_result

        pair = claim2_pair_result(pair_rows).verdict.parts
        parts = [replace(v, label=v.label.split("(")[1].split(",")[0]) for v in pair]
        row, v = answer_row("Claim 2", PAPER["Claim 2"], parts, "arm")  # at the largest-jump pair
        seeds = pair_rows["run"].nunique()
        seeds_text = f"{seeds} seeds" if seeds >= 48 else f"{seeds} of 48 seeds so far"
        row["evidence"] = f"largest-jump pair, top-2 patterns ({seeds_text}): " + row["evidence"]
        rows.append(row)
        verdicts.append(v)
    split_rows, split_note = seed_split_rows()
    rows[1:1] = split_rows
    table = answer_table(rows)
    lead = "**The answer** (threshold 0.5, hold 2; verdicts by [the judge](population.md#the-judge); section 4):"
    gone = superseded(verdicts)
    varied = {re.search(r" \((.*) vary too\)$", g).group(1) for g in gone if re.search(r" \(.*vary too\)$", g)}
    if gone and len(varied) == 1 and all(g.endswith(" vary too)") for g in gone):  # said once
        gone = [re.sub(r" \(.*\)$", "", g) for g in gone]
        notes = [f"Superseded, no verdict ({varied.pop()} vary too): {'; '.join(gone)}."]
    else:
        notes = [f"Superseded (no verdict): {'; '.join(gone)}."] if gone else []
    notes += split_note
    notes.append("Claims 3, 5: [synthetic](results-synthetic.md), [architectures](results-architectures.md).")
    return answer_markdown(table, lead, notes), table, verdicts


#: The crossed initialisation × data-order grids of claim 1's split (issue 72), in answer order:
#: (kept folder's name in interp.population.kept, the arm's label in the answer).
SPLIT_GRIDS = (("SEED_SPLIT_KEPT", "NeoX-r8"), ("SEED_SPLIT_128D_KEPT", "NeoX-128d"))
#: The claim's label in the answer.
SPLIT_CLAIM = "Claim 1, which part of the seed"


def seed_split_rows() -> tuple[list[dict], list[str]]:
    """Claim 1's split of the seed (issue 72): one answer row judged over every crossed grid
    (:data:`SPLIT_GRIDS`) whose 8 × 8 runs are all kept, the judge's word combining the arms'
    (:func:`interp.population.answer.answer_row`), the evidence the shares of log E's spread with
    their 95 % intervals, arm by arm; for a grid still training, a note of how many of its runs
    are kept. No row while no grid is complete."""
    from dataclasses import replace

    from interp.population import kept
    from interp.population.answer import answer_row
    from interp.population.seed_split import components, judged
    from interp.population.statistics import seed_split_result
    from interp.population.verdicts import PAPER

    parts, splits, notes = [], [], []
    for folder, arm in SPLIT_GRIDS:
        curves = kept.read_kept_split_curves(getattr(kept, folder))
        n = curves["run"].nunique() if len(curves) else 0
        if n < 64:
            notes.append(f"{SPLIT_CLAIM} ({arm}, initialisation × data order): {n} of 64 runs trained, no verdict yet.")
            continue
        found = components(curves)
        parts.append(replace(seed_split_result(found["log_E"], judged(found)).verdict, label=arm))
        splits.append(found["log_E"])
    if not parts:
        return [], notes
    row, _ = answer_row(SPLIT_CLAIM, PAPER["Claim 1, seed"], parts, "arm")

    def shares(component: str) -> str:
        return ", ".join(
            f"{100 * a:.0f} % ({100 * lo:.0f}–{100 * hi:.0f})" for a, lo, hi in (x.share(component) for x in splits)
        )

    # the answer fits one screen: the rest of log E's spread is the interaction, as docs/results.md says
    row["evidence"] = (
        f"log E's spread: initialisation {shares('initialisation')}; data order {shares('data order')} "
        f"({', '.join(p.label for p in parts)})"
    )
    return [row], notes


def update_docs(block: str) -> None:
    """Replace docs/results.md's answer block (:func:`interp.population.kept.update_docs`), first
    adding the markers after the page's title where they are missing."""
    from interp.core.io import atomic_write_text
    from interp.population.kept import update_docs as replace_block

    text = DOCS.read_text()
    if BEGIN not in text:
        title, _, rest = text.partition("\n")
        atomic_write_text(DOCS, f"{title}\n\n{BEGIN}\n{END}\n{rest}")
    replace_block(block, (BEGIN, END))


def main(argv=None) -> None:
    from interp.core.io import atomic_to_csv, atomic_write_text
    from interp.population.answer import word_count

    parser = argparse.ArgumentParser(prog=f"python -m analyses.{NAME}", description=description(__doc__))
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "analyses" / NAME)
    parser.add_argument("--update-docs", action="store_true")
    args = parser.parse_args(argv)
    started = time.time()
    from interp.population.kept import PAIR_KEPT, read_kept_pairs

    pair_rows, _ = read_kept_pairs(PAIR_KEPT)
    block, table, _ = build(verdicts_by_population(), pair_rows)
    words = word_count(block)
    if words > MAX_WORDS:
        print(f"warning: the answer holds {words} words, more than {MAX_WORDS}")
    atomic_write_text(args.out / "answer.md", block)
    atomic_to_csv(table, args.out / "answer.csv")
    if args.update_docs:
        update_docs(block)
    print(block)
    print(f"{words} words; wrote {args.out} in {time.time() - started:.0f} s")


if __name__ == "__main__":
    main()
