"""Run configs: defaults and types from a dataclass, canonical JSON, and a run's identity.

A run's identity (``run_id``) is a hash of its runner name and fully resolved config (defaults
filled in, seed included), so re-running a spec into the same folder runs only what is missing.
"""

from __future__ import annotations

import dataclasses
import hashlib
import types
import typing
from collections.abc import Mapping
from typing import Any

from interp.core.io import config_json
from interp.core.spec_file import SpecError, unknown_key_message


def resolve_dataclass_config(cls: type, config: Mapping[str, Any]) -> dict[str, Any]:
    """Fill a flat config with ``cls``'s defaults, check field names and coerce values to field types.

    ``int`` fields accept integral floats; ``float`` fields accept ints and numeric strings
    (``"1e-3"``); ``Optional`` fields accept None. Other annotations
    are passed through. The dataclass itself is not constructed, so its own validation
    (``__post_init__``) runs inside the run, and a bad grid point becomes one failed run.

    Args:
        cls: a dataclass whose fields are the valid config fields.
        config: field → value.

    Returns:
        Every field of ``cls`` → value, in field order.

    Raises:
        SpecError: an unknown field (the message lists the valid ones, shows a non-ASCII
            character escaped and names the field it resembles).
        ValueError: a value of the wrong type, or a required field left out.
    """
    fields = dataclasses.fields(cls)
    valid = [f.name for f in fields]
    unknown = sorted(set(config) - set(valid), key=str)
    if unknown:
        raise SpecError(unknown_key_message(cls.__name__, unknown[0], valid, noun="config field"))
    hints = typing.get_type_hints(cls)
    resolved: dict[str, Any] = {}
    for f in fields:
        if f.name in config:
            resolved[f.name] = _coerce(f.name, config[f.name], hints.get(f.name, Any))
        elif f.default is not dataclasses.MISSING:
            resolved[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            resolved[f.name] = f.default_factory()
        else:
            raise ValueError(f"config field {f.name!r} of {cls.__name__} has no default; set it in the spec")
    return resolved


def _exactly(kind: type):
    """A converter that accepts only values of ``kind`` (bools are not ints here)."""

    def convert(value: Any) -> Any:
        if isinstance(value, kind) and (kind is bool or not isinstance(value, bool)):
            return value
        raise TypeError(value)

    return convert


def _to_int(value: Any) -> int:
    """Ints, and floats with no fractional part (YAML writes ``1e3`` as a float)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return _exactly(int)(value)


def _to_float(value: Any) -> float:
    """Numbers, and numeric strings (``"1e-3"``, as a command line passes it)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise TypeError(value)
    return float(value)


#: Simple field types -> (converter, what the error message says a value must be).
_SIMPLE: dict[Any, tuple[Any, str]] = {
    bool: (_exactly(bool), "true or false"),
    int: (_to_int, "an integer"),
    float: (_to_float, "a number"),
    str: (_exactly(str), "a string"),
}


def _coerce(name: str, value: Any, hint: Any) -> Any:
    """Coerce ``value`` to the simple type ``hint`` (int, float, str, bool, Optional of them)."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(hint)
        if value is None and type(None) in args:
            return None
        simple = [a for a in args if a is not type(None)]
        for arg in simple:  # first type that accepts the value wins
            try:
                return _coerce(name, value, arg)
            except ValueError:
                continue
        raise ValueError(f"{name}={value!a} is not a valid {hint}")
    if hint in _SIMPLE:
        convert, what = _SIMPLE[hint]
        try:
            return convert(value)
        except (TypeError, ValueError):
            raise ValueError(f"{name}={value!a} must be {what}") from None
    if origin is typing.Literal:
        if value in typing.get_args(hint):
            return value
        raise ValueError(f"{name}={value!a} must be one of {list(typing.get_args(hint))}")
    return value


def run_id_of(config: Mapping[str, Any], runner: str) -> str:
    """Stable identity of a run: the first 16 hex digits of SHA-256 of its runner and resolved config.

    The JSON is canonical (sorted keys, no spaces; floats by ``repr``), so the id is the same
    across processes, machines and Python versions.
    """
    payload = config_json({"runner": runner, "config": config}, separators=(",", ":"))
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:16]
