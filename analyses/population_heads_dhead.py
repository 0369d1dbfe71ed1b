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

Each contrast is read by :func:`interp.population.judged.judged` (the log-rank test stratified by seed, the
arms sharing their seeds, at the operating point threshold 0.5, hold 2 and in every cell of the rule
grid threshold 0.4/0.5/0.6 x hold 1/2/3; the pair's proportional-hazards test and Kaplan–Meier
crossings) and worded by the judge (:mod:`interp.population.judge`): every verdict and robustness
word here is its, every direction the test's; beside it, each run's best accuracy with a
Mann–Whitney U test (no rule). The headline line gives the judge's verdict on claim 4's head count
and head size ("more heads help; larger head dimension helps only up to a minimum capacity") once
every arm holds its 24 seeds, for Phi (the architecture the cross is built as); until then it says
how many runs are in and that claim 4's head-count contrast stays confounded.

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
from pathlib import Path

import pandas as pd

from interp.cli.options import description
from interp.core.terms import DEFAULT_HOLD as HOLD
from interp.core.terms import DEFAULT_THRESHOLD as THRESHOLD
from interp.population.kept import SPECS, curve_columns, keep_spec, read_kept_curves, selected_seeds, update_docs
from interp.population.reading import at_budget, best_accuracy, p_text, population_block, summarise

ROOT = Path(__file__).resolve().parents[1]
NAME = "population_heads_dhead"
SPEC = "population-heads-dhead"
KEPT, N_PROMPTS = SPECS[SPEC]
#: (arm a, arm b, what differs, label): each contrast reads arm b against arm a.
PAIRS = (
    ("phi-2l-64d-4h-dh16-r8", "phi-2l-64d-8h-dh16-r8", "n_heads", "8 heads against 4, d_head 16"),
    ("phi-2l-64d-4h-dh8-r8", "phi-2l-64d-8h-dh8-r8", "n_heads", "8 heads against 4, d_head 8"),
    ("phi-2l-64d-4h-dh8-r8", "phi-2l-64d-4h-dh16-r8", "d_head", "d_head 16 against 8, 4 heads"),
    ("phi-2l-64d-8h-dh8-r8", "phi-2l-64d-8h-dh16-r8", "d_head", "d_head 16 against 8, 8 heads"),
    ("phi-2l-64d-4h-dh16-r8", "phi-2l-64d-8h-dh8-r8", "both", "8 heads of 8 dims against 4 of 16"),
)
#: The model family the cross is built as (its findings hold for it).
ARCHITECTURE = "Phi"
BEGIN, END = "<!-- population-heads-dhead:begin -->", "<!-- population-heads-dhead:end -->"
#: docs/results.md's headline line, after the decoupled arms' line.
HEADLINE = "<!-- population-heads-dhead-headline:begin -->", "<!-- population-heads-dhead-headline:end -->"


def contrasts(curves: pd.DataFrame) -> list[dict]:
    """Every pair of :data:`PAIRS` whose two arms have kept curves, judged
    (:func:`interp.population.judged.judged`: both arms cut at the smaller budget, the test stratified by
    seed, read over the rule grid): ``judged`` (:class:`interp.population.judged.Judged`), ``verdict`` (its
    :class:`interp.population.judge.Verdict`), ``budget`` (steps), and ``best``: each run's best
    accuracy with the Mann–Whitney U p (no rule). The pair that varies both factors is given to
    the judge with what else varies (d_head), so its word is ``confounded``."""
    from interp.population.judged import judged
    from interp.population.shapes import pair_varies

    out = []
    arms = set(curves["arm"]) if len(curves) else set()
    for a, b, factor, label in PAIRS:
        if a not in arms or b not in arms:
            continue
        also = pair_varies(curves, b, a, "n_heads") if factor == "both" else ""
        j = judged(curves, b, a, label, wanted=+1, also_varies=also, threshold=THRESHOLD, hold=HOLD)
        both = at_budget(curves[curves["arm"].isin([a, b])], j.budget)
        out.append(
            dict(
                a=a,
                b=b,
                factor=factor,
                label=label,
                budget=j.budget,
                judged=j,
                verdict=j.verdict,
                best=best_accuracy(both, a, b),
            )
        )
    return out


def contrast_line(c: dict) -> str:
    """One contrast in words (:func:`interp.population.judged.contrast_line`: emerged counts, Kaplan–Meier
    medians, the judge's word, robustness and reason), then each run's best accuracy (no rule)."""
    from interp.population.judged import contrast_line as judged_line

    best = c["best"]
    return (
        f"{judged_line(c['judged'])}; best accuracy median {best['med_b']:.2f} against {best['med_a']:.2f} "
        f"(Mann–Whitney p {p_text(best['p'])}, no rule)"
    )


def docs_block(curves: pd.DataFrame, n_planned: int) -> str:
    """docs/results.md's block: how many runs are measured (and, while some are missing, that
    nothing below is a population statistic), the contrasts judged one at a time
    (:func:`contrasts`), then the arm table and findings of the whole spec
    (:func:`analyses.population.docs_block`)."""
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
        lines += [
            (
                f"One factor at a time ({ARCHITECTURE} models; each line: arm b against arm a, both cut at the smaller "
                f"budget, at threshold {THRESHOLD}, hold {HOLD}; the word and robustness over the rule grid "
                "are the judge's, interp.population.judge):"
            ),
            "",
        ]
        lines += [f"- {contrast_line(c)}." for c in found]
        lines.append("")
    result = population_from_curves(curves, StudyConfig(threshold=THRESHOLD, hold=HOLD), reference=PAIRS[0][0])
    lines.append(population_block(result, n_planned, "the rest not trained yet" if n < n_planned else "all"))
    return "\n".join(lines)


