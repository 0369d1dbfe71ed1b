"""The pages' templates (issue 42, item 5): every template parses in the one environment, ships
in a wheel (pyproject's package data covers each file), and treats text as text."""

from __future__ import annotations

import fnmatch
import tomllib
from pathlib import Path

import pandas as pd
from markupsafe import Markup

from interp.core.html_fragments import key_values_fragment, table_fragment
from interp.core.templating import PACKAGE_ROOT, environment, render

HOSTILE = "<!--<script>alert(1)</script>&\"'"


def template_files() -> list[Path]:
    return sorted(p for p in PACKAGE_ROOT.glob("*/templates/*") if p.is_file())


def test_every_template_parses_and_is_package_data():
    files = template_files()
    assert len(files) >= 25  # core, report and population templates and style sheets
    pyproject = tomllib.loads((PACKAGE_ROOT.parent / "pyproject.toml").read_text(encoding="utf-8"))
    package_data = pyproject["tool"]["setuptools"]["package-data"]
    for path in files:
        relative = path.relative_to(PACKAGE_ROOT).as_posix()
        package, inside = "interp." + relative.split("/")[0], "/".join(relative.split("/")[1:])
        assert any(fnmatch.fnmatch(inside, g) for g in package_data.get(package, [])), f"{relative}: not package data"
        if path.name.endswith(".html.j2") and path.name != "notebook_export.html.j2":  # that one extends nbconvert's
            environment().get_template(relative)


def test_text_is_escaped_and_markup_of_our_own_is_kept():
    df = pd.DataFrame({HOSTILE: [HOSTILE], "jump_too_small": [0.5]})
    table = table_fragment(df, caption=HOSTILE)
    assert "<script>" not in table and "<!--" not in table
    assert table.count("&lt;script&gt;alert(1)&lt;/script&gt;") == 3  # header, cell, caption
    assert "<th>jump_<wbr>too_<wbr>small</th>" in table and "<td>0.500</td>" in table  # headers wrap at "_"
    kv = key_values_fragment({HOSTILE: HOSTILE}, caption=Markup("<b>bold</b> {}").format(HOSTILE))
    assert "<b>bold</b> &lt;!--" in kv and "<script>" not in kv
    section = render("report/templates/section_body.html.j2", parts=[Markup("<div>ours</div>")], caption=HOSTILE)
    assert section.startswith("<div>ours</div>") and "&lt;script&gt;" in section
