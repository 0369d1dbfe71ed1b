"""Head count with the positional code fixed (issue 52, item 1a): is the population's "more heads
emerge later" a property of heads, or of the rotary dimensions each head keeps?

In the population (``interp/data/suites/population.yaml``, docs/results.md §4) the d_model-64
arms with 1, 2, 4 and 8 heads also halve d_head (64 … 8) and, under Pythia's 25 % rotary share,
the rotary dimensions per head (16, 8, 4, 2): three factors vary together. The decoupled
population (``interp/data/suites/population-decoupled.yaml``) keeps 8 rotary dimensions in every
head (d_head still varies: GPT-NeoX ties it to d_model / n_heads), with budgets stated before
training (4000 steps; 8000 for 8 heads), evaluated on 256 prompts per checkpoint.

Two readings, from the kept curves (``docs/data/population-decoupled/curves``, beside the
population's ``docs/data/population/curves``):

- **One factor: rotary dimensions per head.** At 1, 4 and 8 heads the decoupled arm and the
  population's arm differ only in the rotary dimensions per head (same n_heads, d_head, data,
  seeds and trainer; the prompts of the evaluation differ, 256 against 64). Both are censored at
  the population's budget (4000 steps) for the contrast (:func:`rotary_contrasts`), judged by
  :mod:`interp.population.judge` (the log-rank test stratified by seed, its direction the test's;
  robust, robust null or not robust over the rule grid, threshold 0.4/0.5/0.6 x hold 1/2/3).
- **Head count at fixed rotary dimensions.** The decoupled arms against each other: head count
  and d_head still vary together, so the judge calls that contrast confounded (with d_head).

Usage: ``python -m analyses.population_decoupled [--train] [--jobs N] [--update-docs]``
(``emergence results --only population_decoupled`` trains the missing runs first, arm by arm:
8 heads, then 4, 1, 2).
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pandas as pd

from interp.cli.options import description
from interp.core.terms import DEFAULT_HOLD as HOLD
from interp.core.terms import DEFAULT_THRESHOLD as THRESHOLD
from interp.population.kept import N_PROMPTS as POPULATION_PROMPTS
from interp.population.kept import POPULATION_KEPT, SPECS, keep_spec, read_kept_curves, update_docs
from interp.population.reading import at_budget, best_accuracy, median_text, p_text, summarise

ROOT = Path(__file__).resolve().parents[1]
NAME = "population_decoupled"
SPEC = "population-decoupled"
KEPT, N_PROMPTS = SPECS[SPEC]
#: The arms trained first: the one whose answer decides the artefact question (8 heads), then 4, 1, 2.
ARM_ORDER = "neox-2l-64d-8h-r8,neox-2l-64d-4h-r8,neox-2l-64d-1h-r8,neox-2l-64d-2h-r8"
#: (population arm, decoupled arm): same n_heads and d_head, rotary dimensions per head differ.
PAIRS = (
    ("neox-2l-64d-8h", "neox-2l-64d-8h-r8"),
    ("neox-2l-64d-4h", "neox-2l-64d-4h-r8"),
    ("neox-2l-64d-1h", "neox-2l-64d-1h-r8"),
)
COMMON_BUDGET = 4000

BEGIN, END = "<!-- population-decoupled:begin -->", "<!-- population-decoupled:end -->"
#: docs/results.md's headline line of the one-factor contrasts, right after the population's headline.
HEADLINE = "<!-- population-decoupled-headline:begin -->", "<!-- population-decoupled-headline:end -->"


def rotary_dims(arm: str, d_head: int) -> int:
    """Rotary dimensions per head of an arm: ``-r{R}`` in its name, else Pythia's 25 % of d_head."""
    match = re.search(r"-r(\d+)$", arm)
    return int(match.group(1)) if match else int(d_head * 0.25)


def rotary_contrasts(both: pd.DataFrame, pairs) -> list:
    """Each pair ``(population arm, decoupled arm)`` of ``pairs`` judged, the decoupled arm (8
    rotary dims per head) against the population's (:func:`interp.population.judged.judged`, both cut at
    :data:`COMMON_BUDGET` steps; the arms share their seeds, so the test is stratified by seed). The
    rotary dims per head are the one factor that differs; the hypothesis tested (``wanted``) is
    that more rotary dims per head emerge earlier (the population's head-count effect partly its
    positional code), so ``reproduced`` means the test finds them earlier.

    Returns:
        One :class:`interp.population.judged.Judged` per pair, labelled ``"neox-2l-64d-8h-r8 (8 rotary dims)
        against neox-2l-64d-8h (2)"``.
    """
    from interp.population.judged import judged

    out = []
    for a, b in pairs:
        d_head = int(both.loc[both["arm"] == a, "d_head"].iloc[0])
        ra, rb = rotary_dims(a, d_head), rotary_dims(b, d_head)
        label = f"{b} ({rb} rotary dims) against {a} ({ra})"
        out.append(
            judged(
                both,
                b,
                a,
                label,
                wanted=+1 if rb > ra else -1,
                budget=COMMON_BUDGET,
                threshold=THRESHOLD,
                hold=HOLD,
            )
        )
    return out


