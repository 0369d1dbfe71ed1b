"""The attention-pattern scrubber's page script and style, read from the package's data files
(:mod:`interp.report.scrubber` draws with them; :data:`interp.report.display.LIBRARIES` inlines
them once per page, so a saved page opens offline from ``file://``).

The files: ``interp/report/static/scrubber.js`` (defines ``window.ELScrub``: ``ELScrub.mount(id)``
reads the scrubber's JSON, the payload of :meth:`interp.report.scrubber.ScrubData.payload`, inflates
the pattern bytes with the browser's ``DecompressionStream`` and draws one canvas per head; the
slider, the keys, the play button, the difference against the previous or any chosen step, the fixed
difference range, the order of the heads and the enlarged head) and
``interp/report/static/scrubber.css``; the markup they drive is
``interp/report/templates/scrubber.html.j2``. All three ship in the wheel (pyproject.toml,
``[tool.setuptools.package-data]``). Why a hand-written canvas grid instead of plotly frames: the
scrubber's module docstring.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

__all__ = ["STATIC", "scrub_script", "static_text"]

#: The folder of the scrubber's script and style (package data).
STATIC = Path(__file__).resolve().parent / "static"


@lru_cache(maxsize=4)
def static_text(name: str) -> str:
    """The text of ``interp/report/static/<name>`` without its whole-line comments and indentation,
    checked to be safe to inline.

    Raises:
        ValueError: ``name`` is not one of the files there (the valid names listed), or the file
            holds ``</script`` or ``</style`` (it would end its inlined element early).
    """
    valid = sorted(p.name for p in STATIC.iterdir() if p.is_file())
    if name not in valid:
        raise ValueError(f"no static file {name!r}; valid: {', '.join(valid)}")
    text = (STATIC / name).read_text(encoding="utf-8")
    # the page carries no comments and no indentation (~1.5 kB of the page; the files keep them):
    # whole-line comments only, so nothing inside a string or a rule is touched
    comment = ("//",) if name.endswith(".js") else ("/*",)
    text = "\n".join(line.strip() for line in text.splitlines() if not line.strip().startswith(comment))
    if re.search(r"</(script|style)", text, re.IGNORECASE):
        raise ValueError(f"static file {name!r} holds '</script' or '</style'; it cannot be inlined")
    return text


def scrub_script() -> str:
    """The scrubber's style and page script as ``<style>`` and ``<script>`` elements (defines
    ``window.ELScrub``; inlined once per page)."""
    return (
        f"<style>{static_text('scrubber.css')}</style>"
        f"<script type='text/javascript'>{static_text('scrubber.js')}</script>"
    )
