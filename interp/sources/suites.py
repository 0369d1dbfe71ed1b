"""Any suite a spec defines, trained on the executor of your choice: the plan (runs, steps,
checkpoints, disk), the training (:func:`train_suite`) and what a trained suite holds on disk.

A suite spec (``interp/data/suites/*.yaml`` or a user's file; :func:`interp.sources.catalogue.load_suite_spec`)
gives sizes as ``(n_layers, d_model, n_heads)`` (so head count and head size vary independently),
seeds, steps, the checkpoint schedule and the data settings; its hash names its cache folder, as
for the embedded default (``embedded/<config digest>-<environment key>``). Each run is one unit:

- ``executor="local"``: the embedded trainer's pool (:func:`interp.sources.embedded.iter_suite`):
  pinned worker processes, one progress line naming each run's step, Ctrl-C stops at once and the next
  training continues each stopped run from its last checkpoint to the same weights.
- ``executor="joblib"`` / ``"ray"``: one unit per run through :func:`sweeps.driver.run_sweep`
  (the results store in ``<suite folder>/units/``: a finished unit is not run again), each unit
  training its run in a pinned process. On a Ray cluster the cache root must be a folder every
  node sees (``EMERGENCE_LENS_CACHE`` on a shared filesystem).

Either way a run's folder appears only when complete, and the bits are those of the local pool.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pandas as pd

from interp.sources.catalogue import ModelSize, SuiteConfig, run_name, suite_dir

#: Executors of :func:`train_suite`.
EXECUTORS = ("local", "joblib", "ray")
#: Tokens of the byte tokenizer every suite trains with (the embedding's rows).
_VOCAB = 256


def n_parameters(size: ModelSize) -> int:
    """Parameters of a suite model of ``size`` (GPT-NeoX, byte vocabulary of 256, untied
    embeddings, MLP 4·d_model, biases and two layer norms per block): embedding + unembedding
    ``2·256·d``, per layer ``12·d² + 17·d``, final layer norm ``2·d``. A size with its own
    ``d_head`` (Phi, :func:`interp.sources.catalogue.phi_config`): attention width
    ``w = n_heads·d_head``, per layer ``4·d·w + 3·w + d`` (q, k, v, dense) ``+ 8·d² + 5·d`` (MLP)
    ``+ 2·d`` (one layer norm), plus the unembedding's bias of 256."""
    d = size.d_model
    if size.architecture == "phi":
        w = size.n_heads * size.d_head
        return 2 * _VOCAB * d + _VOCAB + size.n_layers * (4 * d * w + 3 * w + 8 * d * d + 8 * d) + 2 * d
    return 2 * _VOCAB * d + size.n_layers * (12 * d * d + 17 * d) + 2 * d


def plan_suite(cfg: SuiteConfig, root: str | Path | None = None) -> pd.DataFrame:
    """One row per run of the suite: what training it means, without training anything.

    Columns: ``run``, ``size``, ``seed`` (the initialisation seed), ``data_order_seed`` (the seed of
    the data order: ``seed`` unless the suite sets them apart, :attr:`SuiteConfig.data_order_seeds`), ``n_layers``, ``d_model``, ``n_heads``, ``d_head``,
    ``steps`` (optimizer steps), ``checkpoints`` (how many), ``disk_mb`` (the run folder once
    trained, estimated: float32 weights at every checkpoint, the AdamW state, two tensors per
    parameter, at every checkpoint or only the last, ``cfg.keep_optimizer``), ``status``
    (``trained``, ``interrupted``: a stopped worker's folder the next training continues, or
    ``to train``) and ``folder``.
    """
    from interp.sources.interrupted import stopped_worker_folders

    base = suite_dir(cfg, root)
    rows = []
    for size in cfg.sizes:
        n_ckpt = len(cfg.checkpoint_steps_for(size))
        weights = 4 * n_parameters(size)
        states = n_ckpt if cfg.keep_optimizer == "every" else 1
        for seed, data in cfg.run_seeds():
            name = run_name(size, seed, data)
            folder = base / name
            if (folder / "suite.json").is_file():
                status = "trained"
            elif stopped_worker_folders(base, name):
                status = "interrupted"
            else:
                status = "to train"
            rows.append(
                dict(
                    run=name,
                    size=size.name,
                    seed=seed,
                    data_order_seed=data,
                    n_layers=size.n_layers,
                    d_model=size.d_model,
                    n_heads=size.n_heads,
                    d_head=size.d_head,
                    rotary_dim=size.rotary_dims,
                    steps=cfg.steps_for(size),
                    checkpoints=n_ckpt,
                    disk_mb=round((n_ckpt * weights + states * 2 * weights) / 1e6, 1),
                    status=status,
                    folder=str(folder),
                )
            )
    return pd.DataFrame(rows)


def folder_mb(folder: str | Path) -> float:
    """Megabytes (10^6 bytes) of the files under ``folder``."""
    return round(sum(p.stat().st_size for p in Path(folder).rglob("*") if p.is_file()) / 1e6, 1)


