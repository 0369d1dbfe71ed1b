"""The statistics of a population as :class:`~interp.population.result.StatResult`\\ s, one
function each: what the population page shows, in its order (:data:`POPULATION_STATISTICS`), and
the statistics read from other inputs (claim 2 at the largest-jump pair, a forecast, the seed
decomposition).

A population statistic is a function ``(PopulationResult) -> StatResult | None`` (None: the
population holds nothing for it, e.g. no rule grid computed, no claim 2 rows attached). The page
(:func:`interp.population.page.population_fragment`) renders every one by the same loop, and its
headline (the verdict lines above the tables) from the same results
(:func:`interp.population.result.headline`: the paper's claims, :func:`claim_results`, then each
shown statistic's :attr:`~interp.population.result.StatResult.headline`), so a new statistic is one
function here (or anywhere, passed as ``statistics=``) and its test; the numbers
come from the tables of :class:`interp.population.tables.PopulationResult`, the words from the
judge (:mod:`interp.population.judge`), never typed here. The cells are the numbers as the docs
print them (:func:`interp.population.findings.fmt_p`, :func:`~interp.population.findings.fmt_steps`).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import pandas as pd
from markupsafe import Markup

from interp.population.figures import km_figure, strip_figure
from interp.population.findings import fmt_p, fmt_steps
from interp.population.judge import Verdict, judge_claim
from interp.population.result import StatResult

__all__ = [
    "CLAIMS_LEAD",
    "MECHANISM_LEAD",
    "POPULATION_STATISTICS",
    "arms_result",
    "claim2_pair_result",
    "claim2_widths_result",
    "claim_results",
    "contrasts_result",
    "cox_result",
    "forecast_result",
    "grid_result",
    "km_result",
    "logrank_result",
    "mechanism_result",
    "seed_split_result",
    "strip_result",
]

#: A frame with no columns: the section shows its figure, not a table.
_NO_TABLE = pd.DataFrame()
#: The sentence above the claims' lines in the page's headline (:func:`claim_results`).
CLAIMS_LEAD = "The paper's claims 1 and 4 (Baherwani et al. 2026) over these seeds:"
#: The sentence above claim 2's lines over interval widths in the page's headline (:func:`claim2_widths_result`).
MECHANISM_LEAD = Markup(
    "The paper's claim 2 (a few heads' patterns carry the jump) over the emerged seeds, by patching "
    '(<a href="#mechanism">the figure</a>):'
)


def p_cell(p: float) -> str:
    """A p-value for a table cell: ``0.0037``, ``< 0.001``, ``—`` (NaN)."""
    return "—" if math.isnan(p) else fmt_p(p).removeprefix("p = ").removeprefix("p ")


def interval(value: float, lo: float, hi: float, fmt: Callable[[float], str]) -> str:
    """``"2300 (1900–2800)"``: a value with its interval, each written by ``fmt``."""
    return f"{fmt(value)} ({fmt(lo)}–{fmt(hi)})"


def _ratio(hr: float, lo: float, hi: float, prefix: str = "×") -> str:
    return "—" if math.isnan(hr) else f"{prefix}{hr:.2f} ({lo:.2f}–{hi:.2f})"


def _joined(*notes) -> str:
    return "; ".join(x for x in notes if isinstance(x, str) and x)


def km_result(result) -> StatResult:
    """Kaplan-Meier curves per arm (``result.km``: :data:`interp.population.survival.KM_COLUMNS`,
    survival a probability, steps), drawn with their pointwise 95 % bands."""
    return StatResult(
        "survival",
        "Kaplan–Meier: share of seeds not yet emerged",
        result.km,
        cells=_NO_TABLE,
        figure=km_figure(result),
        caption="Step functions: the Kaplan–Meier estimate per arm (Kaplan & Meier 1958); bands: pointwise "
        "95 % intervals (Greenwood variance, log-log transform); ticks: runs censored at their budget.",
    )


def strip_result(result) -> StatResult:
    """The point of emergence per seed (``result.runs``: E or the budget, steps) beside each arm's
    median E with its 95 % interval."""
    return StatResult(
        "strip",
        "Point of emergence per seed",
        result.runs[["arm", "run", "seed", "emerged", "E", "censored_at"]],
        cells=_NO_TABLE,
        figure=strip_figure(result),
        caption="One marker per seed: E (steps) for a seed that emerged; an open triangle at the budget for a "
        "seed that never did. Black: the arm's median E with its 95 % interval (Brookmeyer & Crowley 1982), drawn "
        "only where the median is reached; an interval whose upper end is not reached runs to the budget.",
    )


def _median_text(a: dict) -> str:
    if a["n_emerged"] == 0 or math.isnan(a["median_E"]):
        return "not reached: " + ("no seed emerged" if a["n_emerged"] == 0 else "no more than half emerged")
    return interval(a["median_E"], a["median_E_lo"], a["median_E_hi"], fmt_steps)


def arms_result(result) -> StatResult:
    """One row per arm (``result.arms``: :data:`interp.population.survival.ARM_COLUMNS`): shape,
    budget, runs emerged, share never emerged (Wilson) and median E (Brookmeyer-Crowley)."""
    pct = lambda x: f"{100 * x:.0f} %"  # noqa: E731
    rows = []
    for a in result.arms.to_dict("records"):
        rows.append(
            {
                "arm": a["arm"],
                "layers": a["n_layers"],
                "d_model": a["d_model"],
                "heads": a["n_heads"],
                "d_head": a["d_head"],
                "rotary dims per head": a["rotary_dims"],
                f"against {result.reference}: compared": a["compared"],
                "also varies": (a["also_varies"] or "nothing") if a["compared"] != "reference" else "",
                "budget (steps)": a["budget"],
                "emerged / runs": f"{a['n_emerged']} / {a['n_runs']}",
                "never emerged (95 % CI)": interval(
                    a["share_never_emerged"], a["share_never_lo"], a["share_never_hi"], pct
                ),
                "median E, steps (95 % CI)": _median_text(a),
            }
        )
    caption = Markup(
        "Share never emerged: Wilson 1927 score interval. Median E: the first step where the Kaplan–Meier "
        "estimate falls below 0.5, with the Brookmeyer–Crowley interval (complementary log-log scale); the same "
        "convention everywhere. Rotary dims per head: the arm name's <code>-r&lt;N&gt;</code>, else Pythia's 25 % of "
        "d_head. Compared / also varies: the first shape factor in which the arm differs from the reference, and "
        "what else differs with it; a contrast that varies more than one thing is confounded."
    )
    return StatResult("arms", "Arms", result.arms, cells=pd.DataFrame(rows), caption=caption)


def logrank_result(result) -> StatResult:
    """Log-rank tests (``result.tests``: :data:`interp.population.survival.TEST_COLUMNS`): global,
    then each arm against the reference."""
    rows = [
        {
            "test": t["test"],
            "arms": t["arms"] if t["test"] == "global" else f"{t['arm']} vs {t['reference']}",
            "runs": t["n_runs"],
            "emerged": t["n_emerged"],
            "χ²": "—" if math.isnan(t["chi2"]) else f"{t['chi2']:.2f}",
            "df": t["df"],
            "p": p_cell(t["p"]),
            "also varies": t["also_varies"],
            "note": t["note"],
        }
        for t in result.tests.to_dict("records")
    ]
    return StatResult(
        "logrank",
        "Log-rank tests",
        result.tests,
        cells=pd.DataFrame(rows, columns=["test", "arms", "runs", "emerged", "χ²", "df", "p", "also varies", "note"]),
        caption="Log-rank test of equal emergence hazards (Mantel 1966; Peto & Peto 1972): globally, then each "
        f"arm against {result.reference}.",
    )


def cox_result(result) -> StatResult:
    """The hazard ratio of emergence per doubling of heads per (n_layers, d_model) group, with its
    model checks (``result.cox``: :data:`interp.population.checks.CHECKED_COX_COLUMNS`)."""
    rows = [
        {
            "layers": c["n_layers"],
            "d_model": c["d_model"],
            "fit": c["fit"],
            "heads": c["heads"],
            "runs": c["n_runs"],
            "emerged": c["n_emerged"],
            "hazard ratio per doubling (95 % CI)": _ratio(c["hr_per_doubling"], c["hr_lo"], c["hr_hi"]),
            "p": p_cell(c["p"]),
            "also varies": c["also_varies"],
            "PH test p": p_cell(c["ph_p"]),
            "log-linearity LR p": "—" if math.isnan(c["lr_p"]) else f"{p_cell(c['lr_p'])} ({c['lr_df']} df)",
            "note": _joined(c["note"], c["caveat"], c["lr_note"]),
        }
        for c in result.cox.to_dict("records")
    ]
    columns = ["layers", "d_model", "fit", "heads", "runs", "emerged", "hazard ratio per doubling (95 % CI)", "p"]
    columns += ["also varies", "PH test p", "log-linearity LR p", "note"]
    return StatResult(
        "cox",
        "Hazard of emergence per doubling of heads (Cox)",
        result.cox,
        cells=pd.DataFrame(rows, columns=columns),
        caption="Cox proportional-hazards model (Cox 1972; Efron 1977 ties) with log2(n_heads) as the covariate, "
        "over arms that share n_layers and d_model; Wald interval and p-value. An arm in which no run emerged stays "
        "in the fit (its runs are censored at the budget); a second row refits without it. Checked before it is "
        "quoted: PH test, Grambsch & Therneau 1994 on the scaled Schoenfeld residuals against the rank of the event "
        "time; log-linearity, a likelihood-ratio test against one hazard ratio per head count. Where either rejects "
        "(p < 0.05), read the per-arm contrasts below, not a ratio per doubling.",
    )


def contrasts_result(result) -> StatResult | None:
    """Each head count against the next fewer (``result.contrasts``:
    :data:`interp.population.checks.CONTRAST_COLUMNS`); None where there is none."""
    if not len(result.contrasts):
        return None
    rows = [
        {
            "layers": c["n_layers"],
            "d_model": c["d_model"],
            "heads": c["heads"],
            "arm": c["arm"],
            "against": c["versus"],
            "also varies": c["also_varies"],
            "runs": c["n_runs"],
            "emerged": c["n_emerged"],
            "hazard ratio (95 % CI)": _ratio(c["hr"], c["hr_lo"], c["hr_hi"]),
            "p": p_cell(c["p"]),
            "log-rank p": p_cell(c["logrank_p"]),
            "note": _joined(c["note"], c["caveat"]),
        }
        for c in result.contrasts.to_dict("records")
    ]
    return StatResult(
        "contrasts",
        "Each head count against the next fewer (Cox on the pair)",
        result.contrasts,
        cells=pd.DataFrame(rows),
        caption="Hazard ratio of the arm with more heads against the other: above 1, more heads emerge earlier. "
        "An arm in which no run emerged has no finite ratio; its log-rank test is the evidence.",
    )


def grid_result(result) -> StatResult | None:
    """The findings over the grid of rules (``result.grid``:
    :data:`interp.population.robust.GRID_COLUMNS`), one row per finding with the judge's
    robustness word; as cells, one row per finding (its short label), one column per rule
    (``"0.4/1"``: threshold / hold) holding its estimate, then the verdict
    (:func:`interp.population.robust.robustness`); None where the grid was not computed."""
    if not len(result.grid):
        return None
    from interp.population.robust import grid_cells

    return StatResult(
        "robustness",
        "Does it hang on the rule? The findings over thresholds and holds",
        result.grid,
        cells=grid_cells(result.grid),
        wrap=True,
        caption="Each finding recomputed with E dated at accuracy threshold 0.4, 0.5 or 0.6 held for 1, 2 or 3 "
        "checkpoints (columns: threshold/hold); a crossing with no room left to hold is censored at the budget. A "
        "finding is robust only where its direction and significance (p < 0.05) hold in every cell; significant "
        "nowhere: a robust null.",
    )


def mechanism_result(result) -> StatResult | None:
    """Claim 2 per arm and interval width on the population's attached rows
    (:func:`claim2_widths_result` of ``result.mechanism``); None without claim 2's rows."""
    return None if result.mechanism is None else claim2_widths_result(result.mechanism)


