"""Prompts longer than the model's context are refused before anything loads (issue 41, item 2;
the kind of TransformerLens #842, #1006).

The context comes from the source's ``config.json`` (local suites and hub caches alike) and
travels on the tokenizer the source hands out, so every task checks it where it builds its batch
(:meth:`interp.tasks.CapabilityTask.finish`); the command line's pre-check does the same for
embedded names from the suite's ``n_ctx``. Before the fix a 300-byte row on a 128-token model
was scored with answer positions up to 299.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from interp.core.task_batch import TaskError
from interp.sources import HubSource, LocalSuiteSource
from interp.tasks import RepetitionTask, TaskFile, TaskFileError


def write_rows(path, lengths):
    rows = [{"id": f"r{n}", "prompt": "a" * n, "answer": "b"} for n in lengths]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


def test_a_local_suite_refuses_prompts_longer_than_its_context(tiny_local_suite, tmp_path):
    source = LocalSuiteSource(tiny_local_suite)  # save_tiny_neox: n_ctx 64
    assert source.context_length() == (64, "max_position_embeddings in config.json")
    tokenizer = source.tokenizer()
    path = write_rows(tmp_path / "long.jsonl", [10, 64, 65, 300])
    with pytest.raises(TaskFileError) as error:
        TaskFile(path).build(tokenizer)
    assert error.value.lines == [
        (
            f"long.jsonl: row r65: the prompt is 65 tokens, longer than the model's context of 64 tokens "
            f"({source.model_id}: max_position_embeddings in config.json); shorten it or drop it"
        ),
        (
            f"long.jsonl: row r300: the prompt is 300 tokens, longer than the model's context of 64 tokens "
            f"({source.model_id}: max_position_embeddings in config.json); shorten it or drop it"
        ),
    ]
    ok = TaskFile(write_rows(tmp_path / "ok.jsonl", [10, 64])).build(tokenizer)
    assert int(ok.answer_pos.max()) == 63
    # Built-in tasks go the same road: 2 * 40 - 1 = 79 tokens > 64.
    with pytest.raises(TaskError, match=r"^repetition: prompt 0: the prompt is 79 tokens, longer than the model's"):
        RepetitionTask(n_prompts=2, length=40).build(tokenizer)
    assert RepetitionTask(n_prompts=2, length=32).build(tokenizer).tokens.shape == (2, 63)


def test_a_hub_source_reads_its_context_from_the_cached_config(tiny_hub_cache, hub_offline, tmp_path):
    source = HubSource(tiny_hub_cache["repo_id"], cache_dir=tiny_hub_cache["cache_dir"], steps=[0, 1, 2])
    assert source.context_length() == (64, "max_position_embeddings in config.json")
    with pytest.raises(TaskFileError, match=r"row r65: the prompt is 65 tokens, .* context of 64 tokens"):
        TaskFile(write_rows(tmp_path / "long.jsonl", [65])).build(source.tokenizer())


def test_the_command_line_refuses_long_rows_before_any_model_loads(monkeypatch, tmp_path):
    from emergence_lens.cli import app
    from interp import sources as checkpoints

    def no_load(*args, **kwargs):
        raise AssertionError("a checkpoint was loaded")

    monkeypatch.setattr(checkpoints.CheckpointSource, "load", no_load)
    monkeypatch.setattr("interp.sources.embedded.ensure_suite", no_load)
    path = write_rows(tmp_path / "long.jsonl", [20, 129, 300])
    result = CliRunner().invoke(app, ["curve", "embedded-quick/neox-2l-64d-seed1", "--task-file", str(path)])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert lines == [
        (
            "error: emergence curve: long.jsonl: row r129: the prompt is 129 tokens, longer than the model's "
            "context of 128 tokens (embedded-quick/neox-2l-64d-seed1: n_ctx of the embedded suite); "
            "shorten it or drop it"
        ),
        (
            "error: emergence curve: long.jsonl: row r300: the prompt is 300 tokens, longer than the model's "
            "context of 128 tokens (embedded-quick/neox-2l-64d-seed1: n_ctx of the embedded suite); "
            "shorten it or drop it"
        ),
    ]