def _side(c: dict) -> str:
    """A contrast's direction from its test (the judge's :attr:`~interp.population.judge.Verdict.side`,
    arm b against arm a): ``"earlier"`` or ``"later"`` where significant at the operating point,
    ``"curves cross"`` where the judge says the curves cross, else ``"no difference"``."""
    v = c["verdict"]
    if v.word == "curves cross":
        return "curves cross"
    return v.side or "no difference"


def claim_verdict(group: list[dict], claim: str):
    """The judge's verdict on one claim over the contrasts of one factor
    (:func:`interp.population.judge.judge_claim`); ``claim``: its label."""
    from interp.population.judge import judge_claim

    return judge_claim(claim, [c["verdict"] for c in group])


def _claim_text(v, paper: str, group: list[dict]) -> str:
    robust = f", {v.robust}" if v.robust else ""
    decide = f" What would decide it: {v.decide}." if v.decide else ""
    return (
        f"{v.label} (the paper: {paper}): **{v.word}**{robust} ({v.reason}): "
        f"{'; '.join(contrast_line(c) for c in group)}.{decide}"
    )


def headline_line(curves: pd.DataFrame, n_planned: int) -> str:
    """docs/results.md's headline line: while runs are missing, how many are in and that claim 4's
    head-count contrast stays confounded with d_head; once all are, claim 4 one factor at a time,
    each claim's word the judge's (:func:`claim_verdict`) over its contrasts (:func:`contrast_line`):
    the head count at each d_head, the head size at each head count (two head sizes cannot show
    where the help stops), then which factor the population's confounded contrast goes with
    (:func:`both_reading`). The cross is built as Phi: the line says its findings hold for Phi."""
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
    head_v = claim_verdict(heads, f"Claim 4, heads ({ARCHITECTURE}, 8 heads against 4 at d_head 8 and 16)")
    size_v = claim_verdict(sizes, f"Claim 4, head size ({ARCHITECTURE}, d_head 16 against 8 at 4 and 8 heads)")
    return (
        f"- **Claim 4, one factor at a time, {ARCHITECTURE}** (`{SPEC}`: {{4, 8 heads}} × {{d_head 8, 16}}, 8 rotary "
        f"dims per head, {n} runs, at threshold {THRESHOLD}, hold {HOLD}; built as {ARCHITECTURE}, so these "
        f"findings hold for {ARCHITECTURE}, not yet for the population's GPT-NeoX arms; two head sizes cannot show "
        f"where a larger head's help stops). {_claim_text(head_v, 'more heads help', heads)} "
        f"{_claim_text(size_v, 'a larger head helps only up to a minimum capacity', sizes)} {both_reading(found)}"
    ).rstrip()


def both_reading(found: list[dict]) -> str:
    """The population's confounded contrast (8 heads of 8 dims against 4 of 16) with the judge's
    word (``confounded``), and which factor its direction goes with, from the one-factor contrasts'
    test directions (:func:`_side`) at the operating point: the head size where d_head 16 is earlier
    at both head counts and the head count differs at neither; the head count where 8 heads are
    later at both d_heads and the head size differs at neither (a head-count contrast whose curves
    cross counts as no overall difference); else both, or neither alone."""
    both = [c for c in found if c["factor"] == "both"]
    if not both:
        return ""
    heads = {_side(c) for c in found if c["factor"] == "n_heads"}
    sizes = {_side(c) for c in found if c["factor"] == "d_head"}
    v, side = both[0]["verdict"], _side(both[0])
    what = f"The population's contrast, {v.text()}"
    if side == "no difference":
        return f"{what}: no difference to explain."
    if sizes == {"earlier"} and heads <= {"no difference", "curves cross"}:
        cross = " (where the curves cross, opposite early and late effects)" if "curves cross" in heads else ""
        return (
            f"{what}: its direction goes with the head size; the head count alone makes no significant difference at "
            f"either d_head{cross}."
        )
    if heads == {"later"} and sizes == {"no difference"}:
        return (
            f"{what}: its direction goes with the head count; the head size alone makes no significant difference at "
            "either head count."
        )
    if sizes == {"earlier"} and heads == {"later"}:
        return f"{what}: its direction goes with both; the head size alone and the head count alone each differ at both levels."
    return (
        f"{what}: its direction is not carried by one factor alone; the one-factor contrasts disagree between levels."
    )


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
        try:
            seeds = selected_seeds(load_suite_spec(SPEC), SPEC, args.seeds)
        except ValueError as error:
            raise SystemExit(f"error: {error}") from None
        _, arms = keep_spec(SPEC, args.jobs, seeds=seeds)
        if len(arms):
            summarise(arms, args.out / "arms")
    curves = read_kept_curves(KEPT) if (KEPT / "curves").is_dir() else pd.DataFrame(columns=curve_columns())
    n_planned = len(load_suite_spec(SPEC).run_names())
    block = docs_block(curves, n_planned)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{NAME}.md").write_text(block)
    print(block)
    if args.update_docs:
        update_docs(block, (BEGIN, END))
        update_docs(headline_line(curves, n_planned) + "\n", HEADLINE)


if __name__ == "__main__":
    main()
