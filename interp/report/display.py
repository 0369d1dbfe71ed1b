"""Rich display of results in Jupyter and in the report, offline.

The toolkit's result objects (:class:`interp.main_job.report.MainJobReport`, ``RunAnalysis``,
:class:`interp.emergence.EmergencePoint`, :class:`interp.tasks.CapabilityScore`, a synthetic
run's ``TrainResult``) show themselves in a notebook through ``_repr_html_``: tables and plotly
figures built from the same fragments as ``report.html``; :func:`page_html` makes any of them,
the report (:mod:`interp.report.page`) and the scrubber (:mod:`interp.report.scrubber`) a page.
This module reads result objects through their attributes and never imports the analyses that
make them (the report floor, ``tests/project/test_import_graph.py``). Three rules hold everywhere:

* Nothing is fetched from the network. plotly.js and the circuitsvis bundle are inlined;
  circuitsvis's own ``RenderedHTML`` is never displayed (its ``str()`` imports from a CDN and
  its ``_repr_html_`` probes the network on every render), only its ``local_src`` is used.
* Each JavaScript library is inlined once per page (plotly.js is about 4.8 MB, the circuitsvis
  bundle 1.3 MB): an :class:`Assets` object remembers what a page already holds. A page is one
  output document: the report file, a file written by ``save_html``, or one notebook output.
  In a notebook set up by :func:`interp.report.notebook.init_notebook` the notebook holds each
  library once, in its first cell's output, and outputs carry none; without it every
  ``_repr_html_`` call starts a new :class:`Assets`, so each output carries the libraries it needs.
* Every displayable object has ``save_html(path)``, which writes a self-contained page
  atomically whatever was displayed before; :func:`save_html` does the same for any of them
  and for a DataFrame (a ``decompose_jump`` table, a ranking's ``heads``).
* Text from users or tokenizers is data, never markup: the markup is in Jinja2 templates with
  autoescape on (``interp/report/templates/``, :mod:`interp.core.templating`); figure labels are
  HTML-escaped (plotly reads its text as a small HTML subset), and JSON inside ``<script>`` has
  ``<``, ``>``, ``&``, U+2028 and U+2029 escaped as ``\\uXXXX`` (so a token ``"<!--"`` followed by
  ``"<script>"`` cannot put the HTML parser into a script-data escape state).
* The circuitsvis bundle is loaded as a classic script that defines the global ``CircuitsVis``;
  each view is a mount ``<div>`` plus a one-line ``CircuitsVis.render(...)`` call.

:mod:`interp.report.notebook` sets up a notebook (``init_notebook``) and exports one to an HTML
file that opens offline (``export_notebook_html``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from functools import lru_cache
from pathlib import Path

import pandas as pd
from markupsafe import Markup

# the tables and styles live on the ground floor (core.objects.fields_html uses them); read here as before
from interp.core.html_fragments import STYLE as STYLE
from interp.core.html_fragments import key_values_fragment, style_tag, table_fragment
from interp.core.templating import package_text, render, trusted

PLOTLY_CONFIG = {"displaylogo": False, "responsive": True}


@lru_cache(maxsize=1)
def plotly_script() -> str:
    """plotly.js inlined in one ``<script>`` (the version bundled with the plotly package)."""
    from plotly.offline import get_plotlyjs

    return render("report/templates/plotly.html.j2", source=trusted(_script_safe(get_plotlyjs())))


@lru_cache(maxsize=1)
def circuitsvis_script() -> str:
    """The circuitsvis browser bundle as one classic ``<script>`` defining the global ``CircuitsVis``.

    The bundle is the file circuitsvis itself inlines into ``local_src`` (``dist/cdn/iife.js``).
    """
    import circuitsvis

    bundle = Path(circuitsvis.__file__).parent / "dist" / "cdn" / "iife.js"
    source = bundle.read_text(encoding="utf-8")
    # ``var CircuitsVis`` at the top level of a classic script becomes ``window.CircuitsVis``.
    return render("report/templates/circuitsvis_bundle.html.j2", source=trusted(_script_safe(source)))


def _script_safe(source: str) -> str:
    """Escape ``</script`` so that inlined JavaScript cannot close its own tag early."""
    return re.sub(r"</(script)", r"<\\/\1", source, flags=re.IGNORECASE)


_JSON_UNSAFE = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def json_script_safe(text: str) -> str:
    """JSON (or JavaScript whose only ``<``, ``>``, ``&`` lie inside string literals) made safe
    to inline in a ``<script>``: those characters and U+2028/U+2029 become ``\\uXXXX`` escapes,
    which decode to the same strings. No ``</script``, ``<!--`` or ``<script`` can then appear."""
    return re.sub("[<>&\u2028\u2029]", lambda m: _JSON_UNSAFE[m.group(0)], text)


def scrubber_script() -> str:
    """The attention-pattern scrubber's style and script (:mod:`interp.report.scrub_script`, defines ``ELScrub``)."""
    from interp.report.scrub_script import scrub_script

    return scrub_script()


