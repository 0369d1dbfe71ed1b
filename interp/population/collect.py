"""The capability table of a population evaluated on checkpoint sources, and its statistics.

Each source (one run) is evaluated on the task at every searchable checkpoint by the road every
command takes (:class:`interp.emergence.StepEvaluator`, as ``emergence curve`` and
:func:`interp.emergence.full_scan` do: the task tokenised once per source, each step loaded once,
the next read ahead); the run's arm is its model shape (layers, width, heads) unless given, its
seed the ``-seed{N}`` of its id (:func:`interp.sources.catalogue.model_and_seed`), and its two seed
parts (``init_seed``, ``data_order_seed``) those :func:`interp.sources.catalogue.seed_parts` reads
from the id. Runs that vary one part of the seed alone (PolyPythia's ``-data-seed{N}`` and
``-weight-seed{N}``) form their own arm, ``"<shape> (data order varied)"`` or ``"<shape>
(initialisation varied)"``, so a population over hub runs groups them by which seed varies. The
table then goes to :func:`interp.population.tables.population_from_curves`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd

from interp.core.objects import check_argument
from interp.core.settings import StudyConfig
from interp.evaluator import StepEvaluator, evaluate_steps
from interp.population.tables import CURVE_COLUMNS, SEED_COLUMNS, PopulationResult, population_from_curves


def arm_name(n_layers: int, d_model: int, n_heads: int) -> str:
    """The arm of a model shape: ``"L2-d64-h4"`` (layers, d_model, heads)."""
    return f"L{n_layers}-d{d_model}-h{n_heads}"


def seed_arm(shape_arm: str, varies: str) -> str:
    """The arm of a run by which part of its seed varies (:data:`interp.sources.catalogue.SEED_VARIES`):
    ``shape_arm`` where both do, else ``"L12-d768-h12 (data order varied)"`` /
    ``"... (initialisation varied)"``."""
    return shape_arm if varies == "both" else f"{shape_arm} ({varies} varied)"


def source_curve(
    source,
    batch,
    budget: int | None = None,
    arm: str | None = None,
    config: StudyConfig = StudyConfig(),
    progress: bool = True,
):
    """One source's rows of the capability table (:data:`interp.population.tables.CURVE_COLUMNS`
    and :data:`~interp.population.tables.SEED_COLUMNS`): every searchable step evaluated (greedy
    accuracy and p(answer) on ``batch``).

    Args:
        source: a :class:`interp.sources.CheckpointSource`.
        batch: the task's prompts tokenised for this source (``TaskBatch``).
        budget: the run's step budget (steps; default: its last searchable step).
        arm: the run's arm (default: :func:`arm_name` of its shape, :func:`seed_arm` where its id
            varies one part of the seed alone).
        config: the study settings (:class:`interp.core.settings.StudyConfig`); its ``device``
            is where checkpoints are loaded (None: cuda if usable, else cpu).
        progress: one progress line over the checkpoints (kept scores are counted, not recomputed).

    Returns:
        A DataFrame with :data:`CURVE_COLUMNS`, one row per searchable step.

    Raises:
        TypeError: ``config`` is not a ``StudyConfig``.
    """
    from interp.sources.catalogue import model_and_seed, seed_parts

    check_argument(isinstance(config, StudyConfig), config, "source_curve: config", "a StudyConfig")
    device = config.device

    evaluator = StepEvaluator(source, batch, device=device)  # each load keeps the model's shape too
    steps = source.searchable_steps()  # without duplicate weights, shared shards and corrupt files
    evaluate_steps(evaluator, steps, progress)
    table = evaluator.table()
    shape = evaluator.shapes[steps[-1]]
    _, seed = model_and_seed(source.model_id)
    _, init_seed, data_order_seed, varies = seed_parts(source.model_id)
    table = table.assign(
        arm=arm or seed_arm(arm_name(shape["n_layers"], shape["d_model"], shape["n_heads"]), varies),
        run=str(source.model_id),
        seed=seed,
        **shape,
        budget=int(budget if budget is not None else max(steps)),
        init_seed=init_seed,
        data_order_seed=data_order_seed,
    )
    return table[CURVE_COLUMNS + SEED_COLUMNS]


def population(
    sources: Sequence | str | Path,
    task="repetition",
    config: StudyConfig = StudyConfig(),
    budget: int | None = None,
    arms: Mapping[str, str] | None = None,
    reference: str | None = None,
    n_prompts: int = 64,
    length: int = 10,
    title: str = "emergence over seeds",
    progress: bool = True,
) -> PopulationResult:
    """Evaluate a task on every checkpoint of every source and return the population's survival
    statistics (:func:`interp.population.tables.population_from_curves`).

    Args:
        sources: checkpoint sources (:class:`interp.sources.CheckpointSource` objects, or names
            and folders as :func:`interp.sources.open_sources` takes them: a local suite, an
            embedded suite name, a hub id), or one of them.
        task: a task name (``emergence list-tasks``) or a task object (``el.RepetitionTask(...)``).
        config: the study settings (:class:`interp.core.settings.StudyConfig`): ``threshold``
            (greedy-accuracy fraction of the point of emergence), ``hold`` (checkpoints after post
            that must stay at or above it) and ``device`` (where checkpoints are loaded; None: cuda
            if usable, else cpu). Every checkpoint is evaluated (a full scan, whatever ``scan``).
        budget: the step budget of every run (steps, >= 0); default: each run's last searchable step.
        arms: {run id: arm} for runs whose arm is not their shape (default: ``L<layers>-d<width>-h<heads>``).
        reference: the arm of the pairwise log-rank tests (default: the first by shape).
        n_prompts, length: the task's size when ``task`` is a name.
        title: the page's title.
        progress: one progress line per run over its checkpoints (standard output in a
            notebook); checkpoints this process already scored on the same prompts are taken
            from its kept evaluations (:mod:`interp.core.kept`) and counted as kept.

    Returns:
        The :class:`PopulationResult`; its ``curves`` is the evaluated capability table.

    Raises:
        TypeError: ``config`` is not a ``StudyConfig``.
        ValueError: a bad budget, an unknown task or source name, no source; all before any
            checkpoint is loaded (bad settings are refused when the ``StudyConfig`` is made).

    Source: the point of emergence of Baherwani et al. 2026 evaluated at every checkpoint (a full
    scan) with the hold rule; the statistics of :mod:`interp.population.survival`.
    """
    check_argument(isinstance(config, StudyConfig), config, "population: config", "a StudyConfig")
    if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int) or budget < 0):
        raise ValueError(f"budget={budget!r}: must be an integer >= 0 (optimizer steps)")
    if isinstance(task, str):
        from interp.tasks import make_task

        task = make_task(task, n_prompts=n_prompts, length=length, seed=0)
    items = [sources] if isinstance(sources, (str, Path)) or hasattr(sources, "searchable_steps") else list(sources)
    if not items:
        raise ValueError("no sources: give checkpoint sources or their names (e.g. 'embedded-quick', a suite folder)")
    names = [s for s in items if isinstance(s, (str, Path))]
    opened: list = []
    if names:
        from interp.sources.door import check_source_name, open_sources

        for name in names:
            check_source_name(str(name))
        opened = open_sources([str(n) for n in names])
    objects = [s for s in items if not isinstance(s, (str, Path))]
    frames = []
    try:
        for source in [*objects, *opened]:
            batch = task.build(source.tokenizer())
            arm = (arms or {}).get(str(source.model_id))
            frames.append(source_curve(source, batch, budget=budget, arm=arm, config=config, progress=progress))
    finally:
        for source in opened:
            source.close()
    curves = pd.concat(frames, ignore_index=True)
    return population_from_curves(curves, config, reference=reference, title=title)
