"""Point of emergence: the pair of consecutive checkpoints where a capability switches on.

The rule (one definition, used by every search, table and page of the toolkit): given the
searchable steps ``s_0 < ... < s_{N-1}`` of a run and a threshold on greedy accuracy (default
0.5), **post is the first checkpoint whose accuracy is at or above the threshold and stays at or
above it at the next ``hold`` checkpoints (default 2); pre is the checkpoint before it.** A
crossing within the last ``hold`` checkpoints has no room to hold and is no point of emergence:
the run counts as not emerged by its last checkpoint (censored there), in the study as in a
population, and every search, table and page that meets one says so in one sentence
(:func:`no_room_to_hold`; ``EmergencePoint.note``). A run emerged when some checkpoint
qualifies; one that qualifies at ``s_0`` emerged before the first checkpoint (``pre = None``).
``hold = 0`` is the plain first crossing. Why a hold: on 64 prompts the
standard error of an accuracy near 0.5 is 0.06, and real runs touch the threshold and fall back
(``neox-2l-128d`` seed 0 of the quick suite: 0.031, **0.500**, 0.203, 0.609 at steps
1000-1300, issue 19); the crossing that holds is 1200 -> 1300, not the touch at 1100.
:func:`held_crossing` is the rule; :func:`point_from_curve`, the dense search of
:mod:`interp.zoom`, the readiness and the population's tables call it, and
:func:`search_emergence` / :func:`scan_emergence` apply its core (``_first_holding``) to the steps
they evaluated.
Source: Baherwani et al. 2026 (Pythia part: "the abrupt transition between two consecutive
checkpoints", located by binary search over checkpoints); the hold is this toolkit's noise rule.

The bisection (:func:`search_emergence`) evaluates the last and the first step, then the middle
of the gap between the first evaluated step at or above the threshold (whose evaluated
neighbours within ``hold`` do not fall below it) and the evaluated step before it, until the two
are consecutive; then it verifies that post holds (evaluating the next ``hold`` checkpoints, or
the ones left) and looks at the ``hold`` checkpoints before pre. A candidate that does not hold
is dropped and the search goes on after it; one that holds on the checkpoints left but has no
room to hold is the crossing the result names in its ``note``, not a point (the steps evaluated
are the same either way). On a monotone curve that costs at most ``ceil(log2 N) + 2 + 2 * hold``
evaluations (:func:`max_bisection_evaluations`). When the evaluated accuracies are not monotone
(a step at or above the threshold before one below it, or a drop larger than sampling noise: 3
standard errors by default), the result says ``monotone=False`` and every step of the stretch
between them is evaluated (a scan, beyond the budget). Limit: a crossing that holds but lies
entirely between two evaluated steps below the threshold (with no significant drop between them)
is invisible to a bisection; a full scan (:func:`scan_emergence`, ``emergence run --scan``) sees
every checkpoint, and where one exists its point is the one reported.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from interp.core.objects import check_argument, results_equal, short_repr
from interp.core.terms import DEFAULT_HOLD, DEFAULT_THRESHOLD
from interp.evaluator import StepEvaluator, evaluate_steps, watching
from interp.tasks import CapabilityScore, TaskBatch


@dataclass
class EmergencePoint:
    """The result of a point-of-emergence search on one run.

    Attributes:
        model_id: the run (checkpoint source) searched.
        pre_step: the checkpoint before post (``None`` if emerged before the first step or never
            emerged).
        post_step: the first checkpoint at or above the threshold that holds for the next
            ``hold`` checkpoints (module docstring; ``None`` if none does).
        emerged: whether some checkpoint qualifies as post.
        threshold: the accuracy threshold (fraction).
        monotone: ``False`` if the evaluated curve was not monotone: a step at or above the
            threshold before one below it, or a drop larger than sampling noise (a bisection then
            scanned the stretch).
        n_evaluations: checkpoint evaluations spent (each step evaluated once at most).
        evaluations: one row per evaluated step: ``step``, ``accuracy``, ``p_answer``, ``order``
            (1 = evaluated first), sorted by step.
        excluded_steps: steps left out of the search because their weights equal another step's
            ({excluded step: a step with the same weights}; :meth:`CheckpointSource.duplicate_steps`).
        hold: checkpoints after post that had to stay at or above the threshold (the rule).
        search: how the point was found: ``"bisection"`` or ``"scan"`` (every searchable step).
        note: the sentence of :func:`no_room_to_hold` when the run's crossing lies within its
            last ``hold`` checkpoints (not dated: ``emerged`` False, the run censored at its last
            checkpoint); empty otherwise.

    Source: the point of emergence of Baherwani et al. 2026 (the transition between two
    consecutive checkpoints); the hold is this toolkit's noise rule (module docstring).
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
    hold: int = DEFAULT_HOLD
    search: str = "bisection"
    note: str = ""

    __eq__ = results_equal
    __repr__ = short_repr

    def as_row(self) -> dict:
        """The ``points.csv`` row (without model/seed columns, which the caller adds)."""
        return {
            "pre_step": self.pre_step,
            "post_step": self.post_step,
            "emerged": self.emerged,
            "n_evaluations": self.n_evaluations,
            "monotone": self.monotone,
            "threshold": self.threshold,
            "hold": self.hold,
            "search": self.search,
            "note": self.note,
        }

    def _html(self, assets) -> str:
        from interp.report.display import point_html

        return point_html(self, assets)

    def _repr_html_(self) -> str:
        """Jupyter display: a table and the evaluated checkpoints as a figure (offline, self-contained)."""
        from interp.report.display import Assets

        return self._html(Assets())

    def save_html(self, path):
        """Write the display as a self-contained page (atomic; :func:`interp.report.display.save_html`)."""
        from interp.report.display import save_html

        return save_html(self, path, title=f"point of emergence: {self.model_id}")


