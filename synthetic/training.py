"""One training run on a synthetic task: config → model → AdamW loop → metrics + summary.

Choices where the paper (Baherwani et al. 2026, arXiv 2606.25010) gives nothing (all are
:class:`TrainConfig` fields): AdamW (β₁ 0.9, β₂ 0.999) at lr 1e-3 with 0.01 weight decay, linear
warm-up over 100 steps then constant; 2048 tokens per step (64 sequences at S = 16, T = 1;
fewer, longer sequences as S grows, as the paper does for cellular automata); a 1-layer
attention-only transformer with 16 heads of width 8 (the smallest head count the paper's
S = 16 heads × d_head sweep shows reaching the floor) and learned positional embeddings;
10⁴ steps (the paper's runs are ≈10⁴ steps).

Every ``eval_every`` steps (and at step 0 and the last step) the model is evaluated on a fixed
held-out set drawn from ``data_seed`` (so every model seed sees the same evaluation data) and a
row of metrics is recorded; see :func:`train` for the columns.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from torch import Tensor, nn

from interp.core.devices import choose_device
from interp.core.field_options import setting
from interp.core.io import atomic_to_parquet, atomic_write_text, remove_folder
from interp.core.objects import short_repr, values_equal
from interp.core.progress import progress_bar, skip
from interp.core.provenance import make_provenance, write_provenance
from interp.core.train_loop import train_loop, warmup_constant
from synthetic.datasets import TASKS, SyntheticTask, make_task
from synthetic.evaluation import Evaluator
from synthetic.interventions import BIAS_SCHEDULES, AttentionBias, bias_beta
from synthetic.metrics import (
    default_threshold,
    per_position_loss,
    plateau_length,
    steps_to_threshold,
)
from synthetic.models import POSITIONAL_EMBEDDINGS, ModelConfig, build_model, count_parameters
from synthetic.state import STATE_ROWS, find_state, keep_state, resume_checkpoint

DEVICES = ("auto", "cpu", "cuda")


@dataclass
class TrainConfig:
    """Everything that defines one run; every field is a scalar so sweeps can vary any of them.

    Groups: the task (``task`` … ``data_seed``), the model (``arch`` … ``n_ctx``, see
    :class:`synthetic.models.ModelConfig`), optimisation (``steps`` … ``seed``), evaluation
    (``eval_every`` … ``plateau_margin``, see :func:`synthetic.metrics.plateau_length`), the
    attention bias (``bias`` … ``bias_anneal_steps``, :mod:`synthetic.interventions`) and output
    (``checkpoint_every`` … ``rwkv_version``). What each field means is its ``help`` metadata
    (``dataclasses.fields(TrainConfig)``), written once beside it (:func:`interp.core.field_options.setting`);
    ``emergence synth train`` offers every field as ``--name-with-dashes`` with that help.
    """

    task: str = setting("linear-map", f"Task: {' | '.join(TASKS)}.")
    S: int = setting(16, "State size S (bits / cells per state).")
    s: int = setting(3, "Sparsity s: ones per row of A (linear map).")
    T: int | None = setting(None, "Transitions per sequence (default: 1 for linear-map, 3 for cellular-automata).")
    k: int = setting(4, "Cell states (cellular automata).")
    n_rules: int = setting(16, "Rule-pool size (cellular automata).")
    data_seed: int = setting(0, "Seed of A / the rule pool and the evaluation set.")

    arch: str = setting("transformer", "Architecture (see synthetic.models.ARCHITECTURES).")
    n_layers: int = setting(1, "Layers.")
    n_heads: int = setting(16, "Attention heads per layer.")
    d_head: int = setting(8, "Width of each head.")
    d_model: int | None = setting(None, "Residual width (default: n_heads * d_head).")
    d_mlp: int | None = setting(None, "MLP width (default: none, attention-only).")
    positional_embedding: str = setting("learned", " | ".join(POSITIONAL_EMBEDDINGS))
    n_ctx: int | None = setting(None, "Model context (default: the sequence length).")

    steps: int = setting(10_000, "Optimizer updates.")
    lr: float = setting(1e-3, "AdamW learning rate after the warm-up.")
    warmup_steps: int = setting(100, "Linear warm-up from lr/warmup_steps, then constant.")
    weight_decay: float = setting(0.01, "AdamW weight decay.")
    tokens_per_step: int = setting(2048, "Batch = tokens_per_step // sequence length.")
    seed: int = setting(0, "Weights and training batches.")

    eval_every: int = setting(50, "Steps between evaluations.")
    eval_tokens: int = setting(8192, "Tokens of the fixed evaluation set.")
    loss_threshold: float | None = setting(None, "Nats (default: floor + margin·(plateau − floor)).")
    plateau_margin: float = setting(0.05, "Fraction of the plateau-to-floor gap that ends the plateau.")

    bias: float = setting(0.0, "Attention bias β added to the true keys' logits (0: off).")
    bias_layers: str | None = setting(None, "e.g. '0,1' (default: all).")
    bias_heads: str | None = setting(None, "e.g. '0,3' (default: all).")
    bias_schedule: str = setting("constant", " | ".join(BIAS_SCHEDULES))
    bias_anneal_steps: int | None = setting(None, "(default: steps)")

    checkpoint_every: int = setting(0, "Save the folder DIR/checkpoints/step{N}/ every N steps (0: never).")
    row_entropy: bool = setting(
        False, "Also record entropy_L{l}H{h}_out{i}: each head's entropy over the queries predicting output i."
    )
    device: str = setting("auto", "auto | cpu | cuda | cuda:N (auto: cuda when available, else cpu).")
    rwkv_version: int | None = setting(None, "RWKV only: 4 or 7 (default: chosen by the run's device).")

    def validate(self) -> None:
        """Raise a one-line ValueError naming the first bad field (task/model fields are
        checked when the task and model are built).

        Raises:
            ValueError: an unknown ``task`` or ``bias_schedule``; ``steps``, ``tokens_per_step``,
                ``eval_every`` or ``eval_tokens`` not an integer ≥ 1, or ``warmup_steps`` or
                ``checkpoint_every`` not an integer ≥ 0; ``lr`` not > 0; ``weight_decay`` < 0;
                ``plateau_margin`` outside (0, 1); ``bias_anneal_steps`` < 1; or a ``device``
                other than ``auto``, ``cpu``, ``cuda`` or ``cuda:N``.
        """
        if self.task not in TASKS:
            raise ValueError(f"task={self.task!r} is unknown: choose one of {', '.join(TASKS)}")
        for name, low in (
            ("steps", 1),
            ("warmup_steps", 0),
            ("tokens_per_step", 1),
            ("eval_every", 1),
            ("eval_tokens", 1),
            ("checkpoint_every", 0),
        ):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ValueError(f"{name}={value!r} is invalid: must be an integer ≥ {low}")
        if not self.lr > 0:
            raise ValueError(f"lr={self.lr!r} is invalid: must be > 0")
        if not self.weight_decay >= 0:
            raise ValueError(f"weight_decay={self.weight_decay!r} is invalid: must be ≥ 0")
        if not 0 < self.plateau_margin < 1:
            raise ValueError(f"plateau_margin={self.plateau_margin!r} is invalid: must be in (0, 1)")
        if self.bias_schedule not in BIAS_SCHEDULES:
            raise ValueError(
                f"bias_schedule={self.bias_schedule!r} is unknown: choose one of {', '.join(BIAS_SCHEDULES)}"
            )
        if self.bias_anneal_steps is not None and self.bias_anneal_steps < 1:
            raise ValueError(f"bias_anneal_steps={self.bias_anneal_steps!r} is invalid: must be ≥ 1")
        if self.device not in DEVICES and not str(self.device).startswith("cuda:"):
            raise ValueError(f"device={self.device!r} is invalid: choose auto, cpu, cuda or cuda:N")

    def make_task(self) -> SyntheticTask:
        """The task this config trains on."""
        return make_task(
            self.task, S=self.S, s=self.s, T=self.T, k=self.k, n_rules=self.n_rules, data_seed=self.data_seed
        )

    def model_config(self, task: SyntheticTask) -> ModelConfig:
        """The model config for ``task``.

        Raises:
            ValueError: the task's sequence is longer than ``n_ctx``.
        """
        n_ctx = self.n_ctx if self.n_ctx is not None else task.seq_len
        if task.seq_len > n_ctx:
            raise ValueError(
                f"sequence length {task.seq_len} ((T+1)·S) exceeds the model context "
                f"n_ctx={n_ctx}: raise n_ctx or shorten S/T"
            )
        return ModelConfig(
            d_vocab=task.d_vocab,
            n_ctx=n_ctx,
            arch=self.arch,
            n_layers=self.n_layers,
            n_heads=self.n_heads,
            d_head=self.d_head,
            d_model=self.d_model,
            d_mlp=self.d_mlp,
            positional_embedding=self.positional_embedding,
            seed=self.seed,
            rwkv_version=self.resolved_rwkv_version(),
        )

    def resolved_rwkv_version(self) -> int | None:
        """``rwkv_version`` for an RWKV run (None → chosen by the run's device, see
        :func:`synthetic.models.rwkv.rwkv_version`); None for every other architecture."""
        if self.arch != "rwkv":
            return None
        if self.rwkv_version is not None:
            return self.rwkv_version
        from synthetic.models.rwkv import rwkv_version

        return rwkv_version(resolve_device(self.device))

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> TrainConfig:
        """Build from a dict, ignoring unknown keys (e.g. a summary's ``config``)."""
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in values.items() if k in names})


