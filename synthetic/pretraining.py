"""Pre-pretraining: train on a formal-language or cellular-automaton stream, then on a task.

Baherwani et al. 2026 report that pre-pretraining on Dyck or on neural cellular automata
"sometimes speeds emergence" (arXiv 2606.25010, abstract and summary; no numbers reachable
here). Two generators:

* :func:`dyck_sequences`, k-Shuffle Dyck: ``k`` bracket types, each balanced on its own but
  freely interleaved with the others (the shuffle of ``k`` Dyck-1 languages), the language Hu
  et al. 2025 ("Between Circuits and Chomsky: Pre-pretraining on Formal Languages Imparts
  Linguistic Biases", ACL 2025, arXiv 2502.19249) found to transfer best. Their release script
  builds ``dyck_sequences_cross_serial_64_0.51``, which we read as ``k = 64`` types and an
  opening probability of 0.51: our defaults (a reading of a file name, not a stated number).
* :func:`nca_sequences`, neural cellular automata (Lee, Han, Kumar & Agrawal 2026, "Training
  Language Models via Neural Cellular Automata"): every sequence has its own random rule, a
  small randomly initialised network (3×3 periodic convolution → ReLU → 1×1 readout) mapping
  each cell's neighbourhood to its next state, on a grid of ``n_states``-valued cells; the
  trajectory is tokenised frame by frame (a delimiter token, then ``patch × patch`` patches in
  row-major order), so the model must infer the rule in context. Lee et al. use a 12×12 grid,
  10 states and 2×2 patches (vocabulary 10⁴) and filter rules by gzip compressibility; our
  defaults are toy-sized (4×4 grid, 4 states, 1×1 patches: vocabulary 5) so that several
  frames fit in a synthetic task's context, and the gzip filter is optional.

:func:`pretrain_then_train` builds the task model, first trains a twin of it (same
architecture and ``n_ctx``, the generator's vocabulary) on the generator, copies every weight
except the vocabulary-sized ones (token embedding, unembedding) into the task model, then runs
:func:`synthetic.training.train` from there. The token embedding and unembedding of the task
model keep their fresh initialisation: the two vocabularies share no meaning, and the task
model then starts from the same loss (``ln d_vocab``) as a model trained from scratch, so steps
to emergence compare like with like. Lee et al. likewise re-initialise the embeddings when
moving from NCA tokens to text. :func:`compare_pretraining` runs both arms over seeds and
reports the difference in steps to emergence, whatever its sign.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gzip
import json
import math
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import torch
import torch.nn.functional as F
from jaxtyping import Int
from torch import Tensor, nn

from interp.core.io import atomic_path, atomic_write_text
from synthetic import models as model_registry
from synthetic.models import ModelConfig, build_model

PRETRAIN_SOURCES = ("dyck", "nca")
DYCK_DEFAULT_K = 64  # Hu et al. 2025 release script: dyck_sequences_cross_serial_64_0.51
DYCK_DEFAULT_P_OPEN = 0.51
NCA_MAX_TRIES = 100  # rule resamplings per sequence under the gzip filter


# ---------------------------------------------------------------------------------------------
# k-Shuffle Dyck
# ---------------------------------------------------------------------------------------------


def dyck_vocab(k: int) -> int:
    """Vocabulary of :func:`dyck_sequences`: ``2k`` (open bracket of type i = ``2i``, close = ``2i+1``)."""
    return 2 * k


def dyck_sequences(
    k: int, n_seq: int, length: int, seed: int, p_open: float = DYCK_DEFAULT_P_OPEN
) -> Int[Tensor, "n_seq length"]:
    """k-Shuffle Dyck strings (Hu et al. 2025): ``k`` independently balanced bracket types.

    Generation, left to right: with no bracket open, open one; otherwise open one with
    probability ``p_open`` and else close one. Opened types are uniform over ``k``; a closed
    type is uniform over the types currently open (any order across types is legal in the
    shuffle language). Once the open count equals the positions left, only closes follow, so
    every string of even ``length`` ends balanced and every prefix is a valid prefix.

    Args:
        k: bracket types, ≥ 1. n_seq: sequences, ≥ 1. length: tokens per sequence, ≥ 1.
        seed: seeds a private ``torch.Generator`` (global RNG untouched).
        p_open: probability of opening when both moves are allowed, in (0, 1).

    Returns:
        ``Int[Tensor, "n_seq length"]`` token ids in ``[0, 2k)``: open of type ``i`` is
        ``2i``, its close ``2i + 1``.

    Raises:
        ValueError: a size < 1 or ``p_open`` outside (0, 1).
    """
    _check_positive(k=k, n_seq=n_seq, length=length)
    if not 0.0 < p_open < 1.0:
        raise ValueError(f"p_open={p_open!r} is invalid: must be in (0, 1)")
    gen = torch.Generator().manual_seed(seed)
    counts = torch.zeros(n_seq, k, dtype=torch.long)
    tokens = torch.empty(n_seq, length, dtype=torch.long)
    rows = torch.arange(n_seq)
    for t in range(length):
        total = counts.sum(dim=1)
        must_close = total >= length - t
        wants_open = torch.rand(n_seq, generator=gen) < p_open
        opening = (total == 0) | (wants_open & ~must_close)
        open_type = torch.randint(0, k, (n_seq,), generator=gen)
        # Uniform over open types: argmax of noise restricted to types with a positive count.
        noise = torch.rand(n_seq, k, generator=gen).masked_fill(counts == 0, -1.0)
        close_type = noise.argmax(dim=1)
        kind = torch.where(opening, open_type, close_type)
        counts[rows, kind] += torch.where(opening, 1, -1)
        tokens[:, t] = 2 * kind + (~opening).long()
    return tokens


def dyck_bayes_loss(tokens: Int[Tensor, "n_seq length"], k: int, p_open: float = DYCK_DEFAULT_P_OPEN) -> float:
    """Mean next-token loss (nats) of the generator's own conditional distribution.

    The open counts per type are a function of the prefix, so :func:`dyck_sequences`'s
    next-token distribution is known exactly at every position: this is the loss floor of a
    model pre-pretrained on that generator (averaged over positions ``1 … length−1``, the ones
    a causal LM predicts).
    """
    n_seq, length = tokens.shape
    kind, is_close = tokens // 2, tokens % 2 == 1
    counts = torch.zeros(n_seq, k, dtype=torch.long)
    total_loss = torch.zeros(n_seq, dtype=torch.float64)
    for t in range(length):
        total = counts.sum(dim=1)
        n_open_types = (counts > 0).sum(dim=1).clamp(min=1).double()
        must_close = total >= length - t
        p_open_now = torch.where(total == 0, 1.0, torch.where(must_close, 0.0, p_open)).double()
        prob = torch.where(is_close[:, t], (1 - p_open_now) / n_open_types, p_open_now / k)
        if t > 0:
            total_loss -= prob.log()
        counts[torch.arange(n_seq), kind[:, t]] += torch.where(is_close[:, t], -1, 1)
    return (total_loss / max(1, length - 1)).mean().item()


def is_shuffle_dyck_prefix(tokens: Int[Tensor, " length"], k: int) -> bool:
    """True when no type's close count ever exceeds its open count (a valid k-Shuffle Dyck prefix)."""
    kind, is_close = tokens // 2, tokens % 2 == 1
    if bool((kind >= k).any()):
        return False
    depth = F.one_hot(kind, k) * torch.where(is_close, -1, 1)[:, None]
    return bool((depth.cumsum(dim=0) >= 0).all())


