"""Another library's private names (a leading underscore) appear only in the adapters (issue 66).

:mod:`interp.core.adapters` holds one module per library; every other file calls the
public-looking functions there. :func:`test_private_names_only_in_adapters` fails on a private
name of torch, transformers, TransformerLens, typer/click, pytest, pytest-xdist or CPython's
``multiprocessing`` anywhere else in the tree (an import of a private module or name, an attribute,
a method that overrides one, or a string naming one, as ``getattr`` takes it), except the tests'
own plumbing listed in :data:`TEST_PLUMBING` with its reason. The names it looks for are read from
the installed libraries (the private attributes of a module, a model, a config, a bridge, a
context, a pool, a fork server...) plus :data:`NAMED`, which introspection cannot find.

The other tests check, on the installed versions, that each private name an adapter (or the tests'
plumbing) relies on is still there and means what the adapter assumes, so a release that moves one
fails here, naming the adapter, before a training or a trace fails somewhere less clear.
"""

from __future__ import annotations

import ast
import functools
import inspect
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
#: The folders whose Python files are scanned.
SCANNED = ("interp", "synthetic", "sweeps", "analyses", "emergence_lens", "benchmarks", "tests", "tools")
#: Top-level modules that are the project's own (their private names are ours to use).
OWN = {"interp", "synthetic", "sweeps", "analyses", "emergence_lens", "benchmarks", "tests", "tools", "conftest"}
#: Where other libraries' private names may appear: one module per library.
ADAPTERS = "interp/core/adapters/"
#: This file names them all, to look for them.
THIS = "tests/project/test_private_names.py"

#: Private names that introspecting the installed libraries does not find (module names, names
#: set on instances after construction, a child module's name), with their library.
NAMED = {
    "_python_dispatch": "torch",
    "_pytree": "torch",
    "_cxx_pytree": "torch",
    "_schema": "torch",
    "_original_component": "transformer_lens",
    "_protected_args": "click",
    "_fixtureinfo": "pytest",
    "_split_scope": "pytest-xdist",
    "_processes": "cpython",
    "_fds": "cpython",
    "_name": "cpython",
}

#: (file, private name) -> why the tests' own plumbing uses it (no adapter: the package does not).
TEST_PLUMBING = {
    ("tests/conftest.py", "_fixtureinfo"): (
        "pytest offers no public way to ask, at collection, where a fixture is defined and with which "
        "scope (pytest's own --fixtures-per-test reads it)"
    ),
    ("tests/conftest.py", "_split_scope"): (
        "pytest-xdist's one extension point for grouping tests on a worker (no public hook takes a key)"
    ),
    **{
        ("tests/interp/patching/test_patching_hooks.py", hook): "the leak check lists every torch hook left on a model"
        for hook in ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks")
    },
    ("tests/interp/test_dtype.py", "_masked_softmax"): "a spy on the dtype TransformerLens's softmax is asked for",
}


def _private(names) -> set[str]:
    return {n for n in names if n.startswith("_") and not n.startswith("__")}


@functools.cache
def foreign_private_names() -> dict[str, str]:
    """Private name -> library, for the installed libraries' objects the project touches."""
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import context, forkserver, popen_forkserver

    import typer
    from torch import nn
    from transformer_lens.hook_points import HookPoint
    from transformer_lens.model_bridge import TransformerBridge
    from transformer_lens.model_bridge.generalized_components.attention import AttentionBridge
    from transformer_lens.model_bridge.generalized_components.base import GeneralizedComponent
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM
    from xdist.scheduler import LoadScopeScheduling

    module = nn.Linear(2, 2)
    with torch.device("meta"):
        model = GPTNeoXForCausalLM(
            GPTNeoXConfig(
                hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32, vocab_size=8
            )
        )
    server = forkserver.ForkServer()
    with ProcessPoolExecutor(max_workers=1) as pool:
        pool_names = _private(dir(pool)) | _private(vars(pool))
    found = {
        "torch": _private(dir(module)) | _private(vars(module)) | _private(dir(torch.ops.aten.add.Tensor)),
        "transformers": _private(dir(model)) | _private(dir(model.config)) | _private(vars(model.config)),
        "transformer_lens": _private(dir(AttentionBridge))
        | _private(dir(GeneralizedComponent))
        | _private(dir(TransformerBridge))
        | _private(dir(HookPoint)),
        "click": _private(dir(typer.Context)) | _private(dir(typer.core.TyperGroup)),
        "pytest-xdist": _private(dir(LoadScopeScheduling)),
        "cpython": pool_names
        | _private(dir(server))
        | _private(vars(server))
        | _private(dir(popen_forkserver.Popen))
        | _private(dir(context.SpawnProcess))
        | _private(vars(context.SpawnProcess())),
    }
    names = {name: library for library, held in found.items() for name in held}
    return {**names, **NAMED}


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the docstring nodes of a module and its classes and functions (prose, not uses)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def _private_import(module: str, name: str | None) -> list[str]:
    """The private parts of an import of another library (none for the project's own modules)."""
    if module.split(".")[0] in OWN or module.startswith("test_"):
        return []
    return sorted(_private([*module.split("."), *([name] if name else [])]))