LIBRARIES: dict[str, Callable[[], str]] = {
    "plotly": plotly_script,
    "circuitsvis": circuitsvis_script,
    "scrubber": scrubber_script,
}


#: Set in a Jupyter kernel by :func:`interp.report.notebook.init_notebook`: ``provide(name)`` puts
#: library ``name`` into the notebook's one library output (once per notebook) and returns True.
#: ``None`` (outside a kernel, or before ``init_notebook``): every output carries its libraries.
NOTEBOOK_LIBRARIES: Callable[[str], bool] | None = None


class Assets:
    """The JavaScript libraries a page already holds (``"plotly"``, ``"circuitsvis"``, ``"scrubber"``).

    ``require(name)`` returns the library's ``<script>`` the first time and ``""`` afterwards. In a
    notebook set up by :func:`interp.report.notebook.init_notebook`, a notebook output's
    ``Assets()`` returns ``""`` from the start: the notebook holds each library once
    (:data:`NOTEBOOK_LIBRARIES`); a page (:func:`page_html`) always holds its own.
    """

    def __init__(self) -> None:
        self.sent: set[str] = set()
        self.notebook = NOTEBOOK_LIBRARIES

    def require(self, name: str) -> str:
        """The ``<script>`` for ``name`` if this page does not hold it yet, else ``""``.

        Raises:
            ValueError: ``name`` is not a known library.
        """
        if name not in LIBRARIES:
            raise ValueError(f"unknown library {name!r}; valid: {', '.join(sorted(LIBRARIES))}")
        if name in self.sent:
            return ""
        self.sent.add(name)
        if self.notebook is not None and self.notebook(name):
            return ""
        return LIBRARIES[name]()


def figure_fragment(fig, assets: Assets, caption: str | Markup | None = None) -> str:
    """A plotly figure as an HTML fragment (plotly.js inlined if ``assets`` does not hold it yet;
    template ``report/templates/figure.html.j2``).

    Args:
        fig: a ``plotly.graph_objects.Figure`` (or its dict).
        assets: the page's :class:`Assets`.
        caption: shown under the figure (what it shows, how to read it): text, escaped, or
            ``markupsafe.Markup`` for a caption with the toolkit's own markup.
    """
    import plotly.io as pio

    fig, title = _title_apart(fig)
    body = pio.to_html(
        fig, full_html=False, include_plotlyjs=False, include_mathjax=False, config=PLOTLY_CONFIG, default_width="100%"
    )
    # plotly's own <div> and script: its labels are HTML-escaped first (figures.plot_text)
    return render(
        "report/templates/figure.html.j2",
        library=trusted(assets.require("plotly")),
        title=title,
        plot=trusted(body),
        caption=caption,
    )


