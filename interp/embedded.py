"""The embedded default: a local checkpoint suite that our own code trains, offline, on CPU.

Small GPT-NeoX models (the Pythia architecture: rotary on 25 % of each head's dims, parallel
residual, untied embeddings) in two sizes x three seeds, trained on the bytes of the Python
standard library's own sources mixed with repeated random segments, with checkpoints on a
Pythia-like schedule (log-spaced early steps, then linear). The suite is trained on first use
and cached under the user's cache folder (``$EMERGENCE_LENS_CACHE`` or
``~/.cache/emergence-lens``); each (size, seed) run is one local suite readable by
:class:`interp.checkpoints.LocalSuiteSource`.

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
import sysconfig
import time
from dataclasses import asdict
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import torch
from jaxtyping import Int
from torch import Tensor

from interp.catalogue import (  # noqa: F401  (the suite configs live with the source names)
    BASE, FULL, QUICK, SMALL, ModelSize, SuiteConfig, cache_root, run_name, suite_dir,
)
from interp.checkpoints import make_byte_tokenizer, quiet_hf_progress
from interp.io import atomic_write_text

SEGMENT_ALPHABET = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz0123456789", dtype=np.uint8)


def stdlib_corpus(max_bytes: int) -> np.ndarray:
    """The bytes of the standard library's ``.py`` sources, sorted by path, concatenated.

    Tests and site-packages are left out. The corpus depends on the Python version: the suite's
    cache folder is keyed by it too.

    Returns:
        ``uint8`` array of at most ``max_bytes`` bytes.
    """
    root = Path(sysconfig.get_paths()["stdlib"])
    chunks, total = [], 0
    for path in sorted(root.rglob("*.py")):
        if {"site-packages", "test", "tests", "idlelib"} & set(path.relative_to(root).parts):
            continue
        data = path.read_bytes()
        chunks.append(data)
        total += len(data)
        if total >= max_bytes:
            break
    return np.frombuffer(b"\n".join(chunks)[:max_bytes], dtype=np.uint8)


def sample_batch(
    corpus: np.ndarray, cfg: SuiteConfig, rng: np.random.Generator
) -> Int[Tensor, "batch n_ctx"]:
    """One training batch of byte tokens.

    Each row is a random window of the corpus; with probability ``cfg.repeat_fraction`` the row is
    instead ``prefix_len`` bytes of code (uniform in ``[0, prefix_len]`` when ``random_prefix``,
    so that repetition is learned at every position, prompts at position 0 included) followed by
    a random letters-and-digits segment (length uniform in ``[segment_min, segment_max]``)
    repeated to fill the context.
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


def build_model(size: ModelSize, cfg: SuiteConfig, seed: int):
    """A freshly initialised ``GPTNeoXForCausalLM`` of ``size`` (float32), seeded by ``seed``."""
    from transformers import GPTNeoXForCausalLM

    torch.manual_seed(seed)
    return GPTNeoXForCausalLM(size.hf_config(vocab_size=256, n_ctx=cfg.n_ctx)).float()


def train_run(
    size: ModelSize,
    seed: int,
    cfg: SuiteConfig,
    out_dir: Path | None,
    on_step: Callable[[int, float], None] | None = None,
    eval_fn: Callable[[torch.nn.Module, int], None] | None = None,
) -> None:
    """Train one (size, seed) model and save every checkpoint of ``cfg.checkpoint_steps``.

    Writes ``out_dir/step{N}/`` (``save_pretrained``, safetensors) for each checkpoint step;
    ``out_dir=None`` trains without saving (for tuning with ``eval_fn``). The data order depends
    on ``seed`` as well as the initialisation, as across PolyPythia seeds.
    """
    from transformers import PreTrainedModel  # noqa: F401  (import cost paid once here)

    model = build_model(size, cfg, seed)
    corpus = stdlib_corpus(cfg.corpus_bytes)
    rng = np.random.default_rng([cfg.data_seed, seed])
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min(1.0, (step + 1) / max(1, cfg.warmup_steps))
    )
    save_at = set(cfg.checkpoint_steps)
    for step in range(cfg.steps + 1):
        if step in save_at:
            if out_dir is not None:
                with quiet_hf_progress():
                    model.save_pretrained(out_dir / f"step{step}")
            if eval_fn is not None:
                eval_fn(model, step)
        if step == cfg.steps:
            break
        tokens = sample_batch(corpus, cfg, rng)
        model.train()
        loss = model(tokens, labels=tokens).loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        if on_step is not None:
            on_step(step + 1, loss.item())


