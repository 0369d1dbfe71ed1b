"""The training pool's progress: the suite's bar over all steps and a bar per run while it trains,
fed by the workers' ``(run, steps, loss, pid)`` messages (:func:`interp.sources.embedded.iter_suite`)."""

from __future__ import annotations


class RunBars:
    """A tqdm bar per run while it trains (``totals``: run -> its steps), below the suite's bar;
    none for a suite of one run, without ``progress``, or in a Jupyter kernel (its one-line text
    bars cannot stack: the suite's bar names the run and its loss there)."""

    def __init__(self, totals: dict[str, int], progress: bool) -> None:
        from interp.core.progress import in_kernel

        self.totals, self.enabled, self.bars = totals, progress and len(totals) > 1 and not in_kernel(), {}

    def update(self, name: str, steps: int, loss: float) -> None:
        if not self.enabled or name not in self.totals:
            return
        from tqdm.auto import tqdm

        bar = self.bars.get(name)
        if bar is None:
            bar = self.bars[name] = tqdm(total=self.totals[name], desc=f"  {name}", unit="step", leave=False)
        bar.update(steps)
        if loss == loss:
            bar.set_postfix_str(f"loss {loss:.3f}", refresh=False)
        if bar.n >= self.totals[name]:
            self.bars.pop(name).close()

    def close(self) -> None:
        for bar in self.bars.values():
            bar.close()
        self.bars.clear()


def drain_progress(queue, bar, workers: dict | None = None, run_bars: RunBars | None = None) -> None:
    """Move the workers' (run, steps, loss, pid) messages onto the progress bar (and each run's own,
    ``run_bars``); ``workers`` keeps each worker's run and last reported step (pid -> (run, step))."""
    from queue import Empty

    while True:
        try:
            name, steps, loss, pid = queue.get_nowait()
        except Empty:
            return
        if workers is not None:  # steps are counted per run; a worker may train several in turn
            same_run = pid in workers and workers[pid][0] == name
            workers[pid] = (name, (workers[pid][1] if same_run else 0) + steps)
        bar.update(steps)
        if run_bars is not None:
            run_bars.update(name, steps, loss)
        if loss == loss:  # not the NaN of a worker's first message
            bar.set_postfix_str(f"{name} loss {loss:.3f}")