def _title_apart(fig):
    """(the figure without its title, the title as plain text or None). The title goes above the
    plot as HTML, where it wraps at any width; inside the plot a long title runs under plotly's
    toolbar (top right) on a narrow screen (800 px). plotly's markup in it (``<br>``, ``<b>``,
    entities from :func:`interp.report.figures.plot_text`) becomes text; the template escapes it."""
    import html as html_module

    import plotly.graph_objects as go

    fig = go.Figure(fig)  # a copy: the caller's figure keeps its title
    text = fig.layout.title.text
    if not text:
        return fig, None
    fig.update_layout(title_text="", margin_t=min(fig.layout.margin.t or 40, 40))
    plain = re.sub(r"<[^>]*>", "", re.sub(r"<br\s*/?>", " ", text, flags=re.I))
    return fig, html_module.unescape(plain)


_MOUNT = re.compile(r'<div id="(circuits-vis-[^"]*)"[^>]*?/?>')
_RENDER = re.compile(r"CircuitsVis\.render\((.*)\)\s*</script>\s*$", re.DOTALL)


#: The head-selector tiles of circuitsvis's ``attention_heads`` view (and its zoomed head's title)
#: label each head in white on its hue (``hsla(360 i / n, 70 %, 50 %)``): 1.5:1 on yellow and cyan. This style lays half
#: white over the hue and writes the label in near-black: at least 6.8:1 on every hue (WCAG AA
#: asks 4.5:1; computed from the page's colours in tests/interp/main_job/test_first_demo.py).
TILE_TEXT, TILE_WHITE_OVERLAY = "#111111", 0.5
TILE_STYLE = (  # the tiles' labels (h4) and the zoomed head's label (h2)
    ".el-circuitsvis h4[style*=background],.el-circuitsvis h2[style*=background]{"
    f"background-image:linear-gradient(rgba(255,255,255,{TILE_WHITE_OVERLAY}),rgba(255,255,255,{TILE_WHITE_OVERLAY}))"
    f"!important;color:{TILE_TEXT}!important}}"
)


def circuitsvis_fragment(rendered, assets: Assets) -> str:
    """A circuitsvis view (``RenderedHTML``) as a mount ``<div>`` and one render call.

    The bundle comes from ``assets`` (once per page). If circuitsvis's ``local_src`` ever stops
    ending with ``CircuitsVis.render(...)``, the whole ``local_src`` is used instead (still
    offline, only heavier).
    """
    local = rendered.local_src
    mount, call = _MOUNT.search(local), _RENDER.search(local)
    if mount is None or call is None:
        # circuitsvis writes a self-closing <div .../>, which HTML parses as an open div.
        return _MOUNT.sub(lambda m: m.group(0).rstrip("/>").rstrip() + "></div>", local, count=1)
    # The call's arguments are the view's id, ``CircuitsVis.<View>`` and its props as JSON: every
    # ``<``, ``>``, ``&`` lies inside a JSON string (tokens, head names).
    return render(
        "report/templates/circuitsvis.html.j2",
        library=trusted(assets.require("circuitsvis")),
        mount_id=mount.group(1),
        call=trusted(json_script_safe(call.group(1))),
        wait=assets.notebook is not None,
        tile_style=trusted(TILE_STYLE),
    )


#: Decimals kept for attention probabilities in a circuitsvis view (the page carries them as JSON
#: text: float32 values print with ~18 digits, 4 decimals are plenty to draw a pattern).
PATTERN_DECIMALS = 4


def check_attention_inputs(tokens: Sequence[str], patterns, names: Sequence[str]) -> None:
    """Refuse inputs a circuitsvis attention view would silently crop or leave unlabelled.

    ``patterns`` must be ``Float[Tensor, "n query_pos key_pos"]`` with ``query_pos == key_pos ==
    len(tokens)``, and ``names`` must hold ``n`` labels.

    Raises:
        ValueError: one line naming the shapes that do not fit.
    """
    shape = tuple(getattr(patterns, "shape", ()))
    if len(shape) != 3:
        raise ValueError(
            f"patterns must be [n, query_pos, key_pos], got shape {list(shape) or type(patterns).__name__}"
        )
    n, q, k = shape
    tokens, names = list(tokens), list(names)
    problems = []
    if q != k:
        problems.append(f"query_pos {q} != key_pos {k}")
    if len(tokens) != k or len(tokens) != q:
        problems.append(f"{len(tokens)} tokens for {q} query / {k} key positions")
    if len(names) != n:
        problems.append(f"{len(names)} names for {n} patterns")
    if problems:
        raise ValueError(
            f"attention view: patterns {list(shape)}, {len(tokens)} tokens, {len(names)} names: "
            f"{'; '.join(problems)} (need tokens = query_pos = key_pos and one name per pattern)"
        )


