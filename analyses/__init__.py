"""Reproductions: one module per finding, run as ``python -m analyses.<name>``.

Each module exposes ``settings(paper_scale) -> dict``, ``run(settings, execution) -> (tables…,
figure)`` and ``main(argv)``; its runs go through :func:`analyses.harness.run_configs`, so
``--sweep-dir DIR`` makes any of them resumable and runnable on Ray. :mod:`analyses.results`
holds the registry that ``emergence results`` (``make results``) re-runs.
"""


def description(doc: str) -> str:
    """The first paragraph of a module's docstring on one line: the ``--help`` description of its
    entry (the first line alone cuts a wrapped sentence in two)."""
    paragraph = doc.strip().split("\n\n")[0]
    return " ".join(paragraph.split())
