"""The embedded default: a local checkpoint suite that our own code trains, offline, on CPU.

One concept: the embedded suite's trainer. A run's batches and initial weights (two seeds that a
spec may set apart), its resumable checkpoints, the cached-prefix and interrupted-run
continuations, the cache and the pinned pool that trains runs and hands them out must agree bit
for bit; split, the continuation rules would live apart from the training they continue.

Small GPT-NeoX models (the Pythia architecture: rotary on 25 % of each head's dims, parallel
residual, untied embeddings) in two sizes x three seeds, trained on a text of Python source code shipped with the package
(:data:`interp.sources.environment.TRAINING_TEXT`) mixed with repeated random segments, with checkpoints on a
Pythia-like schedule (log-spaced early steps, then linear). The suite is trained on first use
and cached under the user's cache folder (``$EMERGENCE_LENS_CACHE`` or
``~/.cache/emergence-lens``); each (size, seed) run is one local suite readable by
:class:`interp.sources.LocalSuiteSource`.

Why repeated segments: plain code bytes alone did not teach in-context repetition to a 2-layer
model within 3000 steps (measured here, see docs/embedded.md). A fraction of sequences made of
``prefix_len`` bytes of code followed by a random letters-and-digits segment repeated to fill
the context gives the model an induction signal; the capability then appears abruptly, at a
step that depends on the seed. The measured effect of each knob is in docs/embedded.md.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import torch
from jaxtyping import Int
from torch import Tensor

from interp.core.io import atomic_to_csv, atomic_write_text
from interp.core.training_state import read_training_state
from interp.sources.catalogue import FULL, QUICK, ModelSize, SuiteConfig, run_name, suite_dir, suite_label
from interp.sources.environment import environment, training_text, why_trained_here
from interp.sources.interrupted import (
    PARTIAL_LOSS_FILE,
    adopt_interrupted,
    describe_dead_workers,
    publish_run,
    say_where_stopped_runs_continue,
    stop_workers,
)
from interp.sources.loading import make_byte_tokenizer, quiet_hf_progress, weight_files, weights_digest
from interp.sources.local import finished_run
from interp.sources.progress import RunSteps, drain_progress

if TYPE_CHECKING:
    from transformers import PreTrainedModel

SEGMENT_ALPHABET = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz0123456789", dtype=np.uint8)


def sample_batch(corpus: np.ndarray, cfg: SuiteConfig, rng: np.random.Generator) -> Int[Tensor, "batch n_ctx"]:
    """One training batch of byte tokens.

    Each row is a random window of the corpus; with probability ``cfg.repeat_fraction`` the row is
    instead ``prefix_len`` bytes of code (uniform in ``[0, prefix_len]`` when ``random_prefix``,
    so that repetition is learned at every position, prompts at position 0 included) followed by
    a random letters-and-digits segment (length uniform in ``[segment_min, segment_max]``)
    repeated to fill the context.

    Args:
        corpus: ``UInt8[ndarray, " n_bytes"]``, the training text's bytes (:func:`interp.sources.environment.training_text`),
            longer than ``cfg.n_ctx``.
        cfg: the suite's settings (batch size, context length, repetition rows).
        rng: the generator the windows and segments are drawn from.
    """
    starts = rng.integers(0, len(corpus) - cfg.n_ctx, size=cfg.batch_size)
    rows = np.stack([corpus[s : s + cfg.n_ctx] for s in starts]).astype(np.int64)
    for i in np.flatnonzero(rng.random(cfg.batch_size) < cfg.repeat_fraction):
        length = int(rng.integers(cfg.segment_min, cfg.segment_max + 1))
        segment = rng.choice(SEGMENT_ALPHABET, size=length)
        prefix = int(rng.integers(0, cfg.prefix_len + 1)) if cfg.random_prefix else cfg.prefix_len
        fill = cfg.n_ctx - prefix
        rows[i, prefix:] = np.tile(segment, fill // length + 1)[:fill]
    return torch.from_numpy(rows)


def batch_at(corpus: np.ndarray, cfg: SuiteConfig, seed: int, step: int) -> Int[Tensor, "batch n_ctx"]:
    """The training batch of optimizer step ``step`` (0-based) of a run whose data-order seed is ``seed``.

    Drawn from ``np.random.default_rng([cfg.data_seed, seed, step])``: a function of the step
    alone, so training resumed at step ``A`` sees exactly the batches it would have seen without
    stopping, with no replay of the steps before ``A``. ``seed`` is the run's data-order seed,
    which is its seed unless the suite sets them apart (:attr:`SuiteConfig.data_order_seeds`).

    ``corpus``: ``UInt8[ndarray, " n_bytes"]``, the training text's bytes, as for
    :func:`sample_batch`.
    """
    return sample_batch(corpus, cfg, np.random.default_rng([cfg.data_seed, seed, step]))


def lr_at(cfg: SuiteConfig, step: int) -> float:
    """Learning rate of optimizer step ``step`` (0-based): linear warm-up over
    ``cfg.warmup_steps`` steps, then constant ``cfg.lr`` (as ``LambdaLR`` computes it; the schedule
    of every trainer here, :func:`interp.core.train_loop.warmup_constant`)."""
    from interp.core.train_loop import warmup_constant

    return warmup_constant(cfg.lr, cfg.warmup_steps)(step)


def build_model(size: ModelSize, cfg: SuiteConfig, seed: int):
    """A freshly initialised model of ``size`` (float32; :meth:`ModelSize.model_class`), seeded by
    ``seed``: the run's initialisation seed (``torch.manual_seed(seed)``)."""
    torch.manual_seed(seed)
    config = size.hf_config(vocab_size=256, n_ctx=cfg.n_ctx, attn_implementation=cfg.attn_implementation)
    return size.model_class()(config).float()


