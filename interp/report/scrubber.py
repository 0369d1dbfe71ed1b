"""The attention-pattern scrubber: every head's pattern on one prompt, at every checkpoint of a run.

This module is the scrubber's picture: :class:`ScrubData` (what one scrubber shows, and its
page payload), the page fragment, the :class:`Scrubber` page and the report's section data
(:func:`run_scrub_data`). Recording the data (loading every checkpoint once: ``PatternRecorder``,
``scrub_data``, ``scrubber``) is the top floor's, :mod:`interp.scrubbing`; the page script and
style are :mod:`interp.report.scrub_script`.

One offline page (or notebook output, or a section of ``report.html``): a step slider over the
run's checkpoints (zoomed steps of :mod:`interp.zoom` ticked, the point of emergence a band on its
track), a grid of every head's attention pattern (``hook_pattern``, post-softmax; rows are query
positions, columns key positions, token labels on both axes) at the chosen step, ordered by layer
or by Δp (largest first, when a ranking exists), a difference view (the step shown minus the
previous step or any chosen reference step, coloured per step or on a fixed ± range so steps
compare), a click or Enter that enlarges one head with its tokens written out, and beside it the
capability curve, the head scores (:mod:`interp.scores`) and Δp with a marker that moves with the
slider. Keys (listed on the page): ← / → step, Home / End, p plays, d difference, r reference,
f fixed range, Esc closes the enlarged head, ↑ / ↓ move it between heads. A link whose fragment
is ``#run=<label>&head=L1H2&step=300`` (the head timeline's cells, :mod:`interp.report.timeline_page`)
opens on the recorded step nearest 300 with L1H2 enlarged, in the scrubber of that run (``label``,
:func:`interp.sources.catalogue.run_label`) or the page's only one.

The markup is the Jinja2 template ``templates/scrubber.html.j2`` (autoescaped: token text, run
names and captions are data), the script and style are package data files
(:mod:`interp.report.scrub_script`), inlined so the page opens offline from ``file://``.

Why a small hand-written script draws the grid instead of plotly frames: the grid is one canvas
per head, redrawn from precomputed bytes, where a plotly heatmap grid replots every subplot on
each frame; ``benchmarks/bench_scrubber.py`` times both in one Chromium run (8 heads of 19 x 19:
plotly's ``restyle`` 13.7x slower, 284 ms against 21 ms median on a loaded 2-core machine; a frame
has 50 ms). plotly draws the curves (hover, zoom, legends); the slider's marker is a line laid
over each plot (moving a plotly shape by ``Plotly.relayout`` took ~25 ms per figure).

Page weight: patterns are quantised to bytes (``round(255 p)``, so to ±0.002 probability), the
causal upper triangle is left out, and the bytes are deflated (zlib) and base64-encoded inside a
``<script type="application/json">`` (Jinja2's ``tojson``: ``<``, ``>``, ``&``, ``'`` and any
non-ASCII character escaped as ``\\u003c`` etc., so token text such as ``</script>`` or ``<!--``
stays data); the page inflates them with the browser's ``DecompressionStream``. plotly.js is
inlined once per page.
"""

from __future__ import annotations

import base64
import html
import uuid
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from jaxtyping import Float, UInt8

from interp.core.settings import StudyConfig
from interp.core.terms import DEFAULT_THRESHOLD
from interp.report.findings import interval_text
from interp.report.scrub_script import scrub_script

__all__ = [
    "DEFAULT_PROMPTS",
    "ScrubData",
    "Scrubber",
    "quantise_patterns",
    "ranking_values",
    "run_scrub_data",
    "scrub_script",
    "scrubber_fragment",
    "token_labels",
]

#: Prompts of the task the scrubber carries (the chooser's "handful").
DEFAULT_PROMPTS = 4
#: Levels of a quantised attention probability (one byte).
LEVELS = 255