def attention_fragment(tokens: Sequence[str], patterns, names: Sequence[str], assets: Assets) -> str:
    """circuitsvis ``attention_heads`` view of ``patterns`` (``Float[Tensor, "n query_pos key_pos"]``,
    probability, shown to :data:`PATTERN_DECIMALS` decimals) with one name per pattern, as an
    offline HTML fragment.

    Raises:
        ValueError: shapes that do not fit (:func:`check_attention_inputs`).
    """
    import circuitsvis as cv

    check_attention_inputs(tokens, patterns, names)

    shown = patterns.detach().cpu().double().mul(10**PATTERN_DECIMALS).round().div(10**PATTERN_DECIMALS)
    rendered = cv.attention.attention_heads(attention=shown, tokens=list(tokens), attention_head_names=list(names))
    return circuitsvis_fragment(rendered, assets)


class HTMLFragment:
    """An HTML view that Jupyter displays (``_repr_html_``), prints as its source and saves as a
    page (:meth:`save_html`).

    Args:
        render: ``render(assets) -> str``, the view's HTML with the libraries it asks ``assets``
            for; called anew for each output, so each output is self-contained.
        title: the page title :meth:`save_html` uses.
    """

    def __init__(self, render: Callable[[Assets], str] | str, title: str = "emergence-lens view") -> None:
        self._render = render if callable(render) else (lambda assets, body=render: body)
        self.title = title

    def _html(self, assets: Assets) -> str:
        return self._render(assets)

    def _repr_html_(self) -> str:
        return self._html(Assets())

    @property
    def body(self) -> str:
        """The view as one self-contained fragment."""
        return self._repr_html_()

    def __str__(self) -> str:
        return self.body

    def save_html(self, path: str | Path, title: str | None = None) -> Path:
        """Write the view as a self-contained page (see :func:`save_html`)."""
        return save_html(self, path, title=title)


def show_attention(tokens: Sequence[str], patterns, names: Sequence[str]) -> HTMLFragment:
    """A circuitsvis attention view for a notebook cell, offline (no CDN, no network probe).

    Each display carries the circuitsvis bundle (self-contained); ``.save_html(path)`` writes it
    as a page.

    Args:
        tokens: the prompt's tokens as strings, ``query_pos`` of them (shown as text, never markup).
        patterns: ``Float[Tensor, "n query_pos key_pos"]``, attention probabilities.
        names: one label per pattern.

    Raises:
        ValueError: ``patterns`` not ``[n, len(tokens), len(tokens)]`` or not ``n`` names
            (:func:`check_attention_inputs`; nothing is cropped silently).
    """
    tokens, names = list(tokens), list(names)
    check_attention_inputs(tokens, patterns, names)  # at the call, not when a notebook first draws it
    return HTMLFragment(lambda assets: attention_fragment(tokens, patterns, names, assets), title="attention patterns")


#: The page's own styles (``report/templates/page.css``), beside :data:`STYLE`.
PAGE_STYLE = package_text("report/templates/page.css")


class _HeadAssets(Assets):
    """Page assets that go into ``<head>``: sections only record which libraries they need."""

    def __init__(self) -> None:
        super().__init__()
        self.notebook = None  # a page holds its own libraries, in a notebook too

    def require(self, name: str) -> str:
        super().require(name)
        return ""


