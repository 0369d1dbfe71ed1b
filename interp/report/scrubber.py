"""The attention-pattern scrubber: every head's pattern on one prompt, at every checkpoint of a run.

Over 600 lines because the scrubber's data (patterns per checkpoint, quantised), its page
fragment and its inline script are one feature; its data half belongs on the top floor
(tests/test_import_graph.py NOT_YET), which will bring it under 600.

One offline page (or notebook output, or a section of ``report.html``): a step slider over the
run's checkpoints (zoomed steps of :mod:`interp.zoom` included and marked), a grid of every head's
attention pattern (``hook_pattern``, post-softmax; rows are query positions, columns key
positions, token labels on both axes) at the chosen step, a "change since the previous step"
toggle, and beside it the capability curve, the head scores (:mod:`interp.scores`) and Δp (when
a ranking exists) with a marker that moves with the slider. Arrow keys step, a play button
animates, a chooser switches among a handful of the task's prompts.

Why a small hand-written script draws the grid instead of plotly frames: the grid is one canvas
per head, redrawn from precomputed bytes, where a plotly heatmap grid replots every subplot on
each frame; ``benchmarks/bench_scrubber.py`` times both in one Chromium run (8 heads of 19 x 19:
plotly's ``restyle`` 13.7x slower, 284 ms against 21 ms median on a loaded 2-core machine; a frame
has 50 ms). plotly draws the curves (hover, zoom, legends); the slider's marker is a line laid
over each plot (moving a plotly shape by ``Plotly.relayout`` took ~25 ms per figure).

Page weight: patterns are quantised to bytes (``round(255 p)``, so to ±0.002 probability), the
causal upper triangle is left out, and the bytes are deflated (zlib) and base64-encoded inside a
``<script type="application/json">`` (``<``, ``>``, ``&`` escaped as ``\\u003c`` etc., so token
text such as ``</script>`` or ``<!--`` stays data); the page inflates them with the browser's
``DecompressionStream``. plotly.js is inlined once per page.
"""

from __future__ import annotations

import base64
import html
import json
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

from interp.emergence import StepEvaluator
from interp.tasks import evaluate

__all__ = [
    "DEFAULT_PROMPTS",
    "PatternRecorder",
    "ScrubData",
    "Scrubber",
    "quantise_patterns",
    "scrub_data",
    "scrubber",
    "scrubber_fragment",
    "token_labels",
]

#: Prompts of the task the scrubber carries (the chooser's "handful").
DEFAULT_PROMPTS = 4
#: Levels of a quantised attention probability (one byte).
LEVELS = 255


def quantise_patterns(patterns: Float[torch.Tensor, "... query_pos key_pos"]) -> np.ndarray:
    """Attention probabilities as bytes: ``round(255 p)`` (so ±0.002 probability), ``uint8``."""
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