def quantise_patterns(patterns: Float[torch.Tensor, "... query_pos key_pos"]) -> np.ndarray:
    """Attention probabilities as bytes: ``round(255 p)`` (so ±0.002 probability), ``uint8``.

    Returns:
        ``UInt8[ndarray, "... query_pos key_pos"]``, the shape of ``patterns`` (values clamped to
        ``[0, 1]`` first).
    """
    values = patterns.detach().float().cpu().clamp(0.0, 1.0).numpy()
    return np.rint(values * LEVELS).astype(np.uint8)


def token_labels(tokenizer, ids: Sequence[int]) -> list[str]:
    """One printable label per token: the decoded text, whitespace made visible (``␣``, ``⏎``)."""
    labels = []
    for token_id in ids:
        text = tokenizer.decode([int(token_id)])
        text = text.replace("\n", "⏎").replace("\t", "⇥").replace("\r", "␍")
        labels.append(("␣" + text[1:]) if text.startswith(" ") else (text or "∅"))
    return labels


@dataclass
class ScrubData:
    """What one scrubber shows.

    Attributes:
        label: the run's name (``"neox-2l-64d seed 1"``).
        steps: training steps of the slider (ascending).
        patterns: ``UInt8[ndarray, "prompt step layer head query_pos key_pos"]``, ``round(255 p)``.
        tokens: one token label list per prompt (``query_pos`` labels each).
        curve: rows (step, accuracy, p_answer): capability per checkpoint (fractions).
        zoom_steps: steps re-trained by ``emergence zoom`` (marked on the slider).
        head_scores: rows (step, layer, head, score, value) or None.
        delta_p: ``Float[ndarray, "layer head"]`` of a ranking, or None: the change of the
            ranking's metric per head (probability for ``p``; the metric's unit otherwise).
        metric: the ranking's metric name (:mod:`interp.core.metrics`); its labels head the heads
            (``Δp``, ``Δ logit difference``, ...).
        pre_step, post_step: the point of emergence, when known.
        threshold: greedy-accuracy threshold of the point of emergence (fraction).

    Raises:
        ValueError: ``patterns`` is not ``uint8`` with 6 axes and square ``[pos, pos]`` last axes,
            its prompt or step axis does not match ``tokens`` or ``steps``, or a prompt's label
            list is not ``pos`` long.
    """

    label: str
    steps: list[int]
    patterns: UInt8[np.ndarray, "prompt step layer head query_pos key_pos"]
    tokens: list[list[str]]
    curve: pd.DataFrame
    zoom_steps: list[int] = field(default_factory=list)
    head_scores: pd.DataFrame | None = None
    delta_p: np.ndarray | None = None
    metric: str = "p"
    pre_step: int | None = None
    post_step: int | None = None
    threshold: float = DEFAULT_THRESHOLD

    def __post_init__(self) -> None:
        shape = self.patterns.shape
        if self.patterns.ndim != 6 or self.patterns.dtype != np.uint8 or shape[-1] != shape[-2]:
            raise ValueError(
                f"patterns must be uint8 [prompt, step, layer, head, pos, pos], got {self.patterns.dtype} {shape}"
            )
        if shape[1] != len(self.steps) or shape[0] != len(self.tokens):
            raise ValueError(f"patterns {shape} do not match {len(self.tokens)} prompts x {len(self.steps)} steps")
        if any(len(t) != shape[-1] for t in self.tokens):
            raise ValueError(f"every prompt needs {shape[-1]} token labels, got {[len(t) for t in self.tokens]}")

    def delta_label(self) -> str:
        """The label of one head's value: the metric's change label (``Δp``, ``Δ logit difference``)."""
        from interp.core.metrics import metric_spec

        return metric_spec(self.metric).delta_label

    def payload(self, max_chars: int = 140_000) -> dict:
        """The page's data: shapes, steps, tokens, and the pattern bytes.

        The causal upper triangle is left out, each step is stored as its change from the step
        before (mod 256: consecutive checkpoints are alike, so the bytes deflate better), then
        deflated (zlib) and base64-encoded. The patterns keep their 255 levels when that fits in
        ``max_chars`` characters, else they are stored to 100, 50 or 25 levels (the first that
        fits; the page says which).
        """
        n_prompts, n_steps, n_layers, n_heads, n, _ = self.patterns.shape
        upper = np.triu(np.ones((n, n), dtype=bool), k=1)
        causal = not self.patterns[..., upper].any()
        cells = self.patterns[..., ~upper] if causal else self.patterns.reshape(*self.patterns.shape[:4], n * n)
        for levels in (LEVELS, 100, 50, 25):
            values = (
                cells if levels == LEVELS else np.rint(cells.astype(np.float32) * (levels / LEVELS)).astype(np.uint8)
            )
            delta = values.copy()
            delta[:, 1:] = values[:, 1:] - values[:, :-1]  # uint8 arithmetic wraps mod 256
            data = base64.b64encode(zlib.compress(np.ascontiguousarray(delta).tobytes(), 9)).decode("ascii")
            if len(data) <= max_chars:
                break
        return {
            "prompts": n_prompts,
            "steps": [int(s) for s in self.steps],
            "layers": n_layers,
            "heads": n_heads,
            "n": n,
            "causal": causal,
            "levels": levels,
            "tokens": self.tokens,
            "zoom": [int(s) for s in self.zoom_steps],
            "pre": self.pre_step,
            "post": self.post_step,
            "label": self.label,
            "data": data,
            "delta_label": self.delta_label(),
            "delta_p": None
            if self.delta_p is None
            else [
                [None if not np.isfinite(v) else round(float(v), 4) for v in row]
                for row in np.asarray(self.delta_p, float)
            ],
            # what each head's title shows, formatted here by the summary's and the findings' own
            # rule (interval_text): rounding the rounded 4-digit values again in the browser showed
            # +0.015 where they show +0.016 (issue 71); the numbers above only order the heads
            "delta_text": None
            if self.delta_p is None
            else [
                [None if not np.isfinite(v) else interval_text(float(v), signed=True) for v in row]
                for row in np.asarray(self.delta_p, float)
            ],
        }


