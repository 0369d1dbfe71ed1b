"""emergence-lens ``interp``: checkpoint sources, capability tasks, the point of emergence,
attention-pattern patching, head ranking and the report (Baherwani et al. 2026, Pythia part).

Start with :func:`interp.main_job.runner.run_study` (settings: :class:`interp.core.settings.StudyConfig`) or the ``emergence`` command; docs/guide.md.

Rooms, lowest floor first (a module imports only from its own floor or the floors below;
``tests/test_import_graph.py`` checks it): ``interp.core`` (io, provenance, devices, kernel pins,
training state, the metric registry, result objects), ``interp.sources`` (checkpoint sources
behind one door), ``interp.patching`` (the patching engine), ``interp.report`` (figures, page,
display, scrubber, report state), and the top floor ``interp.*`` (tasks, emergence, zoom,
ranking, scores, readiness, forcing, pipeline, study, cli). Modules that moved into the rooms
are imported from where they live now (CHANGELOG.md lists the old paths).
"""

__version__ = "0.1.0"
