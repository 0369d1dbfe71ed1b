"""Checkpoint files that are not what their label says (issue 20, items 6 and 7).

* A two-shard hub cache (built here in the hub's own layout) where step 1000's first shard is
  the final step's and its second is its own: step 1000 is ``partial-duplicate``, the shared
  file and its tensors are named, and the search leaves it out.
* A local suite with one truncated safetensors file and one whose header was overwritten: each
  step is ``corrupt``, one line names the step and the file, the search goes on without them,
  and loading it or naming it on the command line is one line, never a traceback.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import TINY_REPO, add_hub_revision, save_tiny_neox
from interp import sources as checkpoints
from interp.sources import CorruptCheckpointError, HubSource, LocalSuiteSource
from interp.sources.checkpoint_integrity import safetensors_problem

SHARD_1, SHARD_2 = "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"


def save_two_shards(folder: Path, seed: int) -> Path:
    """A tiny GPT-NeoX saved in two safetensors shards with an index."""
    import torch
    from transformers import GPTNeoXForCausalLM

    from interp.sources.catalogue import neox_config

    torch.manual_seed(seed)
    GPTNeoXForCausalLM(neox_config(32, 2, 4, 256, 64)).save_pretrained(folder, max_shard_size="100KB")
    assert (folder / SHARD_1).is_file() and (folder / SHARD_2).is_file()
    return folder


@pytest.fixture
def shared_shard_cache(tmp_path, byte_tokenizer_dir):
    """Steps 0, 1000, 2000 (final) in two shards; step 1000's first shard is step 2000's."""
    models = {step: save_two_shards(tmp_path / f"m{step}", seed=40 + i) for i, step in enumerate((0, 1000, 2000))}
    shutil.copyfile(models[2000] / SHARD_1, models[1000] / SHARD_1)
    tokenizer = {p.name: p for p in byte_tokenizer_dir.iterdir()}
    cache = tmp_path / "cache"
    for step, folder in models.items():
        add_hub_revision(cache, TINY_REPO, f"step{step}", {**{p.name: p for p in folder.iterdir()}, **tokenizer})
    return cache, models


def test_a_shard_shared_with_the_final_step_is_a_partial_duplicate(shared_shard_cache, hub_offline):
    cache, models = shared_shard_cache
    source = HubSource(TINY_REPO, cache_dir=cache, steps=[0, 1000, 2000])
    assert source.duplicate_steps() == {}  # the whole digests all differ: the old check saw nothing
    assert len({source.digest(s) for s in (0, 1000, 2000)}) == 3
    assert source.file_digests(1000)[SHARD_1] == source.file_digests(2000)[SHARD_1]
    # Which label is right is unknown: both steps sharing the shard are left out.
    assert source.partial_duplicates() == {1000: ([2000], [SHARD_1]), 2000: ([1000], [SHARD_1])}
    assert source.searchable_steps() == [0]
    # main holds the final model: the final step is known right and stays; step 1000 is left out.
    add_hub_revision(cache, TINY_REPO, "main", {p.name: p for p in models[2000].iterdir()})
    source = HubSource(TINY_REPO, cache_dir=cache, steps=[0, 1000, 2000])
    assert source.partial_duplicates() == {1000: ([2000], [SHARD_1])}
    assert source.searchable_steps() == [0, 2000]
    table = checkpoints.checkpoint_table(source)
    assert table["status"].tolist() == ["searchable", "partial-duplicate", "searchable"]
    index = json.loads((models[2000] / "model.safetensors.index.json").read_text())["weight_map"]
    in_shard = sorted(t for t, f in index.items() if f == SHARD_1)
    assert source.shared_tensors(1000, [SHARD_1]) == in_shard and len(in_shard) >= 2
    detail = table["detail"][1]
    assert detail.startswith(f"shares {SHARD_1} ({len(in_shard)} tensors: {in_shard[0]}, ") and detail.endswith(
        "with step 2000"
    )
    assert table["same_weights_as"][1] == "2000"
    assert (
        checkpoints.hazard_lines(table, "run")[0]
        == f"run: step 1000 partial-duplicate: {detail}; left out of the search"
    )


@pytest.fixture
def corrupt_suite(tmp_path, byte_tokenizer_dir):
    """Steps 0, 1000, 2000, 3000: 1000's weights cut to half their size, 2000's header length overwritten."""
    root = tmp_path / "suite"
    shutil.copytree(byte_tokenizer_dir, root / "tokenizer")
    for seed, step in enumerate([0, 1000, 2000, 3000]):
        save_tiny_neox(root / f"step{step}", seed=30 + seed)
    cut = root / "step1000" / "model.safetensors"
    data = cut.read_bytes()
    cut.write_bytes(data[: len(data) // 2])
    overwritten = root / "step2000" / "model.safetensors"
    data = bytearray(overwritten.read_bytes())
    data[:8] = (10**9).to_bytes(8, "little")
    overwritten.write_bytes(bytes(data))
    return root


def test_truncated_and_overwritten_files_are_corrupt_and_left_out(corrupt_suite):
    from interp.emergence import find_emergence
    from interp.tasks import RepetitionTask

    whole = corrupt_suite / "step0" / "model.safetensors"
    assert safetensors_problem(whole) is None
    cut = corrupt_suite / "step1000" / "model.safetensors"
    size = cut.stat().st_size
    n = int.from_bytes(cut.read_bytes()[:8], "little")
    problem = safetensors_problem(cut)
    assert problem.startswith("truncated: the tensors need ") and problem.endswith(f"the file holds {size - 8 - n}")
    assert safetensors_problem(corrupt_suite / "step2000" / "model.safetensors").startswith(
        "header overwritten or file truncated: the header length reads 1000000000 bytes"
    )
    source = LocalSuiteSource(corrupt_suite)
    corrupt = source.corrupt_steps()
    assert sorted(corrupt) == [1000, 2000] and corrupt[1000] == f"model.safetensors: {problem}"
    assert source.searchable_steps() == [0, 3000]
    table = checkpoints.checkpoint_table(source)
    assert table["status"].tolist() == ["searchable", "corrupt", "corrupt", "searchable"]
    lines = checkpoints.hazard_lines(table, "suite")
    assert lines == [
        f"suite: step 1000 corrupt: model.safetensors: {problem}; left out of the search",
        f"suite: step 2000 corrupt: {corrupt[2000]}; left out of the search",
    ]
    with pytest.raises(CorruptCheckpointError) as error:
        source.load(1000, device="cpu")
    assert "\n" not in str(error.value) and "step 1000: model.safetensors is corrupt (truncated" in str(error.value)
    # The search goes on over the whole steps only.
    batch = RepetitionTask(n_prompts=4, length=6).build(source.tokenizer())
    point = find_emergence(source, batch, device="cpu")
    assert set(point.evaluations["step"]) <= {0, 3000} and len(point.evaluations)


@pytest.mark.slow
def test_corrupt_steps_on_the_command_line(corrupt_suite, tmp_path):
    from emergence_lens.cli import app

    runner = CliRunner(mix_stderr=False) if "mix_stderr" in CliRunner.__init__.__code__.co_varnames else CliRunner()
    result = runner.invoke(app, ["bisect", str(corrupt_suite), "--n-prompts", "4", "--out", str(tmp_path / "b")])
    assert result.exit_code == 0, result.output
    assert "step 1000 corrupt: model.safetensors: truncated" in result.output and "Traceback" not in result.output
    table = __import__("pandas").read_csv(tmp_path / "b" / "checkpoints.csv")
    assert table["status"].tolist() == ["searchable", "corrupt", "corrupt", "searchable"]
    refused = runner.invoke(app, ["rank-heads", str(corrupt_suite), "--pre", "1000", "--post", "3000"])
    lines = [line for line in refused.output.strip().splitlines() if line.strip()]
    assert refused.exit_code == 2 and len(lines) == 1, refused.output
    assert "step 1000: model.safetensors: truncated" in lines[0]
