"""Point of emergence: one rule (post = the first checkpoint at or above the threshold that holds
for the next ``hold`` checkpoints; pre = the one before), the bisection agrees with a full scan and
respects its evaluation budget."""

import math
import warnings

import numpy as np
import pandas as pd
import pytest

from interp.emergence import (
    DEFAULT_HOLD,
    StepEvaluator,
    curve_is_monotone,
    find_emergence,
    held_crossing,
    max_bisection_evaluations,
    no_room_to_hold,
    point_from_curve,
    scan_emergence,
    search_emergence,
)
from interp.tasks import CapabilityScore

PYTHIA_STEPS = tuple([0] + [2**i for i in range(10)] + list(range(1000, 143001, 1000)))

#: Issue 19: neox-2l-128d seed 0 of the quick suite as `make demo` scanned it on an AVX2-only
#: machine (64 prompts): step -> (accuracy, p(answer)) for steps 700..2000.
ISSUE_CURVE = {
    700: (0.125, 0.076),
    800: (0.094, 0.070),
    900: (0.062, 0.075),
    1000: (0.031, 0.068),
    1100: (0.500, 0.240),
    1200: (0.203, 0.175),
    1300: (0.609, 0.351),
    1400: (0.688, 0.440),
    1500: (0.719, 0.447),
    1600: (0.688, 0.411),
    1700: (0.547, 0.319),
    1800: (0.625, 0.361),
    1900: (0.672, 0.401),
    2000: (0.656, 0.336),
}
#: The embedded suites' base schedule up to step 2000 (log-spaced early steps, then every 100).
BASE_SCHEDULE = [0, 1, 2, 4, 8, 16, 32, 64] + list(range(100, 2001, 100))


def issue_curve(steps) -> dict[int, tuple[float, float]]:
    """ISSUE_CURVE on ``steps``; the steps before 700 (not given in the issue) at or below 0.141."""
    early = [0.141, 0.109, 0.125, 0.094, 0.141, 0.078, 0.109]
    return {
        s: ISSUE_CURVE[s] if s in ISSUE_CURVE else (early[k % len(early)], early[k % len(early)] * 0.6)
        for k, s in enumerate(steps)
    }


def counting(curve: dict[int, float]):
    calls = []

    def evaluate(step: int) -> CapabilityScore:
        calls.append(step)
        value = curve[step]
        accuracy, p_answer = value if isinstance(value, tuple) else (value, value / 2)
        return CapabilityScore(accuracy=accuracy, p_answer=p_answer, n_prompts=64)

    return evaluate, calls


def first_at_or_above(steps, acc, threshold=0.5):
    """The plain first crossing, by numpy (what hold = 0 must reduce to)."""
    hits = np.flatnonzero(np.asarray(acc) >= threshold)
    if not len(hits):
        return None, None, False
    i = int(hits[0])
    return (steps[i - 1] if i else None), steps[i], True


@pytest.mark.parametrize("hold", [0, 1, 2])
@pytest.mark.parametrize("jump_index", [1, 2, 17, 77, 100, 152, 153])
def test_bisection_on_pythia_schedule_matches_scan_within_budget(jump_index, hold):
    steps = list(PYTHIA_STEPS)
    assert len(steps) == 154
    rng = np.random.default_rng(jump_index)
    # noisy but monotone-thresholded curve: low before the jump, high after
    acc = [float(rng.uniform(0.0, 0.3)) if i < jump_index else float(rng.uniform(0.7, 1.0)) for i in range(len(steps))]
    acc = list(np.maximum.accumulate(acc))  # monotone
    curve = dict(zip(steps, acc))
    evaluate, calls = counting(curve)
    point = search_emergence(steps, evaluate, threshold=0.5, hold=hold)
    pre, post, emerged = point_from_curve(steps, acc, 0.5, hold=hold)
    assert (point.pre_step, point.post_step, point.emerged) == (pre, post, emerged)
    if jump_index + hold <= len(steps) - 1:
        assert (pre, post) == (steps[jump_index - 1], steps[jump_index]) and point.note == ""
    else:  # the jump within the last hold checkpoints: no room to hold, not dated (issue 67)
        assert (pre, post, emerged) == (None, None, False) and point.note.startswith(
            f"the crossing at step {steps[jump_index]}"
        )
    assert point.monotone and point.hold == hold and point.search == "bisection"
    assert len(calls) == len(set(calls)) == point.n_evaluations
    # ceil(log2 154) + 2 = 10 to close the bracket (the budget before the hold rule), then at most
    # hold to verify post and hold to look before pre
    assert point.n_evaluations <= math.ceil(math.log2(154)) + 2 + 2 * hold == max_bisection_evaluations(154, hold)
    assert max_bisection_evaluations(154, 0) == 10 and max_bisection_evaluations(154) == 14
    assert sorted(point.evaluations["step"]) == sorted(calls)
    # every checkpoint of the hold window after post was evaluated and holds
    window = steps[jump_index + 1 : jump_index + 1 + hold]
    assert set(window) <= set(calls) and all(curve[s] >= 0.5 for s in window)