def make_optimizer(model: torch.nn.Module, cfg: SuiteConfig) -> torch.optim.AdamW:
    """AdamW (betas 0.9/0.999) at ``cfg.lr`` with ``cfg.weight_decay``; the learning rate of each
    step is set by :func:`lr_at` before the update."""
    return torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)


def save_checkpoint(
    folder: Path,
    model: PreTrainedModel,
    optimizer: torch.optim.Optimizer,
    cfg: SuiteConfig,
    seed: int,
    step: int,
    data_order_seed: int | None = None,
) -> None:
    """Write one resumable checkpoint: ``save_pretrained`` weights (safetensors) plus the
    optimizer state and trainer scalars (the training loop's state format,
    :func:`interp.core.train_loop.save_state`). ``seed``: the run's initialisation seed;
    ``data_order_seed``: its data-order seed (None: ``seed``; then recorded as before the two
    were set apart)."""
    from interp.core.train_loop import save_state

    with quiet_hf_progress():
        model.save_pretrained(folder)
    data = seed if data_order_seed is None else data_order_seed
    extra = {
        "data_order": f"numpy default_rng([data_seed={cfg.data_seed}, seed={data}, step])",
        "seed": seed,
        "trainer_version": cfg.trainer_version,
    }
    if data != seed:
        extra["data_order_seed"] = data
    save_state(folder, optimizer, step, lr_next=lr_at(cfg, step), extra=extra)


def load_checkpoint_state(folder: Path, size: ModelSize, cfg: SuiteConfig, seed: int):
    """Model and optimizer as they were when ``folder`` was saved, ready to continue training.

    Returns:
        ``(model, optimizer, step)``.

    Raises:
        interp.core.training_state.NotResumableError: ``folder`` has no optimizer / trainer state.
    """
    from interp.core.train_loop import load_state

    read_training_state(folder)  # NotResumableError before loading any weights
    # from_pretrained maps the saved names back (transformers saves lm_head as embed_out)
    with quiet_hf_progress():
        model = size.model_class().from_pretrained(
            folder, attn_implementation=cfg.attn_implementation, dtype=torch.float32
        )
    optimizer = make_optimizer(model, cfg)
    step, _, _ = load_state(folder, optimizer)
    return model, optimizer, step


LOSS_FILE = "loss.csv"


