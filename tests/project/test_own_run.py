"""docs/own_run.py, the guide's "Your own training run", runs as a reader would run it (issue 57
item 4): a tiny GPT-2 trained with transformers' Trainer into checkpoint-{N}/ folders, then its point
of emergence and head ranking in a few lines. The test checks what the run shows, computed here
from the checkpoints: the capability at chance at the first checkpoint and solved at the last, the
point of emergence where the scan's first held crossing is, and the logged loss falling from its
plateau to the floor the task allows."""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_own_training_run_script_finds_a_real_point_of_emergence(tmp_path):
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    done = subprocess.run(
        [sys.executable, str(ROOT / "docs" / "own_run.py"), str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    printed = re.search(r"point of emergence: step (\d+) -> (\d+)", done.stdout)
    assert printed, done.stdout[-2000:]

    import emergence_lens as el

    run = tmp_path / "run"
    source = el.open_source(run)
    assert source.layout == "checkpoint-{N}" and source.available_steps() == list(range(20, 301, 20))
    assert not (run / "checkpoint-20" / "tokenizer.json").exists()  # the run folder's tokenizer is read
    batch = el.RepetitionTask(n_prompts=64).build(source.tokenizer())
    evaluator = el.StepEvaluator(source, batch, device="cpu")
    for step in source.available_steps():
        evaluator(step)
    curve = evaluator.table().sort_values("step").reset_index(drop=True)
    accuracy = dict(zip(curve["step"], curve["accuracy"]))
    assert accuracy[20] < 0.3 and accuracy[300] >= 0.95  # chance is 0.1 (ten digits); solved at the end
    steps = list(curve["step"])
    held = [i for i in range(len(steps)) if all(a >= 0.5 for a in curve["accuracy"][i : i + 3])]
    post = steps[held[0]]
    pre = steps[held[0] - 1]
    assert (int(printed.group(1)), int(printed.group(2))) == (pre, post)
    assert accuracy[pre] < 0.5 <= accuracy[post]

    loss = source.loss_curve()
    assert loss["step"].tolist() == list(range(10, 301, 10))
    # ten random digits, then the same ten: 9 of the 19 predicted tokens cannot be known
    floor = 9 * math.log(10) / 19
    assert loss["loss"].iloc[0] > 2.0 and loss.set_index("step").loc[pre - 40, "loss"] > 1.8  # the plateau
    assert floor <= loss["loss"].iloc[-1] <= floor * 1.10  # at the floor by the end
    heads = [line for line in done.stdout.splitlines() if re.match(r"\s*run\s+0\s+\d\s+\d", line)]
    assert len(heads) == 4  # the printed top 4 of the 2 x 4 heads ranked

    # the report draws that loss under the capability (its own panel, y2, the point marked on it)
    config = el.StudyConfig(scan=True, n_boot=50)  # the whole main job: decomposition, head scores, scrubber
    report = el.run_study(
        [str(run)], el.RepetitionTask(n_prompts=64), config, out_dir=tmp_path / "report", progress=False
    )
    assert report.runs[0].training_loss["loss"].tolist() == loss["loss"].tolist()
    on_loss = [t for t in report.capability_figure().data if t.yaxis == "y2"]
    assert [list(t.x) for t in on_loss][1] == [post] and list(on_loss[0].y) == loss["loss"].tolist()
    assert "training loss (nats)" in (tmp_path / "report" / "report.html").read_text()
