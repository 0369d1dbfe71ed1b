"""Every place the project still uses another library's private name (a leading underscore) is
listed here and checked on the installed versions (issue 66).

A release that moves one of them fails this test, naming the name and the file that needs it,
before the code path that uses it fails somewhere less clear (several of those uses read the name
with ``getattr(..., default)`` and would otherwise degrade silently). A new private import of another
library anywhere in the tree fails :func:`test_every_private_import_is_listed` until it is listed
here, with the reason no public name does, or replaced by a public name.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: The folders whose Python files are scanned.
SCANNED = ("interp", "synthetic", "sweeps", "analyses", "emergence_lens", "benchmarks", "tests", "tools")
#: Top-level modules that are the project's own (their private names are ours to use).
OWN = {"interp", "synthetic", "sweeps", "analyses", "emergence_lens", "benchmarks", "tests", "tools", "conftest"}

#: (file, module, name or None) of each private import of another library, with the reason.
PRIVATE_IMPORTS = {
    ("analyses/op_trace.py", "torch.utils._python_dispatch", "TorchDispatchMode"): (
        "torch documents dispatch modes only under this module; torch.overrides has no TorchDispatchMode"
    ),
    ("analyses/op_trace.py", "torch.utils._pytree", "tree_leaves"): "torch 2.13 has no public torch.utils.pytree",
}

#: Private attributes the code reads or writes (not imports), each resolved here on the installed
#: library: (file that uses it, what, a function that returns True while the name is there).


def _torch_op_schema() -> bool:
    import torch

    return [a.name for a in torch.ops.aten.add.Tensor._schema.arguments][:2] == ["self", "other"]


def _torch_module_hook_dicts() -> bool:
    from torch import nn

    module = nn.Identity()
    handle = module.register_forward_pre_hook(lambda m, args: None)
    there = len(module._forward_pre_hooks) == 1 and len(module._forward_hooks) == 0
    handle.remove()
    return there and not module._forward_pre_hooks


def _transformers_attn_implementation() -> bool:
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

    config = GPTNeoXConfig(
        hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32, vocab_size=8
    )
    config._attn_implementation = "eager"
    return GPTNeoXForCausalLM(config).config._attn_implementation == "eager"


def _transformers_keys_to_ignore() -> bool:
    from transformers import GPTNeoXForCausalLM

    return "attention.bias" in (GPTNeoXForCausalLM._keys_to_ignore_on_load_unexpected or [])


def _tl_attention_softmax() -> bool:
    from transformer_lens.model_bridge.generalized_components.attention import AttentionBridge

    return callable(getattr(AttentionBridge, "_softmax_dropout_pattern", None)) and callable(
        getattr(AttentionBridge, "_masked_softmax", None)
    )


def _tl_original_component() -> bool:
    import inspect

    from transformer_lens.model_bridge.generalized_components import base

    return '"_original_component"' in inspect.getsource(base)


def _typer_protected_args() -> bool:
    import typer

    app = typer.Typer()

    @app.command()
    def one() -> None: ...

    @app.command()
    def two() -> None: ...

    group = typer.main.get_command(app)
    ctx = group.make_context("emergence", ["two"], resilient_parsing=True)
    return ctx._protected_args == ["two"]


def _process_pool_processes() -> bool:
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=1) as pool:
        return isinstance(pool._processes, dict)


def _forkserver_internals() -> bool:
    from multiprocessing import forkserver, get_context, popen_forkserver

    return all(
        (
            callable(getattr(forkserver.ForkServer, "_stop", None)),
            callable(getattr(popen_forkserver.Popen, "_launch", None)),
            callable(getattr(get_context("spawn").Process, "_Popen", None)),
            callable(getattr(forkserver, "read_signed", None)),
        )
    )


def _xdist_split_scope() -> bool:
    from xdist.scheduler import LoadScopeScheduling

    return callable(getattr(LoadScopeScheduling, "_split_scope", None))


PRIVATE_ATTRIBUTES = {
    ("analyses/op_trace.py", "torch OpOverload._schema.arguments (argument names of an op)"): _torch_op_schema,
    (
        "synthetic/models/transformer.py, tests/test_forcing.py",
        "torch nn.Module._forward_hooks / _forward_pre_hooks (are hooks attached?)",
    ): _torch_module_hook_dicts,
    (
        "interp/sources/embedded.py",
        "transformers PretrainedConfig._attn_implementation (the embedded suite's attention kernel)",
    ): _transformers_attn_implementation,
    (
        "interp/sources/tensor_check.py",
        "transformers PreTrainedModel._keys_to_ignore_on_load_unexpected / _missing",
    ): _transformers_keys_to_ignore,
    (
        "interp/sources/loading.py, tests/test_dtype.py",
        "TransformerLens AttentionBridge._softmax_dropout_pattern / _masked_softmax (softmax in float32)",
    ): _tl_attention_softmax,
    (
        "interp/sources/weight_swap.py, synthetic/ensemble.py",
        "TransformerLens '_original_component' in a bridge's parameter names",
    ): _tl_original_component,
    (
        "emergence_lens/cli.py",
        "typer Context._protected_args (its vendored click's; the subcommand word of an invocation)",
    ): _typer_protected_args,
    (
        "interp/core/kernel_pins.py, interp/sources/interrupted.py",
        "concurrent.futures ProcessPoolExecutor._processes (the pool's workers)",
    ): _process_pool_processes,
    (
        "interp/core/kernel_pins.py",
        "multiprocessing forkserver internals (ForkServer._stop, Popen._launch, SpawnProcess._Popen)",
    ): _forkserver_internals,
    ("tests/conftest.py", "pytest-xdist LoadScopeScheduling._split_scope"): _xdist_split_scope,
}


def _private_imports() -> set[tuple[str, str, str | None]]:
    """(file, module, name) of every import of another library's private module or name in the tree."""
    found = set()
    for folder in SCANNED:
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            for node in ast.walk(ast.parse(path.read_text(), filename=rel)):
                if isinstance(node, ast.Import):
                    pairs = [(alias.name, None) for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    pairs = [(node.module, alias.name) for alias in node.names]
                else:
                    continue
                for module, name in pairs:
                    if module.split(".")[0] in OWN or module.startswith("test_"):
                        continue
                    parts = [*module.split("."), *([name] if name else [])]
                    if any(p.startswith("_") and not p.startswith("__") for p in parts):
                        found.add((rel, module, name))
    return found


def test_every_private_import_is_listed():
    found = _private_imports()
    unlisted = sorted(found - set(PRIVATE_IMPORTS), key=str)
    assert not unlisted, (
        f"private names of other libraries imported: {unlisted}; use a public name, or list it in "
        "tests/test_private_names.py with the reason"
    )
    gone = sorted(set(PRIVATE_IMPORTS) - found, key=str)
    assert not gone, f"listed private imports no longer in the tree (remove them from the list): {gone}"


@pytest.mark.parametrize("use", sorted(PRIVATE_IMPORTS, key=str), ids=lambda use: f"{use[1]}.{use[2]}")
def test_listed_private_import_is_still_there(use):
    file, module, name = use
    try:
        target = importlib.import_module(module)
    except ImportError as exc:
        pytest.fail(f"{file} imports {module}, which the installed library no longer has: {exc}")
    assert name is None or hasattr(target, name), f"{file} imports {module}.{name}: gone from the installed library"


@pytest.mark.parametrize("use", sorted(PRIVATE_ATTRIBUTES, key=str), ids=lambda use: use[1].split(" (")[0])
def test_listed_private_attribute_is_still_there(use):
    file, what = use
    assert PRIVATE_ATTRIBUTES[use](), f"{file} relies on {what}: the installed library moved it"


def test_pytest_fixtureinfo_is_still_there(request, tmp_path):
    """tests/conftest.py reads ``item._fixtureinfo.name2fixturedefs`` (which fixtures a test uses,
    and their scope) to mark the users of the slow fixtures and group them on one worker."""
    (fixturedef,) = request.node._fixtureinfo.name2fixturedefs["tmp_path"]
    assert fixturedef.scope == "function"
