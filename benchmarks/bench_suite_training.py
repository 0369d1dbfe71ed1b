"""Embedded-suite training: where one step's time goes, and the suite's wall time vs the old trainer.

Measured in one run, one torch thread (as each training process uses):

1. A profile of one training step per size (torch profiler, top operators), and the matmul FLOPs
   per step against the time the matmuls take (the machine's achieved rate), so it is clear
   whether a step is compute-bound or overhead-bound.
2. Per-step time of the old loop (``LambdaLR``, one sequential data generator, no optimizer state
   in the checkpoints) and of the current one (:func:`interp.sources.embedded.train_run`: batch derived
   from the step, learning rate from the step), ``--steps`` steps each, interleaved so that load
   from other processes hits both alike; and the time to save one checkpoint (old: weights only;
   now: weights + optimizer state).
3. The suite's wall time on 2 worker processes, estimated from those per-run times with the
   pool's longest-first order: the old schedule (3000 steps for both sizes) against the current
   FULL config. The headline is the ratio old / new.

Usage: ``python benchmarks/bench_suite_training.py [--steps 40] [--no-profile]``
"""

from __future__ import annotations

import argparse
import heapq
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from interp.sources import embedded, quiet_hf_progress
from interp.sources.environment import training_text


def old_loop(size, cfg, steps: int, corpus) -> float:
    """Seconds per step of the previous trainer's loop (sequential rng, LambdaLR)."""
    model = embedded.build_model(size, cfg, 0)
    rng = np.random.default_rng([cfg.data_seed, 0])
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / max(1, cfg.warmup_steps)))
    model.train()

    def one():
        tokens = embedded.sample_batch(corpus, cfg, rng)
        loss = model(tokens, labels=tokens).loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        loss.item()

    for _ in range(3):
        one()
    start = time.perf_counter()
    for _ in range(steps):
        one()
    return (time.perf_counter() - start) / steps


def new_loop(size, cfg, steps: int) -> float:
    """Seconds per step of :func:`interp.sources.embedded.train_run` (no checkpoints saved)."""
    embedded.train_run(size, 0, cfg, None, stop_step=3, save_steps=[])  # warm-up
    start = time.perf_counter()
    embedded.train_run(size, 0, cfg, None, stop_step=steps, save_steps=[])
    return (time.perf_counter() - start) / steps


def save_seconds(size, cfg, with_state: bool) -> float:
    model = embedded.build_model(size, cfg, 0)
    optimizer = embedded.make_optimizer(model, cfg)
    tokens = embedded.batch_at(training_text(cfg.corpus_bytes), cfg, 0, 0)
    model(tokens, labels=tokens).loss.backward()
    optimizer.step()
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        for i in range(5):
            if with_state:
                embedded.save_checkpoint(Path(tmp) / f"s{i}", model, optimizer, cfg, 0, i)
            else:
                with quiet_hf_progress():
                    model.save_pretrained(Path(tmp) / f"s{i}")
        return (time.perf_counter() - start) / 5


def matmul_profile(size, cfg, steps: int = 5) -> None:
    """Top operators of a training step and the matmuls' achieved FLOP rate."""
    from torch.profiler import ProfilerActivity, profile

    model = embedded.build_model(size, cfg, 0)
    optimizer = embedded.make_optimizer(model, cfg)
    corpus = training_text(cfg.corpus_bytes)

    def one(step):
        tokens = embedded.batch_at(corpus, cfg, 0, step)
        loss = model(tokens, labels=tokens).loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()

    for s in range(3):
        one(s)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for s in range(steps):
            one(s)
    events = prof.key_averages()
    total = sum(e.self_cpu_time_total for e in events)
    matmul = sum(e.self_cpu_time_total for e in events if e.key in ("aten::mm", "aten::addmm", "aten::bmm"))
    # weight matmuls: 6 FLOPs per weight per token (forward 2, backward 4); embeddings are lookups
    weights = sum(p.numel() for n, p in model.named_parameters() if p.dim() == 2 and "embed_in" not in n)
    tokens = cfg.batch_size * cfg.n_ctx
    flops = 6 * weights * tokens
    print(
        f"{size.name}: step {total / steps / 1e3:.1f} ms (profiled); matmuls {matmul / total:.0%} of it, "
        f"{flops / 1e9:.2f} GFLOP/step -> {flops / (matmul / steps / 1e6) / 1e9:.0f} GFLOP/s achieved"
    )
    for e in sorted(events, key=lambda e: -e.self_cpu_time_total)[:6]:
        print(f"    {e.key[:50]:50s} {e.self_cpu_time_total / total:6.1%}  ({e.count // steps} calls/step)")


