"""Head count against head size, one factor at a time (issue 52, item 1b): do more heads help, and
does a larger head help, when the other is held fixed?

The population's head arms (docs/results.md §4) and the decoupled arms tie d_head to
d_model / n_heads, so "more heads" there also means "smaller heads". ``population-heads-dhead``
(``interp/data/suites/population-heads-dhead.yaml``) crosses {4, 8 heads} with {d_head 8, 16} at
d_model 64, 2 layers, 8 rotary dimensions per head in every arm, built as Phi (its config takes
``head_dim``; GPT-NeoX ties the head size to d_model / n_heads). Budgets stated before training:
8000 steps, 4000 for the 4-head d_head-16 arm (the reference, as the population's 4-head arm);
256 prompts per checkpoint.

The contrasts (:data:`PAIRS`), each between two arms cut at the smaller of their budgets:

- **the head count alone**: 8 heads against 4 at d_head 16 and at d_head 8;
- **the head size alone**: d_head 16 against 8 at 4 heads and at 8 heads;
- **both at once** (the population's contrast, called confounded): 8 heads of 8 dims against 4 of 16.

Each: emerged counts and median E with the log-rank p at the operating point (threshold 0.5,
hold 2), recomputed over the rule grid (threshold 0.4/0.5/0.6 x hold 1/2/3; robust only where the
direction and significance hold in every cell), and each run's best accuracy with a Mann–Whitney
U test (no rule). The headline line sets them beside the paper's claim 4 ("more heads help;
larger head dimension helps only up to a minimum capacity") once every arm holds its 24 seeds;
until then it says how many runs are in and that claim 4's head-count contrast stays confounded.

Usage: ``python -m analyses.population_heads_dhead [--finished-only] [--seeds a-b] [--jobs N]
[--update-docs]`` (trains the missing runs first through ``python -m analyses.population --spec
population-heads-dhead``; ``--seeds`` splits them between processes). Measured on an AMD EPYC
(one process per core, Python 3.11.7): 23–29 training steps/s; 139 s (4000 steps, 4 heads of 16),
219 s (4 heads of 8), 357 s (8 heads of 8) and 378–467 s (8 heads of 16) a run, plus the
256-prompt evaluation; one seed of the four arms about 20 min of one core, the 96 runs about
8 core-hours.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import pandas as pd

from analyses import description
from analyses import population as pop
from analyses.population_decoupled import best_accuracy, grid_table, grid_word, p_text, robust, steps_text

ROOT = Path(__file__).resolve().parents[1]
NAME = "population_heads_dhead"
SPEC = "population-heads-dhead"
KEPT, N_PROMPTS = pop.SPECS[SPEC]
#: (arm a, arm b, what differs, label): each contrast reads arm b against arm a.
PAIRS = (
    ("phi-2l-64d-4h-dh16-r8", "phi-2l-64d-8h-dh16-r8", "n_heads", "8 heads against 4, d_head 16"),
    ("phi-2l-64d-4h-dh8-r8", "phi-2l-64d-8h-dh8-r8", "n_heads", "8 heads against 4, d_head 8"),
    ("phi-2l-64d-4h-dh8-r8", "phi-2l-64d-4h-dh16-r8", "d_head", "d_head 16 against 8, 4 heads"),
    ("phi-2l-64d-8h-dh8-r8", "phi-2l-64d-8h-dh16-r8", "d_head", "d_head 16 against 8, 8 heads"),
    ("phi-2l-64d-4h-dh16-r8", "phi-2l-64d-8h-dh8-r8", "both", "8 heads of 8 dims against 4 of 16 (confounded)"),
)
BEGIN, END = "<!-- population-heads-dhead:begin -->", "<!-- population-heads-dhead:end -->"
#: docs/results.md's headline line, after the decoupled arms' line.
HEADLINE = "<!-- population-heads-dhead-headline:begin -->", "<!-- population-heads-dhead-headline:end -->"


def contrasts(curves: pd.DataFrame) -> list[dict]:
    """Every pair of :data:`PAIRS` whose two arms have kept curves: both arms cut at the smaller
    budget (steps); ``rows``: the contrast at every cell of the rule grid
    (:func:`analyses.population_decoupled.grid_table`); ``main``: the one at threshold 0.5, hold 2;
    ``best``: each run's best accuracy with the Mann–Whitney U p; ``earlier``: whether arm b
    emerged first (earlier median E, a median not reached counting as later than any step; at
    equal medians, more runs emerged)."""
    out = []
    arms = set(curves["arm"]) if len(curves) else set()
    for a, b, factor, label in PAIRS:
        if a not in arms or b not in arms:
            continue
        budget = min(int(curves.loc[curves["arm"] == arm, "budget"].iloc[0]) for arm in (a, b))
        both = pop.at_budget(curves[curves["arm"].isin([a, b])], budget)
        rows = grid_table(both, [(a, b)])
        main = rows[(rows["threshold"] == pop.THRESHOLD) & (rows["hold"] == pop.HOLD)].iloc[0].to_dict()
        e_b, e_a = (math.inf if math.isnan(e) else e for e in (main["median_b"], main["median_a"]))
        earlier = e_b < e_a or (e_b == e_a and main["emerged_b"] > main["emerged_a"])
        later = e_b > e_a or (e_b == e_a and main["emerged_b"] < main["emerged_a"])
        out.append(
            dict(
                a=a,
                b=b,
                factor=factor,
                label=label,
                budget=budget,
                rows=rows,
                main=main,
                best=best_accuracy(both, a, b),
                earlier=earlier,
                later=later,
                robust=robust(rows),
            )
        )
    return out


def hazard_text(m: dict) -> str:
    """The pair's hazard ratio in words, ``"hazard ratio ×0.75 (95 % CI 0.38–1.48)"`` (above 1: arm b
    emerges earlier), or why it is undetermined."""
    if math.isnan(m["hr"]):
        return f"hazard ratio undetermined ({m['hr_note']})"
    return f"hazard ratio ×{m['hr']:.2f} (95 % CI {m['hr_lo']:.2f}–{m['hr_hi']:.2f})"


def contrast_line(c: dict) -> str:
    """One contrast in words: emerged counts, median E, log-rank p, the hazard ratio with its
    interval and the grid's verdict, then the best accuracies (no rule)."""
    m, best = c["main"], c["best"]
    side = "earlier" if c["earlier"] else "later" if c["later"] else "at the same time"
    sig = "p < 0.05" if m["p"] < 0.05 else "not significant"
    return (
        f"{c['label']} (cut at {c['budget']} steps): emerged {m['emerged_b']}/{m['n_b']} against "
        f"{m['emerged_a']}/{m['n_a']}, median E {steps_text(m['median_b'])} against {steps_text(m['median_a'])}, "
        f"{side} (log-rank p {p_text(m['p'])}, {sig}; {hazard_text(m)}; at threshold {pop.THRESHOLD}, hold {pop.HOLD}; "
        f"{grid_word(c['rows'])}); best accuracy median {best['med_b']:.2f} against {best['med_a']:.2f} "
        f"(Mann–Whitney p {p_text(best['p'])})"
    )


