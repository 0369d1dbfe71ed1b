"""The main job in one room: its settings (:mod:`interp.main_job.config`, :class:`StudyConfig`),
its one runner (:mod:`interp.main_job.runner`: ``run`` over (source, task) units with any executor,
``analyse_run`` for one unit), the units' resumable store (:mod:`interp.main_job.units`) and its
results (:mod:`interp.main_job.report`: :class:`RunAnalysis`, :class:`MainJobReport`).

Import from the modules themselves (or ``import emergence_lens as el``): this file imports
nothing, so that :mod:`interp.ranking` can read the settings without an import circle.
"""
