"""docs/errors.md is what the code says (issue 21): every error class of interp/, synthetic/ and
sweeps/ is listed with its meaning, its fix and the messages it is raised with."""

from __future__ import annotations

import ast
import builtins
import re

import pytest

from emergence_lens import errors_catalogue as cat


@pytest.fixture(scope="module")
def entries():
    return cat.catalogue()


def test_docs_errors_md_is_the_generators_output(entries):
    assert cat.PAGE.read_text() == cat.render(entries), (
        "docs/errors.md differs from the code; run: python -m emergence_lens.errors_catalogue"
    )


def test_every_error_class_is_listed_with_meaning_and_fix(entries):
    classes = cat.error_classes()
    assert [e.name for e in entries] == [c.__name__ for c in classes]
    # the walk finds classes of every kind of module, and subclasses of subclasses
    names = {e.name: e for e in entries}
    assert {"CheckpointError", "CorruptCheckpointError", "TaskError", "TaskFileError"} <= set(names)
    assert names["TaskFileError"].base == "TaskError"
    for e in entries:
        assert len(e.meaning) > 40 and len(e.fix) > 20, e.name
        assert e.module.split(".")[0] in cat.PACKAGES


def test_a_class_without_a_fix_paragraph_is_refused():
    class NoFixError(ValueError):
        """Something went wrong."""

    class Inherited(ValueError):
        pass

    for cls in (NoFixError, Inherited):
        with pytest.raises(ValueError, match=r"NoFixError|Inherited.*'Fix: \.\.\.'"):
            cat.split_docstring(cls)

    class GoodError(ValueError):
        """It means this.

        Fix: do that.
        """

    assert cat.split_docstring(GoodError) == ("It means this.", "Do that.")


def test_messages_are_read_from_the_raise_statements(entries):
    names = {e.name: e for e in entries}
    # every message pattern named in the page comes from a raise statement in that file
    for e in entries:
        for file, _function, message in e.messages:
            source = (cat.ROOT / file).read_text()
            assert any(f"{how}{e.name}(" in source for how in ("raise ", "return ", ".")), (e.name, file)
            literal = re.split(r"\{[^}]*\}", message)[0][:20]
            assert literal in source, (e.name, file, message)
    checkpoint = [m for _, _, m in names["CheckpointError"].messages]
    assert any("has no checkpoint at step {step}" in m for m in checkpoint)
    assert names["TaskFileError"].messages  # its list-of-lines messages render as their first line
    assert all(m and not m.startswith("{[") for _, _, m in names["TaskFileError"].messages)


@pytest.mark.slow
def test_check_flag(tmp_path, entries, capsys):
    out = tmp_path / "errors.md"
    assert cat.main(["--check", "--out", str(out)]) == 1
    out.write_text(cat.render(entries))
    assert cat.main(["--check", "--out", str(out)]) == 0


#: every folder of the project's Python code (the packages, and the scripts beside them)
CODE_DIRS = ("interp", "synthetic", "sweeps", "analyses", "emergence_lens", "benchmarks", "tools")


def _project_trees():
    for folder in CODE_DIRS:
        for path in sorted((cat.ROOT / folder).rglob("*.py")):
            yield path.relative_to(cat.ROOT).as_posix(), ast.parse(path.read_text(), filename=str(path))


def test_every_exception_class_of_the_code_is_catalogued(entries):
    """Read with ast, not imported: a class in a folder the catalogue does not import is found too."""
    exceptions = {
        name for name, obj in vars(builtins).items() if isinstance(obj, type) and issubclass(obj, BaseException)
    }
    classes = {}
    for file, tree in _project_trees():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                bases = [
                    b.id if isinstance(b, ast.Name) else b.attr if isinstance(b, ast.Attribute) else ""
                    for b in node.bases
                ]
                classes[(file, node.name)] = bases
    own, grew = set(), True
    while grew:  # subclasses of subclasses
        before = len(own)
        own |= {
            key for key, bases in classes.items() if any(b in exceptions or b in {k[1] for k in own} for b in bases)
        }
        grew = len(own) > before
    listed = {e.name for e in entries}
    assert {name for _, name in own} - listed == set(), "exception classes missing from docs/errors.md"
    assert {"FinishedOnlyError", "_LazyCommandError", "HubUnavailableError"} <= listed


def test_every_message_of_a_catalogued_class_has_its_row(entries):
    """Each call of a catalogued class anywhere in the code (a raise, a return, ``error = X(...)``)
    with a message has that message on the page, under its class and file: none is raised unlisted."""
    page = cat.PAGE.read_text()
    sections = {e.name: page.split(f"\n## {e.name}\n", 1)[1].split("\n## ", 1)[0] for e in entries}
    missing, calls = [], 0
    for file, tree in _project_trees():
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
            if name not in sections or not node.args:
                continue
            calls += 1
            message = cat._text(node.args[0])
            if f"`{file}`" not in sections[name] or message not in sections[name]:
                missing.append(f"{file}:{node.lineno} {name}({message[:60]}...)")
    assert calls >= 80  # the raise sites the catalogue reads (82 when this was written)
    assert missing == [], f"messages without a row in docs/errors.md: {missing}"


def test_the_hub_failures_have_rows_that_say_what_to_do(entries):
    hub = {e.name: e for e in entries}["HubUnavailableError"]
    messages = [m for _, _, m in hub.messages]
    assert any(m.startswith("cannot download {source.model_id}: HF_HUB_OFFLINE=1 is set") for m in messages)
    assert any("has no checkpoint branches (step{N}, ...) in the local hub cache" in m for m in messages)
    assert any("run the same command again" in m for m in messages)
    assert "emergence download MODEL --grid 30" in hub.fix
