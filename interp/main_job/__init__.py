"""The main job in one room: its one runner (:mod:`interp.main_job.runner`: ``run`` over
(source, task) units with any executor, ``analyse_run`` for one unit), the units' resumable store
(:mod:`interp.main_job.units`) and its results (:mod:`interp.main_job.report`:
:class:`RunAnalysis`, :class:`MainJobReport`). Its settings, :class:`interp.core.settings.StudyConfig`,
sit on the ground floor, below every analysis that reads them.

Import from the modules themselves (or ``import emergence_lens as el``).
"""
