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
- :mod:`interp.population.judge`: the one judge, every verdict word (``Evidence`` -> ``Verdict``);
- :mod:`interp.population.contrast`: one two-arm contrast read for the judge (the rule grid's cells);
- :mod:`interp.population.contrast_stats`: that contrast's statistics (proportional-hazards test,
  Kaplan-Meier crossings, shares at fixed steps, RMST, paired tests over seeds);
- :mod:`interp.population.verdicts`: the paper's claims 1 and 4 judged on one population, in words;
- :mod:`interp.population.claim2_pair`: claim 2 at the consecutive checkpoints with the largest jump;
- :mod:`interp.population.kept`: the kept runs' folders and files (curves, mechanism, pairs, timelines),
  evaluating and keeping one run, and writing a docs block;
- :mod:`interp.population.reading`: the population's docs block and summaries read from kept curves;
- :mod:`interp.population.judged`: one contrast of kept arms judged in one line (the entries' claim lines);
- :mod:`interp.population.seed_split`: claim 1's split of the seed (initialisation × data order), judged;
- :mod:`interp.population.forced`: the forced runs (true pattern, control) of the forcing entries;
- :mod:`interp.population.claim2_timeline`: claim 2 along the time axis: when a seed's top heads start
  to matter, relative to its point of emergence;
- :mod:`interp.population.answer`: the answer table (claim | the paper | evidence | verdict |
  robust? | what would decide it) that opens docs/results.md, the page and the notebook display;
- :mod:`interp.population.mechanism`: claim 2 (the mechanism) as a statistic over an arm's seeds;
- :mod:`interp.population.heads`: per-checkpoint head features of one run (what forecast and
  formation read);
- :mod:`interp.population.forecast`: a seed's point of emergence forecast from its earlier checkpoints;
- :mod:`interp.population.formation`: the order circuits form in, per seed;
- :mod:`interp.population.findings`: the findings in words, computed from the tables;
- :mod:`interp.population.result`: :class:`~interp.population.result.StatResult`, the one result
  type of every statistic (its table, the judge's verdict, an HTML section, a notebook display);
- :mod:`interp.population.statistics`: each statistic as a ``StatResult``, one function each, and the
  page's list of them (:data:`~interp.population.statistics.POPULATION_STATISTICS`);
- :mod:`interp.population.figures`: the page's figures (Kaplan-Meier, E per seed, heatmaps);
- :mod:`interp.population.page`: ``population.html`` (Jinja2, autoescaped; plotly inlined once;
  the statistics rendered by one loop);
- :mod:`interp.population.insight_page`: ``insight.html`` (the forecast and the formation order);
- :mod:`interp.population.control_page`: ``forcing_control.html`` (the forcing control);
- :mod:`interp.population.collect`: :func:`~interp.population.collect.population`, the capability
  table evaluated on checkpoint sources;
- :mod:`interp.population.variance`: which part of the seed decides, variance components of a
  per-run quantity over an initialisation × data-order grid (ANOVA and REML, bootstrap intervals,
  permutation tests) and its grid figure;
- :mod:`interp.population.cli`: ``emergence population``.

Nothing in ``interp`` below this package imports it (``tests/project/test_import_graph.py``).
"""
