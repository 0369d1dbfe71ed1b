"""Checkpoint loads and wall time of a notebook's repeated questions on the embedded quick suite
(issue 67 item 7): ``el.run_study`` (a scan), the scrubber, readiness, the population, then the
study and readiness again, each call's loads counted at ``CheckpointSource.load``. Every answer is
kept for the process (:mod:`interp.core.kept`), so the scrubber and the second calls should load
nothing and readiness only its ideal-pattern pass. Usage::

    EMERGENCE_LENS_CACHE=<cache with the quick suite> .venv/bin/python benchmarks/bench_second_question.py

One line per call: ``<call> <seconds> s, <loads> loads (load average <1 min>)``; last line the
whole as JSON.
"""

from __future__ import annotations

import json
import os
import time

import emergence_lens as el
from interp.sources.base import CheckpointSource


def main() -> None:
    loads = [0]
    original = CheckpointSource.load

    def counted(self, step, device=None):
        loads[0] += 1
        return original(self, step, device=device)

    CheckpointSource.load = counted  # type: ignore[method-assign]
    out: dict[str, tuple[float, int]] = {}

    def call(name: str, fn):
        before, started = loads[0], time.perf_counter()
        value = fn()
        out[name] = (round(time.perf_counter() - started, 2), loads[0] - before)
        print(f"{name} {out[name][0]} s, {out[name][1]} loads (load average {os.getloadavg()[0]:.1f})", flush=True)
        return value

    folders = el.cached_suite_runs()
    task, config = el.RepetitionTask(), el.StudyConfig(scan=True)
    source = el.LocalSuiteSource(folders[0])
    batch = task.build(source.tokenizer())

    def study():
        return el.run_study([el.LocalSuiteSource(f) for f in folders], task, config, progress=False)

    def ready():
        return el.readiness(source, batch, heads="auto", config=el.StudyConfig(n_boot=200))

    report = call("run_study", study)
    call("scrubber", lambda: el.scrubber(source, task, ranking=report.runs[0], progress=False))
    call("readiness", ready)
    call("population", lambda: el.population([el.LocalSuiteSource(f) for f in folders], task, progress=False))
    call("run_study again", study)
    call("readiness again", ready)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
