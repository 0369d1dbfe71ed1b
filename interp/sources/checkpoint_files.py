"""A run saved as one file per step: PyTorch Lightning ``.ckpt``, nanoGPT ``.pt``, a plain state dict.

Many training loops save each checkpoint as a single file rather than a Hugging Face folder:

=========================  ===============================================================================
PyTorch Lightning          ``epoch=0-step=500.ckpt``: ``{"state_dict": {"model.<hf key>": tensor}, "global_step":
                           500, "epoch": 0, "hyper_parameters": {...}, "optimizer_states": [...], ...}``
                           (Lightning's checkpointing docs, "Contents of a checkpoint")
nanoGPT (Karpathy)         ``ckpt.pt`` (one per run; ``ckpt_500.pt`` when kept per step): ``{"model": state dict,
                           "iter_num": 500, "model_args": {"n_layer", "n_head", "n_embd", "block_size",
                           "bias", "vocab_size", "dropout"}, "optimizer": ..., "config": ...}``
a plain state dict         ``torch.save(model.state_dict(), "step500.pt")``, ``.bin``, or
                           ``safetensors.torch.save_file(...)``; also ``{"model_state_dict": ...}``
=========================  ===============================================================================

:func:`find_checkpoint_files` reads such a folder: the step of each file comes from the file's own
record (``global_step``, ``iter_num``, ``step``), else from its name (``--step-pattern`` on the
file name without its suffix, or one of :data:`FILE_LAYOUTS`); ``--step-pattern`` given wins over
the record. The model's config is given once: ``--config`` (a ``config.json`` or a folder holding
one), else the run folder's ``config.json``, else what the file records (Lightning
``hyper_parameters`` naming a transformers config: a config dict with ``model_type``, or a path to
a ``config.json`` or its folder; nanoGPT's ``model_args``, read as the GPT-2 they are).

Each file is converted once into a Hugging Face folder (``config.json`` + ``model.safetensors``)
under ``$EMERGENCE_LENS_CACHE/converted/`` (keyed by the file's path, size and modification time,
and the config), so every other part of the toolkit (digests, duplicate and tensor checks, the
weight swap) reads it as any checkpoint folder. The digest is then the converted weights'
(identical weights saved at two steps are found as duplicates although the files' other records
differ). Key names are mapped by :data:`KEY_PREFIXES` (a trainer's wrapping prefixes), and GPT-2
weights stored as ``nn.Linear`` (nanoGPT: ``c_attn.weight`` of shape ``(3 * n_embd, n_embd)``) are
transposed into transformers' ``Conv1D`` layout; biases a ``bias=False`` nanoGPT does not have are
zeros (the same function). The nanoGPT mapping is checked against nanoGPT's own forward pass in
tests/interp/sources/test_checkpoint_files.py (logits equal to 1e-5).

Safety: pickled files load with ``torch.load(weights_only=True)`` (tensors and plain containers
only); a file that needs full unpickling (a class of the trainer's in its hyperparameters) is
refused in one line unless ``allow_pickle`` (``--allow-pickle``) is given for a run one trusts.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import os
import pickle
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from interp.sources.layouts import LAYOUTS, StepPattern, check_step_pattern

__all__ = [
    "CHECKPOINT_SUFFIXES",
    "FILE_LAYOUTS",
    "KEY_PREFIXES",
    "CheckpointFiles",
    "checkpoint_file_candidates",
    "find_checkpoint_files",
    "map_state_dict",
    "nanogpt_config",
]

#: File suffixes read as single-file checkpoints (``.safetensors`` is never unpickled).
CHECKPOINT_SUFFIXES = (".ckpt", ".pt", ".pth", ".bin", ".safetensors")

#: Files of a run folder that are never model checkpoints (optimizer, scheduler, RNG and
#: trainer-argument files transformers' ``Trainer`` and others write beside the weights).
NOT_CHECKPOINT_FILES = re.compile(r"(optimizer|scheduler|rng_state|training_args|scaler)([._-].*)?", re.IGNORECASE)

#: File-name conventions (the name without its suffix) recognised without being told, tried in
#: order when a file records no step: Lightning's default ``epoch={E}-step={N}``, nanoGPT's
#: ``ckpt_{N}`` (when kept per step), then the folder conventions of :data:`LAYOUTS`.
FILE_LAYOUTS: tuple[str, ...] = ("epoch={E}-step={N}", "ckpt_{N}", *LAYOUTS)

#: Keys of a checkpoint dict that hold the step (optimizer steps), first present wins:
#: Lightning's ``global_step``, nanoGPT's ``iter_num``, a hand-written ``step``.
STEP_KEYS = ("global_step", "iter_num", "step")

#: Keys of a checkpoint dict that hold the model's state dict, first present wins.
STATE_KEYS = ("state_dict", "model", "model_state_dict")

#: Prefixes a trainer puts before the model's own parameter names, stripped while that makes
#: more names the model's: (prefix, who writes it). Tested in tests/interp/sources/test_checkpoint_files.py.
KEY_PREFIXES: tuple[tuple[str, str], ...] = (
    ("model.", "a LightningModule holding the transformers model as self.model"),
    ("_orig_mod.", "torch.compile (nanoGPT's train.py with compile=True)"),
    ("module.", "DistributedDataParallel / DataParallel"),
)

#: Lightning ``hyper_parameters`` keys that may name a transformers config (a dict with
#: ``model_type``, a ``PretrainedConfig``, or a path to a config.json or a folder holding one).
HPARAM_CONFIG_KEYS = ("config", "model_config", "hf_config", "config_path", "model_name_or_path")

#: Bumped when the conversion changes, so that folders converted before are not reused.
CONVERSION_VERSION = 1

#: GPT-2 weights that transformers stores as ``Conv1D`` (in, out) and nanoGPT as ``nn.Linear`` (out, in).
_GPT2_CONV1D = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")


class CheckpointFileError(ValueError):
    """A single-file checkpoint (Lightning ``.ckpt``, nanoGPT ``.pt``, a state dict) that cannot be
    read or converted: truncated, not a checkpoint dict or state dict, or tensors whose names do
    not match the model its config describes (the message names the file and the tensors). In a
    run folder the step is marked ``corrupt`` in ``checkpoints.csv`` and left out of the search.

    Fix: re-save that step's file (``trainer.save_checkpoint``, ``torch.save``), or give the
    config the weights were trained with (``--config PATH``).
    """


class PickleRefused(CheckpointFileError):
    """A pickled checkpoint file that holds more than tensors and plain containers (a class of the
    trainer's, e.g. a ``transformers`` config object in Lightning's hyperparameters): torch's
    weights-only unpickler refuses it, and the run folder is refused in one line naming the file.

    Fix: for a run you trust, give ``--allow-pickle`` (``allow_pickle=True``: unpickling can run
    code); or re-save the checkpoints with plain hyperparameters (a config dict).
    """


@dataclass
class CheckpointRecord:
    """What one checkpoint file holds: its state dict, the step and config it records, its kind."""

    state: dict[str, torch.Tensor]
    step: int | None
    config: dict | None
    kind: str  # "lightning", "nanogpt", "state dict"


def checkpoint_file_candidates(root: Path) -> list[Path]:
    """The files of ``root`` that may be single-file checkpoints (:data:`CHECKPOINT_SUFFIXES`,
    optimizer/scheduler/RNG files left out), sorted by name."""
    return sorted(
        p
        for p in root.iterdir()
        if p.is_file()
        and p.suffix in CHECKPOINT_SUFFIXES
        and not p.name.startswith(".")
        and not NOT_CHECKPOINT_FILES.fullmatch(p.name.split(".")[0])
    )


def _torch_load(path: Path, allow_pickle: bool) -> Any:
    """``torch.load`` on the CPU, weights only unless ``allow_pickle`` (memory-mapped when the file
    is in torch's zip format)."""
    try:
        try:
            return torch.load(path, map_location="cpu", weights_only=True, mmap=True)
        except RuntimeError as err:
            if "mmap" not in str(err):  # an old (non-zip) file cannot be memory-mapped
                raise
            return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:
        if allow_pickle:
            return torch.load(path, map_location="cpu", weights_only=False)
        found = re.search(r"GLOBAL ([\w.]+)", str(err))
        what = f"it holds {found.group(1)}, not only tensors" if found else str(err).splitlines()[0][:120]
        raise PickleRefused(
            f"{path.name}: refused by torch's weights-only unpickler ({what}); unpickling can run code: "
            "give --allow-pickle (allow_pickle=True) only for a run you trust"
        ) from None
    except Exception as err:  # a truncated or overwritten file
        raise CheckpointFileError(f"{path.name}: not readable ({type(err).__name__}: {_first_line(err)})") from None


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0][:160] if text else "cut short"


