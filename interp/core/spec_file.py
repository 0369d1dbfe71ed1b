"""Spec files: one reader and one set of rules for suite specs and sweep specs.

A spec must mean what a person reads. PyYAML reads YAML 1.1, where ``010`` is octal 8, ``1e-3``
is text and ``off`` is ``False``; so ``seeds: [007, 010]`` trained seeds 7 and 8 and the suite's
hash followed the wrong values. Here a spec is read by ruamel.yaml's safe loader with the YAML
1.2 core schema (``010`` -> 10, ``0o10`` -> 8, ``1e-3`` -> 0.001, ``off`` -> ``"off"``), and the
rules below are checked on what the file *says* (its scalars' text), before any value is used:

* **A leading zero is refused** (``007``, ``010``, ``0400``): YAML 1.2 reads it as decimal, YAML
  1.1 (PyYAML, most older tooling) as octal, and a person may mean either; the line names the key,
  the text and both readings. Write ``10``, or ``0o10`` for octal.
* **Dates and other typed scalars are refused** (``2024-01-01``): a spec holds numbers, text,
  true/false and null; quote a text that looks like a date.
* **A key given twice is refused** (YAML 1.1 loaders and ``json`` silently keep the last).
* **Names are ASCII** (``[A-Za-z0-9._-]``): a key or a name with another character (a Cyrillic
  es, U+0441, that looks like ``c``) is refused in one line that shows it escaped (``'n_\\u0441tx'``),
  names the character and says which valid key it resembles (:func:`unknown_key_message`,
  :func:`check_name`).

JSON and TOML specs are read by their own parsers (neither has a leading-zero or date ambiguity:
JSON refuses leading zeros, TOML's dates are explicit).

Errors are :class:`SpecError`, a ``ValueError``, in one line naming the file and line.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import tomllib
import unicodedata
from collections.abc import Iterable
from pathlib import Path
from typing import Any


class SpecError(ValueError):
    """A suite or sweep spec file does not say one thing: a YAML/JSON/TOML syntax error, a number
    written with a leading zero (YAML 1.2 reads ``010`` as 10, YAML 1.1 as octal 8), a date or
    other typed value, a key given twice, or a key or name with a character outside ASCII
    ``[A-Za-z0-9._-]`` (a look-alike such as the Cyrillic es U+0441, shown escaped). The message names
    the file, the line, the key and the text.

    Fix: write the number without the leading zero (``10``, or ``0o10`` for octal), quote a text
    that YAML would read as a date, give each key once, and retype the name in ASCII (the message
    says which valid key it resembles).
    """


#: What a name in a spec may hold: a key, a size name, a run name (ASCII only).
NAME_PATTERN = re.compile(r"[A-Za-z0-9._-]+", re.ASCII)
#: The YAML tags a spec's scalars may carry (core schema): text, integers, floats, booleans, null.
_PLAIN_TAGS = {f"tag:yaml.org,2002:{kind}" for kind in ("str", "int", "float", "bool", "null")}
_LEADING_ZERO = re.compile(r"[-+]?0[0-9_]+")


def read_spec_file(path: str | os.PathLike, what: str = "spec") -> Any:
    """The content of a spec file (``.yaml``/``.yml``, ``.json``, ``.toml``), by its suffix.

    Args:
        path: the file.
        what: how messages name the file (``"suite spec"``, ``"sweep spec"``).

    Returns:
        The parsed document: mappings, lists, str, int, float, bool, None (None for an empty file).

    Raises:
        SpecError: a syntax error or a broken rule of the module docstring, in one line naming
            the file and line.
        FileNotFoundError: ``path`` does not exist.
    """
    path = Path(path)
    return parse_spec_text(path.read_text(encoding="utf-8"), path.suffix.lower(), path, what)


def parse_spec_text(text: str, suffix: str, path: str | os.PathLike = "<spec>", what: str = "spec") -> Any:
    """Parse a spec's text by its file suffix (``.yaml``/``.yml`` or anything else YAML, ``.json``,
    ``.toml``) under the rules of the module docstring.

    Raises:
        SpecError: a syntax error (``{path}:{line}:{column}: YAML syntax error: ...``) or a broken
            rule (``{path}:{line}: {key} is written '010' ...``).
    """
    if suffix == ".toml":
        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError as err:  # its message already ends "(at line L, column C)"
            raise SpecError(f"{path}: TOML syntax error: {err}") from None
    if suffix == ".json":
        try:
            return json.loads(text, object_pairs_hook=lambda pairs: _json_object(pairs, path, what))
        except json.JSONDecodeError as err:
            raise SpecError(f"{path}:{err.lineno}:{err.colno}: JSON syntax error: {err.msg}") from None
    from ruamel.yaml import YAML
    from ruamel.yaml.error import MarkedYAMLError, YAMLError

    yaml = YAML(typ="safe", pure=True)  # YAML 1.2 core schema; duplicate keys refused
    try:
        node = yaml.compose(text)
        if node is not None:
            _check_node(node, "", path, what)
        return yaml.load(text)
    except MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(path)
        problem = (err.problem or err.context or "").strip()
        if err.__class__.__name__ == "DuplicateKeyError":
            problem = problem.split(" with value")[0]  # 'found duplicate key "a"'
            raise SpecError(f"{where}: {what}: {problem}; give each key once") from None
        raise SpecError(f"{where}: YAML syntax error: {problem}") from None
    except YAMLError as err:
        raise SpecError(f"{path}: YAML syntax error: {str(err).splitlines()[0]}") from None


def _json_object(pairs: list[tuple[str, Any]], path: Any, what: str) -> dict[str, Any]:
    """A JSON object, refused when it gives a key twice (``json`` keeps the last silently)."""
    keys = [key for key, _ in pairs]
    twice = sorted({key for key in keys if keys.count(key) > 1})
    if twice:
        raise SpecError(f"{path}: {what}: found duplicate key {twice[0]!a}; give each key once")
    return dict(pairs)


def _check_node(node: Any, where: str, path: Any, what: str, seen: set[int] | None = None) -> None:
    """The module's rules on one composed YAML node and everything under it (an alias's node once)."""
    from ruamel.yaml.nodes import MappingNode, ScalarNode, SequenceNode

    seen = set() if seen is None else seen
    if id(node) in seen:  # an alias (possibly of a node holding itself) is checked where it is defined
        return
    seen.add(id(node))
    if isinstance(node, MappingNode):
        for key, value in node.value:
            label = key.value if isinstance(key, ScalarNode) else "?"
            label = label if isinstance(label, str) and label.isascii() else ascii(label)
            _check_node(key, where, path, what, seen)
            _check_node(value, f"{where}.{label}" if where else label, path, what, seen)
    elif isinstance(node, SequenceNode):
        for i, item in enumerate(node.value):
            _check_node(item, f"{where}[{i}]", path, what, seen)
    elif isinstance(node, ScalarNode):
        tag, text, line = str(node.tag), node.value, node.start_mark.line + 1
        key = where or "the document"
        if tag == "tag:yaml.org,2002:int" and _LEADING_ZERO.fullmatch(text):
            digits = text.lstrip("+-").replace("_", "")
            decimal = int(text.replace("_", ""))
            sign = "-" if text.startswith("-") else ""
            octal = set(digits) <= set("01234567")
            old = f"octal {sign}{int(digits, 8)}" if octal else f"the text {text!a}"
            fix = f"write {decimal}" + (f", or {sign}0o{digits.lstrip('0') or '0'} for octal" if octal else "")
            raise SpecError(
                f"{path}:{line}: {what}: {key} is written {text!a}, a number with a leading zero: YAML 1.2 "
                f"reads it as {decimal}, YAML 1.1 (PyYAML) as {old}; {fix}"
            )
        if tag not in _PLAIN_TAGS:
            kind = tag.rsplit(":", 1)[-1] if tag.startswith("tag:yaml.org,2002:") else tag
            raise SpecError(
                f"{path}:{line}: {what}: {key} is written {text!a}, which YAML reads as a {kind}; a spec "
                "holds numbers, text, true/false and null: quote it if you mean text"
            )


# ------------------------------------------------------------------------------------------------
# Names: ASCII, and a look-alike named as such
# ------------------------------------------------------------------------------------------------
def non_ascii_note(text: str) -> str:
    """``"'\\u0441' is CYRILLIC SMALL LETTER ES, not ASCII"`` for the first non-ASCII character of
    ``text``; ``""`` when it has none."""
    for char in text:
        if ord(char) > 127:
            return f"{char!a} is {unicodedata.name(char, f'U+{ord(char):04X}')}, not ASCII"
    return ""


def resembles(text: str, valid: Iterable[str]) -> str | None:
    """The valid ASCII name a name with non-ASCII characters looks like, or None (None for an
    ASCII ``text``: a plain typo is listed with the valid names, not guessed at).

    In this order: the compatibility fold (NFKD, marks dropped: a fullwidth ``n`` or a ``c`` with cedilla
    -> ``n_ctx``);
    a valid name of the same length equal at every ASCII position (a look-alike letter swapped
    in: ``'n_\\u0441tx'`` with a Cyrillic es); the closest by :func:`difflib.get_close_matches`
    (ratio >= 0.6)."""
    if text.isascii():
        return None
    valid = [v for v in valid if isinstance(v, str)]
    folded = unicodedata.normalize("NFKD", text)
    folded = "".join(c for c in folded if not unicodedata.combining(c))
    if folded in valid:
        return folded
    swapped = [
        v for v in valid if len(v) == len(text) and all(a == b for a, b in zip(text, v, strict=True) if a.isascii())
    ]
    if len(swapped) == 1:
        return swapped[0]
    match = difflib.get_close_matches(text, valid, n=1, cutoff=0.6)
    return match[0] if match else None


def unknown_key_message(where: str, key: Any, valid: Iterable[str], noun: str = "key") -> str:
    """One line for a key that is not one of ``valid``: the key escaped (``'n_\\u0441tx'``), its
    first non-ASCII character named, the valid key it resembles, and the valid keys.

    Args:
        where: the prefix, e.g. ``"suite spec: sizes[0]"``.
        key: the key as read.
        valid: the valid keys, in the order to list them.
        noun: what a key is called here (``"key"``, ``"config field"``).
    """
    valid = list(valid)
    text = str(key)
    note = non_ascii_note(text)
    names_rule = f": {note} (names in specs are ASCII letters, digits, '.', '_' and '-')" if note else ""
    near = resembles(text, valid)
    hint = f"; it resembles {near!r}" if near is not None else ""
    return f"{where}: unknown {noun} {text!a}{names_rule}{hint}; valid: {', '.join(valid)}"


def check_name(where: str, value: Any, valid: Iterable[str] = ()) -> str:
    """``value`` if it is an ASCII name (``[A-Za-z0-9._-]``, starting with a letter or digit).

    Raises:
        SpecError: anything else, in one line: the value escaped, its first non-ASCII character
            named, and the valid name it resembles when ``valid`` is given.
    """
    if isinstance(value, str) and NAME_PATTERN.fullmatch(value) and value[0].isalnum():
        return value
    shown = ascii(value) if isinstance(value, str) else repr(value)
    note = non_ascii_note(value) if isinstance(value, str) else ""
    near = resembles(value, valid) if isinstance(value, str) else None
    raise SpecError(
        f"{where}={shown}: a name is ASCII letters, digits, '.', '_' and '-', starting with a letter or digit"
        + (f"; {note}" if note else "")
        + (f"; it resembles {near!r}" if near is not None else "")
    )


def dump_spec_text(data: Any) -> str:
    """YAML text of a spec's mapping that :func:`parse_spec_text` reads back to equal values (the
    same YAML 1.2 core schema: a text such as ``"1e-3"`` or ``"010"`` is quoted); keys in their
    order."""
    import io

    from ruamel.yaml import YAML

    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    yaml.sort_base_mapping_type_on_output = False
    stream = io.StringIO()
    yaml.dump(data, stream)
    return stream.getvalue()
