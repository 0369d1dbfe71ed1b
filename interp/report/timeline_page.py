"""The head timeline's page (``timeline.html``; :class:`interp.timeline.HeadTimeline`): what a
person sees of every head's pattern-patching effect at every checkpoint pair.

It opens on findings in words computed from the table (:func:`timeline_findings`: when each
leading head's effect rises relative to the point of emergence E, the screen's miss bound, how
well the screen's estimates rank the exact effects), then one figure (:func:`timeline_figure`):
the capability curve on top, the head x step heatmap of ``delta`` under it on the same step axis,
the screen's miss bound per pair at the bottom, E marked across all three. Uncertainty is on the
figure: a filled dot marks an exact cell whose 95 % bootstrap interval excludes 0, an open one an
exact cell whose interval holds 0, no dot a cell the screen only estimated; every cell's hover
gives its value, interval and how it was computed. Then the pairs' table.

Rendered from ``report/templates/timeline.html.j2`` (autoescape on: run names and task names are
data) inside the report's page (:func:`interp.report.display.page_html`, plotly.js inlined once,
no network); in Jupyter the same fragment is the object's ``_repr_html_``. This module reads
tables only (it stands below :mod:`interp.timeline`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from interp.core.html_fragments import style_tag, table_fragment
from interp.core.templating import render, trusted

__all__ = [
    "TIMELINES_FOLDER",
    "head_onsets",
    "report_timeline_path",
    "scrubber_link",
    "timeline_figure",
    "timeline_findings",
    "timeline_fragment",
    "timeline_page",
]

#: Where a run's head timeline sits in a main-job report's folder (:func:`report_timeline_path`):
#: the report links it when it saves, and the timeline written there with ``--scrubber
#: OUT/report.html`` links each cell back to the report's scrubber of that run.
TIMELINES_FOLDER = "timelines"


def report_timeline_path(model: str, seed: int) -> str:
    """The timeline page of run (``model``, ``seed``) relative to its report's folder:
    ``timelines/<model>-seed<seed>/timeline.html`` (characters other than letters, digits,
    ``.``, ``_``, ``-`` as ``-``); write it with ``emergence timeline SRC --out OUT/timelines/<...>``."""
    import re

    return f"{TIMELINES_FOLDER}/{re.sub(r'[^A-Za-z0-9._-]+', '-', f'{model}-seed{int(seed)}')}/timeline.html"


#: A head's effect "rises" (a negative peak's: "falls") at the first pair where it reaches this
#: fraction of its peak (same sign) and, where computed exactly, its 95 % interval excludes 0.
ONSET_FRACTION = 0.5


def _label(layer: int, head: int) -> str:
    return f"L{int(layer)}H{int(head)}"


def head_onsets(table: pd.DataFrame, n: int = 3, fraction: float = ONSET_FRACTION) -> pd.DataFrame:
    """The ``n`` heads with the largest peak ``|delta|`` over the pairs (exact rows preferred:
    estimated rows count only for heads never verified), each with its peak and onset.

    Onset: the first pair (by ``step``) where the head's ``delta`` reaches ``fraction`` (default
    :data:`ONSET_FRACTION`) of its peak with the peak's sign and, on an exact row, its 95 % interval (``lo``, ``hi``)
    excludes 0; NaN when no pair qualifies.

    Returns:
        One row per head: ``layer, head, peak, peak_lo, peak_hi, peak_step, peak_how, onset_step``.
    """
    rows = []
    for (layer, head), rows_h in table.groupby(["layer", "head"]):
        exact = rows_h[rows_h["how"] == "exact"]
        use = exact if len(exact) else rows_h
        use = use[np.isfinite(use["delta"].astype(float))]
        if not len(use):
            continue
        at = use["delta"].abs().idxmax()
        peak = float(use.loc[at, "delta"])
        sign = 1.0 if peak >= 0 else -1.0
        ordered = rows_h.sort_values("step")
        onset = math.nan
        for r in ordered.itertuples():
            if not math.isfinite(r.delta) or sign * r.delta < fraction * abs(peak) or peak == 0:
                continue
            if r.how == "exact" and math.isfinite(r.lo) and math.isfinite(r.hi) and r.lo <= 0 <= r.hi:
                continue
            onset = float(r.step)
            break
        rows.append(
            {
                "layer": int(layer),
                "head": int(head),
                "peak": peak,
                "peak_lo": float(use.loc[at, "lo"]),
                "peak_hi": float(use.loc[at, "hi"]),
                "peak_step": int(use.loc[at, "step"]),
                "peak_how": str(use.loc[at, "how"]),
                "onset_step": onset,
            }
        )
    out = pd.DataFrame(
        rows, columns=["layer", "head", "peak", "peak_lo", "peak_hi", "peak_step", "peak_how", "onset_step"]
    )
    return out.reindex(out["peak"].abs().sort_values(ascending=False).index).head(n).reset_index(drop=True)


def _interval(value: float, lo: float, hi: float) -> str:
    text = f"{value:+.3g}"
    return text + (f" [{lo:+.3g}, {hi:+.3g}]" if math.isfinite(lo) and math.isfinite(hi) else " (estimated)")


def timeline_findings(
    table: pd.DataFrame, pairs: pd.DataFrame, point: dict[str, Any], unit: str, pairing: str
) -> list[str]:
    """The page's opening lines, each computed from the tables.

    Args:
        table: :attr:`interp.timeline.HeadTimeline.table`.
        pairs: :attr:`interp.timeline.HeadTimeline.pairs`.
        point: the point of emergence (``emerged``, ``pre_step``, ``post_step``, ``threshold``).
        unit: the metric's unit.
        pairing: how checkpoints were paired (``consecutive``, ``to-post``, ``to-final``).
    """
    lines: list[str] = []
    if not len(pairs):
        return ["No checkpoint pairs were patched."]
    e = point.get("post_step") if point.get("emerged") else None
    what = {
        "consecutive": "each checkpoint's patterns replaced by the next checkpoint's",
        "to-post": "each checkpoint's patterns replaced by those of E's post step",
        "to-final": "each checkpoint's patterns replaced by the last checkpoint's",
    }.get(pairing, "patterns patched from the later checkpoint")
    lines.append(
        f"{len(pairs)} checkpoint pairs ({what}); Δ is the change in the task metric ({unit}) when one head's "
        "pattern is patched, at the step patched into."
    )
    if e is not None:
        lines.append(
            f"E (point of emergence): step {e} (greedy accuracy first holds at or above {point.get('threshold')} "
            f"there; the last step below is {point.get('pre_step')})."
        )
    else:
        lines.append("The capability did not emerge in this run (no step holds the accuracy threshold).")
    for r in head_onsets(table).itertuples():
        name = _label(r.layer, r.head)
        peak = f"peak Δ {_interval(r.peak, r.peak_lo, r.peak_hi)} at step {r.peak_step}"
        if not math.isfinite(r.onset_step):
            lines.append(
                f"{name}: no pair where its effect reaches half its peak with an interval excluding 0; {peak}."
            )
            continue
        onset = int(r.onset_step)
        # the onset reaches half the peak with the peak's sign: a negative peak's effect falls to it
        when = f"{'rises' if r.peak > 0 else 'falls'} to half its peak at step {onset}"
        if e is not None and onset < e:
            when += f", {e - onset} steps before E"
        elif e is not None and onset == e:
            when += ", at E"
        elif e is not None:
            when += f", {onset - e} steps after E"
        lines.append(f"{name}'s effect {when}; {peak}.")
    exact_all = bool((table["how"] == "exact").all())
    n_heads = int(table.groupby(["layer", "head"]).ngroups)
    if exact_all:
        lines.append(f"Every head ({n_heads}) was patched exactly at every pair; no cell is an estimate.")
    else:
        n_exact = int(pairs["n_exact"].median())
        n_sampled = int(pairs["n_sampled"].median())
        bounds = pairs["bound"].astype(float)
        if np.isfinite(bounds).any():
            worst = pairs.loc[bounds.idxmax()]
            lines.append(
                f"The attribution screen estimated all {n_heads} heads at every pair; the exact engine verified "
                f"{n_exact - n_sampled} top heads plus {n_sampled} drawn at random from the rest. The largest exact "
                f"|Δ| among those sampled, the bound on what the screen may have missed, is {float(worst['bound']):.3g} "
                f"{unit} ({_label(worst['bound_layer'], worst['bound_head'])} at step {int(worst['step'])}); "
                f"median over pairs {float(np.nanmedian(bounds)):.3g}."
            )
        else:
            lines.append(
                f"The attribution screen estimated all {n_heads} heads; {n_exact} per pair were verified exactly, "
                "none drawn at random: no bound on what the screen missed."
            )
    rho = pairs["spearman"].astype(float) if "spearman" in pairs else pd.Series(dtype=float)
    if np.isfinite(rho).any():
        lines.append(
            f"Screen against exact effects over the verified heads: Spearman median {float(np.nanmedian(rho)):.2f}, "
            f"lowest {float(np.nanmin(rho)):.2f} over {int(np.isfinite(rho).sum())} pairs."
        )
    return lines


def timeline_figure(
    table: pd.DataFrame, pairs: pd.DataFrame, curve: pd.DataFrame, point: dict[str, Any], metric: str, unit: str
):
    """The capability curve, the head x step heatmap of ``delta`` and the screen's miss bound per
    pair, one step axis (checkpoints evenly spaced, labelled by step), E marked (plotly ``Figure``)."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    from interp.report.figures import plot_text

    steps = [int(s) for s in curve["step"]]
    position = {s: i for i, s in enumerate(steps)}  # checkpoints evenly spaced, labelled by their step
    x_all = list(range(len(steps)))
    heads = sorted({(int(l), int(h)) for l, h in zip(table["layer"], table["head"])})
    labels = [_label(l, h) for l, h in heads]
    columns = sorted({int(s) for s in table["step"]})
    index = {pair: i for i, pair in enumerate(heads)}
    col = {s: j for j, s in enumerate(columns)}
    shape = (len(heads), len(columns))
    z = np.full(shape, np.nan)
    custom = np.empty(shape + (2,), dtype=object)  # hover text, the step (a click's link into the scrubber)
    custom[:] = ""
    dots: dict[bool, tuple[list, list]] = {True: ([], []), False: ([], [])}
    for r in table.itertuples():
        i, j = index[int(r.layer), int(r.head)], col[int(r.step)]
        z[i, j] = r.delta
        if r.how == "exact" and math.isfinite(r.lo) and math.isfinite(r.hi):
            interval = f"[{r.lo:+.4f}, {r.hi:+.4f}] (exact, 95 % CI)"
            dots[not (r.lo <= 0 <= r.hi)][0].append(position[int(r.step)])
            dots[not (r.lo <= 0 <= r.hi)][1].append(labels[i])
        elif r.how == "exact":
            interval = "(exact, no interval)"
        else:
            interval = "(estimated by the screen)"
        custom[i, j, 0] = f"pair {int(r.step)} → {int(r.post_step)}, Δ {r.delta:+.4f} {interval}"
        custom[i, j, 1] = int(r.step)
    panels = [170, 18 * len(heads) + 20, 90]  # pixels: the curve, the heatmap (a row per head), the bound
    fig = make_subplots(
        rows=3, cols=1, shared_xaxes=True, row_heights=[p / sum(panels) for p in panels], vertical_spacing=0.03
    )
    fig.add_trace(
        go.Scatter(x=x_all, y=curve["accuracy"], mode="lines+markers", name="greedy accuracy",
                   line={"color": "#1f77b4"}, marker={"size": 4}, customdata=steps,
                   hovertemplate="step %{customdata}: accuracy %{y:.3f}<extra></extra>"),
        row=1, col=1,
    )  # fmt: skip
    fig.add_trace(
        go.Scatter(x=x_all, y=curve["p_answer"], mode="lines", name="mean p(answer)",
                   line={"color": "#ff7f0e", "dash": "dot"}, customdata=steps,
                   hovertemplate="step %{customdata}: mean p(answer) %{y:.3f}<extra></extra>"),
        row=1, col=1,
    )  # fmt: skip
    peak = float(np.nanmax(np.abs(z))) if np.isfinite(z).any() else 1.0
    fig.add_trace(
        go.Heatmap(
            x=[position[s] for s in columns], y=labels, z=z, customdata=custom, zmid=0, zmin=-peak, zmax=peak,
            colorscale="RdBu_r", hovertemplate="%{y}: %{customdata[0]}<extra></extra>", name="Δ per head",
            colorbar={"title": {"text": plot_text(f"Δ ({unit})")}, "len": panels[1] / sum(panels),
                      "y": (panels[2] + panels[1] / 2) / sum(panels), "thickness": 14},
            showlegend=False,
        ),
        row=2, col=1,
    )  # fmt: skip
    for excludes, (xs, ys) in dots.items():
        if xs:
            fig.add_trace(
                go.Scatter(
                    x=xs, y=ys, mode="markers", hoverinfo="skip",
                    name="exact, 95 % CI excludes 0" if excludes else "exact, 95 % CI holds 0",
                    marker={"symbol": "circle" if excludes else "circle-open", "size": 5, "color": "black"},
                ),
                row=2, col=1,
            )  # fmt: skip
    bounds = pairs["bound"].astype(float) if "bound" in pairs else pd.Series(dtype=float)
    if np.isfinite(bounds).any():
        fig.add_trace(
            go.Bar(x=[position[int(s)] for s in pairs["step"]], y=bounds, name="miss bound (largest sampled |Δ|)",
                   marker={"color": "#7f7f7f"}, customdata=[int(s) for s in pairs["step"]],
                   hovertemplate="step %{customdata}: the screen may have missed |Δ| up to %{y:.4g}<extra></extra>"),
            row=3, col=1,
        )  # fmt: skip
    e = point.get("post_step") if point.get("emerged") else None
    if e is not None and e in position:
        for row in (1, 2, 3):
            fig.add_vline(x=position[e], line={"color": "black", "dash": "dash", "width": 1}, row=row, col=1)
        fig.add_annotation(x=position[e], y=1.0, yref="y domain", yanchor="bottom", text=f"E = step {e}",
                           showarrow=False, row=1, col=1)  # fmt: skip
    every = max(1, math.ceil(len(steps) / 16))  # at most ~16 labels
    for row in (1, 2, 3):
        fig.update_xaxes(tickvals=x_all[::every], ticktext=[str(s) for s in steps[::every]],
                         range=[-0.5, len(steps) - 0.5], row=row, col=1)  # fmt: skip
    fig.update_xaxes(title_text="training step (checkpoints evenly spaced; a pair at its earlier step)", row=3, col=1)
    fig.update_yaxes(title_text="capability", range=[0, 1.05], row=1, col=1)
    fig.update_yaxes(title_text="head", autorange="reversed", dtick=1, tickfont={"size": 10}, row=2, col=1)
    fig.update_yaxes(title_text=plot_text(f"bound ({unit})"), row=3, col=1)
    fig.update_layout(
        height=sum(panels) + 140,
        margin={"l": 70, "r": 20, "t": 40, "b": 60},
        legend={"orientation": "h", "y": 1.04, "x": 0, "yanchor": "bottom"},
        plot_bgcolor="white",
    )
    return fig