def _is_state_dict(value: Any) -> bool:
    return isinstance(value, dict) and bool(value) and all(isinstance(v, torch.Tensor) for v in value.values())


def read_checkpoint(path: Path, allow_pickle: bool = False) -> CheckpointRecord:
    """Read one single-file checkpoint.

    Args:
        path: a ``.ckpt``, ``.pt``, ``.pth``, ``.bin`` or ``.safetensors`` file.
        allow_pickle: unpickle what torch's weights-only unpickler refuses (can run code).

    Returns:
        its state dict (tensors on the CPU, memory-mapped where the format allows), the step it
        records (None when none) and the config it records (Lightning ``hyper_parameters``
        naming one, nanoGPT ``model_args`` as GPT-2; None when none).

    Raises:
        PickleRefused: the file needs full unpickling and ``allow_pickle`` is off.
        CheckpointFileError: the file cannot be read (truncated, not a checkpoint) or holds no
            state dict.
    """
    if path.suffix == ".safetensors":
        from safetensors.torch import load_file

        try:
            return CheckpointRecord(load_file(path), None, None, "state dict")
        except Exception as err:
            raise CheckpointFileError(f"{path.name}: not readable ({type(err).__name__}: {_first_line(err)})") from None
    data = _torch_load(path, allow_pickle)
    if _is_state_dict(data):
        return CheckpointRecord(data, None, None, "state dict")
    if not isinstance(data, dict):
        raise CheckpointFileError(f"{path.name}: holds a {type(data).__name__}, not a checkpoint dict or a state dict")
    state_key = next((k for k in STATE_KEYS if _is_state_dict(data.get(k))), None)
    if state_key is None:
        keys = ", ".join(sorted(map(str, data))[:8])
        raise CheckpointFileError(
            f"{path.name}: holds no state dict (keys: {keys}; read: {', '.join(STATE_KEYS)} or a dict of tensors)"
        )
    step = next((data[k] for k in STEP_KEYS if isinstance(data.get(k), int) and not isinstance(data[k], bool)), None)
    if "model_args" in data and isinstance(data["model_args"], dict):
        return CheckpointRecord(data[state_key], step, nanogpt_config(data["model_args"]), "nanogpt")
    kind = "lightning" if "pytorch-lightning_version" in data or state_key == "state_dict" else "state dict"
    return CheckpointRecord(data[state_key], step, _hparams_config(data.get("hyper_parameters")), kind)