def max_bisection_evaluations(n_steps: int, hold: int = DEFAULT_HOLD) -> int:
    """Upper bound on the bisection's evaluations for a monotone curve over ``n_steps`` steps:
    ``ceil(log2 N) + 2`` to close the bracket (first, last, then halving), plus ``hold`` to verify
    that post holds and ``hold`` to look at the checkpoints before pre (at most ``N``)."""
    return min(max(n_steps, 1), math.ceil(math.log2(max(n_steps, 1))) + 2 + 2 * hold)


def check_hold(hold) -> int:
    """``hold`` if it is an integer >= 0 (checkpoints after post that must stay at or above the threshold).

    Raises:
        ValueError: ``hold`` is not an int (a bool is refused) or is negative.
    """
    if isinstance(hold, bool) or not isinstance(hold, int) or hold < 0:
        raise ValueError(
            f"hold={hold!r}: must be an integer >= 0 (checkpoints after post that must stay at or above the threshold)"
        )
    return hold


def check_source(source: Any, where: str) -> None:
    """Refuse what is not a checkpoint source (anything with ``available_steps``; e.g. a source
    name where ``el.open_source(name)`` belongs), in one line.

    Raises:
        TypeError: naming ``where``, what was passed and what is expected.
    """
    hint = "; open a name with el.open_source(name)" if isinstance(source, str) else ""
    check_argument(callable(getattr(source, "available_steps", None)), source, where, f"a checkpoint source{hint}")


def _validate(steps: Sequence[int], threshold: float, hold: int = 0) -> list[int]:
    steps = sorted({int(s) for s in steps})
    if len(steps) < 2:
        raise ValueError(f"need at least 2 searchable steps to locate a transition, got {steps}")
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"threshold={threshold} must be in (0, 1] (a greedy-accuracy fraction)")
    check_hold(hold)
    return steps


def _holds(acc: dict[int, float], i: int, n: int, threshold: float, hold: int) -> bool:
    """Whether index ``i`` is at or above the threshold and no known index of its hold window
    (the next ``hold`` indices, cut at the last index ``n - 1``) is below it."""
    return acc[i] >= threshold and not any(
        acc[j] < threshold for j in range(i + 1, min(i + hold, n - 1) + 1) if j in acc
    )


