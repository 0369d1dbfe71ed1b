"""Progress of a long call, where its reader looks (ground floor).

In a terminal a tqdm bar goes to standard error, as every command's does. In a Jupyter kernel it
is a one-line text bar on **standard output**: a kernel shows standard error as a pink box that
reads like an error, and tqdm's widget bar needs ipywidgets (and, in an HTML export, a widget
manager fetched from a CDN). The text bar redraws in place (``\\r``), so a finished cell keeps
one line, e.g. ``neox-2l-64d-seed1: 100%|█████| 64/64 checkpoints [00:20, 3.1/s, 64 kept]``.

Every call over a few seconds takes ``progress: bool = True`` (the scan, the bisection, the main
job, the population, the scrubber) and passes it here; ``progress=False`` silences it.

Where standard error is neither a terminal nor a kernel's stream (``make demo > log 2>&1``, CI), a
redrawn bar would fill the log with cursor codes (4,230 lines for one ``make demo``, issue 71): there
:func:`progress_bar` gives a :class:`LineProgress` instead, plain lines every
:data:`LINE_EVERY_SECONDS` and one at the end. Either way a rate and a time left are shown only once
work has been done in this process: steps done before it (a resumed run, :func:`skip`) count in
the position, never in the rate.
"""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

__all__ = ["LINE_EVERY_SECONDS", "LineProgress", "in_kernel", "progress_bar", "say", "skip"]

#: Width of the bar in a notebook (characters; a kernel's stream has no terminal width).
NOTEBOOK_COLUMNS = 100
#: Seconds between two lines of a :class:`LineProgress` (output that is not a terminal).
LINE_EVERY_SECONDS = 30.0


def in_kernel() -> bool:
    """Whether this process is a Jupyter kernel (IPython with a kernel attached)."""
    if "ipykernel" not in sys.modules:
        return False
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - ipykernel brings IPython
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def progress_bar(total: int | None, desc: str, unit: str = "checkpoint", enabled: bool = True, **kwargs):
    """A ``tqdm`` bar: standard output in a Jupyter kernel (redrawn at most twice a second),
    standard error elsewhere; disabled (draws nothing) when not ``enabled``.

    Args:
        total: the units to do (None: a count without a percentage).
        desc: the bar's label (a run's id, ``"units"``).
        unit: what one update counts (``"checkpoint"``, ``"unit"``).
        enabled: False silences the bar (``progress=False``).
        kwargs: passed to ``tqdm`` (``leave``, ``initial``).
    """
    from tqdm import tqdm

    if in_kernel():
        options = {"file": sys.stdout, "ncols": NOTEBOOK_COLUMNS, "mininterval": 0.5}
    elif not _is_terminal(sys.stderr):
        return LineProgress(total, desc, unit, enabled=enabled, initial=kwargs.get("initial", 0))
    else:
        options = {}
    return tqdm(total=total, desc=desc, unit=unit, disable=not enabled, **{**options, **kwargs})


def _is_terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or closed
        return False


class LineProgress:
    """Progress as plain lines (no ``\\r``, no cursor codes) for output that is not a terminal: the
    first line at once, then at most one every ``every`` seconds, and a last one at :meth:`close`.

    A line reads ``units: 2/6 units (33 %), 1:10 elapsed, 0.05 unit/s, about 1:20 left; step 300``:
    the rate and the time left only once this process has done some of the work (``n`` beyond
    ``initial``), the time left only with a ``total``; below one unit a second, as seconds per
    unit (``92.6 s/unit``). The part of tqdm's interface this package uses: :meth:`update`,
    :meth:`set_postfix_str`, :meth:`refresh` (here: at most one line per ``every``), :meth:`write`,
    :meth:`close`, ``n``, ``total``, ``initial``, ``desc``, ``disable``.
    """

    def __init__(
        self,
        total: int | None,
        desc: str,
        unit: str = "checkpoint",
        enabled: bool = True,
        initial: int = 0,
        file: TextIO | None = None,
        every: float = LINE_EVERY_SECONDS,
    ) -> None:
        self.total, self.desc, self.unit, self.disable = total, desc, unit, not enabled
        self.n = self.initial = initial
        self.file, self.every, self.postfix = file, every, ""
        self.started = self.shown = time.monotonic()
        self.closed = False
        self.printed: tuple[int, str] | None = None  # (n, postfix) of the line printed last
        self.print_line()

    def line(self) -> str:
        """The progress as one line (module and class docstrings)."""
        from tqdm import tqdm

        elapsed = time.monotonic() - self.started
        text = f"{self.desc}: {self.n}"
        if self.total:
            text += f"/{self.total} {self.unit}s ({100 * self.n / self.total:.0f} %)"
        else:
            text += f" {self.unit}s"
        text += f", {tqdm.format_interval(elapsed)} elapsed"
        done = self.n - self.initial
        if done > 0 and elapsed > 0:
            rate = done / elapsed
            text += f", {rate:.3g} {self.unit}/s" if rate >= 1 else f", {1 / rate:.3g} s/{self.unit}"
            if self.total:
                text += f", about {tqdm.format_interval(max(self.total - self.n, 0) / rate)} left"
        return text + (f"; {self.postfix}" if self.postfix else "")

    def write(self, text: str) -> None:
        """Print ``text`` as its own line (nothing when disabled)."""
        if not self.disable:
            stream = self.file if self.file is not None else sys.stderr
            stream.write(text + "\n")
            stream.flush()

    def print_line(self) -> None:
        """Print the line now."""
        self.shown, self.printed = time.monotonic(), (self.n, self.postfix)
        self.write(self.line())

    def refresh(self) -> None:
        """Print the line if ``every`` seconds have passed since the last (a log gets no more)."""
        if time.monotonic() - self.shown >= self.every:
            self.print_line()

    def update(self, n: int = 1) -> None:
        """Count ``n`` more units done; print the line when ``every`` seconds passed since the last."""
        self.n += n
        self.refresh()

    def set_postfix_str(self, text: str = "", refresh: bool = True) -> None:
        """What follows the counts (a run's loss, the step being scored)."""
        self.postfix = text
        if refresh:
            self.refresh()

    def close(self) -> None:
        """Print the last line (once; not when the line printed last said the same)."""
        if not self.closed:
            self.closed = True
            if self.printed != (self.n, self.postfix):
                self.print_line()


def skip(bar: Any, n: int) -> None:
    """Count ``n`` units as done before this process started (a resumed run's steps): they move
    the bar's position but not its rate or its time left."""
    if getattr(bar, "disable", False) or n <= 0:
        return
    bar.n += n
    bar.initial += n  # tqdm's and LineProgress's rate is (n - initial) / elapsed
    if hasattr(bar, "last_print_n"):  # tqdm's smoothed rate: the next update's count starts here
        bar.last_print_n += n
    bar.refresh()


def say(bar: Any, text: str) -> None:
    """Print ``text`` as a line of its own where ``bar`` draws (above a tqdm bar, which is redrawn
    below it); nothing when the bar is disabled."""
    if getattr(bar, "disable", False):
        return
    if isinstance(bar, LineProgress):
        bar.write(text)
    else:
        from tqdm import tqdm

        tqdm.write(text, file=bar.fp)
