"""The attention-pattern scrubber's data: every head's pattern on a few prompts at every checkpoint
of a run, each checkpoint loaded once.

The top floor's half of the scrubber: :class:`PatternRecorder` (a
:class:`interp.emergence.StepEvaluator` that also keeps the patterns, and the head scores of
:mod:`interp.scores`), :func:`scrub_data` (records a run into a :class:`ScrubData`) and
:func:`scrubber` (opens a source by name, records, returns the page). What the page shows and how
(the step slider, the grid, the side figures, the report's scrubber section) is
:mod:`interp.report.scrubber`; its names are re-exported here, so one import serves both
(``from interp.scrubbing import scrubber, Scrubber, ScrubData``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from interp.core.objects import check_argument
from interp.core.settings import StudyConfig
from interp.evaluator import StepEvaluator, evaluate_steps
from interp.report.scrubber import (
    DEFAULT_PROMPTS,
    LEVELS,
    Scrubber,
    ScrubData,
    quantise_patterns,
    ranking_values,
    run_scrub_data,
    scrub_script,
    scrubber_fragment,
    token_labels,
)

__all__ = [
    "DEFAULT_PROMPTS",
    "LEVELS",
    "PatternRecorder",
    "ScrubData",
    "Scrubber",
    "quantise_patterns",
    "ranking_values",
    "run_scrub_data",
    "scrub_data",
    "scrub_script",
    "scrubber",
    "scrubber_fragment",
    "token_labels",
]


class PatternRecorder(StepEvaluator):
    """A :class:`interp.emergence.StepEvaluator` that also keeps, for every step it loads, each
    head's attention pattern on the first ``n_prompts`` prompts (quantised,
    ``UInt8[ndarray, "prompt layer head query_pos key_pos"]``) and, when ``scores``, the head
    scores of :func:`interp.scores.head_scores` on :func:`interp.scores.score_tokens`'s sequences
    (kept as :func:`interp.scores.head_scores_over_checkpoints` keeps them) -- no checkpoint is
    loaded twice, in this call or a later one of the process (:mod:`interp.core.kept`)."""

    def __init__(
        self, source, batch, device: str | None = None, n_prompts: int = DEFAULT_PROMPTS, scores: bool = False
    ):
        super().__init__(source, batch, device=device)
        self.n_prompts = max(1, min(int(n_prompts), len(batch)))
        self.patterns: dict[int, np.ndarray] = {}
        self.want_scores = scores
        self.score_rows: list[tuple] = []
        self._score_tokens: tuple[torch.Tensor, int] | None = None

    def measurements(self) -> list[str]:
        """The evaluator's, the patterns and, when ``scores``, the head scores."""
        return [*super().measurements(), self._patterns_name, *(["head-scores"] if self.want_scores else [])]

    def kept_key(self, step: int, what: str = "capability") -> tuple | None:
        if what == "head-scores":
            from interp.scores import kept_scores_key

            return kept_scores_key(self.source, step, *self.score_tokens(), self.device)
        return super().kept_key(step, what)

    @property
    def _patterns_name(self) -> str:
        return f"patterns:{self.n_prompts}"

    def score_tokens(self) -> tuple[torch.Tensor, int]:
        """The head scores' sequences and period (:func:`interp.scores.score_tokens`, made once)."""
        if self._score_tokens is None:
            from interp.scores import score_tokens

            self._score_tokens = score_tokens(self.source.tokenizer())
        return self._score_tokens

    def _measure(self, step: int, model, values: dict) -> None:
        """The evaluator's measurements, then the patterns and head scores ``values`` lacks."""
        from interp.patching import cache_patterns
        from interp.scores import kept_head_scores

        super()._measure(step, model, values)
        if values[self._patterns_name] is None:
            with torch.inference_mode():
                patterns = cache_patterns(model, self.batch.tokens[: self.n_prompts])
            values[self._patterns_name] = quantise_patterns(patterns.permute(1, 0, 2, 3, 4))  # prompt first
        if values.get("head-scores", ()) is None:
            values["head-scores"] = kept_head_scores(self.source, step, *self.score_tokens(), self.device, model=model)

    def _record(self, step: int, values: dict) -> None:
        super()._record(step, values)
        self.patterns[step] = values[self._patterns_name]
        if self.want_scores:
            self.score_rows.extend(
                (int(step), int(layer), int(head), name, float(value))
                for name, table in values["head-scores"].items()
                for (layer, head), value in np.ndenumerate(table)
            )

    def recorded(self, steps: Sequence[int] | None = None) -> tuple[list[int], np.ndarray]:
        """(steps, ``UInt8[ndarray, "prompt step layer head query_pos key_pos"]``) of the recorded
        steps (ascending), or of ``steps`` when given."""
        steps = sorted(self.patterns) if steps is None else list(steps)
        return steps, np.stack([self.patterns[s] for s in steps], axis=1)