def _first_holding(acc: dict[int, float], n: int, threshold: float, hold: int) -> int | None:
    """The rule on indices ``0..n-1``: the first known index with room to hold (``hold``
    indices after it) that holds (see :func:`_holds`)."""
    return next((i for i in sorted(acc) if i + hold <= n - 1 and _holds(acc, i, n, threshold, hold)), None)


def _first_crossing(acc: dict[int, float], n: int, threshold: float, hold: int) -> int | None:
    """The first known index that holds on the indices left (its window cut at ``n - 1``): the
    crossing the bisection closes in on. It is :func:`_first_holding` when it has room; without
    room no later index has any, and the run did not emerge (:func:`no_room_to_hold` says why)."""
    return next((i for i in sorted(acc) if _holds(acc, i, n, threshold, hold)), None)


def _no_room_sentence(steps: Sequence[int], crossing: int, hold: int) -> str:
    """The sentence for a crossing at ``crossing`` (a step) among ``steps`` (no room to hold)."""
    after = sum(1 for s in steps if int(s) > int(crossing))
    return (
        f"the crossing at step {int(crossing)} has {after} checkpoint{'' if after == 1 else 's'} after it, fewer than "
        f"the hold of {hold}: not dated, the run counts as not emerged by its last checkpoint (censored there)"
    )


def held_crossing(
    steps: Sequence[int],
    accuracy: Sequence[float],
    threshold: float = DEFAULT_THRESHOLD,
    hold: int = DEFAULT_HOLD,
) -> tuple[int | None, int | None]:
    """The point of emergence of a fully evaluated curve: the rule of the module docstring.

    ``post`` is the first step whose accuracy is at or above ``threshold`` and stays there at the
    next ``hold`` steps of the curve; ``pre`` is the step just before it. A step with fewer than
    ``hold`` steps after it cannot be ``post`` (no room to hold: the run is censored at its last
    step; :func:`no_room_to_hold` gives the sentence that says so). With 64 prompts the standard
    error of an accuracy near 0.5 is 0.06 (0.022 with 512), so a single checkpoint above the
    threshold amid ones below it is not a crossing.

    Args:
        steps: evaluated steps (training steps; any order, sorted here).
        accuracy: greedy accuracy (fraction) per step.
        threshold: accuracy threshold (fraction, in (0, 1]).
        hold: checkpoints after ``post`` that must stay at or above the threshold (>= 0; 0 = the
            first step at or above the threshold).

    Returns:
        ``(pre, post)``; ``(None, first step)`` when the first step already qualifies;
        ``(None, None)`` when no step does.

    Raises:
        ValueError: different lengths, fewer than 2 steps, a threshold outside (0, 1], ``hold < 0``.

    Source: the point of emergence as the transition between two consecutive checkpoints, located by
    binary search (Baherwani et al. 2026, "Emergent Capabilities Arise Randomly from Learning
    Sparse Attention Patterns"); the ``hold`` is this toolkit's noise rule (module docstring).
    """
    if len(steps) != len(accuracy):
        raise ValueError(f"{len(steps)} steps but {len(accuracy)} accuracies")
    order = sorted(range(len(steps)), key=lambda i: steps[i])
    s = [int(steps[i]) for i in order]
    _validate(s, threshold, hold)
    post = _first_holding({k: float(accuracy[i]) for k, i in enumerate(order)}, len(s), threshold, hold)
    if post is None:
        return None, None
    return (s[post - 1] if post > 0 else None), s[post]