@pytest.mark.parametrize("schedule", [list(range(0, 2001, 100)), BASE_SCHEDULE], ids=["every-100", "base-schedule"])
def test_issue_curve_touch_at_1100_is_not_the_point(schedule):
    """Issue 19's curve: 0.500 at 1100, 0.203 at 1200, then above from 1300 on. The crossing that
    holds is 1200 -> 1300, by the bisection (on both schedules), the scan's rule and the zoom's."""
    curve = issue_curve(schedule)
    acc = [curve[s][0] for s in schedule]
    assert max(acc[: schedule.index(700)]) <= 0.141
    assert point_from_curve(schedule, acc) == (1200, 1300, True)
    assert held_crossing(schedule, acc, hold=DEFAULT_HOLD) == (1200, 1300)
    assert not curve_is_monotone(schedule, acc)
    evaluate, calls = counting(curve)
    with pytest.warns(UserWarning, match="not monotone"):
        point = search_emergence(schedule, evaluate)
    assert (point.pre_step, point.post_step, point.emerged, point.monotone) == (1200, 1300, True, False)
    assert {1100, 1200, 1300, 1400, 1500} <= set(calls)  # the touch, pre, post and its hold window
    assert len(calls) == len(set(calls)) == point.n_evaluations <= max_bisection_evaluations(len(schedule))
    assert point.n_evaluations == {21: 8, 28: 10}[len(schedule)]


def test_issue_curve_with_hold_0_is_the_touch_the_issue_reported():
    """hold = 0 is the plain first crossing: on the base schedule it gives what the issue saw
    (1000 -> 1100, monotone, 7 evaluations), which the default rule no longer reports."""
    curve = issue_curve(BASE_SCHEDULE)
    acc = [curve[s][0] for s in BASE_SCHEDULE]
    assert point_from_curve(BASE_SCHEDULE, acc, hold=0) == first_at_or_above(BASE_SCHEDULE, acc) == (1000, 1100, True)
    evaluate, calls = counting(curve)
    point = search_emergence(BASE_SCHEDULE, evaluate, hold=0)
    assert (point.pre_step, point.post_step, point.monotone, point.n_evaluations) == (1000, 1100, True, 7)
    assert 1200 not in calls  # without the hold the fall back is never looked at


def test_crossing_at_exactly_the_threshold_that_falls_back():
    steps = list(range(0, 1000, 100))
    acc = [0.1, 0.1, 0.1, 0.5, 0.3, 0.3, 0.7, 0.8, 0.9, 0.9]  # 0.5 at 300 is "at or above", then 0.3
    assert point_from_curve(steps, acc) == (500, 600, True)
    assert point_from_curve(steps, acc, hold=0) == (200, 300, True)  # the touch counts as a crossing
    assert not curve_is_monotone(steps, acc)
    evaluate, calls = counting(dict(zip(steps, acc)))
    with pytest.warns(UserWarning, match="not monotone"):
        point = search_emergence(steps, evaluate)
    assert (point.pre_step, point.post_step, point.emerged, point.monotone) == (500, 600, True, False)
    assert 300 in calls  # looked at the hold checkpoints before pre: the touch that fell back
    # a bisection that lands on the touch itself must drop it: 0.5 at 400, 0.3 at 500
    acc2 = [0.1, 0.1, 0.1, 0.1, 0.5, 0.3, 0.6, 0.7, 0.9, 0.9]
    evaluate, calls = counting(dict(zip(steps, acc2)))
    with pytest.warns(UserWarning, match="not monotone"):
        point = search_emergence(steps, evaluate)
    assert calls[:3] == [900, 0, 400]  # the third probe is the touch
    assert (
        (point.pre_step, point.post_step, point.monotone)
        == (500, 600, False)
        == point_from_curve(steps, acc2)[:2] + (False,)
    )


