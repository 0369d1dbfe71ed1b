"""torch's private names that the project uses, behind public-looking names of ours.

Checked on torch 2.4 to 2.13 (the declared range; 2.13.0+cpu installed). What moves breaks
``analyses/op_trace.py`` only (the per-op trace of the first training step, issue 19); training
and the main job do not import this module.

* :class:`TorchDispatchMode` lives in ``torch.utils._python_dispatch``. torch documents dispatch
  modes ("Extending all torch API with Modes", docs/notes/extending) only under that module;
  ``torch.overrides`` has ``TorchFunctionMode``, which sees Python-level calls, not the ATen
  operations (``addmm``, ``_softmax``, the AdamW ``_foreach`` kernels) whose bits the trace hashes.
* :func:`written_arguments` reads ``OpOverload._schema`` (a ``torch._C.FunctionSchema``): which
  arguments an operation writes into (``Tensor(a!)``). No public attribute of an ``OpOverload``
  says so (``is_view`` and ``tags`` do not); the trace needs it to know when a buffer that
  ``empty`` handed out uninitialised has been written.

(``torch.utils._pytree.tree_leaves``, used before, is not needed: the trace walks the lists,
tuples and dicts of an operation's arguments itself.)
"""

from __future__ import annotations

from torch.utils._python_dispatch import TorchDispatchMode

__all__ = ["TorchDispatchMode", "written_arguments"]


def written_arguments(op) -> list[tuple[int, str]]:
    """``(position, name)`` of each argument that the ATen operation ``op`` (an ``OpOverload``, as
    ``__torch_dispatch__`` receives it) writes into, from its schema (``Tensor(a!) self``).

    ``torch.ops.aten.add_.Tensor`` -> ``[(0, "self")]``; ``torch.ops.aten.add.out`` ->
    ``[(3, "out")]``; ``torch.ops.aten.add.Tensor`` -> ``[]``. Positions count every argument of
    the schema, keyword-only ones included (an argument passed by keyword is found by its name).
    """
    return [
        (i, arg.name)
        for i, arg in enumerate(op._schema.arguments)
        if arg.alias_info is not None and arg.alias_info.is_write
    ]