def page_html(title: str, body: Callable[[Assets], str]) -> str:
    """A self-contained page: ``body(assets)`` returns the HTML of the page's content, and every
    library it asked ``assets`` for (plotly.js, the circuitsvis bundle) is inlined once in
    ``<head>``; no network request when opened."""
    assets = _HeadAssets()
    content = body(assets)
    head_scripts = "".join(LIBRARIES[name]() for name in LIBRARIES if name in assets.sent)
    return render(
        "report/templates/page.html.j2",
        title=title,
        style=trusted(PAGE_STYLE + STYLE),
        scripts=trusted(head_scripts),
        content=trusted(content),
    )


def save_html(obj, path: str | Path, title: str | None = None) -> Path:
    """Write ``obj`` as a self-contained HTML page (libraries inlined once in ``<head>``, opens
    offline), atomically, whatever was displayed before in this process.

    Args:
        obj: a displayable object of the toolkit (anything with ``_html(assets)``: a
            ``MainJobReport``, ``RunAnalysis``, ``HeadRanking``, ``EmergencePoint``,
            ``CapabilityScore``, ``TrainResult``, a ``show_attention`` view), or a DataFrame (a
            ``decompose_jump`` table gets its figure too).
        path: the file to write (its folder is created).
        title: the page title (default: the object's own, else its class name).

    Returns:
        ``path`` as a ``Path``.

    Raises:
        TypeError: ``obj`` has no HTML form.
    """
    from interp.core.io import atomic_write_text

    if isinstance(obj, pd.DataFrame):
        render = lambda assets: dataframe_html(obj, assets)  # noqa: E731
    elif hasattr(obj, "_html"):
        render = obj._html
    else:
        raise TypeError(f"{type(obj).__name__} has no HTML form; save_html takes a toolkit result or a DataFrame")
    title = title or getattr(obj, "title", None) or type(obj).__name__
    return atomic_write_text(Path(path), page_html(str(title), lambda assets: style_tag() + render(assets)))


def dataframe_html(df: pd.DataFrame, assets: Assets) -> str:
    """A DataFrame as a page fragment: a ``decompose_jump`` table (:data:`interp.core.terms.COMPONENT_COLUMNS`)
    as its figure and table, any other as a table."""
    from interp.core.terms import COMPONENT_COLUMNS

    if set(COMPONENT_COLUMNS) <= set(df.columns) and len(df):
        from interp.report.figures import components_figure

        return figure_fragment(components_figure(df), assets) + table_fragment(df)
    return table_fragment(df)


def jump_note_html(jump, se, too_small: bool, delta_label: str = "Δ") -> str:
    """One sentence on whether a run's jump stands above its noise (``jump_too_small``: below 3
    standard errors of the paired per-prompt difference, :func:`interp.emergence.jump_noise`), in
    words: a noisy run is flagged, never left as a bare ``True`` in a column."""
    from markupsafe import Markup

    measured = f"{jump:.3f} ± {se:.3f}" if se is not None and se == se else f"{jump:.3f}"
    if too_small:
        return Markup(
            "<p class='el-warning' style='background:#fff4e0;color:#6b3d00;padding:6px 8px;border-left:4px solid #d98200'><b>⚠ Noisy run:</b> the jump ({}) is below 3 standard errors of the paired "
            "per-prompt difference, so each head's {} and the share recovered compare against noise; rank "
            "between checkpoints further apart or on more prompts before reading the heads.</p>"
        ).format(measured, delta_label)
    ratio = f", {jump / se:.0f} standard errors" if se and se == se and se > 0 else ""
    return Markup(
        "<p class='el-note' style='color:#1d5e2c'>The jump ({}{}) stands above its noise: the heads' {} can be read.</p>"
    ).format(measured, ratio, delta_label)


