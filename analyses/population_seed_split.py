"""Which part of the seed decides when (issue 72): one arm trained as 8 initialisation seeds × 8
data-order seeds, crossed, so that the spread of the point of emergence can be split between the
initial weights, the order of the data and their interaction.

A run's seed sets its initial weights (``torch.manual_seed``) and the order of its training data
(each step's batch from ``default_rng([data_seed, data-order seed, step])``) at once;
``population-seed-split`` (``interp/data/suites/population-seed-split.yaml``) sets them apart
(:attr:`interp.sources.catalogue.SuiteConfig.data_order_seeds`) on the decoupled population's
4-head arm (d_model 64, 4 heads of 16 dims, 8 rotary dimensions per head; 4000 steps, as there).
The 64 runs: ``neox-2l-64d-4h-r8-init{i}-data{d}``, and ``neox-2l-64d-4h-r8-seed{s}`` where the
two seeds are equal: that run is the same training as ``population-decoupled``'s run of that name
(same weights at every step), so its curve is taken from docs/data/population-decoupled when kept
there (one of them retrained and compared bit for bit: docs/data/population-seed-split/README.md).

Each run is a unit, as in :mod:`analyses.population`: trained in the kernel-pinned pool
(:func:`interp.sources.embedded.iter_suite`, resumable), evaluated at every checkpoint (the
repetition task, 256 prompts, seed 0) and its curve kept atomically in
``docs/data/population-seed-split/curves/<run>.csv`` (:data:`KEPT`; the population's columns
plus ``init_seed`` and ``data_order_seed``). A kept curve is never recomputed: the entry resumes
where it stopped, on any clone. The runs go in the order of :func:`run_order`: eight blocks of
eight, each block holding every initialisation seed and every data-order seed once (a Latin
square's diagonals), so that a stopped entry leaves a balanced part of the grid.

Usage: ``python -m analyses.population_seed_split [--runs a-b] [--init-seeds a-b]
[--data-seeds a-b] [--jobs N] [--finished-only] [--update-docs]``. ``--runs`` picks runs by their
index in :func:`run_order` (0-63); two processes over disjoint ranges (``--runs 8-35`` and
``--runs 36-63``) share the grid, one core each. ``--jobs N`` trains N runs of the selection at a
time in one process (default 1). Measured on this project's AMD EPYC (one process per core,
Python 3.11.7): see docs/data/population-seed-split/README.md.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from interp.cli.options import description
from interp.core.terms import DEFAULT_HOLD as HOLD
from interp.core.terms import DEFAULT_THRESHOLD as THRESHOLD
from interp.population.kept import (
    DOCS,
    POPULATION_KEPT,
    SEED_SPLIT_128D_KEPT,
    SEED_SPLIT_KEPT,
    SPECS,
    keep_runs,
    kept_curve,
    parse_seeds,
    read_kept_split_curves,
    split_curve_columns,
    whole_curve,
)
from interp.population.kept import curve_columns as population_columns
from interp.population.kept import update_docs as replace_block
from interp.population.seed_split import SPLIT, components, judged
from interp.population.statistics import seed_split_result

if TYPE_CHECKING:
    from interp.population.variance import VarianceComponents

ROOT = Path(__file__).resolve().parents[1]
NAME = "population_seed_split"
SPEC = "population-seed-split"
#: Where the evaluated curves are kept (committed): one CSV per run.
KEPT = SEED_SPLIT_KEPT
#: Prompts per checkpoint: those of the decoupled population, whose 4-head arm this is.
N_PROMPTS = 256
#: The population whose runs with equal seeds are these runs with equal seeds (same training).
SAME_RUNS = SPECS["population-decoupled"][0]
BEGIN, END = "<!-- population-seed-split:begin -->", "<!-- population-seed-split:end -->"


@dataclass(frozen=True)
class Grid:
    """One crossed grid: its suite ``spec``, where its curves are ``kept``, the population whose
    equal-seed runs are its diagonal (``same``, same training and prompts), the prompts per
    checkpoint (``n_prompts``, those of ``same``) and its docs/results.md block ``markers``."""

    spec: str
    kept: Path
    same: Path
    n_prompts: int
    markers: tuple[str, str]


#: The shipped grids, by suite spec (``--spec``): the decoupled population's 4-head arm (item 3)
#: and the population's d_model-128 4-head arm (issue 72 item 5; 64 prompts, as that population).
GRIDS = {
    SPEC: Grid(SPEC, KEPT, SAME_RUNS, N_PROMPTS, (BEGIN, END)),
    "population-seed-split-128d": Grid(
        "population-seed-split-128d",
        SEED_SPLIT_128D_KEPT,
        POPULATION_KEPT,
        SPECS["population"][1],
        ("<!-- population-seed-split-128d:begin -->", "<!-- population-seed-split-128d:end -->"),
    ),
}


#: Each grid's arm, as the sentences name it, and the arm's architecture.
ARMS = {SPEC: "64d", "population-seed-split-128d": "128d"}
ARMS_MODEL = {"64d": "neox-2l-64d-4h-r8", "128d": "neox-2l-128d-4h"}


def run_order(cfg) -> list[tuple]:
    """The runs ``(size, initialisation seed, data-order seed)`` in training order: for each
    offset ``b`` (0 first), every initialisation seed ``i`` with data-order seed ``(i + b) mod n``
    (the seeds as indices into ``cfg.seeds`` / ``cfg.data_order_seeds``, both of length n). Block
    0 is the diagonal, the runs whose two seeds are equal.

    Raises:
        ValueError: the suite does not cross equally many initialisation and data-order seeds.
    """
    inits, datas = list(cfg.seeds), list(cfg.data_order_seeds)
    if len(inits) != len(datas):
        raise ValueError(
            f"the suite spec has {len(inits)} initialisation seeds against {len(datas)} data-order seeds; "
            "the run order needs a square grid"
        )
    n = len(inits)
    return [(size, inits[i], datas[(i + b) % n]) for b in range(n) for size in cfg.sizes for i in range(n)]


def take_same_runs(cfg, kept: Path = KEPT, same: Path = SAME_RUNS) -> int:
    """Keep, for each run whose two seeds are equal and that has no curve here, the curve
    ``same`` holds under its name (the same training and evaluation; :data:`SAME_RUNS`), with
    the two seed columns added. Returns how many were taken; a damaged file there is not taken."""
    from interp.core.io import atomic_to_csv, read_kept_csv
    from interp.sources.catalogue import run_name

    taken = 0
    for size, seed, data in cfg.runs():
        name = run_name(size, seed, data)
        if seed != data or kept_curve(name, kept).is_file():
            continue
        path = kept_curve(name, same)
        curve = read_kept_csv(path, population_columns(), whole_curve, "is not a whole curve", "not taken")
        if curve is None or int(curve["budget"].iloc[0]) != cfg.steps_for(size):
            continue
        curve["init_seed"], curve["data_order_seed"] = seed, data
        kept_curve(name, kept).parent.mkdir(parents=True, exist_ok=True)
        atomic_to_csv(curve[split_curve_columns()], kept_curve(name, kept))
        taken += 1
        print(f"{name}: curve taken from {same.relative_to(ROOT) if same.is_relative_to(ROOT) else same}", flush=True)
    return taken


def train_and_keep(cfg, runs: list[tuple], jobs: int = 1, kept: Path = KEPT, n_prompts: int = N_PROMPTS) -> int:
    """Train and evaluate every run of ``runs`` (``(size, init seed, data-order seed)``, in this
    order) whose curve is not kept, ``jobs`` at a time (:func:`interp.population.kept.keep_runs`,
    the population's loop, with the two seed columns); returns how many curves were added."""
    return keep_runs(cfg, [runs[i : i + jobs] for i in range(0, len(runs), jobs)], jobs, kept, n_prompts, split=True)


def parse_indices(text: str, n: int, what: str) -> list[int]:
    """``"0-31"`` or ``"0,3,5-7"`` -> indices in ``0..n-1``, each once.

    Raises:
        ValueError: anything else, one line naming ``what`` and the valid range.
    """
    try:
        return parse_seeds(text, tuple(range(n)))
    except ValueError:
        raise ValueError(f"{what} {text!r} must be numbers or a-b ranges of 0-{n - 1}, e.g. 0-{n // 2 - 1}") from None


def select(cfg, runs: str = "", init_seeds: str = "", data_seeds: str = "") -> list[tuple]:
    """The runs of :func:`run_order` picked by ``--runs`` (indices into it), ``--init-seeds`` and
    ``--data-seeds`` (seeds of the suite), each a-b ranges or a list; all three must hold.

    Raises:
        ValueError: a selection outside the suite (one line, the valid range named).
    """
    order = run_order(cfg)
    chosen = parse_indices(runs, len(order), "--runs") if runs else list(range(len(order)))
    picked = [order[i] for i in chosen]
    if init_seeds:
        keep = set(_seeds(init_seeds, cfg.seeds, "--init-seeds"))
        picked = [r for r in picked if r[1] in keep]
    if data_seeds:
        keep = set(_seeds(data_seeds, cfg.data_order_seeds, "--data-seeds"))
        picked = [r for r in picked if r[2] in keep]
    return picked


def _seeds(text: str, valid: tuple[int, ...], what: str) -> list[int]:
    try:
        return parse_seeds(text, valid)
    except ValueError:
        raise ValueError(
            f"{what} {text!r} must be seeds or a-b ranges of {min(valid)}-{max(valid)}, e.g. {min(valid)}-{max(valid)}"
        ) from None


def e_grid(curves: pd.DataFrame) -> pd.DataFrame:
    """The point of emergence E (steps) of every kept run on the grid: rows the initialisation
    seed, columns the data-order seed, at the population's operating point (threshold
    :data:`analyses.population.THRESHOLD`, hold :data:`analyses.population.HOLD`); ``inf`` where
    the run is censored (not emerged by its budget), NaN where no curve is kept."""
    import math

    from interp.population.tables import check_curves, runs_from_curves

    runs = runs_from_curves(check_curves(curves), threshold=THRESHOLD, hold=HOLD)
    runs["E"] = runs["E"].where(runs["emerged"], math.inf)
    return runs.pivot(index="init_seed", columns="data_order_seed", values="E")


#: The per-run quantities split into initialisation, data order and interaction, in block order.
def components_table(found: dict) -> list[str]:
    """The components as a Markdown table: per quantity and component, the variance with its
    interval, the share with its interval, the REML check and the two tests' p values."""
    from interp.population.variance import COMPONENTS, QUANTITIES

    lines = [
        "| quantity | component | variance (95 % CI) | share (95 % CI) | REML | F-test p | permutation p |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for quantity in SPLIT:
        result = found[quantity]
        what, unit = QUANTITIES[quantity]
        for row in result.table.itertuples():
            p_f = "—" if row.component == COMPONENTS[2] else _p(row.p_f)
            p_perm = "—" if row.component == COMPONENTS[2] else _p(row.p_perm)
            lines.append(
                f"| {quantity} ({unit}) | {row.component} | {row.variance:.3g} ({row.lo:.3g}–{row.hi:.3g}) | "
                f"{100 * row.share:.0f} % ({100 * row.share_lo:.0f}–{100 * row.share_hi:.0f} %) | {row.reml:.3g} | "
                f"{p_f} | {p_perm} |"
            )
    return lines


def arms_sentence(here: VarianceComponents, there: VarianceComponents, arm_here: str, arm_there: str) -> str:
    """One sentence setting two arms' splits of log E side by side (``arm_here``, ``arm_there``:
    :data:`ARMS`' short names): each component's share with its interval on both, which main
    effects are significant on each (permutation p < the judge's
    :data:`interp.population.judge.ALPHA`), and whether each component's two intervals overlap."""
    from interp.population.judge import ALPHA
    from interp.population.variance import COMPONENTS

    def pct(split: VarianceComponents, component: str) -> str:
        a, lo, hi = split.share(component)
        return f"{100 * a:.0f} % ({100 * lo:.0f}–{100 * hi:.0f} %)"

    shares = "; ".join(f"{c} {pct(here, c)} against {pct(there, c)}" for c in COMPONENTS)
    tests = []
    for c in COMPONENTS[:2]:
        ps = [float(split.table.set_index("component").loc[c, "p_perm"]) for split in (here, there)]
        sig = [p < ALPHA for p in ps]
        where = (
            "both arms"
            if all(sig)
            else "neither arm"
            if not any(sig)
            else f"the {arm_here if sig[0] else arm_there} arm only"
        )
        tests.append(f"{c} carries a significant share on {where} (permutation p {_p(ps[0])} and {_p(ps[1])})")
    apart = [c for c in COMPONENTS if here.share(c)[1] > there.share(c)[2] or there.share(c)[1] > here.share(c)[2]]
    overlap = (
        "every component's two intervals overlap"
        if not apart
        else f"the intervals do not overlap for {', '.join(apart)}"
    )
    return (
        f"Beside the {arm_there} arm ({ARMS_MODEL[arm_there]}), the {arm_here} arm first: of the spread of log E, "
        f"{shares}; {'; '.join(tests)}; {overlap}."
    )


def _p(p: float) -> str:
    return f"{p:.3f}" if p >= 0.001 else "< 0.001"


def docs_block(curves: pd.DataFrame, n_planned: int, found: dict | None = None) -> str:
    """docs/results.md's block: how many runs are kept, E on the init × data-order grid, and once
    the grid is complete the variance components of log E, the level and the area under the curve
    (:func:`components`; ``found``: already computed)."""
    n = curves["run"].nunique() if len(curves) else 0
    head = (
        f"**Measured so far: {n} of the {n_planned} planned runs**; until all are in, nothing below is a "
        "population statistic."
        if n < n_planned
        else f"All {n_planned} planned runs measured."
    )
    lines = [head, ""]
    if not n:
        return "\n".join(lines) + "\n"
    grid = e_grid(curves)
    lines += [
        (
            f"E in steps (threshold {THRESHOLD}, hold {HOLD}; never: not emerged by the budget, censored "
            "there; —: not trained yet), rows the initialisation seed, columns the data-order seed:"
        ),
        "",
        "| init \\ data | " + " | ".join(str(c) for c in grid.columns) + " |",
        "|" + " --- |" * (len(grid.columns) + 1),
    ]
    for seed, row in grid.iterrows():
        cells = ["—" if pd.isna(v) else "never" if v == float("inf") else f"{v:.0f}" for v in row]
        lines.append(f"| {seed} | " + " | ".join(cells) + " |")
    if n < n_planned:
        return "\n".join(lines) + "\n"
    found = found if found is not None else components(curves)
    lines += ["", "Which part of the seed the spread goes with:", ""]
    lines += [f"- {found[q].sentence()}." for q in SPLIT]
    lines += ["", *components_table(found)]
    lines += [
        "",
        (
            "Method: two-way random-effects ANOVA without replication (statsmodels `anova_lm` mean squares; "
            "REML from statsmodels `MixedLM` with crossed variance components as a check), parametric-bootstrap "
            "intervals, restricted permutation tests (`interp.population.variance`). With one run per cell the "
            "interaction and run-level noise are one term; the trainer is deterministic, so it is the interaction."
        ),
    ]
    return "\n".join(lines) + "\n"


def update_docs(block: str, markers: tuple[str, str] = (BEGIN, END)) -> None:
    """Rewrite docs/results.md's block (``markers``, default :data:`BEGIN` … :data:`END`); where
    the page has no such block yet, say so and leave the page alone."""
    begin, end = markers
    text = DOCS.read_text() if DOCS.is_file() else ""
    if begin not in text or end not in text:
        print(f"note: {DOCS} has no {begin} ... {end} block; the block is in the entry's output folder only")
        return
    replace_block(block, markers)


def main(argv=None) -> None:
    from interp.sources.catalogue import load_suite_spec

    parser = argparse.ArgumentParser(prog=f"python -m analyses.{NAME}", description=description(__doc__))
    parser.add_argument(
        "--spec",
        default=SPEC,
        choices=sorted(GRIDS),
        help=f"which crossed grid (default {SPEC}; suites in interp/data/suites)",
    )
    parser.add_argument(
        "--out", type=Path, default=None, help=f"output folder (default results/analyses/{NAME}[-128d])"
    )
    parser.add_argument("--jobs", type=int, default=1, help="runs trained at a time in this process (default 1)")
    parser.add_argument("--runs", default="", help="only these runs, by index into the run order: a-b ranges (0-63)")
    parser.add_argument("--init-seeds", default="", help="only runs with these initialisation seeds (a-b ranges)")
    parser.add_argument("--data-seeds", default="", help="only runs with these data-order seeds (a-b ranges)")
    parser.add_argument("--sweep-dir", type=Path, default=None, help="(ignored: the runs live in the suite's cache)")
    parser.add_argument("--finished-only", action="store_true", help="the kept curves only; train nothing")
    parser.add_argument("--update-docs", action="store_true", help="rewrite docs/results.md's block")
    args = parser.parse_args(argv)
    if args.jobs < 1:
        raise SystemExit(f"error: --jobs={args.jobs} must be >= 1")
    grid = GRIDS[args.spec]
    out = args.out or ROOT / "results" / "analyses" / (NAME + args.spec.removeprefix(SPEC))
    cfg = load_suite_spec(grid.spec)
    try:
        chosen = select(cfg, args.runs, args.init_seeds, args.data_seeds)
    except ValueError as error:
        raise SystemExit(f"error: {error}") from None
    started = time.time()
    if not args.finished_only:
        take_same_runs(cfg, grid.kept, grid.same)
        train_and_keep(cfg, chosen, args.jobs, grid.kept, grid.n_prompts)
    curves = read_kept_split_curves(grid.kept)
    n_planned = len(cfg.run_names())
    n = curves["run"].nunique() if len(curves) else 0
    print(f"{n} of {n_planned} runs kept; {time.time() - started:.0f} s", flush=True)
    found = components(curves) if n == n_planned else None
    block = docs_block(curves, n_planned, found)
    first = GRIDS[SPEC]
    if found is not None and grid.spec != SPEC:  # a second arm: set beside the first where it is complete
        first_curves = read_kept_split_curves(first.kept)
        if first_curves["run"].nunique() == len(load_suite_spec(first.spec).run_names()):
            line = arms_sentence(found["log_E"], components(first_curves)["log_E"], ARMS[grid.spec], ARMS[SPEC])
            block = block.replace("\n\n| quantity |", f"\n- {line}\n\n| quantity |", 1)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{NAME}.md").write_text(block)
    print(block)
    if found is not None:
        write_outputs(found, out, grid.spec)
        (line,) = seed_split_result(found["log_E"], judged(found), spec=grid.spec).headline
        print(f"- {line}")
    if args.update_docs:
        update_docs(block, grid.markers)


def write_outputs(found: dict, out: Path, spec: str = SPEC) -> None:
    """The per-run table (``runs.csv``), the components (``components.csv``) and the figure
    (``seed_grid.html``: E on the init × data-order grid, opens offline) in ``out``."""
    import plotly.io as pio

    from interp.core.io import atomic_to_csv, atomic_write_text
    from interp.population.variance import seed_grid_figure

    atomic_to_csv(found["runs"], out / "runs.csv")
    tables = [found[q].table.assign(quantity=q) for q in SPLIT]
    atomic_to_csv(pd.concat(tables, ignore_index=True), out / "components.csv")
    fig = seed_grid_figure(found["runs"], title=f"{spec}: point of emergence E per initialisation and data-order seed")
    atomic_write_text(out / "seed_grid.html", pio.to_html(fig, include_plotlyjs=True, full_html=True))


if __name__ == "__main__":
    main()