@dataclass
class TrainResult:
    """What :func:`train` returns: the config, the summary dict, the metrics table (one row
    per evaluation) and the trained model (on the training device)."""

    config: TrainConfig
    summary: dict
    metrics: pd.DataFrame
    model: nn.Module
    task: SyntheticTask | None = field(default=None, repr=False, compare=False)

    #: timings, which differ between two runs of the same settings and are left out of ``==``
    TIMING = ("wall_time_s", "elapsed_s")

    __repr__ = short_repr  # one screen

    def __eq__(self, other: object) -> bool:
        """Same config, summary, metrics (``DataFrame.equals``) and weights (by value), timings aside."""
        if not isinstance(other, TrainResult):
            return NotImplemented

        def strip(r):
            return (
                r.config,
                {k: v for k, v in r.summary.items() if k not in self.TIMING},
                r.metrics.drop(columns=list(self.TIMING), errors="ignore"),
                r.model,
            )

        return values_equal(strip(self), strip(other))

    def _html(self, assets) -> str:
        from synthetic.display import result_html

        return result_html(self, assets)

    def _repr_html_(self) -> str:
        """Jupyter display: summary table, loss, staircase, head entropy and alignment (offline,
        self-contained)."""
        from interp.report.display import Assets

        return self._html(Assets())

    def save_html(self, path):
        """Write the display as a self-contained page (atomic; :func:`interp.report.display.save_html`)."""
        from interp.report.display import save_html

        return save_html(self, path, title=f"synthetic run: {self.config.task}")


