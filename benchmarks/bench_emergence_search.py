"""Checkpoint evaluations per point of emergence: bisection vs a full scan.

On every run of the embedded suite (trained on first use; ``--quick`` for the CI-sized suite)
the full scan evaluates every searchable checkpoint; the bisection's own evaluations are counted
separately (both share one memoised evaluator, so no checkpoint is loaded twice). The same is
then done on the 154-step Pythia schedule with each embedded run's curve stretched onto it
(a step-function interpolation), where the budget is ceil(log2 154) + 2 = 10.

Last line: ``evaluations_ratio_full_scan_vs_bisection: <x>`` (mean over runs, Pythia schedule).

Usage: python benchmarks/bench_emergence_search.py [--quick]
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np

from interp.emergence import StepEvaluator, full_scan, max_bisection_evaluations, point_from_curve, search_emergence
from interp.sources import PYTHIA_STEPS, LocalSuiteSource, embedded
from interp.tasks import CapabilityScore, RepetitionTask


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="use the CI-sized suite")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    runs = embedded.ensure_suite(embedded.QUICK if args.quick else embedded.FULL)
    ratios = []
    print(f"{'run':<28}{'N':>4}{'scan':>6}{'bisect':>8}{'budget':>8}  agree  | pythia: scan bisect agree")
    for run in runs:
        source = LocalSuiteSource(run)
        batch = RepetitionTask().build(source.tokenizer())
        evaluator = StepEvaluator(source, batch)
        curve = full_scan(source, batch, evaluator=evaluator)
        steps, acc = curve["step"].tolist(), curve["accuracy"].tolist()
        point = search_emergence(steps, evaluator, model_id=source.model_id)
        agree = (point.pre_step, point.post_step, point.emerged) == point_from_curve(steps, acc)
        # the same curve stretched onto Pythia's 154 steps (position-preserving step function)
        positions = np.linspace(0, len(steps) - 1, len(PYTHIA_STEPS)).round().astype(int)
        stretched = {s: acc[i] for s, i in zip(PYTHIA_STEPS, positions)}
        calls = []

        def evaluate(step: int) -> CapabilityScore:
            calls.append(step)  # noqa: B023
            return CapabilityScore(stretched[step], stretched[step], len(batch))  # noqa: B023

        p_point = search_emergence(list(PYTHIA_STEPS), evaluate)
        p_agree = (p_point.pre_step, p_point.post_step, p_point.emerged) == point_from_curve(
            list(stretched), list(stretched.values())
        )
        ratios.append(len(PYTHIA_STEPS) / p_point.n_evaluations)
        print(
            f"{source.model_id:<28}{len(steps):>4}{len(steps):>6}{point.n_evaluations:>8}"
            f"{max_bisection_evaluations(len(steps)):>8}  {agree!s:<5}  | "
            f"{len(PYTHIA_STEPS):>6} {p_point.n_evaluations:>6} {p_agree}"
        )
        source.close()
    print(f"evaluations_ratio_full_scan_vs_bisection: {np.mean(ratios):.1f}")


if __name__ == "__main__":
    main()
