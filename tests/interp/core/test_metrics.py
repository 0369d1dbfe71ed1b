"""The metric registry (interp.core.metrics): one definition per metric, read by tasks, the zoom,
patching and the command line."""

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from interp.core import metrics
from interp.core.metrics import METRICS, MetricSpec, answer_logits, get_metric, metric_spec, resolve_metric
from interp.tasks import TaskBatch, score_logits

ROOT = Path(__file__).resolve().parents[3]


def _batch():
    return TaskBatch.from_token_lists(
        [[0, 1], [0, 1], [1, 0]], [2, 3, 2], task="toy", distractors=[[0, 1], [0, 1], [1, 3]]
    )


def _logits():
    torch.manual_seed(0)
    return torch.randn(3, 2, 4)


def test_every_entry_has_its_facts_and_reference_values():
    batch, logits = _batch(), _logits()
    rows = answer_logits(logits, batch)
    assert torch.equal(rows, logits[:, 1])
    logp = torch.log_softmax(rows, -1)[torch.arange(3), batch.answers]
    expected = {
        "p": logp.exp(),
        "logprob": logp,
        "logit-diff": rows[torch.arange(3), batch.answers]
        - torch.stack([rows[0, [0, 1]].max(), rows[1, [0, 1]].max(), rows[2, [1, 3]].max()]),
        "accuracy": (rows.argmax(-1) == batch.answers).float(),
    }
    assert set(expected) <= set(METRICS)
    for name, spec in METRICS.items():
        assert spec.name == name and spec.unit and spec.source and spec.label and spec.description
        if name in expected:
            torch.testing.assert_close(spec(rows, batch), expected[name], atol=1e-6, rtol=0)
    assert {n: METRICS[n].unit for n in expected} == {
        "p": "probability",
        "logprob": "nats",
        "logit-diff": "logits",
        "accuracy": "fraction",
    }


def test_tasks_score_with_the_registry():
    batch, logits = _batch(), _logits()
    score = score_logits(logits, batch)
    rows = answer_logits(logits, batch)
    assert score.p_answer == pytest.approx(float(METRICS["p"](rows, batch).mean()), abs=1e-7)
    assert score.accuracy == pytest.approx(float(METRICS["accuracy"](rows, batch).mean()))


def test_patching_reads_the_same_registry():
    import interp.patching as patching

    assert patching.METRICS is METRICS
    assert resolve_metric("logit-diff") is METRICS["logit-diff"].fn
    with pytest.raises(ValueError, match=r"metric='accuracy'; valid: p, logprob, logit-diff"):
        resolve_metric("accuracy")  # capability only: a 0/1 value has no gradient for the pre-screen
    with pytest.raises(ValueError, match="metric='kl'; valid: p, logprob, logit-diff, accuracy"):
        get_metric("kl")
    custom = metric_spec(lambda logits, batch: logits[:, 0])
    assert custom.unit == "metric units"  # a user's callable never claims a probability


def test_logit_diff_without_distractors_names_the_task():
    rows = _logits()[:, 1]
    named = TaskBatch.from_token_lists([[0, 1]] * 3, [2, 3, 2], task="my-task")
    with pytest.raises(ValueError, match=r"task 'my-task' names no distractor tokens: use 'p' or 'logprob'"):
        METRICS["logit-diff"](rows, named)
    unnamed = TaskBatch.from_token_lists([[0, 1]] * 3, [2, 3, 2])
    with pytest.raises(ValueError, match=r"this batch names no distractor tokens \(its task is unnamed\)"):
        METRICS["logit-diff"](rows, unnamed)


def test_a_metric_added_once_shows_in_the_cli_choices_and_help():
    code = (
        "from interp.core.metrics import MetricSpec, register_metric\n"
        "register_metric(MetricSpec('margin2', lambda l, b: l[:, 0], unit='logits', higher_is_better=True,"
        " source='test', description='toy margin', label='margin'))\n"
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from emergence_lens.cli import app\n"
        "out = CliRunner().invoke(app, ['rank-heads', '--help']).output\n"
        "assert 'margin2 (toy margin; logits)' in ' '.join(out.split()), out\n"
        "from interp.core.settings import StudyConfig\n"
        "assert StudyConfig(metric='margin2').metric == 'margin2'\n"
        "assert 'torch' not in sys.modules, 'the registry imported torch'\n"
        "print('ok')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1", "COLUMNS": "400"},
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


def test_registering_twice_is_refused():
    with pytest.raises(ValueError, match="already registered"):
        metrics.register_metric(MetricSpec("p", lambda l, b: l, "probability", True, "x", "x", "x"))
