"""Sweeps of synthetic-task training runs: the runner that :mod:`sweeps` calls per config.

``emergence sweep SPEC`` uses :data:`train_runner` unless the spec names another runner; its
name, ``"synthetic.sweeps:train_runner"``, is part of every run's id (see
:func:`sweeps.configs.run_id_of`), so renaming it would re-run stored sweeps.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from sweeps.configs import resolve_dataclass_config

if TYPE_CHECKING:
    import pandas as pd

#: The ``runner`` of a sweep spec that names none (``emergence sweep``, the analyses).
DEFAULT_RUNNER = "synthetic.sweeps:train_runner"


class TrainRunner:
    """The default runner: one :func:`synthetic.training.train` run per config (no files, no bar).

    ``resolve`` fills :class:`synthetic.training.TrainConfig` defaults; ``__call__`` returns the
    run's summary (final_loss, floor, plateau_length, steps_to_threshold, emerged, n_params,
    wall_time_s, ...) and per-step metrics.
    """

    @staticmethod
    def config_class() -> type:
        """The run config's dataclass, :class:`synthetic.training.TrainConfig` (imported on use)."""
        from synthetic.training import TrainConfig

        return TrainConfig

    def resolve(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """TrainConfig defaults filled in, and an RWKV run's version chosen from its device (so
        the version is part of the run id); raises ValueError on unknown fields or bad types."""
        resolved = resolve_dataclass_config(self.config_class(), config)
        if resolved.get("arch") == "rwkv":
            resolved["rwkv_version"] = self.config_class()(**resolved).resolved_rwkv_version()
        return resolved

    def __call__(self, config: Mapping[str, Any]) -> tuple[dict, pd.DataFrame]:
        from synthetic.training import TrainConfig, train

        run = TrainConfig(**config)
        result = train(
            run, out_dir=None, progress=False, wandb=False, on_eval=lambda r: log_eval([r]), **_state_kwargs([run])
        )
        # The summary echoes the config as a nested dict; the row already holds every field.
        summary = {k: v for k, v in result.summary.items() if k != "config"}
        return summary, result.metrics

    def group_key(self, config: Mapping[str, Any]) -> str | None:
        """Runs with the same key can train as one ensemble (:meth:`run_group`): the config less
        the fields an ensemble's members may differ in; None when the batched path does not
        cover it (see :func:`synthetic.ensemble.batched_supported`)."""
        from synthetic.ensemble import MEMBER_FIELDS, batched_supported
        from synthetic.training import TrainConfig

        if not batched_supported(TrainConfig(**config)):
            return None
        return json.dumps({k: v for k, v in sorted(config.items()) if k not in MEMBER_FIELDS}, default=str)

    def run_group(self, configs: list[Mapping[str, Any]]) -> list[tuple[dict, pd.DataFrame]]:
        """Train ``configs`` (one :meth:`group_key`) as one ensemble
        (:func:`synthetic.ensemble.train_ensemble`); per config what :meth:`__call__` returns."""
        from synthetic.ensemble import train_ensemble
        from synthetic.training import TrainConfig

        trains = [TrainConfig(**c) for c in configs]
        results = train_ensemble(trains, on_eval=log_eval, **_state_kwargs(trains))
        return [({k: v for k, v in r.summary.items() if k != "config"}, r.metrics) for r in results]


#: The default runner keeps a resumable state of a run (alone or in an ensemble) longer than this
#: many steps, every this many steps rounded up to a multiple of ``eval_every``.
STATE_EVERY = 1000


def _state_kwargs(configs: list) -> dict[str, Any]:
    """``state_dir`` / ``state_every`` for :func:`~synthetic.training.train` inside a sweep
    (:func:`sweeps.execute.run_state_dir`): long runs keep their state; short ones and runs
    outside a sweep do not."""
    from sweeps.execute import run_state_dir

    folder, c0 = run_state_dir(), configs[0]
    if folder is None or c0.steps <= STATE_EVERY:
        return {}
    return {"state_dir": folder, "state_every": -(-STATE_EVERY // c0.eval_every) * c0.eval_every}


def log_eval(rows: list[dict]) -> None:
    """One line per evaluation on stdout, which the sweep engine writes to each run's log as it
    goes (``tail -f STORE/logs/<run_id>.log`` follows a long run): step, loss in nats (of each
    member of an ensemble, in its order) and seconds since the start."""
    losses = " ".join(f"{r['loss']:.4f}" for r in rows)
    print(f"step {rows[0]['step']}: loss {losses} ({rows[0]['elapsed_s']:.0f} s)", flush=True)


train_runner = TrainRunner()
