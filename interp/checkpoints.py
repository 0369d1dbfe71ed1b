"""Checkpoint sources: one interface over a training run's checkpoints, on the hub or on disk.

A :class:`CheckpointSource` lists the training steps it holds, loads one step as a float32
TransformerLens 4.x ``TransformerBridge`` (``TransformerBridge.boot_transformers``), gives each
step's weight digest, and flags steps whose weights duplicate an earlier step's so that the
point-of-emergence search skips them. Two implementations:

* :class:`HubSource`: Pythia and PolyPythia on the Hugging Face hub
  (``EleutherAI/pythia-{14m,31m,70m,160m,410m}`` and ``-seed{1..9}``; the larger and deduped
  Pythia ids are accepted too). Each checkpoint is the branch ``step{N}`` of the 154-step
  schedule :data:`PYTHIA_STEPS` (Biderman et al. 2023, Pythia; van der Wal et al. 2025,
  PolyPythias). Files come through ``huggingface_hub.snapshot_download`` with
  ``revision="step{N}"`` and only the weight, config and tokenizer files, so the same code
  runs online and offline (``HF_HUB_OFFLINE=1`` resolves the revision from the cache's
  ``refs/``). The resolved commit sha is recorded per step. The repos' ``main`` branch is never
  used (it is often empty on the seed repos).
* :class:`LocalSuiteSource`: a folder with one Hugging Face checkpoint per step, loaded offline.

Local suite layout (what :mod:`interp.embedded` writes)::

    ROOT/suite.json      optional metadata: {"model_id": "...", "steps": [0, 1, 2, ...], ...}
    ROOT/tokenizer/      tokenizer.save_pretrained(...)
    ROOT/step{N}/        model.save_pretrained(...) with safetensors: config.json, model.safetensors

Steps come from ``suite.json``'s ``"steps"`` when given (each must have its folder), else from
the ``step*/`` folders. Without ``ROOT/tokenizer/`` the tokenizer is read from the first step
folder that has tokenizer files.

Digest: the sha256 hex of the weight file's bytes (for one file this equals the hub's LFS oid,
which is also the blob's name in the hub cache, so no hashing is needed there); for sharded
weights, the sha256 of the shards' sha256 hex digests, one per line, in file-name order.

Safety: only safetensors weights load unless ``allow_pickle=True`` (unpickling a ``.bin`` can run
code), and ``trust_remote_code`` stays off unless a hub source is told otherwise.

Memory: the bridge holds reference cycles, so a dropped bridge is only freed when Python's cycle
collector runs; loading checkpoints in a loop without a collection keeps every previous one
alive (resident memory grew ~190 MB per load of a 70m-shaped model, measured here). Each source
therefore holds one bridge at a time: before booting the next step it drops its reference to the
previous bridge, runs ``gc.collect()`` and returns freed heap to the OS (``malloc_trim`` on
glibc). A bridge the caller still holds stays valid (its weights never change under it).
"""

from __future__ import annotations

import bisect
import ctypes
import gc
import hashlib
import json
import logging
import re
import sys
from abc import ABC, abstractmethod
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Sequence

import torch

from interp.catalogue import POLYPYTHIA_SIZES, is_embedded_name, is_pythia_id, pythia_model_ids  # noqa: F401
from interp.devices import choose_device

if TYPE_CHECKING:  # the bridge and transformers are imported when first needed (slow imports)
    from transformer_lens.model_bridge import TransformerBridge
    from transformers import PreTrainedTokenizerBase

logger = logging.getLogger(__name__)

#: Pythia's 154 checkpoint steps: 0, the powers of two 1..512, then every 1000 steps to 143000
#: (Biderman et al. 2023, Pythia, section 2; the hub branches ``step{N}``).
PYTHIA_STEPS: tuple[int, ...] = (0,) + tuple(2**i for i in range(10)) + tuple(range(1000, 143001, 1000))

_STEP_NAME = re.compile(r"step(\d+)")
_SHA256_HEX = re.compile(r"[0-9a-f]{64}")

