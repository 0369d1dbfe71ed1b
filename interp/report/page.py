"""The self-contained HTML report: its sections (figures: :mod:`interp.report.figures`; the page
around them: :func:`interp.report.display.page_html`).

One concept: the report's sections in reading order (findings, summary, per-run sections,
scrubbers, the timeline link); each section is a short function here.

Plotly figures for Jupyter and for the report; circuitsvis attention patterns rendered offline
(:mod:`interp.report.display`: no CDN, no network probe). The report is one HTML file that opens
offline, with plotly.js and the circuitsvis bundle inlined once each.

Layout: a summary table first, every run's capability on one figure, then one part per run
made of the section functions in :data:`RUN_SECTIONS` (capability with the point of emergence,
Δp heatmap, top-K recovery, attention patterns pre vs post, the scrubber of every head's pattern
across checkpoints, and the component decomposition,
head-score curves, training loss and checkpoint hazards when a run carries them). To add a
section, write ``def my_section(run, ctx) -> Section | None`` and add it to ``RUN_SECTIONS``
(or ``(report, ctx)`` to ``PAGE_SECTIONS``); notebooks show the same sections.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio
from markupsafe import Markup
from torch import Tensor

from interp.core.settings import StudyConfig
from interp.core.templating import render, trusted
from interp.core.terms import DEFAULT_THRESHOLD
from interp.report.display import (  # noqa: F401  (PAGE_STYLE, page_html: interp.report.page's names too)
    PAGE_STYLE,
    STYLE,
    Assets,
    attention_fragment,
    figure_fragment,
    page_html,
    table_fragment,
)
from interp.report.figures import (  # noqa: F401  (the figures are read here too: interp.report.page's names)
    COMPONENT_LABELS,
    MAX_CURVE_POINTS,
    capability_figure,
    components_figure,
    components_topk_figure,
    delta_p_heatmap,
    loss_curve_figure,
    plot_text,
    recovery_figure,
    recovery_run_figure,
    run_capability_figure,
    thin_curve,
)
from interp.report.findings import (  # noqa: F401  (the summary table's names: interp.report.page's too)
    COMPONENT_WRAPPING,
    SHARED_SUMMARY_COLUMNS,
    SUMMARY_HEADERS,
    components_display,
    summary_fragment,
)
from interp.report.head_view import head_comparisons_html, head_scores_figure
from interp.report.loss_axes import capability_with_loss, run_losses
from interp.sources.catalogue import run_label

# A run section is ``(run, ctx) -> Section | None`` (one run's ``interp.main_job.report.RunAnalysis``;
# attributes a run lacks read as ``None``; ``None`` leaves the section out); a page section,
# ``(report, ctx) -> Section | None``, comes before the runs. Adding a section: its function in a list.


@dataclass
class Section:
    """One part of the report: a heading (text) and an HTML body built by the toolkit's templates
    (plotly / circuitsvis through ``ctx``; :func:`section_body`)."""

    heading: str
    body: str


@dataclass
class ReportContext:
    """What every section shares on one page.

    Attributes:
        assets: which JavaScript libraries the page already holds (each is inlined once).
        threshold: the accuracy threshold of the point of emergence (fraction).
        delta_p_bound: one colour range (±bound, metric units) for every per-head heatmap of the page.
        fraction_bound: one colour range (±bound, fraction of each run's jump) for every heatmap
            drawn relative to its run's jump (:func:`fraction_bound`); None: absolute units.
        timelines: the head timeline page of each run that has one (:func:`timeline_link_section`).
    """

    assets: Assets
    threshold: float = DEFAULT_THRESHOLD
    delta_p_bound: float | None = None
    fraction_bound: float | None = None
    timelines: dict | None = None  # {(model, seed): the run's timeline page, relative to the report}


def _run_label(run) -> str:
    """``pythia-70m seed 3 · repetition``: the run and the task of one analysis."""
    task = getattr(run, "task", None)
    return run_label(run.model, run.seed) + (f" · {task}" if task else "")


def _point(run) -> tuple[int | None, int | None]:
    point = getattr(run, "point", None)
    return (getattr(point, "pre_step", None), getattr(point, "post_step", None))


def section_body(*parts: str, caption: str | Markup | None = None) -> str:
    """A section's body: ``parts`` (HTML the toolkit built: figures, tables, views) and a caption
    under them (text, or ``Markup``; template ``report/templates/section_body.html.j2``)."""
    return render("report/templates/section_body.html.j2", parts=[trusted(p) for p in parts], caption=caption)


def _jump_note(run) -> Markup:
    """A warning sentence (``Markup``: appended to a caption, it escapes the caption's text) when
    the run's jump is below 3 standard errors (``jump_too_small``); empty otherwise."""
    heads = getattr(run, "heads", None)
    if heads is None or "jump_too_small" not in heads or not len(heads) or not bool(heads["jump_too_small"].iloc[0]):
        return Markup("")
    spec, _ = _metric_of(run)
    return Markup(
        " <b class='el-warning'>The jump is below 3 standard errors of the paired per-prompt difference "
        "(jump_too_small): {} and recovered compare against noise.</b>"
    ).format(spec.delta_label)


def capability_section(run, ctx: ReportContext) -> Section | None:
    """Capability curve of the run with the point of emergence marked."""
    curve = getattr(run, "curve", None)
    if curve is None or not len(curve):
        return None
    pre, post = _point(run)
    point = getattr(run, "point", None)
    fig = run_capability_figure(
        curve,
        pre,
        post,
        threshold=ctx.threshold,
        title=f"{plot_text(_run_label(run))}: capability per evaluated checkpoint",
        search=getattr(point, "search", "scan"),
        n_checkpoints=searchable_count(run),
    )
    from interp.core.terms import DEFAULT_HOLD, rule_text

    hold = getattr(point, "hold", DEFAULT_HOLD)
    if pre is not None and post is not None:
        where = f"The capability switches on between steps {pre} and {post} (shaded)."
    elif post is not None:
        where = f"The capability was on from the first checkpoint (step {post})."
    elif getattr(point, "note", ""):  # a crossing with no room to hold: said, not a bare "never"
        where = f"No point of emergence: {point.note}."
    else:
        where = "No checkpoint crosses the threshold and holds."
    if point is not None and not getattr(point, "monotone", True):
        where += " The accuracy is not monotone: it reaches the threshold and falls back, or drops by more than noise."
    scanned = getattr(point, "search", "bisection") == "scan"
    caption = (
        f"Greedy accuracy and mean p(answer) on the task's prompts at each checkpoint "
        f"{'(every searchable one)' if scanned else 'the search evaluated'}. {where} "
        f"Point of emergence: {rule_text(hold)}."
    )
    return Section("Capability and point of emergence", figure_fragment(fig, ctx.assets, caption))


def searchable_count(run) -> int | None:
    """How many checkpoints a run's search could evaluate (``searchable`` rows of its checkpoint
    table), or None when the run has no table."""
    table = getattr(run, "checkpoints", None)
    if table is None or "status" not in table.columns:
        return None
    return int((table["status"] == "searchable").sum())


def _metric_of(run):
    """The registry entry of a run's metric (``run.metric``; ``"p"`` when absent) and its unit."""
    from interp.core.metrics import metric_spec

    spec = metric_spec(getattr(run, "metric", None) or "p")
    return spec, getattr(run, "unit", None) or spec.unit


def run_jump(run) -> float | None:
    """The run's jump ``value_post - value_pre`` (metric units), None when unknown or zero."""
    pre, post = getattr(run, "value_pre", None), getattr(run, "value_post", None)
    if pre is None or post is None or not np.isfinite(post - pre) or post == pre:
        return None
    return float(post - pre)


def delta_p_section(run, ctx: ReportContext) -> Section | None:
    """The change of the metric per head (layer × head heatmap), as a fraction of the run's jump
    when it is known (one colour range for the page), labelled with the run's metric."""
    delta = getattr(run, "delta", None)
    if delta is None:
        return None
    pre, post = _point(run)
    spec, unit = _metric_of(run)
    d = spec.delta_label
    jump = run_jump(run) if ctx.fraction_bound is not None else None
    noisy = bool(_jump_note(run))
    fig = delta_p_heatmap(
        delta,
        title=f"{plot_text(_run_label(run))}: {d} per head"
        + (f" as a fraction of the run's jump ({jump:+.3f} {unit})" if jump is not None else f" ({unit})"),
        bound=None if noisy else ctx.fraction_bound if jump is not None else ctx.delta_p_bound,
        metric=spec.name,
        unit=unit,
        jump=jump,
    )
    scale = (
        f"Colour: {d} / jump (value_post − value_pre), the share of the jump each head's pattern recovers alone, "
        "on one range for every run of the page whose jump stands above its noise; hover for "
        f"{d} in {unit}."
        if jump is not None
        else "One colour range for every run of the page."
    )
    caption = (
        (
            f"{d} = mean {spec.label} when one head's attention pattern at step {post} is patched into step {pre}, "
            f"minus mean {spec.label} at step {pre} (metric {spec.name}, {unit}). "
        )
        + (
            f"Colour: {d} / jump on this run's own range (its jump is below 3 s.e.: its fractions are not "
            "comparable with other runs'); hover for the absolute value."
            if noisy and jump is not None
            else scale
        )
        + _jump_note(run)
    )
    return Section(f"{d} per head", figure_fragment(fig, ctx.assets, caption))


def topk_section(run, ctx: ReportContext) -> Section | None:
    """Share of the jump recovered by the top-K heads patched jointly."""
    topk = getattr(run, "topk", None)
    if topk is None or not len(topk):
        return None
    fig = recovery_run_figure(
        topk, title=f"{plot_text(_run_label(run))}: top-K heads patched jointly", noisy=bool(_jump_note(run))
    )
    spec, unit = _metric_of(run)
    caption = (
        f"recovered = ({spec.label} with the top K heads' patterns patched − value_pre) / (value_post − value_pre), "
        f"metric {spec.name} ({unit}); 1 means the K heads' patterns alone carry the whole jump. "
        "The band is the 95 % bootstrap interval over prompts (prompts resampled jointly for pre, post and patched)."
    ) + _jump_note(run)
    return Section("Top-K recovery", figure_fragment(fig, ctx.assets, caption))


def attention_section(run, ctx: ReportContext) -> Section | None:
    """Attention patterns of the top heads, pre vs post (circuitsvis, offline)."""
    patterns = getattr(run, "example_patterns", None)
    if patterns is None:
        return None
    caption = (
        "Each top head's pattern on prompt 0 at the pre step and at the post step (click a head to enlarge; "
        "rows are query positions, columns key positions)."
    )
    body = section_body(
        attention_fragment(run.example_tokens, patterns, run.example_names, ctx.assets),
        head_comparisons_html(run, ctx.assets, _run_label(run)),
        caption=caption,
    )
    return Section(f"Attention patterns of the top heads — {_run_label(run)} (prompt 0)", body)


def scrubber_section(run, ctx: ReportContext) -> Section | None:
    """Every head's attention pattern at every checkpoint the run evaluated, with a step slider
    (:mod:`interp.report.scrubber`), when the run recorded them."""
    from interp.report.scrubber import run_scrub_data, scrubber_fragment

    data = run_scrub_data(run, StudyConfig(threshold=ctx.threshold), n_prompts=REPORT_SCRUB_PROMPTS)
    if data is None:
        return None
    caption = Markup(
        "{} checkpoints the run evaluated (every checkpoint with a full scan), on the task's "
        "first {} prompts; <code>emergence scrub</code> shows every checkpoint of any run on "
        "more prompts. Rows are query positions, columns key positions; each head's title gives its Δp; "
        "← / → step once the scrubber has focus (click it)."
    ).format(len(data.steps), len(data.tokens))
    body = scrubber_fragment(data, ctx.assets, max_chars=REPORT_SCRUB_CHARS, delta_p_figure=False)
    return Section(f"Attention patterns across checkpoints — {_run_label(run)}", section_body(body, caption=caption))


#: The report's scrubbers stay light (one per run): prompts shown, and the budget of each one's
#: pattern bytes (base64 characters; coarser levels past it, see ``ScrubData.payload``).
REPORT_SCRUB_PROMPTS = 2
REPORT_SCRUB_CHARS = 30_000


def components_section(run, ctx: ReportContext) -> Section | None:
    """Component decomposition of the jump (``components.csv`` rows of the run), when computed."""
    components = getattr(run, "components", None)
    if components is None or not len(components):
        return None
    fig = components_figure(
        components, title=f"{plot_text(_run_label(run))}: share of the jump recovered, by component"
    )
    return Section(
        "Where the jump lives: component decomposition",
        section_body(
            figure_fragment(
                fig,
                ctx.assets,
                Markup(
                    "Each bar patches one kind of component of every head or layer from post into pre; "
                    "<b>all blocks at once</b> patches every layer's parameters together, and <b>interaction</b> = "
                    "all blocks − (QK + OV + MLP weights), per prompt (the norms' share included): a whole far "
                    "above every part means the jump lives in how the parts combine."
                )
                + _jump_note(run),
            ),
            # one line for the run's own columns; values with their intervals in one cell each
            table_fragment(components_display(components), fold_constant=True, wrap=COMPONENT_WRAPPING),
        ),
    )


def head_scores_section(run, ctx: ReportContext) -> Section | None:
    """Head scores per checkpoint (``head_scores.csv`` rows of the run), when computed."""
    scores = getattr(run, "head_scores", None)
    if scores is None or not len(scores):
        return None
    fig = head_scores_figure(scores, title=f"{plot_text(_run_label(run))}: head scores per checkpoint")
    return Section(
        "Head scores per checkpoint",
        figure_fragment(
            fig,
            ctx.assets,
            "One line per head and score (colour: the head; line style: the score, dotted previous-token, "
            "solid prefix-matching, dashed OV copying), at the checkpoints around the point of emergence. "
            "Click a legend entry to hide a line; double-click to show one head alone.",
        ),
    )


def training_loss_section(run, ctx: ReportContext) -> Section | None:
    """Training-loss curve (rows step, loss) of a run trained by the toolkit, when recorded."""
    loss = getattr(run, "training_loss", None)
    if loss is None or not len(loss):
        return None
    pre, post = _point(run)
    points = pd.DataFrame([{"pre_step": pre, "post_step": post, "emerged": pre is not None and post is not None}])
    fig = loss_curve_figure(
        thin_curve(loss),
        getattr(run, "curve", None),
        points,
        smooth=1,
        title=f"{plot_text(_run_label(run))}: training loss beside the capability",
    )
    return Section(
        "Training loss",
        figure_fragment(
            fig,
            ctx.assets,
            "Training loss (nats, left) and greedy accuracy "
            "(right) per step: the loss plateau before the jump shows here.",
        ),
    )


def timeline_link_section(run, ctx: ReportContext) -> Section | None:
    """A link to the run's head timeline page (every head's effect at every checkpoint pair,
    :mod:`interp.timeline`), when the report's folder holds one
    (:func:`interp.report.timeline_page.report_timeline_path`)."""
    href = (ctx.timelines or {}).get((run.model, run.seed))
    if href is None:
        return None
    body = Markup(
        "<p>Every head's pattern-patching effect at every checkpoint pair of this run, under its capability "
        "curve: <a href='{}'>the head timeline</a>. Its cells open this page's scrubber on that head at that "
        "step when the timeline was written with <code>--scrubber</code> naming this report.</p>"
    ).format(href)
    return Section(f"Head timeline — {_run_label(run)}", body)


def hazards_section(run, ctx: ReportContext) -> Section | None:
    """Checkpoint hazards of the run's per-step ``checkpoints`` table
    (:func:`interp.sources.checkpoint_table`): duplicate-weight groups left out of the search,
    steps missing from the schedule, a listing read from the cache."""
    table = getattr(run, "checkpoints", None)
    if table is None or "status" not in table.columns:
        # a run without the per-step table (built by hand, or saved before it existed): the
        # steps its search left out as duplicates are still a hazard worth showing
        excluded = sorted(getattr(getattr(run, "point", None), "excluded_steps", {}).items())
        if not excluded:
            return None
        rows = pd.DataFrame(
            [{"step": step, "status": f"duplicate of step {other}: left out of the search"} for step, other in excluded]
        )
        return Section("Checkpoint hazards", table_fragment(rows))
    from interp.sources.checkpoint_integrity import hazard_lines

    return Section("Checkpoint hazards", checkpoint_hazards_html(table, hazard_lines(table, _run_label(run))))


def readiness_section(run, ctx: ReportContext) -> Section | None:
    """Capability as trained and with ideal attention patterns, E and R marked (``run.readiness``,
    an :class:`interp.readiness.ReadinessResult`, when computed: it draws its own figure and
    caption, ``section_html(assets)``)."""
    result = getattr(run, "readiness", None)
    if result is None:
        return None
    return Section("Readiness: capability with ideal attention patterns", result.section_html(ctx.assets))


#: Sections shown for every run, in order.
RUN_SECTIONS: list[Callable] = [
    capability_section,
    delta_p_section,
    topk_section,
    attention_section,
    scrubber_section,
    timeline_link_section,
    components_section,
    head_scores_section,
    training_loss_section,
    readiness_section,
    hazards_section,
]


def summary_section(report, ctx: ReportContext) -> Section | None:
    """The summary table, one row per run, and what its columns mean (folded: one click opens it)."""
    legend = report.legend() if hasattr(report, "legend") else getattr(report, "summary_legend", "")
    folded = render("report/templates/columns_legend.html.j2", legend=trusted(legend)) if legend else ""
    return Section("Summary", section_body(summary_fragment(report.summary()), folded))


def findings_section(report, ctx: ReportContext) -> Section | None:
    """What the report found, per claim of the paper, computed from its tables
    (:func:`interp.report.findings.findings`; ``report.findings()`` when the report has it)."""
    from interp.report.findings import findings, findings_html

    if hasattr(report, "findings"):
        lines = report.findings()
    else:
        lines = findings(report.points, report.summary(), threshold=ctx.threshold)
    return Section("Findings", findings_html(lines)) if lines else None


def overview_section(report, ctx: ReportContext) -> Section | None:
    """Every run's capability curve, one figure per task (one panel per model)."""
    emergence, points = report.emergence, report.points
    if not len(emergence):
        return None
    tasks = list(dict.fromkeys(emergence["task"])) if "task" in emergence.columns else [None]
    parts = []
    for task in tasks:
        e = emergence if task is None else emergence[emergence["task"] == task]
        p = points if task is None else points[points["task"] == task]
        totals = {(r.model, r.seed): searchable_count(r) for r in report.runs}
        fig = capability_with_loss(e, p, run_losses(report.runs), threshold=ctx.threshold, totals=totals)
        if len(tasks) > 1:
            fig.update_layout(title=f"Task {task}: capability of every run")
        parts.append(
            figure_fragment(
                fig,
                ctx.assets,
                "One line per seed (points only for a run found by bisection: its evaluated checkpoints); ★ marks "
                "the post step of each run's point of emergence." + (f" Task: {task}." if len(tasks) > 1 else ""),
            )
        )
    return Section("Capability of every run", section_body(*parts))


#: Sections shown once per page, before the runs.
PAGE_SECTIONS: list[Callable] = [findings_section, summary_section, overview_section]


def fraction_bound(runs: Sequence) -> float | None:
    """Largest finite |delta / jump| over the ``runs`` whose jump stands above its noise (every
    run when none does): one colour range, in fractions of each run's jump, for the page's
    heatmaps; None when no run has a jump (the heatmaps then stay in metric units)."""
    fractions, noisy = [], []
    for r in runs:
        delta, jump = getattr(r, "delta", None), run_jump(r)
        if delta is None or jump is None:
            continue
        values = np.abs(_as_array(delta) / jump)
        if not np.isfinite(values).any():
            continue
        (noisy if _jump_note(r) else fractions).append(float(np.nanmax(values)))
    chosen = fractions or noisy
    return max(chosen) or 1.0 if chosen else None


def delta_p_bound(runs: Sequence) -> float:
    """Largest finite |delta| over ``runs`` (metric units; 1.0 when none): one colour range per page."""
    bounds = [
        float(np.nanmax(np.abs(_as_array(r.delta))))
        for r in runs
        if getattr(r, "delta", None) is not None and np.isfinite(_as_array(r.delta)).any()
    ]
    return max(bounds, default=1.0) or 1.0


def _as_array(values) -> np.ndarray:
    return np.asarray(values.detach().cpu() if isinstance(values, Tensor) else values, dtype=float)


def _sections(sections: Sequence[Section | None]) -> list[dict]:
    """The sections a template shows (those not ``None``), their bodies marked as the toolkit's HTML."""
    return [{"heading": sec.heading, "body": trusted(sec.body)} for sec in sections if sec is not None]


def run_anchor(run) -> str:
    """The HTML id of a run's part of the report: ``run-<model>-seed<seed>-<task>``."""
    task = getattr(run, "task", None)
    return re.sub(r"[^A-Za-z0-9_-]", "-", f"run-{run.model}-seed{run.seed}" + (f"-{task}" if task else ""))


def run_html(run, ctx: ReportContext, level: int = 2, sections: Sequence[Callable] | None = None) -> str:
    """One run's part of the page: a heading, then each section of ``sections`` (default RUN_SECTIONS)
    (template ``report/templates/run.html.j2``)."""
    return render(
        "report/templates/run.html.j2",
        anchor=run_anchor(run),
        level=level,
        label=_run_label(run),
        sections=_sections([fn(run, ctx) for fn in (sections or RUN_SECTIONS)]),
        patched=getattr(run, "heads", None) is not None,
    )


def report_body(report, ctx: ReportContext) -> str:
    """The page's content: PAGE_SECTIONS, a list of links to the runs, then every run's sections;
    with several tasks, one section per task holding its runs (template ``report/templates/report.html.j2``)."""
    tasks = list(dict.fromkeys(getattr(r, "task", None) for r in report.runs))
    if len(tasks) <= 1:
        groups = [{"anchor": None, "task": None, "runs": [trusted(run_html(r, ctx)) for r in report.runs]}]
    else:
        groups = [
            {
                "anchor": re.sub(r"[^A-Za-z0-9_-]", "-", f"task-{task}"),
                "task": str(task),
                "runs": [trusted(run_html(r, ctx, level=3)) for r in report.runs if getattr(r, "task", None) == task],
            }
            for task in tasks
        ]
    return render(
        "report/templates/report.html.j2",
        sections=_sections([fn(report, ctx) for fn in PAGE_SECTIONS]),
        links=[{"anchor": run_anchor(r), "label": _run_label(r)} for r in report.runs],
        groups=groups,
    )


def page_context(runs: Sequence, assets: Assets, threshold: float, timelines: dict | None = None) -> ReportContext:
    """The shared context of a page of ``runs``: the absolute and the jump-relative colour ranges,
    and the runs' timeline pages (``timelines``, :attr:`ReportContext.timelines`)."""
    return ReportContext(
        assets=assets,
        threshold=threshold,
        delta_p_bound=delta_p_bound(runs),
        fraction_bound=fraction_bound(runs),
        timelines=timelines,
    )


def report_page(report, timelines: dict | None = None) -> str:
    """The whole self-contained report page for a main-job report (:func:`page_html`).

    Args:
        report: an ``interp.main_job.report.MainJobReport`` (``title``, ``threshold``, ``runs``,
            ``summary()``, ``emergence``, ``points``).
        timelines: ``{(model, seed): href}``, the runs' head timeline pages relative to the
            page (:func:`timeline_link_section`); None: no links.
    """

    def body(assets: Assets) -> str:
        ctx = page_context(report.runs, assets, report.threshold, timelines)
        return report_body(report, ctx)

    return page_html(report.title, body)


def figures_page(
    title: str, figures: Sequence[tuple[str, go.Figure]], inline_plotly: bool = True, lead: Sequence[str] = ()
) -> str:
    """A self-contained page of plotly figures, one heading each, below ``lead`` (its finding in words,
    escaped); ``inline_plotly=False``: plotly.js from its CDN (a small page that needs the network)."""

    def body(assets: Assets) -> str:
        parts = [
            (h, trusted(pio.to_html(f, full_html=False, include_plotlyjs="cdn" if i == 0 else False, div_id=f"f{i}")))
            if not inline_plotly
            else (h, trusted(figure_fragment(f, assets)))
            for i, (h, f) in enumerate(figures)
        ]
        return render("report/templates/figures.html.j2", figures=parts, lead=lead)

    return page_html(title, body)


def report_fragment(report, assets: Assets) -> str:
    """The report's content for a notebook output (libraries from ``assets``, once per page)."""
    ctx = page_context(report.runs, assets, report.threshold)
    return render(
        "report/templates/report_fragment.html.j2",
        style=trusted(STYLE),
        title=report.title,
        body=trusted(report_body(report, ctx)),
    )


def checkpoint_hazards_html(checkpoints: pd.DataFrame, lines: Sequence[str]) -> str:
    """The report's checkpoint-hazard section: the hazard lines, then the rows that are not
    plainly searchable (duplicates and missing steps; ``checkpoints.csv`` has every step).

    Args:
        checkpoints: rows (model, seed, step, revision, tokens, digest, status, same_weights_as,
            listing), as :func:`interp.sources.checkpoint_table` labelled per run.
        lines: :func:`interp.sources.hazard_lines` of each run.
    """
    n = int((checkpoints["status"] == "searchable").sum()) if len(checkpoints) else 0
    flagged = checkpoints[checkpoints["status"] != "searchable"].drop(columns=["listing"], errors="ignore")
    shown = flagged.head(MAX_HAZARD_ROWS)
    whole = [c for c in shown.columns if shown[c].dtype.kind == "f" and (shown[c].dropna() % 1 == 0).all()]
    shown = shown.astype(dict.fromkeys(whole, "Int64"))  # steps and token counts as integers
    more = f"The first {len(shown)} of {len(flagged)} rows." if len(flagged) > len(shown) else None
    table = trusted(table_fragment(shown, caption=more)) if lines else ""
    return render("report/templates/hazards.html.j2", lines=list(lines), n_searchable=n, table=table)


MAX_HAZARD_ROWS = 60  #: rows of the hazards table shown on the page (checkpoints.csv has every step)