def claim2_widths_result(rows: pd.DataFrame, arm_format: str = "{}") -> StatResult:
    """Claim 2 per arm and interval width: per (arm, width), the seeds measured and measurable,
    those whose top two heads' patterns recover at least half the jump with the 95 % bootstrap
    interval above half (firm; their share with its Wilson 95 % interval), the seed's induction
    head's pattern likewise, the mechanisms of the top-1 heads and the seeds whose jump is within
    noise (shares are fractions of the jump in p(answer)); its headline is one line per arm, numbers
    only (the verdict on claim 2 is :func:`claim2_pair_result`'s, at the largest-jump pair).

    Args:
        rows: per-run rows (:data:`interp.population.mechanism.ROW_COLUMNS`).
        arm_format: how an arm's name is written in the headline lines (``"**{}**"`` in Markdown).

    Raises:
        ValueError: a missing column (named).

    Source: Wilson 1927 score interval (``statsmodels.stats.proportion.proportion_confint``).
    """
    from interp.population.mechanism import _claim_lines, _claim_table
    from interp.population.mechanism import figure as mechanism_figure

    table = _claim_table(rows)
    rows_shown = []
    for c in table.to_dict("records"):
        share = "—" if not c["measurable"] else interval(c["top2_share"], c["top2_lo"], c["top2_hi"], "{:.2f}".format)
        rows_shown.append(
            {
                "arm": c["arm"],
                "width": f"{c['width']} steps" if c["width"].isdigit() else "±500 (wide)",
                "seeds (measurable)": f"{c['seeds']} ({c['measurable']})",
                "top-2 patterns firm": c["top2_firm"],
                "share (95 % CI)": share,
                "induction head's pattern firm": f"{c['induction_firm']} of {c['measurable']}",
                "top-1 head is": c["top1_mechanisms"],
                "jump within noise (seeds)": c["noise_seeds"] or "—",
            }
        )
    return StatResult(
        "mechanism",
        "Is it a few heads? The share of the jump each component recovers",
        table,
        cells=pd.DataFrame(rows_shown),
        figure=mechanism_figure(rows),
        wrap=True,
        caption="Each emerged seed's E located to one step; its p(answer) jump from pre = E − width to post = E "
        "(and the wide contrast E − 500 → E + 500) decomposed by patching each component from post into pre (the "
        "paper's claim 2; Baherwani et al. 2026). One point per seed and component: the share of the jump it "
        "recovers; dotted: one half. Firm: the share is at least 0.5 and its 95 % bootstrap interval over prompts "
        "lies above 0.5; the share of firm seeds has Wilson's 95 % interval. A seed whose jump at a width is below "
        "3 standard errors is named in the last column (by its seed) and left out of the figure and the share. "
        "Heads are compared by what they do (induction, previous-token, copying: their scores at E), not by index.",
        headline=tuple(_claim_lines(rows, arm_format)),
        lead=MECHANISM_LEAD,
    )