def train_run(
    size: ModelSize,
    seed: int,
    cfg: SuiteConfig,
    out_dir: Path | None,
    on_step: Callable[[int, float], None] | None = None,
    eval_fn: Callable[[torch.nn.Module, int], None] | None = None,
    *,
    resume_from: Path | None = None,
    stop_step: int | None = None,
    save_steps: Sequence[int] | None = None,
    forcing=None,
    data_order_seed: int | None = None,
) -> pd.DataFrame:
    """Train one (size, seed) model and save its checkpoints (resumable, see :func:`save_checkpoint`).

    Trains in the calling process, with the kernels torch, MKL and oneDNN chose when they loaded
    there: bit for bit the suite's weights only in a process started with the pins
    (:func:`interp.core.kernel_pins.run_pinned` ``(train_run, ...)``; :func:`ensure_suite` and
    :func:`interp.zoom.zoom` do so). Writes ``out_dir/step{N}/`` for each step of ``save_steps`` (default: the config's schedule);
    ``out_dir=None`` trains without saving (for tuning with ``eval_fn``). The data order depends
    on ``seed`` as well as the initialisation, as across PolyPythia seeds, unless ``data_order_seed``
    sets it apart (then ``seed`` is the initialisation seed alone); each step's batch is
    :func:`batch_at`, so training resumed from a saved step continues exactly (at the same torch
    thread count: the weights may depend on it, see docs/embedded.md).

    Args:
        resume_from: a checkpoint folder written by this trainer; training continues from its step.
        stop_step: last step (default: ``cfg.steps_for(size)``).
        save_steps: steps to save (those after the start step are written).
        forcing: an :class:`interp.forcing.Forcing` (attention bias toward ideal patterns on
            chosen heads, a function of the step: resumable), or any object whose
            ``attention_context(model, tokens, step)`` is the context manager the training forward
            of ``step`` runs in; None (default) trains plainly. (The trainer calls the method and
            does not import :mod:`interp.forcing`: the ideal patterns live upstairs, in patching.)
        data_order_seed: the seed of the data order (:func:`batch_at`); None (default): ``seed``.

    Returns:
        The training-loss curve: one row per optimizer step, columns ``step`` (the weights' step,
        0-based), ``loss`` (mean next-byte cross-entropy on that step's batch, nats), ``lr``.

    Raises:
        ValueError: ``stop_step`` before the start step.
        interp.core.training_state.NotResumableError: ``resume_from`` holds no training state.
    """
    from transformers import PreTrainedModel  # noqa: F401  (import cost paid once here)

    from interp.core.train_loop import train_loop

    stop = cfg.steps_for(size) if stop_step is None else int(stop_step)
    if resume_from is not None:
        model, optimizer, start = load_checkpoint_state(Path(resume_from), size, cfg, seed)
    else:
        model, start = build_model(size, cfg, seed), 0
        optimizer = make_optimizer(model, cfg)
    if stop < start:
        raise ValueError(f"stop_step={stop} is before the start step {start}")
    corpus = training_text(cfg.corpus_bytes)
    data_seed = seed if data_order_seed is None else int(data_order_seed)
    save_at = set(cfg.checkpoint_steps_for(size) if save_steps is None else save_steps)
    rows: list[tuple[int, float, float]] = []

    def at_step(step: int) -> None:  # checkpoints and eval_fn see the weights after `step` updates
        if step in save_at and (step > start or resume_from is None):
            if out_dir is not None:
                save_checkpoint(out_dir / f"step{step}", model, optimizer, cfg, seed, step, data_seed)
            if eval_fn is not None:
                eval_fn(model, step)
                model.train()

    def after_step(step: int, loss: Tensor) -> None:
        rows.append((step, loss.item(), lr_at(cfg, step)))
        if on_step is not None:
            on_step(step + 1, rows[-1][1])

    def forced(tokens: Tensor, step: int):  # the training forward only: checkpoints and eval_fn never see the bias
        return forcing.attention_context(model, tokens, step)

    train_loop(
        model,
        optimizer,
        start=start,
        stop=stop,
        batch_at=lambda step: batch_at(corpus, cfg, data_seed, step),
        loss_fn=lambda m, tokens, step: m(tokens, labels=tokens).loss,
        lr_at=lambda step: lr_at(cfg, step),
        clip=1.0,
        at_step=at_step,
        after_step=after_step,
        forward_context=forced if forcing is not None else None,
    )
    return pd.DataFrame(rows, columns=["step", "loss", "lr"])


def loss_curve(run_dir: str | Path) -> pd.DataFrame:
    """The training-loss curve of one trained run: columns ``step``, ``loss`` (nats), ``lr``.

    Raises:
        FileNotFoundError: the run folder has no ``loss.csv`` (trained by an older trainer).
    """
    path = Path(run_dir) / LOSS_FILE
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} does not exist: the run was not trained by this trainer (re-train with `emergence train-suite`)"
        )
    return pd.read_csv(path)


