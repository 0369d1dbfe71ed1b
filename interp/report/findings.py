"""The answer first: what a main-job report found, per claim of the paper, in a few sentences
computed from its tables (never typed by hand).

Baherwani et al. 2026 make two claims a main-job report can test (``/work/shared/PAPER.md``):

1. the capability appears at a seed-dependent step, or never (``points``);
2. when it appears, patching the attention patterns of a few heads from post into pre recovers
   most of the jump (``summary``: the share recovered by the top 2 heads, with its 95 % bootstrap
   interval, and whether the jump stands above its noise).

A run whose jump is below 3 standard errors of the paired per-prompt difference
(``jump_too_small``) is named as too noisy to say, never counted for or against a claim; a share
is judged against :data:`MOST` by its interval (it holds when the interval's lower end is at or
above it, does not hold when the upper end is below it, and is undecided otherwise).

:func:`findings` reads the tables :class:`interp.main_job.report.MainJobReport` gives
(``points``, ``summary()``); the report's first section and the CLI's lines under its summary
table print them (:func:`findings_html`, ``MainJobReport.findings()``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import pandas as pd

from interp.core.templating import render
from interp.core.terms import DEFAULT_HOLD, DEFAULT_THRESHOLD, induction_blocker, rule_text
from interp.sources.catalogue import run_label

__all__ = [
    "COMPONENT_WRAPPING",
    "MOST",
    "NOISY",
    "SHARED_SUMMARY_COLUMNS",
    "SUMMARY_HEADERS",
    "SUMMARY_ROW_COLUMNS",
    "components_display",
    "findings",
    "findings_html",
    "head_mechanism",
    "interval_text",
    "summary_display",
    "summary_fragment",
    "summary_legend",
]

#: "Most of the jump": the share the top 2 heads must recover for claim 2 to hold on a run.
MOST = 0.5


#: The mark a share or an effect carries when its run's jump is below 3 standard errors.
NOISY = "⚠ noisy"


def interval_text(value, lo=None, hi=None, digits: int = 3, signed: bool = False, noisy: bool = False) -> str:
    """``value [lo, hi]`` for a table cell (``—`` when the value is missing; the bounds left out
    when missing), followed by :data:`NOISY` when ``noisy``: every printed share or effect
    carries its interval and the noise flag."""
    if value is None or pd.isna(value):
        return "—"
    spec = f"{'+' if signed else ''}.{digits}f"
    text = format(float(value), spec)
    if lo is not None and hi is not None and pd.notna(lo) and pd.notna(hi):
        text += f" [{format(float(lo), spec)}, {format(float(hi), spec)}]"
    return text + (f" {NOISY}" if noisy else "")


def summary_display(summary: pd.DataFrame) -> pd.DataFrame:
    """``summary()`` for reading: ``top_delta`` and ``recovered_top2`` as text cells with their
    95 % interval (:func:`interval_text`), ``jump`` as ``jump ± s.e.``; ``recovered_top2`` and
    ``jump`` carry the noise mark where ``jump_too_small``, whose own column is then folded in,
    as are the bound columns; pre → post step and value as one cell each; the pre-screen's
    top-2 flag left to ``summary()`` and the CSVs (the page's table fits 1280 px)."""
    out = summary.copy()
    noisy = out["jump_too_small"].fillna(False).astype(bool) if "jump_too_small" in out else pd.Series(False, out.index)
    if "top_delta" in out:
        out["top_delta"] = [
            interval_text(r.get("top_delta"), r.get("top_delta_lo"), r.get("top_delta_hi"), signed=True)
            for _, r in out.iterrows()
        ]
    if "recovered_top2" in out:
        out["recovered_top2"] = [
            interval_text(r.get("recovered_top2"), r.get("recovered_top2_lo"), r.get("recovered_top2_hi"), 2, noisy=n)
            for (_, r), n in zip(out.iterrows(), noisy)
        ]
    if "jump" in out:
        out["jump"] = [
            "—"
            if r.get("jump") is None or pd.isna(r.get("jump"))
            else f"{r['jump']:.3f}"
            + (f" ± {r['jump_se']:.3f}" if pd.notna(r.get("jump_se")) else "")
            + (f" {NOISY}" if n else "")
            for (_, r), n in zip(out.iterrows(), noisy)
        ]
    if {"pre_step", "post_step"} <= set(out.columns):
        out.insert(
            list(out.columns).index("pre_step"),
            "steps",
            [_arrow(a, b, "{:.0f}") for a, b in zip(out["pre_step"], out["post_step"])],
        )
    if {"value_pre", "value_post"} <= set(out.columns):
        out.insert(
            list(out.columns).index("value_pre"),
            "values",
            [_arrow(a, b, "{:.3f}") for a, b in zip(out["value_pre"], out["value_post"])],
        )
    columns = ["top_delta_lo", "top_delta_hi", "recovered_top2_lo", "recovered_top2_hi", "jump_se"]
    columns += ["pre_step", "post_step", "value_pre", "value_post", "prescreen_top2_found"]
    return out.drop(columns=[*columns, *(["jump_too_small"] if "jump" in out else [])], errors="ignore")


#: The component table's value columns shown with their interval in one cell (name, digits), as
#: the summary prints the top head's Δ (3 digits) and the share the top 2 recover (2).
_COMPONENT_INTERVALS = (("value", 3), ("recovered", 2))
#: The component table's columns whose cells may wrap: the head lists (a value and its interval
#: stay on one line, so that at 800 px the heads wrap, not the numbers).
COMPONENT_WRAPPING = ("heads",)


def components_display(components: pd.DataFrame) -> pd.DataFrame:
    """A run's component table (``components.csv`` rows: ``target, scope, k, heads, value,
    value_lo, value_hi, recovered, recovered_lo, recovered_hi, ...``) for reading: ``value`` and
    ``recovered`` each as one text cell ``0.285 [0.224, 0.353]`` (:func:`interval_text`) under the header ``value [95 % CI]`` /
    ``recovered [95 % CI]``, their bound columns dropped; the other columns as they are. With
    ``table_fragment(..., fold_constant=True, wrap=COMPONENT_WRAPPING)`` the table fits an 800 px
    window (it was 928 px with the bounds in columns of their own, issue 71). A value column
    without both bounds is left as it is."""
    out = components.copy()
    for name, digits in _COMPONENT_INTERVALS:
        lo, hi = f"{name}_lo", f"{name}_hi"
        if not {name, lo, hi} <= set(out.columns):
            continue
        out[name] = [interval_text(r[name], r[lo], r[hi], digits) for _, r in out.iterrows()]
        out = out.drop(columns=[lo, hi]).rename(columns={name: f"{name} [95 % CI]"})
    return out


def _arrow(a, b, spec: str) -> str:
    """``a → b`` for a table cell (``—`` for a missing end)."""

    def one(x) -> str:
        return "—" if x is None or pd.isna(x) else spec.format(float(x))

    return f"{one(a)} → {one(b)}"


def _share(value, lo, hi) -> str:
    """``0.13 [0.09, 0.17]``, or ``0.65 (no interval)`` when the bounds are missing."""
    if lo is None or hi is None or pd.isna(lo) or pd.isna(hi):
        return f"{value:.2f} (no interval)"
    return f"{value:.2f} [{lo:.2f}, {hi:.2f}]"


def _names(labels: Sequence[str]) -> str:
    return ", ".join(labels)


def _claim_one(points: pd.DataFrame, threshold: float, hold: int) -> str:
    """Claim 1 from ``points`` (one task's rows): how many runs emerged, and at which steps per model."""
    n, emerged = len(points), points[points["emerged"].astype(bool)]
    parts = []
    for model, rows in points.groupby("model", sort=False):
        up = rows[rows["emerged"].astype(bool) & rows["post_step"].notna()]
        steps = sorted(int(s) for s in up["post_step"])
        out = rows[~rows["emerged"].astype(bool)]
        notes = out["note"].fillna("").astype(str) if "note" in out else pd.Series("", index=out.index)
        never = [str(int(s)) for s in out.loc[notes == "", "seed"]]
        # a crossing with no room to hold: not emerged by the last checkpoint, in the rule's sentence
        unroomed = [f"seed {int(s)} ({note})" for s, note in zip(out["seed"], notes) if note]
        where = f"post steps {', '.join(map(str, steps))}" if steps else "no post step"
        if len(rows) < 2:
            verdict = "one run: a worked example, not a spread"
        elif len(set(steps)) > 1:
            verdict = "the step differs by seed"
        elif steps and len(out):  # one step among the emerged seeds: they differ in whether, not when
            verdict = f"{len(steps)} of {len(rows)} seeds emerged: the seeds differ in whether they emerged"
        elif steps and not len(out):
            verdict = f"every seed at step {steps[0]}: no spread seen"
        else:
            verdict = "no seed emerged"
        parts.append(
            f"{model}: {where} over {len(rows)} seed(s)"
            + (f", never emerged: seed {', '.join(never)}" if never else "")
            + (f", not emerged by the last checkpoint: {'; '.join(unroomed)}" if unroomed else "")
            + f" ({verdict})"
        )
    medians = (
        "; median post step per model: "
        + ", ".join(
            f"{m} {int(pd.Series(r['post_step'].dropna().astype(int)).median())}"
            for m, r in emerged.groupby("model", sort=False)
            if r["post_step"].notna().any()
        )
        + " (whether larger models emerge earlier: compare these)"
        if points["model"].nunique() > 1 and len(emerged)
        else "; one model size: the size part of the claim is not tested"
    )
    return (
        f"Claim 1 (the capability appears at a seed-dependent step, or never): {len(emerged)} of {n} runs "
        f"emerged (greedy accuracy ≥ {threshold:g}, held for {hold} checkpoints); " + "; ".join(parts) + medians + "."
    )


def _claim_two(summary: pd.DataFrame) -> str:
    """Claim 2 from ``summary()`` rows (one task's): the top 2 heads' share, judged by its interval."""
    patched = summary[summary["recovered_top2"].notna()] if "recovered_top2" in summary else summary.head(0)
    noisy_mask = patched["jump_too_small"].fillna(False).astype(bool) if "jump_too_small" in patched else False
    noisy, measurable = patched[noisy_mask], patched[~noisy_mask]
    holds, fails, undecided = [], [], []
    shares = []
    for _, row in measurable.iterrows():
        lo, hi = row.get("recovered_top2_lo"), row.get("recovered_top2_hi")
        label = run_label(row["model"], row["seed"])
        shares.append(f"{label} {_share(row['recovered_top2'], lo, hi)}")
        if lo is not None and pd.notna(lo) and lo >= MOST:
            holds.append(label)
        elif hi is not None and pd.notna(hi) and hi < MOST:
            fails.append(label)
        else:
            undecided.append(label)
    head = f"Claim 2 (patching the top 2 heads' attention patterns from post into pre recovers most, ≥ {MOST:g}, of the jump): "
    n = len(measurable)
    if not n:
        verdict = "not testable here: no run's jump stands above its noise"
        if not len(patched):
            verdict = "not testable here: no run emerged between two checkpoints"
    else:
        low, high = measurable["recovered_top2"].min(), measurable["recovered_top2"].max()
        spread = f"{low:.2f}" if low == high else f"{low:.2f}–{high:.2f}"
        if len(fails) == n:
            verdict = f"does not hold on {n} of {n} runs where the jump is measurable: the top 2 recover {spread}"
        elif len(holds) == n:
            verdict = f"holds on {n} of {n} runs where the jump is measurable: the top 2 recover {spread}"
        else:
            verdict = (
                f"holds on {len(holds)}, does not hold on {len(fails)} and is undecided (interval across {MOST:g}) "
                f"on {len(undecided)} of {n} runs where the jump is measurable: the top 2 recover {spread}"
            )
        verdict += f" (95 % bootstrap intervals: {'; '.join(shares)})"
    if len(noisy):
        verdict += "; too noisy to say (jump below 3 standard errors): " + _names(
            [
                f"{run_label(r['model'], r['seed'])} ({_share(r['recovered_top2'], r.get('recovered_top2_lo'), r.get('recovered_top2_hi'))})"
                for _, r in noisy.iterrows()
            ]
        )
    not_patched = summary[~summary.index.isin(patched.index)]
    if len(not_patched):
        verdict += "; not patched (no point of emergence between two checkpoints): " + _names(
            [run_label(r["model"], r["seed"]) for _, r in not_patched.iterrows()]
        )
    return head + verdict + "."


#: A head's previous-token or prefix-matching score at the post step at or above this names its
#: mechanism (Olsson et al. 2022's scores, :mod:`interp.scores`: the mean attention on the
#: previous token, and on the token after the current token's earlier occurrence, over sequences
#: that repeat with period 20; a head spread evenly over the 20 to 40 positions it sees scores
#: 0.025-0.05, four to eight times less). Below it on both, the head is "neither previous-token
#: nor induction".
MECHANISM_SCORE = 0.2

#: Score name -> the mechanism it names (:mod:`interp.scores`).
MECHANISMS = {"prefix_matching": "induction", "previous_token": "previous-token"}


def _score_text(value: float) -> str:
    """A score to 2 decimals, or 3 where 2 would put it on the other side of
    :data:`MECHANISM_SCORE` (0.198 is "0.198", not "0.20", beside a rule of >= 0.2)."""
    text = f"{value:.2f}"
    return f"{value:.3f}" if (float(text) >= MECHANISM_SCORE) != (value >= MECHANISM_SCORE) else text


def head_mechanism(scores: pd.DataFrame, layer: int, head: int, step) -> str:
    """What head ``L{layer}H{head}`` does at ``step`` (its last scored step at or before it, else
    its first), from one run's ``head_scores`` rows (step, layer, head, score, value):
    ``"induction, prefix-matching 0.83"``, ``"previous-token, previous-token 0.91"``,
    ``"neither previous-token nor induction (prefix-matching 0.05, previous-token 0.12)"`` by
    :data:`MECHANISM_SCORE`; ``"not scored"`` without rows for the head. A head is called induction
    only where it can compose (:func:`interp.core.terms.induction_blocker`: layer >= 1 with a
    previous-token head in an earlier layer at that step), else its prefix-matching score is
    shown with why it is not induction (``"prefix-matching 0.24, not induction: layer 0: no
    earlier layer to compose with"``)."""
    mine = scores[(scores["layer"] == layer) & (scores["head"] == head) & scores["score"].isin(list(MECHANISMS))]
    if not len(mine):
        return "not scored"
    steps = sorted(int(s) for s in mine["step"].unique())
    at = max((s for s in steps if step is None or pd.isna(step) or s <= int(step)), default=steps[0])
    values = {r.score: float(r.value) for r in mine[mine["step"] == at].itertuples()}
    texts = {name: f"{name.replace('_', '-')} {_score_text(v)}" for name, v in values.items()}
    qualified = {name: v for name, v in values.items() if v >= MECHANISM_SCORE}
    if "prefix_matching" in qualified:  # induction only where it can compose (interp.core.terms)
        at_step = scores[(scores["step"] == at) & (scores["score"] == "previous_token")]
        previous = [int(r.layer) for r in at_step.itertuples() if float(r.value) >= MECHANISM_SCORE]
        blocker = induction_blocker(layer, previous)
        if blocker is not None:
            del qualified["prefix_matching"]
            texts["prefix_matching"] += f", not induction: {blocker}"
    if qualified:
        best = max(qualified, key=lambda name: qualified[name])
        return f"{MECHANISMS[best]}, {texts[best]}"
    both = ", ".join(texts[name] for name in sorted(texts))
    return f"neither previous-token nor induction ({both})"


def _heads_line(summary: pd.DataFrame, heads: pd.DataFrame, scores: pd.DataFrame | None, n: int = 2) -> str | None:
    """Which heads carry each run's jump: its top ``n`` heads by Δ (the ranking) and their
    mechanism at the post step (:func:`head_mechanism`); a noisy run is marked as such."""
    parts = []
    for _, row in summary.iterrows():
        mine = heads[(heads["model"] == row["model"]) & (heads["seed"] == row["seed"])]
        if "task" in heads and "task" in row and pd.notna(row.get("task")):
            mine = mine[mine["task"] == row["task"]]
        if not len(mine):
            continue
        run_scores = None
        if scores is not None and len(scores):
            labelled = {"model", "seed"} <= set(scores.columns)  # a one-run table may not name its run
            run_scores = (
                scores[(scores["model"] == row["model"]) & (scores["seed"] == row["seed"])] if labelled else scores
            )
        named = []
        for h in mine.sort_values("rank").head(n).itertuples():
            what = (
                head_mechanism(run_scores, int(h.layer), int(h.head), row.get("post_step"))
                if run_scores is not None
                else "not scored"
            )
            named.append(f"L{int(h.layer)}H{int(h.head)} (Δ {float(h.delta):+.3f}; {what})")
        noisy = bool(row.get("jump_too_small")) if pd.notna(row.get("jump_too_small")) else False
        parts.append(f"{run_label(row['model'], row['seed'])}{' ' + NOISY if noisy else ''}: {', '.join(named)}")
    if not parts:
        return None
    return (
        f"Heads (each run's top {n} by Δ, patched alone from post into pre, and what its attention does at the post "
        f"step: induction = prefix-matching, previous-token = previous-token score ≥ {MECHANISM_SCORE:g}): "
        + "; ".join(parts)
        + "."
    )


def findings(
    points: pd.DataFrame,
    summary: pd.DataFrame,
    threshold: float = DEFAULT_THRESHOLD,
    hold: int = 2,
    heads: pd.DataFrame | None = None,
    head_scores: pd.DataFrame | None = None,
) -> list[str]:
    """One sentence per claim of the paper (and per task when there are several), from the tables,
    then, when ``heads`` is given, one naming each run's top heads and their mechanism.

    Args:
        points: ``points.csv`` rows (``POINTS_COLUMNS``: model, seed, task, pre_step, post_step,
            emerged, ...).
        summary: ``MainJobReport.summary()`` rows (model, seed, task, recovered_top2 with
            recovered_top2_lo / _hi, jump_too_small, ...).
        threshold, hold: the point-of-emergence rule the runs used (fraction; checkpoints).
        heads: ``heads.csv`` rows (model, seed, task, layer, head, delta, rank); None: no heads line.
        head_scores: ``head_scores.csv`` rows (model, seed, step, layer, head, score, value):
            the mechanism of each named head (:func:`head_mechanism`); None: "not scored".

    Returns:
        Plain-text sentences (claim 1, claim 2, then the heads, for each task); empty for an
        empty report.
    """
    if not len(points):
        return []
    tasks = list(dict.fromkeys(points["task"])) if "task" in points else [None]
    lines = []
    for task in tasks:
        p = points if task is None else points[points["task"] == task]
        s = summary if task is None or "task" not in summary else summary[summary["task"] == task]
        prefix = f"Task {task}: " if len(tasks) > 1 else ""
        lines += [prefix + _claim_one(p, threshold, hold), prefix + _claim_two(s.reset_index(drop=True))]
        named = None if heads is None or not len(heads) else _heads_line(s.reset_index(drop=True), heads, head_scores)
        lines += [prefix + named] if named else []
    return lines


#: The verdict words of a finding, bold on the page.
VERDICTS = re.compile(
    r"(does not hold on \d+ of \d+ runs|holds on \d+ of \d+ runs|holds on \d+, does not hold on \d+|"
    r"not testable here|too noisy to say|the step differs by seed|the seeds differ in whether they emerged|"
    r"no spread seen)"
)


def _verdict_parts(line: str) -> list[tuple[str, bool]]:
    """``line`` cut into (text, is a verdict) pieces: the template bolds the verdicts."""
    parts, pos = [], 0
    for match in VERDICTS.finditer(line):
        parts += [(line[pos : match.start()], False), (match.group(0), True)]
        pos = match.end()
    return [*parts, (line[pos:], False)]


def findings_html(lines: Sequence[str]) -> str:
    """The findings box of a report page: the sentences as a list, their verdict words bold
    (template ``report/templates/findings.html.j2``; text escaped: run names and task names are data)."""
    if not lines:
        return ""
    return render("report/templates/findings.html.j2", lines=[_verdict_parts(line) for line in lines])


#: Headers of the summary table on a page (``MainJobReport.summary()`` keeps the
#: column names): words that wrap between one another, never inside one.
SUMMARY_HEADERS = {
    "prepend_bos": "BOS prepended",
    "pre_step": "pre step",
    "post_step": "post step",
    "steps": "pre → post step",
    "values": "pre → post value",
    "n_evaluations": "checkpoints evaluated",
    "value_pre": "pre value",
    "value_post": "post value",
    "top_head": "top head",
    "top_delta": "top Δ [95 % CI]",
    "recovered_top2": "recovered by top 2 [95 % CI]",
    "jump": "jump ± s.e.",
    "prescreen_spearman": "pre-screen ρ",
    "prescreen_top2_found": "pre-screen found top 2",
    "jump_too_small": "jump below 3 s.e.",
}


#: Summary columns that, when every row of a page's table holds the same value, are stated once
#: above the table instead of repeated in a column (the table then fits a 1280 px page).
SHARED_SUMMARY_COLUMNS = ("task", "prepend_bos", "metric", "unit")


#: Summary columns in a run's row, in this order where present; every other column goes to the
#: details line under the row (:func:`summary_fragment`): the table then fits an 800 px window.
SUMMARY_ROW_COLUMNS = ("model", "seed", "task", "emerged", "steps", "top_head", "top_delta", "recovered_top2")
#: Row columns whose cells may wrap, between a value and its interval only (the page's table
#: narrows to the window before it scrolls).
_WRAPPING = ("steps", "top_delta", "recovered_top2")


def _keep_together(text: str) -> str:
    """``+0.023 [+0.010, +0.037] ⚠ noisy`` with no-break spaces inside the interval and the mark,
    so that a cell wraps only before ``[`` or ``⚠`` (or around ``→``)."""
    return text.replace(", ", ",\u00a0").replace(f"{NOISY[0]} ", f"{NOISY[0]}\u00a0")


def summary_fragment(summary: pd.DataFrame, caption: str | None = None) -> str:
    """The summary table (``MainJobReport.summary()``) with readable headers (:data:`SUMMARY_HEADERS`):
    one row per run with the columns of :data:`SUMMARY_ROW_COLUMNS` (the run, whether and where it
    emerged, its top head and the share the top 2 recover), and under it a details line naming the
    rest (monotone, checkpoints evaluated, pre → post value, jump ± s.e., pre-screen ρ, ...). With
    several rows, the columns of :data:`SHARED_SUMMARY_COLUMNS` that hold one value in every row
    are named once in a line above the table. Text is escaped (template
    ``report/templates/summary.html.j2``)."""
    from interp.core.html_fragments import format_value

    shared = {}
    if len(summary) > 1:
        for column in SHARED_SUMMARY_COLUMNS:
            if column in summary and summary[column].astype(str).nunique() == 1:
                shared[SUMMARY_HEADERS.get(column, column)] = summary[column].iloc[0]
        summary = summary.drop(columns=[c for c in SHARED_SUMMARY_COLUMNS if SUMMARY_HEADERS.get(c, c) in shared])
    shown = summary_display(summary)
    in_row = [c for c in SUMMARY_ROW_COLUMNS if c in shown.columns]
    details = [c for c in shown.columns if c not in in_row]
    rows = [
        (
            [(_keep_together(format_value(row[c])), c in _WRAPPING) for c in in_row],
            [(SUMMARY_HEADERS.get(c, c), format_value(row[c])) for c in details],
        )
        for _, row in shown.iterrows()
    ]
    return render(
        "report/templates/summary.html.j2",
        shared=[(str(k), str(v)) for k, v in shared.items()],
        headers=[SUMMARY_HEADERS.get(c, c) for c in in_row],
        rows=rows,
        caption=caption,
    )


def summary_legend(metrics: Sequence[str] = ("p",), hold: int = DEFAULT_HOLD) -> str:
    """What the summary table's columns mean, by the headers the page shows
    (:data:`interp.report.page.SUMMARY_HEADERS`): the point-of-emergence rule with ``hold`` filled
    in, and the metrics of its rows named from the registry (:mod:`interp.core.metrics`)."""
    from interp.core.metrics import metric_spec

    names = list(dict.fromkeys(m for m in metrics if m)) or ["p"]
    described = "; ".join(f"{n} = {metric_spec(n).description} ({metric_spec(n).unit})" for n in names)
    label = metric_spec(names[0]).label if len(names) == 1 else "the metric"
    return render("report/templates/legend.html.j2", rule=rule_text(hold), described=described, label=label)