# ---------------------------------------------------------------------------------------------
# Neural cellular automata
# ---------------------------------------------------------------------------------------------


def nca_vocab(n_states: int = 4, patch: int = 1) -> int:
    """Vocabulary of :func:`nca_sequences`: ``n_states ** (patch²)`` patch tokens + 1 frame delimiter."""
    return n_states ** (patch * patch) + 1


def _nca_rules(n_seq: int, n_states: int, hidden: int, gen: torch.Generator) -> tuple[Tensor, Tensor, Tensor]:
    """Random rule weights per sequence: conv ``[n_seq·hidden, n_states, 3, 3]``, bias, readout."""
    conv = torch.randn(n_seq * hidden, n_states, 3, 3, generator=gen) / 3.0  # fan-in 9 one-hot taps
    bias = torch.randn(n_seq * hidden, generator=gen) * 0.5
    readout = torch.randn(n_seq, n_states, hidden, generator=gen) / math.sqrt(hidden)
    return conv, bias, readout


def _nca_step(
    grid: Int[Tensor, "n_seq H W"],
    conv: Tensor,
    bias: Tensor,
    readout: Tensor,
    n_states: int,
    temperature: float,
    gen: torch.Generator,
) -> Int[Tensor, "n_seq H W"]:
    """One synchronous update of every grid by its own rule (grouped conv, periodic boundary)."""
    n_seq, H, W = grid.shape
    hidden = readout.shape[-1]
    x = F.one_hot(grid, n_states).permute(0, 3, 1, 2).float().reshape(1, n_seq * n_states, H, W)
    x = F.pad(x, (1, 1, 1, 1), mode="circular")
    h = F.relu(F.conv2d(x, conv, bias, groups=n_seq)).reshape(n_seq, hidden, H, W)
    logits = torch.einsum("nsc,nchw->nhws", readout, h)
    if temperature == 0.0:
        return logits.argmax(dim=-1)
    probs = torch.softmax(logits / temperature, dim=-1).reshape(-1, n_states)
    return torch.multinomial(probs, 1, generator=gen).reshape(n_seq, H, W)


