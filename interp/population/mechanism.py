"""The paper's mechanism (claim 2) as a statistic over the seeds of an arm (issue 53).

Claim 2 (Baherwani et al. 2026; shared/PAPER.md): when the capability appears, one or a few heads
abruptly learn a sparse attention pattern, and patching those heads' patterns from after the jump
into a checkpoint before it recovers most of the gain. Measured per run (``analyses/
population_mechanism.py``) as the share of the pre -> post jump in p(answer) each component
recovers (:func:`interp.decomposition.decompose_jump`) at several interval widths; here the
per-run rows (:data:`ROW_COLUMNS`) become, per arm and width:

- :func:`width_table`: the distribution over seeds of each component's share (median, quartiles);
- :func:`interp.population.statistics.claim2_widths_result` (its table and headline lines): the share of seeds where the top two heads' patterns recover >= 0.5 with
  the 95 % interval above 0.5 (Wilson interval over seeds), and the same for the seed's induction
  head and previous-token head, by what they do (:func:`classify_heads`), not by index.

A run whose jump at a width is below 3 standard errors (``jump_too_small``) is counted and named
there, never averaged in: its shares divide by noise.
"""

from __future__ import annotations

import pandas as pd

__all__ = [
    "COMPONENTS",
    "COPYING_THRESHOLD",
    "MECHANISMS",
    "ROW_COLUMNS",
    "check_rows",
    "classify_heads",
    "figure",
    "width_table",
]

#: Mechanism classes of a head, by its scores at post (:mod:`interp.scores`).
MECHANISMS = ("induction", "previous-token", "copying", "other")
#: OV copying score (in [-1, 1]) at or above which a head that is neither an induction nor a
#: previous-token head is classed as copying (Elhage et al. 2021: positive eigenvalues copy).
COPYING_THRESHOLD = 0.5
#: (label, decompose_jump target, scope) of the components reported per width; the last two are
#: the seed's own induction head and previous-token head (one head each, chosen by its scores).
COMPONENTS = (
    ("top-1 patterns", "pattern", "top-1"),
    ("top-2 patterns", "pattern", "top-2"),
    ("all patterns", "pattern", "all"),
    ("all head outputs", "z", "all"),
    ("QK weights", "qk", "all"),
    ("OV weights", "ov", "all"),
    ("induction head's pattern", "induction_pattern", "all"),
    ("previous-token head's pattern", "previous_token_pattern", "all"),
)
#: One row per (run, width, component) of the per-run results.
ROW_COLUMNS = [
    "arm", "run", "seed", "width", "pre_step", "post_step", "component", "heads", "mechanisms", "recovered",
    "recovered_lo", "recovered_hi", "p_pre", "p_post", "jump", "jump_se", "jump_too_small",
]  # fmt: skip
#: The share recovered that counts as "most of the gain" (the paper's reading: at least half).
HALF = 0.5


def classify_heads(scores: pd.DataFrame, copying_threshold: float = COPYING_THRESHOLD) -> pd.DataFrame:
    """Each head's mechanism from its scores at one checkpoint.

    A head is an induction head when its prefix-matching score reaches
    :data:`interp.core.terms.IND_THRESHOLD` (0.2), a previous-token head when its
    previous-token score reaches :data:`~interp.core.terms.PREV_THRESHOLD` (0.3); when
    both do, the one it exceeds by the larger factor; else a copying head when its OV copying score
    reaches ``copying_threshold``; else ``other``. A head is called induction only where it can
    compose (:func:`interp.core.terms.induction_blocker`: layer >= 1 with a previous-token head in
    an earlier layer of the same checkpoint); otherwise its prefix-matching score names nothing.

    Args:
        scores: one row per head: ``layer``, ``head``, ``previous_token``, ``prefix_matching``
            (fractions of attention) and ``copying`` (in [-1, 1]), as :func:`interp.scores.head_scores`
            gives them.
        copying_threshold: see above.

    Returns:
        ``scores`` with a ``mechanism`` column (one of :data:`MECHANISMS`).

    Raises:
        ValueError: a missing score column (named).

    Source: the scores of Olsson et al. 2022 ("In-context Learning and Induction Heads") and
    Elhage et al. 2021 ("A Mathematical Framework for Transformer Circuits").
    """
    from interp.core.terms import IND_THRESHOLD, PREV_THRESHOLD, induction_blocker

    missing = [c for c in ("layer", "head", "previous_token", "prefix_matching", "copying") if c not in scores]
    if missing:
        raise ValueError(f"head scores lack columns {missing}")
    ind = scores["prefix_matching"] / IND_THRESHOLD
    prev = scores["previous_token"] / PREV_THRESHOLD
    out = scores.copy()
    out["mechanism"] = "other"
    out.loc[scores["copying"] >= copying_threshold, "mechanism"] = "copying"
    out.loc[(prev >= 1) & (prev > ind), "mechanism"] = "previous-token"
    previous = scores.loc[prev >= 1, "layer"].tolist()  # heads attending to the previous token
    composes = scores["layer"].map(lambda layer: induction_blocker(int(layer), previous) is None)
    out.loc[(ind >= 1) & (ind >= prev) & composes, "mechanism"] = "induction"
    out.loc[(ind >= 1) & (ind >= prev) & ~composes & (prev >= 1), "mechanism"] = "previous-token"
    return out


