"""The main job end to end: capability per checkpoint -> point of emergence -> attention-pattern
patching from post into pre -> head ranking by delta_p -> joint top-K recovery -> report.

Method (Baherwani et al. 2026, Pythia part): find the pair (pre, post) of consecutive
checkpoints where the capability jumps; patch each head's attention pattern
(``blocks.{l}.attn.hook_pattern``, all query positions) from post into pre and record
``delta_p = mean p_patched(answer) - mean p_pre(answer)``; rank heads by ``delta_p``; patch the
top K jointly and report ``recovered = (p_K - p_pre) / (p_post - p_pre)`` (ARENA-style
calibration: pre = 0, post = 1).

Every function returns DataFrames and plotly figures for Jupyter; :meth:`MainJobReport.save`
writes the tables and the self-contained ``report.html``.

The results (the column lists, :class:`RunAnalysis`, :class:`MainJobReport`) are
:mod:`interp.main_job_report`; this module fills them and re-exports their names.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence, Sized
from pathlib import Path
from typing import Literal, cast

import pandas as pd
import torch

from interp.emergence import DEFAULT_HOLD, StepEvaluator, find_emergence, scan_emergence
from interp.main_job_report import (
    CHECKPOINTS_COLUMNS,
    EMERGENCE_COLUMNS,
    HEADS_COLUMNS,
    KEY_COLUMNS,
    POINTS_COLUMNS,
    TOPK_COLUMNS,
    MainJobReport,
    RunAnalysis,
    labelled,
)
from interp.sources.catalogue import model_and_seed
from interp.tasks import CapabilityTask, RepetitionTask

__all__ = [
    "CHECKPOINTS_COLUMNS",
    "EMERGENCE_COLUMNS",
    "HEADS_COLUMNS",
    "KEY_COLUMNS",
    "POINTS_COLUMNS",
    "TOPK_COLUMNS",
    "MainJobReport",
    "RunAnalysis",
    "analyse_run",
    "labelled",
    "model_and_seed",
    "run_main_job",
]


def _training_loss(source) -> pd.DataFrame | None:
    """The per-step training loss of a run that our trainer wrote (``loss.csv`` beside its
    checkpoints, :func:`interp.sources.embedded.loss_curve`); None for hub and foreign suites."""
    root = getattr(source, "root", None)
    if root is None or not (Path(root) / "loss.csv").is_file():
        return None
    from interp.sources.embedded import loss_curve

    return loss_curve(root)


def analyse_run(
    source,
    task: CapabilityTask | None = None,
    threshold: float = 0.5,
    scan: bool = False,
    method: Literal["fast", "reference", "attribution"] = "fast",
    prescreen_top_n: int | None = None,
    device: str | None = None,
    metric: str | None = None,
    decompose: bool = True,
    scores: bool = True,
    prescreen_steps: int = 2,
    hold: int = DEFAULT_HOLD,
    scrub: bool = True,
    dtype: str = "float32",
    swap_weights: bool = True,
) -> RunAnalysis:
    """The main job on one (run, task): capability curve, point of emergence and, if it emerged
    between two checkpoints, the head ranking and joint top-K recovery.

    Args:
        source: checkpoint source of the run.
        task: capability task (default :class:`interp.tasks.RepetitionTask`).
        threshold: greedy-accuracy threshold for the point of emergence (fraction).
        scan: evaluate every searchable step (the full curve) and take the point from it
            (:func:`interp.emergence.scan_emergence`); without it the point comes from the
            bisection (:func:`interp.emergence.find_emergence`) and the curve holds its steps.
        hold: checkpoints after post that must stay at or above the threshold (the rule of
            :mod:`interp.emergence`).
        method, prescreen_top_n, device, metric, prescreen_steps: see
            :func:`interp.ranking.rank_heads_between` (``metric=None``: the task's default,
            :func:`interp.task_registry.default_metric`).
        decompose: also decompose the jump by component (``components.csv``).
        scores: also score every head at the checkpoints around the point (``head_scores.csv``,
            :mod:`interp.scores`).
        scrub: also keep every head's pattern on the task's first prompts at each step the run
            evaluates (the report's scrubber, :mod:`interp.report.scrubber`; no extra checkpoint load).
        dtype: ``float32`` (default), ``bfloat16`` or ``float16`` for the models; with the low
            precisions the attention softmax and the metric are computed in float32
            (:func:`interp.sources.upcast_softmax`).
        swap_weights: switch checkpoints inside one resident bridge (:mod:`interp.sources.weight_swap`)
            and read the next checkpoint ahead on a background thread; every value equals a
            fresh boot's (tests/test_weight_swap.py).

    Raises:
        ValueError: an unknown ``dtype`` (the valid ones named).
    """
    from interp.core.devices import torch_dtype
    from interp.ranking import rank_heads_between
    from interp.scrubbing import DEFAULT_PROMPTS, PatternRecorder, token_labels
    from interp.task_registry import default_metric

    model_dtype = torch_dtype(dtype)
    if hasattr(source, "swap_weights"):
        source.swap_weights = swap_weights
        source.dtype = model_dtype
    task = task or RepetitionTask()
    metric = metric or default_metric(task)
    batch = task.build(source.tokenizer())
    model, seed = model_and_seed(source.model_id)
    evaluator = (
        PatternRecorder(source, batch, device=device, n_prompts=DEFAULT_PROMPTS)
        if scrub
        else StepEvaluator(source, batch, device=device)
    )
    search = scan_emergence if scan else find_emergence
    point = search(source, batch, threshold=threshold, evaluator=evaluator, hold=hold)
    curve = evaluator.table()  # every searchable step with a scan; the bisection's steps without
    analysis = RunAnalysis(
        model=model,
        seed=seed,
        model_id=source.model_id,
        point=point,
        curve=curve[["step", "accuracy", "p_answer"]],
        task=task.name,
        prepend_bos=batch.prepend_bos,
    )
    from interp.sources.checkpoint_integrity import checkpoint_table

    analysis.checkpoints = checkpoint_table(source)  # digests are known from the search already
    analysis.training_loss = _training_loss(source)
    if scrub and isinstance(evaluator, PatternRecorder) and evaluator.patterns:
        steps, patterns = evaluator.recorded()
        tokenizer = source.tokenizer()
        analysis.scrub_steps, analysis.scrub_patterns = steps, torch.from_numpy(patterns)
        analysis.scrub_tokens = [token_labels(tokenizer, row.tolist()) for row in batch.tokens[: evaluator.n_prompts]]
    if point.emerged and point.pre_step is not None and point.post_step is not None:
        ranked = rank_heads_between(
            source,
            point.pre_step,
            point.post_step,
            batch,
            method=method,
            prescreen_top_n=prescreen_top_n,
            device=device,
            metric=metric,
            decompose=decompose,
            prescreen_steps=prescreen_steps,
        )
        for key, value in ranked.ranking_values().items():  # the fields of interp.ranking.RankingFields
            setattr(analysis, key, value)
        if ranked.components is not None:
            analysis.components = ranked.components.assign(
                model=model, seed=seed, task=task.name, prepend_bos=batch.prepend_bos
            )
        if scores:
            from interp.scores import head_scores_over_checkpoints, steps_around

            steps = steps_around(source.searchable_steps(), point.pre_step, point.post_step)
            analysis.head_scores = head_scores_over_checkpoints(
                source, steps, device=device, model=model, seed=seed
            ).assign(task=task.name, prepend_bos=batch.prepend_bos)
    return analysis


def _step_digests(source, run: RunAnalysis) -> dict[str, str]:
    """Weight digest of every step the run evaluated or patched (``"step{N}"`` -> sha256 hex)."""
    steps = {int(s) for s in run.curve["step"]} | {
        s for s in (run.point.pre_step, run.point.post_step) if s is not None
    }
    return {f"step{step}": source.digest(step) for step in sorted(steps)}


def run_main_job(
    sources: Iterable,
    task: CapabilityTask | Sequence[CapabilityTask] | None = None,
    threshold: float = 0.5,
    scan: bool = False,
    method: Literal["fast", "reference", "attribution"] = "fast",
    prescreen_top_n: int | None = None,
    device: str | None = None,
    out_dir: str | Path | None = None,
    title: str | None = None,
    progress: bool = True,
    metric: str | None = None,
    decompose: bool = True,
    scores: bool = True,
    prescreen_steps: int = 2,
    hold: int = DEFAULT_HOLD,
    scrub: bool = True,
) -> MainJobReport:
    """Run :func:`analyse_run` on every (source, task) and collect a :class:`MainJobReport`.

    ``task``: one task or a list (default :class:`interp.tasks.RepetitionTask`); the report has
    one analysis per (run, task), in the order of the sources, then of the tasks. ``metric=None``
    takes each task's default metric (:mod:`interp.task_registry`).

    Sources are processed one at a time, as the iterable hands them out, and closed after their
    last task (each source reuses one bridge, so resident memory stays flat over long checkpoint
    sweeps). With :class:`interp.sources.ReadySources` (what the CLI passes), embedded runs are
    analysed as soon as each is trained and a core is free, and the report keeps the order of the
    names. If ``out_dir`` is given the report is saved there. ``threshold`` is the greedy-accuracy
    threshold of the point of emergence (a fraction, in (0, 1]). ``scan``, ``hold``, ``method``,
    ``prescreen_top_n``, ``prescreen_steps``, ``decompose``, ``scores``, ``scrub`` and
    ``device``: passed to :func:`analyse_run` for every (source, task), which documents them.
    ``title``: the page's title (default: named after the runs, ``interp.main_job_report.default_title``).

    Raises:
        ValueError: a threshold outside (0, 1] or ``hold < 0`` (before any source is opened).
    """
    from tqdm.auto import tqdm

    from interp.core.provenance import make_provenance
    from interp.emergence import check_hold

    check_hold(hold)
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"threshold={threshold} must be in (0, 1] (a greedy-accuracy fraction)")
    tasks: list[CapabilityTask] = (
        list(task) if isinstance(task, (list, tuple)) else [cast(CapabilityTask, task) or RepetitionTask()]
    )
    positioned = sources.with_positions() if hasattr(sources, "with_positions") else enumerate(sources)
    total = len(sources) if isinstance(sources, Sized) else None
    done: list[tuple[tuple[int, int], RunAnalysis, dict]] = []
    try:
        for position, source in tqdm(positioned, total=total, desc="runs", disable=not progress):
            try:
                for task_index, one_task in enumerate(tasks):  # the unit of work: (source, task)
                    run = analyse_run(
                        source,
                        task=one_task,
                        threshold=threshold,
                        scan=scan,
                        method=method,
                        prescreen_top_n=prescreen_top_n,
                        device=device,
                        metric=metric,
                        decompose=decompose,
                        scores=scores,
                        prescreen_steps=prescreen_steps,
                        hold=hold,
                        scrub=scrub,
                    )
                    done.append(((position, task_index), run, _step_digests(source, run)))
            finally:
                source.close()
    finally:  # a stop (Ctrl-C, an error) closes the sources now: an embedded suite's training workers stop too
        close = getattr(positioned, "close", None)
        if close is not None:
            close()
    done.sort(key=lambda item: item[0])
    runs = [run for _, run, _ in done]
    digests: dict[str, dict] = {}
    for _, run, steps in done:
        digests.setdefault(run.model_id, {}).update(steps)
    settings = {
        "sources": list(dict.fromkeys(run.model_id for run in runs)),
        "task": tasks,
        "threshold": threshold,
        "hold": hold,
        "scan": scan,
        "method": method,
        "prescreen_top_n": prescreen_top_n,
        "device": device,
        "metric": metric if metric is None or isinstance(metric, str) else getattr(metric, "__name__", repr(metric)),
        "decompose": decompose,
        "scores": scores,
        "prescreen_steps": prescreen_steps,
        "scrub": scrub,
    }
    report = MainJobReport(
        runs=runs,
        threshold=threshold,
        hold=hold,
        title=title,
        provenance=make_provenance("interp.pipeline.run_main_job", settings, digests),
    )
    if out_dir is not None:
        report.save(out_dir)
    return report
