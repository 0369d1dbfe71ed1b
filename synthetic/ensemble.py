"""Several synthetic-task runs of one model shape trained in one process, as one batched model.

:func:`train_ensemble` trains ``E`` configs that agree in everything but the data and the seeds
(``seed``, ``data_seed``, ``s``, ``n_rules``) at once: each member's parameters are stacked along a
leading ensemble axis ``[E, ...]`` and one hand-batched forward (embedding gather, ``baddbmm``
projections, ``scaled_dot_product_attention`` over ``E·batch`` sequences, layer norm) computes
every member's logits; the summed per-member losses give each member exactly its own gradient
(the members share no parameter), and AdamW is elementwise, so each slice follows its own run.
Each member keeps its own weight init (built by :func:`synthetic.models.build_model` from its
seed), training-batch generator and evaluation set; at evaluation steps the stacked weights are
copied back into each member's ``TransformerBridge`` and evaluated by
:class:`synthetic.evaluation.Evaluator`, so metrics and summaries are the format
:func:`synthetic.training.train` writes.

Why a hand-batched forward rather than ``torch.func.vmap`` over the bridge: the bridge's
per-op Python overhead dominates these tiny models (S = 16, 16 heads × d_head 8, 2048 tokens per
step) and ``scaled_dot_product_attention`` has no vmap batching rule on CPU (it falls back to a
per-sample loop). Here the attention is one plain 4-D SDPA call over ``E·batch`` sequences.

The batched step runs on the one training loop (:func:`interp.core.train_loop.train_loop` with
``model=None``: the stacked weights are no module) with its schedule
(:func:`interp.core.train_loop.warmup_constant`), so the learning rate, the order of a step and the
evaluation steps are :func:`~synthetic.training.train`'s. It writes no resumable state: a config
with ``checkpoint_every`` trains one member at a time with :func:`~synthetic.training.train`,
whose checkpoints are the loop's state format.

Covered by the batched path: ``arch="transformer"`` with learned positional embeddings and
LayerNorm (the TL-native pre-LN attention-only or GELU-MLP block, as
:func:`synthetic.models.transformer.build_transformer` builds), no attention bias, no
checkpoints, no resume. Any other config trains one member at a time with
:func:`~synthetic.training.train` (same results, no speed-up). Equal to one-at-a-time training to
float rounding: ``tests/synthetic/test_synth_ensemble.py`` (3 members, 50 steps: losses and weights within
1e-4 relative). Speed: ``benchmarks/bench_synth_ensemble.py``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path

import pandas as pd
import torch
import torch.nn.functional as F
from jaxtyping import Float, Int
from torch import Tensor, nn

from interp.core.io import atomic_to_parquet, atomic_write_text, config_json
from interp.core.provenance import make_provenance, write_provenance

#: Config fields that may differ between members: they change the data or the init, not the shape.
MEMBER_FIELDS = ("seed", "data_seed", "s", "n_rules")


def check_same_shape(configs: Sequence) -> None:
    """Raise a one-line ValueError unless ``configs`` (TrainConfig) differ only in :data:`MEMBER_FIELDS`.

    Raises:
        ValueError: no configs, or the first field (other than the member fields) whose values differ.
    """
    if not configs:
        raise ValueError("configs is empty: train_ensemble needs at least one TrainConfig")
    first = asdict(configs[0])
    for i, config in enumerate(configs[1:], start=1):
        for name, value in asdict(config).items():
            if name not in MEMBER_FIELDS and value != first[name]:
                raise ValueError(
                    f"configs[{i}].{name}={value!r} differs from configs[0].{name}={first[name]!r}: "
                    f"an ensemble's configs may differ only in {', '.join(MEMBER_FIELDS)}"
                )


def batched_supported(config) -> bool:
    """Whether ``config`` (a TrainConfig) trains on the batched path (see the module docstring)."""
    return (
        config.arch == "transformer"
        and config.positional_embedding == "learned"
        and config.bias == 0.0
        and not config.checkpoint_every
    )


def native_names(root: nn.Module) -> dict[str, str]:
    """Module path -> native path in ``root`` (a bridge's ``original_model``), looking through the
    TransformerLens components that wrap native modules in place: a component's wrapped module
    (its public ``original_component``) takes the component's own path, so
    ``layers.0.attn.<wrapped>.q`` is ``layers.0.attn.q``. Every module of ``root`` is a key,
    shared ones under each of their paths; ``""`` is ``root`` itself."""
    from transformer_lens.model_bridge.generalized_components.base import GeneralizedComponent

    paths = {"": ""}
    for name, module in root.named_modules(remove_duplicate=False):
        wrapped = module.original_component if isinstance(module, GeneralizedComponent) else None
        for child_name, child in module.named_children():
            path = f"{name}.{child_name}" if name else child_name
            native = paths[name]
            if child is not wrapped:
                native = f"{native}.{child_name}" if native else child_name
            paths[path] = native
    return paths


def _native_name(paths: dict[str, str], name: str) -> str:
    """The native name of the parameter or buffer ``name`` (``<module path>.<leaf>``) of :func:`native_names`' root."""
    module, _, leaf = name.rpartition(".")
    native = paths[module]
    return f"{native}.{leaf}" if native else leaf


def native_state(model: nn.Module) -> dict[str, Tensor]:
    """The bridge's native weights by native name (``tok_embed.weight``, ``layers.0.attn.q.weight``…),
    parameters and the unembedding's bias buffer, as live tensors of ``model`` (no copy: the
    ensemble's forward and the compile benchmark read them as they are).

    Args:
        model: a synthetic model (:func:`synthetic.models.build_model`: a ``TransformerBridge``
            around its native module).

    Returns:
        native name -> tensor of the native module's shape (e.g. ``tok_embed.weight``:
        ``Float[Tensor, "d_vocab d_model"]``); the causal-mask buffers are left out.
    """
    state = {}
    paths = native_names(model.original_model)
    for name, tensor in list(model.original_model.named_parameters()) + list(model.original_model.named_buffers()):
        key = _native_name(paths, name)
        if key.endswith("causal_mask"):
            continue
        state[key] = tensor
    return state


def _layer_norm(x: Tensor, weight: Tensor, bias: Tensor, eps: float) -> Tensor:
    """LayerNorm of ``x [E, ..., d]`` with per-member ``weight``/``bias [E, d]``."""
    shape = (weight.shape[0],) + (1,) * (x.dim() - 2) + (weight.shape[1],)
    return F.layer_norm(x, x.shape[-1:], eps=eps) * weight.view(shape) + bias.view(shape)


def _linear(
    x: Float[Tensor, "E n d_in"], weight: Float[Tensor, "E d_out d_in"], bias: Tensor | None
) -> Float[Tensor, "E n d_out"]:
    if bias is None:
        return torch.bmm(x, weight.transpose(1, 2))
    return torch.baddbmm(bias.unsqueeze(1), x, weight.transpose(1, 2))


def ensemble_forward(
    params: dict[str, Tensor],
    tokens: Int[Tensor, "E batch pos"],
    n_layers: int,
    n_heads: int,
    d_head: int,
    eps: float = 1e-5,
    d_mlp: int | None = None,
) -> Float[Tensor, "E batch pos d_vocab"]:
    """Logits of every member: the TL-native pre-LN transformer (learned positions, LayerNorm,
    causal softmax attention scaled by 1/sqrt(d_head), GELU MLP when ``d_mlp``) batched over the
    leading ensemble axis of ``params`` (native names, each ``[E, ...]``)."""
    E, B, L = tokens.shape
    D = params["tok_embed.weight"].shape[-1]
    members = torch.arange(E, device=tokens.device).view(E, 1, 1)
    x = params["tok_embed.weight"][members, tokens] + params["pos.weight"][:, None, :L]
    x = x.reshape(E, B * L, D)
    for l in range(n_layers):
        p = f"layers.{l}."
        h = _layer_norm(x, params[p + "ln1.weight"], params[p + "ln1.bias"], eps)
        q, k, v = (
            _linear(h, params[f"{p}attn.{n}.weight"], params.get(f"{p}attn.{n}.bias"))
            .view(E * B, L, n_heads, d_head)
            .transpose(1, 2)
            for n in "qkv"
        )
        attn = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        attn = attn.transpose(1, 2).reshape(E, B * L, n_heads * d_head)
        x = x + _linear(attn, params[p + "attn.o.weight"], params.get(p + "attn.o.bias"))
        if d_mlp is not None:
            h = _layer_norm(x, params[p + "ln2.weight"], params[p + "ln2.bias"], eps)
            h = F.gelu(_linear(h, params[p + "mlp.fc_in.weight"], params.get(p + "mlp.fc_in.bias")))
            x = x + _linear(h, params[p + "mlp.fc_out.weight"], params.get(p + "mlp.fc_out.bias"))
    x = _layer_norm(x, params["ln_out.weight"], params["ln_out.bias"], eps)
    logits = _linear(x, params["head.weight"], params.get("head.bias"))
    return logits.view(E, B, L, -1)


def train_ensemble(
    configs: Sequence,
    out_dirs: Sequence[str | Path | None] | None = None,
    progress: bool = False,
    on_eval: Callable[[list[dict]], None] | None = None,
    state_dir: str | Path | None = None,
    state_every: int = 0,
) -> list:
    """Train ``configs`` (TrainConfig, one shape) together; one :class:`~synthetic.training.TrainResult` each.

    Equal to ``[train(c, out_dir=d) for c, d in zip(configs, out_dirs)]`` up to float rounding
    (batched matmuls sum in another order; ``tests/synthetic/test_synth_ensemble.py``: 1e-4 relative after
    50 steps), with the same metrics columns, summary keys and files in each ``out_dir``
    (``metrics.parquet``, ``summary.json``, ``provenance.json``). The summary's ``wall_time_s``
    is the ensemble's wall time divided by the number of members. ``on_eval(rows)`` is called at
    each evaluation with the members' metrics rows (one per config, in order). ``state_dir`` and
    ``state_every``: a resumable state of the unfinished ensemble, as in
    :func:`~synthetic.training.train` (stacked weights, optimizer, every member's batch
    generator and rows); started again with the same configs it continues exactly (bit for bit
    at one torch thread).

    Raises:
        ValueError: configs that differ in a field other than :data:`MEMBER_FIELDS` (the field
            named), ``out_dirs`` of another length, or anything :func:`~synthetic.training.train`
            rejects.
    """
    from synthetic.training import train

    configs = list(configs)
    check_same_shape(configs)
    out_dirs = list(out_dirs) if out_dirs is not None else [None] * len(configs)
    if len(out_dirs) != len(configs):
        raise ValueError(f"out_dirs has {len(out_dirs)} entries for {len(configs)} configs: give one per config")
    if len(configs) == 1 or not batched_supported(configs[0]):
        # members trained one at a time: one state folder each (the folder itself for one member)
        member_dirs = [
            None if state_dir is None else Path(state_dir) / f"member{i}" if len(configs) > 1 else Path(state_dir)
            for i in range(len(configs))
        ]
        return [
            train(
                c,
                out_dir=d,
                progress=progress,
                on_eval=None if on_eval is None else _one(on_eval),
                state_dir=m,
                state_every=state_every,
            )
            for c, d, m in zip(configs, out_dirs, member_dirs)
        ]
    return _train_batched(configs, out_dirs, progress, on_eval, state_dir, state_every)


def _one(on_eval: Callable[[list[dict]], None]) -> Callable[[dict], None]:
    """A member trained alone reports its rows as an ensemble of one."""
    return lambda row: on_eval([row])


def _train_batched(
    configs: list,
    out_dirs: list,
    progress: bool,
    on_eval: Callable[[list[dict]], None] | None = None,
    state_dir: str | Path | None = None,
    state_every: int = 0,
) -> list:
    from tqdm.auto import tqdm

    from interp.core.train_loop import train_loop, warmup_constant
    from synthetic.evaluation import Evaluator
    from synthetic.models import build_model, count_parameters
    from synthetic.state import STATE_ROWS, find_state, keep_state
    from synthetic.training import TrainResult, _generator, resolve_device, summarize, to_device

    start = time.perf_counter()
    for config in configs:
        config.validate()
    c0 = configs[0]
    device = resolve_device(c0.device)
    tasks = [c.make_task() for c in configs]
    seq_len = tasks[0].seq_len
    batch_size = c0.tokens_per_step // seq_len
    if batch_size < 1:
        raise ValueError(
            f"tokens_per_step={c0.tokens_per_step} is smaller than one sequence "
            f"({seq_len} tokens): raise it to at least {seq_len}"
        )
    models = [to_device(build_model(c.model_config(t)), device) for c, t in zip(configs, tasks)]
    states = [native_state(m) for m in models]
    paths = native_names(models[0].original_model)
    trainable = {_native_name(paths, name) for name, _ in models[0].original_model.named_parameters()}
    params = {
        name: torch.stack([s[name].detach() for s in states]).requires_grad_(name in trainable) for name in states[0]
    }
    optimizer = torch.optim.AdamW(
        [p for p in params.values() if p.requires_grad], lr=c0.lr, weight_decay=c0.weight_decay
    )
    gens = [_generator(device, c.seed) for c in configs]
    eval_batch = max(1, c0.eval_tokens // seq_len)
    evaluators = [
        Evaluator(
            t, m, t.sample(eval_batch, _generator(device, 1_000_003 * c.data_seed + 7)), row_entropy=c.row_entropy
        )
        for c, t, m in zip(configs, tasks, models)
    ]
    masks = torch.stack([t.loss_mask[:-1] for t in tasks]).to(device)  # [E, query_pos]
    cfg = models[0].cfg
    shape = dict(
        n_layers=c0.n_layers, n_heads=c0.n_heads, d_head=c0.d_head, eps=float(getattr(cfg, "eps", 1e-5)), d_mlp=c0.d_mlp
    )

    rows: list[list[dict]] = [[] for _ in configs]
    last = [torch.full((len(configs),), float("nan"))]  # per-member training loss of the last update
    E = len(configs)
    lr_at = warmup_constant(c0.lr, c0.warmup_steps)
    weights = masks.unsqueeze(1).float()
    if state_every and state_every % c0.eval_every:
        raise ValueError(f"state_every={state_every} must be a multiple of eval_every={c0.eval_every}")
    start_step = 0
    kept = find_state(state_dir)
    if kept is not None:  # an ensemble that stopped half-way: continue from its state
        start_step = _load_ensemble_state(kept, params, optimizer, gens, configs)
        rows = json.loads((kept / STATE_ROWS).read_text())
        start -= rows[0][-1]["elapsed_s"] if rows[0] else 0.0
    bar = tqdm(total=c0.steps, initial=start_step, disable=not progress, desc=f"ensemble of {E}")

    def at_step(step: int) -> None:
        if step == start_step and kept is not None:
            return  # measured and kept before the stop
        if step % c0.eval_every == 0 or step == c0.steps:
            _unstack(params, states)
            for e, (model, evaluator) in enumerate(zip(models, evaluators)):
                model.eval()
                row = {
                    "step": step,
                    "tokens": step * batch_size * seq_len,
                    "lr": lr_at(step),
                    "beta": 0.0,
                    "train_loss": last[0][e].item(),
                    **evaluator(),
                }
                row["elapsed_s"] = time.perf_counter() - start
                rows[e].append(row)
                model.train()
            if on_eval is not None:
                on_eval([member[-1] for member in rows])
        if state_dir is not None and state_every and 0 < step < c0.steps and step % state_every == 0:
            keep_state(
                state_dir, lambda folder: _save_ensemble_state(folder, params, optimizer, gens, configs, step), rows
            )

    def loss_fn(_, tokens: Tensor, step: int) -> Tensor:
        # the summed member losses: each member's parameters get exactly its own gradient
        logits = ensemble_forward(params, tokens, **shape)
        per_pos = F.cross_entropy(
            logits[:, :, :-1].flatten(0, 2).float(), tokens[:, :, 1:].flatten(), reduction="none"
        ).view(E, batch_size, -1)
        losses = (per_pos * weights).sum((1, 2)) / (weights.sum((1, 2)) * batch_size)
        last[0] = losses.detach().cpu()
        return losses.sum()

    try:
        train_loop(
            None,
            optimizer,
            start=start_step,
            stop=c0.steps,
            batch_at=lambda step: torch.stack([t.sample(batch_size, g) for t, g in zip(tasks, gens)]),
            loss_fn=loss_fn,
            lr_at=lr_at,
            at_step=at_step,
            after_step=lambda step, loss: bar.update(1),
        )
    finally:
        bar.close()

    wall = (time.perf_counter() - start) / E
    results = []
    for config, task, model, member_rows, out_dir in zip(configs, tasks, models, rows, out_dirs):
        metrics = pd.DataFrame(member_rows)
        summary = summarize(config, task, metrics, count_parameters(model), wall)
        if out_dir is not None:
            out_path = Path(out_dir)
            atomic_to_parquet(metrics, out_path / "metrics.parquet")
            atomic_write_text(out_path / "summary.json", json.dumps(summary, indent=2) + "\n")
            write_provenance(
                out_path,
                make_provenance("synthetic.ensemble.train_ensemble", {"config": config, "members": len(configs)}),
            )
        results.append(TrainResult(config=config, summary=summary, metrics=metrics, model=model, task=task))
    return results


def _save_ensemble_state(
    folder: Path, params: dict[str, Tensor], optimizer, gens: list, configs: list, step: int
) -> None:
    """Stacked weights (safetensors), optimizer and every member's batch generator (the training
    loop's state format) and the members' configs, after ``step`` updates."""
    from safetensors.torch import save_file

    from interp.core.train_loop import save_state, warmup_constant

    folder.mkdir(parents=True)
    save_file({k: v.detach().contiguous() for k, v in params.items()}, str(folder / "ensemble.safetensors"))
    c0 = configs[0]
    save_state(
        folder,
        optimizer,
        step,
        lr_next=warmup_constant(c0.lr, c0.warmup_steps)(step),
        extra={"configs": [json.loads(config_json(c)) for c in configs]},
        tensors={f"train_generator_{e}": g.get_state() for e, g in enumerate(gens)},
    )


@torch.no_grad()
def _load_ensemble_state(folder: Path, params: dict[str, Tensor], optimizer, gens: list, configs: list) -> int:
    """Restore what :func:`_save_ensemble_state` wrote; returns its step.

    Raises:
        ValueError: the state was kept for other configs.
    """
    from safetensors.torch import load_file

    from interp.core.train_loop import load_state

    kept = json.loads((folder / "trainer_state.json").read_text()).get("trainer", {}).get("configs")
    if kept != [json.loads(config_json(c)) for c in configs]:
        raise ValueError(f"{folder} holds the state of other configs: remove it to start the ensemble afresh")
    step, _, tensors = load_state(folder, optimizer)
    for name, value in load_file(str(folder / "ensemble.safetensors")).items():
        params[name].copy_(value)
    for e, g in enumerate(gens):
        g.set_state(tensors[f"train_generator_{e}"])
    return step


@torch.no_grad()
def _unstack(params: dict[str, Tensor], states: list[dict[str, Tensor]]) -> None:
    """Copy each member's slice of the stacked weights into its model."""
    for name, stacked in params.items():
        for e, state in enumerate(states):
            state[name].copy_(stacked[e])
