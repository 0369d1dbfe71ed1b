"""The main job's results: the table schema (the column lists), one run's analysis
(:class:`RunAnalysis`) and the report of many (:class:`MainJobReport`: tables, figures, the
self-contained ``report.html``, :meth:`MainJobReport.save` / :meth:`MainJobReport.load`).

The runner that fills them is :mod:`interp.main_job.runner` (``run``, ``analyse_run``). A column added to a table is added to its column list
here and to the driver's rows there.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import torch
from torch import Tensor

from interp.core.io import atomic_to_csv, atomic_to_parquet, atomic_write_text
from interp.core.objects import results_equal, short_repr
from interp.core.terms import DEFAULT_THRESHOLD
from interp.emergence import DEFAULT_HOLD, EmergencePoint
from interp.ranking import RankingFields
from interp.report import page as vis
from interp.report.findings import summary_legend
from interp.sources.catalogue import run_label

__all__ = [
    "CHECKPOINTS_COLUMNS",
    "EMERGENCE_COLUMNS",
    "HEADS_COLUMNS",
    "KEY_COLUMNS",
    "POINTS_COLUMNS",
    "TOPK_COLUMNS",
    "MainJobReport",
    "RunAnalysis",
    "labelled",
]

#: Columns naming what a row is about: the run and the task (``prepend_bos``: whether the task's
#: prompts began with a BOS token). Every per-task table starts with them.
KEY_COLUMNS = ["model", "seed", "task", "prepend_bos"]
EMERGENCE_COLUMNS = [*KEY_COLUMNS, "step", "accuracy", "p_answer"]
POINTS_COLUMNS = [
    *KEY_COLUMNS,
    "pre_step",
    "post_step",
    "emerged",
    "n_evaluations",
    "monotone",
    "threshold",
    "hold",
    "search",
    "note",
]
#: One row per checkpoint of a run: the same for every task, so no task column.
CHECKPOINTS_COLUMNS = [
    "model",
    "seed",
    "step",
    "revision",
    "tokens",
    "digest",
    "status",
    "same_weights_as",
    "detail",
    "listing",
]
HEADS_COLUMNS = [
    *KEY_COLUMNS,
    "layer",
    "head",
    "kv_head",
    "delta",
    "rank",
    "delta_attribution",
    "delta_lo",
    "delta_hi",
    "metric",
    "unit",
    "jump_too_small",
]
TOPK_COLUMNS = [*KEY_COLUMNS, "k", "value", "recovered", "recovered_lo", "recovered_hi", "metric", "unit"]


@dataclass
class _RunKey:
    """Which run an analysis is about: :class:`RunAnalysis`'s first fields (its repr starts with them)."""

    model: str
    seed: int
    model_id: str
    point: EmergencePoint
    curve: pd.DataFrame