def _figures(data: ScrubData, delta_p_figure: bool = True) -> list[tuple[Any, bool, str]]:
    """(figure, whether its x axis is the training step and takes the slider's marker, caption)
    of the side panel. The marker is a line the page script lays over the plot (moving a plotly
    shape by ``Plotly.relayout`` costs ~25 ms a figure, over the frame's budget)."""
    import plotly.graph_objects as go
    import plotly.io as pio

    from interp.report.figures import delta_p_heatmap, run_capability_figure

    out = []
    if len(data.curve):
        fig = run_capability_figure(
            data.curve.round(4),
            data.pre_step,
            data.post_step,
            threshold=data.threshold,
            title="Capability per checkpoint",
        )
        fig.update_layout(
            height=300, margin=dict(t=40, b=40, l=50, r=10), legend=dict(orientation="h", y=-0.3), title_font_size=14
        )
        out.append((fig, True, "greedy accuracy and p(answer)"))
    scores = data.head_scores
    if scores is not None and len(scores):
        fig, caption = _head_scores_panel(data, scores)
        out.append((fig, True, caption))
    if data.delta_p is not None and delta_p_figure:
        pair = (
            f"step {data.post_step} patched into step {data.pre_step}" if data.pre_step is not None else "the ranking"
        )
        from interp.core.metrics import metric_spec

        delta, quantity = data.delta_label(), metric_spec(data.metric).label
        fig = delta_p_heatmap(np.asarray(data.delta_p, float), title=f"{delta} per head ({pair})", metric=data.metric)
        fig.update_layout(height=300, margin=dict(t=40, b=40, l=50, r=10), title_font_size=14)
        out.append(
            (
                fig,
                False,
                (
                    f"{delta} = {quantity} with the head's post pattern patched in, minus its value "
                    f"at the pre checkpoint"
                ),
            )
        )
    light = go.layout.Template(layout=pio.templates["plotly"].layout)  # the look, without per-trace defaults
    for fig, _, _ in out:
        fig.layout.template = light
    return out