def scrubber_link(href: str, run: str, head: str, step: int) -> str:
    """The address that opens ``href`` (a scrubber page, or a report holding the run's scrubber)
    on ``head`` (``"L1H2"``) enlarged at the recorded step nearest ``step``, in the scrubber of
    ``run`` (:func:`interp.sources.catalogue.run_label`): ``href#run=...&head=...&step=...``,
    the fragment the scrubber's script reads (:mod:`interp.report.scrubber`). The timeline page's
    script builds the same address for a clicked cell."""
    from urllib.parse import urlencode

    return f"{href}#{urlencode({'run': run, 'head': head, 'step': int(step)})}"


def timeline_fragment(timeline: Any, assets: Any, heading: bool = True, scrubber: str | None = None) -> str:
    """The timeline as a page fragment: findings, figure, pairs' table (``report/templates/timeline.html.j2``).

    Args:
        timeline: an :class:`interp.timeline.HeadTimeline`.
        assets: the page's :class:`interp.report.display.Assets` (plotly.js inlined once).
        heading: the title as a heading (Jupyter; the page has its own).
        scrubber: the address of a page holding the run's scrubber (``emergence scrub``'s page,
            or the main job's report.html), relative to this page: clicking a heatmap cell opens
            it on that head at that step (:func:`scrubber_link`); None: cells are not links.
    """
    from interp.report.display import figure_fragment
    from interp.sources.catalogue import model_and_seed, run_label

    caption = (
        f"Top: the capability at each checkpoint. Middle: Δ ({timeline.metric}, {timeline.unit}) of patching one "
        "head's attention pattern from the later checkpoint of a pair into the earlier one, at the earlier step; "
        "red raises the metric, blue lowers it. A filled dot: exact, its 95 % bootstrap interval over prompts "
        "excludes 0; an open dot: exact, the interval holds 0; no dot: the attribution screen's estimate only. "
        "Bottom: the largest exact |Δ| among heads drawn at random outside the screen's top N (what the screen "
        "may have missed). Dashed line: E. Hover a cell for its value and interval."
    )
    figure = figure_fragment(timeline.figure(), assets, caption=caption)
    shown = timeline.pairs.copy()
    for column in ("bound_layer", "bound_head"):
        if column in shown:
            shown[column] = shown[column].astype("Int64")
    for column in ("value_pre", "value_post", "bound", "spearman", "seconds"):
        if column in shown:  # significant digits: a bound of 2e-4 is not 0.0000
            shown[column] = [f"{v:.3g}" if math.isfinite(v) else "—" for v in shown[column].astype(float)]
    return render(
        "report/templates/timeline.html.j2",
        title=timeline.title if heading else "",
        findings=timeline.findings(),
        figure=trusted(figure),
        table=trusted(table_fragment(shown, digits=4)),
        settings=", ".join(f"{k}={v}" for k, v in timeline.settings.items() if k not in ("config", "task_spec")),
        scrubber=scrubber,
        run=run_label(*model_and_seed(timeline.model_id)),
    )


def timeline_page(timeline: Any, scrubber: str | None = None) -> str:
    """The timeline's own page: self-contained (plotly.js inlined once in ``<head>``), offline;
    ``scrubber``: as :func:`timeline_fragment`'s."""
    from interp.report.display import page_html

    return page_html(
        timeline.title,
        lambda assets: style_tag() + timeline_fragment(timeline, assets, heading=False, scrubber=scrubber),
    )