def _wilson(k: int, n: int) -> tuple[float, float]:
    from statsmodels.stats.proportion import proportion_confint

    if n == 0:
        return float("nan"), float("nan")
    lo, hi = proportion_confint(k, n, alpha=0.05, method="wilson")
    return float(lo), float(hi)


def check_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """The per-run rows, checked: every column of :data:`ROW_COLUMNS` present, ``width`` as text,
    ``jump_too_small`` as bool (a CSV read gives text).

    Raises:
        ValueError: a missing column (named).
    """
    missing = [c for c in ROW_COLUMNS if c not in rows]
    if missing:
        raise ValueError(f"per-run rows lack columns {missing}")
    rows = rows.copy()
    rows["width"] = rows["width"].astype(str)
    rows["jump_too_small"] = rows["jump_too_small"].astype(str).str.lower() == "true"
    return rows


def _widths(rows: pd.DataFrame) -> list[str]:
    """Widths in the order narrow-last: numeric widths descending, then the wide contrast."""
    numeric = sorted({w for w in rows["width"] if w.isdigit()}, key=int, reverse=True)
    return numeric + sorted({w for w in rows["width"] if not w.isdigit()})


def width_table(rows: pd.DataFrame) -> pd.DataFrame:
    """Per arm, width and component: the distribution of the share recovered over seeds.

    Args:
        rows: per-run rows (:data:`ROW_COLUMNS`; ``recovered`` a fraction of the jump).

    Returns:
        One row per (arm, width, component): ``seeds`` (runs measured), ``measurable`` (runs whose
        jump is at least 3 standard errors), ``median``, ``q1``, ``q3`` of ``recovered`` over the
        measurable runs (NaN when none), ``noise_runs`` (the others, named, comma-joined).

    Raises:
        ValueError: a missing column (named).
    """
    rows = check_rows(rows)
    out = []
    for arm, by_arm in rows.groupby("arm", sort=False):
        for width in _widths(by_arm):
            at = by_arm[by_arm["width"] == width]
            for label, _, _ in COMPONENTS:
                sub = at[at["component"] == label]
                if not len(sub):
                    continue
                ok = sub[~sub["jump_too_small"]]["recovered"].astype(float)
                out.append(
                    {
                        "arm": arm,
                        "width": width,
                        "component": label,
                        "seeds": len(sub),
                        "measurable": len(ok),
                        "median": float(ok.median()) if len(ok) else float("nan"),
                        "q1": float(ok.quantile(0.25)) if len(ok) else float("nan"),
                        "q3": float(ok.quantile(0.75)) if len(ok) else float("nan"),
                        "noise_runs": ", ".join(sub.loc[sub["jump_too_small"], "run"]),
                    }
                )
    return pd.DataFrame(
        out, columns=["arm", "width", "component", "seeds", "measurable", "median", "q1", "q3", "noise_runs"]
    )


def _firm(sub: pd.DataFrame) -> pd.Series:
    return (sub["recovered"].astype(float) >= HALF) & (sub["recovered_lo"].astype(float) > HALF)