#: SuiteConfig fields that only choose which runs exist and when they stop; every other field
#: (and the size, the seed and the environment hash) determines the weights of each step.
_RUN_SELECTION = ("sizes", "seeds", "steps", "size_steps", "data_order_seeds")


def _cached_prefix(
    size: ModelSize, seed: int, cfg: SuiteConfig, suite_folder: Path, data_order_seed: int | None = None
) -> Path | None:
    """A finished run of the same size, seed and training settings in a sibling suite of the cache
    (same environment hash), shorter than ``cfg`` asks: the longest such run, else None. Its
    steps are exactly the first steps of the run ``cfg`` wants (the batch, learning rate and
    optimizer state of a step do not depend on when training stops). The run name carries both
    seeds (:func:`run_name`), and a candidate must record the same data-order seed."""
    suffix = suite_folder.name.rsplit("-", 1)[-1]
    same = {k: v for k, v in asdict(cfg).items() if k not in _RUN_SELECTION}
    best, best_steps = None, 0
    data = seed if data_order_seed is None else data_order_seed
    for candidate in suite_folder.parent.glob(f"*-{suffix}/{run_name(size, seed, data)}/suite.json"):
        try:
            meta = json.loads(candidate.read_text())
        except (OSError, ValueError):
            continue
        other = meta.get("config", {})
        try:  # a size field added later is absent from older runs' suite.json: its default applies
            same_size = ModelSize(**meta.get("size", {})) == size
        except TypeError:
            same_size = False
        if not same_size or not meta.get("resumable") or meta.get("data_order_seed", meta.get("seed")) != data:
            continue
        if any(other.get(k) != v for k, v in same.items()):
            continue
        steps = max(meta.get("steps", [0]))
        if best_steps < steps < cfg.steps_for(size):
            best, best_steps = candidate.parent, steps
    return best


def _copy_prefix(prefix: Path, tmp: Path, schedule: Sequence[int]) -> tuple[int, pd.DataFrame]:
    """Copy a shorter run's checkpoints of ``schedule`` into ``tmp``; return its last step and
    its loss rows."""
    meta = json.loads((prefix / "suite.json").read_text())
    have = [s for s in meta["steps"] if s in set(schedule)]
    for step in have:
        shutil.copytree(prefix / f"step{step}", tmp / f"step{step}")
    start = max(have)
    losses = pd.read_csv(prefix / LOSS_FILE)
    return start, losses[losses["step"] < start]


#: Test hook: ``STEP:SIGNAL`` makes a training worker kill itself with SIGNAL at STEP (to test
#: how a dying worker is reported); never set otherwise.
_TEST_KILL_VAR = "EMERGENCE_LENS_TEST_KILL_AT"


