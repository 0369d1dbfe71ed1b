"""The time axis: every head's pattern-patching effect at every checkpoint pair of a run.

One concept: one run's timeline from its arguments to its tidy table (checks, the per-pair
engine call, the resumable store, the assembly); its page is :mod:`interp.report.timeline_page`.

:func:`head_timeline` patches each head's attention pattern (``blocks.{l}.attn.hook_pattern``,
all query positions) from the later checkpoint of a pair into the earlier one, for every pair of
the run (``pairs``):

- ``consecutive``: each checkpoint with the next one (what changed between them);
- ``to-post``: each checkpoint before the point of emergence's post step with that post step;
- ``to-final``: each checkpoint with the run's last one.

Per pair, the attribution pre-screen (:func:`interp.patching.attribution_delta_p`, integrated
gradients over ``config.prescreen_steps`` points) estimates every head; with
``config.method="attribution"`` (:data:`interp.core.settings.TIMELINE_CONFIG`) the exact engine
(:func:`interp.patching.per_head_delta`, the layer-skip path) then verifies the top N heads by
the estimate's size (``config.prescreen_top_n``; None: a quarter of the heads) and ``sample``
heads drawn at random from the rest. The largest exact ``|delta|`` among the sampled heads is the
pair's ``bound``: an estimate, from the sample, of what the screen may have missed (the AtP*
idea: Kramár et al. 2024, arXiv:2403.00745, verify what a gradient screen ranks first and check
a random draw of the rest). With ``method="fast"`` or ``"reference"`` every head is exact. The
screen's forward of the earlier checkpoint also gives the pair's pre values and, kept, the post
patterns of the pair before it (:func:`interp.patching.attribution.attribution_screen`), so each
checkpoint is run once for both roles.

The table (:attr:`HeadTimeline.table`) is tidy: one row per (pair, head) with ``step`` (the
earlier checkpoint of the pair, the one patched into), ``post_step``, ``layer``, ``head``,
``delta`` (metric units; exact, or the screen's estimate), ``lo``/``hi`` (95 % percentile
bootstrap over prompts for exact rows, NaN for estimated ones), ``how`` (``exact`` or
``estimated``), ``chosen`` (``top``, ``sample`` or ``""``: why a head was verified),
``estimate`` (the screen's value for every head), the capability at ``step`` (``accuracy``,
greedy; ``value_pre``/``value_post``, the mean metric at the two checkpoints) and the head
scores at ``step`` (``previous_token``, ``prefix_matching``: the induction score, ``copying``;
:mod:`interp.scores`).

Resumable: with ``out_dir`` every finished pair is stored at once (:class:`sweeps.store.ResultsStore`
under ``OUT/pairs``: its head rows, then its summary row, the "done" marker, each atomic), and a
call with the same settings computes only the pairs without a readable row; a damaged file is
named in one line and its pair redone. The settings are kept in ``OUT/timeline.json``; another
call with other settings on the same folder is refused in one line before anything loads.

Sources: head patching across checkpoints and ``delta_p``, Baherwani et al. 2026; the screen:
attribution patching (Nanda 2023; Syed et al. 2023) with integrated gradients (Sundararajan et
al. 2017); intervals: percentile bootstrap (Efron & Tibshirani 1993).
"""

from __future__ import annotations

import itertools
import json
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from interp.core.objects import check_argument
from interp.core.settings import TIMELINE_CONFIG, StudyConfig, check_pairs

__all__ = [
    "TABLE_COLUMNS",
    "HeadTimeline",
    "head_timeline",
    "timeline_pairs",
]

logger = logging.getLogger(__name__)

#: The columns of :attr:`HeadTimeline.table`, in order.
TABLE_COLUMNS = [
    "step",
    "post_step",
    "layer",
    "head",
    "delta",
    "lo",
    "hi",
    "how",
    "chosen",
    "estimate",
    "accuracy",
    "value_pre",
    "value_post",
    "previous_token",
    "prefix_matching",
    "copying",
]

