"""A population of runs as tables: the capability table checked, the point of emergence per run,
and :class:`PopulationResult` (the run, arm, test and Cox tables, saved and loaded).

The capability table (``curves``) has one row per (run, checkpoint step) and the columns
:data:`CURVE_COLUMNS`: the run's arm, name, seed and shape, the step (optimizer steps), the
probability of the answer and the greedy accuracy (fraction) there, and the run's step budget.
Per run, the point of emergence is the project's one rule (:func:`interp.emergence.held_crossing`:
threshold on greedy accuracy plus the hold) applied to the whole scanned curve; ``E`` is its post
step. A run whose rule finds no post, or a post after its budget, is censored at the budget: it
counts as "not emerged by step <budget>" and is never dropped.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path

import pandas as pd

from interp.core.objects import check_argument, results_equal
from interp.core.settings import StudyConfig
from interp.core.terms import DEFAULT_HOLD, DEFAULT_THRESHOLD
from interp.emergence import check_hold, held_crossing, no_room_to_hold
from interp.population import survival


class CapabilityTableError(ValueError):
    """A capability table (one row per run and checkpoint step) that the population statistics
    cannot read: empty, a missing or unknown column, a missing or out-of-range value, a run whose
    arm, seed, shape or budget changes between rows, a step listed twice, an arm of mixed shapes.

    Fix: give one row per (run, step) with the columns arm, run, seed, n_layers, d_model, n_heads,
    d_head, step, p_answer, accuracy and budget (steps and budgets integers >= 0, p_answer and
    accuracy in [0, 1]; one shape per arm, one budget per run); ``emergence population --budget N``
    supplies a missing budget column.
    """


#: What names a run and its shape: the first columns of the capability and run tables.
RUN_KEYS = ["arm", "run", "seed", "n_layers", "d_model", "n_heads", "d_head"]
#: Columns of the capability table, in order (one row per run and checkpoint step).
CURVE_COLUMNS = [*RUN_KEYS, "step", "p_answer", "accuracy", "budget"]
#: A run's two seeds set apart (issue 72): ``init_seed`` (its initial weights) and
#: ``data_order_seed`` (the order of its training data). A capability table may carry them; where
#: it does not, both are the run's ``seed`` (the runs trained before they were set apart).
SEED_COLUMNS = ["init_seed", "data_order_seed"]
#: Extra columns a capability table may carry: what ``emergence curve`` adds (kept, not read) and
#: :data:`SEED_COLUMNS` (carried into the run table).
OPTIONAL_CURVE_COLUMNS = ["task", "order", "model", *SEED_COLUMNS]
_INT_COLUMNS = ["seed", "n_layers", "d_model", "n_heads", "d_head", "step", "budget"]
_SHAPE = ["arm", "seed", "n_layers", "d_model", "n_heads", "d_head", "budget"]

#: Columns of the run table (:func:`runs_from_curves`), in order.
RUN_COLUMNS = [
    *RUN_KEYS, *SEED_COLUMNS, "E", "emerged", "censored_at", "budget", "pre_step", "post_step", "duration", "note",
]  # fmt: skip

#: The reference arm of each shipped population spec (the arm its pairwise tests compare with):
#: the d_model-64 4-head arm, the middle of the head-count axis (docs/results.md, section 4).
SPEC_REFERENCES = {
    "population": "neox-2l-64d-4h",
    "population-decoupled": "neox-2l-64d-4h-r8",
    "population-heads-dhead": "phi-2l-64d-4h-dh16-r8",
}


def default_reference(arms) -> str | None:
    """The reference arm of the shipped population spec whose sizes hold every arm in ``arms``
    (:data:`SPEC_REFERENCES`), when that reference is one of ``arms``; else None (then the first
    arm by shape is the reference). So ``emergence population --from-curves`` on the kept curves
    of a shipped population compares with the arm its docs do."""
    from interp.sources.catalogue import load_suite_spec

    arms = set(map(str, arms))
    for spec, reference in SPEC_REFERENCES.items():
        if reference in arms and arms <= {size.name for size in load_suite_spec(spec).sizes}:
            return reference
    return None


#: The tables of a :class:`PopulationResult`, in the order they are saved.
TABLES = ("runs", "arms", "tests", "cox", "contrasts", "grid", "km", "curves")


def check_curves(curves: pd.DataFrame, budget: int | None = None) -> pd.DataFrame:
    """The capability table checked and typed (a copy), sorted by arm, run and step.

    Args:
        curves: one row per (run, checkpoint step) with :data:`CURVE_COLUMNS` (``budget`` may be
            left out when ``budget`` is given); :data:`OPTIONAL_CURVE_COLUMNS` may be present.
        budget: a step budget (optimizer steps, >= 0) for every run, replacing the column.

    Raises:
        ValueError: ``budget`` is not an integer >= 0.
        CapabilityTableError: (a ``ValueError``) one line naming the problem: an empty table, missing or unknown columns
            (with the valid ones), a missing value, a non-integer or negative step or budget, an
            accuracy or p_answer outside [0, 1], a run whose arm, seed, shape or budget changes
            between rows, a step listed twice for one run, an arm whose runs differ in shape.
    """
    if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int) or budget < 0):
        raise ValueError(f"budget={budget!r}: must be an integer >= 0 (optimizer steps)")
    if not isinstance(curves, pd.DataFrame):
        raise CapabilityTableError(f"curves must be a pandas DataFrame with columns {', '.join(CURVE_COLUMNS)}")
    table = curves.copy()
    if budget is not None:
        table["budget"] = budget
    valid = CURVE_COLUMNS + OPTIONAL_CURVE_COLUMNS
    unknown = [str(c) for c in table.columns if c not in valid]
    missing = [c for c in CURVE_COLUMNS if c not in table.columns]
    if unknown or missing:
        parts = ([f"unknown column(s) {', '.join(map(repr, unknown))}"] if unknown else []) + (
            [f"missing column(s) {', '.join(map(repr, missing))}"] if missing else []
        )
        raise CapabilityTableError(f"capability table: {'; '.join(parts)}; valid columns: {', '.join(valid)}")
    if table.empty:
        raise CapabilityTableError(
            f"the capability table is empty: need one row per (run, step) with {', '.join(CURVE_COLUMNS)}"
        )
    for column in CURVE_COLUMNS:
        if table[column].isna().any():
            row = int(table[column].isna().to_numpy().argmax())
            raise CapabilityTableError(
                f"capability table: column {column!r} has a missing value (row {row} of the table)"
            )
    for column in SEED_COLUMNS:  # absent: both are the run's seed
        if column not in table.columns:
            table[column] = table["seed"]
    for column in [*_INT_COLUMNS, *SEED_COLUMNS]:
        values = pd.to_numeric(table[column], errors="coerce")
        bad = values.isna() | (values != values.round()) | (values < 0)
        if bad.any():
            raise CapabilityTableError(f"capability table: {_first_bad(table, bad, column)} is not an integer >= 0")
        table[column] = values.astype("int64")
    for column in ("p_answer", "accuracy"):
        values = pd.to_numeric(table[column], errors="coerce")
        bad = values.isna() | (values < 0) | (values > 1)
        if bad.any():
            raise CapabilityTableError(f"capability table: {_first_bad(table, bad, column)} is not in [0, 1]")
        table[column] = values.astype("float64")
    table["arm"], table["run"] = table["arm"].astype(str), table["run"].astype(str)
    changing = table.groupby("run", sort=False)[[*_SHAPE, *SEED_COLUMNS]].nunique().gt(1)
    if changing.any().any():
        run = changing.index[changing.any(axis=1)][0]
        column = changing.columns[changing.loc[run]][0]
        raise CapabilityTableError(f"capability table: run {run!r} has more than one {column} (one per run)")
    twice = table.duplicated(["run", "step"])
    if twice.any():
        row = table[twice].iloc[0]
        raise CapabilityTableError(f"capability table: run {row['run']!r} lists step {row['step']} twice")
    shapes = table.groupby("arm", sort=False)[["n_layers", "d_model", "n_heads", "d_head"]].nunique().gt(1)
    if shapes.any().any():
        arm = shapes.index[shapes.any(axis=1)][0]
        raise CapabilityTableError(f"capability table: arm {arm!r} holds runs of different shapes (one shape per arm)")
    return table.sort_values(["arm", "run", "step"], kind="stable").reset_index(drop=True)


def _first_bad(table: pd.DataFrame, bad: pd.Series, column: str) -> str:
    """``run 'x' step 100: accuracy=1.5``: the first bad value of ``column`` and where it is."""
    row = table[bad.to_numpy()].iloc[0]
    value = row[column].item() if hasattr(row[column], "item") else row[column]
    return f"run {str(row.get('run'))!r} step {row.get('step')}: {column}={value!r}"


def runs_from_curves(
    curves: pd.DataFrame, threshold: float = DEFAULT_THRESHOLD, hold: int = DEFAULT_HOLD
) -> pd.DataFrame:
    """The point of emergence of every run of a checked capability table (:func:`check_curves`).

    Args:
        curves: the checked capability table.
        threshold: greedy-accuracy threshold (fraction, in (0, 1]).
        hold: checkpoints after post that must stay at or above the threshold (>= 0).

    Returns:
        :data:`RUN_COLUMNS`, one row per run: ``pre_step`` / ``post_step`` (steps; ``<NA>`` when
        the rule finds none) from :func:`interp.emergence.held_crossing` on the run's whole curve
        (the study's one rule: a crossing with no room left to hold is none, the run is
        censored); ``emerged`` when a post exists at or before the budget; ``E`` = post (steps,
        NaN if censored); ``censored_at`` = the budget for a censored run (NaN otherwise);
        ``duration`` = ``E`` or the budget (what the survival statistics read); ``note`` = why a
        run with a crossing is censored when it has no room to hold
        (:func:`interp.emergence.no_room_to_hold`, the sentence the study's search warns with),
        else empty.

    Raises:
        ValueError: a threshold outside (0, 1], ``hold`` not an integer >= 0, a run with fewer
            than 2 checkpoints (named).

    Source: the point of emergence of Baherwani et al. 2026 with this toolkit's hold rule
    (:mod:`interp.emergence`).
    """
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"threshold={threshold!r} must be in (0, 1] (a greedy-accuracy fraction)")
    check_hold(hold)
    rows = []
    for run, curve in curves.groupby("run", sort=False):
        if len(curve) < 2:
            raise ValueError(f"run {run!r} has {len(curve)} checkpoint(s); the point of emergence needs at least 2")
        steps, accuracy = curve["step"].tolist(), curve["accuracy"].tolist()
        pre, post = held_crossing(steps, accuracy, threshold, hold)
        note = "" if post is not None else (no_room_to_hold(steps, accuracy, threshold, hold) or "")
        first = curve.iloc[0]
        budget = int(first["budget"])
        emerged = post is not None and post <= budget
        duration = float(post) if post is not None and emerged else float(budget)
        rows.append(
            {
                **{c: first[c] for c in RUN_KEYS},
                **{c: first[c] if c in curve.columns else first["seed"] for c in SEED_COLUMNS},
                "E": duration if emerged else math.nan,
                "emerged": emerged,
                "censored_at": math.nan if emerged else float(budget),
                "budget": budget,
                "pre_step": pre,
                "post_step": post,
                "duration": duration,
                "note": note,
            }
        )
    runs = pd.DataFrame(rows, columns=RUN_COLUMNS).astype({"pre_step": "Int64", "post_step": "Int64", "emerged": bool})
    rank = {arm: i for i, arm in enumerate(survival.arm_order(runs))}
    runs = runs.sort_values(["arm", "seed", "run"], key=lambda c: c.map(rank) if c.name == "arm" else c, kind="stable")
    return runs.reset_index(drop=True)


@dataclass(frozen=True, eq=False, repr=False)
class PopulationResult:
    """Survival statistics of the point of emergence over a population of seeds.

    Attributes:
        runs: one row per run (:data:`RUN_COLUMNS`; ``E`` and budgets in steps), with ``level``
            (mean greedy accuracy over the run's last 10 % of steps) and ``auc`` (area under its
            accuracy curve over its steps; both fractions,
            :func:`interp.population.contrast_stats.add_run_measures`).
        arms: one row per arm (:data:`interp.population.survival.ARM_COLUMNS`): runs, runs
            emerged, share never emerged by the budget with its 95 % Wilson interval, median
            ``E`` with its 95 % Brookmeyer-Crowley interval (steps).
        tests: log-rank tests (:data:`interp.population.survival.TEST_COLUMNS`): global, and each
            arm against ``reference``.
        cox: hazard ratio of emergence per doubling of heads, per (n_layers, d_model) group
            (:data:`interp.population.checks.CHECKED_COX_COLUMNS`), with what else varies with
            the head count and the model checks (proportional hazards, log-linearity).
        contrasts: each head count against the next fewer (hazard ratio with its interval,
            log-rank p, what else varies; :data:`interp.population.checks.CONTRAST_COLUMNS`).
        grid: the findings recomputed over the grid of rules (threshold x hold;
            :data:`interp.population.robust.GRID_COLUMNS`; empty when not computed).
        km: Kaplan-Meier curves per arm with pointwise 95 % intervals
            (:data:`interp.population.survival.KM_COLUMNS`; survival = probability of not yet
            having emerged).
        curves: the capability table the runs were read from (:data:`CURVE_COLUMNS`).
        threshold: greedy-accuracy threshold of the point of emergence (fraction).
        hold: checkpoints after post that had to stay at or above the threshold.
        reference: the arm of the pairwise log-rank tests.
        title: the page's title.
        mechanism: the paper's claim 2 measured on the emerged seeds, one row per (run, width,
            component) (:data:`interp.population.mechanism.ROW_COLUMNS`; ``recovered`` a fraction
            of the jump in p(answer)), or None; attached by :meth:`with_mechanism`.
    """

    runs: pd.DataFrame
    arms: pd.DataFrame
    tests: pd.DataFrame
    cox: pd.DataFrame
    contrasts: pd.DataFrame
    grid: pd.DataFrame
    km: pd.DataFrame
    curves: pd.DataFrame
    threshold: float = DEFAULT_THRESHOLD
    hold: int = DEFAULT_HOLD
    reference: str = ""
    title: str = "emergence over seeds"
    mechanism: pd.DataFrame | None = None

    __eq__ = results_equal

    @property
    def findings(self) -> list[str]:
        """The findings in words, computed from the tables (:func:`interp.population.findings.findings`)."""
        from interp.population.findings import findings

        return findings(self)

    @property
    def robustness(self) -> pd.DataFrame:
        """One row per finding: robust over the grid of rules or not, with a verdict
        (:func:`interp.population.robust.robustness`; empty when the grid was not computed)."""
        from interp.population.robust import robustness

        return robustness(self.grid)

    @cached_property
    def verdicts(self) -> list:
        """The judge's verdict on each of the paper's claims 1 and 4 that the population speaks to
        (:func:`interp.population.verdicts.claim_verdicts`; computed once per result: every contrast
        is read over the rule grid)."""
        from interp.population.verdicts import claim_verdicts

        return claim_verdicts(self)

    @property
    def claims(self) -> list[str]:
        """The paper's claims 1 and 4 answered in words from the tables: the headline lines of
        :func:`interp.population.statistics.claim_results` (one per claim the population speaks to,
        each starting with its claim: "Claim 1, seed:", "Claim 1, never:", "Claim 1, size (…):",
        "Claim 4, heads (…):")."""
        from interp.population.statistics import claim_results

        return [line for r in claim_results(self) for line in r.headline]

    @property
    def answer(self) -> pd.DataFrame:
        """The answer table (claim | the paper | evidence | verdict | robust? | what would decide it;
        :func:`interp.population.answer.population_answer`), which the page and the notebook display
        open on."""
        from interp.population.answer import population_answer

        return population_answer(self)

    @property
    def mechanism_claims(self) -> list[str]:
        """The paper's claim 2 over the seeds in words, one line per arm
        (the headline of :func:`interp.population.statistics.mechanism_result`); empty without
        :attr:`mechanism`."""
        from interp.population.statistics import mechanism_result

        found = mechanism_result(self)
        return [] if found is None else list(found.headline)

    def with_mechanism(self, rows: pd.DataFrame) -> PopulationResult:
        """This result with claim 2's per-run rows attached (its page and ``save`` then carry them).

        Args:
            rows: one row per (run, width, component) (:data:`interp.population.mechanism.ROW_COLUMNS`),
                as ``python -m analyses.population_mechanism`` keeps them (``rows.csv``).

        Raises:
            ValueError: a missing column (named), or an arm that is not one of this result's (named,
                with the valid arms).
        """
        from interp.population.mechanism import check_rows

        rows = check_rows(rows)
        unknown = sorted(set(rows["arm"]) - set(self.arms["arm"]))
        if unknown:
            raise ValueError(
                f"mechanism rows name arms {unknown} that are not in this result; valid: {list(self.arms['arm'])}"
            )
        order = {arm: i for i, arm in enumerate(self.arms["arm"])}  # the page lists arms as the tables do
        rows = rows.sort_values("arm", key=lambda a: a.map(order), kind="stable").reset_index(drop=True)
        return replace(self, mechanism=rows)

    def __repr__(self) -> str:
        n, k = len(self.runs), int(self.runs["emerged"].sum()) if len(self.runs) else 0
        head = (
            f"PopulationResult({len(self.arms)} arms, {n} runs, {k} emerged; "
            f"threshold {self.threshold:g}, hold {self.hold}; tables: {', '.join(TABLES)})"
        )
        return "\n".join([head, *(f"  {line}" for line in self.findings)])

    def _repr_html_(self) -> str:
        """Jupyter display: the page's content with plotly.js inlined (offline, self-contained)."""
        from interp.population.page import population_fragment

        return population_fragment(self, include_plotlyjs=True)

    def save_html(self, path: str | Path) -> Path:
        """Write the page alone (``population.html``'s content) to ``path``, atomically."""
        from interp.core.io import atomic_write_text
        from interp.population.page import population_page

        return atomic_write_text(Path(path), population_page(self))

    def save(self, folder: str | Path) -> dict[str, Path]:
        """Write every table as CSV and parquet, ``population.json`` (settings) and the page
        ``population.html``, each atomically (:mod:`interp.core.io`).

        Returns:
            {file name: path} of everything written.
        """
        from interp.core.io import atomic_to_csv, atomic_to_parquet, atomic_write_text
        from interp.population.page import population_page

        folder = Path(folder)
        written: dict[str, Path] = {}
        for name in TABLES:
            table = getattr(self, name)
            written[f"{name}.csv"] = atomic_to_csv(table, folder / f"{name}.csv")
            written[f"{name}.parquet"] = atomic_to_parquet(table, folder / f"{name}.parquet")
        if self.mechanism is not None:
            written["mechanism.csv"] = atomic_to_csv(self.mechanism, folder / "mechanism.csv")
            written["mechanism.parquet"] = atomic_to_parquet(self.mechanism, folder / "mechanism.parquet")
        else:  # an earlier save's claim 2 rows would otherwise load back with this result
            for name in ("mechanism.csv", "mechanism.parquet"):
                (folder / name).unlink(missing_ok=True)
        meta = {"threshold": self.threshold, "hold": self.hold, "reference": self.reference, "title": self.title}
        meta["findings"] = self.findings
        written["population.json"] = atomic_write_text(folder / "population.json", json.dumps(meta, indent=2) + "\n")
        written["population.html"] = atomic_write_text(folder / "population.html", population_page(self))
        return written

    @classmethod
    def load(cls, folder: str | Path) -> PopulationResult:
        """Read a result written by :meth:`save` (the parquet tables and ``population.json``).

        Raises:
            FileNotFoundError: ``folder`` lacks one of the files (named).
        """
        folder = Path(folder)
        for name in [*(f"{t}.parquet" for t in TABLES), "population.json"]:
            if not (folder / name).is_file():
                raise FileNotFoundError(f"{folder}: no {name} (a folder written by PopulationResult.save)")
        meta = json.loads((folder / "population.json").read_text(encoding="utf-8"))
        tables = {name: pd.read_parquet(folder / f"{name}.parquet") for name in TABLES}
        mechanism = folder / "mechanism.parquet"
        return cls(
            **tables,
            mechanism=pd.read_parquet(mechanism) if mechanism.is_file() else None,
            threshold=float(meta["threshold"]),
            hold=int(meta["hold"]),
            reference=str(meta["reference"]),
            title=str(meta["title"]),
        )


