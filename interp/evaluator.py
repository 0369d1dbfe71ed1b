"""The evaluation road: a task scored on checkpoints of one source, each step at most once per
evaluator and each answer at most once per process.

Every command and notebook call that scores checkpoints goes through :class:`StepEvaluator`: the
scan and the bisection (:mod:`interp.emergence`), the main job (:mod:`interp.main_job.runner`),
the population (:mod:`interp.population.collect`), readiness (:mod:`interp.readiness`, which
reads the per-prompt values) and the scrubber (:class:`interp.scrubbing.PatternRecorder`, which
also keeps the patterns and head scores). Every load measures what any of them asks of that step
(the capability with each prompt's values, the model's shape) and keeps it for the process
(:mod:`interp.core.kept`, keyed by weight digest, dtype, device, prompt set and measurement), so a
second call asking the same question loads no checkpoint; :func:`evaluate_steps` drives an
evaluator over a list of steps with one progress line (:mod:`interp.core.progress`) that says how
many answers were kept from earlier calls.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import contextmanager

import pandas as pd

from interp.core.kept import KEPT, batch_digest
from interp.core.progress import progress_bar
from interp.tasks import CapabilityScore, PromptScores, TaskBatch, evaluate_prompts

__all__ = ["KEPT", "StepEvaluator", "evaluate_steps", "kept_note", "model_shape", "watching"]


def model_shape(model) -> dict[str, int]:
    """``n_layers``, ``d_model``, ``n_heads`` and ``d_head`` of a loaded bridge (its ``cfg``)."""
    return {k: int(getattr(model.cfg, k)) for k in ("n_layers", "d_model", "n_heads", "d_head")}


class StepEvaluator:
    """Evaluate a task on checkpoints of one source, each step at most once, and each answer at
    most once per process.

    The task is tokenised once; a step is loaded (through the source's reused bridge) only the
    first time it is asked for, and what it measures is memoised here and in the process's kept
    evaluations (:data:`kept`, :mod:`interp.core.kept`: keyed by the step's weight digest, dtype,
    device, the prompt set and the measurement), so another evaluator (a later call, another
    source object on the same weights) takes it from there without loading the checkpoint;
    :attr:`reused` lists those steps. Each load measures :meth:`measurements` (subclasses add
    theirs): the capability with each prompt's values (:func:`interp.tasks.evaluate_prompts`;
    :attr:`scores`, :attr:`prompt_scores`) and the model's shape (:attr:`shapes`,
    :func:`model_shape`).

    Args:
        source: an :class:`interp.sources.CheckpointSource`.
        batch: the task's prompts tokenised for ``source`` (``TaskBatch``).
        device: where checkpoints are loaded.
        progress: called as ``progress(step, kept)`` after each newly scored step (``kept``:
            taken from the kept evaluations); the calls' progress bars hang here.
    """

    #: The process's kept evaluations (``StepEvaluator.kept.clear()`` forgets them).
    kept = KEPT

    def __init__(self, source, batch: TaskBatch, device: str | None = None, progress=None):
        self.source = source
        self.batch = batch
        self.device = device
        self.scores: dict[int, CapabilityScore] = {}
        self.prompt_scores: dict[int, PromptScores] = {}
        self.shapes: dict[int, dict[str, int]] = {}
        self.order: list[int] = []
        self.reused: list[int] = []
        self.progress = progress
        self._batch_key: str | None = None

    def measurements(self) -> list[str]:
        """What one load of a step measures and keeps (names of :mod:`interp.core.kept`)."""
        return ["capability", "shape"]

    def kept_key(self, step: int, what: str = "capability") -> tuple | None:
        """The key of ``what`` on ``step`` in :data:`kept` (None: the source gives no digest)."""
        if what == "shape":  # the weights' alone, whatever the prompts
            return KEPT.key(self.source, step, "", what, self.device)
        if self._batch_key is None:
            self._batch_key = batch_digest(self.batch)
        return KEPT.key(self.source, step, self._batch_key, what, self.device)

    def _done(self, step: int, reused: bool) -> None:
        self.order.append(step)
        if reused:
            self.reused.append(step)
        if self.progress is not None:
            self.progress(step, reused)

    def __call__(self, step: int, then: int | None = None) -> CapabilityScore:
        """The score of ``step``; ``then``: the step asked for next, read ahead while this one is
        evaluated (:meth:`interp.sources.CheckpointSource.prefetch`, when the source swaps weights)."""
        if step not in self.scores:
            keys = {what: self.kept_key(step, what) for what in self.measurements()}
            values = {what: KEPT.get(key) for what, key in keys.items()}
            reused = all(value is not None for value in values.values())
            if not reused:  # one load fills in whatever the process has not kept
                checkpoint = self.source.load(step, device=self.device)
                if then is not None and then not in self.scores and hasattr(self.source, "prefetch"):
                    self.source.prefetch(then)
                self._measure(step, checkpoint.model, values)
                for what, value in values.items():
                    KEPT.put(keys[what], value)
            self._record(step, values)
            self._done(step, reused)
        return self.scores[step]

    def _measure(self, step: int, model, values: dict) -> None:
        """Fill in the None entries of ``values`` (:meth:`measurements`) from ``step``'s loaded ``model``."""
        if values["capability"] is None:
            values["capability"] = evaluate_prompts(model, self.batch)
        if values["shape"] is None:
            values["shape"] = model_shape(model)

    def _record(self, step: int, values: dict) -> None:
        """Keep ``step``'s measured ``values`` on this evaluator."""
        self.prompt_scores[step] = values["capability"]
        self.scores[step] = values["capability"].score
        self.shapes[step] = values["shape"]

    def table(self) -> pd.DataFrame:
        """Evaluated steps as a DataFrame (step, accuracy, p_answer, order), sorted by step."""
        rows = [
            {"step": s, "accuracy": self.scores[s].accuracy, "p_answer": self.scores[s].p_answer, "order": i + 1}
            for i, s in enumerate(self.order)
        ]
        return (
            pd.DataFrame(rows, columns=["step", "accuracy", "p_answer", "order"])
            .sort_values("step")
            .reset_index(drop=True)
        )