def _claim_table(rows: pd.DataFrame) -> pd.DataFrame:
    """Per arm and width: how many seeds show the paper's mechanism firmly.

    A seed shows it at a width when the top two heads' patterns recover >= 0.5 of the jump and
    the 95 % bootstrap interval's lower end lies above 0.5; the share is over the measurable seeds
    (jump >= 3 standard errors), with Wilson's 95 % interval. The same count for the seed's
    induction head's pattern and previous-token head's pattern, and the mechanisms of the top-1
    head over the measurable seeds (``top1_mechanisms``: ``"induction 19, previous-token 5"``).

    Returns:
        One row per (arm, width): ``seeds``, ``measurable``, ``top2_firm``, ``top2_share``,
        ``top2_lo``, ``top2_hi``, ``top2_point`` (seeds whose share is >= 0.5 by its point estimate
        alone, the looser criterion) with ``top2_point_lo``, ``top2_point_hi``, ``induction_firm``, ``induction_lo``, ``induction_hi``,
        ``previous_token_firm``, ``top1_mechanisms``, ``noise_runs`` (names) and ``noise_seeds``
        (their seeds, ascending).

    Raises:
        ValueError: a missing column (named).

    Source: Wilson 1927 (through statsmodels' ``proportion_confint``).
    """
    rows = check_rows(rows)
    out = []
    for arm, by_arm in rows.groupby("arm", sort=False):
        for width in _widths(by_arm):
            at = by_arm[by_arm["width"] == width]
            top2 = at[at["component"] == "top-2 patterns"]
            ok = top2[~top2["jump_too_small"]]
            measurable = set(ok["run"])
            n = len(ok)
            k = int(_firm(ok).sum())
            ind = at[(at["component"] == "induction head's pattern") & at["run"].isin(measurable)]
            prev = at[(at["component"] == "previous-token head's pattern") & at["run"].isin(measurable)]
            top1 = at[(at["component"] == "top-1 patterns") & at["run"].isin(measurable)]
            classes = top1["mechanisms"].fillna("other").value_counts()
            k_ind = int(_firm(ind).sum())
            k_point = int((ok["recovered"].astype(float) >= HALF).sum())
            out.append(
                {
                    "arm": arm,
                    "width": width,
                    "seeds": len(top2),
                    "measurable": n,
                    "top2_firm": k,
                    "top2_point": k_point,
                    "top2_point_lo": _wilson(k_point, n)[0],
                    "top2_point_hi": _wilson(k_point, n)[1],
                    "top2_share": k / n if n else float("nan"),
                    "top2_lo": _wilson(k, n)[0],
                    "top2_hi": _wilson(k, n)[1],
                    "induction_firm": k_ind,
                    "induction_lo": _wilson(k_ind, n)[0],
                    "induction_hi": _wilson(k_ind, n)[1],
                    "previous_token_firm": int(_firm(prev).sum()),
                    "top1_mechanisms": ", ".join(f"{c} {v}" for c, v in classes.items()),
                    "noise_runs": ", ".join(top2.loc[top2["jump_too_small"], "run"]),
                    "noise_seeds": ", ".join(
                        str(s) for s in sorted(top2.loc[top2["jump_too_small"], "seed"].astype(int).tolist())
                    ),
                }
            )
    return pd.DataFrame(out)


def _width_name(width: str) -> str:
    return f"{width} steps" if width.isdigit() else "wide (±500)"


def _side(lo: float, hi: float) -> str:
    return "above half" if lo > HALF else "below half" if hi < HALF else "undecided"