def population_from_curves(
    curves: pd.DataFrame,
    config: StudyConfig = StudyConfig(),
    budget: int | None = None,
    reference: str | None = None,
    title: str = "emergence over seeds",
    grid: bool = True,
) -> PopulationResult:
    """Survival statistics of the point of emergence from a capability table.

    Args:
        curves: one row per (run, checkpoint step), columns :data:`CURVE_COLUMNS` (steps in
            optimizer steps, ``p_answer`` a probability, ``accuracy`` a fraction, ``budget`` the
            run's step budget).
        config: the study settings (:class:`interp.core.settings.StudyConfig`): ``threshold``
            (greedy-accuracy fraction of the point of emergence) and ``hold`` (checkpoints after
            post that must stay at or above it; the rule of :mod:`interp.emergence`).
        budget: one step budget (>= 0) for every run, replacing the ``budget`` column.
        reference: the arm the pairwise log-rank tests compare with (default: the first arm by
            shape: fewest layers, narrowest, fewest heads).
        title: the page's title.
        grid: recompute the findings over the grid of rules (thresholds 0.4/0.5/0.6 x hold
            1/2/3, :mod:`interp.population.robust`; nine times the work); False: an empty grid.

    Returns:
        The :class:`PopulationResult`.

    Raises:
        TypeError: ``config`` is not a ``StudyConfig``.
        ValueError: a bad table (:func:`check_curves`) or reference arm (bad settings are
            refused when the ``StudyConfig`` is made).

    Source: point of emergence: Baherwani et al. 2026 with the hold rule; Kaplan & Meier 1958;
    Brookmeyer & Crowley 1982; Wilson 1927; Mantel 1966 / Peto & Peto 1972 (log-rank); Cox 1972
    with Efron 1977 ties (all through statsmodels, :mod:`interp.population.survival`).
    """
    check_argument(isinstance(config, StudyConfig), config, "population_from_curves: config", "a StudyConfig")
    threshold, hold = config.threshold, config.hold
    table = check_curves(curves, budget=budget)
    cell = statistics(table, threshold, hold, reference)
    if grid:
        from interp.population.robust import grid_table

        grid_rows = grid_table(table, reference, statistics)
    else:
        from interp.population.robust import GRID_COLUMNS

        grid_rows = pd.DataFrame(columns=GRID_COLUMNS)
    from interp.population.contrast_stats import add_run_measures

    # each run's level and area beside its E, so that a "never" says ceiling or delay
    cell["runs"] = add_run_measures(cell["runs"], table)
    return PopulationResult(
        **cell,
        grid=grid_rows,
        km=survival.kaplan_meier(cell["runs"]),
        curves=table,
        threshold=float(threshold),
        hold=hold,
        reference=reference if reference is not None else survival.arm_order(cell["runs"])[0],
        title=title,
    )


def statistics(table: pd.DataFrame, threshold: float, hold: int, reference: str | None) -> dict[str, pd.DataFrame]:
    """The run, arm, log-rank, Cox and contrast tables of a checked capability table at one rule
    (``threshold``, ``hold``): what :func:`population_from_curves` and each cell of the
    robustness grid (:func:`interp.population.robust.grid_table`) compute.

    Raises:
        ValueError: a bad threshold, hold or reference arm.
    """
    from interp.population.checks import checked_cox, head_contrasts

    runs = runs_from_curves(table, threshold=threshold, hold=hold)
    return {
        "runs": runs,
        "arms": survival.arm_table(runs, reference=reference),
        "tests": survival.logrank_tests(runs, reference=reference),
        "cox": checked_cox(runs),
        "contrasts": head_contrasts(runs),
    }
