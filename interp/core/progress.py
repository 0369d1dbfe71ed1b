"""Progress of a long call, where its reader looks (ground floor).

In a terminal a tqdm bar goes to standard error, as every command's does. In a Jupyter kernel it
is a one-line text bar on **standard output**: a kernel shows standard error as a pink box that
reads like an error, and tqdm's widget bar needs ipywidgets (and, in an HTML export, a widget
manager fetched from a CDN). The text bar redraws in place (``\\r``), so a finished cell keeps
one line, e.g. ``neox-2l-64d-seed1: 100%|█████| 64/64 checkpoints [00:20, 3.1/s, 64 kept]``.

Every call over a few seconds takes ``progress: bool = True`` (the scan, the bisection, the main
job, the population, the scrubber) and passes it here; ``progress=False`` silences it.
"""

from __future__ import annotations

import sys

__all__ = ["in_kernel", "progress_bar"]

#: Width of the bar in a notebook (characters; a kernel's stream has no terminal width).
NOTEBOOK_COLUMNS = 100


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

    options = {"file": sys.stdout, "ncols": NOTEBOOK_COLUMNS, "mininterval": 0.5} if in_kernel() else {}
    return tqdm(total=total, desc=desc, unit=unit, disable=not enabled, **{**options, **kwargs})