@pytest.mark.parametrize(
    "tail, expected, note",
    [
        ([0.2, 0.7], (None, None, False), 900),  # the last checkpoint alone: no room to hold (issue 67)
        ([0.7, 0.8], (None, None, False), 800),  # one checkpoint left of the two the rule asks for
        ([0.7, 0.3], (None, None, False), None),  # crosses at the end and falls back at the last checkpoint
        ([0.7, 0.8, 0.3], (None, None, False), None),  # falls back within hold of the crossing
        ([0.7, 0.8, 0.9], (700, 800, True), None),  # room to hold: dated
    ],
)
def test_crossing_in_the_last_checkpoints(tail, expected, note):
    """A crossing within the last ``hold`` checkpoints is no point (the population's rule, now
    the study's too): the scan's rule, the bisection and the sentence agree."""
    steps = list(range(0, 100 * (8 + len(tail)), 100))
    acc = [0.1] * 8 + tail
    assert point_from_curve(steps, acc) == expected
    evaluate, calls = counting(dict(zip(steps, acc)))
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        point = search_emergence(steps, evaluate)
    assert (point.pre_step, point.post_step, point.emerged) == expected
    assert point.n_evaluations <= max_bisection_evaluations(len(steps))
    said = [str(w.message) for w in seen if issubclass(w.category, RuntimeWarning)]
    if note is None:
        assert point.note == "" and not said and no_room_to_hold(steps, acc) is None
    else:
        after = steps[-1] // 100 - note // 100
        sentence = (
            f"the crossing at step {note} has {after} checkpoint{'' if after == 1 else 's'} after it, fewer than the "
            "hold of 2: not dated, the run counts as not emerged by its last checkpoint (censored there)"
        )
        assert point.note == no_room_to_hold(steps, acc) == sentence and said == [f"run: {sentence}"]


def test_hold_0_is_the_plain_first_crossing_on_random_curves():
    rng = np.random.default_rng(0)
    steps = list(range(0, 3000, 100))
    for _ in range(200):
        acc = rng.uniform(0, 1, size=len(steps)) * rng.uniform(0.3, 1.2)
        assert point_from_curve(steps, acc, hold=0) == first_at_or_above(steps, acc)
        assert (held_crossing(steps, acc, hold=0) + (None,))[:2] == first_at_or_above(steps, acc)[:2]


def test_bisection_verifies_a_transient_bump_it_lands_on():
    # The bisection lands on 400 (0.9); the next checkpoint (0.2) shows it does not hold, so the
    # search goes on after it. Without the hold (hold = 0) the bump is the first crossing.
    steps = list(range(0, 1000, 100))
    acc = [0.0, 0.0, 0.0, 0.0, 0.9, 0.2, 0.2, 0.9, 0.9, 0.9]
    evaluate, calls = counting(dict(zip(steps, acc)))
    with pytest.warns(UserWarning, match="not monotone"):
        point = search_emergence(steps, evaluate, threshold=0.5)
    assert not point.monotone and (point.pre_step, point.post_step) == (600, 700) == point_from_curve(steps, acc)[:2]
    evaluate, calls = counting(dict(zip(steps, acc)))
    point = search_emergence(steps, evaluate, threshold=0.5, hold=0)
    assert (
        point.monotone and (point.pre_step, point.post_step) == (300, 400) == point_from_curve(steps, acc, hold=0)[:2]
    )


