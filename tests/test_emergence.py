"""Point of emergence: bisection agrees with a full scan and respects its evaluation budget."""

import math

import numpy as np
import pytest

PYTHIA_STEPS = tuple([0] + [2**i for i in range(10)] + list(range(1000, 143001, 1000)))
from interp.emergence import max_bisection_evaluations, point_from_curve, search_emergence
from interp.tasks import CapabilityScore


def counting(curve: dict[int, float]):
    calls = []

    def evaluate(step: int) -> CapabilityScore:
        calls.append(step)
        return CapabilityScore(accuracy=curve[step], p_answer=curve[step] / 2, n_prompts=64)

    return evaluate, calls


@pytest.mark.parametrize("jump_index", [1, 2, 17, 77, 100, 152, 153])
def test_bisection_on_pythia_schedule_matches_scan_within_budget(jump_index):
    steps = list(PYTHIA_STEPS)
    assert len(steps) == 154
    rng = np.random.default_rng(jump_index)
    # noisy but monotone-thresholded curve: low before the jump, high after
    acc = [float(rng.uniform(0.0, 0.3)) if i < jump_index else float(rng.uniform(0.7, 1.0)) for i in range(len(steps))]
    acc = list(np.maximum.accumulate(acc))  # monotone
    curve = dict(zip(steps, acc))
    evaluate, calls = counting(curve)
    point = search_emergence(steps, evaluate, threshold=0.5)
    pre, post, emerged = point_from_curve(steps, acc, 0.5)
    assert (point.pre_step, point.post_step, point.emerged) == (pre, post, emerged)
    assert (pre, post) == (steps[jump_index - 1], steps[jump_index])
    assert point.monotone
    assert len(calls) == len(set(calls)) == point.n_evaluations
    assert point.n_evaluations <= math.ceil(math.log2(154)) + 2 == max_bisection_evaluations(154) == 10
    assert sorted(point.evaluations["step"]) == sorted(calls)


def test_never_emerging_run_costs_one_evaluation_and_is_reported():
    steps = list(PYTHIA_STEPS)
    evaluate, calls = counting({s: 0.1 for s in steps})
    point = search_emergence(steps, evaluate)
    assert not point.emerged and point.pre_step is None and point.post_step is None
    assert calls == [143000, 0]  # last, then first
    assert point.n_evaluations == 2


def test_emerged_before_first_checkpoint():
    steps = [0, 10, 20, 30]
    evaluate, _ = counting({0: 0.9, 10: 0.9, 20: 0.95, 30: 1.0})
    point = search_emergence(steps, evaluate)
    assert point.emerged and point.pre_step is None and point.post_step == 0


def test_monotone_bisection_cannot_see_a_transient_bump_between_probes():
    # Documented limit: bisection keeps its probes consistent, so a bump it never lands on is
    # invisible; the result is still a real crossing between consecutive steps.
    steps = list(range(0, 900, 100))
    acc = [0.0, 0.0, 0.0, 0.0, 0.9, 0.2, 0.2, 0.9, 0.9]
    evaluate, calls = counting(dict(zip(steps, acc)))
    point = search_emergence(steps, evaluate, threshold=0.5)
    assert point.monotone and (point.pre_step, point.post_step) == (300, 400)
    assert acc[3] < 0.5 <= acc[4]


def test_non_monotone_probe_values_trigger_a_scan_of_the_stretch():
    steps = list(range(0, 900, 100))  # 9 steps: 0..800
    acc = [0.0, 0.0, 0.0, 0.0, 0.45, 0.8, 0.1, 0.9, 0.9]  # probe at 400 (0.45) then 600 (0.1): a drop
    evaluate, calls = counting(dict(zip(steps, acc)))
    with pytest.warns(UserWarning, match="not monotone"):
        point = search_emergence(steps, evaluate, threshold=0.5)
    assert not point.monotone
    assert 500 in calls  # the stretch 400..600 was scanned, revealing the transient 0.8 at 500
    assert (point.pre_step, point.post_step) == (600, 700) == point_from_curve(steps, acc)[:2]
    assert len(calls) == len(set(calls)) == point.n_evaluations


@pytest.mark.parametrize("bad", [[0], []])
def test_too_few_steps_is_a_clear_error(bad):
    with pytest.raises(ValueError, match="at least 2 searchable steps"):
        search_emergence(bad, lambda s: CapabilityScore(0, 0, 1))


def test_threshold_out_of_range():
    with pytest.raises(ValueError, match="threshold=1.5"):
        search_emergence([0, 1], lambda s: CapabilityScore(0, 0, 1), threshold=1.5)