def _train_to_folder(
    size: ModelSize, seed: int, cfg: SuiteConfig, final: Path, queue=None, data_order_seed: int | None = None
) -> Path:
    """Train one run into a temporary sibling folder, then rename it onto ``final`` (atomic).

    ``seed``: the run's initialisation seed; ``data_order_seed``: its data-order seed (None: ``seed``).

    Runs in a training worker started with the kernel pins (:func:`iter_suite`,
    :func:`interp.core.kernel_pins.run_pinned`).

    Raises:
        RuntimeError: the pins apply on this machine but this process was not started with them.
    """
    from interp.core import kernel_pins

    kernel_pins.check_process()
    data = seed if data_order_seed is None else int(data_order_seed)
    name = run_name(size, seed, data)
    torch.set_num_threads(cfg.threads)  # one run per core: two processes beat one two-threaded run here
    tmp = final.parent / f".tmp-{final.name}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    interrupted = adopt_interrupted(final, tmp)
    tmp.mkdir(parents=True, exist_ok=True)
    tokenizer = make_byte_tokenizer()
    tokenizer.save_pretrained(tmp / "tokenizer")
    last = [0]
    steps = cfg.steps_for(size)
    kill_step, kill_signal = os.environ[_TEST_KILL_VAR].split(":") if os.environ.get(_TEST_KILL_VAR) else (None, None)
    earlier = pd.DataFrame(columns=["step", "loss", "lr"])  # loss rows before the step training starts from
    rows: list[tuple[int, float, float]] = []  # and those of this process

    def keep_losses(model, step: int) -> None:  # after each checkpoint: what a later resume needs
        kept = pd.DataFrame(rows, columns=earlier.columns)
        atomic_to_csv(pd.concat([earlier, kept], ignore_index=True) if len(earlier) else kept, tmp / PARTIAL_LOSS_FILE)
        if cfg.keep_optimizer == "last":  # step is now resumable: the earlier checkpoints' states go
            drop_optimizer_states(tmp, keep=step)

    def report(step: int, loss: float) -> None:
        rows.append((step - 1, loss, lr_at(cfg, step - 1)))  # the weights' step, as train_run's rows
        dying = kill_step is not None and step >= int(kill_step)
        if queue is not None and (step % 25 == 0 or step == steps or dying):
            queue.put((name, step - last[0], loss, os.getpid(), None))
            last[0] = step
        if dying:
            os.kill(os.getpid(), int(getattr(signal, str(kill_signal), str(kill_signal))))

    if queue is not None:  # the parent learns which process trains this run
        queue.put((name, 0, float("nan"), os.getpid(), None))

    started = time.time()
    prefix = None if interrupted is not None else _cached_prefix(size, seed, cfg, final.parent, data)
    if interrupted is None and prefix is None:
        losses = train_run(size, seed, cfg, tmp, on_step=report, eval_fn=keep_losses, data_order_seed=data)
    else:  # continue an interrupted run, or a shorter cached run of the same training (exact: see train_run)
        if interrupted is not None:
            start, earlier = interrupted
        else:
            assert prefix is not None
            start, earlier = _copy_prefix(prefix, tmp, cfg.checkpoint_steps_for(size))
        if queue is not None:  # the bar counts these steps as done before, and says so
            why = "an interrupted run" if interrupted is not None else f"a shorter cached run, {prefix}"
            queue.put((name, start, float(earlier["loss"].iloc[-1]), os.getpid(), why))
        last[0] = start
        resumed = train_run(
            size,
            seed,
            cfg,
            tmp,
            on_step=report,
            eval_fn=keep_losses,
            resume_from=tmp / f"step{start}",
            data_order_seed=data,
        )
        losses = pd.concat([earlier, resumed], ignore_index=True)
    atomic_to_csv(losses, tmp / LOSS_FILE)
    (tmp / PARTIAL_LOSS_FILE).unlink(missing_ok=True)
    meta = {
        "model_id": f"embedded/{name}",
        "size": asdict(size),
        "seed": seed,
        "data_order_seed": data,
        "steps": list(cfg.checkpoint_steps_for(size)),
        "config": asdict(cfg),
        "train_seconds": round(time.time() - started, 1),
        "tokenizer": "bytes (id = byte value)",
        "resumable": True,
        "threads": torch.get_num_threads(),
        "environment": environment(cfg),
        "continued_from": None if prefix is None else str(prefix),
        # a worker killed half-way (Ctrl-C, a signal) left this run's folder: continued from its last checkpoint
        "resumed_from_step": None if interrupted is None else interrupted[0],
        # the final model's digest, recorded apart from the step labels: a final step whose weights
        # equal an earlier step's then stays searchable (LocalSuiteSource.duplicate_steps)
        "final_digest": weights_digest(weight_files(tmp / f"step{steps}")),
    }
    atomic_write_text(tmp / "suite.json", json.dumps(meta, indent=2))
    return publish_run(tmp, final)  # whole or not at all: another process finished it first -> theirs kept


def drop_optimizer_states(run_folder: Path, keep: int) -> None:
    """Remove the optimizer state of every checkpoint of ``run_folder`` but step ``keep``'s
    (``keep_optimizer="last"``: weights and trainer scalars stay; zoom re-trains from step 0 instead)."""
    from interp.core.training_state import OPTIMIZER_FILE

    for folder in run_folder.glob("step*"):
        if folder.name != f"step{keep}":
            (folder / OPTIMIZER_FILE).unlink(missing_ok=True)