def test_bisection_cannot_see_a_held_crossing_between_two_probes_below():
    # Documented limit: 0.55 held at 100-300 lies between probes at 0 and 400 (0.4), with no
    # significant drop between them; the bisection reports the later crossing, a scan the first.
    steps = list(range(0, 1000, 100))
    acc = [0.0, 0.55, 0.55, 0.55, 0.4, 0.4, 0.4, 0.9, 0.9, 0.9]
    evaluate, calls = counting(dict(zip(steps, acc)))
    point = search_emergence(steps, evaluate, threshold=0.5)
    assert point.monotone and (point.pre_step, point.post_step) == (600, 700)
    assert 100 not in calls and point_from_curve(steps, acc) == (0, 100, True)


def test_never_emerging_run_costs_two_evaluations_and_is_reported():
    steps = list(PYTHIA_STEPS)
    evaluate, calls = counting(dict.fromkeys(steps, 0.1))
    point = search_emergence(steps, evaluate)
    assert not point.emerged and point.pre_step is None and point.post_step is None
    assert calls == [143000, 0]  # last, then first
    assert point.n_evaluations == 2


def test_emerged_before_first_checkpoint():
    steps = [0, 10, 20, 30]
    evaluate, calls = counting({0: 0.9, 10: 0.9, 20: 0.95, 30: 1.0})
    point = search_emergence(steps, evaluate)
    assert point.emerged and point.pre_step is None and point.post_step == 0
    assert sorted(calls) == [0, 10, 20, 30]  # 0 holds at 10 and 20


def test_non_monotone_probe_values_trigger_a_scan_of_the_stretch():
    steps = list(range(0, 1000, 100))  # 10 steps: 0..900 (700 has room to hold)
    acc = [0.0, 0.0, 0.0, 0.0, 0.45, 0.8, 0.1, 0.9, 0.9, 0.9]  # probe at 400 (0.45) then 600 (0.1): a drop
    evaluate, calls = counting(dict(zip(steps, acc)))
    with pytest.warns(UserWarning, match="not monotone"):
        point = search_emergence(steps, evaluate, threshold=0.5)
    assert not point.monotone
    assert 500 in calls  # the stretch 400..600 was scanned, revealing the transient 0.8 at 500
    assert (point.pre_step, point.post_step) == (600, 700) == point_from_curve(steps, acc)[:2]
    assert len(calls) == len(set(calls)) == point.n_evaluations


class FakeSource:
    """What find_emergence / scan_emergence read of a checkpoint source; loads nothing."""

    def __init__(self, steps, duplicates=None, untouchable=False):
        self.steps, self.duplicates, self.model_id = list(steps), dict(duplicates or {}), "fake-seed0"
        self.untouchable = untouchable

    def available_steps(self):
        assert not self.untouchable, "listed the checkpoints before checking the arguments"
        return self.steps

    def duplicate_steps(self):
        assert not self.untouchable, "read the digests before checking the arguments"
        return self.duplicates

    def searchable_steps(self):
        return [s for s in self.available_steps() if s not in self.duplicate_steps()]


class CurveEvaluator(StepEvaluator):
    """A StepEvaluator over a fixed curve (step -> (accuracy, p_answer)), 64 prompts."""

    def __init__(self, curve):
        super().__init__(source=None, batch=None)
        self.curve = curve

    def __call__(self, step, then=None):  # then: the step read ahead (nothing to read here)
        if step not in self.scores:
            accuracy, p_answer = self.curve[step]
            self.scores[step] = CapabilityScore(accuracy=accuracy, p_answer=p_answer, n_prompts=64)
            self.order.append(step)
        return self.scores[step]


