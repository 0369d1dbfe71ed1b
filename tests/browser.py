"""Open a page in headless Chromium (the Debian package, driven by playwright) with the network cut.

Every request other than the page's own file is aborted and recorded; console errors and page
errors are collected; the page is checked for plotly figures that drew their SVG (with a
legend) and circuitsvis views that mounted. Used by tests/interp/report/test_report_browser.py.
"""

from __future__ import annotations

import atexit
import os
import shutil
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

#: Flags for Chromium as root on a machine without network (see the machine notes: without the
#: background-networking flags Chromium tries to reach Google's hosts at every start).
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--headless",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
    "--disable-default-apps",
    "--disable-extensions",
]

# Resolves when every plotly figure has drawn (or failed) and every circuitsvis mount has children.
_STATE_JS = """() => {
  const figs = [...document.querySelectorAll('.plotly-graph-div')].map(gd => ({
    id: gd.id,
    svg: !!gd.querySelector('svg.main-svg'),
    traces: gd.querySelectorAll('g.trace, g.hm, .heatmaplayer image, g.barlayer g.point').length,
    legend: gd.querySelectorAll('g.legend g.traces').length,
  }));
  const views = [...document.querySelectorAll('div[id^="circuits-vis-"]')].map(el => ({
    id: el.id, children: el.childElementCount, height: el.getBoundingClientRect().height,
    canvas: Math.max(0, ...[...el.querySelectorAll('canvas')].map(c => c.clientHeight)),
  }));
  const table = document.querySelector('table.el-table');
  const wrap = table ? table.parentElement : null;
  return {figs, views, width: window.innerWidth,
          table: table ? {right: table.getBoundingClientRect().right, scroll: wrap.scrollWidth,
                          client: wrap.clientWidth} : null};
}"""
_READY_JS = """() => {
  const figs = [...document.querySelectorAll('.plotly-graph-div')];
  const views = [...document.querySelectorAll('div[id^="circuits-vis-"]')];
  return figs.every(gd => gd.querySelector('svg.main-svg'))
      && views.every(el => [...el.querySelectorAll('canvas')].some(c => c.clientHeight > 100));
}"""


def chromium_path() -> str | None:
    """The system Chromium (``$EMERGENCE_LENS_CHROMIUM``, else ``chromium`` on PATH), or None."""
    candidate = (
        os.environ.get("EMERGENCE_LENS_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    )
    return candidate if candidate and Path(candidate).exists() else None


@dataclass
class PageVisit:
    """What happened while the page was open."""

    url: str
    requests: list[str] = field(default_factory=list)  # every request the page made
    blocked: list[str] = field(default_factory=list)  # requests that would have left the page
    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    state: dict = field(default_factory=dict)
    ready: bool = False
    probe: object = None  # what ``probe_js`` returned


_BROWSER: dict = {}  # this process's playwright driver and Chromium, started on first use


def _browser():
    """Headless Chromium, launched on first use and kept until :func:`shut_down` (the tests'
    conftest calls it after every test) or exit.

    Each visit gets a fresh browser context (its own cookies, storage and cache, as a new
    profile would have); launching Chromium once per test instead of once per visit saves its
    start-up (about 2 s a visit on the 2-core machine). Shut down after each test because a live
    playwright driver marks its event loop as running in this thread (its sync API's design),
    which a later test's ``asyncio`` code must not see.
    """
    browser = _BROWSER.get("browser")
    if browser is None or not browser.is_connected():
        from playwright.sync_api import sync_playwright

        if "driver" not in _BROWSER:
            _BROWSER["driver"] = sync_playwright().start()
        browser = _BROWSER["driver"].chromium.launch(
            executable_path=chromium_path(), headless=True, args=CHROMIUM_FLAGS
        )
        _BROWSER["browser"] = browser
    return browser


def shut_down() -> None:
    """Close the Chromium and stop the playwright driver that :func:`_browser` started, if any."""
    try:
        if "browser" in _BROWSER:
            _BROWSER.pop("browser").close()
    finally:
        if "driver" in _BROWSER:
            _BROWSER.pop("driver").stop()


atexit.register(shut_down)


@contextmanager
def open_page(
    page_path: Path, width: int = 1280, height: int = 900, timeout_ms: int = 90_000, also: tuple[Path, ...] = ()
):
    """Open ``page_path`` in headless Chromium with every other request blocked, as :func:`visit`
    does, and yield ``(page, PageVisit)`` for a test to drive (the visit records requests,
    blocked requests, console and page errors while the page is open). Each call gets a new,
    offline browser context with service workers blocked. ``also``: local pages the test may
    navigate to from it (a link's target; its fragment aside), allowed as the page is."""
    url = page_path.resolve().as_uri()
    allowed = {url, *(p.resolve().as_uri() for p in also)}
    result = PageVisit(url=url)

    def on_route(route):
        if route.request.url.split("#")[0] in allowed or route.request.url.startswith(("data:", "blob:")):
            route.continue_()
        else:
            result.blocked.append(route.request.url)
            route.abort()

    context = _browser().new_context(viewport={"width": width, "height": height}, service_workers="block", offline=True)
    try:
        context.route("**/*", on_route)
        page = context.new_page()
        page.on("request", lambda r: result.requests.append(r.url))
        page.on("console", lambda m: result.console_errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: result.page_errors.append(str(e)))
        page.goto(url, wait_until="load", timeout=timeout_ms)
        yield page, result
    finally:
        context.close()


def visit(
    page_path: Path,
    screenshot: Path,
    width: int = 1280,
    height: int = 900,
    timeout_ms: int = 90_000,
    probe_js: str | None = None,
) -> PageVisit:
    """Open ``page_path`` (a local HTML file) in headless Chromium with every other request blocked.

    Waits until every plotly figure has its SVG and every circuitsvis view has drawn its zoomed
    pattern (a canvas taller than 100 px), or ``timeout_ms`` passes (then ``ready`` is False);
    the state is read at ``width`` x ``height`` (and ``probe_js``, a JavaScript function, is
    evaluated into ``probe``), then a full-page screenshot is saved.
    """
    with open_page(page_path, width, height, timeout_ms) as (page, result):
        try:
            page.wait_for_function(_READY_JS, timeout=timeout_ms)
            result.ready = True
        except Exception:  # the state below says what did not draw
            result.ready = False
        page.wait_for_timeout(500)  # let late errors surface
        result.state = page.evaluate(_STATE_JS)
        if probe_js is not None:
            result.probe = page.evaluate(probe_js)
        # A full-page capture resizes the window, and circuitsvis's charts redraw (animated)
        # on resize: make the window as tall as the page first, let the redraw finish, then shoot.
        full = min(page.evaluate("document.documentElement.scrollHeight"), 30_000)
        page.set_viewport_size({"width": width, "height": full})
        page.wait_for_timeout(1500)
        screenshot.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(screenshot), full_page=True, timeout=timeout_ms)  # a 30 000 px page on a busy machine
    return result
