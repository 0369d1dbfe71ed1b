"""The error catalogue: every exception class of ``interp``, ``synthetic``, ``sweeps``, ``analyses``
and ``emergence_lens``, with what it means, the fix and the one-line messages the code raises it
with -> ``docs/errors.md``.

``python -m emergence_lens.errors_catalogue`` rewrites ``docs/errors.md``; ``--check`` exits 1
when the page differs from what the code says (``tests/emergence_lens/test_errors_catalogue.py`` asserts the
same, so the page cannot fall behind the code).

Where the facts come from:

* the classes: every module of the packages is imported (``__main__`` modules left out: they
  run the command) and every subclass of ``Exception`` *defined* there (``cls.__module__`` is that
  module) is listed;
* meaning and fix: the class docstring, which must read ``<meaning>`` then a paragraph starting
  ``Fix:`` (the test refuses a class without one);
* messages: every ``raise <Class>(...)`` (and ``return <Class>(...)``, a function building the
  error its caller raises) in the packages' source, read with :mod:`ast`; an f-string's fields
  are shown as ``{expression}``. ``tests/emergence_lens/test_errors_catalogue.py`` checks that no other call of
  a catalogued class (``error = Class(...)``; ``raise error``) hides a message from the page.

It lives here, above ``interp``, ``synthetic`` and ``sweeps``, because it imports them (nothing
below may import upward); ``analyses`` is imported by name (``importlib``), as the ``results``
command is.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import inspect
import pkgutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: packages whose exception classes are catalogued
PACKAGES = ("interp", "synthetic", "sweeps", "analyses", "emergence_lens")
#: packages whose ``raise`` statements are read for messages
RAISE_PACKAGES = PACKAGES
PAGE = ROOT / "docs" / "errors.md"


@dataclass
class ErrorEntry:
    """One catalogued class: its name, module, base, docstring parts and raise sites."""

    name: str
    module: str
    base: str
    meaning: str
    fix: str
    messages: list[tuple[str, str, str]] = field(default_factory=list)  # (file, function, message pattern)


def error_classes(packages: tuple[str, ...] = PACKAGES) -> list[type]:
    """Every subclass of ``Exception`` defined in a module of ``packages``, sorted by module, then name.

    Raises:
        ImportError: a module of the packages cannot be imported (a class there would be missed).
    """
    found = {}
    for package in packages:
        root = importlib.import_module(package)
        modules = [root] + [
            importlib.import_module(info.name)
            for info in pkgutil.walk_packages(root.__path__, package + ".")
            if not info.name.endswith(".__main__")  # running it is the command
        ]
        for module in modules:
            for obj in vars(module).values():
                if inspect.isclass(obj) and issubclass(obj, Exception) and obj.__module__ == module.__name__:
                    found[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return [found[key] for key in sorted(found)]


def split_docstring(cls: type) -> tuple[str, str]:
    """``(meaning, fix)`` of a class docstring ``<meaning>\\n\\nFix: <fix>`` (each joined onto one line).

    Raises:
        ValueError: no docstring, or no paragraph starting ``Fix:`` (names the class).
    """
    doc = inspect.cleandoc(cls.__doc__ or "") if "__doc__" in vars(cls) else ""
    paragraphs = [" ".join(p.split()) for p in doc.split("\n\n") if p.strip()]
    fixes = [i for i, p in enumerate(paragraphs) if p.startswith("Fix:")]
    if not paragraphs or not fixes or fixes[0] == 0:
        raise ValueError(
            f"{cls.__module__}.{cls.__qualname__}: its docstring must say what the error means, "
            "then a paragraph 'Fix: ...' (docs/errors.md is built from it)"
        )
    i = fixes[0]
    fix = " ".join([paragraphs[i][len("Fix:") :].strip()] + paragraphs[i + 1 :])
    return " ".join(paragraphs[:i]), fix[:1].upper() + fix[1:]


def _text(node: ast.AST) -> str:
    """A message expression as a pattern: literal text kept, every computed part as ``{expression}``."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(
            _text(v) if isinstance(v, ast.Constant) else "{" + ast.unparse(v.value) + "}" for v in node.values
        )
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _text(node.left) + _text(node.right)
    if isinstance(node, (ast.List, ast.Tuple)) and node.elts:  # TaskFileError([line, ...]): the first line
        return _text(node.elts[0])
    return "{" + ast.unparse(node) + "}"