@dataclass
class RunAnalysis(RankingFields, _RunKey):
    """Everything the main job computed for one run (one model at one seed) and one task.

    ``model``, ``seed``, ``model_id``, the point of emergence ``point`` and the capability
    ``curve``; once the run emerged, the head ranking's values, declared once in
    :class:`interp.ranking.RankingFields` (``value_pre`` / ``value_post`` the mean metric at the
    pre / post step, ``delta`` the ``Float[Tensor, "layer head"]`` per-head effect in the units
    of ``metric`` (``unit``; the paper's ``delta_p`` for ``"p"``), ``heads``, ``topk``, the top
    heads' example patterns, ...; keyword arguments); then the checkpoint table, the training
    loss, the decomposition, the head scores and the scrubber's patterns. ``repr`` is
    one screen; ``==`` compares every field by value.

    The scrubber's fields (:mod:`interp.report.scrubber`): ``scrub_steps`` the evaluated training
    steps, ``scrub_tokens`` the first prompts' token texts (``[prompt][pos]``), and
    ``scrub_patterns`` every head's pattern on them at each of those steps,
    ``UInt8[Tensor, "prompt step layer head query_pos key_pos"]`` = ``round(255 · p)`` (None
    when the scrubber was not asked for).
    """

    __eq__ = results_equal
    __repr__ = short_repr

    def _html(self, assets) -> str:
        """The run's summary row, then the report's sections for this run (libraries from ``assets``)."""
        from interp.report.display import style_tag
        from interp.report.findings import findings_html

        ctx = vis.page_context([self], assets, self.point.threshold)
        alone = MainJobReport(runs=[self], threshold=self.point.threshold, hold=self.point.hold)
        summary = vis.summary_fragment(alone.summary())
        heads = findings_html(
            [line for line in alone.findings() if line.startswith("Heads")]
        )  # which heads, what they do
        return f"<div class='el-run-analysis'>{style_tag()}{heads}{summary}{vis.run_html(self, ctx, level=3)}</div>"

    def _repr_html_(self) -> str:
        """Jupyter display (self-contained: carries the libraries it draws with)."""
        from interp.report.display import Assets

        return self._html(Assets())

    def save_html(self, path: str | Path) -> Path:
        """Write this run's part of the report as a self-contained page (atomic; opens offline)."""
        from interp.report.display import save_html

        return save_html(self, path, title=f"emergence-lens: {run_label(self.model, self.seed)}")

    def show_head(self, layer: int, head: int):
        """A top head's attention pattern on prompt 0 at the pre and post steps and the change
        post − pre, side by side (:func:`interp.report.head_view.head_comparison_figure`), from
        the patterns the run kept for display (its top heads).

        Returns:
            A plotly figure with three heatmaps, ``[query_pos, key_pos]`` each.

        Raises:
            ValueError: the run kept no patterns for ``L{layer}H{head}`` (the heads it kept are named).
        """
        from interp.report.head_view import head_comparison_figure

        prefix = f"L{layer}H{head} pre"
        index = next((i for i, name in enumerate(self.example_names) if name.startswith(prefix)), None)
        if index is None or self.example_patterns is None or index + 1 >= len(self.example_names):
            kept = sorted({name.split(" ")[0] for name in self.example_names})
            raise ValueError(
                f"{run_label(self.model, self.seed)} kept no patterns for L{layer}H{head}; it kept "
                f"{', '.join(kept) or 'none'} (rank_heads_between's show_head shows any head)"
            )
        pre_name, post_name = self.example_names[index], self.example_names[index + 1]
        return head_comparison_figure(
            self.example_patterns[index],
            self.example_patterns[index + 1],
            self.example_tokens,
            title=f"{run_label(self.model, self.seed)} L{layer}H{head} on prompt 0: attention before and after",
            pre_label=pre_name.split(" ", 1)[1],
            post_label=post_name.split(" ", 1)[1],
        )

    checkpoints: pd.DataFrame | None = None  # interp.sources.checkpoint_table: one row per step
    training_loss: pd.DataFrame | None = None  # step, loss (nats): runs our trainer wrote (loss.csv)
    components: pd.DataFrame | None = None
    head_scores: pd.DataFrame | None = None
    task: str = "repetition"
    prepend_bos: bool = False

    # the scrubber (interp.report.scrubber): each head's pattern on the task's first prompts at every
    # step the run evaluated, UInt8[Tensor, "prompt step layer head query_pos key_pos"] = round(255 p)
    scrub_steps: list[int] = field(default_factory=list)
    scrub_tokens: list[list[str]] = field(default_factory=list)
    scrub_patterns: Tensor | None = None


#: The title callers pass when they have none in mind: a report replaces it with :func:`default_title`.
GENERIC_TITLE = "emergence-lens report"


def default_title(runs: Sequence[RunAnalysis]) -> str:
    """A report's title from its runs: ``"emergence-lens: neox-2l-64d seeds 1, 2 · repetition"``
    (models with their seeds, then the tasks; ``"N runs of M models"`` past three models)."""
    if not runs:
        return "emergence-lens: no runs"
    models: dict[str, list] = {}
    for r in runs:
        models.setdefault(r.model, [])
        if r.seed not in models[r.model]:
            models[r.model].append(r.seed)
    if len(models) > 3:
        what = f"{len({(r.model, r.seed) for r in runs})} runs of {len(models)} models"
    else:
        what = "; ".join(
            f"{m} seed{'s' if len(seeds) > 1 else ''} {', '.join(str(s) for s in seeds)}" for m, seeds in models.items()
        )
    tasks = ", ".join(dict.fromkeys(str(r.task) for r in runs))
    return f"emergence-lens: {what} · {tasks}"