def head_ranking_html(ranking, assets: Assets) -> str:
    """A :class:`interp.ranking.HeadRanking` as HTML: the jump and the pre-screen's agreement,
    the top heads (ten at most), the Δp heatmap, top-K recovery, the example attention patterns and the
    decomposition when computed."""
    from interp.core.metrics import metric_spec
    from interp.report.figures import delta_p_heatmap, plot_text, recovery_run_figure

    try:
        spec = metric_spec(ranking.metric)
        label, delta_label, unit = spec.label, spec.delta_label, getattr(ranking, "unit", spec.unit)
    except ValueError:  # a metric function of the user's, not in the registry
        label, delta_label, unit = str(ranking.metric), f"Δ {ranking.metric}", getattr(ranking, "unit", "metric units")
    values = {
        "metric": f"{ranking.metric} ({label}, {unit})",
        "value_pre": ranking.value_pre,
        "value_post": ranking.value_post,
        "jump (post − pre)": ranking.value_post - ranking.value_pre,
        "jump standard error": ranking.jump_se,
        "pre-screen Spearman ρ": ranking.rank_correlation_prescreen,
        "pre-screen found the top 2": ranking.prescreen_top2_found,
    }
    parts = [
        jump_note_html(ranking.value_post - ranking.value_pre, ranking.jump_se, ranking.jump_too_small, delta_label),
        key_values_fragment(values, caption=f"Metric units: {unit}."),
        table_fragment(
            ranking.heads.head(10).drop(columns=["jump_too_small"], errors="ignore"),  # said above, in words
            digits=4,
            caption=f"The {min(10, len(ranking.heads))} top heads by delta ({unit}; "
            "95 % bootstrap interval over prompts in delta_lo, delta_hi; NaN below 5 prompts).",
        ),
        figure_fragment(
            delta_p_heatmap(
                ranking.delta, title=plot_text(f"{delta_label} per head ({unit})"), metric=ranking.metric, unit=unit
            ),
            assets,
        ),
    ]
    if ranking.topk is not None and len(ranking.topk):
        parts.append(figure_fragment(recovery_run_figure(ranking.topk), assets))
    if ranking.example_patterns is not None and ranking.example_tokens:
        parts.append(
            attention_fragment(ranking.example_tokens, ranking.example_patterns, ranking.example_names, assets)
        )
    if ranking.components is not None and len(ranking.components):
        parts.append(dataframe_html(ranking.components, assets))
    return render("report/templates/head_ranking.html.j2", parts=[trusted(part) for part in parts])


def point_html(point, assets: Assets | None = None) -> str:
    """A point of emergence (:class:`interp.emergence.EmergencePoint`) as a table and a figure of
    the checkpoints the search evaluated (the point marked, the threshold dashed)."""
    from interp.core.terms import rule_text
    from interp.report.figures import plot_text, run_capability_figure

    assets = Assets() if assets is None else assets
    values = {
        "run": point.model_id,
        "pre_step": point.pre_step,
        "post_step": point.post_step,
        "emerged": point.emerged,
        "threshold (accuracy)": point.threshold,
        "monotone": point.monotone,
        "hold (checkpoints)": point.hold,
        "search": point.search,
        "n_evaluations": point.n_evaluations,
    }
    if point.note:  # a crossing with no room to hold (interp.emergence.no_room_to_hold)
        values["note"] = point.note
    if point.excluded_steps:
        values["excluded (duplicate weights)"] = ", ".join(
            f"{a} = {b}" for a, b in sorted(point.excluded_steps.items())
        )
    table = key_values_fragment(
        values,
        caption="Steps are training steps; the search evaluates "
        f"each checkpoint at most once. Point of emergence: {rule_text(point.hold)}.",
    )
    figure = ""
    if len(point.evaluations):
        fig = run_capability_figure(
            point.evaluations,
            point.pre_step,
            point.post_step,
            threshold=point.threshold,
            title=f"{plot_text(point.model_id)}: evaluated checkpoints",
        )
        figure = figure_fragment(fig, assets)
    return render("report/templates/point.html.j2", style=trusted(STYLE), values=trusted(table), figure=trusted(figure))


def capability_score_html(score) -> str:
    """A capability score (:class:`interp.tasks.CapabilityScore`) as a small table with a bar per value."""
    rows = [("greedy accuracy", float(score.accuracy)), ("mean p(answer)", float(score.p_answer))]
    return render(
        "report/templates/capability_score.html.j2", style=trusted(STYLE), rows=rows, n_prompts=score.n_prompts
    )