# Files fetched per step: weights are fetched separately so that pickle files are only ever
# downloaded when allowed and when no safetensors exist.
_SAFETENSORS_PATTERNS = ["*.safetensors", "*.safetensors.index.json"]
_PICKLE_PATTERNS = ["*.bin", "*.bin.index.json"]
_CONFIG_PATTERNS = ["config.json", "generation_config.json"]
_TOKENIZER_PATTERNS = [
    "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json",
    "vocab.json", "merges.txt", "tokenizer.model",
]
_VALID_HUB_IDS = (
    "a Pythia/PolyPythia hub id (EleutherAI/pythia-{14m,31m,70m,160m,410m}[-seed{1..9}] "
    "or EleutherAI/pythia-{70m,160m,410m,1b,1.4b,2.8b,6.9b,12b}[-deduped])"
)
_VALID_SPECS = f"{_VALID_HUB_IDS} or an existing local suite folder (ROOT/step{{N}}/ checkpoint folders)"


class CheckpointError(ValueError):
    """A step that the source does not hold; the message names the model, the step and the
    nearest available steps."""


def nearest_steps(step: int, available: Sequence[int]) -> list[int]:
    """The available steps just below and just above ``step`` (one or two of them, ascending).

    Args:
        step: a training step (optimizer steps).
        available: sorted ascending steps.
    """
    i = bisect.bisect_left(available, step)
    return [s for s in (available[i - 1] if i > 0 else None,
                        available[i] if i < len(available) else None) if s is not None and s != step]


def make_byte_tokenizer():
    """A fast tokenizer with one token per byte, token id = byte value (0..255), no merges.

    Built with the ``tokenizers`` library: a byte-level BPE whose vocabulary is GPT-2's
    reversible byte -> printable-character map (``transformers.convert_slow_tokenizer.
    bytes_to_unicode``), so ``tok(text)["input_ids"] == list(text.encode())``. Save it with
    ``save_pretrained`` and reload it from that folder before booting a bridge: an in-memory
    tokenizer breaks ``boot_transformers`` (KeyError 'name_or_path', ../shared/TRANSFORMERLENS.md).
    The bridge adds ``<|endoftext|>`` as id 256 when it boots (it needs an eos/pad token).

    Returns:
        a ``transformers.PreTrainedTokenizerFast`` with a 256-token vocabulary.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    vocab = {char: byte for byte, char in bytes_to_unicode().items()}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    return PreTrainedTokenizerFast(tokenizer_object=tok)


# ----------------------------------------------------------------------------- weight files


def _weight_files(folder: Path, allow_pickle: bool) -> list[Path]:
    """The weight files of one checkpoint folder: safetensors, else (if allowed) pickle."""
    safe = sorted(p for p in folder.glob("*.safetensors"))
    if safe or not allow_pickle:
        return safe
    return sorted(p for p in folder.glob("*.bin"))


def _sha256_of_file(path: Path) -> str:
    """sha256 hex of a file's bytes; a hub-cache blob is named by it already (LFS oid)."""
    if path.is_symlink():
        blob = path.resolve()
        if blob.parent.name == "blobs" and _SHA256_HEX.fullmatch(blob.name):
            return blob.name
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            digest.update(chunk)
    return digest.hexdigest()


def combine_digests(file_digests: Sequence[str]) -> str:
    """One checkpoint digest from its weight files' sha256 digests (in file-name order).

    One file: its own digest (the hub LFS oid). Several shards: sha256 of the digests, one per
    line, so it can be computed from hub metadata without downloading the shards.
    """
    if len(file_digests) == 1:
        return file_digests[0]
    return hashlib.sha256("".join(f"{d}\n" for d in file_digests).encode()).hexdigest()


def weights_digest(files: Sequence[Path]) -> str:
    """Digest of a checkpoint's weight files (see :func:`combine_digests`)."""
    return combine_digests([_sha256_of_file(p) for p in sorted(files, key=lambda p: p.name)])


def _malloc_trim() -> None:
    """Return freed heap pages to the OS (glibc only; elsewhere the collection is what matters)."""
    global _LIBC
    if _LIBC is None:
        try:
            _LIBC = ctypes.CDLL("libc.so.6") if sys.platform.startswith("linux") else False
        except OSError:
            _LIBC = False
    if _LIBC and hasattr(_LIBC, "malloc_trim"):
        _LIBC.malloc_trim(0)


_LIBC = None


def _release_memory() -> None:
    """Free dropped bridges now (they hold reference cycles) and hand freed heap to the OS.

    A full collection costs ~0.2-0.6 s per call (it scans every tracked object of the process).
    """
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    _malloc_trim()