#: Heads drawn in colour in the scrubber's head-score panel (the others faint grey, named on hover).
TOP_SCORE_HEADS = 3


def _head_scores_panel(data: ScrubData, scores: pd.DataFrame):
    """The head-score panel: per score (the menu picks it), the :data:`TOP_SCORE_HEADS` heads with
    the highest score at the last step in colour and named in the legend, every other head a faint
    grey line (named on hover; legend entry "other heads" shows or hides them). Returns (figure, caption)."""
    import plotly.graph_objects as go
    import plotly.io as pio

    from interp.report.step_axis import step_axis

    palette = pio.templates["plotly"].layout.colorway
    fig = go.Figure()
    names = list(dict.fromkeys(scores["score"]))
    groups: list[int] = []  # the score each trace belongs to
    last = scores["step"].max()
    for i, name in enumerate(names):
        mine = scores[scores["score"] == name]
        final = mine[mine["step"] == last].sort_values("value", ascending=False)
        top = [(int(r.layer), int(r.head)) for r in final.head(TOP_SCORE_HEADS).itertuples()]
        rest_named = False
        for (layer, head), line in mine.groupby(["layer", "head"]):
            line = line.sort_values("step")
            rank = top.index((layer, head)) if (layer, head) in top else None
            fig.add_trace(
                go.Scatter(
                    x=line["step"],
                    y=line["value"].round(3),
                    mode="lines+markers" if rank is not None else "lines",
                    marker=dict(size=3),
                    line=dict(color=palette[rank % len(palette)], width=2.5)
                    if rank is not None
                    else dict(color="rgba(120,120,120,0.25)", width=1),
                    name=f"L{layer}H{head}" if rank is not None else "other heads",
                    legendgroup=None if rank is not None else f"rest-{name}",
                    showlegend=rank is not None or not rest_named,
                    legendrank=rank + 1 if rank is not None else 1000,
                    visible=i == 0,
                    hovertemplate=f"L{layer}H{head} {name}<br>step %{{x}}<br>%{{y:.3f}}<extra></extra>",
                )
            )
            groups.append(i)
            rest_named = rest_named or rank is None
    buttons = [
        dict(
            label=name.replace("_", "-"),
            method="update",
            args=[{"visible": [g == i for g in groups]}, {"yaxis.title.text": name.replace("_", "-") + " score"}],
        )
        for i, name in enumerate(names)
    ]
    step_axis(fig, "linear")
    fig.update_layout(
        title="Head scores",
        title_font_size=14,
        height=300,
        showlegend=True,
        yaxis_title=names[0].replace("_", "-") + " score",
        margin=dict(t=40, b=40, l=50, r=10),
        updatemenus=[dict(type="dropdown", buttons=buttons, x=1, xanchor="right", y=1.18, yanchor="top")],
    )
    caption = (
        f"the {TOP_SCORE_HEADS} heads with the highest score at the last step in colour, the others grey "
        "(hover names them); the menu picks the score"
    )
    return fig, caption


def _track_position(steps: Sequence[int], step: int) -> float:
    """Where ``step`` sits on the slider (the fraction of its track; the index of the first
    checkpoint at or after ``step``, as the slider moves by checkpoint)."""
    index = int(np.searchsorted(np.asarray(steps), step))
    return min(index, len(steps) - 1) / max(1, len(steps) - 1)


def _on_track(fraction: float) -> str:
    """A CSS ``left`` on the slider's track: the thumb's centre (16 px wide) at ``fraction``."""
    return f"calc(8px + (100% - 16px) * {fraction:.5f})"


def _start_index(data: ScrubData) -> int:
    """The checkpoint the scrubber opens at: the post step of the point of emergence, where the
    pattern has formed (step 0's patterns are flat); the first checkpoint when there is none."""
    steps = [int(s) for s in data.steps]
    return steps.index(int(data.post_step)) if data.post_step is not None and int(data.post_step) in steps else 0