def no_room_to_hold(
    steps: Sequence[int], accuracy: Sequence[float], threshold: float = DEFAULT_THRESHOLD, hold: int = DEFAULT_HOLD
) -> str | None:
    """The one sentence saying that a curve's crossing has no room to hold, or None.

    The crossing is the first step at or above ``threshold`` that stays there at every step left
    after it; when it has fewer than ``hold`` steps after it, :func:`held_crossing` dates no
    point and the run counts as not emerged by its last step (censored there):
    ``"the crossing at step 2300 has 1 checkpoint after it, fewer than the hold of 2: not dated,
    the run counts as not emerged by its last checkpoint (censored there)"``. The study's searches
    (``EmergencePoint.note`` and a ``RuntimeWarning``), the population's ``runs`` table
    (``note``) and the pages say so with this sentence.

    Args:
        steps, accuracy: the curve (training steps, greedy accuracy as a fraction; any order).
        threshold: in (0, 1]; hold: >= 0 checkpoints.

    Returns:
        The sentence, or None (a point is dated, or nothing crosses, or ``hold == 0``).

    Raises:
        ValueError: as :func:`held_crossing`.
    """
    if len(steps) != len(accuracy):
        raise ValueError(f"{len(steps)} steps but {len(accuracy)} accuracies")
    order = sorted(range(len(steps)), key=lambda i: steps[i])
    s = [int(steps[i]) for i in order]
    _validate(s, threshold, hold)
    acc = {k: float(accuracy[i]) for k, i in enumerate(order)}
    crossing = _first_crossing(acc, len(s), threshold, hold)
    if crossing is None or _first_holding(acc, len(s), threshold, hold) is not None:
        return None
    return _no_room_sentence(s, s[crossing], hold)


def point_from_curve(
    steps: Sequence[int], accuracy: Sequence[float], threshold: float = DEFAULT_THRESHOLD, hold: int = DEFAULT_HOLD
) -> tuple[int | None, int | None, bool]:
    """Reference answer from a fully evaluated curve: ``(pre_step, post_step, emerged)`` by the
    rule (:func:`held_crossing`); ``emerged`` is whether some step qualifies as post (a crossing
    with no room to hold does not: :func:`no_room_to_hold` says so).

    Raises:
        ValueError: as :func:`held_crossing`.
    """
    pre, post = held_crossing(steps, accuracy, threshold=threshold, hold=hold)
    return pre, post, post is not None


def curve_is_monotone(
    steps: Sequence[int],
    accuracy: Sequence[float],
    threshold: float = DEFAULT_THRESHOLD,
    n_prompts: int = 64,
    drop_tolerance: float | None = None,
) -> bool:
    """Whether a curve is monotone in the sense of :attr:`EmergencePoint.monotone`: no step at or
    above ``threshold`` before one below it, and no drop larger than sampling noise
    (:func:`drop_is_significant` on ``n_prompts`` prompts, or ``drop_tolerance``)."""
    acc = {int(s): float(a) for s, a in zip(steps, accuracy)}
    return _non_monotone_span(sorted(acc), acc, threshold, drop_tolerance, n_prompts) is None


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


def _non_monotone_span(
    steps: list[int], acc: dict[int, float], threshold: float, drop_tolerance: float | None, n_prompts: int
):
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


def _next_step(n: int, acc: dict[int, float], threshold: float, hold: int) -> int | None:
    """The bisection's next index to evaluate given the known accuracies (index -> value), or
    ``None`` when the point is settled. Order: close the bracket before the candidate post (the
    first known index that holds on the indices left, :func:`_first_crossing`), then verify its hold window, then look at the ``hold``
    indices before pre (they cannot change the point: a step that holds there would have pre in
    its window; they show a transient crossing next to the point, i.e. ``monotone=False``)."""
    post = _first_crossing(acc, n, threshold, hold)  # closed in on even without room: the note names it
    if post is None:
        return None  # nothing at or above the threshold that holds: the gaps are assumed below
    if post > 0 and post - 1 not in acc:
        before = max(i for i in acc if i < post)  # below the threshold (else it would hold, or post would not)
        return (before + post) // 2
    window = [j for j in range(post + 1, min(post + hold, n - 1) + 1) if j not in acc]
    if window:
        return window[0]
    look_back = [j for j in range(max(post - 1 - hold, 0), post - 1) if j not in acc]
    return look_back[-1] if look_back else None


