"""Runs that a stopped training left behind, and how the next training takes them over.

A suite run trains in a temporary sibling of its folder, ``.tmp-<run>-<pid>``, renamed onto the
run's folder when it is done (:func:`interp.sources.embedded._train_to_folder`, :func:`publish_run`:
processes sharing a cache see no run or a whole one; the first copy published is kept). A training stopped
half-way (Ctrl-C, Jupyter's interrupt, a killed worker or caller) leaves that folder. After each
checkpoint the worker also keeps its loss rows so far there (:data:`PARTIAL_LOSS_FILE`), so the
folder holds all a resume needs: the next training of the suite takes over the folder of a worker
whose process is gone (:func:`adopt_interrupted`), cuts it back to its last checkpoint with a whole
training state (:func:`resumable_step`) and trains on from there, to the bytes of a run never
stopped (resume is exact: docs/embedded.md, "Checkpoints that continue training exactly").

The caller's side of a stop: :func:`stop_workers` ends a pool's workers at once instead of waiting
for their runs, and :func:`say_where_stopped_runs_continue` prints the step each run continues from;
a worker that died on its own is described by :func:`describe_dead_workers`.
Nothing here imports the trainer or the suite configs (``interp.sources.environment`` reads these
folders for ``emergence env``).
"""

from __future__ import annotations

import errno
import os
import shutil
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from interp.core.training_state import has_training_state

#: The loss rows of a run still training, rewritten after each checkpoint (removed once it is done).
PARTIAL_LOSS_FILE = "loss.partial.csv"


def process_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists on this machine (one of another user's counts too)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stopped_worker_folders(suite: Path, run: str = "*") -> list[Path]:
    """The ``.tmp-<run>-<pid>`` folders in ``suite`` whose worker process is gone, sorted (``run``:
    a run name, or ``*`` for every run)."""
    return [
        folder
        for folder in sorted(suite.glob(f".tmp-{run}-*"))
        if (pid := folder.name.rsplit("-", 1)[-1]).isdigit() and not process_alive(int(pid))
    ]


def resumable_step(folder: Path) -> tuple[int, pd.DataFrame] | None:
    """The last step of a half-trained run folder that training can continue from: a checkpoint
    with its whole training state (written last) whose earlier loss rows were kept
    (:data:`PARTIAL_LOSS_FILE`); with those rows. None when there is no such step after step 0."""
    try:
        losses = pd.read_csv(folder / PARTIAL_LOSS_FILE)
    except (OSError, ValueError):
        return None
    covered = int(losses["step"].max()) + 1 if len(losses) else 0  # updates whose loss was kept
    steps = [
        int(path.name[4:])
        for path in folder.glob("step*")
        if path.name[4:].isdigit() and has_training_state(path) and (path / "model.safetensors").is_file()
    ]
    steps = [step for step in steps if 0 < step <= covered]
    if not steps:
        return None
    start = max(steps)
    return start, losses[losses["step"] < start].reset_index(drop=True)


def adopt_interrupted(final: Path, tmp: Path) -> tuple[int, pd.DataFrame] | None:
    """Take over the folder a killed worker left for this run (``.tmp-<run>-<pid>`` beside
    ``final``, its process gone): renamed to ``tmp``, cut back to its last resumable checkpoint
    (:func:`resumable_step`). Returns that step and the loss rows before it, or None (``tmp`` then
    does not exist). Other dead workers' folders of the run are removed; a live worker's are left."""
    best: tuple[Path, tuple[int, pd.DataFrame]] | None = None
    for folder in stopped_worker_folders(final.parent, final.name):
        if folder == tmp:
            continue
        found = resumable_step(folder)
        if found is not None and (best is None or found[0] > best[1][0]):
            if best is not None:
                shutil.rmtree(best[0], ignore_errors=True)
            best = (folder, found)
        else:
            shutil.rmtree(folder, ignore_errors=True)
    if best is None:
        return None
    try:
        os.replace(best[0], tmp)
    except OSError:  # another process took it first
        return None
    start = best[1][0]
    for path in tmp.glob("step*"):
        if not path.name[4:].isdigit() or int(path.name[4:]) > start:
            shutil.rmtree(path, ignore_errors=True)
    return best[1]


def publish_run(tmp: Path, final: Path) -> Path:
    """Rename the whole run folder ``tmp`` onto ``final`` in one step; returns ``final``.

    Processes sharing a cache (two ``emergence`` commands, ``make demo`` beside ``make test``) see
    no run folder or a whole one, never another's half-trained run: a run trains under
    ``.tmp-<run>-<pid>`` and ``os.replace`` (one ``rename``, atomic on one file system) makes it
    appear. ``rename`` refuses a non-empty target, so checking and renaming are one step: when
    another process published the same run first (same settings, hence the same weights), its
    folder is kept and ``tmp`` removed; a folder under the run's name without ``suite.json`` (no
    finished run, e.g. one copied half-way by hand) is removed (renamed first) and replaced.

    Raises:
        OSError: the rename fails for another reason (another file system, permissions).
    """
    from interp.core.io import remove_folder

    for _ in range(3):
        try:
            os.replace(tmp, final)
            return final
        except OSError as error:
            if error.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                raise
        if (final / "suite.json").is_file():  # another process finished the same run first: keep theirs
            shutil.rmtree(tmp, ignore_errors=True)
            return final
        remove_folder(final)
    os.replace(tmp, final)
    return final


def stop_workers(pool) -> None:
    """Terminate a process pool's workers now (SIGTERM), instead of waiting for their runs."""
    terminate = getattr(pool, "terminate_workers", None)  # Python >= 3.14
    if terminate is not None:
        terminate()
        return
    from interp.core.adapters.cpython import pool_processes

    for process in pool_processes(pool).values():
        if process.is_alive():
            process.terminate()


def say_where_stopped_runs_continue(suite: Path, runs: Sequence[str]) -> None:
    """One line on standard error: the step each stopped run continues from next time."""
    where = []
    for run in sorted(runs):
        steps = [found[0] for folder in stopped_worker_folders(suite, run) if (found := resumable_step(folder))]
        where.append(f"{run} from step {max(steps)}" if steps else f"{run} from step 0")
    print(
        f"training stopped; the next training of this suite continues {', '.join(where)} (to the same weights)",
        file=sys.stderr,
        flush=True,
    )


def describe_dead_workers(pool, workers: dict) -> str:
    """One line on the workers of a broken pool: which run each dead one trained, how it ended
    (signal), and the last step it reported (``workers``: pid -> (run, last step reported))."""
    from interp.core.kernel_pins import describe_exit, pool_exit_codes

    codes = pool_exit_codes(pool)
    # the pool terminates (SIGTERM) the others once one died: name the first cause first
    order = sorted(codes, key=lambda pid: (codes[pid] == -signal.SIGTERM, codes[pid] is None))
    parts = []
    for pid in order:
        if codes[pid] is None and pid not in workers:
            continue
        run, step = workers.get(pid, ("no run yet", 0))
        parts.append(f"run {run} (pid {pid}) {describe_exit(codes[pid])} at step {step} (the last it reported)")
    return "a training worker died: " + ("; ".join(parts) or "no exit status recorded")