@contextmanager
def quiet_hf_progress():
    """Silence transformers' per-file "Loading weights" / "Writing model shards" bars (one per
    checkpoint in a sweep), restoring the user's setting afterwards."""
    from transformers.utils import logging as hf_logging

    was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_enabled:
            hf_logging.enable_progress_bar()


def _default_device(device: str | torch.device | None) -> torch.device:
    if isinstance(device, torch.device):
        return device
    return torch.device(choose_device(device))


# ----------------------------------------------------------------------------- sources


@dataclass
class LoadedCheckpoint:
    """One loaded checkpoint.

    Attributes:
        model: the ``TransformerBridge``, float32, eval mode.
        step: training step (optimizer steps).
        digest: sha256 hex of the weights (see module docstring).
        revision: ``"step{N}"`` on the hub; the step folder's name locally.
        commit: resolved hub commit sha (``None`` locally).
    """

    model: TransformerBridge
    step: int
    digest: str
    revision: str
    commit: str | None


class CheckpointSource(ABC):
    """The checkpoints of one training run, by training step.

    Subclasses implement :meth:`available_steps`, :meth:`tokenizer`, :meth:`digest` and
    ``_resolve`` (step -> local folder); loading, duplicate detection and memory handling are
    shared. One bridge is held at a time (see module docstring, "Memory").
    """

    model_id: str
    allow_pickle: bool = False
    trust_remote_code: bool = False

    def __init__(self) -> None:
        self._bridge = None
        self._digests: dict[int, str] = {}

    # -- to implement
    @abstractmethod
    def available_steps(self) -> list[int]:
        """The steps this source holds, sorted ascending (optimizer steps)."""

    @abstractmethod
    def tokenizer(self) -> PreTrainedTokenizerBase:
        """The run's tokenizer (``PreTrainedTokenizerBase``), loaded from a directory."""

    @abstractmethod
    def _resolve(self, step: int) -> tuple[Path, str, str | None]:
        """(folder with config and weights, revision, commit) of an available step."""

    @abstractmethod
    def _tokenizer_dir(self, step: int, folder: Path | None = None) -> Path:
        """A directory the tokenizer loads from (``folder``: the step's resolved folder, if known)."""

    @abstractmethod
    def digest(self, step: int) -> str:
        """sha256 hex of ``step``'s weights, without booting a model.

        Raises:
            CheckpointError: ``step`` is not available.
        """

    # -- shared
    def _check_step(self, step: int) -> int:
        """Raise :class:`CheckpointError` unless ``step`` is available."""
        available = self.available_steps()
        try:
            valid = not isinstance(step, bool) and int(step) == step
        except (TypeError, ValueError):
            valid = False
        if not valid:
            span = f"{available[0]}..{available[-1]}" if available else "none"
            raise CheckpointError(f"{self.model_id}: step {step!r} is not an integer training step (available: {span})")
        step = int(step)
        if step not in available:
            near = nearest_steps(step, available)
            hint = f"nearest available steps: {', '.join(map(str, near))}" if near else "no steps are available"
            raise CheckpointError(
                f"{self.model_id} has no checkpoint at step {step}{self._missing_reason(step)}; {hint}"
            )
        return step

    def _missing_reason(self, step: int) -> str:
        return ""

    def load(self, step: int, device: str | torch.device | None = None) -> LoadedCheckpoint:
        """Load ``step`` as a float32 ``TransformerBridge`` in eval mode.

        The previous bridge this source booted is released first (see module docstring).

        Args:
            step: training step (optimizer steps); must be in :meth:`available_steps`.
            device: where the model goes; default ``cuda`` if available, else ``cpu``.

        Raises:
            CheckpointError: ``step`` is not available (names the nearest available steps).
            ValueError: the checkpoint has only pickle weights and ``allow_pickle`` is off, or
                the model has no attention heads (nothing to patch).
        """
        from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
        from transformer_lens.model_bridge import TransformerBridge

        step = self._check_step(step)
        folder, revision, commit = self._resolve(step)
        files = self._require_weights(folder, step)
        self._require_attention(folder, step)
        config = AutoConfig.from_pretrained(folder, trust_remote_code=self.trust_remote_code)
        digest = weights_digest(files)
        self._digests[step] = digest

        self.close()  # drop the previous bridge before allocating the next one
        device = _default_device(device)
        with quiet_hf_progress():
            hf_model = AutoModelForCausalLM.from_pretrained(
                folder, config=config, dtype=torch.float32, attn_implementation="eager",
                use_safetensors=None if self.allow_pickle else True,
                trust_remote_code=self.trust_remote_code,
            ).to(device)
        # A fresh tokenizer per boot: the bridge edits the one it gets (adds eos/pad tokens).
        tokenizer = AutoTokenizer.from_pretrained(self._tokenizer_dir(step, folder))
        bridge = TransformerBridge.boot_transformers(
            self._bridge_name(folder), hf_model=hf_model, tokenizer=tokenizer,
            dtype=torch.float32, device=device, trust_remote_code=self.trust_remote_code,
        )
        bridge.eval()
        if not any(name.endswith("attn.hook_pattern") for name in bridge.hook_dict):
            del bridge, hf_model
            _release_memory()
            raise ValueError(
                f"{self.model_id} step {step} ({config.model_type}) has no attention heads "
                f"(no blocks.*.attn.hook_pattern): attention-pattern patching needs a model with attention"
            )
        self._bridge = bridge
        return LoadedCheckpoint(model=bridge, step=step, digest=digest, revision=revision, commit=commit)

    def _bridge_name(self, folder: Path) -> str:
        return self.model_id

    def _require_weights(self, folder: Path, step: int) -> list[Path]:
        files = _weight_files(folder, self.allow_pickle)
        if files:
            return files
        pickles = sorted(p.name for p in folder.glob("*.bin"))
        if pickles:
            raise ValueError(
                f"{self.model_id} step {step} has only pickle weights ({', '.join(pickles)}); "
                f"pass allow_pickle=True to load them (unpickling can run code)"
            )
        raise ValueError(f"{self.model_id} step {step} has no weight files in {folder}")

    def _require_attention(self, folder: Path, step: int) -> None:
        # Read from config.json itself: transformers' config class divides by the head count and
        # would fail with a ZeroDivisionError. Models without these keys are checked after booting.
        config_file = folder / "config.json"
        if not config_file.is_file():
            raise ValueError(f"{self.model_id} step {step} has no config.json in {folder}")
        raw = json.loads(config_file.read_text())
        for key in ("num_attention_heads", "n_head"):
            if key in raw and (not isinstance(raw[key], int) or raw[key] <= 0):
                raise ValueError(
                    f"{self.model_id} step {step} has no attention heads ({key}={raw[key]}): "
                    f"attention-pattern patching needs at least one head"
                )

    def duplicate_steps(self, steps: Iterable[int] | None = None) -> dict[int, int]:
        """Steps whose weight digest equals an earlier step's: ``{step: earliest such step}``.

        Such steps carry no new information (e.g. pythia-2.8b serves its final weights on 86 of
        154 branches, ../shared/TRANSFORMERLENS.md), so the emergence search skips them.

        Args:
            steps: the steps to compare (default: all available steps).

        Raises:
            CheckpointError: one of ``steps`` is not available.
        """
        steps = self.available_steps() if steps is None else sorted({self._check_step(s) for s in steps})
        first: dict[str, int] = {}
        duplicates: dict[int, int] = {}
        for step in steps:
            digest = self.digest(step)
            if digest in first:
                duplicates[step] = first[digest]
            else:
                first[digest] = step
        return duplicates

    def searchable_steps(self) -> list[int]:
        """Available steps minus :meth:`duplicate_steps`, sorted ascending."""
        duplicates = self.duplicate_steps()
        return [s for s in self.available_steps() if s not in duplicates]

    def close(self) -> None:
        """Drop this source's bridge and free its memory now (a bridge the caller holds survives)."""
        self._bridge = None
        _release_memory()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.model_id!r})"


