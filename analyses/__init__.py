"""Reproductions: one module per finding, run as ``python -m analyses.<name>``.

Each module is a thin runnable entry over the library: its arguments, one call, and where its
numbers go in docs/. No entry imports another (``tests/project/test_import_graph.py``): what two entries
share lives in the library (:mod:`synthetic.harness` for the synthetic reproductions, whose runs go
through :func:`synthetic.harness.run_configs`, so ``--sweep-dir DIR`` makes any of them resumable and
runnable on Ray; :mod:`interp.population.kept` for the populations' kept data). Each synthetic
reproduction exposes ``settings(paper_scale) -> dict``, ``run(settings, execution) -> (tables…,
figure)`` and ``main(argv)``. :mod:`analyses.results` holds the registry that ``emergence results``
(``make results``) re-runs.
"""