def raise_sites(names: set[str], packages: tuple[str, ...] = RAISE_PACKAGES) -> dict[str, list[tuple[str, str, str]]]:
    """``class name -> [(file, function, message pattern)]`` for every ``raise Name(...)`` /
    ``raise module.Name(...)`` in the packages' source, and every ``return Name(...)`` (a function
    that builds the error its caller raises), in file order."""
    sites: dict[str, list[tuple[str, str, str]]] = {name: [] for name in names}
    for package in packages:
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text(), filename=str(path))
            for scope, node in _walk(tree, ""):
                call = node.exc if isinstance(node, ast.Raise) else node.value if isinstance(node, ast.Return) else None
                if not isinstance(call, ast.Call):
                    continue
                func = call.func
                name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
                if name in sites:
                    message = _text(call.args[0]) if call.args else ""
                    sites[name].append((path.relative_to(ROOT).as_posix(), scope or "(module)", message))
    return sites


def _walk(node: ast.AST, scope: str):
    """``(qualified function name, node)`` for every node under ``node``."""
    for child in ast.iter_child_nodes(node):
        inner = scope
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            inner = f"{scope}.{child.name}" if scope else child.name
        yield inner if not isinstance(child, ast.ClassDef) else scope, child
        yield from _walk(child, inner)


def catalogue() -> list[ErrorEntry]:
    """Every catalogued error class with its meaning, fix and raise sites.

    Raises:
        ValueError: a class whose docstring has no ``Fix:`` paragraph.
    """
    classes = error_classes()
    sites = raise_sites({cls.__name__ for cls in classes})
    entries = []
    for cls in classes:
        meaning, fix = split_docstring(cls)
        base = cls.__mro__[1]
        entries.append(ErrorEntry(cls.__name__, cls.__module__, base.__name__, meaning, fix, sites[cls.__name__]))
    return entries


def _code(text: str) -> str:
    """Inline code that may itself hold backticks."""
    return f"`` {text} ``" if "`" in text else f"`{text}`"


def render(entries: list[ErrorEntry]) -> str:
    """The text of ``docs/errors.md``."""
    lines = [
        "# Error catalogue",
        "",
        "<!-- Generated by `python -m emergence_lens.errors_catalogue` from the error classes and the",
        "     `raise` statements of the code; do not edit by hand (tests/emergence_lens/test_errors_catalogue.py). -->",
        "",
        "Every exception class that `interp/`, `synthetic/`, `sweeps/`, `analyses/` and `emergence_lens/`",
        "define, with what it means, the fix, and each one-line message the code raises it with",
        "(`{...}` marks a value filled in at run time). On the command line each is one line,",
        "`error: emergence <command>: <message>`, exit status 2 (`--debug` shows the traceback). Bad",
        "input to a public function is a `ValueError` (or one of the subclasses below) naming the bad",
        "value and what would be valid, raised before anything is loaded or trained.",
        "",
        "| error | base | module | meaning |",
        "| --- | --- | --- | --- |",
    ]
    for e in entries:
        meaning = e.meaning.replace("|", "\\|")
        lines.append(f"| [{e.name}](#{e.name.lower()}) | `{e.base}` | `{e.module}` | {meaning} |")
    for e in entries:
        lines += [
            "",
            f"## {e.name}",
            "",
            f"`{e.module}.{e.name}`, a `{e.base}`.",
            "",
            f"**Meaning.** {e.meaning}",
            "",
            f"**Fix.** {e.fix}",
            "",
        ]
        if e.messages:
            lines.append("**Messages** (file, function: message):")
            lines.append("")
            lines += [
                f"- `{file}`, `{function}`: {_code(message) if message else '(no message)'}"
                for file, function, message in e.messages
            ]
        else:
            lines.append(
                "**Messages**: raised by no `raise` statement of this code (a base class, caught, or "
                "raised by a caller's code)."
            )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m emergence_lens.errors_catalogue", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--check", action="store_true", help="exit 1 if docs/errors.md differs from the code")
    parser.add_argument("--out", type=Path, default=PAGE, help="the page to write (default docs/errors.md)")
    args = parser.parse_args(argv)
    text = render(catalogue())
    if args.check:
        same = args.out.is_file() and args.out.read_text() == text
        print(f"{args.out}: {'up to date' if same else 'differs; run python -m emergence_lens.errors_catalogue'}")
        return 0 if same else 1
    from interp.core.io import atomic_write_text

    atomic_write_text(args.out, text)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