def test_scan_takes_the_rule_over_every_step_and_records_hold():
    steps = list(range(0, 2001, 100))
    source = FakeSource(steps, duplicates={2100: 2000})
    point = scan_emergence(source, None, evaluator=CurveEvaluator(issue_curve(steps)))
    assert (point.pre_step, point.post_step, point.emerged, point.monotone) == (1200, 1300, True, False)
    assert point.search == "scan" and point.n_evaluations == len(steps) == len(point.evaluations)
    assert point.as_row() == {
        "pre_step": 1200,
        "post_step": 1300,
        "emerged": True,
        "n_evaluations": 21,
        "monotone": False,
        "threshold": 0.5,
        "hold": 2,
        "search": "scan",
        "note": "",
    }
    assert point.excluded_steps == {2100: 2000}
    with pytest.warns(UserWarning, match="not monotone"):
        bisected = find_emergence(source, None, evaluator=CurveEvaluator(issue_curve(steps)), hold=1)
    assert (bisected.pre_step, bisected.post_step, bisected.hold) == (1200, 1300, 1)


@pytest.mark.parametrize(
    "call",
    [
        lambda: search_emergence([0, 1], lambda s: CapabilityScore(0, 0, 1), hold=-1),
        lambda: point_from_curve([0, 1], [0.1, 0.9], hold=-1),
        lambda: held_crossing([0, 1], [0.1, 0.9], hold=1.5),
        lambda: find_emergence(FakeSource([0, 1], untouchable=True), None, hold=-1),
        lambda: scan_emergence(FakeSource([0, 1], untouchable=True), None, hold=-1),
    ],
)
def test_bad_hold_is_a_clear_error_before_any_work(call):
    with pytest.raises(ValueError, match=r"hold=(-1|1\.5): must be an integer >= 0"):
        call()


@pytest.mark.parametrize("bad", [[0], []])
def test_too_few_steps_is_a_clear_error(bad):
    with pytest.raises(ValueError, match="at least 2 searchable steps"):
        search_emergence(bad, lambda s: CapabilityScore(0, 0, 1))


def test_threshold_out_of_range():
    with pytest.raises(ValueError, match=r"threshold=1\.5"):
        search_emergence([0, 1], lambda s: CapabilityScore(0, 0, 1), threshold=1.5)


@pytest.mark.slow
def test_main_job_takes_the_point_from_the_scan(tiny_local_suite, tmp_path, monkeypatch):
    """With a scan the report's point is the rule over every step, not the bisection's: on
    0.1, 0.6, 0.4 (hold 0) the scan sees the crossing at 100, the bisection (last and first step
    below the threshold) does not."""
    import pandas as pd

    from interp.core.settings import StudyConfig
    from interp.main_job import runner
    from interp.main_job.report import POINTS_COLUMNS
    from interp.sources import LocalSuiteSource
    from interp.tasks import RepetitionTask

    curve = {0: (0.1, 0.05), 100: (0.6, 0.3), 200: (0.4, 0.2)}

    class Fixed(CurveEvaluator):
        def __init__(self, source, batch, device=None):
            super().__init__(curve)

    monkeypatch.setattr(runner, "StepEvaluator", Fixed)
    task = RepetitionTask(n_prompts=4, length=4)
    config = StudyConfig(
        device="cpu", decompose=False, scores=False, hold=0, scrub=False, scan=True
    )  # the scrubber records with its own evaluator; this test fixes the curve
    scanned = runner.run_study(
        [LocalSuiteSource(tiny_local_suite)], task, config, out_dir=tmp_path / "scan", progress=False
    )
    point = scanned.runs[0].point
    assert (point.pre_step, point.post_step, point.emerged, point.monotone) == (0, 100, True, False)
    assert (point.search, point.n_evaluations, point.hold) == ("scan", 3, 0)
    assert scanned.runs[0].heads is not None  # the heads were ranked between the scan's pre and post
    points = pd.read_csv(tmp_path / "scan" / "points.csv")
    assert list(points.columns) == POINTS_COLUMNS
    assert points[["pre_step", "post_step", "hold", "search"]].values.tolist() == [[0, 100, 0, "scan"]]
    assert scanned.provenance["settings"]["config"]["hold"] == 0
    assert "stays there at the next 0 checkpoint(s)" in scanned.legend()
    bisected = runner.run_study([LocalSuiteSource(tiny_local_suite)], task, config.replace(scan=False), progress=False)
    point = bisected.runs[0].point
    assert (point.emerged, point.search, point.n_evaluations) == (False, "bisection", 2)
    with pytest.raises(ValueError, match="hold=-1"):
        runner.run_study([FakeSource([0, 1], untouchable=True)], task, StudyConfig(hold=-1), progress=False)