def _number(row, column: str) -> float | None:
    """``row[column]`` as a float, or None when the row, the column or the value is missing."""
    if row is None or column not in row or pd.isna(row[column]):
        return None
    return float(row[column])


def labelled(
    df: pd.DataFrame, model: str, seed: int, columns: Sequence[str], task: str = "repetition", prepend_bos: bool = False
) -> pd.DataFrame:
    """``df`` with the key columns in front (model and seed of the source, replacing any the table
    carried; task and prepend_bos where ``columns`` has them), restricted to ``columns``."""
    df = df.drop(columns=["model", "seed"], errors="ignore")
    for name, value in (("prepend_bos", prepend_bos), ("task", task), ("seed", seed), ("model", model)):
        if name in columns and name not in df.columns:
            df.insert(0, name, value)
    return df[list(columns)]


def _with_head_columns(heads: pd.DataFrame) -> pd.DataFrame:
    """A ranking stored before a column existed, with it: ``jump_too_small`` unknown (NA), ``kv_head``
    the head itself (rankings of grouped-query models carried ``kv_head`` from the start)."""
    if "jump_too_small" not in heads:
        heads = heads.assign(jump_too_small=pd.NA)
    if "kv_head" not in heads:
        heads = heads.assign(kv_head=heads["head"])
    return heads


def _run_labelled(df: pd.DataFrame, run: RunAnalysis, columns: Sequence[str]) -> pd.DataFrame:
    return labelled(df, run.model, run.seed, columns, task=run.task, prepend_bos=run.prepend_bos)