_SCORES = ("previous_token", "prefix_matching", "copying")


def timeline_pairs(steps: list[int], pairs: str, post_step: int | None = None) -> list[tuple[int, int]]:
    """The (earlier, later) checkpoint pairs of a run, earliest first.

    Args:
        steps: the run's checkpoints (training steps), any order.
        pairs: one of :data:`interp.core.settings.TIMELINE_PAIRS`.
        post_step: the point of emergence's post step (``to-post`` only).

    Raises:
        ValueError: a bad ``pairs``, fewer than two steps, or ``to-post`` without a post step
            among ``steps``.
    """
    check_pairs(pairs)
    steps = sorted({int(s) for s in steps})
    if len(steps) < 2:
        raise ValueError(f"a timeline needs at least 2 checkpoints, got {steps}")
    if pairs == "consecutive":
        return list(itertools.pairwise(steps))
    if pairs == "to-final":
        return [(s, steps[-1]) for s in steps[:-1]]
    if post_step is None or post_step not in steps:
        raise ValueError(
            f"pairs='to-post' needs the point of emergence, and the run did not emerge (post step {post_step}); "
            "use --pairs consecutive or to-final"
        )
    return [(s, post_step) for s in steps if s < post_step]


def _pair_id(pre: int, post: int) -> str:
    return f"pair-{pre:012d}-{post:012d}"


@dataclass
class HeadTimeline:
    """Every head's pattern-patching effect at every checkpoint pair of one run (:func:`head_timeline`).

    Attributes:
        table: one row per (pair, head), :data:`TABLE_COLUMNS` (see the module docstring).
        pairs: one row per pair: ``step``, ``post_step``, ``value_pre``, ``value_post``,
            ``n_exact``, ``n_sampled``, ``bound`` (largest exact ``|delta|`` among the sampled
            heads outside the top N; NaN without a sample), ``bound_layer``, ``bound_head``,
            ``spearman`` (estimate against exact delta over the verified heads), ``seconds``.
        curve: the capability per checkpoint (``step``, ``accuracy``, ``p_answer``).
        point: the point of emergence (``emerged``, ``pre_step``, ``post_step``, ``threshold``, ``hold``).
        model_id, task, metric, unit: what was measured, and in what unit.
        settings: the call's settings (what ``OUT/timeline.json`` keeps).
    """

    table: pd.DataFrame
    pairs: pd.DataFrame
    curve: pd.DataFrame
    point: dict[str, Any]
    model_id: str
    task: str
    metric: str
    unit: str
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def title(self) -> str:
        return f"Head timeline: {self.model_id}, task {self.task}"

    def findings(self) -> list[str]:
        """The page's opening lines, computed from the table (:func:`interp.report.timeline_page.timeline_findings`)."""
        from interp.report.timeline_page import timeline_findings

        return timeline_findings(self.table, self.pairs, self.point, self.unit, self.settings.get("pairs", ""))

    def figure(self):
        """The capability curve over the head x step heatmap, E marked (plotly ``Figure``)."""
        from interp.report.timeline_page import timeline_figure

        return timeline_figure(self.table, self.pairs, self.curve, self.point, self.metric, self.unit)

    def _html(self, assets) -> str:
        from interp.report.timeline_page import timeline_fragment

        return timeline_fragment(self, assets)

    def _repr_html_(self) -> str:
        """Jupyter display: the findings, the figure and the pairs' table (self-contained)."""
        from interp.report.display import Assets

        return self._html(Assets())

    def __repr__(self) -> str:
        return (
            f"HeadTimeline({self.model_id!r}, task {self.task!r}, {self.pairs.shape[0]} pairs "
            f"({self.settings.get('pairs', '?')}), {self.table.shape[0]} rows, metric {self.metric} ({self.unit}))"
        )

    def save_html(self, path: str | Path, scrubber: str | Path | None = None) -> Path:
        """Write the timeline's own page (self-contained, opens offline; atomic).

        Args:
            path: the page to write.
            scrubber: a page holding this run's scrubber (``emergence scrub``'s page, or a main
                job's ``report.html``): clicking a heatmap cell opens it on that head at that step
                (:func:`interp.report.timeline_page.scrubber_link`). Linked by its path relative
                to ``path``'s folder, so the two pages move together. None: no link.

        Returns ``path`` as a ``Path``."""
        import os
        from urllib.parse import quote

        from interp.core.io import atomic_write_text
        from interp.report.timeline_page import timeline_page

        path = Path(path)
        href = None
        if scrubber is not None:
            href = quote(Path(os.path.relpath(Path(scrubber).resolve(), path.resolve().parent)).as_posix())
        return atomic_write_text(path, timeline_page(self, scrubber=href))

    def save(self, out_dir: str | Path, scrubber: str | Path | None = None) -> Path:
        """Write ``timeline.csv``/``.parquet``, ``pairs.csv``, ``curve.csv`` and ``timeline.html``
        into ``out_dir`` (each atomically); returns the page's path. ``scrubber``: as
        :meth:`save_html`'s."""
        from interp.core.io import atomic_to_csv, atomic_to_parquet

        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        atomic_to_csv(self.table, out / "timeline.csv")
        atomic_to_parquet(self.table, out / "timeline.parquet")
        atomic_to_csv(self.pairs, out / "pairs.csv")
        atomic_to_csv(self.curve, out / "curve.csv")
        return self.save_html(out / "timeline.html", scrubber=scrubber)


