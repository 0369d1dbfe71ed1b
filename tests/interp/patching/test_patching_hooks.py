"""Patching leaves no hook of its own on the caller's models (issue 68, item 6).

After ``patch_values`` a bridge holds the hooks its libraries install once, lazily, on the first
forward that captures activations (transformers' output-capturing hooks, TransformerLens's block
capture hooks) and keep by design: exactly those a plain ``run_with_cache`` leaves, inert outside a
capture. None is ours, no TransformerLens hook point keeps a hook, and a second call adds none.
"""

from __future__ import annotations

import shutil

import torch

from conftest import save_tiny_neox
from interp.patching import Target, patch_values
from interp.sources import LocalSuiteSource
from interp.tasks import RepetitionTask


def hooks(model) -> list[tuple[str, str, str]]:
    """(module name, kind, defining module of the hook function) of every torch hook on ``model``."""
    found = []
    for name, module in model.named_modules():
        for kind in ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks"):
            for hook in getattr(module, kind, {}).values():
                fn = getattr(hook, "__func__", hook)
                found.append((name, kind, getattr(fn, "__module__", "") or ""))
    return sorted(found)


def hook_point_hooks(model) -> int:
    return sum(len(getattr(hp, "fwd_hooks", [])) + len(getattr(hp, "bwd_hooks", [])) for hp in model.hook_dict.values())


def test_patch_values_leaves_no_hook_of_its_own(tmp_path, byte_tokenizer_dir):
    root = tmp_path / "run"
    shutil.copytree(byte_tokenizer_dir, root / "tokenizer")
    for step in (0, 1):
        save_tiny_neox(root / f"step{step}", seed=90 + step)
    pre, post, plain = (LocalSuiteSource(root).load(s, device="cpu").model for s in (0, 1, 0))
    batch = RepetitionTask(n_prompts=4, length=6).build(LocalSuiteSource(root).tokenizer())
    with torch.inference_mode():
        plain.run_with_cache(batch.tokens)
    targets = [Target("pattern", ((0, 1),)), Target("z", ((1, 2),)), Target("mlp", layers=(0,))]
    for method in ("fast", "reference"):
        patch_values(pre, post, batch, targets, method=method)
        for model in (pre, post):
            assert hooks(model) == hooks(plain)  # the libraries' own, as a plain run_with_cache leaves
            assert not [h for h in hooks(model) if h[2].startswith(("interp", "tests"))]
            assert hook_point_hooks(model) == 0