#: The population page's statistics, in the page's order: each ``(PopulationResult) -> StatResult | None``.
#: A new statistic on the page is one function appended here (or passed to
#: :func:`interp.population.page.population_fragment` as ``statistics=``).
POPULATION_STATISTICS: list[Callable] = [
    km_result,
    strip_result,
    arms_result,
    logrank_result,
    cox_result,
    contrasts_result,
    grid_result,
    mechanism_result,
]


# ------------------------------------------------------------------ statistics read from other inputs


def claim2_pair_result(rows: pd.DataFrame, half: float = 0.5) -> StatResult:
    """Claim 2 at the consecutive checkpoints with the largest jump: per arm, metric and component
    the seeds measured, those whose p jump is within noise (named, counted as neither side), and
    among the rest the seeds whose share recovered has its 95 % interval above ``half`` (firm),
    below it, or straddling it, with the firm share's Wilson 95 % interval and the median share with
    its quartiles (shares are fractions of the jump; columns ``arm``, ``metric``, ``component``,
    ``seeds``, ``noise_seeds``, ``measurable``, ``above``, ``below``, ``straddle``, ``share_above``,
    ``share_lo``, ``share_hi``, ``median``, ``q1``, ``q3``); and the judge's verdict over the arms
    (:func:`~interp.population.judge.judge_claim`), one part per arm
    (:func:`~interp.population.judge.judge_share`: most seeds firmly above half, reproduced; most
    firmly below, contradicted; else not decidable; each part labelled
    ``"Claim 2 (<arm>, largest-jump pair)"``, its reason adding the median shares), as the answer
    table words it.

    Args:
        rows: :data:`interp.population.claim2_pair.PAIR_COLUMNS` rows of one or more runs.
        half: the share that counts as "most of the jump" (the paper's reading: half).
    """
    from interp.population.claim2_pair import _pair_table, _pair_verdicts

    return StatResult(
        "claim2-pair",
        "Claim 2 at the largest-jump pair",
        _pair_table(rows, half),
        verdict=judge_claim("Claim 2", _pair_verdicts(rows, half), noun="arm"),
        wrap=True,
        caption=f"Per arm, metric and component: seeds whose share of the jump recovered has its 95 % bootstrap "
        f"interval above {half:g} (firm), below it, or straddling it, with the firm share's Wilson 95 % interval; "
        "seeds whose jump is within noise are named and counted as neither side.",
    )


