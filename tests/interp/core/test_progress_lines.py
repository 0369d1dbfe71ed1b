"""Progress that tells the truth (issue 71): plain lines when the output is not a terminal, a rate
and a time left only from work done in this process, and a line saying where a resumed run
continues, instead of a burst of 1525 step/s."""

from __future__ import annotations

import io
import queue

from tqdm import tqdm

from interp.core.progress import LineProgress, progress_bar, skip
from interp.sources.progress import RunSteps, drain_progress

RUN = "neox-2l-64d-seed0"


def test_output_that_is_not_a_terminal_gets_plain_lines(capsys):
    bar = progress_bar(6, "units", unit="unit")  # capsys: standard error is not a terminal
    assert isinstance(bar, LineProgress)
    bar.set_postfix_str("step 300 (4 checkpoints)")
    for _ in range(6):
        bar.update(1)
    bar.close()
    bar.close()  # once
    err = capsys.readouterr().err
    assert "\r" not in err and "\x1b" not in err
    first, last = err.splitlines()  # one at once, one at the end: the next comes after 30 s
    assert first == "units: 0/6 units (0 %), 00:00 elapsed"  # no rate, no time left: nothing done yet
    assert last.startswith("units: 6/6 units (100 %), 00:00 elapsed, ") and " unit/s, about 00:00 left; " in last
    assert last.endswith("; step 300 (4 checkpoints)")


def test_a_line_every_so_often_and_none_when_disabled():
    out = io.StringIO()
    bar = LineProgress(100, "training", unit="step", file=out, every=0.0)  # a line at every update
    bar.update(10)
    bar.update(10)
    assert [line.split(",")[0] for line in out.getvalue().splitlines()] == [
        "training: 0/100 steps (0 %)",
        "training: 10/100 steps (10 %)",
        "training: 20/100 steps (20 %)",
    ]
    quiet = io.StringIO()
    silent = LineProgress(100, "training", file=quiet, enabled=False)
    silent.update(50)
    silent.close()
    assert quiet.getvalue() == ""


def test_a_resumed_run_says_where_it_continues_and_its_earlier_steps_are_not_in_the_rate():
    out = io.StringIO()
    bar = LineProgress(3000 + 2000, "training suite", unit="step", file=out, every=3600)
    runs = RunSteps({RUN: 3000, "neox-2l-128d-seed0": 2000})
    messages: queue.Queue = queue.Queue()
    messages.put((RUN, 0, float("nan"), 11, None))  # the worker's first message: which process
    messages.put((RUN, 800, 2.512, 11, "an interrupted run"))  # it continues from step 800
    messages.put((RUN, 25, 2.498, 11, None))
    messages.put(("neox-2l-128d-seed0", 25, 2.9, 12, None))
    workers: dict = {}
    drain_progress(messages, bar, workers, runs)
    assert f"{RUN}: continuing from step 800 of 3000 (an interrupted run)" in out.getvalue()
    assert (bar.n, bar.initial) == (850, 800)  # the position counts step 800; the rate only 50 steps
    assert workers == {11: (RUN, 825), 12: ("neox-2l-128d-seed0", 25)}  # the last step each reported
    assert runs.text() == f"{RUN} 825/3000 loss 2.498, neox-2l-128d-seed0 25/2000 loss 2.900"
    assert bar.postfix == runs.text()


def test_skip_on_a_terminal_bar_keeps_the_steps_out_of_its_rate():
    bar = tqdm(total=3000, file=io.StringIO(), unit="step", mininterval=0)
    skip(bar, 800)
    bar.update(25)
    meter = bar.format_dict
    assert (meter["n"], meter["initial"]) == (825, 800)
    assert bar.last_print_n == 825  # the smoothed rate's next count starts after the skipped steps
    bar.close()


def test_the_last_line_is_not_printed_twice():
    out = io.StringIO()
    bar = LineProgress(2, "units", unit="unit", file=out, every=0.0)
    bar.update(1)
    bar.update(1)  # printed: 2/2
    bar.close()  # says nothing new
    assert [line.split(",")[0] for line in out.getvalue().splitlines()] == [
        "units: 0/2 units (0 %)",
        "units: 1/2 units (50 %)",
        "units: 2/2 units (100 %)",
    ]
