"""The training pool's progress: one bar over all the suite's steps, fed by the workers'
``(run, steps, loss, pid, resumed)`` messages (:func:`interp.sources.embedded.iter_suite`), that
names each training run's step and loss, and says on a line of its own where a run continues."""

from __future__ import annotations

from interp.core.progress import say, skip


class RunSteps:
    """Where each run stands while it trains (``totals``: run -> its steps), for the end of the
    suite's bar: ``neox-2l-64d-seed1 1200/2400 loss 2.310, neox-2l-64d-seed2 800/2400 loss 2.402``
    (one bar per level of work: the runs are a part of the suite's line, not bars of their own)."""

    def __init__(self, totals: dict[str, int]) -> None:
        self.totals = totals
        self.at: dict[str, tuple[int, float]] = {}  # run -> (steps done, last loss)

    def update(self, name: str, steps: int, loss: float) -> None:
        done, last = self.at.get(name, (0, float("nan")))
        self.at[name] = (done + steps, loss if loss == loss else last)

    def text(self) -> str:
        """The runs still training, each with its step and last loss."""
        parts = []
        for name, (done, loss) in self.at.items():
            if done < self.totals.get(name, 0):
                parts.append(f"{name} {done}/{self.totals[name]}" + (f" loss {loss:.3f}" if loss == loss else ""))
        return ", ".join(parts)


def drain_progress(queue, bar, workers: dict | None = None, runs: RunSteps | None = None) -> None:
    """Move the workers' messages onto the progress bar; ``workers`` keeps each worker's run and
    last reported step (pid -> (run, step)).

    A message is ``(run, steps, loss, pid, resumed)``: ``steps`` more steps trained, or, where
    ``resumed`` says why (``"an interrupted run"``, ``"a shorter cached run"``), the step the run
    continues from: those steps count in the bar's position but not in its rate
    (:func:`interp.core.progress.skip`), and a line ``<run>: continuing from step N of M (...)`` says so.
    """
    from queue import Empty

    while True:
        try:
            name, steps, loss, pid, resumed = queue.get_nowait()
        except Empty:
            return
        if workers is not None:  # steps are counted per run; a worker may train several in turn
            same_run = pid in workers and workers[pid][0] == name
            workers[pid] = (name, (workers[pid][1] if same_run else 0) + steps)
        if resumed:
            total = runs.totals.get(name) if runs is not None else None
            of = f" of {total}" if total else ""
            say(
                bar,
                f"{name}: continuing from step {steps}{of} ({resumed}); its steps before are not counted in the rate",
            )
            skip(bar, steps)
        else:
            bar.update(steps)
        if runs is not None:
            runs.update(name, steps, loss)
            bar.set_postfix_str(runs.text(), refresh=False)
        elif loss == loss:  # not the NaN of a worker's first message
            bar.set_postfix_str(f"{name} loss {loss:.3f}", refresh=False)