def private_uses(rel: str, source: str) -> list[tuple[int, str]]:
    """``(line, name)`` of every use of another library's private name in one file's source."""
    names = foreign_private_names()
    tree = ast.parse(source, filename=rel)
    docs = _docstrings(tree)
    uses = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            uses += [(node.lineno, p) for alias in node.names for p in _private_import(alias.name, None)]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            uses += [(node.lineno, p) for alias in node.names for p in _private_import(node.module, alias.name)]
        elif isinstance(node, ast.Attribute) and node.attr in names:
            uses.append((node.lineno, node.attr))
        elif isinstance(node, ast.ClassDef):  # a method that overrides a library's private one
            uses += [
                (item.lineno, item.name)
                for item in node.body
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name in names
            ]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            words = {w for w in node.value.replace(".", " ").split() if w in names}
            uses += [(node.lineno, w) for w in sorted(words)]
    return sorted(set(uses))


def _tree_uses() -> dict[tuple[str, str], list[int]]:
    """(file, private name) -> lines, for every file outside the adapters and this one."""
    found: dict[tuple[str, str], list[int]] = {}
    for folder in SCANNED:
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel.startswith(ADAPTERS) or rel == THIS:
                continue
            for line, name in private_uses(rel, path.read_text()):
                found.setdefault((rel, name), []).append(line)
    return found


def test_private_names_only_in_adapters():
    uses = _tree_uses()
    names = foreign_private_names()
    outside = [
        f"{file}:{lines[0]} {name} ({names.get(name, 'a private module')})"
        for (file, name), lines in sorted(uses.items())
        if (file, name) not in TEST_PLUMBING
    ]
    assert not outside, (
        f"private names of other libraries outside {ADAPTERS}: {outside}; use a public name, or add a "
        f"function to that library's adapter module there (saying why no public name does)"
    )
    stale = sorted(set(TEST_PLUMBING) - set(uses))
    assert not stale, f"listed in TEST_PLUMBING but no longer used (remove them from the list): {stale}"


def test_the_scan_finds_each_kind_of_use():
    """The scan is not blind: an import, an attribute, an override and a getattr string are found;
    the project's own private names and a docstring's mention are not."""
    source = '''"""Mentions ``_forward_hooks`` in prose."""
from torch.utils._pytree import tree_leaves
import torch.utils._python_dispatch
from interp.core.io import _private_helper

class Pool(LoadScopeScheduling):
    def _split_scope(self, nodeid):
        return module._forward_hooks, getattr(model, "_keys_to_ignore_on_load_unexpected", None)

def _own(x):
    return x._our_own_thing, "layers.0._original_component.weight"
'''
    assert private_uses("x.py", source) == [
        (2, "_pytree"),
        (3, "_python_dispatch"),
        (7, "_split_scope"),
        (8, "_forward_hooks"),
        (8, "_keys_to_ignore_on_load_unexpected"),
        (11, "_original_component"),
    ]