def test_a_crossing_with_no_room_to_hold_is_one_rule_and_one_sentence_for_study_and_population():
    """Issue 67 item 6: a crossing at one of the last ``hold`` checkpoints is no point of emergence
    for the study (bisection and scan) as for the population: not emerged, censored at the last
    checkpoint, and each says so with the one sentence of ``no_room_to_hold``."""
    from interp.population.tables import runs_from_curves

    steps = [0, 100, 200, 300, 400]
    curve = {0: 0.0, 100: 0.0, 200: 0.0, 300: 0.0, 400: 0.9}
    acc = list(curve.values())
    sentence = (
        "the crossing at step 400 has 0 checkpoints after it, fewer than the hold of 2: not dated, the run "
        "counts as not emerged by its last checkpoint (censored there)"
    )
    assert no_room_to_hold(steps, acc, hold=2) == sentence
    assert point_from_curve(steps, acc, hold=2) == (None, None, False) and held_crossing(steps, acc) == (None, None)
    evaluate, calls = counting(curve)
    with pytest.warns(RuntimeWarning, match="the crossing at step 400 has 0 checkpoints after it") as seen:
        point = search_emergence(steps, evaluate, hold=2, model_id="r")
    assert (point.pre_step, point.post_step, point.emerged, point.note) == (None, None, False, sentence)
    assert [str(w.message) for w in seen if issubclass(w.category, RuntimeWarning)] == [f"r: {sentence}"]
    assert point.n_evaluations == len(calls) <= max_bisection_evaluations(len(steps), 2)
    # the scan (the rule over every step) says the same as the bisection
    source = FakeSource(steps)
    with pytest.warns(RuntimeWarning, match="fake-seed0: the crossing at step 400 has 0 checkpoints after it"):
        scanned = scan_emergence(source, None, evaluator=CurveEvaluator({s: (a, a) for s, a in curve.items()}))
    assert (scanned.pre_step, scanned.post_step, scanned.emerged, scanned.note) == (None, None, False, sentence)
    # the population: the same curve censored at its budget, in the same words
    table = pd.DataFrame(
        [{"arm": "a", "run": "r", "seed": 1, "n_layers": 1, "d_model": 16, "n_heads": 4, "d_head": 4, "step": s,
          "accuracy": a, "p_answer": a, "budget": 400} for s, a in curve.items()]
    )  # fmt: skip
    (run,) = runs_from_curves(table, hold=2).itertuples()
    assert not run.emerged and run.censored_at == 400 and pd.isna(run.post_step) and run.note == sentence
    # with room to hold: dated, nothing said
    assert no_room_to_hold(steps, acc, hold=0) is None
    held = {**curve, 200: 0.9, 300: 0.9}
    assert no_room_to_hold(steps, list(held.values()), hold=2) is None
    evaluate, _ = counting(held)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        found = search_emergence(steps, evaluate, hold=2)
    assert (found.pre_step, found.post_step, found.note) == (100, 200, "")


def test_bisection_agrees_with_the_scan_near_the_end_of_random_curves():
    """On rising curves whose crossing falls anywhere, the last ``hold`` checkpoints included, the
    bisection's point, ``emerged`` and note equal the rule's over the whole curve, within its budget."""
    rng = np.random.default_rng(1)
    steps = list(range(0, 1200, 100))
    for hold in (1, 2, 3):
        for jump in range(1, len(steps) + 1):
            acc = [0.1 + 0.05 * rng.uniform() if k < jump else 0.7 + 0.2 * rng.uniform() for k in range(len(steps))]
            evaluate, calls = counting(dict(zip(steps, acc)))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                point = search_emergence(steps, evaluate, hold=hold)
            assert (point.pre_step, point.post_step, point.emerged) == point_from_curve(steps, acc, hold=hold)
            assert point.emerged == (jump + hold <= len(steps) - 1), (hold, jump)
            assert point.note == (no_room_to_hold(steps, acc, hold=hold) or "")
            assert point.n_evaluations <= max_bisection_evaluations(len(steps), hold)