def _claim_lines(rows: pd.DataFrame, verdict_format: str = "{}") -> list[str]:
    """Claim 2's profile over interval widths per arm, in words: one line per arm, numbers only.

    The verdict on claim 2 is taken at the paper's kind of pair, the consecutive checkpoints with
    the largest jump (:func:`interp.population.claim2_pair.pair_verdicts`, worded by the judge);
    these lines show how the share recovered moves as the checkpoint before lies nearer to E. Per
    width: the seeds whose top two heads' patterns carry at least half the jump firmly, ``k of n``
    measurable seeds with the share's 95 % Wilson interval and where it lies (above half, below
    half or undecided); the same count by the point estimate alone; the seed's induction head's
    pattern; the component with the largest median share.

    Args:
        rows: per-run rows (:data:`ROW_COLUMNS`).
        verdict_format: how the arm's name is written (``"**{}**"`` in Markdown).

    Returns:
        One string per arm, in the rows' order (no markup beyond ``verdict_format``).

    Raises:
        ValueError: a missing column (named).
    """
    claims = _claim_table(rows)
    widths = width_table(rows)
    out = []
    for arm, sub in claims.groupby("arm", sort=False):
        per, ind = [], []
        for c in sub.itertuples():
            name = _width_name(c.width)
            if not c.measurable:
                per.append(f"{name}: no measurable seed")
                continue
            side = _side(c.top2_lo, c.top2_hi)
            per.append(
                f"{name}: {c.top2_firm} of {c.measurable} (95 % {c.top2_lo:.2f}–{c.top2_hi:.2f}, {side}; "
                f"{c.top2_point} by the point estimate alone)"
            )
            ind.append(f"{name}: {c.induction_firm} of {c.measurable}")
        carriers = []
        for width in dict.fromkeys(sub["width"]):
            at = widths[(widths["arm"] == arm) & (widths["width"] == width) & (widths["measurable"] > 0)]
            if len(at):
                best = at.loc[at["median"].astype(float).idxmax()]
                top = f"{best['component']} {best['median']:.2f}"
                carriers.append(
                    f"{_width_name(width)}: " + (top if best["median"] >= 0.1 else f"none above 0.1 ({top})")
                )
        seeds = int(sub["seeds"].max()) if len(sub) else 0
        out.append(
            f"Claim 2 over interval widths on {verdict_format.format(arm)} ({seeds} emerged seed"
            f"{'s' if seeds != 1 else ''}; pre = E − width, E located to one step): seeds whose top two heads' "
            f"patterns carry ≥ half the jump with the interval above half: {'; '.join(per)}; whose induction head's "
            f"pattern alone does: {'; '.join(ind) or 'none measurable'}; the largest median share recovered: "
            f"{'; '.join(carriers)}."
        )
    return out


def figure(rows: pd.DataFrame):
    """The share recovered per width and component, one box and one point per seed, a panel per
    arm (plotly); runs whose jump is within noise are left out (the tables name them)."""
    import plotly.graph_objects as go
    import plotly.io as pio
    from plotly.subplots import make_subplots

    from interp.report.figures import plot_text

    rows = check_rows(rows)
    rows = rows[~rows["jump_too_small"]]
    arms = list(dict.fromkeys(rows["arm"])) or ["(no measurable run)"]
    fig = make_subplots(
        rows=len(arms), cols=1, subplot_titles=[plot_text(a) for a in arms], shared_xaxes=True, vertical_spacing=0.12
    )
    palette = pio.templates["plotly"].layout.colorway
    for i, arm in enumerate(arms):
        sub = rows[rows["arm"] == arm]
        for j, (label, _, _) in enumerate(COMPONENTS):
            line = sub[sub["component"] == label]
            if not len(line):
                continue
            fig.add_trace(
                go.Box(
                    x=[f"{w} steps" if w.isdigit() else "±500 (wide)" for w in line["width"]],
                    y=line["recovered"].astype(float),
                    name=label,
                    legendgroup=label,
                    showlegend=i == 0,
                    boxpoints="all",
                    jitter=0.4,
                    pointpos=0,
                    marker=dict(color=palette[j % len(palette)], size=6),
                    line=dict(color=palette[j % len(palette)]),
                    text=[plot_text(f"{r} ({m})") for r, m in zip(line["run"], line["mechanisms"].fillna(""))],
                    hovertemplate="%{text}<br>recovered %{y:.2f}<extra>" + label + "</extra>",
                ),
                row=i + 1,
                col=1,
            )
        fig.add_hline(y=HALF, line_dash="dot", line_color="gray", row=i + 1, col=1)
        fig.update_yaxes(title_text="share of the jump recovered", row=i + 1, col=1)
    order = _widths(rows) if len(rows) else []
    fig.update_xaxes(
        categoryorder="array", categoryarray=[f"{w} steps" if w.isdigit() else "±500 (wide)" for w in order]
    )
    fig.update_layout(
        boxmode="group",
        title="Claim 2 over seeds: share of the jump recovered, per width and component (one point per seed)",
        height=420 * len(arms) + 120,
        legend=dict(orientation="h", y=-0.12),
    )
    return fig
