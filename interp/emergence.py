"""Point of emergence: the pair of consecutive checkpoints where a capability switches on.

Definition (Baherwani et al. 2026, Pythia part: "the abrupt transition between two consecutive
checkpoints", located by binary search over checkpoints): given the searchable steps
``s_0 < ... < s_{N-1}`` of a run and a threshold on greedy accuracy (default 0.5), the point of
emergence is the pair ``(pre, post)`` of consecutive steps with ``acc(pre) < threshold`` and
``acc >= threshold`` at ``post`` and at every evaluated step after it. A run whose last step is
below the threshold never emerges; a run already above it at ``s_0`` emerged before the first
checkpoint (``pre = None``).

The search keeps the last evaluated step below the threshold and the first evaluated step above
it after that, and evaluates the middle of the gap until the two are consecutive: on a monotone
curve that is plain bisection, ``ceil(log2 N) + 2`` evaluations at most (first, last, then
halving). When the evaluated accuracies are not monotone (a step at or above the threshold
before one below it, or a drop larger than sampling noise: 3 standard errors by default), the
result says so and every step of the bracket around the non-monotone stretch is evaluated (a
scan), so the reported point is the last crossing of a fully evaluated stretch. A scan costs
evaluations beyond the bisection budget; on a curve whose capability really dips below the
threshold after first crossing it, it is what makes the answer agree with a full scan.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Callable, Sequence

import pandas as pd

from interp.tasks import CapabilityScore, TaskBatch, evaluate


@dataclass
class EmergencePoint:
    """The result of a point-of-emergence search on one run.

    Attributes:
        model_id: the run (checkpoint source) searched.
        pre_step: last step below the threshold (``None`` if emerged before the first step or
            never emerged).
        post_step: first step of the final stretch at or above the threshold (``None`` if never).
        emerged: whether the capability is above the threshold at the last step.
        threshold: the accuracy threshold (fraction).
        monotone: ``False`` if the evaluated curve was not monotone (then the bracket was scanned).
        n_evaluations: checkpoint evaluations spent (each step evaluated once at most).
        evaluations: one row per evaluated step: ``step``, ``accuracy``, ``p_answer``, ``order``
            (1 = evaluated first), sorted by step.
        excluded_steps: steps left out of the search because their weights equal another step's
            ({excluded step: a step with the same weights}; :meth:`CheckpointSource.duplicate_steps`).
    """

    model_id: str
    pre_step: int | None
    post_step: int | None
    emerged: bool
    threshold: float
    monotone: bool
    n_evaluations: int
    evaluations: pd.DataFrame
    excluded_steps: dict[int, int] = field(default_factory=dict)

    def as_row(self) -> dict:
        """The ``points.csv`` row (without model/seed columns, which the caller adds)."""
        return {
            "pre_step": self.pre_step, "post_step": self.post_step, "emerged": self.emerged,
            "n_evaluations": self.n_evaluations, "monotone": self.monotone, "threshold": self.threshold,
        }

    def _repr_html_(self) -> str:
        """Jupyter display: a table and the evaluated checkpoints as a figure (offline)."""
        from interp.display import point_html

        return point_html(self)


class StepEvaluator:
    """Evaluate a task on checkpoints of one source, each step at most once.

    The task is tokenised once; a step is loaded (through the source's reused bridge) only the
    first time it is asked for, and its score is memoised.
    """

    def __init__(self, source, batch: TaskBatch, device: str | None = None):
        self.source = source
        self.batch = batch
        self.device = device
        self.scores: dict[int, CapabilityScore] = {}
        self.order: list[int] = []

    def __call__(self, step: int, then: int | None = None) -> CapabilityScore:
        """The score of ``step``; ``then``: the step asked for next, read ahead while this one is
        evaluated (:meth:`interp.checkpoints.CheckpointSource.prefetch`, when the source swaps weights)."""
        if step not in self.scores:
            checkpoint = self.source.load(step, device=self.device)
            if then is not None and then not in self.scores and hasattr(self.source, "prefetch"):
                self.source.prefetch(then)
            self.scores[step] = evaluate(checkpoint.model, self.batch)
            self.order.append(step)
        return self.scores[step]

    def table(self) -> pd.DataFrame:
        """Evaluated steps as a DataFrame (step, accuracy, p_answer, order), sorted by step."""
        rows = [
            {"step": s, "accuracy": self.scores[s].accuracy, "p_answer": self.scores[s].p_answer,
             "order": i + 1}
            for i, s in enumerate(self.order)
        ]
        return pd.DataFrame(rows, columns=["step", "accuracy", "p_answer", "order"]).sort_values("step").reset_index(drop=True)


def max_bisection_evaluations(n_steps: int) -> int:
    """Upper bound on evaluations for a monotone curve over ``n_steps`` steps: ``ceil(log2 N) + 2``."""
    return math.ceil(math.log2(max(n_steps, 1))) + 2


def _validate(steps: Sequence[int], threshold: float) -> list[int]:
    steps = sorted(set(int(s) for s in steps))
    if len(steps) < 2:
        raise ValueError(f"need at least 2 searchable steps to locate a transition, got {steps}")
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"threshold={threshold} must be in (0, 1] (a greedy-accuracy fraction)")
    return steps


def _bracket(steps: list[int], acc: dict[int, float], threshold: float) -> tuple[int | None, int | None]:
    """Indices (last below, first above after it) of the evaluated steps; None where absent."""
    evaluated = [i for i, s in enumerate(steps) if s in acc]
    below = [i for i in evaluated if acc[steps[i]] < threshold]
    if not below:
        return None, evaluated[0]
    last_below = below[-1]
    after = [i for i in evaluated if i > last_below]
    return last_below, (after[0] if after else None)


def drop_is_significant(high: float, low: float, n_prompts: int, drop_tolerance: float | None) -> bool:
    """Whether accuracy falling from ``high`` to ``low`` is more than sampling noise.

    With ``drop_tolerance=None`` the tolerance is 3 standard errors of the difference of two
    binomial proportions measured on ``n_prompts`` prompts each (pooled p); else the given
    tolerance (accuracy units).
    """
    if drop_tolerance is None:
        pooled = (high + low) / 2
        drop_tolerance = 3.0 * math.sqrt(max(pooled * (1 - pooled), 1e-12) * 2 / max(n_prompts, 1))
    return high - low > drop_tolerance


def _non_monotone_span(steps: list[int], acc: dict[int, float], threshold: float,
                       drop_tolerance: float | None, n_prompts: int):
    """(first, last) indices of the evaluated stretch that breaks monotonicity, or None."""
    evaluated = [i for i, s in enumerate(steps) if s in acc]
    values = [acc[steps[i]] for i in evaluated]
    start = end = None
    for a in range(len(evaluated)):
        for b in range(a + 1, len(evaluated)):
            crosses_back = values[a] >= threshold > values[b]
            drops = drop_is_significant(values[a], values[b], n_prompts, drop_tolerance)
            if crosses_back or drops:
                start = evaluated[a] if start is None else min(start, evaluated[a])
                end = evaluated[b] if end is None else max(end, evaluated[b])
    return None if start is None else (start, end)


def search_emergence(
    steps: Sequence[int],
    evaluate_step: Callable[[int], CapabilityScore],
    threshold: float = 0.5,
    drop_tolerance: float | None = None,
    model_id: str = "",
) -> EmergencePoint:
    """Find the point of emergence by bisection over ``steps`` (see the module docstring).

    Args:
        steps: searchable checkpoint steps (training steps), duplicates already removed.
        evaluate_step: step -> score; called at most once per step by this function.
        threshold: greedy-accuracy threshold (fraction), default 0.5 (Baherwani et al. 2026: "solved" =
            greedy prediction equals the answer).
        drop_tolerance: an accuracy drop larger than this between evaluated steps marks the curve
            non-monotone (accuracy units); ``None`` (default) = 3 standard errors of the
            difference of two binomial proportions on the task's prompt count, so that sampling
            noise does not trigger scans.
        model_id: label stored on the result.

    Returns:
        The :class:`EmergencePoint`; ``evaluations`` lists every evaluated step.

    Raises:
        ValueError: fewer than two steps, or a threshold outside (0, 1].
    """
    steps = _validate(steps, threshold)
    scores: dict[int, CapabilityScore] = {}
    order: list[int] = []

    def ev(i: int) -> float:
        step = steps[i]
        if step not in scores:
            scores[step] = evaluate_step(step)
            order.append(step)
        return scores[step].accuracy

    acc = lambda: {s: scores[s].accuracy for s in scores}  # noqa: E731  (current view)
    ev(len(steps) - 1)
    ev(0)
    monotone = True
    while True:
        lo, hi = _bracket(steps, acc(), threshold)
        if lo is not None and hi is not None and hi - lo > 1:
            ev((lo + hi) // 2)
            continue
        n_prompts = min(score.n_prompts for score in scores.values())
        span = _non_monotone_span(steps, acc(), threshold, drop_tolerance, n_prompts)
        unevaluated = [] if span is None else [i for i in range(span[0], span[1] + 1) if steps[i] not in scores]
        if span is not None:
            monotone = False
        if not unevaluated:
            break
        for i in unevaluated:  # scan the bracket around the non-monotone stretch
            ev(i)
    if not monotone:
        warnings.warn(f"{model_id or 'run'}: evaluated accuracy is not monotone in step; scanned the bracket", stacklevel=2)
    lo, hi = _bracket(steps, acc(), threshold)
    emerged = scores[steps[-1]].accuracy >= threshold
    table = pd.DataFrame(
        [{"step": s, "accuracy": scores[s].accuracy, "p_answer": scores[s].p_answer, "order": k + 1}
         for k, s in enumerate(order)],
        columns=["step", "accuracy", "p_answer", "order"],
    ).sort_values("step").reset_index(drop=True)
    return EmergencePoint(
        model_id=model_id,
        pre_step=steps[lo] if (emerged and lo is not None) else None,
        post_step=steps[hi] if (emerged and hi is not None) else None,
        emerged=emerged,
        threshold=threshold,
        monotone=monotone,
        n_evaluations=len(order),
        evaluations=table,
    )


def point_from_curve(steps: Sequence[int], accuracy: Sequence[float], threshold: float = 0.5) -> tuple[int | None, int | None, bool]:
    """Reference answer from a fully evaluated curve: ``(pre_step, post_step, emerged)``.

    ``post`` starts the final stretch of steps at or above ``threshold``; ``pre`` is the step
    before it (``None`` if the curve is above the threshold from the first step).
    """
    pairs = sorted(zip(steps, accuracy))
    if pairs[-1][1] < threshold:
        return None, None, False
    k = len(pairs) - 1
    while k > 0 and pairs[k - 1][1] >= threshold:
        k -= 1
    return (pairs[k - 1][0] if k > 0 else None), pairs[k][0], True


def find_emergence(
    source, batch: TaskBatch, threshold: float = 0.5, device: str | None = None,
    evaluator: StepEvaluator | None = None,
) -> EmergencePoint:
    """Search a checkpoint source for its point of emergence on a task.

    Steps whose weights duplicate an earlier step's (same digest) are excluded first (they would
    create a fake flat stretch; e.g. pythia-2.8b serves its final weights on 86 of 154 branches).

    Args:
        source: an :class:`interp.checkpoints.CheckpointSource`.
        batch: the task prompts, tokenised once for this source's tokenizer.
        threshold: greedy-accuracy threshold (fraction).
        device: where checkpoints are loaded.
        evaluator: reuse an evaluator (and its memoised scores) across calls.

    Returns:
        The :class:`EmergencePoint`, with ``excluded_steps`` = {excluded step: a step with the same weights}.
    """
    evaluator = evaluator or StepEvaluator(source, batch, device=device)
    excluded = source.duplicate_steps()
    steps = [s for s in source.available_steps() if s not in excluded]
    point = search_emergence(steps, evaluator, threshold=threshold, model_id=source.model_id)
    point.excluded_steps = dict(excluded)
    return point


def full_scan(source, batch: TaskBatch, device: str | None = None, evaluator: StepEvaluator | None = None) -> pd.DataFrame:
    """Evaluate every searchable step (the reference the bisection must agree with).

    Returns:
        DataFrame with columns ``step``, ``accuracy``, ``p_answer``, ``order``, sorted by step.
    """
    evaluator = evaluator or StepEvaluator(source, batch, device=device)
    excluded = source.duplicate_steps()
    steps = [step for step in source.available_steps() if step not in excluded]
    for step, then in zip(steps, steps[1:] + [None]):
        evaluator(step, then=then)
    return evaluator.table()


def dense_crossing(steps: Sequence[int], accuracy: Sequence[float], threshold: float = 0.5,
                   hold: int = 2) -> tuple[int | None, int | None]:
    """The crossing of a densely sampled, noisy capability curve (used by the dense search).

    Rule: ``post`` is the first step whose accuracy is at or above ``threshold`` and stays there
    at the next ``hold`` steps of the curve (all remaining steps when fewer are left); ``pre``
    is the step just before it. With 512 prompts the standard error of an accuracy near 0.5 is
    0.022, so a single checkpoint above the threshold amid ones below it is not a crossing.

    Args:
        steps: evaluated steps (any order; sorted here).
        accuracy: greedy accuracy (fraction) per step.
        threshold: accuracy threshold (fraction).
        hold: checkpoints after ``post`` that must stay at or above the threshold.

    Returns:
        ``(pre, post)``; ``(None, first step)`` when the first step already qualifies;
        ``(None, None)`` when no step does.

    Raises:
        ValueError: different lengths, fewer than 2 steps, or ``hold < 0``.
    """
    if len(steps) != len(accuracy):
        raise ValueError(f"{len(steps)} steps but {len(accuracy)} accuracies")
    if hold < 0:
        raise ValueError(f"hold={hold}: must be >= 0")
    order = sorted(range(len(steps)), key=lambda i: steps[i])
    s = [int(steps[i]) for i in order]
    a = [float(accuracy[i]) for i in order]
    _validate(s, threshold)
    for i, value in enumerate(a):
        if value >= threshold and all(x >= threshold for x in a[i + 1:i + 1 + hold]):
            return (s[i - 1] if i > 0 else None), s[i]
    return None, None