@dataclass
class MainJobReport:
    """Tables (``emergence``, ``points``, ``heads``, ``topk``) and figures of a main-job run."""

    runs: list[RunAnalysis]
    threshold: float = DEFAULT_THRESHOLD
    title: str | None = None  # None (or the generic GENERIC_TITLE): named after its runs, default_title()
    provenance: dict | None = None
    hold: int = DEFAULT_HOLD
    summary_legend: str | None = None  # None: summary_legend(self.metrics(), hold)

    __eq__ = results_equal

    def __post_init__(self) -> None:
        if self.title is None or self.title == GENERIC_TITLE:
            self.title = default_title(self.runs)

    def __repr__(self) -> str:
        runs = ", ".join(
            f"{r.model} seed {r.seed} {r.task}: "
            + (f"{r.point.pre_step}→{r.point.post_step}" if r.point.emerged else "not emerged")
            + (f" ({r.point.note})" if r.point.note else "")
            for r in self.runs[:8]
        )
        more = f", … {len(self.runs)} runs" if len(self.runs) > 8 else ""
        return (
            f"MainJobReport(title={self.title!r}, threshold={self.threshold:g}, hold={self.hold}, metric="
            f"{', '.join(self.metrics()) or '—'}, runs=[{runs}{more}])"
        )

    def metrics(self) -> list[str]:
        """The metrics of the runs' patching tables (one name per metric used)."""
        return list(dict.fromkeys(r.metric for r in self.runs if r.heads is not None))

    def legend(self) -> str:
        """What the summary table's columns mean (``summary_legend`` if set, else written for the
        report's metrics and hold rule from the registry)."""
        return self.summary_legend or summary_legend(self.metrics() or ["p"], self.hold)

    @property
    def emergence(self) -> pd.DataFrame:
        """Capability per evaluated checkpoint: model, seed, step, accuracy, p_answer."""
        frames = [_run_labelled(r.curve, r, EMERGENCE_COLUMNS) for r in self.runs]
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=EMERGENCE_COLUMNS)

    @property
    def points(self) -> pd.DataFrame:
        """Point of emergence per (run, task): ``POINTS_COLUMNS`` (model, seed, task, prepend_bos, pre_step,
        post_step, emerged, n_evaluations, monotone, threshold, hold, search, note: the sentence of
        :func:`interp.emergence.no_room_to_hold` for a crossing with no room to hold, else empty)."""
        rows = [
            {"model": r.model, "seed": r.seed, "task": r.task, "prepend_bos": r.prepend_bos, **r.point.as_row()}
            for r in self.runs
        ]
        return pd.DataFrame(rows, columns=POINTS_COLUMNS).astype({"pre_step": "Int64", "post_step": "Int64"})

    @property
    def heads(self) -> pd.DataFrame:
        """Head ranking per emerged (run, task): model, seed, task, prepend_bos, layer, head, delta (metric
        units), rank, ..., metric, unit."""
        frames = [
            _run_labelled(_with_head_columns(r.heads), r, HEADS_COLUMNS) for r in self.runs if r.heads is not None
        ]
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=HEADS_COLUMNS)

    @property
    def topk(self) -> pd.DataFrame:
        """Joint top-K patching per emerged (run, task): model, seed, task, prepend_bos, k, value (metric
        units), recovered, metric, unit."""
        frames = [
            _run_labelled(  # the key columns come from the run (labelled), never as empty ones from the reindex
                r.topk.reindex(columns=list(dict.fromkeys([*r.topk.columns, *TOPK_COLUMNS[len(KEY_COLUMNS) :]]))),
                r,
                TOPK_COLUMNS,
            )
            for r in self.runs
            if r.topk is not None
        ]
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=TOPK_COLUMNS)

    @property
    def checkpoints(self) -> pd.DataFrame:
        """One row per step of each run: step, revision, tokens, digest, status (searchable,
        duplicate-excluded, duplicate-kept-final, partial-duplicate, corrupt, needs-remote-code,
        missing),
        same_weights_as, detail, listing."""
        frames = [
            labelled(
                r.checkpoints if "detail" in r.checkpoints else r.checkpoints.assign(detail=""),
                r.model,
                r.seed,
                CHECKPOINTS_COLUMNS,
            )
            for r in self._one_per_run()
            if r.checkpoints is not None
        ]
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=CHECKPOINTS_COLUMNS)

    def _one_per_run(self) -> list[RunAnalysis]:
        """The first analysis of each run (the checkpoints are the same for every task)."""
        seen, out = set(), []
        for r in self.runs:
            if (r.model, r.seed) not in seen:
                seen.add((r.model, r.seed))
                out.append(r)
        return out

    @property
    def tasks(self) -> list[str]:
        """The tasks of the report, in the order of the runs."""
        return list(dict.fromkeys(r.task for r in self.runs))

    def hazards(self) -> list[str]:
        """One line per checkpoint hazard of each run (duplicates excluded, missing steps, a
        listing from the cache); empty when every run is clean."""
        from interp.sources.checkpoint_integrity import hazard_lines

        return [
            line
            for r in self._one_per_run()
            if r.checkpoints is not None
            for line in hazard_lines(r.checkpoints, run_label(r.model, r.seed))
        ]

    @property
    def components(self) -> pd.DataFrame:
        """The jump decomposed by component per emerged run (``interp.core.terms.COMPONENT_COLUMNS``)."""
        from interp.core.terms import COMPONENT_COLUMNS

        frames = [r.components for r in self.runs if r.components is not None]
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=COMPONENT_COLUMNS)

    @property
    def head_scores(self) -> pd.DataFrame:
        """Head scores at the checkpoints around each point (``interp.scores.HEAD_SCORE_COLUMNS``)."""
        from interp.scores import HEAD_SCORE_COLUMNS

        frames = [r.head_scores for r in self.runs if r.head_scores is not None]
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=HEAD_SCORE_COLUMNS)

    def summary(self) -> pd.DataFrame:
        """One row per (run, task): point of emergence, p before/after, top head, share recovered by top 2."""
        rows = []
        for r in self.runs:
            top = r.heads.iloc[0] if r.heads is not None and len(r.heads) else None
            rec2 = rec2_lo = rec2_hi = None
            if r.topk is not None and len(r.topk):
                at2 = r.topk[r.topk["k"] == min(2, int(r.topk["k"].max()))]
                if len(at2):
                    rec2 = float(at2["recovered"].iloc[0])
                    rec2_lo, rec2_hi = (
                        float(at2[c].iloc[0]) if c in at2 and pd.notna(at2[c].iloc[0]) else None
                        for c in ("recovered_lo", "recovered_hi")
                    )
            rows.append(
                {
                    "model": r.model,
                    "seed": r.seed,
                    "task": r.task,
                    "prepend_bos": r.prepend_bos,
                    "emerged": r.point.emerged,
                    "pre_step": r.point.pre_step,
                    "post_step": r.point.post_step,
                    "monotone": r.point.monotone,
                    "n_evaluations": r.point.n_evaluations,
                    "value_pre": r.value_pre,
                    "value_post": r.value_post,
                    # recovered divides by this jump: small against its noise, it is ill-conditioned
                    "jump": None if r.value_pre is None or r.value_post is None else r.value_post - r.value_pre,
                    "jump_se": getattr(r, "jump_se", None),
                    "top_head": None if top is None else f"L{int(top['layer'])}H{int(top['head'])}",
                    "top_delta": None if top is None else float(top["delta"]),
                    "top_delta_lo": _number(top, "delta_lo"),
                    "top_delta_hi": _number(top, "delta_hi"),
                    "recovered_top2": rec2,
                    "recovered_top2_lo": rec2_lo,
                    "recovered_top2_hi": rec2_hi,
                    "prescreen_spearman": r.rank_correlation_prescreen,
                    "prescreen_top2_found": r.prescreen_top2_found,
                    "metric": r.metric if r.heads is not None else None,
                    "unit": (getattr(r, "unit", None) or "probability") if r.heads is not None else None,
                    "jump_too_small": None
                    if top is None or r.heads is None or "jump_too_small" not in r.heads
                    else bool(top["jump_too_small"]),
                }
            )
        return pd.DataFrame(rows)

    def findings(self) -> list[str]:
        """What the report found, one sentence per claim of the paper (per task), computed from
        ``points`` and ``summary()`` (:func:`interp.report.findings.findings`): how many runs
        emerged and where; whether the top 2 heads recover most of the jump, with 95 % intervals,
        and which runs are too noisy to say; then each run's top 2 heads and their mechanism
        (induction, previous-token) at the post step. The report page opens with them; ``emergence run``
        and ``emergence demo`` print them under the summary table."""
        from interp.report.findings import findings

        return findings(
            self.points,
            self.summary(),
            threshold=self.threshold,
            hold=self.hold,
            heads=self.heads,
            head_scores=self.head_scores,
        )

    def capability_figure(self, metric: str = "accuracy", task: str | None = None):
        """Plotly figure: capability vs step per seed, point of emergence marked, for ``task``
        (default: the report's first task).

        Raises:
            ValueError: ``task`` is not a task of this report.
        """
        tasks = self.tasks
        task = task if task is not None else (tasks[0] if tasks else None)
        if tasks and task not in tasks:
            raise ValueError(f"task {task!r} is not in this report; its tasks: {', '.join(tasks)}")
        emergence, points = self.emergence, self.points
        if task is not None:
            emergence, points = emergence[emergence["task"] == task], points[points["task"] == task]
        totals = {(r.model, r.seed): vis.searchable_count(r) for r in self.runs}
        from interp.report.loss_axes import capability_with_loss, run_losses

        losses = run_losses(self.runs)
        return capability_with_loss(emergence, points, losses, metric=metric, threshold=self.threshold, totals=totals)

    def recovery_figure(self):
        """Plotly figure: recovered vs K for every emerged run."""
        return vis.recovery_figure(self.topk)

    def heatmaps(self, relative: bool = False) -> list:
        """Plotly heatmaps of the per-head delta (layer × head, metric units), one per emerged run,
        on one shared colour scale; titles and colour bars name the run's metric. ``relative``:
        colour by delta / jump (the fraction of each run's own jump; the report's choice), so runs
        whose jumps differ share a meaningful scale (:func:`interp.report.page.fraction_bound`)."""
        from interp.core.metrics import metric_spec

        tensors = [r.delta for r in self.runs if r.delta is not None]
        finite = [t[torch.isfinite(t)].abs() for t in tensors]
        bound = max((float(f.max()) for f in finite if f.numel()), default=1.0)
        fraction = vis.fraction_bound(self.runs) if relative else None
        figures = []
        for r in self.runs:
            if r.delta is None:
                continue
            jump = vis.run_jump(r) if fraction is not None else None
            figures.append(
                vis.delta_p_heatmap(
                    r.delta,
                    title=f"{vis.plot_text(run_label(r.model, r.seed))}: {metric_spec(r.metric).delta_label} "
                    f"({'fraction of the jump' if jump is not None else r.unit}) when each head's pattern at step "
                    f"{r.point.post_step} is patched into step {r.point.pre_step}",
                    bound=fraction if jump is not None else bound,
                    metric=r.metric,
                    unit=r.unit,
                    jump=jump,
                )
            )
        return figures

    def html(self, timelines: dict | None = None) -> str:
        """The self-contained report page (plotly.js and the circuitsvis bundle inlined once each;
        opens offline). Layout and sections: :mod:`interp.report.page` (``RUN_SECTIONS``).
        ``timelines``: ``{(model, seed): href}`` of the runs' head timeline pages (:meth:`save`
        finds them in its folder)."""
        return vis.report_page(self, timelines)

    def _html(self, assets) -> str:
        """The report's content (libraries from ``assets``)."""
        return vis.report_fragment(self, assets)

    def _repr_html_(self) -> str:
        """Jupyter display: the report's sections (self-contained: each output carries the
        libraries it draws with, so a cell run again or a saved notebook still draws)."""
        from interp.report.display import Assets

        return self._html(Assets())

    def save_html(self, path: str | Path) -> Path:
        """Write ``report.html`` alone (the page :meth:`html` returns) to ``path``, atomically."""
        return atomic_write_text(Path(path), self.html())

    def save(self, out_dir: str | Path) -> dict[str, Path]:
        """Write ``emergence``, ``points``, ``heads``, ``topk``, ``components``, ``head_scores`` and
        ``checkpoints`` as CSV and parquet, ``report.html``, ``provenance.json`` and ``state/``
        (what :meth:`load` reads back). A run whose head timeline page is in the folder
        (:func:`interp.report.timeline_page.report_timeline_path`) gets a link to it.

        Every file is written atomically (temporary file, then rename); the HTML is rendered in
        memory before anything is written, so a rendering error leaves the folder untouched.
        Without a provenance record (a report built by hand) one naming this call is written.
        """
        from interp.core.provenance import make_provenance, write_provenance
        from interp.report import report_state
        from interp.report.timeline_page import report_timeline_path

        out = Path(out_dir)
        timelines = {(r.model, r.seed): report_timeline_path(r.model, r.seed) for r in self.runs}
        page = self.html({key: href for key, href in timelines.items() if (out / href).is_file()})
        written = {}
        for name in ("emergence", "points", "heads", "topk", "components", "head_scores", "checkpoints"):
            table = getattr(self, name)
            written[f"{name}.csv"] = atomic_to_csv(table, out / f"{name}.csv")
            written[f"{name}.parquet"] = atomic_to_parquet(table, out / f"{name}.parquet")
        written["report.html"] = atomic_write_text(out / "report.html", page)
        written.update(report_state.save_report_state(self, out / "state"))
        record = self.provenance or make_provenance(
            "interp.main_job.report.MainJobReport.save",
            {"threshold": self.threshold, "hold": self.hold, "title": self.title},
        )
        written["provenance.json"] = write_provenance(out, record)
        return written

    @classmethod
    def load(cls, folder: str | Path) -> MainJobReport:
        """Bring back a report saved by :meth:`save`: every run's tables, tensors, point of
        emergence and example patterns, and the provenance record; its figures and ``html()``
        are then the saved report's.

        Raises:
            ValueError: ``folder`` holds no saved report state (``state/report.json``).
        """
        from interp.core.provenance import read_provenance
        from interp.report import report_state

        runs, meta = report_state.load_report_state(Path(folder) / "state", RunAnalysis)
        for run in runs:
            _upgrade_run(run)
        hold = DEFAULT_HOLD if meta.get("hold") is None else meta["hold"]  # reports saved before the rule had a hold
        return cls(
            runs=runs, threshold=meta["threshold"], hold=hold, title=meta["title"], provenance=read_provenance(folder)
        )


def _upgrade_run(run: RunAnalysis) -> None:
    """Add the ``unit`` column (from the registry) to the tables of a run saved before units were stored."""
    from interp.core.metrics import metric_spec

    if run.heads is not None and "unit" not in run.heads.columns:  # saved before units were stored
        run.unit = metric_spec(run.metric or "p").unit
    for name in ("heads", "topk", "components"):
        table = getattr(run, name, None)
        if table is None:
            continue
        if "unit" not in table.columns and "metric" in table.columns:
            table.insert(list(table.columns).index("metric") + 1, "unit", run.unit)
        setattr(run, name, table)