def _hparams_config(hparams: Any) -> dict | None:
    """The transformers config a Lightning module's ``hyper_parameters`` name, or None."""
    if not isinstance(hparams, dict):
        return None
    for key in HPARAM_CONFIG_KEYS:
        value = hparams.get(key)
        if isinstance(value, dict) and "model_type" in value:
            return dict(value)
        to_dict = getattr(value, "to_dict", None)
        if callable(to_dict) and hasattr(value, "model_type"):  # a PretrainedConfig (allow_pickle)
            return dict(to_dict())
        if isinstance(value, (str, os.PathLike)):
            path = Path(value).expanduser()
            path = path / "config.json" if path.is_dir() else path
            if path.is_file() and path.suffix == ".json":
                return read_config_file(path)
    return None


def read_config_file(path: str | Path) -> dict:
    """A transformers ``config.json`` (or the folder holding one) as a dict.

    Raises:
        ValueError: the path is neither, the file is not JSON or has no ``model_type`` (one line).
    """
    path = Path(path).expanduser()
    file = path / "config.json" if path.is_dir() else path
    if not file.is_file():
        raise ValueError(f"config {str(path)!r} is not a config.json file or a folder holding one")
    try:
        raw = json.loads(file.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise ValueError(f"config {str(file)!r} is not readable JSON ({type(err).__name__})") from None
    if not isinstance(raw, dict) or "model_type" not in raw:
        raise ValueError(
            f"config {str(file)!r} has no model_type: expected a transformers config.json "
            "(model.config.save_pretrained(FOLDER))"
        )
    return raw


def nanogpt_config(model_args: dict) -> dict:
    """A transformers GPT-2 config for a nanoGPT model (``model_args`` of its checkpoint).

    nanoGPT's ``GPT`` is GPT-2's architecture (Karpathy, nanoGPT ``model.py``): learned positions,
    pre-LayerNorm blocks (eps 1e-5), exact-erf GELU (``nn.GELU()``: transformers' ``"gelu"``, not
    GPT-2's tanh ``"gelu_new"``), an MLP of ``4 * n_embd``, the unembedding tied to the embedding.

    Args:
        model_args: ``{"n_layer", "n_head", "n_embd", "block_size", "vocab_size", "bias", "dropout"}``.

    Raises:
        CheckpointFileError: a key is missing or not a positive integer.
    """
    need = ("n_layer", "n_head", "n_embd", "block_size", "vocab_size")
    bad = [k for k in need if not isinstance(model_args.get(k), int) or model_args[k] <= 0]
    if bad:
        raise CheckpointFileError(f"nanoGPT model_args lack positive integers for {', '.join(bad)}: {model_args!r}")
    vocab = model_args["vocab_size"]
    special = 50256 if vocab > 50256 else None
    return {
        "model_type": "gpt2",
        "architectures": ["GPT2LMHeadModel"],
        "n_layer": model_args["n_layer"],
        "n_head": model_args["n_head"],
        "n_embd": model_args["n_embd"],
        "n_positions": model_args["block_size"],
        "vocab_size": vocab,
        "activation_function": "gelu",
        "layer_norm_epsilon": 1e-5,
        "resid_pdrop": 0.0,
        "embd_pdrop": 0.0,
        "attn_pdrop": 0.0,
        "tie_word_embeddings": True,
        "bos_token_id": special,
        "eos_token_id": special,
    }


#: config (canonical JSON) -> :func:`_skeleton` (one meta-device build per config and process)
_SKELETONS: dict[str, tuple[dict[str, tuple[int, ...]], dict[str, str]]] = {}


def _skeleton(config: dict) -> tuple[dict[str, tuple[int, ...]], dict[str, str]]:
    """(parameter names -> shapes, tied target -> source) of the model ``config`` describes,
    built on the meta device (no memory, no initialisation), once per config."""
    from transformers import AutoConfig, AutoModelForCausalLM

    key = json.dumps(config, sort_keys=True, default=str)
    if key not in _SKELETONS:
        hf_config = AutoConfig.for_model(**config)
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(hf_config)
        shapes = {k: tuple(v.shape) for k, v in model.state_dict().items()}
        _SKELETONS[key] = shapes, dict(getattr(model, "all_tied_weights_keys", None) or {})
    return _SKELETONS[key]


def map_state_dict(
    state: dict[str, torch.Tensor], config: dict
) -> tuple[dict[str, torch.Tensor], list[str], list[str]]:
    """Map a trainer's state dict onto the transformers model ``config`` describes.

    Prefixes of :data:`KEY_PREFIXES` are stripped while that makes more names the model's (keys
    without the stripped prefix belong to the trainer's other modules and are left out); GPT-2
    weights in ``nn.Linear`` layout are transposed (see the module docstring); nanoGPT's causal
    mask buffers (``attn.bias`` of shape ``(1, 1, T, T)``) are dropped, biases it lacks
    (``bias=False``) are zeros; a tied unembedding stored beside its embedding is left to the tie.

    Args:
        state: name -> tensor, as the file holds it.
        config: the model's transformers config (a dict with ``model_type``).

    Returns:
        (the mapped state dict, the prefixes stripped in order, notes on what else was done).
    """
    shapes, tied = _skeleton(config)
    expected = set(shapes)
    notes: list[str] = []
    # every chain of up to three table prefixes (a compiled model inside DDP inside a LightningModule):
    # the chain that makes the most names the model's wins, the shortest on a tie
    chains = [()] + [c for n in (1, 2, 3) for c in itertools.product([p for p, _ in KEY_PREFIXES], repeat=n)]
    best_hits, stripped = sum(k in expected for k in state), []
    for chain in chains[1:]:
        joined = "".join(chain)
        hits = sum(k[len(joined) :] in expected for k in state if k.startswith(joined))
        if hits > best_hits:
            best_hits, stripped = hits, list(chain)
    if stripped:
        joined = "".join(stripped)
        kept = {k[len(joined) :]: v for k, v in state.items() if k.startswith(joined)}
        if len(kept) < len(state):
            notes.append(f"{len(state) - len(kept)} tensors outside {joined!r} left out")
        state = kept
    state = dict(state)
    if config.get("model_type") == "gpt2":
        n_embd = config.get("n_embd") or config.get("hidden_size")
        mask = [k for k, v in state.items() if k.endswith("attn.bias") and v.dim() == 4]
        for k in mask + [k for k in state if k.endswith("attn.masked_bias")]:
            del state[k]
        attn = next((v for k, v in state.items() if k.endswith(_GPT2_CONV1D[0])), None)
        if attn is not None and n_embd and tuple(attn.shape) == (3 * n_embd, n_embd):
            for k in [k for k in state if k.endswith(_GPT2_CONV1D)]:
                state[k] = state[k].t()
            notes.append("nn.Linear weights transposed to Conv1D")
        zero = [k for k in expected - set(state) if k.endswith(".bias") and k[: -len("bias")] + "weight" in state]
        if zero and not any(k.endswith(".bias") and k in expected for k in state):  # nanoGPT bias=False
            for k in zero:
                state[k] = torch.zeros(shapes[k])
            notes.append(f"{len(zero)} absent biases (bias=False) set to zero")
    for target, source in tied.items():
        if target in state and source in state:
            a, b = state[target], state[source]
            if a.data_ptr() == b.data_ptr() or torch.equal(a, b):  # stored twice: the tie gives it
                del state[target]
    return state, stripped, notes


@dataclass
class CheckpointFiles:
    """A run folder of single-file checkpoints, each converted to a Hugging Face folder.

    Attributes:
        files: ``{step: checkpoint file}``, steps ascending.
        folders: ``{step: converted folder}`` (a folder that does not exist for a step whose
            file could not be converted).
        problems: ``{step: what is wrong}`` for the files that could not be read or converted.
        layout: how the steps were read (``"global_step in .ckpt files"``, a file pattern).
    """

    files: dict[int, Path]
    folders: dict[int, Path]
    problems: dict[int, str] = field(default_factory=dict)
    layout: str = ""


def _step_from_name(path: Path, patterns: list[StepPattern]) -> int | None:
    stem = path.name[: -len(path.suffix)]
    for pattern in patterns:
        step = pattern.step(stem)
        if step is not None:
            return step
    return None


def _cache_folder(path: Path, config: dict) -> Path:
    from interp.core.io import cache_root

    stat = path.stat()
    key = json.dumps(
        [str(path.resolve()), stat.st_size, stat.st_mtime_ns, config, CONVERSION_VERSION], sort_keys=True, default=str
    )
    return cache_root() / "converted" / hashlib.sha256(key.encode()).hexdigest()[:32]


def _convert(record: CheckpointRecord, config: dict, path: Path, target: Path) -> None:
    """Write ``record`` as a Hugging Face folder at ``target`` (atomically: a folder renamed into place).

    Raises:
        CheckpointFileError: the mapped names do not match the model (names listed).
    """
    from safetensors.torch import save_file
    from transformers import AutoConfig

    from interp.sources.tensor_check import tensor_problem

    state, stripped, notes = map_state_dict(record.state, config)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        AutoConfig.for_model(**config).save_pretrained(tmp)
        save_file({k: v.contiguous() for k, v in sorted(state.items())}, tmp / "model.safetensors", {"format": "pt"})
        problem = tensor_problem([tmp / "model.safetensors"])
        if problem is not None:
            how = f" after stripping {' then '.join(repr(p) for p in stripped)}" if stripped else ""
            raise CheckpointFileError(f"{path.name}{how}: {problem}")
        (tmp / "source.json").write_text(
            json.dumps({"file": str(path), "kind": record.kind, "stripped": stripped, "notes": notes}, indent=1)
        )
        with contextlib.suppress(OSError):  # converted meanwhile by another process: theirs is the same
            os.replace(tmp, target)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def find_checkpoint_files(
    root: Path,
    step_pattern: str | None = None,
    allow_pickle: bool = False,
    config: dict | None = None,
) -> CheckpointFiles:
    """Read a run folder of single-file checkpoints (see the module docstring), converting each once.

    Args:
        root: the run folder.
        step_pattern: how the files are named, without their suffix (``"epoch={E}-step={N}"``);
            it then wins over the steps the files record. None: each file's record, else
            :data:`FILE_LAYOUTS`.
        allow_pickle: unpickle files that hold more than tensors (can run code).
        config: the model's config for every file (``--config`` or the run's ``config.json``);
            None: each file's own record.

    Returns:
        :class:`CheckpointFiles`; a file that cannot be read or converted but whose name gives
        its step is kept with its problem (left out of the searches, ``checkpoints.csv``).

    Raises:
        ValueError: no candidate file; a file needs full unpickling without ``allow_pickle``; a
            file whose step neither its record nor its name gives; two files of one step; no
            config given and none recorded (each one line naming the file and what would be read).
    """
    candidates = checkpoint_file_candidates(root)
    if not candidates:
        raise ValueError(f"local suite {str(root)!r} has no checkpoint files ({', '.join(CHECKPOINT_SUFFIXES)})")
    patterns = [check_step_pattern(step_pattern)] if step_pattern else [check_step_pattern(t) for t in FILE_LAYOUTS]
    steps: dict[int, list[Path]] = {}
    records: dict[Path, CheckpointRecord | str] = {}
    how: set[str] = set()
    for path in candidates:
        named = _step_from_name(path, patterns)
        try:  # a safetensors file records no step or config: read when converted, not here
            record: CheckpointRecord | str = (
                CheckpointRecord({}, None, None, "state dict")
                if path.suffix == ".safetensors"
                else read_checkpoint(path, allow_pickle)
            )
            if isinstance(record, CheckpointRecord):
                record.state = {}  # the tensors are read again only for a file not converted yet
        except PickleRefused as err:
            raise ValueError(f"local suite {str(root)!r}: {err}") from None
        except CheckpointFileError as err:
            record = str(err)
        step = named if step_pattern or isinstance(record, str) or record.step is None else record.step
        if step is None and isinstance(record, str):
            raise ValueError(
                f"local suite {str(root)!r}: {record}, and its name follows none of "
                f"{', '.join(p.text for p in patterns)}: remove it or give the files' pattern with --step-pattern"
            )
        if step is None:
            raise ValueError(
                f"local suite {str(root)!r}: {path.name} records no step (read: {', '.join(STEP_KEYS)}) and its "
                f"name follows none of {', '.join(p.text for p in patterns)}; give the files' pattern with "
                "--step-pattern (step_pattern= in Python), e.g. 'model-{N}'"
            )
        how.add(
            "step from the file names"
            if step_pattern or isinstance(record, str) or record.step is None
            else "step from each file's record"
        )
        steps.setdefault(step, []).append(path)
        records[path] = record
    clashes = {s: ps for s, ps in steps.items() if len(ps) > 1}
    for step, paths in list(clashes.items()):  # Lightning's last.ckpt repeats the last step's file
        rest = [p for p in paths if not p.name.startswith("last")]
        if len(rest) == 1:
            steps[step] = rest
            del clashes[step]
    if clashes:
        step, paths = min(clashes.items())
        raise ValueError(
            f"local suite {str(root)!r}: files {', '.join(p.name for p in paths)} both hold step {step}; keep one"
        )
    run_config = config
    if run_config is None and not any(isinstance(r, CheckpointRecord) and r.config for r in records.values()):
        shown = ", ".join(p.name for p in candidates[:3]) + (
            f", ... ({len(candidates)} files)" if len(candidates) > 3 else ""
        )
        raise ValueError(
            f"local suite {str(root)!r}: its checkpoint files ({shown}) record no transformers config; give one: "
            "config.json in the run folder (model.config.save_pretrained(ROOT)) or --config PATH (config= in Python)"
        )
    files: dict[int, Path] = {}
    folders: dict[int, Path] = {}
    problems: dict[int, str] = {}
    for step in sorted(steps):
        (path,) = steps[step]
        record = records[path]
        files[step] = path
        if isinstance(record, str):
            problems[step] = record
            folders[step] = root / f".unreadable-{path.name}"
            continue
        model_config = run_config or record.config
        if model_config is None:
            problems[step] = f"{path.name}: records no transformers config and none is given (--config)"
            folders[step] = root / f".unreadable-{path.name}"
            continue
        target = _cache_folder(path, model_config)
        folders[step] = target
        if not (target / "model.safetensors").is_file():
            try:
                record = read_checkpoint(path, allow_pickle)
                _convert(record, model_config, path, target)
            except CheckpointFileError as err:
                problems[step] = str(err)
            except Exception as err:  # transformers cannot build the model the config names
                problems[step] = f"{path.name}: not convertible ({type(err).__name__}: {_first_line(err)})"
        records[path] = ""  # free the tensors
    suffixes = "/".join(sorted({p.suffix for p in files.values()}))
    layout = f"{suffixes} files ({'; '.join(sorted(how))})"
    return CheckpointFiles(files=files, folders=folders, problems=problems, layout=layout)
