"""Ensemble training throughput: ``train_ensemble`` of E members vs E runs of ``train`` one at a time.

Shapes (the paper's, Baherwani et al. 2026): the linear map at S = 16, s = 3 with a 1-layer
attention-only transformer of 16 heads × d_head 8, and the same with 128 heads × d_head 1; 2048
tokens per step. The MLP-Mixer is not on the batched path (``synthetic.ensemble.batched_supported``)
and trains one member at a time, so it is listed, not timed. Both sides are the real code paths
(``synthetic.training.train`` and ``synthetic.ensemble.train_ensemble``, evaluation at the first
and last step on a 128-token set), timed from the first to the last evaluation row
(``elapsed_s``; building the models is left out, it is seconds against a paper-scale run's
10⁴ steps); timing alternates single and ensemble in rounds and reports
the median tokens/s per member-step, so a loaded machine slows both alike.

Achieved GFLOP/s counts the dense work of one training step as 3 × the forward FLOPs
(forward + backward ≈ 3 forward): per token, Q, K, V and O projections 4 · 2 · d_model², scores
and pattern·V 2 · 2 · seq_len · n_heads · d_head (the full square; the causal half is not
subtracted), unembedding 2 · d_model · d_vocab. The core's peak is estimated in the same run as
the GFLOP/s of a 1024 × 1024 float32 matmul on the same threads. Usage::

    PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_synth_ensemble.py [--steps 40] [--rounds 3] [--threads 1] [--sizes 3,4,8]

Last line: ``ensemble_vs_single_tokens_per_s_ratio: <ratio>`` (best size, 16 × 8 shape).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch

from synthetic.ensemble import train_ensemble
from synthetic.training import TrainConfig, train

SHAPES = {
    "S16 linear map, 16 heads x d_head 8": dict(n_heads=16, d_head=8),
    "S16 linear map, 128 heads x d_head 1": dict(n_heads=128, d_head=1),
}


def forward_flops_per_token(config: TrainConfig, seq_len: int, d_vocab: int) -> float:
    """Dense forward FLOPs per token (see the module docstring)."""
    d_model = config.n_heads * config.d_head
    per_layer = 4 * 2 * d_model**2 + 2 * 2 * seq_len * config.n_heads * config.d_head
    return config.n_layers * per_layer + 2 * d_model * d_vocab


def matmul_gflops(n: int = 1024, repeats: int = 5) -> float:
    """Measured float32 ``n × n`` matmul GFLOP/s on the current threads (the best of ``repeats``)."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - t0)
    return 2 * n**3 / best / 1e9


def time_single(configs: list[TrainConfig]) -> float:
    """Seconds in the training loops (first to last evaluation row; model building excluded)."""
    total = 0.0
    for c in configs:
        elapsed = train(c, progress=False).metrics["elapsed_s"]
        total += elapsed.iloc[-1] - elapsed.iloc[0]
    return total


def time_ensemble(configs: list[TrainConfig]) -> float:
    """Seconds in the ensemble's training loop (first to last evaluation row)."""
    members = [r.metrics["elapsed_s"] for r in train_ensemble(configs)]
    return max(m.iloc[-1] for m in members) - min(m.iloc[0] for m in members)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--sizes", default="3,4,8")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    import functools

    global print
    print = functools.partial(print, flush=True)
    torch.set_num_threads(args.threads)
    sizes = [int(x) for x in args.sizes.split(",")]
    print(
        f"threads {args.threads}, {os.cpu_count()} CPUs, device {args.device}, load average {os.getloadavg()}, steps {args.steps}"
    )
    peak = matmul_gflops()
    print(f"peak estimate (1024x1024 fp32 matmul, {args.threads} thread(s)): {peak:.1f} GFLOP/s")
    print("mlp-mixer: not on the batched path (one member at a time); not timed")
    best_ratio = 0.0
    for label, shape in SHAPES.items():
        base = dict(steps=args.steps, eval_every=args.steps, eval_tokens=128, device=args.device, **shape)
        probe = TrainConfig(**base)
        task = probe.make_task()
        flops = 3 * forward_flops_per_token(probe, task.seq_len, task.d_vocab)
        tokens_per_step = probe.tokens_per_step
        for E in sizes:
            configs = [TrainConfig(seed=i, data_seed=i, **base) for i in range(E)]
            single, ens = [], []
            for _ in range(args.rounds):
                single.append(E * args.steps * tokens_per_step / time_single(configs))
                ens.append(E * args.steps * tokens_per_step / time_ensemble(configs))
            s, e = statistics.median(single), statistics.median(ens)
            ratio = e / s
            if label.startswith("S16 linear map, 16"):
                best_ratio = max(best_ratio, ratio)
            print(
                f"{label}, E={E}: one at a time {s:,.0f} tokens/s ({s * flops / 1e9:.2f} GFLOP/s, "
                f"{100 * s * flops / 1e9 / peak:.1f}% of peak); ensemble {e:,.0f} tokens/s "
                f"({e * flops / 1e9:.2f} GFLOP/s, {100 * e * flops / 1e9 / peak:.1f}% of peak); ratio {ratio:.2f}x"
            )
    print(f"load average after {os.getloadavg()}")
    print(f"ensemble_vs_single_tokens_per_s_ratio: {best_ratio:.2f}")


if __name__ == "__main__":
    main()