def test_adapters_use_what_they_say():
    """Each adapter module's docstring names the private names it uses (and why), and only those."""
    names = foreign_private_names()
    for path in sorted((ROOT / ADAPTERS).glob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        source = path.read_text()
        docstring = ast.get_docstring(ast.parse(source)) or ""
        used = {name for _, name in private_uses(rel, source) if name in names}
        unsaid = sorted(name for name in used if name not in docstring)
        assert not unsaid, f"{rel} uses {unsaid} without saying why in its docstring"


# ----------------------------------------------------------------------------- torch


def test_torch_dispatch_mode_sees_aten_ops():
    from interp.core.adapters.torch import TorchDispatchMode

    class Names(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.ops.append(str(func.name()))
            return func(*args, **(kwargs or {}))

    with Names() as mode:
        torch.ones(2).add_(1)
    assert "aten::add_.Tensor" in mode.ops and "aten::ones" in mode.ops


def test_torch_written_arguments():
    from interp.core.adapters.torch import written_arguments

    assert written_arguments(torch.ops.aten.add_.Tensor) == [(0, "self")]
    assert written_arguments(torch.ops.aten.add.out) == [(3, "out")]
    assert written_arguments(torch.ops.aten.add.Tensor) == []


# ----------------------------------------------------------------------------- transformers


def test_transformers_load_ignore_patterns():
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

    from interp.core.adapters.transformers import load_ignore_patterns

    with torch.device("meta"):
        model = GPTNeoXForCausalLM(
            GPTNeoXConfig(
                hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32, vocab_size=8
            )
        )
    missing, unexpected = load_ignore_patterns(model)
    assert missing == []
    assert any(p.search("gpt_neox.layers.0.attention.bias") for p in unexpected)
    assert any(p.search("gpt_neox.layers.0.attention.masked_bias") for p in unexpected)
    assert not any(p.search("gpt_neox.layers.0.attention.dense.bias") for p in unexpected)


# ----------------------------------------------------------------------------- TransformerLens


def test_transformer_lens_softmax_step():
    """The wrapped method still takes the arguments the adapter passes, and calls the softmax the
    float16 test (tests/interp/test_dtype.py) spies on."""
    from transformer_lens.model_bridge.generalized_components.attention import AttentionBridge

    from interp.core.adapters.transformer_lens import softmax_upcast, upcast_attention_softmax

    method = AttentionBridge._softmax_dropout_pattern
    assert list(inspect.signature(method).parameters) == ["self", "attn_scores", "target_dtype", "upcast_to_fp32"]
    assert "_masked_softmax" in inspect.getsource(method)
    assert "dtype" in inspect.signature(AttentionBridge._masked_softmax).parameters
    module = torch.nn.Linear(2, 2)
    assert not upcast_attention_softmax(module) and not softmax_upcast(module)  # not an attention: untouched


# ----------------------------------------------------------------------------- CPython


def test_cpython_fork_server_internals():
    from multiprocessing import context, forkserver, popen_forkserver, process, spawn

    from interp.core.adapters import cpython

    if not cpython.can_fork_from_server():
        pytest.skip("this Python spawns its training workers (not CPython 3.10-3.13 on POSIX)")
    assert callable(getattr(forkserver.ForkServer, "_stop", None))
    assert callable(getattr(popen_forkserver.Popen, "_launch", None))
    assert callable(getattr(forkserver, "read_signed", None))
    assert "_Popen" in vars(context.SpawnProcess)
    assert "self._Popen(self)" in inspect.getsource(process.BaseProcess.start)
    launch = inspect.getsource(popen_forkserver.Popen._launch)
    for step in ("get_preparation_data(process_obj._name)", "connect_to_new_process(self._fds)", "read_signed"):
        assert step in launch, (
            f"CPython's forkserver launch changed ({step!r} gone): update interp/core/adapters/cpython.py"
        )
    assert callable(spawn.get_preparation_data)


def _pid() -> int:
    import os

    return os.getpid()


def test_cpython_pool_processes():
    from concurrent.futures import ProcessPoolExecutor

    from interp.core.adapters.cpython import pool_processes

    with ProcessPoolExecutor(max_workers=1) as pool:
        pid = pool.submit(_pid).result()
        processes = pool_processes(pool)
        assert list(processes) == [pid] and processes[pid].pid == pid
    assert pool_processes(pool) == {}


# ----------------------------------------------------------------------------- the tests' plumbing


def test_xdist_split_scope_is_still_there():
    from xdist.scheduler import LoadScopeScheduling

    assert callable(getattr(LoadScopeScheduling, "_split_scope", None))


def test_pytest_fixtureinfo_is_still_there(request, tmp_path):
    """tests/conftest.py reads ``item._fixtureinfo.name2fixturedefs`` (which fixtures a test uses,
    and their scope) to mark the users of the slow fixtures and group them on one worker."""
    (fixturedef,) = request.node._fixtureinfo.name2fixturedefs["tmp_path"]
    assert fixturedef.scope == "function"