def _tokenise_frames(frames: Int[Tensor, "n_seq steps H W"], n_states: int, patch: int) -> Int[Tensor, "n_seq tokens"]:
    """Delimiter, then patches row-major, per frame; a patch's id is its cells in base ``n_states``."""
    n_seq, steps, H, W = frames.shape
    p = patch
    patches = frames.reshape(n_seq, steps, H // p, p, W // p, p).permute(0, 1, 2, 4, 3, 5)
    patches = patches.reshape(n_seq, steps, (H // p) * (W // p), p * p)
    place = n_states ** torch.arange(p * p)
    ids = (patches * place).sum(dim=-1)
    delimiter = torch.full((n_seq, steps, 1), n_states ** (p * p), dtype=torch.long)
    return torch.cat([delimiter, ids], dim=2).reshape(n_seq, -1)


def gzip_ratio(tokens: Int[Tensor, " n"]) -> float:
    """Compressed / raw size of the token bytes (Lee et al. 2026's complexity measure; lower = simpler)."""
    raw = tokens.to(torch.int16).numpy().tobytes()
    return len(gzip.compress(raw)) / len(raw)


def nca_sequences(
    n_seq: int,
    length: int,
    seed: int,
    grid_size: int = 4,
    n_states: int = 4,
    patch: int = 1,
    hidden: int = 16,
    temperature: float = 0.0,
    min_gzip_ratio: float | None = None,
) -> Int[Tensor, "n_seq length"]:
    """Neural-cellular-automaton trajectories, one random rule per sequence, tokenised.

    Each sequence: a random rule (:func:`_nca_rules`: 3×3 periodic convolution with ``hidden``
    channels on the one-hot grid, ReLU, 1×1 readout to ``n_states`` logits; Lee et al. 2026), a
    uniformly random initial grid, then synchronous updates (argmax of the logits, or a sample at
    ``temperature > 0``). Frames are tokenised as a delimiter token followed by the
    ``(grid_size / patch)²`` patch tokens, row-major; the concatenation is cut to ``length``.

    Args:
        n_seq, length: output shape (sequences, tokens), ≥ 1.
        seed: seeds a private generator (global RNG untouched).
        grid_size: grid side (cells), a multiple of ``patch``. n_states: cell states, ≥ 2.
        patch: patch side (cells per token side). hidden: rule network width.
        temperature: 0 for deterministic rules, else the softmax temperature of the update.
        min_gzip_ratio: if given, resample a sequence's rule (up to 100 times) until the
            gzip ratio of its tokens (:func:`gzip_ratio`) is at least this, dropping the
            trivial dynamics (fixed points) Lee et al. filter out.

    Returns:
        ``Int[Tensor, "n_seq length"]`` ids in ``[0, nca_vocab(n_states, patch))``; the
        delimiter is ``nca_vocab - 1``.

    Raises:
        ValueError: bad sizes, or no rule met ``min_gzip_ratio`` within 100 tries.
    """
    _check_positive(n_seq=n_seq, length=length, grid_size=grid_size, patch=patch, hidden=hidden)
    if n_states < 2:
        raise ValueError(f"n_states={n_states!r} is invalid: a cellular automaton needs ≥ 2 states")
    if grid_size % patch:
        raise ValueError(f"grid_size={grid_size} is invalid: must be a multiple of patch={patch}")
    if temperature < 0:
        raise ValueError(f"temperature={temperature!r} is invalid: must be ≥ 0")
    gen = torch.Generator().manual_seed(seed)
    frame_tokens = (grid_size // patch) ** 2 + 1
    steps = math.ceil(length / frame_tokens)
    out = _nca_batch(n_seq, steps, grid_size, n_states, patch, hidden, temperature, gen)[:, :length]
    if min_gzip_ratio is None:
        return out
    for i in range(n_seq):
        for _ in range(NCA_MAX_TRIES):
            if gzip_ratio(out[i]) >= min_gzip_ratio:
                break
            out[i] = _nca_batch(1, steps, grid_size, n_states, patch, hidden, temperature, gen)[0, :length]
        else:
            raise ValueError(
                f"min_gzip_ratio={min_gzip_ratio} is unreachable: no rule in {NCA_MAX_TRIES} tries "
                "reached it; lower it or enlarge the grid/states"
            )
    return out


def _nca_batch(n_seq, steps, grid_size, n_states, patch, hidden, temperature, gen) -> Tensor:
    conv, bias, readout = _nca_rules(n_seq, n_states, hidden, gen)
    grid = torch.randint(0, n_states, (n_seq, grid_size, grid_size), generator=gen)
    frames = [grid]
    for _ in range(steps - 1):
        grid = _nca_step(grid, conv, bias, readout, n_states, temperature, gen)
        frames.append(grid)
    return _tokenise_frames(torch.stack(frames, dim=1), n_states, patch)


def _check_positive(**values: int) -> None:
    for name, value in values.items():
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name}={value!r} is invalid: must be an integer ≥ 1")


# ---------------------------------------------------------------------------------------------
# Pre-pretraining then training
# ---------------------------------------------------------------------------------------------


@dataclasses.dataclass
class PretrainSpec:
    """Which generator and its settings (defaults documented at the generators).

    ``dyck_k`` / ``dyck_p_open`` feed :func:`dyck_sequences`; the ``nca_*`` fields feed
    :func:`nca_sequences`.

    Raises:
        ValueError: ``source`` is not one of :data:`PRETRAIN_SOURCES` (``"dyck"``, ``"nca"``).
    """

    source: str = "dyck"
    dyck_k: int = DYCK_DEFAULT_K
    dyck_p_open: float = DYCK_DEFAULT_P_OPEN
    nca_grid_size: int = 4
    nca_n_states: int = 4
    nca_patch: int = 1
    nca_hidden: int = 16
    nca_temperature: float = 0.0

    def __post_init__(self) -> None:
        if self.source not in PRETRAIN_SOURCES:
            raise ValueError(f"pretrain={self.source!r} is unknown: choose one of {', '.join(PRETRAIN_SOURCES)}")

    @property
    def d_vocab(self) -> int:
        """The generator's vocabulary (tokens): :func:`dyck_vocab` or :func:`nca_vocab` of the fields."""
        if self.source == "dyck":
            return dyck_vocab(self.dyck_k)
        return nca_vocab(self.nca_n_states, self.nca_patch)

    def sample(self, n_seq: int, length: int, seed: int) -> Int[Tensor, "n_seq length"]:
        """``n_seq`` fresh sequences of ``length`` tokens from this generator."""
        if self.source == "dyck":
            return dyck_sequences(self.dyck_k, n_seq, length, seed, self.dyck_p_open)
        return nca_sequences(
            n_seq,
            length,
            seed,
            grid_size=self.nca_grid_size,
            n_states=self.nca_n_states,
            patch=self.nca_patch,
            hidden=self.nca_hidden,
            temperature=self.nca_temperature,
        )


def vocab_dependent_keys(cfg: ModelConfig) -> set[str]:
    """State-dict keys whose shape depends on ``d_vocab`` (embedding, unembedding), for any arch.

    Found by building the model at ``d_vocab`` and ``d_vocab + 1`` and comparing shapes, so no
    architecture's parameter names are hard-coded.
    """
    a = build_model(cfg).state_dict()
    b = build_model(dataclasses.replace(cfg, d_vocab=cfg.d_vocab + 1)).state_dict()
    return {key for key in a if key not in b or a[key].shape != b[key].shape}


def pretrain_model(
    model: nn.Module,
    spec: PretrainSpec,
    steps: int,
    batch_size: int,
    n_ctx: int,
    lr: float = 1e-3,
    weight_decay: float = 0.01,
    seed: int = 0,
    *,
    checkpoint_dir: str | Path | None = None,
    checkpoint_every: int = 0,
    resume_from: str | Path | None = None,
) -> list[float]:
    """Train ``model`` (in place) with next-token loss on fresh generator batches.

    AdamW, constant ``lr`` (the task run has its own warm-up), on the one training loop
    (:func:`interp.core.train_loop.train_loop`). Batch ``i`` is drawn with seed
    ``seed · 1_000_003 + i``, so runs are deterministic and a resumed run continues exactly.

    Args:
        checkpoint_dir: with ``checkpoint_every > 0``, write ``checkpoint_dir/step{N}/`` every
            ``checkpoint_every`` steps and at the last: ``model.safetensors`` plus the loop's
            resumable state (:func:`interp.core.train_loop.save_state`).
        resume_from: a ``step{N}`` folder written so; training continues from step ``N`` (the
            same model shape, ``lr`` and ``weight_decay``).

    Returns:
        The training loss per step trained (nats): ``steps`` values, or ``steps - N`` when resumed.

    Raises:
        ValueError: ``checkpoint_every > 0`` without ``checkpoint_dir``, or a resumed step after ``steps``.
        interp.core.training_state.NotResumableError: ``resume_from`` holds no training state.
    """
    from safetensors.torch import load_model, save_model

    from interp.core.train_loop import load_state, save_state, train_loop, warmup_constant

    if checkpoint_every and checkpoint_dir is None:
        raise ValueError("checkpoint_every > 0 needs a checkpoint_dir to write checkpoints to")
    device = next(model.parameters()).device
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    start = 0
    if resume_from is not None:
        start, _, _ = load_state(resume_from, optimizer)
        load_model(model, str(Path(resume_from) / "model.safetensors"), device=str(device))
        if start > steps:
            raise ValueError(f"resume_from={str(resume_from)!r} is at step {start}, after steps={steps}")
    lr_at = warmup_constant(lr, 0)
    losses: list[float] = []

    def at_step(step: int) -> None:
        if not checkpoint_every or (resume_from is not None and step == start):
            return
        if step % checkpoint_every == 0 or step == steps:
            folder = Path(checkpoint_dir) / f"step{step}"
            folder.mkdir(parents=True, exist_ok=True)
            with atomic_path(folder / "model.safetensors", suffix=".safetensors") as tmp:
                save_model(model, str(tmp))
            save_state(
                folder,
                optimizer,
                step,
                lr_next=lr_at(step),
                extra={"data_order": f"{spec.source} sequences seeded seed * 1_000_003 + step", "seed": seed},
            )

    def loss_fn(model: nn.Module, tokens: Tensor, step: int) -> Tensor:
        logits = model(tokens)
        return F.cross_entropy(logits[:, :-1].flatten(0, 1).float(), tokens[:, 1:].flatten())

    train_loop(
        model,
        optimizer,
        start=start,
        stop=steps,
        batch_at=lambda step: spec.sample(batch_size, n_ctx, seed * 1_000_003 + step).to(device),
        loss_fn=loss_fn,
        lr_at=lr_at,
        at_step=at_step,
        after_step=lambda step, loss: losses.append(loss.item()),
    )
    return losses


@contextlib.contextmanager
def _initialised_from(arch: str, state: dict[str, Tensor]) -> Iterator[None]:
    """While active, ``build_model`` for ``arch`` loads ``state`` (a partial state dict) after building.

    Uses the public :func:`synthetic.models.register_architecture`, restoring the original
    builder on exit, so :func:`synthetic.training.train` runs unchanged.
    """
    original = model_registry.ARCHITECTURES[arch]

    def builder(cfg: ModelConfig) -> nn.Module:
        model = original(cfg)
        missing = set(state) - set(model.state_dict())
        if missing:
            raise ValueError(f"pre-pretrained weights do not fit arch={arch!r}: unknown keys {sorted(missing)[:3]}")
        model.load_state_dict(state, strict=False)
        return model

    model_registry.register_architecture(arch, builder)
    try:
        yield
    finally:
        model_registry.register_architecture(arch, original)


def pretrained_state(
    config, spec: PretrainSpec, pretrain_steps: int, lr: float | None = None
) -> tuple[dict[str, Tensor], list[float]]:
    """Pre-pretrain a twin of ``config``'s task model and return its transferable weights.

    The twin is the task model (``config.model_config(task)``: same architecture, ``n_ctx``
    and seed) with the generator's vocabulary. It trains for ``pretrain_steps`` steps on fresh
    generator sequences of ``n_ctx`` tokens, ``config.tokens_per_step // n_ctx`` per step
    (:func:`pretrain_model`, lr ``lr`` or ``config.lr``, seeded by ``config.seed``).

    Returns:
        ``(state, losses)``: the twin's state dict without the vocabulary-sized tensors
        (:func:`vocab_dependent_keys`), on CPU, and the per-step training losses (nats).

    Raises:
        ValueError: ``pretrain_steps < 1`` or a bad config.
    """
    from synthetic.training import resolve_device, to_device

    _check_positive(pretrain_steps=pretrain_steps)
    config.validate()
    task_cfg = config.model_config(config.make_task())
    pre_cfg = dataclasses.replace(task_cfg, d_vocab=spec.d_vocab)
    twin = to_device(build_model(pre_cfg), resolve_device(config.device))
    batch = max(1, config.tokens_per_step // task_cfg.n_ctx)
    losses = pretrain_model(
        twin,
        spec,
        pretrain_steps,
        batch,
        task_cfg.n_ctx,
        lr=lr or config.lr,
        weight_decay=config.weight_decay,
        seed=config.seed,
    )
    skip = vocab_dependent_keys(task_cfg)
    state = {k: v.detach().cpu().clone() for k, v in twin.state_dict().items() if k not in skip}
    return state, losses


def pretrain_then_train(
    config,
    pretrain: str | PretrainSpec = "dyck",
    pretrain_steps: int = 1000,
    pretrain_lr: float | None = None,
    out_dir=None,
    progress: bool = False,
):
    """Pre-pretrain on a generator, then train on ``config``'s synthetic task.

    1. :func:`pretrained_state`: train a twin of the task model (generator vocabulary) for
       ``pretrain_steps`` steps on the generator.
    2. Build the task model as usual, load every weight except the vocabulary-sized ones
       (token embedding, unembedding keep their fresh initialisation; module docstring) and
       run :func:`synthetic.training.train` for ``config.steps`` steps.

    Args:
        config: a :class:`synthetic.training.TrainConfig`.
        pretrain: ``"dyck"``, ``"nca"`` or a :class:`PretrainSpec`.
        pretrain_steps: optimizer steps on the generator, ≥ 0 (0 = plain training from scratch).
        pretrain_lr: learning rate of the pre-pretraining (None: ``config.lr``).
        out_dir, progress: passed to :func:`synthetic.training.train`.

    Returns:
        The :class:`synthetic.training.TrainResult`; its summary (and ``summary.json``) gains
        ``pretrain`` (None when ``pretrain_steps == 0``), ``pretrain_steps``,
        ``pretrain_vocab``, ``pretrain_loss_start`` and ``pretrain_final_loss`` (nats, mean of
        the last 10 steps). ``steps_to_threshold`` counts task steps only.

    Raises:
        ValueError: unknown generator, ``pretrain_steps < 0``, or any error of ``train``.
    """
    from synthetic.training import train

    spec = pretrain if isinstance(pretrain, PretrainSpec) else PretrainSpec(source=pretrain)
    if not isinstance(pretrain_steps, int) or pretrain_steps < 0:
        raise ValueError(f"pretrain_steps={pretrain_steps!r} is invalid: must be an integer ≥ 0")
    state, losses = pretrained_state(config, spec, pretrain_steps, pretrain_lr) if pretrain_steps else ({}, [])
    with _initialised_from(config.arch, state) if state else contextlib.nullcontext():
        result = train(config, out_dir=out_dir, progress=progress)
    result.summary.update(
        pretrain=spec.source if pretrain_steps else None,
        pretrain_steps=pretrain_steps,
        pretrain_vocab=spec.d_vocab,
        pretrain_loss_start=losses[0] if losses else None,
        pretrain_final_loss=sum(losses[-10:]) / len(losses[-10:]) if losses else None,
    )
    if out_dir is not None:
        atomic_write_text(Path(out_dir) / "summary.json", json.dumps(result.summary, indent=2) + "\n")
    return result


def compare_pretraining(
    config, pretrain: str | PretrainSpec, pretrain_steps: int, seeds: list[int], pretrain_lr: float | None = None
) -> pd.DataFrame:
    """Steps to emergence with and without pre-pretraining, per seed (reported whatever the sign).

    For each seed, trains ``config`` (with that ``seed``) from scratch and after
    ``pretrain_steps`` of pre-pretraining (:func:`pretrain_then_train`).

    Returns:
        One row per seed: ``seed``, ``scratch_steps``, ``pretrained_steps`` (steps of task
        training to the loss threshold; None = never within ``config.steps``),
        ``delta_steps`` (pretrained − scratch; negative = pre-pretraining sped emergence;
        None unless both emerged), ``scratch_final_loss``, ``pretrained_final_loss`` (nats),
        ``pretrain``, ``pretrain_steps``, ``pretrain_final_loss``, ``threshold`` (the loss
        that defines emergence, nats; see :func:`synthetic.training.summarize`).
    """
    rows = []
    for seed in seeds:
        cfg = dataclasses.replace(config, seed=seed)
        scratch = pretrain_then_train(cfg, pretrain, 0).summary
        pre = pretrain_then_train(cfg, pretrain, pretrain_steps, pretrain_lr).summary
        a, b = scratch["steps_to_threshold"], pre["steps_to_threshold"]
        rows.append(
            {
                "seed": seed,
                "scratch_steps": a,
                "pretrained_steps": b,
                "delta_steps": b - a if a is not None and b is not None else None,
                "scratch_final_loss": scratch["final_loss"],
                "pretrained_final_loss": pre["final_loss"],
                "pretrain": pre["pretrain"],
                "pretrain_steps": pretrain_steps,
                "pretrain_final_loss": pre["pretrain_final_loss"],
                "threshold": scratch["threshold"],
            }
        )
    return pd.DataFrame(rows)