class PatternRecorder(StepEvaluator):
    """A :class:`interp.emergence.StepEvaluator` that also keeps, for every step it loads, each
    head's attention pattern on the first ``n_prompts`` prompts (quantised,
    ``UInt8[ndarray, "prompt layer head query_pos key_pos"]``) and, when ``scores``, the head
    scores of :func:`interp.scores.head_scores` -- no checkpoint is loaded twice."""

    def __init__(
        self, source, batch, device: str | None = None, n_prompts: int = DEFAULT_PROMPTS, scores: bool = False
    ):
        super().__init__(source, batch, device=device)
        self.n_prompts = max(1, min(int(n_prompts), len(batch)))
        self.patterns: dict[int, np.ndarray] = {}
        self.want_scores = scores
        self.score_rows: list[tuple] = []
        self._score_tokens: tuple[torch.Tensor, int] | None = None

    def __call__(self, step: int, then: int | None = None):  # then: read-ahead hint, not used here
        if step not in self.scores:
            from interp.patching import cache_patterns

            checkpoint = self.source.load(step, device=self.device)
            self.scores[step] = evaluate(checkpoint.model, self.batch)
            self.order.append(step)
            with torch.inference_mode():
                patterns = cache_patterns(checkpoint.model, self.batch.tokens[: self.n_prompts])
            self.patterns[step] = quantise_patterns(patterns.permute(1, 0, 2, 3, 4))  # prompt first
            if self.want_scores:
                self._record_scores(step, checkpoint.model)
        return self.scores[step]

    def _record_scores(self, step: int, model) -> None:
        from interp.scores import head_scores, repeated_random_tokens
        from interp.tasks import alnum_token_pool

        if self._score_tokens is None:
            pool = alnum_token_pool(self.source.tokenizer())
            period = min(20, len(pool))
            self._score_tokens = (repeated_random_tokens(pool, n_prompts=16, period=period), period)
        tokens, period = self._score_tokens
        with torch.inference_mode():
            values = head_scores(model, tokens, period)
        for name, table in values.items():
            for (layer, head), value in np.ndenumerate(table.numpy()):
                self.score_rows.append((int(step), int(layer), int(head), name, float(value)))

    def recorded(self, steps: Sequence[int] | None = None) -> tuple[list[int], np.ndarray]:
        """(steps, ``UInt8[ndarray, "prompt step layer head query_pos key_pos"]``) of the recorded
        steps (ascending), or of ``steps`` when given."""
        steps = sorted(self.patterns) if steps is None else list(steps)
        return steps, np.stack([self.patterns[s] for s in steps], axis=1)


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
    threshold: float = 0.5

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
        }