# --------------------------------------------------------------------------- one pair


def _verified_heads(
    estimate: torch.Tensor, method: str, top_n: int | None, sample: int, rng: np.random.Generator
) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """(top heads, sampled heads): every head is "top" unless the method is the screen's."""
    n_layers, n_heads = estimate.shape
    every = [(l, h) for l in range(n_layers) for h in range(n_heads)]
    if method != "attribution":
        return every, []
    n = len(every)
    top_n = max(1, n // 4) if top_n is None else min(top_n, n)
    order = torch.argsort(estimate.flatten().abs(), descending=True, stable=True).tolist()
    top = [every[i] for i in order[:top_n]]
    rest = [every[i] for i in sorted(order[top_n:])]
    chosen: list[int] = (
        rng.choice(len(rest), size=min(sample, len(rest)), replace=False).tolist() if rest and sample else []
    )
    return top, [rest[i] for i in sorted(chosen)]


def pair_effects(
    pre_model: Any,
    post: Any,
    batch: Any,
    config: StudyConfig,
    sample: int,
    rng: np.random.Generator,
) -> tuple[pd.DataFrame, dict[str, Any], Any]:
    """One checkpoint pair: the screen's estimate of every head, exact deltas (with 95 % bootstrap
    intervals) of the verified heads, and the miss bound from the sample.

    Args:
        pre_model: the earlier checkpoint (``TransformerBridge``, eval mode).
        post: the later checkpoint's :class:`interp.patching.PostCheckpoint` (patterns and
            answer logits, ``capture_post(model, batch, kinds=["pattern"], weights=False)``).
        batch: the prompts (``TaskBatch``).
        config: ``metric`` (resolved), ``method``, ``prescreen_top_n``, ``prescreen_steps``, ``n_boot``.
        sample: heads outside the top N verified at random.
        rng: the draw of the sample.

    Returns:
        (one row per head: ``layer, head, delta, lo, hi, how, chosen, estimate``; the pair's
        summary: ``value_pre, value_post, n_exact, n_sampled, bound, bound_layer, bound_head, spearman``;
        the earlier checkpoint's patterns and answer logits, seen by the screen's forward, as the
        post of the pair before: a ``PostCheckpoint``, :attr:`interp.patching.attribution.AttributionScreen.pre`).
    """
    from scipy.stats import spearmanr

    from interp.patching import per_head_delta
    from interp.patching.attribution import attribution_screen
    from interp.ranking_stats import bootstrap_interval

    metric = config.metric or "p"
    screen = attribution_screen(pre_model, batch, post, metric=metric, steps=config.prescreen_steps)
    estimate, values_pre = screen.estimate, screen.values_pre
    values_post = post.values(batch, metric)
    top, sampled = _verified_heads(estimate, config.method, config.prescreen_top_n, sample, rng)
    exact_heads = top + sampled
    per_prompt = per_head_delta(
        pre_model,
        post,
        batch,
        "pattern",
        metric=metric,
        method="reference" if config.method == "reference" else "fast",
        heads=exact_heads,
        per_prompt=True,
    )
    rows_exact = torch.stack([per_prompt[l, h] + values_pre for l, h in exact_heads])
    ci = bootstrap_interval(rows_exact, values_pre, values_post, n_boot=config.n_boot)
    exact = {pair: (float(per_prompt[pair].mean()), float(ci["delta_lo"][i]), float(ci["delta_hi"][i]))
             for i, pair in enumerate(exact_heads)}  # fmt: skip
    role = {**dict.fromkeys(top, "top"), **dict.fromkeys(sampled, "sample")}
    rows = []
    n_layers, n_heads = estimate.shape
    for l in range(n_layers):
        for h in range(n_heads):
            est = float(estimate[l, h])
            if (l, h) in exact:
                d, lo, hi = exact[l, h]
                rows.append((l, h, d, lo, hi, "exact", role[l, h], est))
            else:
                rows.append((l, h, est, math.nan, math.nan, "estimated", "", est))
    heads = pd.DataFrame(rows, columns=["layer", "head", "delta", "lo", "hi", "how", "chosen", "estimate"])
    bound, bound_at = math.nan, (-1, -1)
    for pair in sampled:
        if not math.isfinite(bound) or abs(exact[pair][0]) > bound:
            bound, bound_at = abs(exact[pair][0]), pair
    spearman = math.nan
    if len(exact_heads) >= 3:
        xs = [float(estimate[p]) for p in exact_heads]
        ys = [exact[p][0] for p in exact_heads]
        if len(set(xs)) > 1 and len(set(ys)) > 1:
            spearman = float(spearmanr(xs, ys).statistic)
    summary = {
        "value_pre": float(values_pre.mean()),
        "value_post": float(values_post.mean()),
        "n_exact": len(exact_heads),
        "n_sampled": len(sampled),
        "bound": bound,
        "bound_layer": int(bound_at[0]),
        "bound_head": int(bound_at[1]),
        "spearman": spearman,
    }
    return heads, summary, screen.pre


# --------------------------------------------------------------------------- the run


def _settings(source_name: str, task: Any, config: StudyConfig, pairs: str, sample: int, seed: int) -> dict[str, Any]:
    """What ``OUT/timeline.json`` keeps; a resumed call must match it."""
    used = {k: v for k, v in config.as_dict().items() if k not in ("scan", "decompose", "scrub", "ks", "device")}
    return {
        "source": source_name,
        "task": task.name,
        "task_spec": repr(task),
        "config": used,
        "pairs": pairs,
        "sample": sample,
        "seed": seed,
    }


def _check_settings(out_dir: Path, settings: dict[str, Any]) -> None:
    """Refuse (one line) an ``out_dir`` that holds a timeline of other settings."""
    path = out_dir / "timeline.json"
    if not path.is_file():
        return
    try:
        stored = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        logger.warning("%s is unreadable; it is written again and the stored pairs are kept", path)
        return
    if stored != json.loads(json.dumps(settings, default=str)):
        differ = sorted(
            k
            for k in set(stored) | set(settings)
            if stored.get(k) != json.loads(json.dumps(settings.get(k), default=str))
        )
        raise ValueError(
            f"{out_dir} holds a timeline of other settings (they differ in {', '.join(differ)}); "
            "use another --out, or the same settings to resume it"
        )


def _check_arguments(source: Any, task: Any, config: Any, pairs: Any, sample: Any, seed: Any) -> None:
    from interp.tasks import CapabilityTask

    check_argument(
        isinstance(source, (str, Path)) or hasattr(source, "load"),
        source,
        "head_timeline: source",
        "a source name (hub id, folder, embedded[-quick]/<run>) or an opened source (el.open_source)",
    )
    check_argument(
        task is None or isinstance(task, CapabilityTask),
        task,
        "head_timeline: task",
        "a CapabilityTask such as el.RepetitionTask()",
    )
    check_argument(
        config is None or isinstance(config, StudyConfig), config, "head_timeline: config", "an el.StudyConfig"
    )
    check_pairs(pairs)
    for name, value in (("sample", sample), ("seed", seed)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{name}={value!r}: must be an integer >= 0")


def head_timeline(
    source: Any,
    task: Any = None,
    config: StudyConfig | None = None,
    *,
    pairs: str = "consecutive",
    sample: int = 4,
    seed: int = 0,
    out_dir: str | Path | None = None,
    progress: bool = True,
) -> HeadTimeline:
    """Every head's pattern-patching effect at every checkpoint pair of one run, the capability
    and the head scores, as one tidy table (see the module docstring).

    Args:
        source: one run: a name as ``emergence run`` takes (hub id, a local folder in any layout
            the door reads, ``embedded[-quick]/<run>``) or an opened source
            (:func:`interp.sources.open_source`; left open).
        task: the capability task (default :class:`interp.tasks.RepetitionTask`).
        config: the settings (default :data:`interp.core.settings.TIMELINE_CONFIG`): ``threshold``/``hold`` (the point
            of emergence on the scanned curve), ``metric`` (None: the task's own), ``method``
            (``attribution``: screen then verify; ``fast``/``reference``: every head exact),
            ``prescreen_top_n`` (N verified per pair; None: a quarter of the heads),
            ``prescreen_steps``, ``n_boot``, ``scores`` (head scores per step), ``device``,
            ``dtype``, ``swap_weights``, ``allow_pickle``, ``step_pattern``, ``model_config``.
        pairs: ``consecutive``, ``to-post`` or ``to-final`` (:data:`interp.core.settings.TIMELINE_PAIRS`).
        sample: heads outside the top N verified exactly per pair, drawn at random (0: no bound).
        seed: the sample's random seed (the draw of a pair depends on it and the pair's steps).
        out_dir: where finished pairs are stored and the tables and page written (resumable);
            None: nothing is written.
        progress: a progress line over the scanned checkpoints (the capability), then one over the pairs.

    Returns:
        :class:`HeadTimeline` (metric units: probability for ``p``, nats for ``logprob``,
        logits for ``logit-diff``).

    Raises:
        TypeError: ``source``, ``task`` or ``config`` of the wrong type (one line, before anything loads).
        ValueError: a bad ``pairs``, ``sample``, ``seed`` or ``out_dir``, an ``out_dir`` holding a
            timeline of other settings (before anything loads); ``to-post`` on a run that did not
            emerge; as the task, the source and the patching engine.
    """
    from interp.core.io import check_out_dir
    from interp.tasks import RepetitionTask, metric_for

    _check_arguments(source, task, config, pairs, sample, seed)
    config = config if config is not None else TIMELINE_CONFIG
    task = task or RepetitionTask()
    out = check_out_dir(out_dir, option="out_dir")
    name = str(source) if isinstance(source, (str, Path)) else str(source.model_id)
    settings = _settings(name, task, config, pairs, sample, seed)
    if out is not None:
        _check_settings(out, settings)
    opened = None
    if isinstance(source, (str, Path)):
        from interp.sources.door import open_source

        opened = source = open_source(
            source, allow_pickle=config.allow_pickle, step_pattern=config.step_pattern, config=config.model_config
        )
    try:
        result = _timeline(
            source, task, config.replace(metric=metric_for(task, config.metric)), settings, out, progress
        )
    finally:
        if opened is not None:
            opened.close()
    if out is not None:
        result.save(out)
    return result


def _timeline(source: Any, task: Any, config: StudyConfig, settings: dict, out: Path | None, progress: bool):
    from interp.core.devices import torch_dtype
    from interp.core.io import atomic_write_text
    from interp.core.metrics import metric_spec
    from interp.core.progress import progress_bar
    from interp.emergence import StepEvaluator, scan_emergence
    from interp.patching import capture_post
    from interp.scores import head_scores, score_tokens
    from sweeps.store import ResultsStore

    if hasattr(source, "swap_weights"):
        source.swap_weights = config.swap_weights
        source.dtype = torch_dtype(config.dtype)
    batch = task.build(source.tokenizer())
    device = config.device
    store = ResultsStore(out / "pairs") if out is not None else None
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        atomic_write_text(out / "timeline.json", json.dumps(settings, indent=2, sort_keys=True, default=str))
        for line in store.damaged_lines():  # type: ignore[union-attr]
            logger.warning(line)
    curve, point = _curve(source, batch, config, store, StepEvaluator, scan_emergence, progress)
    steps = [int(s) for s in curve["step"]]
    wanted = timeline_pairs(steps, settings["pairs"], point["post_step"] if point["emerged"] else None)
    done = store.done_ids() if store is not None else set()
    todo = [p for p in wanted if _pair_id(*p) not in done]
    accuracy = dict(zip(curve["step"].astype(int), curve["accuracy"].astype(float)))
    computed: dict[str, tuple[pd.DataFrame, dict]] = {}
    if todo:
        tokens, period = score_tokens(source.tokenizer())
        posts_needed = {post for _, post in todo}
        pres_needed = {pre for pre, _ in todo}
        last_use = {post: min(pre for pre, p in todo if p == post) for post in posts_needed}
        captured: dict[int, Any] = {}
        bar = progress_bar(len(wanted), "pairs", unit="pair", enabled=progress, initial=len(wanted) - len(todo))
        try:
            order = sorted(posts_needed | pres_needed, reverse=True)  # each checkpoint loaded once
            for i, step in enumerate(order):
                loaded = source.load(step, device=device)
                if i + 1 < len(order) and hasattr(source, "prefetch"):
                    source.prefetch(order[i + 1])  # read while this one is patched (swapping sources only)
                model = loaded.model
                batch_here = batch.to(next(model.parameters()).device)
                seen = None  # this checkpoint's patterns and answer logits, from a pair's screen
                for pre, post in [p for p in todo if p[0] == step]:
                    t0 = time.perf_counter()
                    rng = np.random.default_rng([settings["seed"], pre, post])
                    heads, summary, seen = pair_effects(
                        model, captured[post], batch_here, config, settings["sample"], rng
                    )
                    scores = _scores_at(model, tokens, period, config.scores, head_scores)
                    heads = _with_context(heads, pre, post, accuracy.get(pre, math.nan), summary, scores)
                    summary = {"run_id": _pair_id(pre, post), "step": pre, "post_step": post, **summary,
                               "seconds": time.perf_counter() - t0}  # fmt: skip
                    if store is not None:
                        store.write_run(summary, heads)
                    computed[_pair_id(pre, post)] = (heads, summary)
                    bar.update(1)
                    if last_use[post] == pre:
                        captured.pop(post, None)
                if step in posts_needed and any(pre < step for pre, p in todo if p == step):
                    captured[step] = (
                        seen if seen is not None else capture_post(model, batch_here, kinds=["pattern"], weights=False)
                    )
                del loaded, model
        finally:
            bar.close()
    return _assemble(source, task, config, settings, curve, point, wanted, computed, store, metric_spec)


def _scores_at(model: Any, tokens: torch.Tensor, period: int, wanted: bool, head_scores: Callable) -> dict[str, Any]:
    if not wanted:
        return {}
    with torch.inference_mode():
        return {k: v.numpy() for k, v in head_scores(model, tokens, period).items()}


def _with_context(
    heads: pd.DataFrame, pre: int, post: int, accuracy: float, summary: dict, scores: dict[str, Any]
) -> pd.DataFrame:
    heads = heads.copy()
    heads.insert(0, "post_step", post)
    heads.insert(0, "step", pre)
    heads["accuracy"] = accuracy
    heads["value_pre"], heads["value_post"] = summary["value_pre"], summary["value_post"]
    for name in _SCORES:
        values = scores.get(name)
        heads[name] = (
            [float(values[l, h]) for l, h in zip(heads["layer"], heads["head"])] if values is not None else math.nan
        )
    return heads[TABLE_COLUMNS]


def _curve(
    source: Any, batch: Any, config: StudyConfig, store: Any, evaluator_cls: Any, scan: Callable, progress: bool
):
    """The capability at every checkpoint and the point of emergence: from the store when a
    readable one is there, else scanned (and stored)."""
    if store is not None and "curve" in store.done_ids():
        row = store.results(["curve"]).iloc[0]
        curve = store.metrics(["curve"]).drop(columns=["run_id"]).sort_values("step", ignore_index=True)
        point = json.loads(row["point"])
        return curve, point
    evaluator = evaluator_cls(source, batch, device=config.device)
    found = scan(source, batch, threshold=config.threshold, evaluator=evaluator, hold=config.hold, progress=progress)
    curve = evaluator.table()[["step", "accuracy", "p_answer"]].sort_values("step", ignore_index=True)
    point = {
        "emerged": bool(found.emerged),
        "pre_step": None if found.pre_step is None else int(found.pre_step),
        "post_step": None if found.post_step is None else int(found.post_step),
        "threshold": float(config.threshold),
        "hold": int(config.hold),
    }
    if store is not None:
        store.write_run({"run_id": "curve", "point": json.dumps(point)}, curve)
    return curve, point


def _assemble(source, task, config, settings, curve, point, wanted, computed, store, metric_spec) -> HeadTimeline:
    ids = [_pair_id(*p) for p in wanted]
    tables, summaries = [], []
    stored_ids = [i for i in ids if i not in computed]
    if stored_ids and store is not None:
        rows = store.results(stored_ids).set_index("run_id")
        heads = store.metrics(stored_ids)
        by_id = dict(tuple(heads.groupby("run_id"))) if len(heads) else {}
    for pair_id in ids:
        if pair_id in computed:
            table, summary = computed[pair_id]
        else:
            table = by_id[pair_id].drop(columns=["run_id"])[TABLE_COLUMNS]
            summary = {"run_id": pair_id, **rows.loc[pair_id].to_dict()}
        tables.append(table)
        summaries.append(summary)
    table = pd.concat(tables, ignore_index=True) if tables else pd.DataFrame(columns=TABLE_COLUMNS)
    pairs = pd.DataFrame(summaries).drop(columns=["run_id", "status"], errors="ignore")
    for column in ("step", "post_step", "n_exact", "n_sampled", "bound_layer", "bound_head"):
        if column in pairs:  # a stored row reads back through arrow; the same types either way
            pairs[column] = pairs[column].astype(int)
    for column in ("step", "post_step", "layer", "head"):
        table[column] = table[column].astype(int)
    spec = metric_spec(config.metric or "p")
    result = HeadTimeline(
        table=table.reset_index(drop=True),
        pairs=pairs.reset_index(drop=True),
        curve=curve,
        point=point,
        model_id=str(source.model_id),
        task=task.name,
        metric=spec.name,
        unit=spec.unit,
        settings=settings,
    )
    return result
