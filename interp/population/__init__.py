"""Populations of runs: suite specs (shape x heads x seeds), survival statistics of the point of
emergence over seeds, and the page that shows them.

- :mod:`interp.population.tables`: the capability table checked, the point of emergence per run
  (the hold rule of :mod:`interp.emergence`), :class:`~interp.population.tables.PopulationResult`
  (save / load) and :func:`~interp.population.tables.population_from_curves`;
- :mod:`interp.population.survival`: Kaplan-Meier, median with interval, share never emerged,
  log-rank and Cox (statsmodels);
- :mod:`interp.population.shapes`: what an arm is made of (rotary dims per head) and what else
  varies with a compared factor;
- :mod:`interp.population.checks`: the Cox fit's model checks (proportional hazards,
  log-linearity) and each head count against the next fewer;
- :mod:`interp.population.robust`: the findings over the grid of rules (threshold x hold);
- :mod:`interp.population.findings`: the findings in words, computed from the tables;
- :mod:`interp.population.page`: ``population.html`` (Jinja2, autoescaped; plotly inlined once);
- :mod:`interp.population.collect`: :func:`~interp.population.collect.population`, the capability
  table evaluated on checkpoint sources;
- :mod:`interp.population.variance`: which part of the seed decides, variance components of a
  per-run quantity over an initialisation × data-order grid (ANOVA and REML, bootstrap intervals,
  permutation tests) and its grid figure;
- :mod:`interp.population.cli`: ``emergence population``.

Nothing in ``interp`` below this package imports it (``tests/test_import_graph.py``).
"""
