"""emergence-lens: one import for users, and the ``emergence`` command.

In Python and Jupyter::

    import emergence_lens as el

    source = el.open_source("embedded/neox-2l-128d-seed2")
    batch = el.RepetitionTask(n_prompts=32).build(source.tokenizer())
    point = el.find_emergence(source, batch)
    config = el.StudyConfig(metric="logit-diff")
    ranking = el.rank_heads_between(source, point.pre_step, point.post_step, batch, config)
    report = el.run_study([source], el.RepetitionTask(), config)

Every name below is imported on first use (PEP 562 ``__getattr__``): ``import emergence_lens``
loads neither torch nor pandas, so ``emergence --help`` stays fast. ``dir(el)`` and
:data:`__all__` list them; :data:`EXPORTS` says where each one lives.

Layers: ``interp`` (checkpoint suites, patching) is the lower layer, ``sweeps`` (run-and-store
machinery) and ``synthetic`` (tasks with a known attention pattern) sit above it, and this
package mounts the command groups of all of them and re-exports the names a notebook needs;
nothing below imports from here.
"""

from __future__ import annotations

import importlib
from typing import Any

#: public name -> module that defines it (the one place to update when a module moves)
EXPORTS: dict[str, str] = {
    # checkpoint sources
    "open_source": "interp.sources.door",
    "open_sources": "interp.sources.door",
    "CheckpointSource": "interp.sources.base",
    "LocalSuiteSource": "interp.sources.local",
    "HubSource": "interp.sources.hub",
    "cached_suite_runs": "interp.sources.embedded",
    "ensure_suite": "interp.sources.embedded",
    "load_suite_spec": "interp.sources.catalogue",
    "SuiteConfig": "interp.sources.catalogue",
    "train_suite": "interp.sources.suites",
    "plan_suite": "interp.sources.suites",
    # hub checkpoints fetched into the hub cache for offline use (`emergence download`)
    "download": "interp.sources.download",
    "plan_download": "interp.sources.download",
    # tasks
    "tasks": "interp",
    "TASKS": "interp.tasks.registry",
    "make_task": "interp.tasks.registry",
    "RepetitionTask": "interp.tasks.repetition",
    "TokenRepetitionTask": "interp.tasks.repetition",
    "TaskBatch": "interp.core.task_batch",
    "CapabilityScore": "interp.tasks.base",
    "evaluate": "interp.tasks.base",
    "PatternCompletionTask": "interp.tasks.pattern",
    "IOITask": "interp.tasks.ioi",
    "TaskFile": "interp.tasks.files",
    "parse_tasks": "interp.tasks.files",
    "task_table": "interp.tasks.files",
    # metrics
    "METRICS": "interp.core.metrics",
    "MetricSpec": "interp.core.metrics",
    "register_metric": "interp.core.metrics",
    "get_metric": "interp.core.metrics",
    "metrics": "interp.core",
    # point of emergence
    "find_emergence": "interp.emergence",
    "full_scan": "interp.emergence",
    "EmergencePoint": "interp.emergence",
    "StepEvaluator": "interp.evaluator",
    "scan_emergence": "interp.emergence",
    "point_from_curve": "interp.emergence",
    "held_crossing": "interp.emergence",
    "zoom": "interp.zoom",
    "dense_point": "interp.dense",
    "zoom_plan": "interp.zoom",
    # patching and ranking
    "patching": "interp",
    "patch_values": "interp.patching.engine",
    "capture_post": "interp.patching.engine",
    "cache_patterns": "interp.patching.engine",
    "rank_heads_between": "interp.ranking",
    "head_ranking": "interp.ranking",
    "HeadRanking": "interp.ranking",
    "RankingOptions": "interp.ranking",
    "rank_neurons": "interp.neuron_ranking",
    "decompose_between": "interp.decomposition",
    "decompose_jump": "interp.decomposition",
    "DecomposeOptions": "interp.decomposition",
    "head_scores_over_checkpoints": "interp.scores",
    "IdealPatterns": "interp.patching.ideal",
    "ideal_pattern": "interp.patching.ideal",
    "readiness": "interp.readiness",
    "ReadinessResult": "interp.readiness",
    "Forcing": "interp.forcing",
    # the main job and its report
    "StudyConfig": "interp.core.settings",
    "DEMO_CONFIG": "interp.core.settings",
    "TIMELINE_CONFIG": "interp.core.settings",
    # the time axis: every head's effect at every checkpoint pair (emergence timeline)
    "head_timeline": "interp.timeline",
    "HeadTimeline": "interp.timeline",
    "run_study": "interp.main_job.runner",
    "analyse_run": "interp.main_job.runner",
    "MainJobReport": "interp.main_job.report",
    "RunAnalysis": "interp.main_job.report",
    # populations of seeds: survival statistics of the point of emergence (docs/population.md)
    "population": "interp.population.collect",
    "population_from_curves": "interp.population.tables",
    "PopulationResult": "interp.population.tables",
    "StatResult": "interp.population.result",
    "forecast": "interp.population.forecast",
    "ForecastResult": "interp.population.forecast",
    "formation_order": "interp.population.formation",
    "formation_summary": "interp.population.formation",
    # display
    "show_attention": "interp.report.display",
    "init_notebook": "interp.report.notebook",
    "export_notebook_html": "interp.report.notebook",
    "run_capability_figure": "interp.report.figures",
    # the scrubber and studies at scale (docs/concepts.md)
    "scrubber": "interp.scrubbing",
    "plan_units": "interp.main_job.units",
    "study_status": "interp.main_job.units",
    # the machine: versions, kernel level, whether it trains the documented suite (`emergence env`)
    "environment_report": "interp.sources.machine",
}

__all__ = sorted(EXPORTS)  # noqa: PLE0605 (a list, built from the one table above)


def __getattr__(name: str) -> Any:
    if name == "__version__":  # the installed distribution's (pyproject.toml), read when asked
        from importlib.metadata import version

        return version("emergence-lens")
    if name not in EXPORTS:
        raise AttributeError(
            f"module 'emergence_lens' has no attribute {name!r}; names it exports: {', '.join(__all__)}"
        )
    module = importlib.import_module(EXPORTS[name])
    value = getattr(module, name) if hasattr(module, name) else importlib.import_module(f"{EXPORTS[name]}.{name}")
    globals()[name] = value  # later look-ups skip __getattr__
    return value


def __dir__() -> list[str]:
    """The exported names and ``EXPORTS`` (not this module's own imports), for tab completion."""
    return sorted(set(__all__) | {"EXPORTS", "__version__"})
