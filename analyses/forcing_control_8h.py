""" "Never" tested by forcing (issue 52, item 2): the 8-head seeds forced toward the true pattern
against plain runs and the offset control, with a longer budget: does the bias toward the true
pattern bring the capability earlier (the paper's claim 3)?

The population's d_model-64 8-head arm (``neox-2l-64d-8h``: d_head 8, 2 rotary dimensions per
head) never emerged by its 4000-step budget on any of 24 seeds, so the §5 readout (``shift =
E_forced − E_plain``, :mod:`analyses.forcing_control`) is undefined for it. Here, per seed of
``--seeds`` (default 0-11) and for the one cell ``β:N`` (default ``0.25:500``, the §5 cell: β in
nats per unit of ``log(pattern + ε)``, N steps at full β, then a linear anneal over
``--anneal-steps``), two forced runs of ``--budget`` steps (default 8000), exactly as §5 forces
them (:func:`interp.population.forced.plan`): ``true`` (the run's strongest previous-token head in
layer 0 and prefix-matching head in layer 1 at its last checkpoint, from the kept head features
``docs/data/population/heads/<run>.csv``, biased toward ``previous_token`` / ``induction``) and
``control`` (the same heads toward ``offset_3`` / ``induction_offset_3``). In this arm the
previous-token scores sit at chance (issue 52), so the chosen layer-0 head is the argmax of
near-ties: still a fixed, stated head per run.

Config of the forced runs (:func:`forced_config`): the suite spec ``population-8h-long`` (the same
arm continued plain to 12000 steps, entry ``population_8h_long``) with its budget cut to
``--budget``. Only the fields that choose which runs exist and when they stop differ from the
population's (``sizes``, ``seeds``, ``steps``, ``size_steps``:
:data:`interp.sources.embedded._RUN_SELECTION`); every field that sets the weights is the
population's, so a forced run starts from the plain run's initialisation and sees its data order
(the batch of a step depends on (data_seed, seed, step) only; the learning rate is constant after
warm-up). Evaluated on 256 prompts per checkpoint, as the long continuation (issue 52, item 3).

Readout (:func:`shares`), per group over the same seeds: ``true`` and ``control`` (forced runs
emerged by the budget), ``plain`` (the long continuation's kept curves,
``docs/data/population-8h-long/curves``, cut at the budget: the same rule with the same room to
hold) and ``plain_long`` (those curves to their own budget, 12000): runs, emerged, the share with
its 95 % Wilson interval (:func:`interp.population.survival.share_interval`) and E (min, median,
max, steps): a description. The verdicts are the judge's (:mod:`interp.population.judge`), on the
arms as paired-by-seed contrasts (:func:`arm_curves`, :func:`judged_contrasts`): forced toward
the true pattern against plain and against the offset control, each cut at the budget, the
log-rank test stratified by seed with the paper's direction (forced earlier), read over the rule
grid; a plain arm whose runs level off just under the threshold makes a null a ``ceiling``. The
exact McNemar tests on the discordant seeds (:func:`paired_tests`) stay beside them as numbers.

Resumable as :mod:`analyses.forcing_control`: each forced run trained into
``--sweep-dir/<tag>/<run>/<condition>-b<β>-n<N>/`` and its curve kept at once in
``--kept/runs/`` (``docs/data/forcing_control_8h/runs/``, committed); a second call trains only
what is missing. Writes to ``--out``: ``forcing_control_8h.csv`` (per forced run),
``forcing_control_8h_plain.csv`` (per plain run), ``forcing_control_8h_shares.csv`` (per group),
``forcing_control_8h.md`` (the docs block); ``--update-docs`` replaces the block between
``forcing-control-8h:begin`` / ``:end`` in docs/results.md.

Runtime, measured (AMD EPYC, Python 3.11.7, 2026-12-04, one process per core): 298–383 s of
training per 8000-step forced run (median 342 s), plus ≈ 14 s for the evaluation of its 88
checkpoints on 256 prompts; the 24 runs took ≈ 1.3 h of 2 cores. A 24-step toy pair
(tests/analyses/test_forcing_control_8h.py, slow) took 42 s under a load of 9.

Usage: ``python -m analyses.forcing_control_8h [--seeds 0-11] [--cells 0.25:500] [--budget 8000]
[--anneal-steps 250] [--jobs 2] [--finished-only] [--update-docs]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import re
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from interp.cli.options import description
from interp.core.io import atomic_to_csv, atomic_write_text
from interp.core.terms import DEFAULT_HOLD as HOLD
from interp.core.terms import DEFAULT_THRESHOLD as THRESHOLD
from interp.population.forced import parse_cells, plan, read_forced, train_missing
from interp.population.kept import SPECS, curve_columns, parse_seeds, read_kept_curves, read_kept_heads

ROOT = Path(__file__).resolve().parents[1]
NAME = "forcing_control_8h"
DOCS = ROOT / "docs" / "results.md"
BEGIN, END = "<!-- forcing-control-8h:begin -->", "<!-- forcing-control-8h:end -->"
#: Where the forced runs' curves are kept (committed, so the entry resumes on any clone).
KEPT = ROOT / "docs" / "data" / NAME
#: The plain continuation's spec (its kept curves: analyses.population.SPECS).
LONG_SPEC = "population-8h-long"
DEFAULT_SEEDS, DEFAULT_CELL, DEFAULT_BUDGET, DEFAULT_ANNEAL = "0-11", "0.25:500", 8000, 250
#: Prompts per checkpoint (the long continuation's).
N_PROMPTS = 256
#: Runs a group needs before its verdicts are a finding (the issue's 12 forced seeds).
MIN_RUNS = 12
#: The groups of the readout, in order.
GROUPS = ("true", "control", "plain", "plain_long")
SHARE_COLUMNS = ["group", "by_step", "runs", "emerged", "share", "share_lo", "share_hi", "E_min", "E_median", "E_max"]
FORCED_COLUMNS = ["run", "condition", "beta", "force_steps", "heads", "budget", "E_forced", "emerged", "train_seconds"]
PLAIN_COLUMNS = ["run", "budget", "E_by_budget", "emerged_by_budget", "long_budget", "E_long", "emerged_long"]


def forced_config(budget: int):
    """The forced runs' :class:`interp.sources.catalogue.SuiteConfig`: ``population-8h-long`` with
    ``steps`` cut to ``budget`` (steps), so its weights-setting fields are the population's.

    Raises:
        ValueError: ``budget`` not a multiple of the spec's checkpoint spacing (100 steps) in
            [checkpoint spacing, the long continuation's 12000], one line.
    """
    from interp.sources.catalogue import load_suite_spec

    long = load_suite_spec(LONG_SPEC)
    every = long.checkpoint_every
    if not (every <= budget <= long.steps and budget % every == 0):
        raise ValueError(
            f"--budget {budget} must be a multiple of {every} steps from {every} to {long.steps} "
            f"(the plain continuation's budget, against which it is read)"
        )
    return dataclasses.replace(long, steps=int(budget), size_steps=())


def _emerged_at(curve: pd.DataFrame, budget: int, rule: tuple[float, int] | None = None) -> float:
    """E (steps) of a curve cut at ``budget`` under the one rule
    (:func:`interp.emergence.held_crossing`: accuracy 0.5 held 2 checkpoints, or ``rule`` =
    (threshold, hold); a crossing with no room left to hold is not emerged), NaN when it did not
    emerge by then."""
    from interp.emergence import held_crossing

    threshold, hold = rule or (THRESHOLD, HOLD)
    cut = curve[curve["step"] <= budget]
    post = held_crossing(cut["step"].tolist(), cut["accuracy"].tolist(), threshold, hold)[1] if len(cut) >= 2 else None
    return np.nan if post is None else float(post)


def forced_table(
    units: list[dict], curves: dict[str, pd.DataFrame], budget: int, rule: tuple[float, int] | None = None
) -> pd.DataFrame:
    """One row per forced run (:data:`FORCED_COLUMNS`): E (steps; NaN when not emerged by
    ``budget``; the rule of :func:`_emerged_at`) from its kept curve; ``curves`` maps
    ``"<run>/<folder name>"`` of each unit to its curve (a unit without one is left out)."""
    rows = []
    for u in units:
        curve = curves.get(f"{u['run']}/{u['folder'].name}")
        if curve is None:
            continue
        e = _emerged_at(curve, budget, rule)
        rows.append(
            {
                "run": u["run"],
                "condition": u["condition"],
                "beta": u["beta"],
                "force_steps": u["force_steps"],
                "heads": "+".join(f"L{l}H{h}={p}" for l, h, p in u["forcing"].heads),
                "budget": budget,
                "E_forced": e,
                "emerged": e == e,
                "train_seconds": curve["train_seconds"].iloc[0] if "train_seconds" in curve else np.nan,
            }
        )
    return pd.DataFrame(rows, columns=FORCED_COLUMNS)


def plain_table(
    long_curves: pd.DataFrame, runs: list[str], budget: int, rule: tuple[float, int] | None = None
) -> pd.DataFrame:
    """One row per run of ``runs`` whose long continuation is kept (:data:`PLAIN_COLUMNS`): E by
    ``budget`` (the curve cut there) and E by the continuation's own budget (steps; NaN: not
    emerged; the rule of :func:`_emerged_at`)."""
    rows = []
    for run in runs:
        curve = long_curves[long_curves["run"] == run]
        if curve.empty:
            continue
        end = int(curve["budget"].iloc[0])
        by_budget, by_end = _emerged_at(curve, budget, rule), _emerged_at(curve, end, rule)
        rows.append(
            {
                "run": run,
                "budget": budget,
                "E_by_budget": by_budget,
                "emerged_by_budget": by_budget == by_budget,
                "long_budget": end,
                "E_long": by_end,
                "emerged_long": by_end == by_end,
            }
        )
    return pd.DataFrame(rows, columns=PLAIN_COLUMNS)


def _share_row(group: str, by_step: float, e: pd.Series) -> dict:
    from interp.population.survival import share_interval

    k, n = int(e.notna().sum()), len(e)
    share, lo, hi = share_interval(k, n)
    got = e.dropna()
    return {
        "group": group,
        "by_step": by_step,
        "runs": n,
        "emerged": k,
        "share": share,
        "share_lo": lo,
        "share_hi": hi,
        "E_min": float(got.min()) if k else np.nan,
        "E_median": float(got.median()) if k else np.nan,
        "E_max": float(got.max()) if k else np.nan,
    }


def shares(forced: pd.DataFrame, plain: pd.DataFrame, budget: int) -> pd.DataFrame:
    """Per group of :data:`GROUPS` (:data:`SHARE_COLUMNS`): runs, runs emerged by ``by_step``, the
    share (probability) with its 95 % Wilson interval, and E min/median/max (steps; NaN when none
    emerged). A group with no run has ``runs`` 0 and NaN share (the long continuation not in yet)."""
    rows = [
        _share_row(c, budget, forced.loc[forced["condition"] == c, "E_forced"].astype(float))
        for c in ("true", "control")
    ]
    rows.append(_share_row("plain", budget, plain["E_by_budget"].astype(float)))
    long_end = float(plain["long_budget"].max()) if len(plain) else np.nan
    rows.append(_share_row("plain_long", long_end, plain["E_long"].astype(float)))
    return pd.DataFrame(rows, columns=SHARE_COLUMNS)


def _share_text(r) -> str:
    if not r.runs:
        return "no run"
    es = (
        ""
        if not r.emerged
        else f"; E {r.E_min:.0f}" + ("" if r.E_min == r.E_max else f"–{r.E_max:.0f}, median {r.E_median:.0f}")
    )
    return f"{r.emerged}/{r.runs} by step {r.by_step:.0f} ({r.share:.2f}, 95 % {r.share_lo:.2f}–{r.share_hi:.2f}{es})"


def arm_curves(
    units: list[dict], curves: dict[str, pd.DataFrame], long_curves: pd.DataFrame, runs: list[str], budget: int
) -> pd.DataFrame:
    """One capability table (:func:`analyses.population.curve_columns`) of three arms over the same
    seeds, each cut at ``budget`` steps: ``true`` and ``control`` (the forced runs of ``units``
    whose curves are in ``curves``, keyed ``"<run>/<folder name>"``) and ``plain`` (the long
    continuation's curves of ``runs``); runs are named ``"<arm>-seed<seed>"``."""

    frames = []
    for u in units:
        curve = curves.get(f"{u['run']}/{u['folder'].name}")
        if curve is None:
            continue
        seed = int(u["run"].rsplit("seed", 1)[1])
        cut = curve[curve["step"] <= budget][curve_columns()]
        frames.append(cut.assign(arm=u["condition"], run=f"{u['condition']}-seed{seed}", seed=seed, budget=budget))
    for run in runs:
        curve = long_curves[long_curves["run"] == run]
        if curve.empty:
            continue
        seed = int(run.rsplit("seed", 1)[1])
        cut = curve[curve["step"] <= budget][curve_columns()]
        frames.append(cut.assign(arm="plain", run=f"plain-seed{seed}", seed=seed, budget=budget))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=curve_columns())