def _emergence_band(data: ScrubData) -> dict[str, str] | None:
    """The point of emergence on the slider's track (from the pre to the post checkpoint), or None."""
    if data.pre_step is None or data.post_step is None or len(data.steps) < 2:
        return None
    low, high = _track_position(data.steps, data.pre_step), _track_position(data.steps, data.post_step)
    return {
        "left": _on_track(low),
        "width": f"calc((100% - 16px) * {high - low:.5f})",
        "middle": _on_track((low + high) / 2),
        "title": f"point of emergence: step {data.pre_step} → {data.post_step}",
        "label": f"emergence {data.pre_step}→{data.post_step}",
    }


def scrubber_fragment(data: ScrubData, assets, max_chars: int = 140_000, delta_p_figure: bool = True) -> str:
    """One scrubber as an HTML fragment (``templates/scrubber.html.j2``, autoescaped): plotly.js and
    the scrubber script come from ``assets`` (:class:`interp.report.display.Assets`, once per page).

    Args:
        data: what to show.
        assets: the page's assets.
        max_chars: budget of the pattern bytes (base64 characters, :meth:`ScrubData.payload`).
        delta_p_figure: draw the per-head heatmap of the ranking's metric change (Δp for p) beside the grid
            (the value also heads each head's title, with the metric's label).
    """
    import plotly.io as pio
    from markupsafe import Markup

    from interp.core.templating import render
    from interp.report.display import PLOTLY_CONFIG

    uid = "el-scrub-" + uuid.uuid4().hex[:12]
    figs, parts = [], []
    for i, (fig, marker, caption) in enumerate(_figures(data, delta_p_figure)):
        div_id = f"{uid}-fig{i}"
        figure = pio.to_html(
            fig,
            full_html=False,
            include_plotlyjs=False,
            include_mathjax=False,
            config=PLOTLY_CONFIG,
            default_width="100%",
            div_id=div_id,
        )
        parts.append({"html": Markup(figure), "caption": caption})  # plotly's own HTML (its JSON escapes "</")
        figs.append({"id": div_id, "marker": marker})
    start = _start_index(data)
    spec = {**data.payload(max_chars), "figs": figs, "start": start, "label": data.label}  # label: links' run=
    precision = (
        f"Attention is shown to 1/{spec['levels']} of a probability (±{0.5 / spec['levels']:.3f})"
        + ("" if spec["levels"] == LEVELS else " to keep the page light (emergence scrub keeps more)")
        + "."
    )
    zoom_marks = [_on_track(_track_position(data.steps, s)) for s in data.zoom_steps] if len(data.steps) > 1 else []
    return render(
        "report/templates/scrubber.html.j2",
        library=Markup(assets.require("plotly") + assets.require("scrubber")),
        uid=uid,
        spec=spec,
        n_steps=len(data.steps),
        start=start,
        steps=[int(s) for s in data.steps],
        zoom_marks=zoom_marks,
        band=_emergence_band(data),
        has_delta=data.delta_p is not None and bool(np.isfinite(np.asarray(data.delta_p, float)).any()),
        delta_label=data.delta_label(),
        prompt_options=[f"{i}: " + " ".join(tokens)[:48] for i, tokens in enumerate(data.tokens)],
        parts=parts,
        precision=precision,
    )


class Scrubber:
    """A scrubber page for a notebook (``_repr_html_``, self-contained: plotly.js inlined in the
    output) or a file (:meth:`save_html`)."""

    def __init__(self, data: ScrubData, title: str | None = None) -> None:
        self.data = data
        self.title = title or f"Attention patterns across checkpoints: {data.label}"

    def html(self) -> str:
        """The whole offline page (plotly.js and the scrubber script inlined once)."""
        from interp.report.display import page_html

        return page_html(self.title, lambda assets: scrubber_fragment(self.data, assets))

    def _repr_html_(self) -> str:
        from interp.report.display import Assets, style_tag

        return f"<div>{style_tag()}<h3>{html.escape(self.title)}</h3>{scrubber_fragment(self.data, Assets())}</div>"

    def save_html(self, path: str | Path) -> Path:
        """Write :meth:`html` to ``path`` atomically; returns the path."""
        from interp.core.io import atomic_write_text

        return atomic_write_text(Path(path), self.html())


