"""Switching checkpoints inside one resident bridge (interp.sources.weight_swap): every capability value,
head score, attention pattern and logit equals a freshly booted bridge's, and the checks a boot
makes (digest, tokenizer) still run."""

from __future__ import annotations

import shutil

import pytest
import torch
from transformers import AutoTokenizer

from interp.scores import head_scores
from interp.sources import LocalSuiteSource, TokenizerMismatchError
from interp.tasks import RepetitionTask, evaluate
from tests.conftest import save_tiny_neox

STEPS = (0, 1, 2, 3)


@pytest.fixture(scope="module")
def swap_suite(tmp_path_factory, byte_tokenizer_dir):
    root = tmp_path_factory.mktemp("swap_suite")
    shutil.copytree(byte_tokenizer_dir, root / "tokenizer")
    for step in STEPS:
        save_tiny_neox(root / f"step{step}", seed=100 + step, d_model=48, n_layers=3, n_heads=4)
    return root


def _values(model, batch, tokens):
    with torch.inference_mode():
        _, cache = model.run_with_cache(tokens, names_filter=lambda n: n.endswith("hook_pattern"))
        patterns = torch.stack([cache[f"blocks.{l}.attn.hook_pattern"] for l in range(model.cfg.n_layers)])
        logits = model(tokens)
    score = evaluate(model, batch)
    return {
        "accuracy": score.accuracy,
        "p_answer": score.p_answer,
        "logits": logits,
        "patterns": patterns,
        **head_scores(model, tokens, 8),
    }


@pytest.mark.slow
def test_swapped_bridge_equals_a_fresh_boot(swap_suite):
    """Steps visited out of order through one resident bridge give exactly a fresh boot's values."""
    batch = RepetitionTask(n_prompts=8, length=8, seed=0).build(LocalSuiteSource(swap_suite).tokenizer())
    tokens = torch.randint(0, 256, (3, 24), generator=torch.Generator().manual_seed(0))
    fresh = {}
    for step in STEPS:
        source = LocalSuiteSource(swap_suite)
        fresh[step] = (_values(source.load(step, device="cpu").model, batch, tokens), source.digest(step))
        source.close()
    swapping = LocalSuiteSource(swap_suite)
    swapping.swap_weights = True
    bridges = set()
    for step in (0, 2, 1, 3, 0, 3):
        loaded = swapping.load(step, device="cpu")
        bridges.add(id(loaded.model))
        assert loaded.digest == fresh[step][1]
        values = _values(loaded.model, batch, tokens)
        for name, expected in fresh[step][0].items():
            if isinstance(expected, torch.Tensor):
                torch.testing.assert_close(values[name], expected, atol=0, rtol=0, msg=f"step {step} {name}")
            else:
                assert values[name] == expected, (step, name)
    assert swapping._swap is not None and len(bridges) == 1  # one bridge, switched in place


def test_swap_keeps_the_tokenizer_check_and_boots_on_a_new_architecture(swap_suite, tmp_path, byte_tokenizer_dir):
    root = tmp_path / "mixed"
    shutil.copytree(swap_suite, root)
    save_tiny_neox(root / "step4", seed=7, d_model=32, n_layers=2, n_heads=4)  # another architecture
    source = LocalSuiteSource(root)
    source.swap_weights = True
    first = source.load(0, device="cpu").model
    other = source.load(4, device="cpu")
    assert other.model is not first  # a different config.json: a fresh boot, not a swap
    torch.testing.assert_close(
        other.model(torch.arange(10)[None]), LocalSuiteSource(root).load(4, device="cpu").model(torch.arange(10)[None])
    )

    # a step whose tokenizer differs is refused on the swap path too
    odd = tmp_path / "odd"
    shutil.copytree(swap_suite, odd)
    shutil.rmtree(odd / "tokenizer")
    for step in (0, 2, 3):
        shutil.copytree(byte_tokenizer_dir, odd / f"step{step}", dirs_exist_ok=True)
    extended = AutoTokenizer.from_pretrained(byte_tokenizer_dir)
    extended.add_tokens(["<step1-only>"])  # step1 carries a tokenizer with one more token
    extended.save_pretrained(odd / "step1")
    source = LocalSuiteSource(odd)
    source.swap_weights = True
    source.load(0, device="cpu")
    with pytest.raises(TokenizerMismatchError):
        source.load(1, device="cpu")


@pytest.mark.slow
def test_read_ahead_gives_the_same_weights_and_holds_one_checkpoint(swap_suite):
    """A step read ahead loads exactly as a fresh boot; a second read-ahead replaces the first (at
    most one checkpoint is held beside the bridge); a read-ahead of another step is dropped."""
    tokens = torch.arange(12)[None]
    fresh = {}
    for step in STEPS:
        with torch.inference_mode():
            fresh[step] = LocalSuiteSource(swap_suite).load(step, device="cpu").model(tokens)
    source = LocalSuiteSource(swap_suite)
    source.swap_weights = True
    source.load(0, device="cpu")
    source.prefetch(1)
    source.prefetch(2)  # replaces the read-ahead of step 1
    assert source._ahead[0] == 2
    loaded = source.load(2, device="cpu")
    assert source._ahead is None
    with torch.inference_mode():
        torch.testing.assert_close(loaded.model(tokens), fresh[2], atol=0, rtol=0)
    source.prefetch(3)
    loaded = source.load(1, device="cpu")  # not the step read ahead: read now, the read-ahead dropped
    assert source._ahead is None
    with torch.inference_mode():
        torch.testing.assert_close(loaded.model(tokens), fresh[1], atol=0, rtol=0)
    source.close()


@pytest.mark.slow
def test_adopted_read_ahead_equals_a_fresh_boot_over_many_switches(swap_suite):
    """A read-ahead's tensors become the bridge's parameters (no copy): every value still equals a
    fresh boot's, step after step and back, and the bridge's parameter objects stay the same."""
    batch = RepetitionTask(n_prompts=8, length=8, seed=0).build(LocalSuiteSource(swap_suite).tokenizer())
    tokens = torch.randint(0, 256, (3, 24), generator=torch.Generator().manual_seed(1))
    fresh = {}
    for step in STEPS:
        source = LocalSuiteSource(swap_suite)
        fresh[step] = _values(source.load(step, device="cpu").model, batch, tokens)
        source.close()
    source = LocalSuiteSource(swap_suite)
    source.swap_weights = True
    bridge = source.load(0, device="cpu").model
    parameters = [id(p) for p in bridge.parameters()]
    order = (2, 1, 3, 0, 3, 2)
    source.prefetch(order[0])
    for i, step in enumerate(order):
        loaded = source.load(step, device="cpu")
        if i + 1 < len(order):
            source.prefetch(order[i + 1])
        assert loaded.model is bridge and [id(p) for p in bridge.parameters()] == parameters
        values = _values(loaded.model, batch, tokens)
        for name, expected in fresh[step].items():
            if isinstance(expected, torch.Tensor):
                torch.testing.assert_close(values[name], expected, atol=0, rtol=0, msg=f"step {step} {name}")
            else:
                assert values[name] == expected, (step, name)
    source.close()