#: The contrasts judged (arm b, arm a, label): each forced toward the true pattern against the runs
#: it should beat; the paper (claim 3) wants the true-forced runs earlier in both.
CONTRASTS = (
    ("true", "plain", "forced toward the true pattern against plain"),
    ("true", "control", "forced toward the true pattern against the offset control"),
)


def judged_contrasts(table: pd.DataFrame, budget: int) -> list:
    """The contrasts of :data:`CONTRASTS` whose arms are in ``table`` (:func:`arm_curves`), each
    judged (:func:`interp.population.judged.judged`: arms sharing their seeds, so the log-rank test is
    stratified by seed; read over the rule grid; ``ceiling`` where no test is significant and an
    arm's runs level off just under the threshold) with the paper's direction: forced earlier."""
    from interp.population.judged import judged

    arms = set(table["arm"]) if len(table) else set()
    return [
        judged(table, b, a, label, wanted=+1, budget=budget, threshold=THRESHOLD, hold=HOLD)
        for b, a, label in CONTRASTS
        if {a, b} <= arms
    ]


def paired_tests(forced: pd.DataFrame, plain: pd.DataFrame) -> list[dict]:
    """Exact McNemar tests over the seeds both groups share, beside the judge's verdicts
    (:func:`judged_contrasts`; a supplement: the words stay the judge's). Per pair (true against plain
    by the budget, true against control): ``a`` seeds emerged only in the first group, ``b`` only in
    the second, and the two-sided exact binomial p of ``a`` in ``a + b`` at 1/2 (McNemar 1947; 1.0
    when no seed is discordant); ``seeds``: how many seeds both have.

    Source: Q. McNemar, Psychometrika 12 (1947); the exact form is the sign test on the
    discordant pairs (``scipy.stats.binomtest``)."""
    from scipy.stats import binomtest

    by_condition = {
        c: forced[forced["condition"] == c].set_index("run")["emerged"].astype(bool) for c in ("true", "control")
    }
    plain_by = plain.set_index("run")["emerged_by_budget"].astype(bool)
    out = []
    for first, second, other in (("true", "plain", plain_by), ("true", "control", by_condition["control"])):
        mine = by_condition[first]
        seeds = mine.index.intersection(other.index)
        a = int((mine[seeds] & ~other[seeds]).sum())
        b = int((~mine[seeds] & other[seeds]).sum())
        p = 1.0 if a + b == 0 else float(binomtest(a, a + b, 0.5).pvalue)
        out.append(dict(first=first, second=second, seeds=len(seeds), a=a, b=b, p=p))
    return out