def _point(
    model_id: str,
    steps: list[int],
    scores: dict[int, CapabilityScore],
    order: list[int],
    threshold: float,
    hold: int,
    drop_tolerance: float | None,
    search: str,
) -> EmergencePoint:
    """The :class:`EmergencePoint` of the evaluated steps (the rule applied to them)."""
    acc = {s: scores[s].accuracy for s in scores}
    evaluated = sorted(acc)
    index = {s: k for k, s in enumerate(steps)}
    known = {index[s]: acc[s] for s in evaluated}
    post = _first_holding(known, len(steps), threshold, hold)
    crossing = None if post is not None else _first_crossing(known, len(steps), threshold, hold)
    n_prompts = min(score.n_prompts for score in scores.values())
    table = (
        pd.DataFrame(
            [
                {"step": s, "accuracy": scores[s].accuracy, "p_answer": scores[s].p_answer, "order": k + 1}
                for k, s in enumerate(order)
            ],
            columns=["step", "accuracy", "p_answer", "order"],
        )
        .sort_values("step")
        .reset_index(drop=True)
    )
    return EmergencePoint(
        model_id=model_id,
        pre_step=steps[post - 1] if post is not None and post > 0 else None,
        post_step=None if post is None else steps[post],
        emerged=post is not None,
        threshold=threshold,
        monotone=_non_monotone_span(evaluated, acc, threshold, drop_tolerance, n_prompts) is None,
        n_evaluations=len(order),
        evaluations=table,
        hold=hold,
        search=search,
        note="" if crossing is None else _no_room_sentence(steps, steps[crossing], hold),
    )


def search_emergence(
    steps: Sequence[int],
    evaluate_step: Callable[[int], CapabilityScore],
    threshold: float = DEFAULT_THRESHOLD,
    drop_tolerance: float | None = None,
    model_id: str = "",
    hold: int = DEFAULT_HOLD,
) -> EmergencePoint:
    """Find the point of emergence by bisection over ``steps`` (the rule and the search: module
    docstring).

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
        hold: checkpoints after post that must stay at or above the threshold (default 2).

    Returns:
        The :class:`EmergencePoint`; ``evaluations`` lists every evaluated step. On a monotone
        curve ``n_evaluations <= max_bisection_evaluations(len(steps), hold)``.

    Raises:
        ValueError: fewer than two steps, a threshold outside (0, 1], or ``hold < 0``.
    """
    steps = _validate(steps, threshold, hold)
    scores: dict[int, CapabilityScore] = {}
    order: list[int] = []

    def ev(i: int) -> None:
        step = steps[i]
        if step not in scores:
            scores[step] = evaluate_step(step)
            order.append(step)

    ev(len(steps) - 1)
    ev(0)
    while True:
        acc = {s: scores[s].accuracy for s in scores}
        n_prompts = min(score.n_prompts for score in scores.values())
        span = _non_monotone_span(steps, acc, threshold, drop_tolerance, n_prompts)
        unevaluated = [] if span is None else [i for i in range(span[0], span[1] + 1) if steps[i] not in scores]
        if unevaluated:
            for i in unevaluated:  # scan the stretch that breaks monotonicity
                ev(i)
            continue
        nxt = _next_step(len(steps), {i: acc[s] for i, s in enumerate(steps) if s in acc}, threshold, hold)
        if nxt is None:
            break
        ev(nxt)
    point = _point(model_id, steps, scores, order, threshold, hold, drop_tolerance, "bisection")
    if point.note:
        warnings.warn(f"{model_id or 'run'}: {point.note}", RuntimeWarning, stacklevel=2)
    if not point.monotone:
        warnings.warn(
            f"{model_id or 'run'}: evaluated accuracy is not monotone in step; scanned the stretch", stacklevel=2
        )
    return point