def suite_wall(
    cfg: embedded.SuiteConfig, step_s: dict, save_s: dict, workers: int = 2, steps_override: int | None = None
) -> float:
    """Estimated wall seconds of ``ensure_suite`` on ``workers`` processes (longest run first)."""
    return max(worker_finish(cfg, step_s, save_s, workers, steps_override))


def worker_finish(
    cfg: embedded.SuiteConfig, step_s: dict, save_s: dict, workers: int = 2, steps_override: int | None = None
) -> list[float]:
    """Estimated second at which each of ``workers`` processes runs out of runs (longest run first)."""
    jobs = []
    for size in cfg.sizes:
        steps = steps_override or cfg.steps_for(size)
        n_ckpt = len(
            embedded.SuiteConfig(
                sizes=cfg.sizes, seeds=cfg.seeds, steps=steps, checkpoint_every=cfg.checkpoint_every
            ).checkpoint_steps
        )
        jobs += [steps * step_s[size.name] + n_ckpt * save_s[size.name]] * len(cfg.seeds)
    finish = [0.0] * workers
    for job in sorted(jobs, reverse=True):
        heapq.heapreplace(finish, finish[0] + job)
    return sorted(finish)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=40, help="timed steps per loop and size")
    parser.add_argument("--no-profile", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)
    cfg = embedded.FULL
    corpus = training_text(cfg.corpus_bytes)
    if not args.no_profile:
        for size in cfg.sizes:
            matmul_profile(size, cfg)
    old_step, new_step, old_save, new_save = {}, {}, {}, {}
    for size in cfg.sizes:
        a1 = old_loop(size, cfg, args.steps // 2, corpus)
        b1 = new_loop(size, cfg, args.steps // 2)
        b2 = new_loop(size, cfg, args.steps // 2)
        a2 = old_loop(size, cfg, args.steps // 2, corpus)
        old_step[size.name], new_step[size.name] = (a1 + a2) / 2, (b1 + b2) / 2
        old_save[size.name], new_save[size.name] = save_seconds(size, cfg, False), save_seconds(size, cfg, True)
        print(
            f"{size.name}: step old {old_step[size.name] * 1e3:.1f} ms, new {new_step[size.name] * 1e3:.1f} ms; "
            f"checkpoint save old {old_save[size.name] * 1e3:.0f} ms, new {new_save[size.name] * 1e3:.0f} ms"
        )
    old = suite_wall(cfg, old_step, old_save, steps_override=3000)
    new = suite_wall(cfg, new_step, new_save)
    steps = {s.name: cfg.steps_for(s) for s in cfg.sizes}
    print(
        f"suite on 2 processes (estimated from the per-run times above): old trainer, 3000 steps per run: "
        f"{old / 60:.1f} min; current FULL {steps}: {new / 60:.1f} min"
    )
    finish = worker_finish(cfg, new_step, new_save)
    print(
        f"one core idle for the last {finish[-1] - finish[0]:.0f} s of the current suite's training: "
        f"`emergence demo` analyses the runs trained by then on it (interp.sources.embedded.iter_suite)"
    )
    print(f"suite_training_speedup: {old / new:.2f}")


if __name__ == "__main__":
    main()
