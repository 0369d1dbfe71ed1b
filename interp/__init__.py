"""emergence-lens ``interp``: checkpoint sources, capability tasks, the point of emergence,
attention-pattern patching, head ranking and the report (Baherwani et al. 2026, Pythia part).

Start with :func:`interp.pipeline.run_main_job` or the ``emergence`` command; docs/guide.md.
"""

__version__ = "0.1.0"