def find_emergence(
    source,
    batch: TaskBatch,
    threshold: float = DEFAULT_THRESHOLD,
    device: str | None = None,
    evaluator: StepEvaluator | None = None,
    hold: int = DEFAULT_HOLD,
    progress: bool = True,
) -> EmergencePoint:
    """Search a checkpoint source for its point of emergence on a task (bisection,
    :func:`search_emergence`).

    Steps whose weights duplicate an earlier step's (same digest) are excluded first (they would
    create a fake flat stretch; e.g. pythia-2.8b serves its final weights on 86 of 154 branches),
    and so are steps sharing a shard with another step and steps with a corrupt weight file
    (:meth:`interp.sources.CheckpointSource.searchable_steps`; ``checkpoints.csv`` reports them).

    Args:
        source: an :class:`interp.sources.CheckpointSource`.
        batch: the task prompts, tokenised once for this source's tokenizer.
        threshold: greedy-accuracy threshold (fraction).
        device: where checkpoints are loaded.
        evaluator: reuse an evaluator (and its memoised scores) across calls.
        hold: checkpoints after post that must stay at or above the threshold (the rule).
        progress: a progress line over the evaluated checkpoints (:func:`interp.evaluator.watching`).

    Returns:
        The :class:`EmergencePoint`, with ``excluded_steps`` = {excluded step: a step with the same weights}.

    Raises:
        ValueError: a threshold outside (0, 1], ``hold < 0``, fewer than 2 searchable steps.
        TypeError: ``source`` is not a checkpoint source (a name: ``el.open_source(name)``).

    Source: the point of emergence as the transition between two consecutive checkpoints, located by
    binary search (Baherwani et al. 2026, "Emergent Capabilities Arise Randomly from Learning
    Sparse Attention Patterns"); the ``hold`` is this toolkit's noise rule (module docstring).
    """
    _validate([0, 1], threshold, hold)  # before any checkpoint is listed or loaded
    check_source(source, "find_emergence: source")
    warn_few_prompts(batch, source.model_id)
    evaluator = evaluator or StepEvaluator(source, batch, device=device)
    excluded = source.duplicate_steps()
    steps = source.searchable_steps()  # also without shared shards and corrupt files
    with watching(evaluator, None, progress):
        point = search_emergence(steps, evaluator, threshold=threshold, model_id=source.model_id, hold=hold)
    point.excluded_steps = dict(excluded)
    return point


def full_scan(
    source,
    batch: TaskBatch,
    device: str | None = None,
    evaluator: StepEvaluator | None = None,
    progress: bool = True,
) -> pd.DataFrame:
    """Evaluate every searchable step (the reference the bisection must agree with), the next
    read ahead while one is evaluated; ``progress``: one progress line (answers kept from earlier
    calls are counted there and not computed again: :mod:`interp.core.kept`).

    Returns:
        DataFrame with columns ``step``, ``accuracy``, ``p_answer``, ``order``, sorted by step.
    """
    evaluator = evaluator or StepEvaluator(source, batch, device=device)
    evaluate_steps(evaluator, source.searchable_steps(), progress)  # without shared shards and corrupt files
    return evaluator.table()


def scan_emergence(
    source,
    batch: TaskBatch,
    threshold: float = DEFAULT_THRESHOLD,
    device: str | None = None,
    evaluator: StepEvaluator | None = None,
    hold: int = DEFAULT_HOLD,
    drop_tolerance: float | None = None,
    progress: bool = True,
) -> EmergencePoint:
    """The point of emergence from a full scan: every searchable step evaluated, the rule applied
    to the whole curve (what the main job reports when it scans). ``monotone`` is that of the
    whole curve; ``n_evaluations`` counts the scanned steps; ``search == "scan"``.

    Args: as :func:`find_emergence` (``progress``: one line over the scanned checkpoints);
        ``drop_tolerance`` as :func:`search_emergence`.

    Raises:
        ValueError: a threshold outside (0, 1], ``hold < 0``, fewer than 2 searchable steps.
        TypeError: ``source`` is not a checkpoint source (a name: ``el.open_source(name)``).

    Source: as :func:`find_emergence` (Baherwani et al. 2026; the hold is this toolkit's).
    """
    _validate([0, 1], threshold, hold)
    check_source(source, "scan_emergence: source")
    warn_few_prompts(batch, source.model_id)
    evaluator = evaluator or StepEvaluator(source, batch, device=device)
    excluded = source.duplicate_steps()
    steps = _validate(source.searchable_steps(), threshold, hold)  # also without shared shards and corrupt files
    evaluate_steps(evaluator, steps, progress)
    scores = {s: evaluator.scores[s] for s in steps}
    order = [s for s in evaluator.order if s in scores]
    point = _point(source.model_id, steps, scores, order, threshold, hold, drop_tolerance, "scan")
    point.excluded_steps = dict(excluded)
    if point.note:
        warnings.warn(f"{source.model_id}: {point.note}", RuntimeWarning, stacklevel=2)
    return point