def check_executor(executor: str, jobs: int | None) -> None:
    """Refuse a bad executor or job count in one line, before anything trains.

    Raises:
        ValueError: ``executor`` not in :data:`EXECUTORS`, ``jobs`` below 1, or the executor's
            package missing (Ray: ``pip install 'emergence-lens[ray]'``).
    """
    if executor not in EXECUTORS:
        raise ValueError(f"executor {executor!r}; valid: {', '.join(EXECUTORS)}")
    if jobs is not None and (isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1):
        raise ValueError(f"jobs={jobs!r} must be a positive integer")
    if executor != "local":
        from sweeps.executors import check_executor as check_sweep_executor

        check_sweep_executor(executor)


def train_suite(
    cfg: SuiteConfig,
    root: str | Path | None = None,
    executor: str = "local",
    jobs: int | None = None,
    ray_address: str | None = None,
    progress: bool = True,
    runs: list[str] | None = None,
) -> list[Path]:
    """Train every missing run of a suite (resumably) and return the run folders.

    Args:
        cfg: the suite (:func:`interp.sources.catalogue.load_suite_spec` of a spec file or name).
        root: cache root (default ``$EMERGENCE_LENS_CACHE`` or ``~/.cache/emergence-lens``).
        executor: ``"local"`` (the pinned pool of :func:`interp.sources.embedded.iter_suite`),
            ``"joblib"`` or ``"ray"`` (one unit per run, :func:`sweeps.driver.run_sweep`).
        jobs: worker processes (local, joblib) or CPUs of a local Ray; default the CPU count.
        ray_address: an existing Ray cluster (``"auto"``, ``"ray://head:10001"``); None starts a local one.
        progress: show progress bars.
        runs: only these runs (names as ``cfg.run_names()``); default all.

    Returns:
        The run folders, in (size, seed) order; each a local suite for
        :class:`interp.sources.LocalSuiteSource`.

    Raises:
        ValueError: a bad executor or job count (:func:`check_executor`), an unknown run name.
        RuntimeError: a unit failed under joblib/Ray (its error named).
    """
    check_executor(executor, jobs)
    wanted = cfg.run_names() if runs is None else list(runs)
    unknown = sorted(set(wanted) - set(cfg.run_names()))
    if unknown:
        raise ValueError(f"unknown run {unknown[0]!r} of the suite; valid: {', '.join(cfg.run_names())}")
    if executor == "local":
        from interp.sources.embedded import iter_suite

        ready = dict(iter_suite(cfg, root=root, n_jobs=jobs, progress=progress, runs=wanted))
        return [ready[name] for name in wanted]
    import os

    from sweeps.driver import failure_lines, run_sweep
    from sweeps.store import load_results

    base = suite_dir(cfg, root)
    units = base / "units"
    outcome = run_sweep(
        {
            "runner": "interp.sources.suites:train_unit",
            "name": f"suite {cfg.digest()}",
            "suite": json.loads(json.dumps(dataclasses.asdict(cfg))),
            "root": str(base.parent.parent),
            "grid": {"run": wanted},
        },
        units,
        jobs=jobs or os.cpu_count() or 1,
        executor=executor,
        ray_address=ray_address,
        progress=progress,
        retry_failed=True,
    )
    if outcome.n_failed:
        raise RuntimeError(
            f"{outcome.n_failed} run(s) of the suite failed: " + "; ".join(failure_lines(load_results(units)))
        )
    return [base / name for name in wanted]


def suite_config_from_dict(data: dict) -> SuiteConfig:
    """A :class:`SuiteConfig` back from ``dataclasses.asdict`` (through JSON: lists for tuples)."""
    return SuiteConfig(
        **{
            **data,
            "sizes": tuple(ModelSize(**size) for size in data["sizes"]),
            "seeds": tuple(data["seeds"]),
            "data_order_seeds": tuple(data.get("data_order_seeds", ())),
            "size_steps": tuple((name, steps) for name, steps in data["size_steps"]),
        }
    )


def train_unit(config: dict) -> tuple[dict, pd.DataFrame]:
    """The sweep runner of :func:`train_suite` (joblib, Ray): train one run in a pinned process.

    ``config``: ``{"suite": asdict(SuiteConfig), "root": cache root, "run": run name}`` (plus the
    sweep's own fields). Returns ``({"run", "folder", "disk_mb", "train_seconds"}, loss curve)``:
    the curve has ``step``, ``loss`` (nats), ``lr``.
    """
    from interp.core import kernel_pins
    from interp.sources.embedded import _train_to_folder, loss_curve

    cfg = suite_config_from_dict(config["suite"])
    final = suite_dir(cfg, config["root"]) / config["run"]
    size, seed, data = cfg.find_run(config["run"])
    if not (final / "suite.json").is_file():
        final.parent.mkdir(parents=True, exist_ok=True)
        import multiprocessing

        if multiprocessing.get_start_method(allow_none=True) not in (None, *multiprocessing.get_all_start_methods()):
            # a joblib (loky) worker names its own start method, which the pinned child, a plain
            # spawned process, cannot look up when it starts
            multiprocessing.set_start_method("spawn", force=True)
        kernel_pins.run_pinned(_train_to_folder, size, seed, cfg, final, threads=cfg.threads, data_order_seed=data)
    meta = json.loads((final / "suite.json").read_text())
    summary = {
        "run": config["run"],
        "folder": str(final),
        "disk_mb": folder_mb(final),
        "train_seconds": meta.get("train_seconds"),
    }
    return summary, loss_curve(final)
