"""Training-step speed: the hooked transformer vs a plain PyTorch transformer using SDPA.

Both models have the same shape (the default :class:`synthetic.training.TrainConfig` model:
1 attention-only layer, 16 heads of width 8, d_model 128, learned positions, pre-LN) and train
on the same linear-map batches (S = 16, s = 3, 64 sequences of 32 tokens = 2048 tokens per
step). A step is forward, cross-entropy on every next-token position, backward and an AdamW
update. The hooked model is ``build_model`` for ``arch="transformer"`` (TransformerLens
``TransformerBridge.boot_native`` with a pre-softmax score hook, no hook functions attached);
the reference computes attention with ``torch.nn.functional.scaled_dot_product_attention``.
Timing alternates the two models in rounds and reports the median tokens/s of each; goal:
hooked ≥ 0.8× the SDPA model. Usage::

    .venv/bin/python benchmarks/bench_synth_step.py [--steps 30] [--rounds 5] [--threads 1]

Last line: ``hooked_vs_sdpa_tokens_per_s_ratio: <ratio>``.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F
from torch import nn

from synthetic.datasets import LinearMapTask
from synthetic.models import ModelConfig, build_model, count_parameters


class SDPABlock(nn.Module):
    """Pre-LN attention block (attention only), attention by ``scaled_dot_product_attention``."""

    def __init__(self, d_model: int, n_heads: int, d_head: int):
        super().__init__()
        self.n_heads, self.d_head = n_heads, d_head
        self.ln = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * n_heads * d_head)
        self.out = nn.Linear(n_heads * d_head, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, pos, _ = x.shape
        q, k, v = self.qkv(self.ln(x)).view(batch, pos, 3, self.n_heads, self.d_head).permute(2, 0, 3, 1, 4)
        z = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return x + self.out(z.transpose(1, 2).reshape(batch, pos, -1))


class SDPATransformer(nn.Module):
    """Plain attention-only transformer with learned positions, the reference implementation."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        d_model = cfg.resolved_d_model
        self.embed = nn.Embedding(cfg.d_vocab, d_model)
        self.pos = nn.Parameter(torch.randn(cfg.n_ctx, d_model) * 0.02)
        self.blocks = nn.ModuleList(SDPABlock(d_model, cfg.n_heads, cfg.d_head) for _ in range(cfg.n_layers))
        self.ln_final = nn.LayerNorm(d_model)
        self.unembed = nn.Linear(d_model, cfg.d_vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens) + self.pos[: tokens.shape[1]]
        for block in self.blocks:
            x = block(x)
        return self.unembed(self.ln_final(x))


def tokens_per_s(model: nn.Module, optimizer: torch.optim.Optimizer, batches: list[torch.Tensor]) -> float:
    start = time.perf_counter()
    for tokens in batches:
        logits = model(tokens)
        loss = F.cross_entropy(logits[:, :-1].flatten(0, 1), tokens[:, 1:].flatten())
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    return sum(t.numel() for t in batches) / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30, help="training steps per timed round")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds per model")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    task = LinearMapTask(S=16, s=3)
    cfg = ModelConfig(d_vocab=2, n_ctx=task.seq_len, n_heads=16, d_head=8)
    gen = torch.Generator().manual_seed(0)
    batches = [task.sample(64, gen) for _ in range(args.steps)]
    models = {"hooked": build_model(cfg), "sdpa": SDPATransformer(cfg)}
    optimizers = {name: torch.optim.AdamW(m.parameters(), lr=1e-3) for name, m in models.items()}
    for name, model in models.items():
        model.train()
        tokens_per_s(model, optimizers[name], batches[:3])  # warm-up
    rates: dict[str, list[float]] = {name: [] for name in models}
    for _ in range(args.rounds):
        for name, model in models.items():
            rates[name].append(tokens_per_s(model, optimizers[name], batches))
    for name, model in models.items():
        print(
            f"{name}: {count_parameters(model)} parameters, median {statistics.median(rates[name]):,.0f} tokens/s "
            f"(rounds: {', '.join(f'{r:,.0f}' for r in rates[name])})"
        )
    ratio = statistics.median(rates["hooked"]) / statistics.median(rates["sdpa"])
    print(f"hooked_vs_sdpa_tokens_per_s_ratio: {ratio:.2f}")


if __name__ == "__main__":
    main()