def headline_line(dec: pd.DataFrame, popc: pd.DataFrame, n_seeds: int) -> str | None:
    """docs/results.md's headline line for the one-factor contrasts (rotary dimensions per head),
    computed from the kept curves: for each pair of :data:`PAIRS` whose decoupled arm holds all
    ``n_seeds`` seeds, both arms cut at :data:`COMMON_BUDGET` steps, the judge's line
    (:func:`rotary_contrasts`, :func:`interp.population.judged.contrast_line`: emerged counts, Kaplan–Meier
    medians, the judge's word and robustness over the rule grid), then each run's best accuracy (no
    rule: Mann–Whitney U). ``None`` while no decoupled arm of a pair is complete.

    Then in how many pairs the test finds more rotary dimensions per head earlier (the judge's
    side, never a median) and how many of those are robust. The closing reading is the pair of the
    population's largest head count (8: one rotary frequency per head), once that pair is in:
    where the judge says ``reproduced`` (more rotary dims earlier), part of the 8-head cliff is the
    positional code's; otherwise the line gives the judge's word and says the contrast does not
    show it."""
    if not len(dec) or not len(popc):
        return None
    both = pd.concat([at_budget(popc, COMMON_BUDGET), at_budget(dec, COMMON_BUDGET)], ignore_index=True)
    complete = {arm for arm, runs in dec.groupby("arm")["run"].nunique().items() if runs >= n_seeds}
    pairs = [(a, b) for a, b in PAIRS if b in complete and a in set(popc["arm"])]
    if not pairs:
        return None
    from interp.population.judged import contrast_line

    most = max(int(popc.loc[popc["arm"] == a, "n_heads"].iloc[0]) for a, _ in PAIRS if a in set(popc["arm"]))
    parts, cliff, faster, firm = [], None, 0, 0
    for (a, b), j in zip(pairs, rotary_contrasts(both, pairs)):
        best = best_accuracy(both, a, b)
        first = both[both["arm"] == a].iloc[0]
        n_heads, d_head = int(first["n_heads"]), int(first["d_head"])
        ra, rb = rotary_dims(a, d_head), rotary_dims(b, d_head)
        v = j.verdict
        more_first = v.side == ("earlier" if rb > ra else "later")
        faster += more_first
        firm += more_first and v.robust == "robust"
        parts.append(
            f"{n_heads} head{'s' if n_heads > 1 else ''} (d_head {d_head}): {contrast_line(j)}; best accuracy median "
            f"{best['med_b']:.2f} against {best['med_a']:.2f}, {best['above']} of {best['n_b']} runs above every run "
            f"with {ra} (Mann–Whitney p {p_text(best['p'])}, no rule)"
        )
        if n_heads == most:
            cliff = (
                f"part of the population's {n_heads}-head cliff is its positional code ({ra} rotary dims per head: "
                f'{ra // 2} rotation frequenc{"y" if ra // 2 == 1 else "ies"}), so that arm\'s "never" does not '
                "measure the head count alone"
                if v.word == "reproduced"
                else f"the judge's word on this pair is {v.word}, so it does not show the population's {n_heads}-head "
                "arm held back by its positional code"
            )
    head = (
        "- **Rotary dimensions per head, one factor** (the decoupled arms against the population's: same n_heads, "
        f"d_head, seeds and data, both cut at {COMMON_BUDGET} steps; evaluation prompts {N_PROMPTS} against "
        f"{POPULATION_PROMPTS}; the hypothesis tested: more rotary dims per head emerge earlier; words and robustness "
        "over the rule grid the judge's): "
    )
    overall = (
        f"The test finds more rotary dimensions per head earlier in {faster} of {len(pairs)} "
        f"pair{'s' if len(pairs) > 1 else ''} at threshold {THRESHOLD}, hold {HOLD}; {firm} of them robust "
        "over the rule grid"
    )
    return head + "; ".join(parts) + f". {overall}" + (f". Reading: {cliff}." if cliff else ".")


