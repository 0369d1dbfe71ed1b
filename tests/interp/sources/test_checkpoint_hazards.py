"""Checkpoints that lie, round three (issue 68, items 1, 2 and 5): a step whose weights are not
finite, shards that disagree with their index, two weight sets in one folder, and steps that ask
for custom code. Each is its own status in ``checkpoints.csv``, left out of the search with one
hazard line, and refused in one line when asked for by step."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from conftest import save_tiny_neox
from interp import sources as checkpoints
from interp.cli.options import check_steps_available
from interp.sources import CheckpointError, CorruptCheckpointError, LocalSuiteSource

SHARD_1, SHARD_2 = "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"
INDEX = "model.safetensors.index.json"


def one_line(error: pytest.ExceptionInfo) -> str:
    text = str(error.value)
    assert "\n" not in text, text
    return text


def suite(tmp_path: Path, byte_tokenizer_dir: Path, steps=(0, 1000, 2000, 3000)) -> Path:
    root = tmp_path / "suite"
    shutil.copytree(byte_tokenizer_dir, root / "tokenizer")
    for seed, step in enumerate(steps):
        save_tiny_neox(root / f"step{step}", seed=60 + seed)
    return root


def rewrite(path: Path, change) -> list[str]:
    """Load a safetensors file, let ``change(name, tensor)`` return the new tensor, save it back;
    returns the names of the tensors changed."""
    tensors = load_file(path)
    changed = []
    for name, tensor in tensors.items():
        new = change(name, tensor)
        if new is not tensor:
            tensors[name] = new
            changed.append(name)
    save_file(tensors, path, metadata={"format": "pt"})
    return sorted(changed)


# ----------------------------------------------------------------------------- item 1: not finite


@pytest.fixture
def diverged_suite(tmp_path, byte_tokenizer_dir):
    """Step 1000's weights all NaN; step 2000 holds one inf in one tensor."""
    root = suite(tmp_path, byte_tokenizer_dir)
    nan = rewrite(root / "step1000" / "model.safetensors", lambda n, t: torch.full_like(t, float("nan")))
    one = "gpt_neox.layers.1.mlp.dense_4h_to_h.weight"

    def one_inf(name, tensor):
        if name != one:
            return tensor
        tensor = tensor.clone()
        tensor.view(-1)[7] = float("inf")
        return tensor

    assert rewrite(root / "step2000" / "model.safetensors", one_inf) == [one]
    return root, nan, one


def test_non_finite_weights_make_a_step_corrupt(diverged_suite, monkeypatch):
    from interp.emergence import find_emergence
    from interp.sources import checkpoint_integrity
    from interp.tasks import RepetitionTask

    root, nan, one = diverged_suite
    scans = []
    real = checkpoint_integrity.scan_file
    monkeypatch.setattr(
        checkpoint_integrity, "scan_file", lambda path: scans.append(Path(path).parent.name) or real(path)
    )
    source = LocalSuiteSource(root)
    table = checkpoints.checkpoint_table(source)
    # One read per file: the digest and the finiteness check come from the same pass.
    assert sorted(scans) == ["step0", "step1000", "step2000", "step3000"]
    assert table["status"].tolist() == ["searchable", "corrupt", "corrupt", "searchable"]
    details = table.set_index("step")["detail"]
    assert details[1000] == (
        f"model.safetensors: weights not finite: {len(nan)} tensors, e.g. {', '.join(sorted(nan)[:3])}"
    )
    assert details[2000] == f"model.safetensors: weights not finite: 1 tensor, e.g. {one}"
    # The digests are those of the files' bytes, as before.
    from interp.sources.loading import _sha256_of_file

    assert source.digest(2000) == _sha256_of_file(root / "step2000" / "model.safetensors")
    assert source.searchable_steps() == [0, 3000]
    lines = checkpoints.hazard_lines(table, "run")
    assert f"run: step 2000 corrupt: {details[2000]}; left out of the search" in lines
    with pytest.raises(CheckpointError) as refused:  # --steps 1000
        check_steps_available(source, [1000])
    assert "step 1000: model.safetensors: weights not finite" in one_line(refused)
    with pytest.raises(CorruptCheckpointError) as error:
        LocalSuiteSource(root).load(2000, device="cpu")
    assert f"step 2000: model.safetensors weights not finite: 1 tensor, e.g. {one}" in one_line(error)
    batch = RepetitionTask(n_prompts=4, length=6).build(source.tokenizer())
    point = find_emergence(source, batch, device="cpu", progress=False)
    assert set(point.evaluations["step"]) <= {0, 3000}


