"""The HTML tables and styles every displayed result shares (ground floor).

A DataFrame as a compact table (:func:`table_fragment`), a handful of scalars as a two-column
table (:func:`key_values_fragment`) and the ``.el-*`` styles (:data:`STYLE`, :func:`style_tag`):
:func:`interp.core.objects.fields_html` builds a result's display from them, and the report
(:mod:`interp.report.display`, which re-exports them, and :mod:`interp.report.page`) builds its
tables from them. Text from users or tokenizers is data, never markup: ``DataFrame.to_html``
escapes cells and headers, and key-value names and values go through :func:`html.escape`.
"""

from __future__ import annotations

import html
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: pandas is imported by whoever passes a DataFrame
    import pandas as pd

__all__ = ["STYLE", "key_values_fragment", "style_tag", "table_fragment"]


def table_fragment(df: pd.DataFrame, digits: int = 3, caption: str | None = None) -> str:
    """A DataFrame as a compact HTML table: floats to ``digits`` decimals, missing values as "—",
    underscores in headers allowed to break (so that wide tables wrap instead of overflowing)."""
    table = df.to_html(index=False, na_rep="—", float_format=lambda v: f"{v:.{digits}f}", classes="el-table", border=0)
    table = re.sub(r"<th>([^<]*)</th>", lambda m: "<th>" + m.group(1).replace("_", "_<wbr>") + "</th>", table)
    note = f"<p class='el-caption'>{caption}</p>" if caption else ""
    return f"<div class='el-table-wrap'>{table}</div>{note}"


def key_values_fragment(values: dict, caption: str | None = None) -> str:
    """A two-column table (name, value) for a handful of scalars."""
    rows = "".join(
        f"<tr><th>{html.escape(str(k))}</th><td>{html.escape(_format(v))}</td></tr>" for k, v in values.items()
    )
    note = f"<p class='el-caption'>{caption}</p>" if caption else ""
    return f"<div class='el-table-wrap'><table class='el-table el-kv'>{rows}</table></div>{note}"


def _format(value) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return "—"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


#: Styles shared by the report page and notebook outputs (scoped to ``.el-*`` classes).
STYLE = """
.el-table-wrap{max-width:100%;overflow-x:auto}
table.el-table{border-collapse:collapse;font-size:13px;font-variant-numeric:tabular-nums}
table.el-table td,table.el-table th{border:1px solid #ccc;padding:2px 6px;text-align:right}
table.el-table td{white-space:nowrap}
table.el-table th{background:#f4f4f4;overflow-wrap:normal;word-break:normal;hyphens:none;vertical-align:bottom}
table.el-kv th{text-align:left}
.el-caption{color:#444;font-size:0.9em;max-width:1100px;margin:0.2em 0 1em 0}
.el-figure{margin:0.5em 0}
.el-findings{border:2px solid #2a6;background:#f3fbf6;padding:0.4em 1em;margin:0.8em 0;max-width:1100px}
.el-findings li{margin:0.3em 0}
.el-noisy{color:#a40}
"""


def style_tag() -> str:
    """The ``<style>`` element of :data:`STYLE`."""
    return f"<style>{STYLE}</style>"
