"""How result objects print, display and compare (ground floor; the HTML tables: :mod:`interp.core.html_fragments`).

A result holds tensors and DataFrames; Python's dataclass defaults then either print megabytes
(``repr`` of every tensor) or raise (``==`` on a DataFrame is "ambiguous"). The results of the
toolkit (``HeadRanking``, ``RunAnalysis``, ``MainJobReport``, ``EmergencePoint``, ``DensePoint``,
``TaskBatch``, ...) use the three functions below instead:

* :func:`short_repr`: one line per field at most, each value summarised (a tensor as its shape and
  dtype, a DataFrame as its size and columns), the whole at most about one screen
  (:data:`MAX_REPR_CHARS`);
* :func:`results_equal`: ``==`` compares field by field, tensors with :func:`torch.equal` (NaN equal
  to NaN at the same place), DataFrames with :meth:`pandas.DataFrame.equals`, floats NaN-aware; it
  never raises;
* :func:`fields_html`: an HTML display (scalars as a two-column table, DataFrames as their first
  rows) for a result without a richer ``_repr_html_``.

:func:`check_argument` refuses a public function's argument of the wrong kind in one line naming
what was passed (``task.build(source)`` where ``source.tokenizer()`` belongs), before anything loads.

Use: in the class body, ``__repr__ = short_repr``, ``__eq__ = results_equal``,
``_repr_html_ = fields_html`` (a dataclass keeps methods its body defines).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from interp.core.html_fragments import STYLE, key_values_fragment, table_fragment
from interp.core.templating import render, trusted

#: Longest ``repr`` a result prints (characters): about one screen.
MAX_REPR_CHARS = 1600
_VALUE_CHARS = 120


def _fields(obj: Any) -> list[tuple[str, Any]]:
    if dataclasses.is_dataclass(obj):
        return [(f.name, getattr(obj, f.name)) for f in dataclasses.fields(obj) if f.repr]
    return [(k, v) for k, v in vars(obj).items() if not k.startswith("_")]


def summarise(value: Any) -> str:
    """One short text for any field value (tensors and tables by shape, long text cut)."""
    kind = type(value).__name__
    if hasattr(value, "shape") and hasattr(value, "dtype") and not hasattr(value, "columns"):
        shape = "×".join(str(int(n)) for n in value.shape) or "scalar"
        if getattr(value, "ndim", 1) == 0 or getattr(value, "numel", lambda: 2)() == 1:
            try:
                return f"{kind}({float(value):.6g})"
            except (TypeError, ValueError):
                pass
        return f"{kind}[{shape}, {str(value.dtype).replace('torch.', '')}]"
    if hasattr(value, "columns") and hasattr(value, "shape"):
        columns = ", ".join(map(str, list(value.columns)[:8])) + (", …" if len(value.columns) > 8 else "")
        return f"DataFrame[{value.shape[0]} rows × {value.shape[1]} cols: {columns}]"
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, (list, tuple)) and len(value) > 6:
        head = ", ".join(summarise(v) for v in value[:3])
        return f"[{head}, … {len(value)} items]" if isinstance(value, list) else f"({head}, … {len(value)} items)"
    if isinstance(value, dict) and len(value) > 6:
        return f"{{… {len(value)} entries}}"
    if isinstance(value, (list, tuple)):
        inner = ", ".join(summarise(v) for v in value)
        text = f"[{inner}]" if isinstance(value, list) else f"({inner}{',' if len(value) == 1 else ''})"
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        text = f"{kind}(…)"
    else:
        text = repr(value)
    return text if len(text) <= _VALUE_CHARS else text[: _VALUE_CHARS - 1] + "…"


def short_repr(obj: Any) -> str:
    """``ClassName(field=summary, ...)``, one field per line, at most :data:`MAX_REPR_CHARS` long."""
    lines = [f"    {name}={summarise(value)}," for name, value in _fields(obj)]
    text = f"{type(obj).__name__}(\n" + "\n".join(lines) + "\n)"
    if len(text) > MAX_REPR_CHARS:
        text = text[: MAX_REPR_CHARS - 6] + "\n  …)"
    return text


def values_equal(a: Any, b: Any) -> bool:
    """Equality that never raises: tensors by value (NaN == NaN in place), DataFrames by
    ``.equals``, floats NaN-aware, containers and dataclasses element by element."""
    if a is b:
        return True
    if type(a) is not type(b) and not (
        isinstance(a, (int, float))
        and isinstance(b, (int, float))
        and not isinstance(a, bool)
        and not isinstance(b, bool)
    ):
        return False
    try:
        import torch

        if isinstance(a, torch.Tensor):
            if a.shape != b.shape or a.dtype != b.dtype:
                return False
            if a.is_floating_point() or a.is_complex():
                same = (a == b) | (torch.isnan(a) & torch.isnan(b))
                return bool(same.all())
            return bool(torch.equal(a, b))
        if isinstance(a, torch.nn.Module):  # a trained model: equal weights and buffers, by value
            return values_equal(dict(a.state_dict()), dict(b.state_dict()))
    except ImportError:  # pragma: no cover - torch is a dependency
        pass
    if hasattr(a, "equals") and hasattr(a, "columns"):  # pandas DataFrame
        return bool(a.equals(b))
    if hasattr(a, "equals") and hasattr(a, "index"):  # pandas Series
        return bool(a.equals(b))
    if isinstance(a, float) or isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or a == b
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(values_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(values_equal(a[k], b[k]) for k in a)
    if dataclasses.is_dataclass(a) and not isinstance(a, type):
        return results_equal(a, b)
    try:
        return bool(a == b)
    except Exception:  # an object whose == is not a truth value: not equal unless identical
        return False


def results_equal(self: Any, other: Any) -> bool:
    """``==`` for a result: same class and every field equal by :func:`values_equal`."""
    if type(self) is not type(other):
        return NotImplemented
    if dataclasses.is_dataclass(self):
        names = [f.name for f in dataclasses.fields(self) if f.compare]
    else:
        names = sorted(set(vars(self)) | set(vars(other)))
    return all(values_equal(getattr(self, n, None), getattr(other, n, None)) for n in names)


def fields_html(obj: Any, max_rows: int = 10) -> str:
    """A result as HTML: its scalar fields in a two-column table, then each DataFrame field's
    first ``max_rows`` rows (template ``core/templates/result.html.j2``; every text escaped)."""
    scalars, tables = {}, []
    for name, value in _fields(obj):
        if hasattr(value, "columns") and hasattr(value, "head"):
            more = f" (first {max_rows} of {len(value)} rows)" if len(value) > max_rows else ""
            tables.append({"name": name, "more": more, "html": trusted(table_fragment(value.head(max_rows)))})
        else:
            scalars[name] = summarise(value) if not isinstance(value, (int, float, str, bool, type(None))) else value
    return render(
        "core/templates/result.html.j2",
        style=trusted(STYLE),
        name=type(obj).__name__,
        scalars=trusted(key_values_fragment(scalars)),
        tables=tables,
    )


def described(value: Any) -> str:
    """``type repr`` of a passed value, the repr cut to 60 characters: how a refusal names it."""
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 60 else text[:57] + '...'}"


def check_argument(ok: bool, value: Any, where: str, expected: str) -> None:
    """Refuse an argument of the wrong kind: one line, ``<where> is <type> <repr>; expected <expected>``.

    Raises:
        TypeError: when ``ok`` is false.
    """
    if not ok:
        raise TypeError(f"{where} is {described(value)}; expected {expected}")
