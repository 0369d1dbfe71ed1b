"""The toolkit in Jupyter: each library once per notebook, and a notebook exported to one offline page.

:func:`init_notebook` (the first cell of every notebook: ``el.init_notebook()``) makes the kernel
show results the way plotly's own ``notebook`` renderer does (``plotly.io.renderers``: its
``activate`` displays plotly.js once, and each figure is drawn with ``include_plotlyjs=False``):

* The cell that calls it gets one output, the **library output**, holding plotly.js (4.8 MB,
  carried deflated and base64-encoded: 1.9 MB, unpacked in the window: :func:`packed_library`);
  every later plotly figure, result display (``report``, ``run``, a ranking, a point) and
  attention view carries only its own ``<div>`` and data. The circuitsvis bundle (1.3 MB) and
  the scrubber's script join the library output the first time an output of this kernel needs
  them (``update_display_data`` on its display id, sent before that output), so a notebook
  without attention views never carries the bundle. A six-cell analysis saves at about 5 MB
  instead of 12.7 MB.
* The libraries sit in the first cell, above every output that draws with them: a cell run
  again draws (the library is already in the window), a saved notebook reopened in Jupyter runs
  the library output first, and an HTML export (:func:`export_notebook_html`, nbconvert) keeps it
  first on the page. Running the ``init_notebook`` cell again displays the library output anew
  with every library this kernel has shown so far.
* Without ``init_notebook`` (or outside a Jupyter kernel), each output carries the libraries it
  draws with, as before: a page written by ``save_html`` always holds its own.

Nothing is fetched from the network either way (no CDN, no MathJax, no require.js).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cache
from pathlib import Path

from interp.core.templating import render, trusted
from interp.report import display
from interp.report.display import LIBRARIES, Assets, figure_fragment

__all__ = ["NotebookLibraries", "export_notebook_html", "init_notebook", "library_copies", "packed_library"]


class NotebookLibraries:
    """The library output of one notebook: plotly.js when created, other libraries added the first
    time an output asks for them (:meth:`provide`), each once.

    Args:
        held: the libraries to display at once (``"plotly"`` first).
        display_fn: ``IPython.display.display`` (``display_id=True`` returns a handle whose
            ``update`` replaces the output in place).
    """

    def __init__(self, held: Sequence[str], display_fn) -> None:
        from IPython.display import HTML

        self._html = HTML
        self.held: list[str] = list(dict.fromkeys(held))
        self.handle = display_fn(HTML(self._libraries()), display_id=True)

    def _libraries(self) -> str:
        packed = [(name, packed_library(name)) for name in self.held if name in PACKED]
        scripts = [trusted(LIBRARIES[name]()) for name in self.held if name not in PACKED]
        return render("report/templates/notebook_libraries.html.j2", names=self.held, packed=packed, scripts=scripts)

    def provide(self, name: str) -> bool:
        """Make sure the library output holds ``name`` (the output is updated in place when it
        did not); True: the calling output need not carry it."""
        if name not in self.held:
            self.held.append(name)
            self.handle.update(self._html(self._libraries()))
        return True


#: The libraries the notebook's library output carries packed (deflated, base64): the large ones.
PACKED = ("plotly", "circuitsvis")


def library_copies(text: str, name: str) -> int:
    """How many copies of library ``name`` ``text`` holds (an HTML page, a notebook's HTML outputs
    or its ``.ipynb`` text): inlined (its own first line, e.g. plotly's ``* plotly.js v``) or
    packed in a notebook's library output (``/* emergence-lens library: plotly */``)."""
    inlined = {
        "plotly": "* plotly.js v",
        "circuitsvis": "window.CircuitsVis = CircuitsVis",
        "scrubber": "window.ELScrub)",
    }
    return text.count(inlined[name]) + text.count(f"/* emergence-lens library: {name} */")


@cache
def packed_library(name: str) -> str:
    """Library ``name``'s HTML (:data:`interp.report.display.LIBRARIES`) deflated (zlib, level 6)
    and base64-encoded, as the notebook's library output carries it (plotly.js: 4.8 MB -> 1.9 MB;
    the circuitsvis bundle: 1.3 MB -> 0.5 MB); the page unpacks it with ``DecompressionStream``."""
    import base64
    import zlib

    return base64.b64encode(zlib.compress(LIBRARIES[name]().encode("utf-8"), 6)).decode("ascii")


def _kernel():
    """The running IPython kernel's shell, or None (plain Python, a terminal IPython, and Google
    Colab, which draws each output in its own frame: there every output keeps its libraries)."""
    import sys

    if "google.colab" in sys.modules:
        return None
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython comes with ipykernel
        return None
    shell = get_ipython()
    return shell if shell is not None and getattr(shell, "kernel", None) is not None else None


def init_notebook() -> None:
    """Set up this Jupyter kernel: each JavaScript library once per notebook, in this cell's
    output, and plain plotly figures drawn offline through the plotly renderer ``"emergence_lens"``.

    plotly 7's default in a Jupyter kernel is its mimetype renderer, which nbconvert's HTML export
    does not draw; this renderer also keeps ``application/vnd.plotly.v1+json`` so JupyterLab's
    plotly extension, when installed, still draws the figure itself. Outside a Jupyter kernel
    only the renderer is set (each output then carries its libraries). See the module docstring.
    """
    import warnings

    import plotly.io as pio

    # tqdm.auto warns at import when ipywidgets is absent; its text bar works as it is (the
    # widget bar would need the widget manager, which nbconvert's export loads from a CDN).
    warnings.filterwarnings("ignore", message="IProgress not found")
    if "emergence_lens" not in pio.renderers:
        pio.renderers["emergence_lens"] = _offline_renderer()
    pio.renderers.default = "plotly_mimetype+emergence_lens"
    if _kernel() is None:
        return
    from IPython.display import display as display_fn

    shown = getattr(display.NOTEBOOK_LIBRARIES, "__self__", None)
    held = ["plotly", *(shown.held if isinstance(shown, NotebookLibraries) else [])]
    display.NOTEBOOK_LIBRARIES = NotebookLibraries(held, display_fn).provide


def _offline_renderer():
    """A plotly renderer whose text/html is :func:`interp.report.display.figure_fragment` (plotly.js
    from the notebook's library output after :func:`init_notebook`, else inlined in the output)."""
    from plotly.io.base_renderers import MimetypeRenderer

    class OfflineRenderer(MimetypeRenderer):
        def to_mimebundle(self, fig_dict):
            return {"text/html": figure_fragment(fig_dict, Assets())}

    return OfflineRenderer()


def export_notebook_html(notebook, out_path: str | Path | None = None) -> str:
    """Export an executed notebook to a single HTML page that makes no network request.

    nbconvert's ``lab`` template loads require.js, MathJax and mermaid from CDNs; this export
    leaves those three out (template ``report/templates/notebook_export.html.j2``; the toolkit's
    outputs need none of them: plotly.js and circuitsvis are inlined in the notebook itself).
    After :func:`init_notebook` the libraries are in one output of the first cell; without it each
    output carries the libraries it draws with, and on the exported page, where every output
    shares one window, each library is kept once, where it first appears (before any output that
    uses it), and its later copies are dropped (the main_job notebook's export: 38.4 MB -> 6.9 MB).
    Consecutive stream outputs are merged and a progress bar's carriage returns applied
    (nbconvert's ``CoalesceStreamsPreprocessor``): a bar reads as its last state, one line.

    Args:
        notebook: an ``nbformat.NotebookNode`` or a path to a ``.ipynb`` file.
        out_path: also write the page there (atomically).

    Returns:
        The HTML page.
    """
    import jinja2
    import nbformat
    from nbconvert import HTMLExporter

    if not hasattr(notebook, "cells"):
        notebook = nbformat.read(str(notebook), as_version=4)
    from interp.core.templating import PACKAGE_ROOT

    exporter = HTMLExporter(
        template_name="lab",
        extra_loaders=[jinja2.FileSystemLoader(str(PACKAGE_ROOT / "report" / "templates"))],
        template_file="notebook_export.html.j2",
    )
    from nbconvert.preprocessors import CoalesceStreamsPreprocessor

    # a progress bar's redraws ("\r") arrive as many stream outputs: one line each, as Jupyter shows it
    exporter.register_preprocessor(CoalesceStreamsPreprocessor(enabled=True), enabled=True)
    body, _ = exporter.from_notebook_node(notebook)
    body = _keep_first_copy(body, [LIBRARIES[name]() for name in LIBRARIES])
    if out_path is not None:
        from interp.core.io import atomic_write_text

        atomic_write_text(Path(out_path), body)
    return body


_ELEMENT = re.compile(r"<(script|style)\b[^>]*>(.*?)</\1>", re.S)
_OPENING = re.compile(r"<(script|style)\b[^>]*>\Z")


def _keep_first_copy(page: str, libraries: Sequence[str]) -> str:
    """``page`` without the second and later copies of each ``<script>`` / ``<style>`` element of
    ``libraries`` (matched by their contents: nbconvert rewrites the tags' quotes, not their
    contents; elements under 1000 characters, such as plotly's one-line config, are left alone)."""
    for library in libraries:
        for element in _ELEMENT.finditer(library):
            tag, body = element.group(1), element.group(2)
            first = page.find(body)
            if len(body) < 1000 or first < 0:
                continue
            close = f"</{tag}>"
            kept, pos = [page[: first + len(body)]], first + len(body)
            while (found := page.find(body, pos)) >= 0:
                after = found + len(body)
                start = page.rfind(f"<{tag}", pos, found)
                if start >= 0 and _OPENING.match(page, start, found) and page.startswith(close, after):
                    kept.append(page[pos:start])  # the whole element goes
                    pos = after + len(close)
                else:  # the text inside something else (an escaped listing, say): kept
                    kept.append(page[pos:after])
                    pos = after
            page = "".join(kept) + page[pos:]
    return page