def ensure_suite(
    cfg: SuiteConfig = FULL, root: str | Path | None = None, n_jobs: int | None = None, progress: bool = True
) -> list[Path]:
    """Train (once) and return the run folders of the embedded suite, sizes x seeds.

    Runs already in the cache are reused; missing runs are trained in parallel processes
    (``cfg.threads`` torch threads each), with a progress bar over all training steps. Each run
    folder appears only when complete (trained in a temporary folder, then renamed).

    Args:
        cfg: :data:`FULL` (2 sizes x 3 seeds) or :data:`QUICK` (CI).
        root: cache root (default :func:`cache_root`).
        n_jobs: worker processes (default: CPU count, at most the number of missing runs).
        progress: show a tqdm bar.

    Returns:
        Run folders in (size, seed) order, each a local suite for
        :class:`interp.sources.LocalSuiteSource`.
    """
    ready = dict(iter_suite(cfg, root=root, n_jobs=n_jobs, progress=progress))
    return [ready[name] for name in cfg.run_names()]


def cached_suite_runs(prefer: SuiteConfig = QUICK, root: str | Path | None = None, progress: bool = True) -> list[Path]:
    """The run folders of an embedded suite already in the cache, training ``prefer`` only when none is.

    Order of preference: every run of ``prefer`` cached -> those; else another suite of
    :data:`interp.sources.catalogue.SUITES` whose cache holds a run of every name ``prefer`` has (the
    full suite holds the quick suite's runs, with more steps) -> those runs of it, so a notebook
    keeps its scale; else another complete cached suite -> all its runs; else
    :func:`ensure_suite` (``prefer``) trains. Runs are reused only from a complete run folder
    (``suite.json`` present); nothing is trained when any suite is cached.

    Returns:
        Run folders, each a local suite for :class:`interp.sources.LocalSuiteSource`.
    """
    from interp.sources.catalogue import SUITES, suite_dir

    def cached(cfg: SuiteConfig, names: Sequence[str]) -> list[Path] | None:
        folders = [suite_dir(cfg, root) / name for name in names]
        return folders if all(finished_run(f) for f in folders) else None

    wanted = prefer.run_names()
    others = [cfg for cfg in SUITES.values() if cfg.digest() != prefer.digest()]
    found = cached(prefer, wanted)
    for cfg in others:
        if found is None and set(wanted) <= set(cfg.run_names()):
            found = cached(cfg, wanted)
    for cfg in others:
        if found is None:
            found = cached(cfg, cfg.run_names())
    return found if found is not None else ensure_suite(prefer, root=root, progress=progress)


def iter_suite(
    cfg: SuiteConfig = FULL,
    root: str | Path | None = None,
    n_jobs: int | None = None,
    progress: bool = True,
    runs: Sequence[str] | None = None,
) -> Iterator[tuple[str, Path]]:
    """The suite's runs as ``(run name, folder)``, each as soon as it is ready *and* a core is free.

    With every run cached, all come at once, in (size, seed) order (a damaged run folder is named
    and trained again: :func:`interp.sources.local.finished_run`). Otherwise the missing runs are
    trained as in :func:`ensure_suite`, and a cached run, or a run whose training ended, is handed
    out only once no run waits for a worker and a core is idle (cores minus ``cfg.threads`` per
    training run): the caller's work on it then fills a core the longest-first pool leaves idle
    (~70 s at the end of the full suite on 2 cores). While runs train, torch in the calling
    process uses the idle cores' count (at most its own; restored at the end): a two-threaded
    analysis beside a training process ran 4x slower than a one-threaded one here.

    Stopped before the training ends (Ctrl-C, in a terminal or as Jupyter's interrupt; an error
    here or while the caller handles a run), it cancels the runs not yet started and stops the
    running workers at once; each leaves its folder, which the next training continues to the same
    weights (:func:`interp.sources.interrupted.adopt_interrupted`); a line on standard error says where.

    The workers are spawned with the kernel pins (:mod:`interp.core.kernel_pins`): the same weights on
    every x86-64 CPU with AVX2, whatever the caller's environment says about the kernels.

    ``runs``: only these runs of the suite (names as :meth:`SuiteConfig.run_names` spells them;
    default every run).

    Raises:
        ValueError: ``runs`` names a run the suite does not have.
        interp.core.kernel_pins.WorkerDiedError: a worker died (a signal, or an exit without a result);
            the message names the run, the signal and the last step it reported.
        Whatever a training worker raised, when its run is collected.
    """
    from interp.core import kernel_pins

    base = suite_dir(cfg, root)
    unknown = sorted(set(runs or ()) - set(cfg.run_names()))
    if unknown:
        raise ValueError(f"unknown run {unknown[0]!r} of the suite; valid: {', '.join(cfg.run_names())}")
    wanted = set(cfg.run_names() if runs is None else runs)
    all_runs = [(size, seed, data, base / run_name(size, seed, data)) for size, seed, data in cfg.runs()]
    chosen = [run for run in all_runs if run[-1].name in wanted]
    whole = {final: finished_run(final) for *_, final in chosen}  # a damaged run folder: named, removed
    finished = [(final.name, final) for *_, final in chosen if whole[final]]
    missing = [run for run in chosen if not whole[run[-1]]]
    if not missing:
        yield from finished
        return
    # Longest runs first (steps x d_model^2 x layers), so that the pool stays busy to the end.
    missing.sort(key=lambda r: -(cfg.steps_for(r[0]) * r[0].n_layers * r[0].d_model ** 2))
    note = why_trained_here(base, cfg)
    if note is not None and progress:
        print(note, file=sys.stderr, flush=True)
    base.mkdir(parents=True, exist_ok=True)
    n_jobs = max(1, min(n_jobs or os.cpu_count() or 1, len(missing)))
    ctx = kernel_pins.pinned_context(cfg.threads)  # spawned workers, kernels pinned before torch loads
    stopped: list[str] = []  # runs whose training the caller's stop ended early
    try:
        yield from _train_and_hand_out(cfg, missing, finished, n_jobs, ctx, progress, stopped)
    finally:
        if stopped:
            say_where_stopped_runs_continue(base, stopped)