def scrub_data(
    source,
    task=None,
    steps: Sequence[int] | None = None,
    n_prompts: int = DEFAULT_PROMPTS,
    config: StudyConfig = StudyConfig(),
    ranking=None,
    rank: bool = False,
    progress: bool = True,
) -> ScrubData:
    """Load every checkpoint of ``steps`` once and record what the scrubber shows.

    Args:
        source: a checkpoint source (``interp.sources.CheckpointSource``); a local suite
            with a zoom overlay (``emergence zoom``) shows its zoomed steps too.
        task: capability task (default :class:`interp.tasks.RepetitionTask`).
        steps: training steps (default: every step the source holds).
        n_prompts: prompts of the task the chooser offers (the first ones).
        config: the study settings (:class:`interp.core.settings.StudyConfig`): ``device`` (where
            checkpoints load; None: cuda if usable, else cpu), ``scores`` (also record head scores
            at every step, :mod:`interp.scores`), ``threshold`` (greedy-accuracy fraction drawn on
            the capability curve, and the point's on the scrubbed curve), ``hold`` (the point's
            checkpoints that must stay at or above it) and, with ``rank``, the
            ranking's settings (``metric``: None, the task's own, :func:`interp.tasks.metric_for`;
            ``method``, ``n_boot``, ...).
        ranking: a ``RunAnalysis`` (its per-head ``delta`` and point of emergence), a heads table
            (columns layer, head, delta, as ``heads.csv`` has them), or None. Without a point from the ranking, the
            point of emergence of the scrubbed curve is marked
            (:func:`interp.emergence.point_from_curve`: the last crossing that stays above).
        rank: without a ``ranking``, rank the heads between the point of emergence found on the
            scrubbed curve (:func:`interp.ranking.rank_heads_between` on the task's prompts: each
            head's post pattern patched into pre, the change of ``metric`` per head), so the page
            orders the heads by it; a curve that does not emerge is left unranked (a warning).
        progress: one progress line over the checkpoints (:func:`interp.evaluator.watching`;
            steps the process already measured are counted as kept and not loaded).

    Raises:
        TypeError: ``config`` is not a ``StudyConfig``.
        ValueError: ``n_prompts < 1``, a ranking table without layer/head/delta columns.
        interp.sources.CheckpointError: a step the source does not hold (nearest named).
    """
    check_argument(isinstance(config, StudyConfig), config, "scrub_data: config", "a StudyConfig")
    if n_prompts < 1:
        raise ValueError(f"n_prompts={n_prompts}; expected at least 1 prompt")
    zoomed, zoom_steps = _with_zoom(source)
    try:
        data = _record(zoomed, zoom_steps, task, steps, n_prompts, config, ranking, progress)
        if rank and ranking is None:
            _rank_into(data, zoomed, task, config)
        return data
    finally:
        if zoomed is not source:
            zoomed.close()


def _rank_into(data: ScrubData, source, task, config: StudyConfig) -> None:
    """Rank the heads between ``data``'s point of emergence and put the per-head change into
    ``data`` (``ScrubData.delta_p``: the change of ``metric`` per head, ``metric``); a warning and no ranking without a point."""
    import warnings

    from interp.ranking import rank_heads_between
    from interp.tasks import RepetitionTask, metric_for

    if data.pre_step is None or data.post_step is None:
        warnings.warn(
            f"{data.label}: no point of emergence on the scrubbed curve (threshold {data.threshold}); "
            "the heads are not ranked (give a ranking with --heads)",
            RuntimeWarning,
            stacklevel=3,
        )
        return
    task = task or RepetitionTask()
    config = config.replace(metric=metric_for(task, config.metric), decompose=False)
    ranking = rank_heads_between(source, data.pre_step, data.post_step, task.build(source.tokenizer()), config)
    data.delta_p, _, _, data.metric = ranking_values(ranking)


def _record(source, zoom_steps, task, steps, n_prompts, config: StudyConfig, ranking, progress) -> ScrubData:
    from interp.sources.catalogue import model_and_seed, run_label
    from interp.tasks import RepetitionTask

    delta_p, pre, post, metric = ranking_values(ranking)

    wanted = sorted({int(s) for s in steps}) if steps is not None else source.available_steps()
    for step in wanted:
        source._check_step(step)
    task = task or RepetitionTask()
    batch = task.build(source.tokenizer())
    recorder = PatternRecorder(source, batch, device=config.device, n_prompts=n_prompts, scores=config.scores)
    evaluate_steps(recorder, wanted, progress)
    ordered, patterns = recorder.recorded(wanted)
    tokenizer = source.tokenizer()
    tokens = [token_labels(tokenizer, row.tolist()) for row in batch.tokens[: recorder.n_prompts]]
    model, seed = model_and_seed(source.model_id)
    head_scores = (
        pd.DataFrame(recorder.score_rows, columns=["step", "layer", "head", "score", "value"])
        if config.scores
        else None
    )
    curve = recorder.table()[["step", "accuracy", "p_answer"]]
    if pre is None and post is None and len(curve) >= 2:  # no ranking: the point on the scrubbed curve
        from interp.emergence import point_from_curve

        found_pre, found_post, emerged = point_from_curve(
            curve["step"], curve["accuracy"], config.threshold, config.hold
        )
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
        threshold=config.threshold,
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
    config: StudyConfig = StudyConfig(),
    ranking=None,
    rank: bool = False,
    progress: bool = True,
) -> Scrubber:
    """The attention-pattern scrubber of one run (the page: :mod:`interp.report.scrubber`).

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
                config=config,
                ranking=ranking,
                rank=rank,
                progress=progress,
            )
        )
    finally:
        if opened:  # a source the caller handed in stays open
            source.close()
