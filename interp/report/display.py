"""Rich display of results in Jupyter and in the report, offline.

The toolkit's result objects (:class:`interp.main_job.report.MainJobReport`, ``RunAnalysis``,
:class:`interp.emergence.EmergencePoint`, :class:`interp.tasks.CapabilityScore`, a synthetic
run's ``TrainResult``) show themselves in a notebook through ``_repr_html_``: tables and plotly
figures built from the same fragments as ``report.html``; :func:`page_html` makes any of them,
the report (:mod:`interp.report.page`) and the scrubber (:mod:`interp.report.scrubber`) a page.
This module reads result objects through their attributes and never imports the analyses that
make them (the report floor, ``tests/test_import_graph.py``). Three rules hold everywhere:

* Nothing is fetched from the network. plotly.js and the circuitsvis bundle are inlined;
  circuitsvis's own ``RenderedHTML`` is never displayed (its ``str()`` imports from a CDN and
  its ``_repr_html_`` probes the network on every render), only its ``local_src`` is used.
* Each JavaScript library is inlined once per page (plotly.js is about 4.8 MB, the circuitsvis
  bundle 1.3 MB): an :class:`Assets` object remembers what a page already holds. A page is one
  output document: the report file, a file written by ``save_html``, or one notebook output.
  Every ``_repr_html_`` call starts a new :class:`Assets`, so each output carries the libraries
  it needs: a cell run again, a second ``show_attention`` or a saved notebook whose first output
  was replaced still draws (several figures inside one output share one copy).
* Every displayable object has ``save_html(path)``, which writes a self-contained page
  atomically whatever was displayed before; :func:`save_html` does the same for any of them
  and for a DataFrame (a ``decompose_jump`` table, a ranking's ``heads``).
* Text from users or tokenizers is data, never markup: tables and labels are HTML-escaped,
  figure labels are HTML-escaped (plotly reads its text as a small HTML subset), and JSON
  inside ``<script>`` has ``<``, ``>``, ``&``, U+2028 and U+2029 escaped as ``\\uXXXX`` (so a token
  ``"<!--"`` followed by ``"<script>"`` cannot put the HTML parser into a script-data escape state).
* The circuitsvis bundle is loaded as a classic script that defines the global ``CircuitsVis``;
  each view is a mount ``<div>`` plus a one-line ``CircuitsVis.render(...)`` call.

:func:`init_notebook` makes plain plotly figures follow the same rules, and
:func:`export_notebook_html` exports an executed notebook to one HTML file that opens offline
(nbconvert's lab template without its require.js, MathJax and mermaid CDN scripts).
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Sequence
from functools import lru_cache
from pathlib import Path

import pandas as pd

# the tables and styles live on the ground floor (core.objects.fields_html uses them); read here as before
from interp.core.html_fragments import STYLE as STYLE
from interp.core.html_fragments import key_values_fragment, style_tag, table_fragment

PLOTLY_CONFIG = {"displaylogo": False, "responsive": True}


@lru_cache(maxsize=1)
def plotly_script() -> str:
    """plotly.js inlined in one ``<script>`` (the version bundled with the plotly package)."""
    from plotly.offline import get_plotlyjs

    return (
        "<script type='text/javascript'>window.PlotlyConfig = {MathJaxConfig: 'local'};</script>\n"
        f"<script type='text/javascript'>{_script_safe(get_plotlyjs())}</script>"
    )


@lru_cache(maxsize=1)
def circuitsvis_script() -> str:
    """The circuitsvis browser bundle as one classic ``<script>`` defining the global ``CircuitsVis``.

    The bundle is the file circuitsvis itself inlines into ``local_src`` (``dist/cdn/iife.js``).
    """
    import circuitsvis

    bundle = Path(circuitsvis.__file__).parent / "dist" / "cdn" / "iife.js"
    source = bundle.read_text(encoding="utf-8")
    # ``var CircuitsVis`` at the top level of a classic script becomes ``window.CircuitsVis``.
    return f"<script type='text/javascript'>{_script_safe(source)}\nwindow.CircuitsVis = CircuitsVis;</script>"


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


class Assets:
    """The JavaScript libraries a page already holds (``"plotly"``, ``"circuitsvis"``, ``"scrubber"``).

    ``require(name)`` returns the library's ``<script>`` the first time and ``""`` afterwards.
    """

    def __init__(self) -> None:
        self.sent: set[str] = set()

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
        return LIBRARIES[name]()


def figure_fragment(fig, assets: Assets, caption: str | None = None) -> str:
    """A plotly figure as an HTML fragment (plotly.js inlined if ``assets`` does not hold it yet).

    Args:
        fig: a ``plotly.graph_objects.Figure``.
        assets: the page's :class:`Assets`.
        caption: HTML shown under the figure (what it shows, how to read it).
    """
    import plotly.io as pio

    body = pio.to_html(
        fig, full_html=False, include_plotlyjs=False, include_mathjax=False, config=PLOTLY_CONFIG, default_width="100%"
    )
    note = f"<p class='el-caption'>{caption}</p>" if caption else ""
    return f"{assets.require('plotly')}<div class='el-figure'>{body}{note}</div>"


_MOUNT = re.compile(r'<div id="(circuits-vis-[^"]*)"[^>]*?/?>')
_RENDER = re.compile(r"CircuitsVis\.render\((.*)\)\s*</script>\s*$", re.DOTALL)


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
    return (
        f"{assets.require('circuitsvis')}<div id=\"{mount.group(1)}\" class='el-circuitsvis' "
        f"style=\"margin: 15px 0;\"></div>\n<script type='text/javascript'>"
        f"CircuitsVis.render({json_script_safe(call.group(1))});</script>"
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


PAGE_STYLE = (
    "body{font-family:system-ui,sans-serif;margin:16px auto;max-width:1240px;padding:0 8px}"
    "h2{margin-top:1.6em;border-bottom:1px solid #ddd}h3{margin:1.2em 0 0.3em 0}"
    "section.el-run{border-top:3px solid #888;margin-top:2em}"
)


class _HeadAssets(Assets):
    """Page assets that go into ``<head>``: sections only record which libraries they need."""

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
    return "\n".join(
        [
            "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
            "<meta name='viewport' content='width=device-width, initial-scale=1'>",
            f"<title>{html.escape(title)}</title>",
            f"<style>{PAGE_STYLE}{STYLE}</style>",
            head_scripts,
            "</head><body>",
            f"<h1>{html.escape(title)}</h1>",
            content,
            "</body></html>",
        ]
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
        "jump_too_small (below 3 standard errors)": ranking.jump_too_small,
        "pre-screen Spearman ρ": ranking.rank_correlation_prescreen,
        "pre-screen found the top 2": ranking.prescreen_top2_found,
    }
    parts = [
        key_values_fragment(values, caption=f"Metric units: {html.escape(str(unit))}."),
        table_fragment(
            ranking.heads.head(10),
            digits=4,
            caption=f"The {min(10, len(ranking.heads))} top heads by delta ({html.escape(unit)}; "
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
    return "<div class='el-head-ranking'>" + "\n".join(parts) + "</div>"


def init_notebook() -> None:
    """Show plain plotly figures in this kernel as offline HTML (plotly.js inlined in each output,
    no MathJax or CDN script) by registering and selecting the plotly renderer ``"emergence_lens"``.

    plotly 7's default in a Jupyter kernel is its mimetype renderer, which nbconvert's HTML export
    does not draw; this renderer also keeps ``application/vnd.plotly.v1+json`` so JupyterLab's
    plotly extension, when installed, still draws the figure itself.
    """
    import warnings

    import plotly.io as pio

    # tqdm.auto warns at import when ipywidgets is absent; its text bar works as it is (the
    # widget bar would need the widget manager, which nbconvert's export loads from a CDN).
    warnings.filterwarnings("ignore", message="IProgress not found")
    if "emergence_lens" not in pio.renderers:
        pio.renderers["emergence_lens"] = _offline_renderer()
    pio.renderers.default = "plotly_mimetype+emergence_lens"


def _offline_renderer():
    """A plotly renderer whose text/html is :func:`figure_fragment` carrying plotly.js (each
    output is self-contained)."""
    from plotly.io._base_renderers import MimetypeRenderer

    class OfflineRenderer(MimetypeRenderer):
        def to_mimebundle(self, fig_dict):
            return {"text/html": figure_fragment(fig_dict, Assets())}

    return OfflineRenderer()


def export_notebook_html(notebook, out_path: str | Path | None = None) -> str:
    """Export an executed notebook to a single HTML page that makes no network request.

    nbconvert's ``lab`` template loads require.js, MathJax and mermaid from CDNs; this export
    leaves those three out (the toolkit's outputs need none of them: plotly.js and circuitsvis
    are inlined in the outputs themselves). Each output carries the libraries it draws with, so
    that it works alone in Jupyter; on the exported page every output shares one window, so each
    library is kept once, where it first appears (before any output that uses it), and its later
    copies are dropped (the main_job notebook's export: 38.4 MB -> 6.9 MB).

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
    template = (
        "{%- extends 'lab/index.html.j2' -%}"
        "{%- block html_head_js_requirejs -%}{%- endblock html_head_js_requirejs -%}"
        "{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}"
        "{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}"
    )
    exporter = HTMLExporter(
        template_name="lab",
        extra_loaders=[jinja2.DictLoader({"offline.html.j2": template})],
        template_file="offline.html.j2",
    )
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
    if point.excluded_steps:
        values["excluded (duplicate weights)"] = ", ".join(
            f"{a} = {b}" for a, b in sorted(point.excluded_steps.items())
        )
    parts = [
        style_tag(),
        key_values_fragment(
            values,
            caption="Steps are training steps; the search evaluates "
            f"each checkpoint at most once. Point of emergence: {rule_text(point.hold)}.",
        ),
    ]
    if len(point.evaluations):
        fig = run_capability_figure(
            point.evaluations,
            point.pre_step,
            point.post_step,
            threshold=point.threshold,
            title=f"{plot_text(point.model_id)}: evaluated checkpoints",
        )
        parts.append(figure_fragment(fig, assets))
    return "<div class='el-point'>" + "\n".join(parts) + "</div>"


def capability_score_html(score) -> str:
    """A capability score (:class:`interp.tasks.CapabilityScore`) as a small table with a bar per value."""
    rows = "".join(
        f"<tr><th>{name}</th><td>{value:.4f}</td><td style='width:220px'><div style='background:#4c78a8;height:10px;"
        f"width:{max(0.0, min(1.0, value)) * 100:.1f}%'></div></td></tr>"
        for name, value in (("greedy accuracy", score.accuracy), ("mean p(answer)", score.p_answer))
    )
    return (
        f"{style_tag()}<div class='el-table-wrap'><table class='el-table el-kv'>{rows}"
        f"<tr><th>prompts</th><td>{score.n_prompts}</td><td></td></tr></table></div>"
    )