def _train_and_hand_out(
    cfg: SuiteConfig, missing: list, finished: list, n_jobs: int, ctx, progress: bool, stopped: list[str]
) -> Iterator[tuple[str, Path]]:
    """:func:`iter_suite`'s pool: train ``missing``, hand out runs as cores free up; on an early
    stop, put the unfinished runs' names in ``stopped`` and stop their workers."""
    import multiprocessing as mp
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
    from concurrent.futures.process import BrokenProcessPool

    from interp.core import kernel_pins
    from interp.core.progress import progress_bar

    threads, cores = torch.get_num_threads(), os.cpu_count() or 1
    with mp.get_context("spawn").Manager() as manager, ProcessPoolExecutor(n_jobs, mp_context=ctx) as pool:
        queue = manager.Queue()
        futures = {
            pool.submit(_train_to_folder, size, seed, cfg, final, queue, data): final.name
            for size, seed, data, final in missing
        }
        bar = progress_bar(  # standard output in a notebook, standard error in a terminal
            sum(cfg.steps_for(run[0]) for run in missing),
            f"training suite {suite_label(cfg)} ({len(missing)} runs)",
            unit="step",
            enabled=progress,
        )
        pending = set(futures)  # cached runs (in ``finished``) wait for a free core like trained ones
        workers: dict[int, tuple[str, int]] = {}  # pid -> (run, last step reported)
        # one bar for the training: each training run's step and loss at its end, not bars of their own
        runs = RunSteps({final.name: cfg.steps_for(size) for size, _, _, final in missing})
        try:
            while pending or finished:
                done: set = set()
                if pending:
                    done, pending = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
                drain_progress(queue, bar, workers, runs)
                try:
                    finished += [(futures[f], f.result()) for f in done]  # re-raises a worker's error here
                except BrokenProcessPool:
                    drain_progress(queue, bar, workers)
                    raise kernel_pins.WorkerDiedError(describe_dead_workers(pool, workers)) from None
                idle_cores = cores - len(pending) * cfg.threads
                if finished and len(pending) <= n_jobs and idle_cores >= 1:  # nothing queued, a core idle
                    torch.set_num_threads(min(threads, idle_cores) if pending else threads)
                    yield finished.pop(0)
        finally:
            torch.set_num_threads(threads)
            bar.close()
            unfinished = [future for future in pending if not future.done()]
            for future in unfinished:
                future.cancel()
            if unfinished:  # stopped before the training ended: the workers' folders are resumable
                stopped += [futures[f] for f in unfinished]
                stop_workers(pool)
