"""The HTML tables and styles every displayed result shares (ground floor).

A DataFrame as a compact table (:func:`table_fragment`), a handful of scalars as a two-column
table (:func:`key_values_fragment`) and the ``.el-*`` styles (:data:`STYLE`, :func:`style_tag`):
:func:`interp.core.objects.fields_html` builds a result's display from them, and the report
(:mod:`interp.report.display`, which re-exports them, and :mod:`interp.report.page`) builds its
tables from them. The markup is in ``interp/core/templates/`` (``table.html.j2``,
``key_values.html.j2``, ``style.css``), rendered autoescaped (:mod:`interp.core.templating`): text
from users or tokenizers is data, never markup. A caption is text, or ``markupsafe.Markup`` when
it carries markup of the toolkit's own.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from markupsafe import Markup

from interp.core.templating import package_text, render

if TYPE_CHECKING:  # annotations only: pandas is imported by whoever passes a DataFrame
    import pandas as pd

__all__ = ["STYLE", "format_value", "key_values_fragment", "style_tag", "table_fragment"]


def _missing(value) -> bool:
    if value is None:
        return True
    try:
        return bool(value != value)  # NaN and NaT differ from themselves
    except TypeError:  # pd.NA: its comparisons are NA, which has no truth value
        return True
    except ValueError:  # an array in a cell: shown as it is
        return False


def format_value(value, digits: int = 3) -> str:
    """A table cell as text: a float to ``digits`` decimals, a missing value (None, NaN, NaT,
    ``pd.NA``) as "—", anything else as ``str``."""
    if isinstance(value, (list, tuple, dict)):
        return str(value)
    if _missing(value):
        return "—"
    if isinstance(value, float) or type(value).__name__.startswith("float"):  # float, numpy floats
        return f"{float(value):.{digits}f}" if math.isfinite(float(value)) else str(float(value))
    return str(value)


def table_fragment(
    df: pd.DataFrame,
    digits: int = 3,
    caption: str | Markup | None = None,
    fold_constant: bool = False,
    wrap: Sequence[str] = (),
) -> str:
    """A DataFrame as a compact HTML table: floats to ``digits`` decimals, missing values as "—",
    headers allowed to break after underscores (so that wide tables wrap instead of overflowing);
    ``caption`` (text, or ``Markup``) under it (template ``core/templates/table.html.j2``).

    ``fold_constant``: the columns that hold one value on every row (a run's model, seed, steps,
    metric, ...) are named once, in a line above the table, and left out of it: a run's
    22-column component table was 1,700 px wide, in a box scrolled sideways at 1280 px (issue 71).

    ``wrap``: the columns whose cells may break across lines (every other cell stays on one
    line); a name not among ``df``'s columns is ignored.
    """
    folded: list[tuple[str, str]] = []
    if fold_constant and len(df) > 1:
        same = [c for c in df.columns if df[c].map(lambda v: format_value(v, digits)).nunique() == 1]
        folded = [(str(c), format_value(df[c].iloc[0], digits)) for c in same]
        df = df.drop(columns=same)
    wraps = [c in wrap for c in df.columns]
    rows = [[(format_value(v, digits), w) for v, w in zip(row, wraps)] for row in df.itertuples(index=False, name=None)]
    return render(
        "core/templates/table.html.j2", headers=[str(c) for c in df.columns], rows=rows, caption=caption, folded=folded
    )


def key_values_fragment(values: dict, caption: str | Markup | None = None) -> str:
    """A two-column table (name, value) for a handful of scalars (floats to 4 significant digits)."""
    rows = [(str(k), _format(v)) for k, v in values.items()]
    return render("core/templates/key_values.html.j2", rows=rows, caption=caption)


def _format(value) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return "—"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


#: Styles shared by the report page and notebook outputs (scoped to ``.el-*`` classes;
#: ``interp/core/templates/style.css``).
STYLE = package_text("core/templates/style.css")


def style_tag() -> str:
    """The ``<style>`` element of :data:`STYLE`."""
    return f"<style>{STYLE}</style>"