def test_a_hub_step_not_finite_is_refused_when_it_loads(tmp_path, byte_tokenizer_dir, hub_offline):
    """A hub step's digest is its blob's name (its file is never read before it loads): its
    values are checked in memory when it loads, and it is corrupt from then on."""
    from conftest import TINY_REPO, add_hub_revision
    from interp.sources import HubSource

    cache = tmp_path / "cache"
    tokenizer = {p.name: p for p in byte_tokenizer_dir.iterdir()}
    for i, step in enumerate((0, 1000)):
        folder = save_tiny_neox(tmp_path / f"m{step}", seed=50 + i)
        if step == 1000:
            rewrite(folder / "model.safetensors", lambda n, t: torch.full_like(t, float("nan")))
        add_hub_revision(cache, TINY_REPO, f"step{step}", {**{p.name: p for p in folder.iterdir()}, **tokenizer})
    source = HubSource(TINY_REPO, cache_dir=cache, steps=[0, 1000])
    assert source.corrupt_reason(1000) is None  # not read yet: not known
    for swap in (False, True):  # a fresh boot, and a weight swap into the resident bridge
        source = HubSource(TINY_REPO, cache_dir=cache, steps=[0, 1000])
        source.swap_weights = swap
        source.load(0, device="cpu")
        with pytest.raises(CorruptCheckpointError) as error:
            source.load(1000, device="cpu")
        assert "step 1000: model.safetensors weights not finite: " in one_line(error)
        assert source.corrupt_reason(1000).startswith("model.safetensors: weights not finite: ")
        assert source.searchable_steps() == [0]


def test_scan_counts_non_finite_tensors_of_every_float_dtype(tmp_path):
    from interp.sources import weight_scan

    path = tmp_path / "w.safetensors"
    tensors = {
        "a16": torch.tensor([1.0, float("inf")], dtype=torch.float16),
        "b16": torch.tensor([1.0, float("nan")], dtype=torch.bfloat16),
        "c32": torch.tensor([-float("inf"), 2.0]),
        "d64": torch.tensor([float("nan")], dtype=torch.float64),
        "e32": torch.tensor([3.4e38, -3.4e38, 0.0]),  # large, finite
        "f16": torch.tensor([65504.0, -0.0], dtype=torch.float16),
        "g64": torch.arange(5),  # integers: never non-finite
    }
    save_file(tensors, path)
    digest, bad = weight_scan.scan_file(path)
    from interp.sources.loading import _sha256_of_file

    assert digest == _sha256_of_file(path)
    assert bad == ["a16", "b16", "c32", "d64"]


# ----------------------------------------------------------------------------- item 2: shards


def save_two_shards(folder: Path, seed: int) -> Path:
    from transformers import GPTNeoXForCausalLM

    from interp.sources.catalogue import neox_config

    torch.manual_seed(seed)
    GPTNeoXForCausalLM(neox_config(32, 2, 4, 256, 64)).save_pretrained(folder, max_shard_size="100KB")
    assert (folder / SHARD_1).is_file() and (folder / SHARD_2).is_file() and (folder / INDEX).is_file()
    return folder


@pytest.fixture
def sharded_suite(tmp_path, byte_tokenizer_dir):
    """Steps 0..4000 in two shards: 1000 lacks its second shard, 2000's second is cut short,
    3000 holds a stray model.safetensors (step 4000's) beside its complete shards."""
    root = tmp_path / "suite"
    shutil.copytree(byte_tokenizer_dir, root / "tokenizer")
    for i, step in enumerate((0, 1000, 2000, 3000, 4000)):
        save_two_shards(root / f"step{step}", seed=70 + i)
    (root / "step1000" / SHARD_2).unlink()
    cut = root / "step2000" / SHARD_2
    cut.write_bytes(cut.read_bytes()[:-100])
    save_tiny_neox(root / "stray", seed=99)
    shutil.copyfile(root / "stray" / "model.safetensors", root / "step3000" / "model.safetensors")
    shutil.rmtree(root / "stray")
    return root