def kept_note(evaluator: StepEvaluator) -> str:
    """``"12 kept"`` (steps taken from the process's kept evaluations), or ``""`` when none was."""
    return f"{len(evaluator.reused)} kept" if evaluator.reused else ""


@contextmanager
def watching(evaluator: StepEvaluator, total: int | None, progress: bool = True, desc: str | None = None):
    """A progress line over the steps ``evaluator`` scores inside the ``with`` block (``total``:
    how many are expected, None when a search decides). The line counts checkpoints and ends with
    how many answers came from the process's kept evaluations (``"64 kept"``: nothing was loaded
    for them); ``progress=False`` draws nothing. Yields the ``tqdm`` bar."""
    label = desc if desc is not None else str(getattr(evaluator.source, "model_id", "run"))
    bar = progress_bar(total, label, enabled=progress)
    previous = evaluator.progress

    def listen(step: int, reused: bool) -> None:
        note = kept_note(evaluator)
        if note:
            bar.set_postfix_str(note, refresh=False)
        bar.update(1)  # redraws (the note with it) at most twice a second in a notebook
        if previous is not None:
            previous(step, reused)

    evaluator.progress = listen
    try:
        yield bar
    finally:
        evaluator.progress = previous
        bar.close()


def evaluate_steps(evaluator: StepEvaluator, steps: Sequence[int], progress: bool = True, desc: str | None = None):
    """Score every step of ``steps`` with ``evaluator``, in order, the next step read ahead while
    this one is evaluated, with one progress line (:func:`watching`) over them.

    Args:
        evaluator: the run's :class:`StepEvaluator`.
        steps: training steps (each must be available in the evaluator's source).
        progress: draw the progress line.
        desc: its label (default: the source's ``model_id``).
    """
    steps = list(steps)
    with watching(evaluator, sum(s not in evaluator.scores for s in steps), progress, desc):
        for step, then in zip(steps, [*steps[1:], None]):
            evaluator(step, then=then)