def _train_to_folder(size: ModelSize, seed: int, cfg: SuiteConfig, final: Path, queue=None) -> Path:
    """Train one run into a temporary sibling folder, then rename it onto ``final`` (atomic)."""
    torch.set_num_threads(1)  # one run per core: two processes beat one two-threaded run here
    tmp = final.parent / f".tmp-{final.name}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    tokenizer = make_byte_tokenizer()
    tokenizer.save_pretrained(tmp / "tokenizer")
    last = [0]

    def report(step: int, loss: float) -> None:
        if queue is not None and (step % 25 == 0 or step == cfg.steps):
            queue.put((run_name(size, seed), step - last[0], loss))
            last[0] = step

    started = time.time()
    train_run(size, seed, cfg, tmp, on_step=report)
    meta = {
        "model_id": f"embedded/{run_name(size, seed)}", "size": asdict(size), "seed": seed,
        "steps": list(cfg.checkpoint_steps), "config": asdict(cfg), "train_seconds": round(time.time() - started, 1),
        "tokenizer": "bytes (id = byte value)",
    }
    atomic_write_text(tmp / "suite.json", json.dumps(meta, indent=2))
    if final.exists():  # another process finished the same run first: keep theirs
        shutil.rmtree(tmp, ignore_errors=True)
    else:
        os.replace(tmp, final)
    return final


def ensure_suite(cfg: SuiteConfig = FULL, root: Path | None = None, n_jobs: int | None = None,
                 progress: bool = True) -> list[Path]:
    """Train (once) and return the run folders of the embedded suite, sizes x seeds.

    Runs already in the cache are reused; missing runs are trained in parallel processes (one
    torch thread each), with a progress bar over all training steps. Each run folder appears only
    when complete (trained in a temporary folder, then renamed).

    Args:
        cfg: :data:`FULL` (2 sizes x 3 seeds, <= 15 min on 2 cores) or :data:`QUICK` (CI, <= 2 min).
        root: cache root (default :func:`cache_root`).
        n_jobs: worker processes (default: CPU count, at most the number of missing runs).
        progress: show a tqdm bar.

    Returns:
        Run folders in (size, seed) order, each a local suite for
        :class:`interp.checkpoints.LocalSuiteSource`.
    """
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor, wait, FIRST_COMPLETED
    from queue import Empty

    from tqdm.auto import tqdm

    base = suite_dir(cfg, root)
    runs = [(size, seed, base / run_name(size, seed)) for size in cfg.sizes for seed in cfg.seeds]
    # Largest models first, so that the long runs start early and the pool stays busy.
    missing = sorted((r for r in runs if not (r[2] / "suite.json").exists()),
                     key=lambda r: -(r[0].n_layers * r[0].d_model**2))
    if missing:
        base.mkdir(parents=True, exist_ok=True)
        n_jobs = max(1, min(n_jobs or os.cpu_count() or 1, len(missing)))
        ctx = mp.get_context("spawn")
        with ctx.Manager() as manager, ProcessPoolExecutor(n_jobs, mp_context=ctx) as pool:
            queue = manager.Queue()
            futures = {pool.submit(_train_to_folder, size, seed, cfg, final, queue) for size, seed, final in missing}
            bar = tqdm(total=cfg.steps * len(missing), desc=f"training embedded suite ({len(missing)} runs)",
                       unit="step", disable=not progress)
            pending = futures
            while pending:
                done, pending = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
                for future in done:
                    future.result()  # re-raise a worker's error here
                while True:
                    try:
                        name, steps, loss = queue.get_nowait()
                    except Empty:
                        break
                    bar.update(steps)
                    bar.set_postfix_str(f"{name} loss {loss:.3f}")
            bar.close()
    return [final for _, _, final in runs]