class HubSource(CheckpointSource):
    """Pythia / PolyPythia checkpoints on the Hugging Face hub, one branch ``step{N}`` per step.

    Online, the available steps are the repo's ``step{N}`` branches within ``steps`` (some seeds
    miss a few, e.g. pythia-410m-seed9 at step 40000); with ``HF_HUB_OFFLINE=1`` they are the
    revisions present in the cache (``refs/step{N}``). Files go to / come from the standard hub
    cache (``HF_HUB_CACHE``) unless ``cache_dir`` is given.

    Args:
        model_id: e.g. ``"EleutherAI/pythia-70m-seed3"``; see :func:`pythia_model_ids`.
        steps: the checkpoint schedule (default :data:`PYTHIA_STEPS`).
        cache_dir: hub cache folder (default: ``huggingface_hub.constants.HF_HUB_CACHE``).
        allow_pickle: also load ``.bin`` weights when a step has no safetensors.
        trust_remote_code: passed to transformers; off by default.
        allow_any_id: accept a repo that is not Pythia/PolyPythia but has ``step{N}`` branches.

    Raises:
        ValueError: unknown model id, or an empty / invalid schedule.
    """

    def __init__(self, model_id: str, steps: Sequence[int] = PYTHIA_STEPS, cache_dir: str | Path | None = None,
                 allow_pickle: bool = False, trust_remote_code: bool = False, allow_any_id: bool = False):
        super().__init__()
        if not isinstance(model_id, str) or not (is_pythia_id(model_id) or (allow_any_id and "/" in model_id)):
            raise ValueError(
                f"unknown model id {model_id!r}: expected {_VALID_HUB_IDS} "
                f"(or pass allow_any_id=True for another repo with step{{N}} branches)"
            )
        schedule = sorted({int(s) for s in steps})
        if not schedule or schedule[0] < 0 or any(int(s) != s for s in steps):
            raise ValueError(f"steps={list(steps)[:5]}...: need a non-empty list of non-negative integer steps")
        self.model_id = model_id
        self.steps = tuple(schedule)
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self.allow_pickle = allow_pickle
        self.trust_remote_code = trust_remote_code
        self._available: list[int] | None = None

    # -- hub plumbing
    @staticmethod
    def _offline() -> bool:
        from huggingface_hub import constants

        return bool(constants.is_offline_mode())

    def _repo_cache(self) -> Path:
        from huggingface_hub import constants
        from huggingface_hub.file_download import repo_folder_name

        root = self.cache_dir if self.cache_dir is not None else Path(constants.HF_HUB_CACHE)
        return root / repo_folder_name(repo_id=self.model_id, repo_type="model")

    def _cached_steps(self) -> set[int]:
        refs = self._repo_cache() / "refs"
        found = (_STEP_NAME.fullmatch(p.name) for p in refs.iterdir()) if refs.is_dir() else ()
        return {int(m.group(1)) for m in found if m}

    def available_steps(self) -> list[int]:
        """Steps of the schedule that the hub has (online) or the cache holds (offline)."""
        if self._available is None:
            self._available = sorted(set(self.steps) & self._hub_steps())
        return list(self._available)

    def _hub_steps(self) -> set[int]:
        if self._offline():
            return self._cached_steps()
        from huggingface_hub import HfApi

        try:
            refs = HfApi().list_repo_refs(self.model_id)
        except Exception as error:  # network trouble: fall back to the cache, as snapshot_download does
            cached = self._cached_steps()
            if not cached:
                raise ValueError(f"cannot list the step branches of {self.model_id}: {error}".splitlines()[0]) from error
            logger.warning("cannot reach the hub for %s (%s); using the %d cached steps",
                           self.model_id, type(error).__name__, len(cached))
            return cached
        return {int(m.group(1)) for b in refs.branches if (m := _STEP_NAME.fullmatch(b.name))}

    def _missing_reason(self, step: int) -> str:
        if step not in self.steps:
            return f" (not in its {len(self.steps)}-step schedule)"
        if self._offline():
            return " in the local hub cache (HF_HUB_OFFLINE=1)"
        return " (no branch step{} on the hub)".format(step)

    def _snapshot(self, step: int, patterns: list[str], local_only: bool = False) -> Path:
        from huggingface_hub import snapshot_download

        folder = snapshot_download(
            self.model_id, revision=f"step{step}", cache_dir=self.cache_dir,
            allow_patterns=patterns, local_files_only=local_only,
        )
        return Path(folder)

    def _resolve(self, step: int) -> tuple[Path, str, str | None]:
        folder = self._snapshot(step, _CONFIG_PATTERNS + _TOKENIZER_PATTERNS + _SAFETENSORS_PATTERNS)
        if self.allow_pickle and not _weight_files(folder, allow_pickle=False):
            folder = self._snapshot(step, _PICKLE_PATTERNS)
        return folder, f"step{step}", folder.name

    def _tokenizer_dir(self, step: int, folder: Path | None = None) -> Path:
        # The step's own snapshot (fetched with the weights) when it has tokenizer files; else the
        # last available step's (the final model's branch always carries its tokenizer).
        for candidate in (folder, None):
            if candidate is None:
                candidate = self._snapshot(step, _TOKENIZER_PATTERNS)
            if any((candidate / name).is_file() for name in ("tokenizer.json", "tokenizer_config.json")):
                return candidate
            step = self.available_steps()[-1]
        raise ValueError(f"{self.model_id}: no tokenizer files (tokenizer.json) at step{step}")

    def tokenizer(self) -> PreTrainedTokenizerBase:
        """The tokenizer, from the snapshot folder (tokenizer files only) of the first available step.

        Raises:
            CheckpointError: no step is available (offline: none in the cache).
        """
        from transformers import AutoTokenizer

        steps = self.available_steps()
        if not steps:
            where = "in the local hub cache (HF_HUB_OFFLINE=1)" if self._offline() else "on the hub"
            raise CheckpointError(f"{self.model_id} has no step{{N}} checkpoints {where}")
        return AutoTokenizer.from_pretrained(self._tokenizer_dir(steps[0]))

    def digest(self, step: int) -> str:
        """Weight digest of ``step``: from the hub cache when the weights are there (the blob name
        is the LFS sha256), else from hub metadata (LFS oids, no download) when online.

        Raises:
            CheckpointError: ``step`` is not available.
            ValueError: offline and the step's weights are not cached.
        """
        step = self._check_step(step)
        if step not in self._digests:
            self._digests[step] = self._cached_digest(step) or self._remote_digest(step)
        return self._digests[step]

    def _cached_digest(self, step: int) -> str | None:
        from huggingface_hub.errors import LocalEntryNotFoundError

        try:
            folder = self._snapshot(step, _SAFETENSORS_PATTERNS + _PICKLE_PATTERNS, local_only=True)
        except LocalEntryNotFoundError:
            return None
        if not _weight_files(folder, allow_pickle=True):
            return None
        return weights_digest(self._require_weights(folder, step))  # refuses pickle-only steps

    def _remote_digest(self, step: int) -> str:
        if self._offline():
            raise ValueError(
                f"{self.model_id} step {step}: weights are not in the hub cache {self._repo_cache()} "
                f"and HF_HUB_OFFLINE=1; load the step once online"
            )
        from huggingface_hub import HfApi, hf_hub_download

        api, revision = HfApi(), f"step{step}"
        kinds = [("model.safetensors", "model.safetensors.index.json")]
        if self.allow_pickle:
            kinds.append(("pytorch_model.bin", "pytorch_model.bin.index.json"))
        for single, index in kinds:
            info = {f.path: f for f in api.get_paths_info(self.model_id, [single, index], revision=revision)}
            if single in info and getattr(info[single], "lfs", None) is not None:
                return info[single].lfs.sha256
            if index in info:
                index_file = hf_hub_download(self.model_id, index, revision=revision, cache_dir=self.cache_dir)
                shards = sorted(set(json.loads(Path(index_file).read_text())["weight_map"].values()))
                shard_info = {f.path: f for f in api.get_paths_info(self.model_id, shards, revision=revision)}
                if all(getattr(shard_info.get(s), "lfs", None) is not None for s in shards):
                    return combine_digests([shard_info[s].lfs.sha256 for s in shards])
        # No LFS metadata (unusual): download the weights and hash them.
        folder, _, _ = self._resolve(step)
        return weights_digest(self._require_weights(folder, step))