def _json_for_script(value: Any) -> str:
    """JSON that cannot end its ``<script>`` element or open a comment: ``<``, ``>``, ``&`` and
    the two JavaScript line separators are written as ``\\uXXXX`` escapes."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    for char, escape in (
        ("<", "\\u003c"),
        (">", "\\u003e"),
        ("&", "\\u0026"),
        ("\u2028", "\\u2028"),
        ("\u2029", "\\u2029"),
    ):
        text = text.replace(char, escape)
    return text


def _figures(data: ScrubData, delta_p_figure: bool = True) -> list[tuple[Any, bool, str]]:
    """(figure, whether its x axis is the training step and takes the slider's marker, caption)
    of the side panel. The marker is a line the page script lays over the plot (moving a plotly
    shape by ``Plotly.relayout`` costs ~25 ms a figure, over the frame's budget)."""
    import plotly.graph_objects as go
    import plotly.io as pio

    from interp.report.figures import _log_step_axis, delta_p_heatmap, run_capability_figure

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
        fig.update_xaxes(title_text="training step (log)")
        out.append((fig, True, "greedy accuracy and p(answer)"))
    scores = data.head_scores
    if scores is not None and len(scores):
        fig = go.Figure()
        names = list(dict.fromkeys(scores["score"]))
        for i, name in enumerate(names):
            for (layer, head), line in scores[scores["score"] == name].groupby(["layer", "head"]):
                line = line.sort_values("step")
                fig.add_trace(
                    go.Scatter(
                        x=line["step"].clip(lower=0.5),
                        y=line["value"].round(3),
                        mode="lines+markers",
                        marker=dict(size=3),
                        name=f"L{layer}H{head}",
                        visible=i == 0,
                        hovertemplate=f"L{layer}H{head} {name}<br>step %{{x}}<br>%{{y:.3f}}<extra></extra>",
                    )
                )
        per = len(fig.data) // max(1, len(names))
        buttons = [
            dict(
                label=name.replace("_", "-"),
                method="update",
                args=[
                    {"visible": [j // per == i for j in range(len(fig.data))]},
                    {"yaxis.title.text": name.replace("_", "-") + " score"},
                ],
            )
            for i, name in enumerate(names)
        ]
        low, high = float(scores["step"].min()), float(scores["step"].max())
        if low > 0 and high / low < 20:  # a few steps around the point: a linear axis has ticks there
            fig.update_xaxes(title_text="training step")
        else:
            _log_step_axis(fig)
            fig.update_xaxes(title_text="training step (log)")
        fig.update_layout(
            title="Head scores",
            title_font_size=14,
            height=300,
            showlegend=True,
            yaxis_title=names[0].replace("_", "-") + " score",
            margin=dict(t=40, b=40, l=50, r=10),
            updatemenus=[dict(type="dropdown", buttons=buttons, x=1, xanchor="right", y=1.18, yanchor="top")],
        )
        out.append((fig, True, "one line per head; the menu picks the score"))
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


SCRUB_STYLE = """
.el-scrub{font-family:system-ui,sans-serif;font-size:13px;outline:none}
.el-scrub-controls{display:flex;flex-wrap:wrap;gap:6px 14px;align-items:center;margin:4px 0 8px 0}
.el-scrub-controls input[type=range]{flex:1 1 260px;min-width:200px}
.el-scrub-step{font-variant-numeric:tabular-nums;min-width:15em;font-weight:600}
.el-scrub-main{display:flex;flex-wrap:wrap;gap:12px;align-items:flex-start}
.el-scrub-grid{flex:3 1 600px;min-width:0}
.el-scrub-side{flex:1 1 360px;min-width:300px}
.el-scrub-layer{display:flex;flex-wrap:wrap;gap:6px;margin-bottom:6px}
.el-scrub-head{display:flex;flex-direction:column;align-items:flex-start}
.el-scrub-head span{font-weight:600;font-size:12px}
.el-scrub-head canvas{image-rendering:pixelated}
.el-scrub-tip{position:fixed;pointer-events:none;background:#fff;border:1px solid #888;padding:2px 5px;
  font-size:12px;display:none;z-index:10;white-space:pre}
.el-scrub-scale{display:inline-block;width:120px;height:10px;vertical-align:middle;border:1px solid #aaa}
.el-scrub .el-caption{margin:0 0 8px 0}
.el-scrub .el-scrub-marker{position:absolute;width:2px;pointer-events:none;background:repeating-linear-gradient(#222 0 5px,transparent 5px 8px)}
"""


def scrub_script() -> str:
    """The scrubber's page script (defines ``window.ELScrub``; inlined once per page)."""
    return f"<style>{SCRUB_STYLE}</style><script type='text/javascript'>{_SCRIPT}</script>"


def scrubber_fragment(data: ScrubData, assets, max_chars: int = 140_000, delta_p_figure: bool = True) -> str:
    """One scrubber as an HTML fragment: plotly.js and the scrubber script come from ``assets``
    (:class:`interp.report.display.Assets`, once per page).

    Args:
        data: what to show.
        assets: the page's assets.
        max_chars: budget of the pattern bytes (base64 characters, :meth:`ScrubData.payload`).
        delta_p_figure: draw the per-head heatmap of the ranking's metric change (Δp for p) beside the grid
            (the value also heads each head's title, with the metric's label).
    """
    import plotly.io as pio

    from interp.report.display import PLOTLY_CONFIG

    uid = "el-scrub-" + uuid.uuid4().hex[:12]
    figs, parts = [], []
    for i, (fig, marker, caption) in enumerate(_figures(data, delta_p_figure)):
        div_id = f"{uid}-fig{i}"
        parts.append(
            pio.to_html(
                fig,
                full_html=False,
                include_plotlyjs=False,
                include_mathjax=False,
                config=PLOTLY_CONFIG,
                default_width="100%",
                div_id=div_id,
            )
            + f"<p class='el-caption'>{html.escape(caption)}</p>"
        )
        figs.append({"id": div_id, "marker": marker})
    spec = {**data.payload(max_chars), "figs": figs}
    precision = (
        f"Attention is stored to 1/{spec['levels']} (±{0.5 / spec['levels']:.3f})"
        + ("" if spec["levels"] == LEVELS else " to keep the page light")
        + "."
    )
    library = assets.require("plotly") + assets.require("scrubber")
    return (
        f"{library}<div class='el-scrub' id='{uid}' tabindex='0'>"
        f"<script type='application/json' class='el-scrub-data'>{_json_for_script(spec)}</script>"
        "<div class='el-scrub-controls'></div><div class='el-scrub-main'><div class='el-scrub-grid'></div>"
        f"<div class='el-scrub-side'>{''.join(parts)}</div></div><p class='el-caption'>{precision}</p></div>"
        f"<script type='text/javascript'>ELScrub.mount('{uid}');</script>"
    )


class Scrubber:
    """A scrubber page for a notebook (``_repr_html_``, self-contained: plotly.js inlined in the
    output) or a file (:meth:`save_html`)."""

    def __init__(self, data: ScrubData, title: str | None = None) -> None:
        self.data = data
        self.title = title or f"Attention patterns across checkpoints: {data.label}"

    def html(self) -> str:
        """The whole offline page (plotly.js and the scrubber script inlined once)."""
        from interp.report.page import page_html

        return page_html(self.title, lambda assets: scrubber_fragment(self.data, assets) + _HELP)

    def _repr_html_(self) -> str:
        from interp.report.display import Assets, style_tag

        return (
            f"<div>{style_tag()}<h3>{html.escape(self.title)}</h3>{scrubber_fragment(self.data, Assets())}{_HELP}</div>"
        )

    def save_html(self, path: str | Path) -> Path:
        """Write :meth:`html` to ``path`` atomically; returns the path."""
        from interp.core.io import atomic_write_text

        return atomic_write_text(Path(path), self.html())


_HELP = (
    "<p class='el-caption'>Rows are query positions, columns key positions (the upper triangle is masked: a "
    "token attends to itself and earlier tokens only). ← / → step through the checkpoints (click the page first), "
    "▶ plays; hover a cell for its value.</p>"
)


def scrub_data(
    source,
    task=None,
    steps: Sequence[int] | None = None,
    n_prompts: int = DEFAULT_PROMPTS,
    device: str | None = None,
    scores: bool = True,
    ranking=None,
    threshold: float = 0.5,
) -> ScrubData:
    """Load every checkpoint of ``steps`` once and record what the scrubber shows.

    Args:
        source: a checkpoint source (``interp.sources.CheckpointSource``); a local suite
            with a zoom overlay (``emergence zoom``) shows its zoomed steps too.
        task: capability task (default :class:`interp.tasks.RepetitionTask`).
        steps: training steps (default: every step the source holds).
        n_prompts: prompts of the task the chooser offers (the first ones).
        scores: also record head scores at every step (:mod:`interp.scores`).
        ranking: a ``RunAnalysis`` (its ``delta_p`` and point of emergence), a heads table
            (columns layer, head, delta_p), or None. Without a point from the ranking, the
            point of emergence of the scrubbed curve is marked
            (:func:`interp.emergence.point_from_curve`: the last crossing that stays above).
        threshold: greedy-accuracy threshold drawn on the capability curve (fraction).

    Raises:
        ValueError: ``n_prompts < 1``, a ranking table without layer/head/delta_p columns.
        interp.sources.CheckpointError: a step the source does not hold (nearest named).
    """
    if n_prompts < 1:
        raise ValueError(f"n_prompts={n_prompts}; expected at least 1 prompt")
    delta_p, pre, post, metric = _ranking(ranking)
    zoomed, zoom_steps = _with_zoom(source)
    try:
        return _record(
            zoomed, zoom_steps, task, steps, n_prompts, device, scores, delta_p, pre, post, threshold, metric
        )
    finally:
        if zoomed is not source:
            zoomed.close()


def _record(
    source, zoom_steps, task, steps, n_prompts, device, scores, delta_p, pre, post, threshold, metric: str = "p"
) -> ScrubData:
    from interp.sources.catalogue import model_and_seed, run_label
    from interp.tasks import RepetitionTask

    wanted = sorted({int(s) for s in steps}) if steps is not None else source.available_steps()
    for step in wanted:
        source._check_step(step)
    task = task or RepetitionTask()
    batch = task.build(source.tokenizer())
    recorder = PatternRecorder(source, batch, device=device, n_prompts=n_prompts, scores=scores)
    for step in wanted:
        recorder(step)
    ordered, patterns = recorder.recorded(wanted)
    tokenizer = source.tokenizer()
    tokens = [token_labels(tokenizer, row.tolist()) for row in batch.tokens[: recorder.n_prompts]]
    model, seed = model_and_seed(source.model_id)
    head_scores = (
        pd.DataFrame(recorder.score_rows, columns=["step", "layer", "head", "score", "value"]) if scores else None
    )
    curve = recorder.table()[["step", "accuracy", "p_answer"]]
    if pre is None and post is None and len(curve) >= 2:  # no ranking: the point on the scrubbed curve
        from interp.emergence import point_from_curve

        found_pre, found_post, emerged = point_from_curve(curve["step"], curve["accuracy"], threshold)
        pre, post = (found_pre, found_post) if emerged and found_pre is not None else (None, None)
    return ScrubData(
        label=run_label(model, seed),
        steps=ordered,
        patterns=patterns,
        tokens=tokens,
        curve=curve,
        zoom_steps=[s for s in ordered if s in zoom_steps],
        head_scores=head_scores,
        delta_p=delta_p,
        metric=metric,
        pre_step=pre,
        post_step=post,
        threshold=threshold,
    )


def _ranking(ranking) -> tuple[np.ndarray | None, int | None, int | None, str]:
    """(per-head values, pre step, post step, metric name) of a ranking given to the scrubber."""
    if ranking is None:
        return None, None, None, "p"
    if isinstance(ranking, pd.DataFrame):
        metric = str(ranking["metric"].iloc[0]) if "metric" in ranking.columns and len(ranking) else "p"
        if "delta" in ranking.columns and "delta_p" not in ranking.columns:  # today's heads.csv column
            ranking = ranking.rename(columns={"delta": "delta_p"})
        if not {"layer", "head", "delta_p"} <= set(ranking.columns):
            raise ValueError(f"ranking table has columns {list(ranking.columns)}; expected layer, head, delta_p")
        table = np.full((int(ranking["layer"].max()) + 1, int(ranking["head"].max()) + 1), np.nan)
        table[ranking["layer"].astype(int), ranking["head"].astype(int)] = ranking["delta_p"].astype(float)
        return table, None, None, metric
    point = getattr(ranking, "point", None)
    delta_p = getattr(ranking, "delta_p", None)
    values = (
        None
        if delta_p is None
        else np.asarray(delta_p.detach().cpu() if hasattr(delta_p, "detach") else delta_p, float)
    )
    return (
        values,
        getattr(point, "pre_step", None),
        getattr(point, "post_step", None),
        getattr(ranking, "metric", None) or "p",
    )


def _with_zoom(source) -> tuple[Any, set[int]]:
    """The source with its zoom overlay's steps (a local suite trained here), and those steps."""
    from interp.sources.local import LocalSuiteSource

    root = getattr(source, "root", None)
    if not isinstance(source, LocalSuiteSource) or root is None or not (Path(root) / "zoom").is_dir():
        return source, set()
    zoomed = LocalSuiteSource(root, model_id=source.model_id, include_zoom=True)
    return zoomed, set(zoomed.available_steps()) - set(source.available_steps())


def scrubber(
    source,
    task=None,
    steps: Sequence[int] | None = None,
    n_prompts: int = DEFAULT_PROMPTS,
    device: str | None = None,
    scores: bool = True,
    ranking=None,
    threshold: float = 0.5,
) -> Scrubber:
    """The attention-pattern scrubber of one run (see the module docstring).

    Args:
        source: a source name (hub id, suite folder, ``embedded[-quick]/<run>``) or an open
            ``CheckpointSource``; the other arguments as :func:`scrub_data`.

    Returns:
        A :class:`Scrubber`: display it in Jupyter, or ``.save_html(path)``.

    Raises:
        ValueError: a bad source name (one line listing the valid forms), or as :func:`scrub_data`.
    """
    from interp.sources.base import CheckpointSource
    from interp.sources.door import check_one_run, open_source

    opened = not isinstance(source, CheckpointSource)
    if opened:
        check_one_run(str(source), "scrubber")
        source = open_source(source)
    try:
        return Scrubber(
            scrub_data(
                source,
                task=task,
                steps=steps,
                n_prompts=n_prompts,
                device=device,
                scores=scores,
                ranking=ranking,
                threshold=threshold,
            )
        )
    finally:
        if opened:  # a source the caller handed in stays open
            source.close()


def run_scrub_data(run, threshold: float = 0.5, n_prompts: int | None = None) -> ScrubData | None:
    """The scrubber data a main-job run recorded (``scrub_patterns`` etc.; its first ``n_prompts``
    prompts when given), or None without them."""
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
    delta_p, pre, post, metric = _ranking(run)
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
        threshold=threshold,
    )


_SCRIPT = r"""
(function(){
if (window.ELScrub) return;
function lut(stops){const out=[];for(let i=0;i<=255;i++){const t=i/255;let j=0;while(j<stops.length-2&&t>stops[j+1][0])j++;
  const [t0,c0]=stops[j],[t1,c1]=stops[j+1],u=(t-t0)/(t1-t0);out.push(c0.map((c,k)=>Math.round(c+(c1[k]-c)*u)));}return out;}
const SEQ=lut([[0,[255,255,255]],[0.25,[198,219,239]],[0.5,[107,174,214]],[0.75,[33,113,181]],[1,[8,48,107]]]);
const DIV=lut([[0,[178,24,43]],[0.25,[239,138,98]],[0.5,[247,247,247]],[0.75,[103,169,207]],[1,[33,102,172]]]);
async function inflate(b64){const bin=atob(b64),bytes=new Uint8Array(bin.length);for(let i=0;i<bin.length;i++)bytes[i]=bin.charCodeAt(i);
  const stream=new Blob([bytes]).stream().pipeThrough(new DecompressionStream('deflate'));
  return new Uint8Array(await new Response(stream).arrayBuffer());}
function el(tag,props,parent){const e=document.createElement(tag);Object.assign(e,props||{});if(parent)parent.appendChild(e);return e;}
const all=[];
async function mount(id){
  const root=document.getElementById(id);
  const spec=JSON.parse(root.querySelector('script.el-scrub-data').textContent);
  const bytes=await inflate(spec.data);
  const n=spec.n, cells=spec.causal?n*(n+1)/2:n*n, H=spec.heads, L=spec.layers, S=spec.steps.length, V=spec.levels;
  const block=L*H*cells;  // one step of one prompt; stored as the change from the step before (mod 256)
  for(let p=0;p<spec.prompts;p++)for(let s=1;s<S;s++){const off=(p*S+s)*block;for(let i=0;i<block;i++)bytes[off+i]=(bytes[off+i]+bytes[off-block+i])&255;}
  const st={prompt:0,index:0,diff:false,timer:null,cell:10,scale:1};
  const at=(q,k)=>spec.causal?(k>q?-1:q*(q+1)/2+k):q*n+k;
  const base=(p,s,l,h)=>(((p*S+s)*L+l)*H+h)*cells;
  const controls=root.querySelector('.el-scrub-controls'), grid=root.querySelector('.el-scrub-grid');
  const play=el('button',{type:'button',textContent:'▶ play',title:'animate through the checkpoints'},controls);
  const slider=el('input',{type:'range',min:0,max:S-1,step:1,value:0},controls);slider.setAttribute('aria-label','checkpoint');
  const label=el('span',{className:'el-scrub-step'},controls);
  const diffBox=el('label',{},controls);const diff=el('input',{type:'checkbox'},diffBox);
  diffBox.appendChild(document.createTextNode(' change since the previous step'));
  const promptBox=el('label',{},controls);promptBox.appendChild(document.createTextNode('prompt '));
  const chooser=el('select',{},promptBox);
  spec.tokens.forEach((t,i)=>{el('option',{value:i,textContent:i+': '+t.join(' ').slice(0,48)},chooser);});
  const scale=el('span',{},controls);const bar=el('span',{className:'el-scrub-scale'},scale);const scaleText=el('span',{},scale);
  const tip=el('div',{className:'el-scrub-tip'},document.body);
  const zoom=new Set(spec.zoom), canvases=[];
  for(let l=0;l<L;l++){const row=el('div',{className:'el-scrub-layer'},grid);
    for(let h=0;h<H;h++){const box=el('div',{className:'el-scrub-head'},row);
      const dp=spec.delta_p&&spec.delta_p[l]&&spec.delta_p[l][h]!=null?'  '+(spec.delta_label||'Δp')+' '+(spec.delta_p[l][h]>=0?'+':'')+spec.delta_p[l][h].toFixed(3):'';
      el('span',{textContent:'L'+l+'H'+h+dp},box);const c=el('canvas',{},box);c.dataset.layer=l;c.dataset.head=h;canvases.push(c);
      c.addEventListener('mousemove',ev=>hover(ev,c,l,h));c.addEventListener('mouseleave',()=>{tip.style.display='none';});}}
  const gap=30;
  function layout(){const width=grid.clientWidth||800;const per=Math.max(120,Math.floor((width-6*(H-1))/Math.min(H,4)));
    st.cell=Math.max(3,Math.min(16,Math.floor((per-gap-2)/n)));
    const px=gap+n*st.cell+2, ratio=window.devicePixelRatio||1;
    for(const c of canvases){c.width=px*ratio;c.height=px*ratio;c.style.width=px+'px';c.style.height=px+'px';}}
  function drawHead(c,l,h){const ctx=c.getContext('2d'),ratio=window.devicePixelRatio||1,cs=st.cell;
    ctx.setTransform(ratio,0,0,ratio,0,0);ctx.fillStyle='#fff';ctx.fillRect(0,0,c.width,c.height);
    const cur=base(st.prompt,st.index,l,h),prev=base(st.prompt,Math.max(0,st.index-1),l,h);
    for(let q=0;q<n;q++)for(let k=0;k<n;k++){const i=at(q,k);let rgb;
      if(i<0)rgb=[232,232,232];else if(st.diff){const d=(bytes[cur+i]-bytes[prev+i])/st.scale;rgb=DIV[Math.max(0,Math.min(255,Math.round((d+1)*127.5)))];}
      else rgb=SEQ[Math.round(bytes[cur+i]*255/V)];
      ctx.fillStyle='rgb('+rgb[0]+','+rgb[1]+','+rgb[2]+')';ctx.fillRect(gap+k*cs,q*cs,cs,cs);}
    if(cs>=7){const tokens=spec.tokens[st.prompt],font=Math.min(11,cs);ctx.fillStyle='#222';ctx.font=font+'px monospace';
      ctx.textAlign='right';ctx.textBaseline='middle';
      for(let q=0;q<n;q++)ctx.fillText(tokens[q].slice(0,5),gap-3,q*cs+cs/2,gap-4);
      ctx.save();ctx.translate(gap,n*cs);ctx.rotate(-Math.PI/2);
      for(let k=0;k<n;k++)ctx.fillText(tokens[k].slice(0,5),-3,k*cs+cs/2,gap-4);ctx.restore();}}
  function hover(ev,c,l,h){const r=c.getBoundingClientRect(),cs=st.cell,k=Math.floor((ev.clientX-r.left-gap)/cs),q=Math.floor((ev.clientY-r.top)/cs);
    if(k<0||q<0||k>=n||q>=n||at(q,k)<0){tip.style.display='none';return;}
    const t=spec.tokens[st.prompt],cur=bytes[base(st.prompt,st.index,l,h)+at(q,k)],prev=bytes[base(st.prompt,Math.max(0,st.index-1),l,h)+at(q,k)];
    const digits=V>100?3:2,chg=(cur-prev)/V;
    tip.textContent='L'+l+'H'+h+'  query '+q+' "'+t[q]+'" → key '+k+' "'+t[k]+'"\nattention '+(cur/V).toFixed(digits)+'   change since the previous step '+(chg>=0?'+':'')+chg.toFixed(digits);
    tip.style.left=(ev.clientX+12)+'px';tip.style.top=(ev.clientY+12)+'px';tip.style.display='block';}
  function changeScale(){let m=1;const a=base(st.prompt,st.index,0,0),b=base(st.prompt,Math.max(0,st.index-1),0,0);
    for(let i=0;i<block;i++){const d=Math.abs(bytes[a+i]-bytes[b+i]);if(d>m)m=d;}return m;}
  function drawGrid(){if(st.diff)st.scale=changeScale();for(const c of canvases)drawHead(c,+c.dataset.layer,+c.dataset.head);
    const s=spec.steps[st.index],prev=st.index>0?spec.steps[st.index-1]:null;
    label.textContent='step '+s+(zoom.has(s)?' (zoomed)':'')+' · checkpoint '+(st.index+1)+' of '+S+(st.diff?(prev===null?' · first step: no change':' · minus step '+prev):'')
      +(s===spec.pre?' · pre step':'')+(s===spec.post?' · post step':'');
    bar.style.background=st.diff?'linear-gradient(to right,rgb(178,24,43),rgb(247,247,247),rgb(33,102,172))':'linear-gradient(to right,#fff,rgb(8,48,107))';
    const top=(st.scale/V).toFixed(V>100?3:2);scaleText.textContent=st.diff?' −'+top+' … +'+top+' (change in attention; the largest at this step)':' 0 … 1 (attention)';}
  function markers(){const x=Math.max(spec.steps[st.index],0.5);
    for(const f of spec.figs){const gd=document.getElementById(f.id),fl=gd&&gd._fullLayout;if(!f.marker||!fl||!fl.xaxis||!fl._size)continue;
      let m=gd.querySelector('.el-scrub-marker');const host=gd.querySelector('.svg-container');if(!host)continue;
      if(!m){m=el('div',{className:'el-scrub-marker'},host);m.title='the step the grid shows';}
      const ax=fl.xaxis,size=fl._size,px=ax.l2p(ax.d2l(x));
      m.style.left=(size.l+px-1)+'px';m.style.top=size.t+'px';m.style.height=size.h+'px';m.style.display=(px>=-1&&px<=size.w+1)?'block':'none';}}
  for(const f of spec.figs){const gd=document.getElementById(f.id);if(gd&&gd.on)gd.on('plotly_afterplot',markers);}
  async function go(index){const t0=performance.now();st.index=Math.max(0,Math.min(S-1,index));slider.value=st.index;drawGrid();
    markers();await new Promise(r=>requestAnimationFrame(()=>r()));
    const ms=performance.now()-t0;root.dataset.frameMs=ms.toFixed(2);(window.ELScrubFrames=window.ELScrubFrames||[]).push(ms);}
  function stop(){if(st.timer){clearInterval(st.timer);st.timer=null;play.textContent='▶ play';}}
  slider.addEventListener('input',()=>{stop();go(+slider.value);});
  diff.addEventListener('change',()=>{st.diff=diff.checked;drawGrid();});
  chooser.addEventListener('change',()=>{st.prompt=+chooser.value;drawGrid();});
  play.addEventListener('click',()=>{if(st.timer){stop();return;}if(st.index>=S-1)go(0);play.textContent='❚❚ pause';
    st.timer=setInterval(()=>{if(st.index>=S-1){stop();return;}go(st.index+1);},600);});
  function key(ev){if(ev.key!=='ArrowRight'&&ev.key!=='ArrowLeft')return false;if(ev.target===slider)return false;
    if(ev.target.tagName==='SELECT'||ev.target.tagName==='INPUT')return false;ev.preventDefault();stop();go(st.index+(ev.key==='ArrowRight'?1:-1));return true;}
  root.addEventListener('keydown',ev=>{if(key(ev))ev.stopPropagation();});
  root.addEventListener('mousedown',()=>{window.ELScrubActive=api;});
  const api={go,key,root,draw:drawGrid,markers,get index(){return st.index;},get steps(){return spec.steps;},setPrompt(p){st.prompt=p;chooser.value=p;drawGrid();},
    setDiff(d){st.diff=d;diff.checked=d;drawGrid();}};
  all.push(api);
  let width=grid.clientWidth;layout();drawGrid();markers();
  window.addEventListener('resize',()=>{if(grid.clientWidth!==width){width=grid.clientWidth;layout();drawGrid();}});
  root.dataset.ready='1';
  return api;}
document.addEventListener('keydown',ev=>{if(ev.target!==document.body)return;const api=window.ELScrubActive||(all.length===1?all[0]:null);if(api)api.key(ev);});
window.ELScrub={mount:(id)=>{const p=mount(id);p.catch(e=>{console.error('scrubber '+id+': '+e);});return p;},all};
})();
"""