def paired_line(tests: list[dict]) -> str:
    """One docs line from :func:`paired_tests`."""
    parts = [
        f"true against {t['second']}: {t['a']} of {t['seeds']} seeds emerged true-forced only, {t['b']} {t['second']} only, "
        f"p = {t['p']:.3g}"
        for t in tests
    ]
    return (
        "Paired by seed (exact McNemar test on the discordant seeds; a supplement to the judge's words): "
        + "; ".join(parts)
    )


def _kept_note(table: pd.DataFrame, min_runs: int) -> str:
    """While fewer than ``min_runs`` true-forced runs or plain continuations are kept: how many, and
    that the words below are not yet a finding (``""`` once both are)."""
    by = table.set_index("group")["runs"]
    if by["true"] >= min_runs and by["plain_long"] >= min_runs:
        return ""
    return (
        f"{int(by['true'])} of the {min_runs} true-forced runs and {int(by['plain_long'])} of the {min_runs} plain "
        "continuations kept, so not a finding yet"
    )


def docs_block(
    command: str,
    table: pd.DataFrame,
    judged: Sequence,
    trained: int,
    seconds: float,
    paired: str | None = None,
    train_seconds: Sequence[float] = (),
    min_runs: int = MIN_RUNS,
) -> str:
    """The docs block: the command (with the call's runtime where it trained; else the kept runs'
    median training time from ``train_seconds``), the readout table (:func:`shares`), one line per
    judged contrast (``judged``, from :func:`judged_contrasts`: the judge's word, robustness over
    the rule grid and reason, :func:`interp.population.judged.contrast_line`) and (``paired``, from
    :func:`paired_line`) the paired McNemar tests."""
    from interp.population.judged import contrast_line

    names = {
        "true": "forced, true pattern",
        "control": "forced, offset control",
        "plain": "plain",
        "plain_long": "plain",
    }
    train_s = [float(x) for x in train_seconds if math.isfinite(float(x))]
    ran = f"{trained} forced runs trained by this call; runtime {seconds / 60:.1f} min." if trained else ""
    lines = [f"Command: `{command}`; {ran or 'no run trained by this call (the kept ones only).'}"]
    if train_s:
        lines.append(
            f"Training time of one forced run (as the runs were trained): median {np.median(train_s):.0f} s "
            f"over {len(train_s)} runs."
        )
    lines += [
        "",
        "| group | by step | runs | emerged | share (95 % Wilson) | E min–max (median), steps |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for r in table.itertuples():
        by_step = "—" if r.by_step != r.by_step else f"{r.by_step:.0f}"
        share = "—" if not r.runs else f"{r.share:.2f} ({r.share_lo:.2f}–{r.share_hi:.2f})"
        e = "—" if not r.emerged else f"{r.E_min:.0f}–{r.E_max:.0f} ({r.E_median:.0f})"
        lines.append(f"| {names[r.group]} | {by_step} | {r.runs} | {r.emerged} | {share} | {e} |")

    note = _kept_note(table, min_runs)
    lines += [
        "",
        f"Judged at threshold {THRESHOLD}, hold {HOLD} (interp.population.judge: the words, and robustness over the "
        "rule grid threshold 0.4, 0.5, 0.6 × hold 1, 2, 3; the paper's claim 3 wants the true-forced runs earlier)"
        + (f"; {note}" if note else "")
        + ":",
        "",
    ]
    lines += [f"- {contrast_line(j)}." for j in judged] or ["- No contrast has both its arms kept yet."]
    if paired:
        lines.append(f"- {paired}.")
    return "\n".join([*lines, ""])


#: docs/results.md's headline line of this entry (under the population's headline).
HEADLINE = "<!-- forcing-control-8h-headline:begin -->", "<!-- forcing-control-8h-headline:end -->"


def headline_line(table: pd.DataFrame, judged: Sequence, cell: str, paired: str = "", min_runs: int = MIN_RUNS) -> str:
    """The entry's line in docs/results.md's headline: the judge's verdict on each contrast of
    :func:`judged_contrasts` (forced toward the true pattern against plain, and against the offset
    control) beside the paper's claim 3 (shared/PAPER.md: biasing attention toward the true pattern
    removes the plateau), then how many plain seeds emerge by 3 × the budget (a description);
    empty while no forced run is kept. ``cell``: the forcing cell ``"β:N"``; ``paired``: the paired
    tests' line (:func:`paired_line`), appended when given."""
    from interp.population.judged import contrast_line

    forced = table.set_index("group").loc[["true", "control"], "runs"]
    if not int(forced.sum()):
        return ""
    long = table.set_index("group").loc["plain_long"]
    note = _kept_note(table, min_runs)
    plain = (
        f"; plain seeds emerged by {long['by_step']:.0f} steps: {int(long['emerged'])} of {int(long['runs'])}"
        if long["runs"]
        else ""
    )
    return (
        f"- **The 8-head arm, forced** (`forcing_control_8h`: {int(forced['true'])} seeds forced toward the true "
        f"pattern and {int(forced['control'])} toward the offset control, β:N {cell}, {int(table['by_step'].iloc[0])} "
        f"steps; the paper's claim 3: a bias toward the true pattern removes the plateau"
        + (f"; {note}" if note else "")
        + f"): at threshold {THRESHOLD}, hold {HOLD}, "
        + "; ".join(contrast_line(j) for j in judged)
        + plain
        + (f". {paired}" if paired else "")
        + ".\n"
    )


def update_docs(block: str, docs: Path = DOCS, markers: tuple[str, str] = (BEGIN, END)) -> None:
    """Replace docs/results.md's block between ``markers`` (default: the forcing-control-8h block;
    the markers must be there)."""
    begin, end = markers
    text = docs.read_text()
    if begin not in text or end not in text:
        raise ValueError(f"{docs} has no {begin} … {end} markers")
    text = re.sub(re.escape(begin) + r".*?" + re.escape(end), lambda m: f"{begin}\n{block}{end}", text, flags=re.S)
    atomic_write_text(docs, text)


def main(argv=None) -> None:

    parser = argparse.ArgumentParser(prog="python -m analyses.forcing_control_8h", description=description(__doc__))
    parser.add_argument("--seeds", default=DEFAULT_SEEDS, help="seeds of the 8-head arm: 0-11 or 0,3,5-7")
    parser.add_argument("--cells", default=DEFAULT_CELL, help="one β:N (β: nats per unit of log(pattern + eps))")
    parser.add_argument("--budget", type=int, default=DEFAULT_BUDGET, help="steps of each forced run")
    parser.add_argument("--anneal-steps", type=int, default=DEFAULT_ANNEAL)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--sweep-dir", type=Path, default=ROOT / "results" / "sweeps" / NAME)
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "analyses" / NAME)
    parser.add_argument("--kept", type=Path, default=KEPT, help="folder of the forced runs' kept curves (runs/)")
    parser.add_argument("--finished-only", action="store_true", help="the forced runs already kept; train nothing")
    parser.add_argument("--update-docs", action="store_true")
    args = parser.parse_args(argv)
    try:  # bad input: one line naming it, before anything loads
        cells = parse_cells(args.cells)
        if len(cells) != 1:
            raise ValueError(
                f"--cells {args.cells!r} must be one β:N cell here (the verdict is per cell), e.g. 0.25:500"
            )
        if args.jobs < 1 or args.anneal_steps < 0:
            raise ValueError(f"--jobs {args.jobs} must be >= 1 and --anneal-steps {args.anneal_steps} >= 0")
        cfg = forced_config(args.budget)
        seeds = parse_seeds(args.seeds, cfg.seeds)
    except ValueError as error:
        raise SystemExit(f"error: {error}") from None
    from interp.sources import environment

    started = time.time()
    size = cfg.sizes[0]
    tag = f"{cfg.digest()}-{environment.environment_key(cfg)}-a{args.anneal_steps}"
    units = plan([(size, s) for s in seeds], read_kept_heads(), cells, args.anneal_steps, args.sweep_dir / tag)
    if args.finished_only:
        units = [u for u in units if read_forced(u, args.kept) is not None]
        if not units:
            raise SystemExit(f"error: no forced run of this command is kept in {args.kept / 'runs'} yet")
    trained = 0 if args.finished_only else train_missing(units, cfg, args.jobs, args.kept, n_prompts=N_PROMPTS)
    curves = {f"{u['run']}/{u['folder'].name}": read_forced(u, args.kept) for u in units}
    forced = forced_table(units, {k: v for k, v in curves.items() if v is not None}, args.budget)
    runs = sorted({u["run"] for u in units}, key=lambda r: int(r.rsplit("seed", 1)[1]))
    plain = plain_table(read_kept_curves(SPECS[LONG_SPEC][0]), runs, args.budget)
    table = shares(forced, plain, args.budget)
    kept = {k: v for k, v in curves.items() if v is not None}
    judged = judged_contrasts(
        arm_curves(units, kept, read_kept_curves(SPECS[LONG_SPEC][0]), runs, args.budget), args.budget
    )
    command = (
        f"python -m analyses.forcing_control_8h --seeds {args.seeds} --cells {args.cells} --budget {args.budget} "
        f"--anneal-steps {args.anneal_steps}" + (" --finished-only" if args.finished_only else "")
    )
    paired = paired_line(paired_tests(forced, plain))
    block = docs_block(command, table, judged, trained, time.time() - started, paired, forced["train_seconds"].tolist())
    atomic_to_csv(forced, args.out / f"{NAME}.csv")
    atomic_to_csv(plain, args.out / f"{NAME}_plain.csv")
    atomic_to_csv(table, args.out / f"{NAME}_shares.csv")
    atomic_write_text(args.out / f"{NAME}.md", block)
    print(block)
    if args.update_docs:
        update_docs(block)
        update_docs(headline_line(table, judged, args.cells, paired), markers=HEADLINE)


if __name__ == "__main__":
    main()