def docs_block(dec: pd.DataFrame, popc: pd.DataFrame, n_planned: int) -> str:
    """docs/results.md's block of the decoupled population, computed from the kept curves."""
    from interp.core.settings import StudyConfig
    from interp.population.tables import population_from_curves

    n_runs = dec["run"].nunique() if len(dec) else 0
    lines = [
        (
            f"Runs evaluated: {n_runs} of the spec's {n_planned} "
            f"({'all' if n_runs == n_planned else 'the rest not trained yet'}; {N_PROMPTS} prompts per checkpoint; "
            f"point of emergence at accuracy {THRESHOLD} held {HOLD})."
        ),
        "",
    ]
    if n_runs:
        result = population_from_curves(dec, StudyConfig(threshold=THRESHOLD, hold=HOLD))
        lines += [
            (
                "| arm | n_heads | d_head | rotary dims per head | budget | runs | emerged | median E (95 % CI), steps "
                "| also varies with n_heads |"
            ),
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for row in result.arms.itertuples():
            lines.append(
                f"| {row.arm} | {row.n_heads} | {row.d_head} | {rotary_dims(row.arm, row.d_head)} | {row.budget} | "
                f"{row.n_runs} | {row.n_emerged} | {median_text(row)} | d_head |"
            )
        lines.append("")
    both = pd.concat([at_budget(popc, COMMON_BUDGET), at_budget(dec, COMMON_BUDGET)], ignore_index=True)
    pairs = [(a, b) for a, b in PAIRS if a in set(both["arm"]) and b in set(both["arm"])]
    if pairs:
        from interp.population.judged import contrast_line

        lines.append(
            f"One factor, the rotary dimensions per head (same n_heads, d_head, seeds and data; both censored at "
            f"{COMMON_BUDGET} steps; evaluation prompts {N_PROMPTS} against {POPULATION_PROMPTS}, in the order of each "
            f"line; at threshold {THRESHOLD}, hold {HOLD}; the word and robustness over the rule grid are the "
            "judge's, interp.population.judge, for the hypothesis that more rotary dims per head emerge earlier):"
        )
        lines.append("")
        lines += [f"- {contrast_line(j)}." for j in rotary_contrasts(both, pairs)]
        lines.append("")
        lines.append(
            f"Without the rule (no threshold, no hold): each run's best greedy accuracy over its checkpoints up to "
            f"{COMMON_BUDGET} steps, and a two-sided Mann–Whitney U test of the two arms' best accuracies (the "
            f"64-prompt arm's maximum is the noisier one, which favours it):"
        )
        lines.append("")
        for a, b in pairs:
            best = best_accuracy(both, a, b)
            lines.append(
                f"- {b} against {a}: best accuracy {best['lo_b']:.2f}–{best['hi_b']:.2f} (median {best['med_b']:.2f}, "
                f"{best['n_b']} runs) against {best['lo_a']:.2f}–{best['hi_a']:.2f} (median {best['med_a']:.2f}, "
                f"{best['n_a']} runs); {best['above']} of {best['n_b']} runs above every run of {a}; Mann–Whitney "
                f"p {p_text(best['p'])}."
            )
        lines.append("")
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    from interp.sources.catalogue import load_suite_spec

    parser = argparse.ArgumentParser(prog="python -m analyses.population_decoupled", description=description(__doc__))
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "analyses" / NAME)
    parser.add_argument("--jobs", type=int, default=None, help="training worker processes (default: the CPU count)")
    parser.add_argument("--sweep-dir", type=Path, default=None, help="(ignored: the runs live in the suite's cache)")
    parser.add_argument("--finished-only", action="store_true", help="the kept curves only; train nothing")
    parser.add_argument("--update-docs", action="store_true", help="rewrite docs/results.md's decoupled block")
    args = parser.parse_args(argv)
    if not args.finished_only:
        _, curves = keep_spec(SPEC, args.jobs, arms=tuple(ARM_ORDER.split(",")))
        if len(curves):
            summarise(curves, args.out / "arms")
    dec, popc = read_kept_curves(KEPT), read_kept_curves(POPULATION_KEPT)
    block = docs_block(dec, popc, len(load_suite_spec(SPEC).run_names()))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{NAME}.md").write_text(block)
    print(block)
    if args.update_docs:
        update_docs(block, (BEGIN, END))
        line = headline_line(dec, popc, len(load_suite_spec(SPEC).seeds))
        update_docs(
            (
                line
                or f"- The one-factor contrast of the rotary dimensions per head joins here once a decoupled arm is "
                f"complete ({NAME})."
            )
            + "\n",
            HEADLINE,
        )


if __name__ == "__main__":
    main()