def docs_block(curves: pd.DataFrame, n_planned: int) -> str:
    """docs/results.md's block: how many runs are measured (and, while some are missing, that
    nothing below is a population statistic), the one-factor contrasts (:func:`contrasts`), then
    the arm table and findings of the whole spec (:func:`analyses.population.docs_block`)."""
    from interp.core.settings import StudyConfig
    from interp.population.tables import population_from_curves

    n = curves["run"].nunique() if len(curves) else 0
    per_arm = curves.groupby("arm")["run"].nunique() if n else pd.Series(dtype=int)
    counts = ", ".join(f"{arm} {k}" for arm, k in per_arm.items())
    head = (
        f"**Measured so far: {n} of the {n_planned} planned runs** ({counts or 'none'}); until every arm has its "
        "24 seeds nothing below is a population statistic, and claim 4's head-count contrast stays confounded "
        "with d_head in the headline."
        if n < n_planned
        else f"All {n_planned} planned runs measured."
    )
    lines = [head, ""]
    if not n:
        return "\n".join(lines) + "\n"
    found = contrasts(curves)
    if found:
        lines += ["One factor at a time (each line: arm b against arm a, both cut at the smaller budget):", ""]
        lines += [f"- {contrast_line(c)}." for c in found]
        lines.append("")
    result = population_from_curves(curves, StudyConfig(threshold=pop.THRESHOLD, hold=pop.HOLD), reference=PAIRS[0][0])
    lines.append(pop.docs_block(result, n_planned, "the rest not trained yet" if n < n_planned else "all"))
    return "\n".join(lines)


def _side(c: dict) -> str:
    """``"earlier"`` or ``"later"`` where arm b differs from arm a with log-rank p < 0.05 at the
    operating point, else ``"no difference"``."""
    if c["main"]["p"] < 0.05:
        return "earlier" if c["earlier"] else "later" if c["later"] else "no difference"
    return "no difference"


def claim_word(group: list[dict], words: dict[str, str]) -> str:
    """One claim over the contrasts of one factor (each at one level of the other factor), beside
    the paper: ``words[side]`` per contrast (:func:`_side`), the same word for all (``"contradicted
    at both"``) or each level named (``"contradicted at d_head 8; not decidable at d_head 16"``).
    ``group``: contrasts from :func:`contrasts` whose labels end in the level held fixed."""
    per = [(words[_side(c)], c["label"].rsplit(", ", 1)[-1]) for c in group]
    if len({w for w, _ in per}) == 1:
        return f"{per[0][0]} at both" if len(per) == 2 else per[0][0]
    return "; ".join(f"{w} at {level}" for w, level in per)


#: claim 4's head count (the paper: more heads help) read from a contrast's side.
HEAD_WORDS = {"earlier": "reproduced", "later": "contradicted", "no difference": "not decidable"}
#: claim 4's head size (the paper: a larger head dimension helps only up to a minimum capacity);
#: two sizes can show that the larger helps, not where the help stops.
SIZE_WORDS = {"earlier": "reproduced in part", "later": "contradicted", "no difference": "not decidable"}


