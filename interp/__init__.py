"""emergence-lens ``interp``: checkpoint sources, capability tasks, the point of emergence,
attention-pattern patching, head ranking and the report (Baherwani et al. 2026, Pythia part).

Start with :func:`interp.pipeline.run_main_job` or the ``emergence`` command; docs/guide.md.

Rooms, lowest floor first (a module imports only from its own floor or the floors below;
``tests/test_import_graph.py`` checks it): ``interp.core`` (io, provenance, devices, kernel pins,
training state, the metric registry, result objects), ``interp.sources`` (checkpoint sources
behind one door), ``interp.patching`` (the patching engine), ``interp.report`` (figures, page,
display, scrubber, report state), and the top floor ``interp.*`` (tasks, emergence, zoom,
ranking, scores, readiness, forcing, pipeline, study, cli).

Old module paths (before the rooms) stay importable: :data:`MOVED` maps each to its new module,
and importing the old name returns the new module itself (``interp.io is interp.core.io``), so
code that monkeypatches an old path patches the real module.
"""

import importlib
import importlib.abc
import importlib.util
import sys

__version__ = "0.1.0"

#: Old module path -> the module that holds it now (the one list of moved modules).
MOVED: dict[str, str] = {
    "interp.io": "interp.core.io",
    "interp.provenance": "interp.core.provenance",
    "interp.devices": "interp.core.devices",
    "interp.kernel_pins": "interp.core.kernel_pins",
    "interp.training_state": "interp.core.training_state",
    "interp.metrics": "interp.core.metrics",
    "interp.objects": "interp.core.objects",
    "interp.checkpoints": "interp.sources",
    "interp.catalogue": "interp.sources.catalogue",
    "interp.families": "interp.sources.families",
    "interp.checkpoint_integrity": "interp.sources.checkpoint_integrity",
    "interp.embedded": "interp.sources.embedded",
    "interp.weight_swap": "interp.sources.weight_swap",
    "interp.display": "interp.report.display",
    "interp.visualisation": "interp.report.page",
    "interp.scrubber": "interp.scrubbing",
    "interp.report_state": "interp.report.report_state",
}


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Import hook: an old path in :data:`MOVED` imports the new module under both names."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname in MOVED:
            return importlib.util.spec_from_loader(fullname, self)
        return None

    def create_module(self, spec):
        return importlib.import_module(MOVED[spec.name])

    def exec_module(self, module):
        pass


if not any(isinstance(finder, _MovedModules) for finder in sys.meta_path):
    sys.meta_path.insert(0, _MovedModules())
