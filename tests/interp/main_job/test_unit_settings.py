"""State that remembers every setting (issue 68, item 6): each unit of a study stores the whole
settings object it was computed with beside its report state, and reads it back."""

from __future__ import annotations

import dataclasses
import json
import shutil

from conftest import save_tiny_neox
from interp.core.settings import StudyConfig
from interp.main_job.runner import run_study
from interp.main_job.units import plan_units, unit_settings
from interp.tasks import RepetitionTask

TASK = RepetitionTask(n_prompts=8, length=6, seed=0)


def test_a_unit_stores_the_whole_settings_object(tmp_path, byte_tokenizer_dir):
    root = tmp_path / "run"
    shutil.copytree(byte_tokenizer_dir, root / "tokenizer")
    for step in range(3):
        save_tiny_neox(root / f"step{step}", seed=80 + step)
    config = StudyConfig(
        scan=True, threshold=0.5, hold=3, n_boot=0, ks=(1, 2), scores=False, scrub=False, decompose=False
    )
    assert config.hold != dataclasses.fields(StudyConfig)[1].default  # not the default hold
    out = tmp_path / "out"
    run_study([str(root)], [TASK], config, out_dir=out, progress=False)
    (unit,) = plan_units([str(root)], [TASK])
    stored = json.loads((out / "units" / "state" / unit.unit_id / "report.json").read_text())
    assert stored["hold"] == 3 and stored["threshold"] == 0.5
    assert stored["settings"] == config.as_dict()
    assert unit_settings(out / "units", unit.unit_id) == config