def ranking_values(ranking) -> tuple[np.ndarray | None, int | None, int | None, str]:
    """(per-head values, pre step, post step, metric name) of a ranking given to the scrubber.

    ``ranking``: None, a ranking table (``heads.csv``: columns ``layer``, ``head``, ``delta``,
    optionally ``metric``) or an object with ``delta`` (a ``RunAnalysis``, a
    :class:`interp.ranking.HeadRanking`; optionally ``point``, ``metric``).

    Returns:
        The values as ``Float[ndarray, "layer head"]`` in the metric's unit (from a table:
        ``max layer + 1`` x ``max head + 1``, NaN for heads not in it) or None; the pre and post
        steps (None from a table); the metric name (``"p"`` when not given).

    Raises:
        ValueError: a table without the columns ``layer``, ``head`` and ``delta``.
    """
    if ranking is None:
        return None, None, None, "p"
    if isinstance(ranking, pd.DataFrame):
        metric = str(ranking["metric"].iloc[0]) if "metric" in ranking.columns and len(ranking) else "p"
        if not {"layer", "head", "delta"} <= set(ranking.columns):
            raise ValueError(f"ranking table has columns {list(ranking.columns)}; expected layer, head, delta")
        table = np.full((int(ranking["layer"].max()) + 1, int(ranking["head"].max()) + 1), np.nan)
        table[ranking["layer"].astype(int), ranking["head"].astype(int)] = ranking["delta"].astype(float)
        return table, None, None, metric
    point = getattr(ranking, "point", None)
    delta = getattr(ranking, "delta", None)
    values = None if delta is None else np.asarray(delta.detach().cpu() if hasattr(delta, "detach") else delta, float)
    return (
        values,
        getattr(point, "pre_step", None),
        getattr(point, "post_step", None),
        getattr(ranking, "metric", None) or "p",
    )


def run_scrub_data(run, config: StudyConfig = StudyConfig(), n_prompts: int | None = None) -> ScrubData | None:
    """The scrubber data a main-job run recorded, or None without them.

    Args:
        run: a main-job run (:class:`interp.main_job.report.RunAnalysis`: ``scrub_patterns``
            ``UInt8[ndarray, "prompt step layer head query_pos key_pos"]``, ``scrub_steps``,
            ``scrub_tokens``, ``curve``, ``head_scores``, its ranking's ``delta`` and point).
        config: the study settings (:class:`interp.core.settings.StudyConfig`): ``threshold``
            (greedy-accuracy fraction) is drawn on the capability curve.
        n_prompts: keep the first ``n_prompts`` prompts (None: every recorded one).

    Raises:
        TypeError: ``config`` is not a ``StudyConfig``.
    """
    from interp.core.objects import check_argument

    check_argument(isinstance(config, StudyConfig), config, "run_scrub_data: config", "a StudyConfig")
    patterns = getattr(run, "scrub_patterns", None)
    if patterns is None or not getattr(run, "scrub_steps", None):
        return None
    from interp.sources.catalogue import run_label

    patterns = patterns.numpy() if hasattr(patterns, "numpy") else np.asarray(patterns)
    patterns = patterns[:n_prompts] if n_prompts else patterns
    curve = (
        run.curve[run.curve["step"].isin(run.scrub_steps)]
        if getattr(run, "curve", None) is not None
        else pd.DataFrame()
    )
    scores = getattr(run, "head_scores", None)
    delta_p, pre, post, metric = ranking_values(run)
    return ScrubData(
        label=run_label(run.model, run.seed),
        steps=list(run.scrub_steps),
        patterns=patterns,
        tokens=[list(t) for t in run.scrub_tokens][: len(patterns)],
        curve=curve,
        head_scores=None if scores is None else scores[["step", "layer", "head", "score", "value"]],
        delta_p=delta_p,
        metric=metric,
        pre_step=pre,
        post_step=post,
        threshold=config.threshold,
    )
