"""docs/errors.md is what the code says (issue 21): every error class of interp/, synthetic/ and
sweeps/ is listed with its meaning, its fix and the messages it is raised with."""

from __future__ import annotations

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
            assert f"raise {e.name}(" in source or f".{e.name}(" in source, (e.name, file)
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
