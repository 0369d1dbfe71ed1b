"""The checkpoint sources this toolkit knows by name, without importing torch.

- Pythia / PolyPythia hub ids (:func:`pythia_model_ids`, :func:`is_pythia_id`).
- The embedded suites: their configs (:data:`FULL`, :data:`QUICK`), run names
  (``neox-2l-64d-seed1``), source names (``embedded``, ``embedded-quick``,
  ``embedded/<run>``, ``embedded-quick/<run>``) and cache folders. Training them lives in
  :mod:`interp.sources.embedded`; opening them in :mod:`interp.sources`.
- The GPT-NeoX config of a Pythia-shaped model (:func:`neox_config`), the one place that
  spells out Pythia's architecture choices.

Kept free of heavy imports so that ``emergence --help`` and ``emergence list-models`` start at
once and a bad source name is refused before anything is loaded.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from interp.core.io import cache_root

#: Version of the embedded training loop (data order, schedule, checkpoint contents); part of the
#: suite's cache key. 2: each step's batch derived from (data_seed, seed, step); optimizer state
#: saved with every checkpoint.
TRAINER_VERSION = 2

#: PolyPythia sizes with ten runs each: the default seed plus ``-seed1`` .. ``-seed9``
#: (written once, in :mod:`interp.sources.families`).
from interp.sources.families import POLYPYTHIA_ID_PATTERN, POLYPYTHIA_SIZES, PYTHIA_ID_PATTERN  # noqa: E402

_POLYPYTHIA_ID = re.compile(POLYPYTHIA_ID_PATTERN)
_PYTHIA_ID = re.compile(PYTHIA_ID_PATTERN)


def pythia_model_ids() -> list[str]:
    """The 50 PolyPythia hub ids: five sizes x (default seed + ``-seed1`` .. ``-seed9``).

    Source: van der Wal et al. 2025, "PolyPythias" (model cards of ``EleutherAI/pythia-*``).
    """
    return [
        f"EleutherAI/pythia-{size}{suffix}"
        for size in POLYPYTHIA_SIZES
        for suffix in [""] + [f"-seed{i}" for i in range(1, 10)]
    ]


def is_pythia_id(model_id: str) -> bool:
    """Whether ``model_id`` names a Pythia or PolyPythia repo with the ``step{N}`` branches."""
    return bool(_POLYPYTHIA_ID.fullmatch(model_id) or _PYTHIA_ID.fullmatch(model_id))


_REPO_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")


def is_hub_id(model_id: str) -> bool:
    """Whether ``model_id`` can name a hub repo here: ``org/name``, and a known Pythia id if in
    the ``EleutherAI/pythia-`` namespace (an unknown size there is a typo, not a new repo)."""
    if not isinstance(model_id, str) or not _REPO_ID.fullmatch(model_id):
        return False
    return is_pythia_id(model_id) or not model_id.startswith("EleutherAI/pythia-")


def neox_config(d_model: int, n_layers: int, n_heads: int, vocab_size: int, n_ctx: int, **overrides):
    """A ``transformers.GPTNeoXConfig`` with Pythia's architecture at any size.

    Pythia's choices (Biderman et al. 2023, "Pythia", section 2 and its model cards): rotary
    embeddings on 25 % of each head's dims, parallel attention and MLP residual, untied
    input/output embeddings, MLP width 4·d_model.

    Args:
        d_model, n_layers, n_heads: the shape (d_model must divide by n_heads).
        vocab_size: tokens; n_ctx: context length in tokens.
        **overrides: any other ``GPTNeoXConfig`` field (e.g. ``bos_token_id``).
    """
    from transformers import GPTNeoXConfig

    fields = dict(
        vocab_size=vocab_size,
        hidden_size=d_model,
        num_hidden_layers=n_layers,
        num_attention_heads=n_heads,
        intermediate_size=4 * d_model,
        max_position_embeddings=n_ctx,
        rotary_pct=0.25,
        use_parallel_residual=True,
        tie_word_embeddings=False,
    )
    return GPTNeoXConfig(**{**fields, **overrides})


@dataclass(frozen=True)
class ModelSize:
    """One GPT-NeoX shape of the suite (Pythia's architecture at toy scale)."""

    name: str
    n_layers: int
    d_model: int
    n_heads: int

    def hf_config(self, vocab_size: int, n_ctx: int):
        """The ``GPTNeoXConfig`` of this size (:func:`neox_config`; byte 0 as BOS/EOS)."""
        return neox_config(self.d_model, self.n_layers, self.n_heads, vocab_size, n_ctx, bos_token_id=0, eos_token_id=0)


@dataclass(frozen=True)
class SuiteConfig:
    """Everything that determines the embedded suite's weights (its hash names the cache folder).

    Units: ``steps``, ``size_steps`` and ``checkpoint_steps`` in optimizer steps; ``n_ctx`` in
    tokens (bytes); ``lr`` per step (AdamW, linear warmup over ``warmup_steps`` then constant).
    ``size_steps`` overrides ``steps`` for some sizes (``(("neox-2l-128d", 2000),)``): the larger
    model acquires the capability earlier, so it needs fewer steps to be well past its point of
    emergence. ``threads`` is the torch CPU thread count each run trains with (recorded because
    the weights may depend on it, see docs/embedded.md); ``attn_implementation`` the transformers
    attention kernel.
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
    size_steps: tuple[tuple[str, int], ...] = ()
    threads: int = 1
    attn_implementation: str = "sdpa"
    trainer_version: int = TRAINER_VERSION

    def steps_for(self, size: ModelSize) -> int:
        """Training steps of one size (``size_steps`` entry, else ``steps``)."""
        return dict(self.size_steps).get(size.name, self.steps)

    def checkpoint_steps_for(self, size: ModelSize) -> tuple[int, ...]:
        """Pythia-like schedule up to :meth:`steps_for` ``(size)``: 0, 1, 2, 4, ... (powers of two)
        below ``checkpoint_every``, then every ``checkpoint_every`` steps (Pythia: 0..512, then
        every 1000)."""
        last = self.steps_for(size)
        early = [0] + [2**i for i in range(32) if 2**i < self.checkpoint_every]
        linear = list(range(self.checkpoint_every, last + 1, self.checkpoint_every))
        return tuple(sorted(set(early + linear)))

    @property
    def checkpoint_steps(self) -> tuple[int, ...]:
        """The schedule up to ``steps`` (the longest run's schedule when no size is overridden)."""
        return self.checkpoint_steps_for(ModelSize("", 0, 0, 0))

    def digest(self) -> str:
        """Short hash of the config (names the cache folder, so a changed config retrains)."""
        from interp.core.io import config_json

        blob = config_json(self).encode()
        return hashlib.sha256(blob).hexdigest()[:12]

    def run_names(self) -> list[str]:
        """Run names in (size, seed) order, as :func:`run_name` spells them."""
        return [run_name(size, seed) for size in self.sizes for seed in self.seeds]


SMALL = ModelSize("neox-2l-64d", n_layers=2, d_model=64, n_heads=4)
BASE = ModelSize("neox-2l-128d", n_layers=2, d_model=128, n_heads=4)

#: The default: 2 sizes x 3 seeds; the small model trains 3000 steps (38 checkpoints), the base
#: model 2000 steps (28 checkpoints; it emerges earlier, see docs/embedded.md).
FULL = SuiteConfig(
    sizes=(SMALL, BASE), seeds=(0, 1, 2), steps=3000, checkpoint_every=100, size_steps=((BASE.name, 2000),)
)
#: CI-sized: the small model at two seeds, 2400 steps.
QUICK = SuiteConfig(sizes=(SMALL,), seeds=(1, 2), steps=2400, checkpoint_every=100)

#: Source names of the embedded suites (every run), smallest first.
SUITES: dict[str, SuiteConfig] = {"embedded-quick": QUICK, "embedded": FULL}


def run_name(size: ModelSize, seed: int) -> str:
    """Folder and model id of one run: ``{size.name}-seed{seed}`` (PolyPythia-style suffix)."""
    return f"{size.name}-seed{seed}"


def model_and_seed(model_id: str) -> tuple[str, int]:
    """Split a run id into (model, seed): ``EleutherAI/pythia-70m-seed3`` -> (``pythia-70m``, 3).

    The PolyPythia base repos (``EleutherAI/pythia-70m``, trained with data seed 1234) are
    labelled seed 0, as in the PolyPythias release. Ids without a ``-seed{N}`` suffix get seed 0.
    """
    name = str(model_id).rstrip("/").split("/")[-1]
    match = re.fullmatch(r"(.+)-seed(\d+)", name)
    return (match.group(1), int(match.group(2))) if match else (name, 0)


def run_label(model: str, seed: int) -> str:
    """How tables, figures and the CLI name one run: ``"pythia-70m seed 3"``."""
    return f"{model} seed {seed}".strip()


def suite_dir(cfg: SuiteConfig, root: str | Path | None = None) -> Path:
    """Cache folder of a suite config: ``embedded/<config hash>-<environment hash>``.

    The second hash covers what besides the config changes the trained weights (the training
    text, the torch and transformers versions, torch's CPU kernel level; measured in
    docs/embedded.md): :func:`interp.sources.environment.environment_key`, which imports torch.
    """
    from interp.sources.environment import environment_key

    root = Path(root).expanduser() if root is not None else cache_root()
    return root / "embedded" / f"{cfg.digest()}-{environment_key(cfg)}"


def is_embedded_name(spec: str) -> bool:
    """Whether ``spec`` is an embedded source name (``embedded``, ``embedded-quick`` or a run of
    either, ``embedded/<run>`` / ``embedded-quick/<run>``)."""
    return spec.split("/", 1)[0] in SUITES


def embedded_source_names() -> list[str]:
    """Every embedded source name, as ``emergence list-models`` prints them."""
    names = list(SUITES)
    for suite, cfg in SUITES.items():
        names += [f"{suite}/{name}" for name in cfg.run_names()]
    return names


def resolve_embedded(spec: str, root: Path | None = None) -> list[tuple[SuiteConfig, str]]:
    """The (suite config, run name) pairs an embedded source name stands for; no training.

    ``embedded`` / ``embedded-quick``: every run of that suite. ``embedded-quick/<run>``: that
    run of the quick suite. ``embedded/<run>``: that run of the full suite when the cache holds
    it there (the name's own suite: more steps, the suite docs/results.md describes), else from
    another cached suite that holds it (the quick one), else from the smallest suite that holds
    it, so ``embedded/neox-2l-64d-seed1`` never trains the full suite when the quick one has the run.

    Raises:
        ValueError: not an embedded name, or an unknown run (the valid names are listed).
    """
    suite, _, run = spec.partition("/")
    if suite not in SUITES:
        raise ValueError(f"{spec!r} is not an embedded source; valid: {', '.join(SUITES)}")
    if not run:
        cfg = SUITES[suite]
        return [(cfg, name) for name in cfg.run_names()]
    holders = [SUITES[suite]] if suite == "embedded-quick" else [c for c in SUITES.values() if run in c.run_names()]
    holders = [c for c in holders if run in c.run_names()]
    if not holders:
        valid = (
            SUITES[suite].run_names()
            if suite == "embedded-quick"
            else sorted({n for c in SUITES.values() for n in c.run_names()})
        )
        raise ValueError(f"unknown embedded run {run!r} in {suite!r}; valid: {', '.join(valid)}")
    named_first = sorted(holders, key=lambda c: c is not SUITES[suite])
    cached = [c for c in named_first if (suite_dir(c, root) / run / "suite.json").exists()]
    return [((cached or holders)[0], run)]
