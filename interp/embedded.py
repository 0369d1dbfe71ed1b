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

import hashlib
import json
import os
import shutil
import sysconfig
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import torch
from jaxtyping import Int
from torch import Tensor

from interp.checkpoints import make_byte_tokenizer, quiet_hf_progress
from interp.io import atomic_write_text

SEGMENT_ALPHABET = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz0123456789", dtype=np.uint8)


@dataclass(frozen=True)
class ModelSize:
    """One GPT-NeoX shape of the suite (Pythia's architecture at toy scale)."""

    name: str
    n_layers: int
    d_model: int
    n_heads: int

    def hf_config(self, vocab_size: int, n_ctx: int):
        """The ``GPTNeoXConfig`` of this size: rotary_pct 0.25, parallel residual, untied."""
        from transformers import GPTNeoXConfig

        return GPTNeoXConfig(
            vocab_size=vocab_size,
            hidden_size=self.d_model,
            num_hidden_layers=self.n_layers,
            num_attention_heads=self.n_heads,
            intermediate_size=4 * self.d_model,
            max_position_embeddings=n_ctx,
            rotary_pct=0.25,
            use_parallel_residual=True,
            tie_word_embeddings=False,
            bos_token_id=0,
            eos_token_id=0,
        )


@dataclass(frozen=True)
class SuiteConfig:
    """Everything that determines the embedded suite's weights (its hash names the cache folder).

    Units: ``steps`` and ``checkpoint_steps`` in optimizer steps; ``n_ctx`` in tokens (bytes);
    ``lr`` per step (AdamW, linear warmup over ``warmup_steps`` then constant).
    """

    sizes: tuple[ModelSize, ...]
    seeds: tuple[int, ...]
    steps: int
    checkpoint_every: int
    n_ctx: int = 128
    batch_size: int = 16
    lr: float = 2e-3
    warmup_steps: int = 50
    weight_decay: float = 0.01
    repeat_fraction: float = 0.5
    prefix_len: int = 40
    random_prefix: bool = True
    segment_min: int = 8
    segment_max: int = 32
    corpus_bytes: int = 4_000_000
    data_seed: int = 1234

    @property
    def checkpoint_steps(self) -> tuple[int, ...]:
        """Pythia-like schedule: 0, 1, 2, 4, ... (powers of two) below ``checkpoint_every``,
        then every ``checkpoint_every`` steps up to ``steps`` (Pythia: 0..512, then every 1000)."""
        early = [0] + [2**i for i in range(0, 32) if 2**i < self.checkpoint_every]
        linear = list(range(self.checkpoint_every, self.steps + 1, self.checkpoint_every))
        return tuple(sorted(set(early + linear)))

    def digest(self) -> str:
        """Short hash of the config (names the cache folder, so a changed config retrains)."""
        blob = json.dumps(asdict(self), sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:12]


SMALL = ModelSize("neox-2l-64d", n_layers=2, d_model=64, n_heads=4)
BASE = ModelSize("neox-2l-128d", n_layers=2, d_model=128, n_heads=4)

#: The default: 2 sizes x 3 seeds, 3000 steps, 38 checkpoints per run (~12 min on 2 cores).
FULL = SuiteConfig(sizes=(SMALL, BASE), seeds=(0, 1, 2), steps=3000, checkpoint_every=100)
#: CI-sized: the small model at two seeds, 2400 steps (~2 min on 2 cores).
QUICK = SuiteConfig(sizes=(SMALL,), seeds=(1, 2), steps=2400, checkpoint_every=100)


def cache_root() -> Path:
    """Where trained suites live: ``$EMERGENCE_LENS_CACHE`` or ``~/.cache/emergence-lens``."""
    env = os.environ.get("EMERGENCE_LENS_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "emergence-lens"


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


def run_name(size: ModelSize, seed: int) -> str:
    """Folder and model id of one run: ``{size.name}-seed{seed}`` (PolyPythia-style suffix)."""
    return f"{size.name}-seed{seed}"


def suite_dir(cfg: SuiteConfig, root: Path | None = None) -> Path:
    """Cache folder of a suite config (keyed by the config hash and the Python version, since
    the training text is this Python's standard library)."""
    import sys

    root = root or cache_root()
    return root / "embedded" / f"{cfg.digest()}-py{sys.version_info.major}{sys.version_info.minor}"


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
