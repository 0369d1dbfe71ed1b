"""Weight files that lack or add a tensor are corrupt (issue 41, item 1; transformers #46620).

A local suite whose step 1000 lacks one layer's ``query_key_value.weight`` (transformers would
fill it at random on every load) and whose step 2000 holds an extra tensor: both are ``corrupt``
in the table with the tensors named, left out of the search, a hazard line each; loading either
(also through the weight swap) is one line naming the tensors. GPT-NeoX files store the
unembedding as ``embed_out.weight``, which transformers maps to ``lm_head.weight``: such a file
is whole, and so is one that stores it as ``lm_head.weight``; both load the stored weights.
"""

from __future__ import annotations

import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file

from conftest import save_tiny_neox
from interp import sources as checkpoints
from interp.sources import CorruptCheckpointError, LocalSuiteSource

LACKED = "gpt_neox.layers.1.attention.query_key_value.weight"
ADDED = "gpt_neox.layers.9.extra.weight"


@pytest.fixture
def lacking_suite(tmp_path, byte_tokenizer_dir):
    """Steps 0, 1000 (lacks LACKED), 2000 (holds ADDED), 3000 (``lm_head.weight``, not ``embed_out.weight``)."""
    root = tmp_path / "suite"
    shutil.copytree(byte_tokenizer_dir, root / "tokenizer")
    for seed, step in enumerate([0, 1000, 2000, 3000]):
        save_tiny_neox(root / f"step{step}", seed=50 + seed)
    path = root / "step1000" / "model.safetensors"
    tensors = load_file(path)
    del tensors[LACKED]
    save_file(tensors, path, metadata={"format": "pt"})
    path = root / "step2000" / "model.safetensors"
    tensors = load_file(path)
    tensors[ADDED] = torch.zeros(3)
    save_file(tensors, path, metadata={"format": "pt"})
    path = root / "step3000" / "model.safetensors"
    tensors = load_file(path)
    tensors["lm_head.weight"] = tensors.pop("embed_out.weight")
    save_file(tensors, path, metadata={"format": "pt"})
    return root


def test_a_step_lacking_or_adding_a_tensor_is_corrupt_and_left_out(lacking_suite):
    source = LocalSuiteSource(lacking_suite)
    corrupt = source.corrupt_steps()
    assert sorted(corrupt) == [1000, 2000]
    assert corrupt[1000] == (
        "model.safetensors: lacks 1 tensor the model needs (transformers would fill it at random on "
        f"every load): {LACKED}"
    )
    assert corrupt[2000] == f"model.safetensors: holds 1 tensor the model does not have: {ADDED}"
    assert source.searchable_steps() == [0, 3000]
    table = checkpoints.checkpoint_table(source)
    assert table["status"].tolist() == ["searchable", "corrupt", "corrupt", "searchable"]
    assert LACKED in table["detail"][1] and ADDED in table["detail"][2]
    lines = checkpoints.hazard_lines(table, "suite")
    assert lines == [
        f"suite: step 1000 corrupt: {corrupt[1000]}; left out of the search",
        f"suite: step 2000 corrupt: {corrupt[2000]}; left out of the search",
    ]
    for step, name in ((1000, LACKED), (2000, ADDED)):
        with pytest.raises(CorruptCheckpointError) as error:
            LocalSuiteSource(lacking_suite).load(step, device="cpu")
        assert "\n" not in str(error.value) and f"step {step}: model.safetensors " in str(error.value)
        assert name in str(error.value)


def test_the_weight_swap_refuses_a_lacking_step_and_a_renamed_key_loads(lacking_suite):
    source = LocalSuiteSource(lacking_suite)
    source.swap_weights = True
    source.load(0, device="cpu")
    assert source._swap is not None  # the next whole step would be swapped in
    with pytest.raises(CorruptCheckpointError, match=LACKED):
        source.load(1000, device="cpu")
    source.prefetch(2000)  # a read-ahead does not bypass the check
    with pytest.raises(CorruptCheckpointError, match=ADDED.replace(".", r"\.")):
        source.load(2000, device="cpu")
    # embed_out.weight (saved by transformers, step 0) and lm_head.weight (step 3000) both load.
    for step, key in ((3000, "lm_head.weight"), (0, "embed_out.weight")):
        model = source.load(step, device="cpu").model
        stored = load_file(lacking_suite / f"step{step}" / "model.safetensors")[key]
        unembed = [p for n, p in model.named_parameters() if "lm_head" in n or "unembed" in n]
        assert unembed and all(torch.equal(p.detach(), stored) for p in unembed)
    source.close()
