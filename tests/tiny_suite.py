"""The tiny suite the training tests share: a 1-layer GPT-NeoX (d_model 32, 4 heads) trained for a
few steps on 200,000 bytes of the training text, small enough to train in seconds on one core."""

from __future__ import annotations

from interp.sources import embedded

#: The one model size of the tiny suite.
TINY = embedded.ModelSize("neox-1l-32d", n_layers=1, d_model=32, n_heads=4)


def tiny_suite(
    seed: int = 3, steps: int = 16, checkpoint_every: int = 8, warmup_steps: int = 4
) -> embedded.SuiteConfig:
    """The tiny suite's config: one run of :data:`TINY` with ``seed``, ``steps`` steps (a
    checkpoint every ``checkpoint_every``), context 32, batch 4."""
    return embedded.SuiteConfig(
        sizes=(TINY,),
        seeds=(seed,),
        steps=steps,
        checkpoint_every=checkpoint_every,
        n_ctx=32,
        batch_size=4,
        warmup_steps=warmup_steps,
        corpus_bytes=200_000,
    )