def resolve_device(device: str) -> torch.device:
    """``"auto"`` → cuda when available, else cpu; anything else as given (:func:`interp.core.devices.choose_device`).

    Raises:
        ValueError: a CUDA device where none is usable.
    """
    return torch.device(choose_device(device))


def to_device(model: nn.Module, device: torch.device) -> nn.Module:
    """Move ``model`` to ``device`` (quietly: a TransformerBridge prints by default)."""
    if all(p.device == device for p in model.parameters()):
        return model
    if hasattr(model, "hook_dict") and hasattr(model, "cfg"):
        return model.to(device, print_details=False)
    return model.to(device)


def _generator(device: torch.device, seed: int) -> torch.Generator:
    return torch.Generator(device=device).manual_seed(seed)


def save_checkpoint(
    path: str | os.PathLike,
    model: nn.Module,
    config: TrainConfig,
    step: int,
    optimizer: torch.optim.Optimizer | None = None,
    generator: torch.Generator | None = None,
) -> Path:
    """Write one checkpoint folder ``path`` atomically (safetensors and JSON, no pickle).

    ``path/model.safetensors`` (the model's state dict), ``path/config.json`` (the
    :class:`TrainConfig`), and with ``optimizer`` the state to continue training exactly
    (the training loop's state format, :func:`interp.core.train_loop.save_state`: AdamW moments,
    step, learning rate of the next update, and the training-batch generator's state as the data
    cursor).
    """
    import shutil

    from safetensors.torch import save_model

    from interp.core.train_loop import save_state, warmup_constant

    path = Path(path)
    tmp = path.parent / f".{path.name}.{os.getpid()}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        save_model(model, str(tmp / "model.safetensors"))
        (tmp / "config.json").write_text(json.dumps({"step": step, "config": asdict(config)}, indent=1))
        if optimizer is not None:
            tensors = {"train_generator": generator.get_state()} if generator is not None else {}
            save_state(
                tmp, optimizer, step, lr_next=warmup_constant(config.lr, config.warmup_steps)(step), tensors=tensors
            )
        remove_folder(path)  # renamed first: a kill mid-removal never leaves half a checkpoint under its name
        os.replace(tmp, path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return path


def load_checkpoint(path: str | os.PathLike, device: str = "cpu") -> tuple[nn.Module, TrainConfig, int]:
    """Rebuild the model saved by :func:`save_checkpoint`; returns ``(model, config, step)``.

    Raises:
        FileNotFoundError: ``path`` is not a checkpoint folder.
    """
    from safetensors.torch import load_model

    path = Path(path)
    if not (path / "model.safetensors").is_file():
        raise FileNotFoundError(f"{path} is not a checkpoint folder (no model.safetensors)")
    blob = json.loads((path / "config.json").read_text())
    config = TrainConfig.from_dict(blob["config"])
    model = to_device(build_model(config.model_config(config.make_task())), torch.device(device))
    load_model(model, str(path / "model.safetensors"), device=str(device))
    return model, config, int(blob["step"])


def _start_wandb(config: TrainConfig, out_dir: Path | None):
    try:
        import wandb as wandb_lib
    except ImportError:
        raise ImportError("wandb logging needs the wandb package: pip install 'emergence-lens[wandb]'") from None
    return wandb_lib.init(
        project=os.environ.get("WANDB_PROJECT", "emergence-lens"),
        mode=os.environ.get("WANDB_MODE", "offline"),  # offline unless the user opts in
        config=asdict(config),
        dir=str(out_dir) if out_dir is not None else None,
    )


def _json_safe(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if hasattr(value, "item"):
        return value.item()
    return value


def summarize(
    config: TrainConfig, task: SyntheticTask, metrics: pd.DataFrame, n_params: int, wall_time_s: float
) -> dict:
    """Summary of a finished run (the dict written as ``summary.json``).

    Keys: ``final_loss`` (last evaluation, nats), ``final_loss_target``, ``floor``,
    ``floor_kind`` (``"analytic"`` | ``"bayes-monte-carlo"``), ``plateau_loss``,
    ``plateau_length`` (steps or None), ``threshold``, ``steps_to_threshold`` (steps or None),
    ``emerged`` (threshold reached), ``final_max_alignment`` (best head's alignment at the
    last evaluation, bias off; None without attention),
    ``n_params``, ``batch_size``, ``seq_len``, ``tokens_per_step``, ``wall_time_s``,
    ``config`` (as given: None means "the task's default") and ``resolved`` (the values the
    run actually used for those defaults: ``T``, ``d_model``, ``n_ctx``).
    """
    floor = task.floor
    steps, loss = metrics["step"].tolist(), metrics["loss"].tolist()
    threshold = (
        config.loss_threshold
        if config.loss_threshold is not None
        else default_threshold(task.plateau_loss, floor, config.plateau_margin)
    )
    reached = steps_to_threshold(steps, loss, threshold)
    align_cols = [c for c in metrics.columns if c.startswith("alignment_")]
    batch_size = config.tokens_per_step // task.seq_len
    summary = {
        "final_loss": loss[-1],
        "final_loss_target": metrics["loss_target"].iloc[-1],
        "floor": floor,
        "floor_kind": "analytic" if task.name == "linear-map" else "bayes-monte-carlo",
        "plateau_loss": task.plateau_loss,
        "plateau_length": plateau_length(steps, loss, task.plateau_loss, floor, config.plateau_margin),
        "threshold": threshold,
        "steps_to_threshold": reached,
        "emerged": reached is not None,
        "final_max_alignment": metrics[align_cols].iloc[-1].max() if align_cols else None,
        "n_params": n_params,
        "batch_size": batch_size,
        "seq_len": task.seq_len,
        "tokens_per_step": batch_size * task.seq_len,
        "wall_time_s": wall_time_s,
        "config": asdict(config),
        "resolved": _resolved_defaults(config, task),
    }
    return {k: _json_safe(v) for k, v in summary.items()}


def _resolved_defaults(config: TrainConfig, task: SyntheticTask) -> dict:
    """The values used for config fields left at None (task / model defaults)."""
    model_cfg = config.model_config(task)
    return {"T": getattr(task, "T", config.T), "d_model": model_cfg.resolved_d_model, "n_ctx": model_cfg.n_ctx}


def train(
    config: TrainConfig,
    out_dir: str | Path | None = None,
    progress: bool = True,
    wandb: bool = False,
    resume_from: str | Path | None = None,
    on_eval: Callable[[dict], None] | None = None,
    state_dir: str | Path | None = None,
    state_every: int = 0,
) -> TrainResult:
    """Train one model on one synthetic task and record its learning curve.

    Metrics columns (one row per evaluation, at step 0, every ``eval_every`` steps and the
    last step; ``step`` = optimizer updates done): ``step``, ``tokens`` (training tokens
    seen), ``lr``, ``beta`` (bias in force), ``train_loss`` (last training batch, NaN at step
    0), ``loss`` (evaluation loss over every loss position, nats), ``loss_target`` (over the
    transition tokens only), ``loss_nobias`` (same model without the bias; only with a bias),
    ``loss_out_{i}`` (loss on cell ``i`` of the predicted states, ``i < S``), and for
    attention models ``entropy_L{l}H{h}`` (nats) and ``alignment_L{l}H{h}`` (attention mass on
    the true keys, probability) per head, both averaged over the target query positions.
    Losses (``loss``, ``loss_target``, ``loss_out_{i}``) are measured with the bias in force;
    every head metric (entropy, alignment, per-row entropy) with the bias switched off, so it
    says what the weights learned, not where the bias pushes attention (see :class:`Evaluator`).

    With ``out_dir`` writes ``metrics.parquet``, ``summary.json`` (see :func:`summarize`),
    ``provenance.json`` (:mod:`interp.core.provenance`) and, when ``checkpoint_every > 0``,
    ``checkpoints/step{N}/`` (:func:`save_checkpoint`: weights, optimizer state and the batch
    generator's state, so training can continue).

    ``on_eval(row)`` is called with each metrics row as it is measured (the sweeps' runner
    prints a line per evaluation into the run's log with it).

    ``state_dir`` with ``state_every > 0`` keeps a resumable state of the unfinished run there
    (``state_dir/state/``: a :func:`save_checkpoint` folder plus the metrics rows so far,
    replaced every ``state_every`` steps, at an evaluation step; the caller removes it once the
    run's result is safe, as the sweep driver does after writing the run's row, with
    :func:`synthetic.state.drop_state`): a run started again with the same ``state_dir`` and config continues from it,
    and its metrics, summary and weights equal
    an uninterrupted run's bit for bit at one torch thread, as sweeps train
    (tests/synthetic/test_synth_ensemble.py; at two threads even two uninterrupted ensembles of one
    process can differ in the last bits here). The sweeps keep paper-scale runs there, so a
    killed sweep loses at most ``state_every`` steps of each run.

    Deterministic on CPU: the same config gives the same curve. ``resume_from`` (a checkpoint
    folder written with ``checkpoint_every``) continues that run from its step exactly as if it
    had not stopped (same thread count); the metrics then hold the rows after that step.

    Raises:
        ValueError: any bad config field, a batch smaller than one sequence, a sequence
            longer than ``n_ctx``, a bias on a model without attention or bad bias indices.
        ImportError: ``wandb=True`` without the wandb package.
    """
    config.validate()
    start = time.perf_counter()
    device = resolve_device(config.device)
    task = config.make_task()
    batch_size = config.tokens_per_step // task.seq_len
    if batch_size < 1:
        raise ValueError(
            f"tokens_per_step={config.tokens_per_step} is smaller than one sequence "
            f"({task.seq_len} tokens): raise it to at least {task.seq_len}"
        )
    model = to_device(build_model(config.model_config(task)), device)
    out_path = Path(out_dir) if out_dir is not None else None
    if config.checkpoint_every and out_path is None:
        raise ValueError("checkpoint_every > 0 needs an out_dir to write checkpoints to")

    bias = None
    if config.bias != 0.0:
        bias = AttentionBias(model, task.pattern_mask, config.bias, layers=config.bias_layers, heads=config.bias_heads)
    anneal_steps = config.bias_anneal_steps or config.steps

    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    lr_at = warmup_constant(config.lr, config.warmup_steps)
    train_gen = _generator(device, config.seed)
    start_step = 0
    rows: list[dict] = []
    kept = find_state(state_dir) if resume_from is None else None
    if kept is not None:  # a run that stopped half-way: its state and its rows so far
        resume_from = kept
        rows = json.loads((kept / STATE_ROWS).read_text())
        start -= rows[-1]["elapsed_s"] if rows else 0.0
    if resume_from is not None:
        start_step = resume_checkpoint(Path(resume_from), model, optimizer, train_gen, config, device)
    if state_every and state_every % config.eval_every:
        raise ValueError(f"state_every={state_every} must be a multiple of eval_every={config.eval_every}")
    eval_batch = max(1, config.eval_tokens // task.seq_len)
    eval_tokens = task.sample(eval_batch, _generator(device, 1_000_003 * config.data_seed + 7))
    evaluator = Evaluator(task, model, eval_tokens, row_entropy=config.row_entropy, bias=bias)
    loss_mask = task.loss_mask[:-1].to(device)
    all_positions = bool(loss_mask.all())

    run = _start_wandb(config, out_path) if wandb else None
    last_train_loss = [torch.tensor(float("nan"))]
    # the house progress line (interp.core.progress): text on standard output in a notebook (no widget,
    # no ipywidgets warning), a tqdm bar in a terminal, plain lines in a log
    bar = progress_bar(config.steps, f"{config.task} S={config.S}", unit="step", enabled=progress)

    def at_step(step: int) -> None:  # bias schedule, evaluation and checkpoints before update `step`
        beta = bias_beta(config.bias, config.bias_schedule, step, anneal_steps)
        if bias is not None:
            bias.beta = beta
        # the param groups hold the learning rate of the coming update when a checkpoint is saved
        # (as synthetic checkpoints always have; the loop sets it again before the update)
        for group in optimizer.param_groups:
            group["lr"] = lr_at(step)
        resumed_here = resume_from is not None and step == start_step
        if (step % config.eval_every == 0 or step == config.steps) and not resumed_here:
            model.eval()
            row = {
                "step": step,
                "tokens": step * batch_size * task.seq_len,
                "lr": optimizer.param_groups[0]["lr"],
                "beta": beta,
                "train_loss": last_train_loss[0].item(),
                **evaluator(),
            }
            row["elapsed_s"] = time.perf_counter() - start
            rows.append(row)
            model.train()
            bar.set_postfix_str(f"step={step}, loss={row['loss']:.4f}", refresh=False)
            if on_eval is not None:
                on_eval(row)
            if run is not None:
                run.log(row, step=step)
        if (
            config.checkpoint_every
            and (step % config.checkpoint_every == 0 or step == config.steps)
            and not resumed_here
        ):
            save_checkpoint(
                out_path / "checkpoints" / f"step{step}", model, config, step, optimizer=optimizer, generator=train_gen
            )
        keep = state_dir is not None and state_every and 0 < step < config.steps and step % state_every == 0
        if keep and not resumed_here:
            keep_state(
                state_dir, lambda folder: save_checkpoint(folder, model, config, step, optimizer, train_gen), rows
            )

    def loss_fn(model: nn.Module, tokens: Tensor, step: int) -> Tensor:
        logits = model(tokens)
        if all_positions:
            return torch.nn.functional.cross_entropy(logits[:, :-1].flatten(0, 1).float(), tokens[:, 1:].flatten())
        return per_position_loss(logits, tokens)[:, loss_mask].mean()

    def after_step(step: int, loss: Tensor) -> None:
        last_train_loss[0] = loss
        bar.update(1)

    try:
        with bias if bias is not None else nullcontext():
            skip(bar, start_step)  # a resumed run's steps move the position, not the rate
            train_loop(
                model,
                optimizer,
                start=start_step,
                stop=config.steps,
                batch_at=lambda step: task.sample(batch_size, train_gen),
                loss_fn=loss_fn,
                lr_at=lr_at,
                at_step=at_step,
                after_step=after_step,
            )
    finally:
        bar.close()
        if run is not None:
            run.finish()

    metrics = pd.DataFrame(rows)
    summary = summarize(config, task, metrics, count_parameters(model), time.perf_counter() - start)
    if out_path is not None:
        atomic_to_parquet(metrics, out_path / "metrics.parquet")
        atomic_write_text(out_path / "summary.json", json.dumps(summary, indent=2) + "\n")
        write_provenance(out_path, make_provenance("synthetic.training.train", {"config": config}))
    return TrainResult(config=config, summary=summary, metrics=metrics, model=model, task=task)