def test_shards_are_checked_against_their_index(sharded_suite):
    source = LocalSuiteSource(sharded_suite)
    table = checkpoints.checkpoint_table(source)
    assert table["status"].tolist() == ["searchable", "corrupt", "corrupt", "corrupt", "searchable"]
    detail = table.set_index("step")["detail"]
    assert detail[1000] == f"{SHARD_2}: named by {INDEX}, not in the folder (1 of 2 shards absent)"
    assert detail[2000].startswith(f"{SHARD_2}: truncated: the tensors need ")
    assert detail[3000] == (
        f"two weight sets: model.safetensors and {SHARD_1}, {SHARD_2} ({INDEX}); which one is step 3000 "
        "is unknown: keep one set, move the other away"
    )
    assert source.searchable_steps() == [0, 4000]
    for step, words in ((1000, f"{SHARD_2}: named by {INDEX}"), (3000, "two weight sets: model.safetensors and")):
        with pytest.raises(CorruptCheckpointError) as error:
            LocalSuiteSource(sharded_suite).load(step, device="cpu")
        assert words in one_line(error)
        with pytest.raises(CheckpointError) as refused:
            check_steps_available(LocalSuiteSource(sharded_suite), [step])
        assert words in one_line(refused)
    assert LocalSuiteSource(sharded_suite).load(4000, device="cpu").step == 4000


def test_pickle_weights_beside_safetensors_are_two_weight_sets(tmp_path, byte_tokenizer_dir):
    root = suite(tmp_path, byte_tokenizer_dir, steps=(0, 10))
    torch.save(load_file(root / "step10" / "model.safetensors"), root / "step10" / "pytorch_model.bin")
    for allow_pickle in (False, True):
        source = LocalSuiteSource(root, allow_pickle=allow_pickle)
        assert source.corrupt_reason(10) == (
            "two weight sets: model.safetensors and pytorch_model.bin; which one is step 10 is unknown: "
            "keep one set, move the other away"
        )
        with pytest.raises(CorruptCheckpointError) as error:
            source.load(10, device="cpu")
        assert "two weight sets: model.safetensors and pytorch_model.bin" in one_line(error)
    # transformers' Trainer keeps its arguments as training_args.bin: not a weight set
    shutil.move(root / "step10" / "pytorch_model.bin", root / "step10" / "training_args.bin")
    assert LocalSuiteSource(root).corrupt_reason(10) is None


# ----------------------------------------------------------------------------- item 5: custom code


def ask_for_code(folder: Path) -> dict:
    config = json.loads((folder / "config.json").read_text())
    config["auto_map"] = {
        "AutoConfig": "configuration_mine.MineConfig",
        "AutoModelForCausalLM": "modeling_mine.MineForCausalLM",
    }
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "modeling_mine.py").write_text("raise SystemExit('checkpoint code ran')\n")
    return config


def test_custom_code_steps_have_their_own_status(tmp_path, byte_tokenizer_dir):
    root = suite(tmp_path, byte_tokenizer_dir, steps=(0, 10, 20))
    ask_for_code(root / "step10")
    source = LocalSuiteSource(root)
    table = checkpoints.checkpoint_table(source)
    assert table["status"].tolist() == ["searchable", "needs-remote-code", "searchable"]
    reason = (
        "config.json asks for custom code (auto_map: AutoModelForCausalLM -> modeling_mine.MineForCausalLM, "
        "AutoConfig -> configuration_mine.MineConfig); this tool does not run checkpoint code"
    )
    assert table.set_index("step")["detail"][10] == reason
    assert checkpoints.hazard_lines(table, "run") == [
        f"run: step 10 needs-remote-code: {reason}; left out of the search"
    ]
    assert source.searchable_steps() == [0, 20]
    with pytest.raises(CheckpointError) as refused:
        check_steps_available(source, [10])
    assert f"step 10: {reason}" in one_line(refused)
    with pytest.raises(CheckpointError) as error:
        LocalSuiteSource(root).load(10, device="cpu")
    assert reason in one_line(error)


def test_a_suite_that_needs_code_everywhere_has_no_searchable_step(tmp_path, byte_tokenizer_dir):
    root = suite(tmp_path, byte_tokenizer_dir, steps=(0, 10))
    for step in (0, 10):
        ask_for_code(root / f"step{step}")
    source = LocalSuiteSource(root)
    assert checkpoints.checkpoint_table(source)["status"].tolist() == ["needs-remote-code"] * 2
    assert source.searchable_steps() == []