class LocalSuiteSource(CheckpointSource):
    """A local checkpoint suite (layout in the module docstring), loaded offline.

    Args:
        root: the suite folder.
        model_id: a name for the suite (default: ``suite.json``'s ``model_id``, else the folder name).
        allow_pickle: also load ``.bin`` weights when a step has no safetensors.

    Raises:
        ValueError: ``root`` is not a folder, holds no ``step{N}/`` folders, or ``suite.json``
            lists a step whose folder is missing.
    """

    def __init__(self, root: str | Path, model_id: str | None = None, allow_pickle: bool = False):
        super().__init__()
        self.root = Path(root)
        if not self.root.is_dir():
            raise ValueError(f"local suite {str(self.root)!r} is not a folder; expected ROOT/step{{N}}/ checkpoint folders")
        meta_file = self.root / "suite.json"
        self.metadata: dict = json.loads(meta_file.read_text()) if meta_file.is_file() else {}
        folders = {int(m.group(1)): p for p in self.root.iterdir()
                   if p.is_dir() and (m := _STEP_NAME.fullmatch(p.name))}
        if "steps" in self.metadata:
            declared = sorted(int(s) for s in self.metadata["steps"])
            missing = [s for s in declared if s not in folders]
            if missing:
                raise ValueError(f"{meta_file} lists steps {missing[:5]} but their step{{N}}/ folders are missing")
            folders = {s: folders[s] for s in declared}
        if not folders:
            raise ValueError(f"local suite {str(self.root)!r} has no step{{N}}/ checkpoint folders")
        self._folders = dict(sorted(folders.items()))
        self.model_id = model_id or self.metadata.get("model_id") or self.root.name
        self.allow_pickle = allow_pickle
        self.trust_remote_code = False

    def available_steps(self) -> list[int]:
        """The suite's steps, sorted ascending."""
        return list(self._folders)

    def _resolve(self, step: int) -> tuple[Path, str, str | None]:
        folder = self._folders[step]
        return folder, folder.name, None

    def _bridge_name(self, folder: Path) -> str:
        return str(folder)  # a local path: the bridge never looks it up on the hub

    def _tokenizer_dir(self, step: int, folder: Path | None = None) -> Path:
        own = self.root / "tokenizer"
        if own.is_dir():
            return own
        for folder in [self._folders[step], *self._folders.values()]:
            if any((folder / name).is_file() for name in _TOKENIZER_PATTERNS):
                return folder
        raise ValueError(f"local suite {str(self.root)!r} has no tokenizer: expected ROOT/tokenizer/ (tokenizer.save_pretrained)")

    def tokenizer(self) -> PreTrainedTokenizerBase:
        """The suite's tokenizer, from ``ROOT/tokenizer/``."""
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(self._tokenizer_dir(self.available_steps()[0]))

    def digest(self, step: int) -> str:
        """sha256 of ``step``'s weight file bytes (hashed once, then remembered).

        Raises:
            CheckpointError: ``step`` is not available.
            ValueError: the step has no (allowed) weight files.
        """
        step = self._check_step(step)
        if step not in self._digests:
            self._digests[step] = weights_digest(self._require_weights(self._folders[step], step))
        return self._digests[step]