def forecast_result(forecast, title: str = "Forecast of the point of emergence") -> StatResult:
    """A forecast's per-arm scores (:class:`interp.population.forecast.ForecastResult`'s ``arms``:
    errors in log2 steps, concordance, the goal against the arm-median baseline). The goal is the
    issue's criterion, not a claim of the paper: no verdict."""
    return StatResult(
        "forecast",
        title,
        forecast.arms,
        caption=" ".join(forecast.lines()),
    )


def seed_split_result(components, verdict: Verdict | None = None, spec: str = "") -> StatResult:
    """The seed decomposition (:class:`interp.population.variance.VarianceComponents`: each
    component's variance, share of the total with its bootstrap interval, REML estimate, F and
    permutation p) with the judge's verdict on claim 1's "depending only on the seed" where given
    (:func:`interp.population.judge.judge_components`, :func:`interp.population.seed_split.judged`).
    Its headline line: which part of the seed the spread goes with, in one factual sentence
    (:meth:`~interp.population.variance.VarianceComponents.sentence`) behind the verdict's word
    (:data:`interp.population.variance.VERDICT_PLACEHOLDER` without one); ``spec`` names the grid's
    suite in it (none where empty)."""
    where = f"`{spec}`; " if spec else ""
    line = (
        f'**Claim 1, which part of the seed** ({where}the paper: E varies "depending only on the seed"): '
        f"{components.claim_line(verdict.word if verdict is not None else None)}"
    )
    return StatResult(
        "seed-split",
        f"Which part of the seed decides: {components.quantity}",
        components.table,
        verdict=verdict,
        caption=components.sentence() + ".",
        headline=(line,),
    )


