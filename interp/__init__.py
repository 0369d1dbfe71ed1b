"""emergence-lens ``interp``: checkpoint sources, capability tasks, the point of emergence,
attention-pattern patching, head ranking and the report (Baherwani et al. 2026, Pythia part).

Start with :func:`interp.main_job.runner.run_study` (settings: :class:`interp.core.settings.StudyConfig`) or the ``emergence`` command; docs/guide.md.

Rooms, lowest floor first (a module imports only from its own floor or the floors below;
``tests/project/test_import_graph.py`` checks it): ``interp.core`` (io, provenance, devices, kernel pins,
training state, the metric registry, result objects), ``interp.sources`` (checkpoint sources
behind one door), ``interp.patching`` (the patching engine), ``interp.report`` (figures, page,
display, scrubber, report state), the top floor ``interp.*`` (tasks, emergence, evaluator, zoom,
dense, ranking, ranking_stats, decomposition, scores, readiness, forcing, scrubbing, the main job's
room ``interp.main_job`` and the command line ``interp.cli``), and ``interp.population`` above it.
Modules that moved into the rooms are imported from where they live now (CHANGELOG.md lists the
old paths).
"""

__version__ = "0.1.0"