def headline_line(curves: pd.DataFrame, n_planned: int) -> str:
    """docs/results.md's headline line: while runs are missing, how many are in and that claim 4's
    head-count contrast stays confounded with d_head; once all are, claim 4 one factor at a time
    beside the paper (:func:`claim_word`): the head count at each d_head (reproduced where 8 heads
    emerge earlier with log-rank p < 0.05, contradicted where later, else not decidable) and the head
    size at each head count (reproduced in part where d_head 16 emerges earlier: two sizes cannot
    show where the help stops), each contrast with whether it holds over the rule grid."""
    n = curves["run"].nunique() if len(curves) else 0
    if n < n_planned:
        return (
            f"- **Head count against head size** (`{SPEC}`: {{4, 8 heads}} × {{d_head 8, 16}}, 8 rotary dims per "
            f"head): {n} of {n_planned} runs trained so far, so claim 4's head-count contrast above stays confounded "
            "with d_head."
        )
    found = contrasts(curves)
    heads = [c for c in found if c["factor"] == "n_heads"]
    sizes = [c for c in found if c["factor"] == "d_head"]

    def firm(group: list[dict]) -> str:
        k = sum(c["robust"] and bool((c["rows"]["p"] < 0.05).all()) for c in group)
        return f"{k} of {len(group)} significant in every cell of the rule grid"

    size_word = claim_word(sizes, SIZE_WORDS)
    in_part = (
        " (a larger head helps; two head sizes cannot show where the help stops)" if "in part" in size_word else ""
    )
    return (
        f"- **Claim 4, one factor at a time** (`{SPEC}`: {{4, 8 heads}} × {{d_head 8, 16}}, 8 rotary dims per head, "
        f"{n} runs, at threshold {pop.THRESHOLD}, hold {pop.HOLD}): the head count alone (the paper: more heads "
        f"help): {claim_word(heads, HEAD_WORDS)}; {firm(heads)} ({'; '.join(contrast_line(c) for c in heads)}). "
        f"The head size alone (the paper: a larger head helps only up to a minimum capacity): "
        f"{size_word}{in_part}; {firm(sizes)} ({'; '.join(contrast_line(c) for c in sizes)}). "
        f"{both_reading(found)}"
    )


def both_reading(found: list[dict]) -> str:
    """Which factor carries the population's confounded contrast (8 heads of 8 dims against 4 of
    16), from the one-factor contrasts' sides (:func:`_side`) at the operating point: the head size
    where d_head 16 is earlier at both head counts and the head count differs at neither; the head
    count where 8 heads are later at both d_heads and the head size differs at neither; else both,
    or neither alone."""
    both = [c for c in found if c["factor"] == "both"]
    if not both:
        return ""
    heads = {_side(c) for c in found if c["factor"] == "n_heads"}
    sizes = {_side(c) for c in found if c["factor"] == "d_head"}
    side = _side(both[0])
    what = f"The population's contrast, 8 heads of 8 dims against 4 of 16 ({side} at this operating point)"
    if side == "no difference":
        return f"{what}, shows no difference to explain."
    if sizes == {"earlier"} and heads == {"no difference"}:
        return (
            f"{what}, goes with the head size: the head count alone makes no significant difference at either d_head."
        )
    if heads == {"later"} and sizes == {"no difference"}:
        return (
            f"{what}, goes with the head count: the head size alone makes no significant difference at either head "
            "count."
        )
    if sizes == {"earlier"} and heads == {"later"}:
        return f"{what}, goes with both: the head size alone and the head count alone each differ at both levels."
    return f"{what}, is not carried by one factor alone: the one-factor contrasts disagree between levels."


def main(argv=None) -> None:
    from interp.sources.catalogue import load_suite_spec

    parser = argparse.ArgumentParser(prog=f"python -m analyses.{NAME}", description=description(__doc__))
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "analyses" / NAME)
    parser.add_argument("--jobs", type=int, default=None, help="training worker processes (default: the CPU count)")
    parser.add_argument("--seeds", default="", help="train only these seeds of each arm (a-b ranges or a list)")
    parser.add_argument("--sweep-dir", type=Path, default=None, help="(ignored: the runs live in the suite's cache)")
    parser.add_argument("--finished-only", action="store_true", help="the kept curves only; train nothing")
    parser.add_argument("--update-docs", action="store_true", help="rewrite docs/results.md's block and headline line")
    args = parser.parse_args(argv)
    if not args.finished_only:
        extra = (["--jobs", str(args.jobs)] if args.jobs is not None else []) + (
            ["--seeds", args.seeds] if args.seeds else []
        )
        pop.main(["--spec", SPEC, "--out", str(args.out / "arms"), *extra])
    curves = pop.read_kept_curves(KEPT) if (KEPT / "curves").is_dir() else pd.DataFrame(columns=pop.curve_columns())
    n_planned = len(load_suite_spec(SPEC).run_names())
    block = docs_block(curves, n_planned)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{NAME}.md").write_text(block)
    print(block)
    if args.update_docs:
        pop.update_docs(block, (BEGIN, END))
        pop.update_docs(headline_line(curves, n_planned) + "\n", HEADLINE)


if __name__ == "__main__":
    main()