def open_source(spec: str | Path, **kwargs) -> CheckpointSource:
    """Open a checkpoint source: an existing folder -> :class:`LocalSuiteSource`; a Pythia or
    PolyPythia hub id -> :class:`HubSource` (``allow_any_id=True`` accepts any ``org/name``).

    Args:
        spec: a hub id or a local suite folder.
        **kwargs: passed to the source's constructor; for a local suite only ``model_id`` and
            ``allow_pickle`` apply (hub-only options such as ``cache_dir`` are ignored there).

    An embedded run name (``embedded/<run>``, ``embedded-quick/<run>``) opens that run of the
    embedded suite (:func:`interp.sources.open_sources`, trained on first use).

    Raises:
        ValueError: ``spec`` is neither (one line listing the valid forms), or names a whole
            embedded suite (use :func:`interp.sources.open_sources` for several runs).
    """
    if isinstance(spec, str) and is_embedded_name(spec):
        from interp.sources import check_one_run, open_sources

        check_one_run(spec, "open_source")  # before any training
        return open_sources([spec])[0]
    path = Path(spec)
    if path.is_dir():
        return LocalSuiteSource(path, **{k: v for k, v in kwargs.items() if k in ("model_id", "allow_pickle")})
    text = str(spec)
    if is_pythia_id(text) or (kwargs.get("allow_any_id") and "/" in text):
        return HubSource(text, **kwargs)
    raise ValueError(f"unknown checkpoint source {text!r}: expected {_VALID_SPECS}")
