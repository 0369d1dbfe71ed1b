"""Short training runs of every caller of the training loop, reduced to sha256 digests.

Used by tests/interp/core/test_train_loop.py (the digests recorded before the loops became one,
``interp/core/train_loop.py``, must come back bit for bit) and runnable on its own to print them:
``python tests/interp/core/train_loop_scenarios.py`` (each scenario in a process with the kernel pins,
:func:`interp.core.kernel_pins.run_pinned`, one torch thread).

Each scenario returns ``{name: sha256 hex}``: the saved weights, optimizer state and trainer state
files where the caller saves them, the weights of an in-memory model otherwise, and the per-step
losses / metrics table as float64 bytes. ``resume=True`` stops part-way and resumes from the saved
state; the digests must equal the uninterrupted run's.
"""

from __future__ import annotations

import dataclasses
import hashlib
import tempfile
from pathlib import Path

import numpy as np


def _file(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _floats(values) -> str:
    return hashlib.sha256(np.asarray(values, dtype=np.float64).tobytes()).hexdigest()


def _state(model) -> str:
    h = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        h.update(name.encode())
        h.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def _folder(folder: Path) -> dict[str, str]:
    names = ("model.safetensors", "optimizer.safetensors", "trainer_state.json")
    return {name: _file(folder / name) for name in names if (folder / name).is_file()}


# ---- the embedded suite's trainer (interp.sources.embedded.train_run), plain and forced ---------------------


def embedded_plain(resume: bool = False) -> dict[str, str]:
    """``neox-2l-64d-seed1`` of the quick suite to step 32 (resume: stop at 16, resume)."""
    from interp.sources import catalogue, embedded

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        if resume:
            a = embedded.train_run(catalogue.SMALL, 1, catalogue.QUICK, out, stop_step=16, save_steps=[16])
            b = embedded.train_run(
                catalogue.SMALL, 1, catalogue.QUICK, out, stop_step=32, save_steps=[32], resume_from=out / "step16"
            )
            losses = a["loss"].tolist() + b["loss"].tolist()
        else:
            losses = embedded.train_run(catalogue.SMALL, 1, catalogue.QUICK, out, stop_step=32, save_steps=[16, 32])[
                "loss"
            ].tolist()
        return {**{f"step32/{k}": v for k, v in _folder(out / "step32").items()}, "losses": _floats(losses)}


FORCED_CFG = dict(steps=24, checkpoint_every=8, seeds=(1,), warmup_steps=4, batch_size=4, n_ctx=48)


def embedded_forced(resume: bool = False) -> dict[str, str]:
    """tests/interp/test_forcing.py's tiny forced run (β 1 on L0H0 previous-token and L1H0 induction for
    10 steps, annealed over 6) to step 24 (resume: stop at 8, inside the forced phase)."""
    from interp.forcing import Forcing
    from interp.sources import catalogue, embedded

    cfg = dataclasses.replace(catalogue.QUICK, **FORCED_CFG)
    forcing = Forcing(((0, 0, "previous_token"), (1, 0, "induction")), beta=1.0, steps=10, anneal_steps=6)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        if resume:
            a = embedded.train_run(catalogue.SMALL, 1, cfg, out, forcing=forcing, stop_step=8, save_steps=[8])
            b = embedded.train_run(
                catalogue.SMALL, 1, cfg, out, forcing=forcing, save_steps=[24], resume_from=out / "step8"
            )
            losses = a["loss"].tolist() + b["loss"].tolist()
        else:
            losses = embedded.train_run(catalogue.SMALL, 1, cfg, out, forcing=forcing, save_steps=[8, 24])[
                "loss"
            ].tolist()
        return {**{f"step24/{k}": v for k, v in _folder(out / "step24").items()}, "losses": _floats(losses)}


# ---- synthetic tasks (synthetic.training.train, synthetic.ensemble.train_ensemble) ------------------

SYNTH = {
    "linear_map": dict(
        task="linear-map",
        S=4,
        s=1,
        n_heads=4,
        d_head=8,
        tokens_per_step=512,
        warmup_steps=20,
        eval_every=20,
        eval_tokens=512,
        device="cpu",
    ),
    "cellular_automata": dict(
        task="cellular-automata",
        S=8,
        k=2,
        n_rules=4,
        n_heads=4,
        d_head=8,
        tokens_per_step=512,
        warmup_steps=20,
        eval_every=20,
        eval_tokens=512,
        device="cpu",
    ),
    "linear_map_bias": dict(
        task="linear-map",
        S=4,
        s=1,
        n_heads=4,
        d_head=8,
        tokens_per_step=512,
        warmup_steps=20,
        eval_every=20,
        eval_tokens=512,
        device="cpu",
        bias=2.0,
        bias_schedule="linear-anneal",
        bias_anneal_steps=40,
    ),
}


def synthetic_run(name: str, resume: bool = False) -> dict[str, str]:
    """:data:`SYNTH` ``[name]`` for 60 steps, checkpoints every 30 (resume: a 30-step run, then the
    60-step config resumed from its step 30)."""
    from synthetic.training import TrainConfig, train

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        config = TrainConfig(**SYNTH[name], steps=60, checkpoint_every=30)
        if resume:
            a = train(dataclasses.replace(config, steps=30), out_dir=out / "a", progress=False)
            b = train(config, out_dir=out / "b", progress=False, resume_from=out / "a" / "checkpoints" / "step30")
            import pandas as pd

            # the 30-step run also evaluates at its last step, which the 60-step run does not
            first = a.metrics[a.metrics["step"] % config.eval_every == 0]
            metrics = pd.concat([first, b.metrics], ignore_index=True)
            folder, model = out / "b" / "checkpoints" / "step60", b.model
        else:
            result = train(config, out_dir=out / "a", progress=False)
            metrics, folder, model = result.metrics, out / "a" / "checkpoints" / "step60", result.model
        table = metrics.drop(columns=["elapsed_s"]).to_numpy(dtype=np.float64)
        return {
            **{f"step60/{k}": v for k, v in _folder(folder).items()},
            "weights": _state(model),
            "metrics": _floats(table),
        }


def synthetic_ensemble() -> dict[str, str]:
    """Two linear-map members (seeds 0, 1) trained together for 40 steps (the stacked step)."""
    from synthetic.ensemble import train_ensemble
    from synthetic.training import TrainConfig

    kw = dict(SYNTH["linear_map"], steps=40)
    results = train_ensemble([TrainConfig(**kw, seed=0), TrainConfig(**kw, seed=1, data_seed=1)])
    out = {}
    for i, r in enumerate(results):
        out[f"member{i}/weights"] = _state(r.model)
        out[f"member{i}/metrics"] = _floats(r.metrics.drop(columns=["elapsed_s"]).to_numpy(dtype=np.float64))
    return out


# ---- pre-pretraining (synthetic.pretraining) ----------------------------------------------------------


def pretraining(source: str, resume: bool = False) -> dict[str, str]:
    """Pre-pretrain the linear-map model's twin on ``source`` for 20 steps, then 40 task steps
    (resume: the twin's 20 steps as 10 saved, then resumed; the task run as is)."""
    from synthetic.models import build_model
    from synthetic.pretraining import (
        PretrainSpec,
        pretrain_model,
        pretrain_then_train,
        pretrained_state,
        vocab_dependent_keys,
    )
    from synthetic.training import TrainConfig

    config = TrainConfig(**SYNTH["linear_map"], steps=40)
    spec = PretrainSpec(source=source)
    if resume:  # what pretrained_state does, in two halves
        task_cfg = config.model_config(config.make_task())
        pre_cfg = dataclasses.replace(task_cfg, d_vocab=spec.d_vocab)
        batch = max(1, config.tokens_per_step // task_cfg.n_ctx)
        kw = dict(lr=config.lr, weight_decay=config.weight_decay, seed=config.seed)
        with tempfile.TemporaryDirectory() as tmp:
            losses = pretrain_model(
                build_model(pre_cfg), spec, 10, batch, task_cfg.n_ctx, **kw, checkpoint_dir=tmp, checkpoint_every=10
            )
            twin = build_model(pre_cfg)
            losses += pretrain_model(twin, spec, 20, batch, task_cfg.n_ctx, **kw, resume_from=Path(tmp) / "step10")
        skip = vocab_dependent_keys(task_cfg)
        state = {k: v.detach().cpu().clone() for k, v in twin.state_dict().items() if k not in skip}
    else:
        state, losses = pretrained_state(config, spec, 20)
    h = hashlib.sha256()
    for key, tensor in sorted(state.items()):
        h.update(key.encode())
        h.update(tensor.contiguous().numpy().tobytes())
    result = pretrain_then_train(config, source, pretrain_steps=20)
    return {
        "twin_state": h.hexdigest(),
        "pretrain_losses": _floats(losses),
        "task_weights": _state(result.model),
        "task_metrics": _floats(result.metrics.drop(columns=["elapsed_s"]).to_numpy(dtype=np.float64)),
    }


SCENARIOS = {
    "embedded_plain": (embedded_plain, ()),
    "embedded_forced": (embedded_forced, ()),
    "synthetic_linear_map": (synthetic_run, ("linear_map",)),
    "synthetic_cellular_automata": (synthetic_run, ("cellular_automata",)),
    "synthetic_linear_map_bias": (synthetic_run, ("linear_map_bias",)),
    "synthetic_ensemble": (synthetic_ensemble, ()),
    "pretraining_dyck": (pretraining, ("dyck",)),
    "pretraining_nca": (pretraining, ("nca",)),
}


def run(name: str, resume: bool = False) -> dict[str, str]:
    """Scenario ``name`` in this process."""
    fn, args = SCENARIOS[name]
    return fn(*args, resume=True) if resume else fn(*args)


#: Scenarios whose callers save a resumable state (stop part-way, resume, compare).
RESUMABLE = (
    "embedded_plain",
    "embedded_forced",
    "synthetic_linear_map",
    "synthetic_cellular_automata",
    "synthetic_linear_map_bias",
    "pretraining_dyck",
    "pretraining_nca",
)


def run_all(resumed: bool = True) -> dict[str, dict[str, str]]:
    """Every scenario in this process (call it under :func:`interp.core.kernel_pins.run_pinned`), and with
    ``resumed`` every resumable one stopped and resumed (as ``"{name}/resumed"``)."""
    out = {name: run(name) for name in SCENARIOS}
    if resumed:
        out.update({f"{name}/resumed": run(name, resume=True) for name in RESUMABLE})
    return out


if __name__ == "__main__":
    import json
    import sys

    from interp.core import kernel_pins
    from interp.sources.environment import cpu_model

    sys.path.insert(0, str(Path(__file__).parent))
    import train_loop_scenarios

    digests = kernel_pins.run_pinned(train_loop_scenarios.run_all)
    print(
        json.dumps(
            {
                "cpu_model": cpu_model(),
                "pins": kernel_pins.pins_apply(),
                "level": kernel_pins.level_label(),
                "digests": digests,
            },
            indent=1,
        )
    )