# ------------------------------------------------------------------ the headline


def claim_results(result) -> list[StatResult]:
    """The paper's claims 1 and 4 answered by a population, one result per claim it speaks to: the
    judge's verdict (:func:`interp.population.verdicts.claim_verdicts`, computed once per result:
    ``result.verdicts``) at the operating point, its contrasts as the table (one row per part:
    ``label``, ``word``, ``robust``, ``reason``, ``decide``; the claim itself where it has no
    parts), and its headline line (:func:`interp.population.verdicts.claim_line`: the verdict, the
    numbers behind it, the paper's statement, what would decide it).

    Args:
        result: a :class:`interp.population.tables.PopulationResult`.

    Returns:
        Results named ``claim-1-seed``, ``claim-1-never``, ``claim-1-size``, ``claim-4-heads``,
        ``claim-4-head-size``, in the verdicts' order (a repeated name numbered from its second:
        ``claim-4-heads-2``), each titled by its claim's label; a claim the population cannot
        speak to has none.
    """
    from interp.population.verdicts import claim_line, claim_verdicts

    at = f"at threshold {result.threshold:g}, hold {result.hold}"
    verdicts = getattr(result, "verdicts", None)
    out, seen = [], {}
    for v in verdicts if verdicts is not None else claim_verdicts(result):
        base = "-".join(v.label.split(" (")[0].lower().replace(",", " ").split())
        seen[base] = seen.get(base, 0) + 1
        table = pd.DataFrame(
            [{"label": p.label, "word": p.word, "robust": p.robust, "reason": p.reason, "decide": p.decide}
             for p in (v.parts or (v,))],
            columns=["label", "word", "robust", "reason", "decide"],
        )  # fmt: skip
        out.append(
            StatResult(
                base if seen[base] == 1 else f"{base}-{seen[base]}",
                v.label,
                table,
                verdict=v,
                headline=(claim_line(v, at),),
                lead=CLAIMS_LEAD,
            )
        )
    return out