#: Fewest prompts the accuracy rule is trusted on. Greedy accuracy on n prompts moves in steps of
#: 1/n and, near a threshold of 0.5, has a standard error of 0.5/sqrt(n): 0.11 at 20 prompts, 0.5
#: at one (where accuracy is 0 or 1 and any step "crosses"). Below it the search warns.
MIN_ACCURACY_PROMPTS = 20


def warn_few_prompts(batch: TaskBatch | None, model_id: str | None = None) -> None:
    """A ``RuntimeWarning`` when ``batch`` holds fewer than :data:`MIN_ACCURACY_PROMPTS` prompts:
    the point of emergence then rests on a greedy accuracy too coarse to cross a threshold
    meaningfully (``emergence run`` and ``bisect`` print it as a ``warning:`` line). Nothing to
    count when ``batch`` is None (an evaluator of its own scores the steps)."""
    if batch is None:
        return
    n = int(batch.tokens.shape[0])
    if n < MIN_ACCURACY_PROMPTS:
        warnings.warn(
            f"{model_id or 'run'}: the accuracy rule sees {n} prompt(s), fewer than {MIN_ACCURACY_PROMPTS}: greedy "
            f"accuracy moves in steps of {1 / n:.2g} and its standard error near 0.5 is {0.5 / n**0.5:.2g}, so the "
            f"point of emergence (and the jump it patches) may be noise; use {MIN_ACCURACY_PROMPTS} or more prompts",
            RuntimeWarning,
            stacklevel=3,
        )


#: A jump in the metric smaller than this many standard errors of the paired per-prompt
#: difference is flagged (``jump_too_small``): shares of it divide by noise.
MIN_JUMP_SE = 3.0


def jump_noise(values_pre, values_post, min_se: float = MIN_JUMP_SE) -> tuple[float, float, bool]:
    """The pre -> post jump of a per-prompt metric, its standard error, and whether it is too small.

    Args:
        values_pre, values_post: ``Float[Tensor, "batch"]`` (or arrays) of the metric per prompt
            at the pre and post checkpoint, the same prompts in the same order (metric units).
        min_se: the jump must be at least this many standard errors (default 3).

    Returns:
        ``(jump, se, too_small)``: the mean paired difference post - pre, its standard error
        ``std(ddof=1) / sqrt(n)`` (NaN for one prompt), and ``not jump >= min_se * se`` (so a
        single prompt, a NaN or a negative jump is flagged). This is the rule of the interval
        study (``analyses/interval_study.py``) and of :func:`interp.dense.dense_point`.

    Raises:
        ValueError: different numbers of prompts, or none.
    """
    import torch

    pre = torch.as_tensor(values_pre).double().flatten().cpu()
    post = torch.as_tensor(values_post).double().flatten().cpu()
    if pre.shape != post.shape or not pre.numel():
        raise ValueError(
            f"values_pre and values_post must hold the same prompts (>= 1); got {tuple(pre.shape)} "
            f"and {tuple(post.shape)}"
        )
    diff = post - pre
    jump = float(diff.mean())
    se = float(diff.std() / math.sqrt(diff.numel())) if diff.numel() > 1 else float("nan")
    return jump, se, not jump >= min_se * se
