"""One Jinja2 environment for every HTML page and fragment the toolkit writes (ground floor).

Every template is package data beside the code that fills it (``interp/<floor>/templates/``:
``core/templates/table.html.j2``, ``report/templates/page.html.j2``,
``population/templates/page.html.j2``, ...), named by its path inside the ``interp`` package, and
rendered through :func:`render` with autoescape on: any ``str`` a template receives is text
(run names, tokens, titles, task files' prompts are data, never markup). HTML that the toolkit
built itself (a fragment another template rendered, plotly's figure ``<div>``, a library's
``<script>``) travels as :class:`markupsafe.Markup` and is inlined as it is; :func:`trusted`
says so where it is handed over. Style sheets and scripts are package data files too
(:func:`package_text`). The loader reads the ``interp`` package's folder, so a wheel ships the
templates through ``[tool.setuptools.package-data]`` (pyproject.toml).
"""

from __future__ import annotations

from functools import cache, lru_cache
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from markupsafe import Markup, escape

__all__ = ["PACKAGE_ROOT", "environment", "package_text", "render", "trusted", "wbr"]

#: The ``interp`` package's folder: template names are paths below it.
PACKAGE_ROOT = Path(__file__).resolve().parents[1]


@lru_cache(maxsize=1)
def environment() -> Environment:
    """The toolkit's one Jinja2 environment: templates found by their path inside ``interp``
    (``"report/templates/page.html.j2"``), autoescape on for every template, an undefined name an
    error (``StrictUndefined``), block tags leaving no blank lines."""
    env = Environment(
        loader=FileSystemLoader(str(PACKAGE_ROOT)),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["wbr"] = wbr
    return env


def wbr(text) -> Markup:
    """``text`` escaped, with a line-break opportunity (``<wbr>``) after each underscore: the
    ``wbr`` filter (table headers such as ``jump_too_small`` wrap instead of overflowing)."""
    return Markup("_<wbr>").join(escape(part) for part in str(text).split("_"))


def render(template: str, /, **context) -> str:
    """The template ``template`` (a path inside ``interp``) rendered with ``context`` (autoescaped;
    any name, ``name`` and ``template`` included, may be a context key).

    Returns a plain ``str`` (not ``Markup``: ``Markup + str`` would escape the ``str``); pass it
    to another template through :func:`trusted`.

    Raises:
        jinja2.TemplateNotFound: no template ``template``.
        jinja2.UndefinedError: the template reads a name ``context`` lacks.
    """
    return environment().get_template(template).render(**context)


def trusted(fragment: str | None) -> Markup:
    """HTML the toolkit built itself (a rendered template, plotly's ``<div>``, a library's
    ``<script>``) marked for inlining as it is; ``None`` becomes ``""``."""
    return Markup(fragment or "")


@cache
def package_text(name: str) -> str:
    """A style sheet or script shipped with the package (``"report/templates/page.css"``), read once."""
    return (PACKAGE_ROOT / name).read_text(encoding="utf-8")
