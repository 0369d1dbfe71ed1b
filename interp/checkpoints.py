"""Checkpoint sources: one interface over a training run's checkpoints, on the hub or on disk.

A :class:`CheckpointSource` lists the training steps it holds, loads one step as a float32
TransformerLens 4.x ``TransformerBridge`` (``TransformerBridge.boot_transformers``), gives each
step's weight digest, and flags steps whose weights duplicate an earlier step's so that the
point-of-emergence search skips them. Two implementations:

* :class:`HubSource`: any hub repository whose branches name training steps (see
  :mod:`interp.families` for the revision-name grammar and the known families). Pythia and
  PolyPythia (``EleutherAI/pythia-{14m,31m,70m,160m,410m}`` and ``-seed{1..9}``; the larger and
  deduped Pythia ids too) keep the 154-step schedule :data:`PYTHIA_STEPS` (Biderman et al. 2023,
  Pythia; van der Wal et al. 2025, PolyPythias) and their ``step{N}`` branches; OLMo's
  ``step{N}-tokens{M}B`` and OLMo-2's ``stage{k}[-ingredient{j}]-step{N}-tokens{M}B`` branches
  give the schedule of one series (default: the series with the most branches). Files come
  through ``huggingface_hub.snapshot_download`` with the branch as ``revision`` and only the
  weight, config and tokenizer files, so the same code runs online (branches from
  ``list_repo_refs``) and offline (``HF_HUB_OFFLINE=1``: the cache's ``refs/``). The resolved
  commit sha is recorded per step. The ``main`` branch is only read for its weight digest (the
  final model's, when it has weights; it is empty on the PolyPythia seed repos).
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
weights, the sha256 of the shards' sha256 hex digests, one per line, in file-name order. The
per-shard digests are kept too (:meth:`CheckpointSource.file_digests`).

Hazards (reported by :func:`checkpoint_table` and :func:`hazard_lines`, one row per step):

* duplicates: identical weights at two steps mean at most one of their labels is right (the hub
  served pythia-2.8b's final weights on 86 of its 154 branches). Every step of such a group is
  excluded from the search unless one is known to be right: the final step, when its digest
  equals the final model's (the hub's ``main`` branch; ``suite.json``'s ``final_digest`` locally);
* shared shards and corrupt files (:mod:`interp.checkpoint_integrity`): a step whose weight shard
  is byte-identical to another step's while its other shards differ (``partial-duplicate``), or
  whose weight file is truncated or has its header overwritten (``corrupt``; loading it raises
  :class:`CorruptCheckpointError`), is left out of the search and reported;
* missing steps: steps of the schedule with no branch (Pythia's 154 steps; elsewhere the regular
  grid the listed steps follow, :func:`interp.families.regular_grid`), or not in the cache offline;
* the listing: ``hub``, or the cache (``HF_HUB_OFFLINE=1``, or the hub could not be reached).

Tokenizer: every load compares the step's tokenizer (vocabulary, merges, special tokens) with the
first one this source handed out; a mismatch raises :class:`TokenizerMismatchError` naming both
steps, since the prompts of one analysis are tokenised once.

Safety: only safetensors weights load unless ``allow_pickle=True`` (unpickling a ``.bin`` can run
code), and ``trust_remote_code`` stays off unless a hub source is told otherwise.

Memory: the bridge holds reference cycles, so a dropped bridge is only freed when Python's cycle
collector runs; loading checkpoints in a loop without a collection keeps every previous one
alive (resident memory grew ~190 MB per load of a 70m-shaped model, measured here). Each source
therefore holds one bridge at a time: before booting the next step it drops its reference to the
previous bridge, and once 32 MiB of weights were dropped since the last collection (at every load
of a model that size or larger) runs ``gc.collect()`` and returns freed heap to the OS
(``malloc_trim`` on glibc); :meth:`CheckpointSource.close` always does. A bridge the caller
still holds stays valid (its weights never change under it), unless the source's
``swap_weights`` is on: then checkpoints of one architecture are switched inside the one resident
bridge (:mod:`interp.weight_swap`, what the main job does), the next checkpoint can be read ahead
on a background thread (:meth:`CheckpointSource.prefetch`), and a bridge handed out takes the
weights of the next step loaded; hold two checkpoints with two sources.
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
from collections.abc import Iterable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import torch

from interp.catalogue import POLYPYTHIA_SIZES, is_embedded_name, is_hub_id, is_pythia_id, pythia_model_ids  # noqa: F401
from interp.devices import choose_device
from interp.families import RevisionParser, Schedule, build_schedule, family_of, regular_grid
from interp.training_state import OPTIMIZER_FILE

if TYPE_CHECKING:  # the bridge and transformers are imported when first needed (slow imports)
    import pandas as pd
    from transformer_lens.model_bridge import TransformerBridge
    from transformers import PreTrainedTokenizerBase

    from interp.weight_swap import WeightSwap

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
_VALID_SPECS = (f"{_VALID_HUB_IDS}, another org/name hub repo whose branches name training steps "
                f"(emergence list-models), or an existing local suite folder (ROOT/step{{N}}/ checkpoint folders)")
_REPO_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")


class CheckpointError(ValueError):
    """A step that the source does not hold (not on its schedule, not an integer, missing from
    the hub listing or the local suite, or, offline, not in the cache); the message names the
    model, the step and the nearest available steps.

    Fix: pick a step the source holds (``source.available_steps()``, ``emergence curve SRC``
    lists them; for a hub step not cached offline, download it first: ``huggingface-cli download
    MODEL --revision stepN``).
    """


class CorruptCheckpointError(CheckpointError):
    """A weight file of a step is truncated or its header overwritten; the searches leave the step
    out (``checkpoints.csv`` status ``corrupt``) and loading it raises this, naming the file.

    Fix: use another step, or delete that step's files and download (hub) or re-train (local
    suite) them again.
    """


class TokenizerMismatchError(ValueError):
    """Two steps of one source have different tokenizers (vocabulary, merges or special tokens):
    one analysis tokenises its prompts once, so the steps' token ids would not mean the same text.

    Fix: analyse only steps that share one tokenizer (a separate source or ``steps=`` list per
    tokenizer), or repair the suite folder whose ``tokenizer/`` differs between steps.
    """


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
    tokenizer breaks ``boot_transformers`` (KeyError 'name_or_path'; TransformerLens 4.x reloads the tokenizer
    from its ``name_or_path``).
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


def tokenizer_fingerprint(tokenizer) -> dict[str, str]:
    """sha256 digests of a tokenizer's vocabulary, merges and special tokens.

    Read from the fast tokenizer's serialised model (``backend_tokenizer.to_str()``: vocabulary,
    BPE merges, added tokens) when there is one, else from ``get_vocab()`` and the slow
    tokenizer's ``bpe_ranks``; special tokens are the ``special_tokens_map`` plus the added
    tokens flagged special. Two tokenizers that map every text to the same ids with the same
    special tokens have equal fingerprints.

    Args:
        tokenizer: a ``transformers.PreTrainedTokenizerBase``.

    Returns:
        ``{"vocabulary": hex, "merges": hex, "special tokens": hex}``.
    """
    def digest(value) -> str:
        return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()

    vocab = sorted(tokenizer.get_vocab().items())
    merges: list = []
    added: list = []
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        spec = json.loads(backend.to_str())
        merges = spec.get("model", {}).get("merges") or []
        added = sorted((t.get("id"), t.get("content"), bool(t.get("special"))) for t in spec.get("added_tokens") or [])
    elif hasattr(tokenizer, "bpe_ranks"):
        merges = sorted((list(pair), rank) for pair, rank in tokenizer.bpe_ranks.items())
    special = sorted((str(k), str(v)) for k, v in tokenizer.special_tokens_map.items())
    return {"vocabulary": digest(vocab), "merges": digest(merges), "special tokens": digest([special, added])}


# ----------------------------------------------------------------------------- weight files


def weight_files(folder: Path, allow_pickle: bool = False) -> list[Path]:
    """The weight files of one checkpoint folder: safetensors, else (if allowed) pickle.

    A resumable checkpoint's optimizer state (:data:`interp.training_state.OPTIMIZER_FILE`) is not
    a weight file: two steps with the same weights but different optimizer moments are the same
    model, and the digest of the model must not depend on how it was trained.
    """
    safe = sorted(p for p in folder.glob("*.safetensors") if p.name != OPTIMIZER_FILE)
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


_LIBC: ctypes.CDLL | Literal[False] | None = None  # None: not looked up yet; False: no glibc


def _release_memory() -> None:
    """Free dropped bridges now (they hold reference cycles) and hand freed heap to the OS.

    A full collection costs ~0.2-0.6 s per call (it scans every tracked object of the process:
    ~430k once transformers and TransformerLens are imported).
    """
    global _DROPPED_BYTES
    _DROPPED_BYTES = 0
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    _malloc_trim()


#: Bytes of weights dropped since the last full collection, and the amount that triggers one. A
#: collection per load cost 0.2 s of a 0.27 s load of an embedded run's 2-layer model (3.5 s of a
#: run's 10 s analysis, measured here); collecting once per 32 MiB of dropped weights keeps the
#: garbage bounded (tests/test_checkpoints.py::test_resident_memory_over_30_loads: <= 10 % growth
#: over 30 loads of a 7.3 MB model) and still collects at every load of a model that size or larger.
_DROPPED_BYTES = 0
_COLLECT_EVERY_BYTES = 32 * 2**20


def _model_bytes(model: torch.nn.Module) -> int:
    """Bytes of a model's parameters and buffers (what a dropped bridge leaves as garbage)."""
    tensors = [*model.parameters(), *model.buffers()]
    return sum(t.numel() * t.element_size() for t in tensors)


def _release_dropped(nbytes: int) -> None:
    """Account for a dropped model of ``nbytes``; collect once the dropped total reaches the budget."""
    global _DROPPED_BYTES
    _DROPPED_BYTES += nbytes
    if _DROPPED_BYTES >= _COLLECT_EVERY_BYTES:
        _release_memory()


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


def upcast_softmax(bridge) -> int:
    """Make every attention of ``bridge`` take its softmax in float32 and cast the pattern back to
    the scores' dtype before ``hook_pattern`` (TransformerLens's own ``upcast_to_fp32`` option of
    ``_softmax_dropout_pattern``, which the GPT-NeoX attention does not turn on): the bridge's
    softmax is otherwise taken in the model's dtype, and float16 gave NaNs on pythia-70m-deduped
    (TransformerLens issue #104). Returns the number of attention modules changed."""
    import functools

    changed = 0
    for module in bridge.modules():
        original = getattr(type(module), "_softmax_dropout_pattern", None)
        if original is None:
            continue

        def softmax_fp32(attn_scores, target_dtype=None, upcast_to_fp32=False, *, _module=module, _original=original):
            return _original(_module, attn_scores, target_dtype=target_dtype or attn_scores.dtype, upcast_to_fp32=True)

        module._softmax_dropout_pattern = functools.update_wrapper(softmax_fp32, original)
        changed += 1
    return changed


@dataclass
class LoadedCheckpoint:
    """One loaded checkpoint.

    Attributes:
        model: the ``TransformerBridge`` in eval mode (the source's ``dtype``, float32 by default).
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
    ``_resolve`` (step -> local folder); loading, duplicate detection, the tokenizer check and
    memory handling are shared. One bridge is held at a time (see module docstring, "Memory").

    Attributes:
        listing: where the list of steps came from (``"local folder"``, ``"hub"``, or the hub
            cache, offline or because the hub could not be reached).
    """

    model_id: str
    allow_pickle: bool = False
    trust_remote_code: bool = False
    listing: str = "local folder"

    def __init__(self) -> None:
        self._bridge: TransformerBridge | None = None
        self._digests: dict[int, str] = {}
        self._file_digests: dict[int, dict[str, str]] = {}  # step -> {weight file name: sha256}
        self._problems: dict[int, str | None] = {}  # step -> "file: what is wrong" (corrupt), or None
        self._tokenizer_ref: tuple[int, dict[str, str]] | None = None
        self._swap: WeightSwap | None = None  # interp.weight_swap.WeightSwap of the resident bridge, when swapping
        self._bridge_key: tuple | None = None  # (device, dtype) of the resident bridge
        self._fingerprints: dict[str, dict[str, str]] = {}  # tokenizer files' sha256 -> fingerprint
        #: Switch checkpoints by copying weights into the resident bridge (interp.weight_swap)
        #: instead of booting a new one. Off by default: then every bridge handed out keeps its
        #: weights; on, the next load of this source changes the weights of the bridge it handed
        #: out last (the main job turns it on: it copies what it keeps, interp.patching.capture_post).
        self.swap_weights = False
        #: dtype of loaded bridges (float32; the main job's ``dtype`` sets bfloat16 / float16).
        self.dtype = torch.float32
        self._ahead: tuple[int, Any, dict] | None = None  # (step, thread, result dict) of the one checkpoint read ahead
        #: Seconds :meth:`load` spent reading weights (or waiting for a read-ahead): benchmarks.
        self.read_seconds = 0.0

    def prefetch(self, step: int) -> None:
        """Start reading ``step``'s weights (downloading them on the hub path) on a background
        thread, so that a later :meth:`load` of it only copies them into the resident bridge.

        At most one checkpoint is read ahead: a call replaces the previous read-ahead (waiting
        for its thread first, so memory holds at most one checkpoint beside the bridge). Used
        only when :attr:`swap_weights` is on; an unavailable step is ignored (its load raises).
        """
        import threading

        if not self.swap_weights or step not in self.available_steps():
            return
        if self._ahead is not None:
            if self._ahead[0] == step:
                return
            self._ahead[1].join()
        result: dict = {}

        def read() -> None:
            from interp import weight_swap

            try:
                folder, revision, commit = self._resolve(step)
                files = self._require_weights(folder, step)
                if all(p.suffix == ".safetensors" for p in files):
                    # read and converted here, off the critical path: the load is then one memcpy
                    result["tensors"] = weight_swap.read_weights(files, dtype=self.dtype)
                self.digest(step)  # hashed here too (local files), off the critical path
                result.update(resolved=(folder, revision, commit), files=files)
            except Exception as error:  # reported by the load that needs it, not here
                result["error"] = error

        thread = threading.Thread(target=read, name=f"prefetch-{self.model_id}-{step}", daemon=True)
        self._ahead = (step, thread, result)
        thread.start()

    def _take_ahead(self, step: int) -> dict | None:
        """The read-ahead of ``step`` (waiting for it), or None; any other read-ahead is dropped."""
        ahead, self._ahead = self._ahead, None
        if ahead is None:
            return None
        ahead[1].join()
        if ahead[0] != step or "error" in ahead[2]:
            return None
        return ahead[2]

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

    # -- optional per source (defaults: nothing known)
    def revision(self, step: int) -> str:
        """The name of ``step``'s checkpoint (hub branch or folder name)."""
        return f"step{step}"

    def tokens_at(self, step: int) -> int | None:
        """Tokens seen at ``step`` (tokens) when the source knows them (hub names with ``tokens{M}``)."""
        return None

    def final_digest(self) -> str | None:
        """Digest of the run's final model, from a place other than the step labels (the hub's
        ``main`` branch; ``suite.json``'s ``final_digest``), or ``None`` when unknown."""
        return None

    def missing_steps(self) -> list[int]:
        """Steps of the expected schedule that this source does not hold (ascending)."""
        return []

    def _check_tokenizer(self, step: int, tokenizer) -> None:
        """Remember the first tokenizer seen; raise :class:`TokenizerMismatchError` if ``step``'s differs."""
        self._check_fingerprint(step, tokenizer_fingerprint(tokenizer))

    def _check_tokenizer_files(self, step: int, folder: Path) -> None:
        """:meth:`_check_tokenizer` on the tokenizer in ``folder``, loading it only when files
        with these bytes were not fingerprinted before (a weight swap loads no tokenizer)."""
        from transformers import AutoTokenizer

        h = hashlib.sha256()
        for name in _TOKENIZER_PATTERNS:
            if (folder / name).is_file():
                h.update(name.encode() + b"\0" + (folder / name).read_bytes() + b"\0")
        key = h.hexdigest()
        if key not in self._fingerprints:
            self._fingerprints[key] = tokenizer_fingerprint(AutoTokenizer.from_pretrained(folder))
        self._check_fingerprint(step, self._fingerprints[key])

    def _check_fingerprint(self, step: int, fingerprint: dict[str, str]) -> None:
        if self._tokenizer_ref is None:
            self._tokenizer_ref = (step, fingerprint)
            return
        ref_step, ref = self._tokenizer_ref
        differ = [part for part in ref if ref[part] != fingerprint.get(part)]
        if differ:
            raise TokenizerMismatchError(
                f"{self.model_id}: the tokenizer at step {step} differs from the one at step {ref_step} "
                f"({', '.join(differ)}); one analysis needs one tokenizer: use steps that share it"
            )

    def load(self, step: int, device: str | torch.device | None = None) -> LoadedCheckpoint:
        """Load ``step`` as a ``TransformerBridge`` (:attr:`dtype`, float32 by default) in eval mode.

        The previous bridge this source booted is released first (see module docstring). With
        :attr:`swap_weights` on, a step whose ``config.json`` equals the resident bridge's is
        switched in by copying its safetensors into that bridge (:mod:`interp.weight_swap`), with
        the same digest and tokenizer checks; the returned model is then the resident bridge.

        Args:
            step: training step (optimizer steps); must be in :meth:`available_steps`.
            device: where the model goes; default ``cuda`` if available, else ``cpu``.

        Raises:
            CheckpointError: ``step`` is not available (names the nearest available steps).
            TokenizerMismatchError: ``step``'s tokenizer differs from the first one this source
                handed out (names both steps).
            CorruptCheckpointError: a weight file is truncated or its header overwritten (one
                line naming the step and the file).
            ValueError: the checkpoint has only pickle weights and ``allow_pickle`` is off, or
                the model has no attention heads (nothing to patch).
        """
        import time

        from transformer_lens.model_bridge import TransformerBridge
        from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

        from interp import weight_swap

        step = self._check_step(step)
        started = time.perf_counter()
        ahead = self._take_ahead(step)
        if ahead is not None:
            (folder, revision, commit), files = ahead["resolved"], ahead["files"]
        else:
            folder, revision, commit = self._resolve(step)
            files = self._require_weights(folder, step)
        self._refuse_corrupt(step, files)
        self._require_attention(folder, step)
        config_text = (folder / "config.json").read_text()
        digest = self._digests.get(step) or weights_digest(files)
        self._digests[step] = digest
        tokenizer_dir = self._tokenizer_dir(step, folder)
        self._check_tokenizer_files(step, tokenizer_dir)
        device = _default_device(device)
        dtype = self.dtype
        safetensors_only = all(p.suffix == ".safetensors" for p in files)
        if (self.swap_weights and self._swap is not None and self._bridge is not None and safetensors_only
                and self._bridge_key == (device, dtype)):
            read_ahead = ahead is not None and "tensors" in ahead
            tensors = ahead["tensors"] if read_ahead and ahead is not None else weight_swap.read_weights(files)
            self.read_seconds += time.perf_counter() - started
            if self._swap.fits(list(tensors), config_text):
                # a read-ahead's tensors are ours and already in the bridge's dtype: adopted, not copied
                self._swap.apply(tensors, adopt=read_ahead and device.type == "cpu")
                del tensors
                return LoadedCheckpoint(model=self._bridge, step=step, digest=digest, revision=revision, commit=commit)
            del tensors

        config = AutoConfig.from_pretrained(folder, trust_remote_code=self.trust_remote_code)
        # A fresh tokenizer per boot: the bridge edits the one it gets (adds eos/pad tokens).
        tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)

        self._drop_bridge()  # drop the previous bridge before allocating the next one
        with quiet_hf_progress():
            hf_model = AutoModelForCausalLM.from_pretrained(
                folder, config=config, dtype=dtype, attn_implementation="eager",
                use_safetensors=None if self.allow_pickle else True,
                trust_remote_code=self.trust_remote_code,
            ).to(device)  # type: ignore[arg-type]  # transformers types .to as taking a model
        hf_named = dict(hf_model.named_parameters()) if self.swap_weights and safetensors_only else None
        bridge = TransformerBridge.boot_transformers(
            self._bridge_name(folder), hf_model=hf_model, tokenizer=tokenizer,
            dtype=dtype, device=device, trust_remote_code=self.trust_remote_code,
        )
        bridge.eval()
        if dtype != torch.float32:
            upcast_softmax(bridge)
        if not any(name.endswith("attn.hook_pattern") for name in bridge.hook_dict):
            del bridge, hf_model
            _release_memory()
            raise ValueError(
                f"{self.model_id} step {step} ({config.model_type}) has no attention heads "
                f"(no blocks.*.attn.hook_pattern): attention-pattern patching needs a model with attention"
            )
        self._bridge = bridge
        self._bridge_key = (device, dtype)
        self._swap = None
        if hf_named is not None:
            from safetensors import safe_open

            keys = [k for p in files for k in safe_open(str(p), framework="pt").keys()]
            self._swap = weight_swap.WeightSwap.build(hf_named, bridge, keys, hf_model, config_text)
            if self._swap is None:
                logger.info("%s: no weight-swap plan for %s; every checkpoint boots a bridge",
                            self.model_id, config.model_type)
        return LoadedCheckpoint(model=bridge, step=step, digest=digest, revision=revision, commit=commit)

    def _bridge_name(self, folder: Path) -> str:
        return self.model_id

    def _require_weights(self, folder: Path, step: int | None) -> list[Path]:
        files = weight_files(folder, self.allow_pickle)
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

    def duplicate_groups(self, steps: Iterable[int] | None = None) -> list[list[int]]:
        """Groups of two or more steps with identical weights (same digest), each ascending.

        Args:
            steps: the steps to compare (default: all available steps).

        Raises:
            CheckpointError: one of ``steps`` is not available.
        """
        steps = self.available_steps() if steps is None else sorted({self._check_step(s) for s in steps})
        by_digest: dict[str, list[int]] = {}
        for step in steps:
            by_digest.setdefault(self.digest(step), []).append(step)
        return sorted(group for group in by_digest.values() if len(group) > 1)

    def kept_duplicate(self, group: Sequence[int]) -> int | None:
        """The one step of a duplicate group whose label is known to be right, or ``None``.

        Only the final available step can be: when its digest equals :meth:`final_digest`
        (the final model, read from a place other than the step labels).
        """
        final = self.available_steps()[-1]
        known = self.final_digest()
        return final if final in group and known is not None and self.digest(final) == known else None

    def duplicate_steps(self, steps: Iterable[int] | None = None) -> dict[int, int]:
        """Steps excluded because another step has the same weights: ``{step: other step}``.

        Identical weights at two steps mean at most one label is right, and the hub has served
        one model's final weights on most intermediate branches (pythia-2.8b: 86 of its 154
        step branches), so *every* step of a duplicate group is excluded unless
        :meth:`kept_duplicate` knows one to be right; that one stays and the others map to it.
        Otherwise each step maps to the smallest other step of its group.

        Args:
            steps: the steps to compare (default: all available steps).

        Raises:
            CheckpointError: one of ``steps`` is not available.
        """
        excluded: dict[int, int] = {}
        for group in self.duplicate_groups(steps):
            kept = self.kept_duplicate(group)
            for step in group:
                if step != kept:
                    excluded[step] = kept if kept is not None else min(s for s in group if s != step)
        return dict(sorted(excluded.items()))

    def searchable_steps(self) -> list[int]:
        """Available steps minus :meth:`duplicate_steps`, :meth:`partial_duplicates` and
        :meth:`corrupt_steps`, sorted ascending."""
        left_out = set(self.duplicate_steps()) | set(self.partial_duplicates()) | set(self.corrupt_steps())
        return [s for s in self.available_steps() if s not in left_out]

    # -- files that are not what their label says (interp.checkpoint_integrity)
    def file_digests(self, step: int) -> dict[str, str] | None:
        """``{weight file name: sha256 hex}`` of ``step`` (one entry per shard), or None when only
        the whole digest is known.

        Raises:
            CheckpointError: ``step`` is not available.
        """
        self.digest(step)
        return self._file_digests.get(self._check_step(step))

    def _local_weight_files(self, step: int) -> list[Path] | None:
        """``step``'s weight files when they are on this machine (None: not downloaded)."""
        folder, _, _ = self._resolve(step)
        return weight_files(folder, self.allow_pickle) or None

    def corrupt_reason(self, step: int) -> str | None:
        """``"<file>: <what is wrong>"`` when a weight file of ``step`` on this machine is truncated
        or its header overwritten (:func:`interp.checkpoint_integrity.safetensors_problem`); None
        when whole or not downloaded.

        Raises:
            CheckpointError: ``step`` is not available.
        """
        from interp.checkpoint_integrity import file_problem

        step = self._check_step(step)
        if step not in self._problems:
            problem = None
            for path in self._local_weight_files(step) or []:
                reason = file_problem(path)
                if reason is not None:
                    problem = f"{path.name}: {reason}"
                    break
            self._problems[step] = problem
        return self._problems[step]

    def corrupt_steps(self) -> dict[int, str]:
        """``{step: "<file>: <what is wrong>"}`` for every available step with a corrupt weight file."""
        reasons = {step: self.corrupt_reason(step) for step in self.available_steps()}
        return {step: reason for step, reason in reasons.items() if reason is not None}

    def _refuse_corrupt(self, step: int, files: Sequence[Path]) -> None:
        from interp.checkpoint_integrity import file_problem

        for path in files:
            reason = file_problem(path)
            if reason is not None:
                self._problems[step] = f"{path.name}: {reason}"
                raise CorruptCheckpointError(f"{self.model_id} step {step}: {path.name} is corrupt ({reason}); "
                                             "the step is left out: download or re-train it again")

    def partial_duplicates(self) -> dict[int, tuple[list[int], list[str]]]:
        """Steps sharing a weight shard with another step whose weights otherwise differ:
        ``{step: (other steps, shared file names)}``.

        As for whole duplicates (:meth:`duplicate_steps`), every such step is left out of the
        search unless it is the final step and its digest equals :meth:`final_digest`.
        """
        from interp.checkpoint_integrity import shared_files

        steps = self.available_steps()
        digests = {step: self.digest(step) for step in steps}
        files = {step: f for step in steps if (f := self.file_digests(step))}
        found = shared_files(files, digests)
        if found and steps[-1] in found and self.kept_duplicate([steps[-1]]) == steps[-1]:
            del found[steps[-1]]
        return found

    def shared_tensors(self, step: int, names: Sequence[str]) -> list[str]:
        """Names of the tensors stored in ``step``'s weight files ``names`` (from the files'
        headers, else the checkpoint's index), [] when unknown."""
        from interp.checkpoint_integrity import tensor_names

        try:
            folder = self._weights_folder(step)
        except Exception:  # not downloaded: no header to read
            folder = None
        return sorted({t for name in names for t in tensor_names(folder, name)})

    def _weights_folder(self, step: int) -> Path | None:
        return self._resolve(step)[0]

    def close(self) -> None:
        """Drop this source's bridge and free its memory now (a bridge the caller holds survives)."""
        self._take_ahead(-1)
        self._bridge = None
        self._swap = None
        _release_memory()

    def _drop_bridge(self) -> None:
        """Drop the bridge before the next load; collect once enough weights were dropped (see
        ``_COLLECT_EVERY_BYTES``)."""
        if self._bridge is not None:
            nbytes = _model_bytes(self._bridge)
            self._bridge = None
            self._swap = None
            _release_dropped(nbytes)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.model_id!r})"


class HubSource(CheckpointSource):
    """Checkpoints on the Hugging Face hub, one branch per training step.

    The branches are read online with ``list_repo_refs`` (if the hub cannot be reached, from the
    cache, and :attr:`listing` says so) and with ``HF_HUB_OFFLINE=1`` from the cache's ``refs/``.
    Branch names are parsed by :class:`interp.families.RevisionParser` (``step{N}``,
    ``step{N}-tokens{M}B``, ``stage{k}[-ingredient{j}]-step{N}-tokens{M}B``, or ``revision_regex``)
    and one series is followed (``series``; default: the series with the most branches, e.g.
    ``stage1`` on OLMo-2). Pythia / PolyPythia ids keep the 154-step schedule :data:`PYTHIA_STEPS`
    (some seeds miss a few, e.g. pythia-410m-seed9 at step 40000). Files go to / come from the
    standard hub cache (``HF_HUB_CACHE``) unless ``cache_dir`` is given.

    Args:
        model_id: an ``org/name`` hub id, e.g. ``"EleutherAI/pythia-70m-seed3"`` or
            ``"allenai/OLMo-2-0425-1B"`` (``emergence list-models`` lists the known families).
        steps: the checkpoint schedule, training steps (default: :data:`PYTHIA_STEPS` for Pythia
            ids, else every step the chosen series has). Steps of it without a branch are
            reported by :meth:`missing_steps`.
        cache_dir: hub cache folder (default: ``huggingface_hub.constants.HF_HUB_CACHE``).
        allow_pickle: also load ``.bin`` weights when a step has no safetensors.
        trust_remote_code: passed to transformers; off by default.
        allow_any_id: kept for compatibility (any ``org/name`` id is accepted now).
        series: the series to follow (``"stage1"``, ``"stage2-ingredient3"``; ``""`` for plain
            ``step{N}`` names); default: the one with the most branches.
        revision_regex: a regex for other branch names, with a named group ``step`` (optional
            ``tokens``, ``unit``, ``series``); see :class:`interp.families.RevisionParser`.

    Raises:
        ValueError: a malformed id, an unknown id in the Pythia namespace, an empty / invalid
            schedule, or a bad ``revision_regex``.
    """

    def __init__(self, model_id: str, steps: Sequence[int] | None = None, cache_dir: str | Path | None = None,
                 allow_pickle: bool = False, trust_remote_code: bool = False, allow_any_id: bool = False,
                 series: str | None = None, revision_regex: str | None = None):
        super().__init__()
        if not isinstance(model_id, str) or not is_hub_id(model_id):
            raise ValueError(
                f"unknown model id {model_id!r}: expected {_VALID_HUB_IDS}, "
                f"or another org/name repo whose branches name training steps (emergence list-models)"
            )
        pythia = is_pythia_id(model_id)
        if steps is None:
            steps = PYTHIA_STEPS if pythia else None
        if steps is not None:
            schedule = sorted({int(s) for s in steps})
            if not schedule or schedule[0] < 0 or any(int(s) != s for s in steps):
                raise ValueError(f"steps={list(steps)[:5]}...: need a non-empty list of non-negative integer steps")
            steps = tuple(schedule)
        self.model_id = model_id
        self.steps: tuple[int, ...] | None = steps
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self.allow_pickle = allow_pickle
        self.trust_remote_code = trust_remote_code
        self.series_requested = series
        family = family_of(model_id)
        self.parser = RevisionParser(revision_regex if revision_regex is not None
                                     else (family.revision_regex if family else None))
        self._listing = ""
        self._schedule: Schedule | None = None
        self._available: list[int] | None = None
        self._final_digest: str | bool | None = False  # False: not looked up yet

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

    def _cached_refs(self) -> list[str]:
        refs = self._repo_cache() / "refs"
        return sorted(p.name for p in refs.iterdir() if p.is_file()) if refs.is_dir() else []

    def _branch_names(self) -> list[str]:
        """Branch names from the hub, or from the cache's refs (offline, or the hub unreachable)."""
        if self._offline():
            self._listing = "cache (HF_HUB_OFFLINE=1)"
            return self._cached_refs()
        from huggingface_hub import HfApi

        try:
            refs = HfApi().list_repo_refs(self.model_id)
        except Exception as error:  # network trouble: fall back to the cache, as snapshot_download does
            cached = self._cached_refs()
            if not cached:
                raise ValueError(f"cannot list the branches of {self.model_id}: {error}".splitlines()[0]) from error
            self._listing = f"cache (hub unreachable: {type(error).__name__})"
            logger.warning("cannot reach the hub for %s (%s); using the %d cached branches",
                           self.model_id, type(error).__name__, len(cached))
            return cached
        self._listing = "hub"
        return [b.name for b in refs.branches]

    @property
    def schedule(self) -> Schedule:
        """The parsed branches of the followed series (listed once, then remembered)."""
        if self._schedule is None:
            self._schedule = build_schedule(self._branch_names(), self.parser, self.series_requested)
            if self._schedule.alternates:
                logger.warning("%s: %d branches name a step another branch already names (kept: %s)",
                               self.model_id, len(self._schedule.alternates),
                               ", ".join(self._schedule.revisions[r.step].name for r in self._schedule.alternates[:3]))
        return self._schedule

    @property
    def listing(self) -> str:  # type: ignore[override]  # a class attribute in CheckpointSource, computed here
        """Where the branches were listed: ``hub``, or ``cache (...)`` (offline, or the hub unreachable)."""
        _ = self.schedule
        return self._listing

    @property
    def series(self) -> str:
        """The series followed (``""`` for plain ``step{N}`` names)."""
        return self.schedule.series

    def available_steps(self) -> list[int]:
        """Steps of the followed series that the hub has (online) or the cache holds (offline),
        within the schedule when one is set (Pythia's 154 steps)."""
        if self._available is None:
            listed = set(self.schedule.revisions)
            self._available = sorted(listed & set(self.steps) if self.steps is not None else listed)
        return list(self._available)

    def expected_steps(self) -> list[int]:
        """The schedule the source should have: ``steps`` when set (Pythia's 154), else the
        regular grid of the listed steps (:func:`interp.families.regular_grid`), else none."""
        if self.steps is not None:
            return list(self.steps)
        return regular_grid(list(self.schedule.revisions))

    def missing_steps(self) -> list[int]:
        """Steps of :meth:`expected_steps` with no branch on the hub (offline: not in the cache)."""
        available = set(self.available_steps())
        return [s for s in self.expected_steps() if s not in available]

    def revision(self, step: int) -> str:
        """The branch name of ``step`` (``step1000``, ``stage1-step1000-tokens5B``, ...)."""
        rev = self.schedule.revisions.get(step)
        return rev.name if rev is not None else f"step{step}"

    def tokens_at(self, step: int) -> int | None:
        """Tokens seen at ``step`` (tokens), from the branch name (``tokens{M}B``), else ``None``."""
        rev = self.schedule.revisions.get(step)
        return None if rev is None else rev.tokens

    def _missing_reason(self, step: int) -> str:
        if self.steps is not None and step not in self.steps:
            return f" (not in its {len(self.steps)}-step schedule)"
        where = f"series {self.series!r}" if self.series else "its step branches"
        if self._offline():
            return f" in the local hub cache (HF_HUB_OFFLINE=1; {where})"
        return f" (no branch for step {step} in {where} on the hub)" if self.series else f" (no branch step{step} on the hub)"

    def _snapshot(self, step: int | None, patterns: list[str], local_only: bool = False) -> Path:
        """A snapshot folder of ``step``'s branch (``None``: the ``main`` branch)."""
        from huggingface_hub import snapshot_download

        folder = snapshot_download(
            self.model_id, revision="main" if step is None else self.revision(step), cache_dir=self.cache_dir,
            allow_patterns=patterns, local_files_only=local_only,
        )
        return Path(folder)

    def _resolve(self, step: int) -> tuple[Path, str, str | None]:
        folder = self._snapshot(step, _CONFIG_PATTERNS + _TOKENIZER_PATTERNS + _SAFETENSORS_PATTERNS)
        if self.allow_pickle and not weight_files(folder, allow_pickle=False):
            folder = self._snapshot(step, _PICKLE_PATTERNS)
        return folder, self.revision(step), folder.name

    def _tokenizer_dir(self, step: int, folder: Path | None = None) -> Path:
        # The step's own snapshot (fetched with the weights) when it has tokenizer files; else the
        # last available step's (the final model's branch always carries its tokenizer).
        for candidate in (folder, None):
            if candidate is None:
                candidate = self._snapshot(step, _TOKENIZER_PATTERNS)
            if any((candidate / name).is_file() for name in ("tokenizer.json", "tokenizer_config.json")):
                return candidate
            step = self.available_steps()[-1]
        raise ValueError(f"{self.model_id}: no tokenizer files (tokenizer.json) at {self.revision(step)}")

    def tokenizer(self) -> PreTrainedTokenizerBase:
        """The tokenizer, from the snapshot folder (tokenizer files only) of the first available step.

        Raises:
            CheckpointError: no step is available (offline: none in the cache).
            TokenizerMismatchError: it differs from the tokenizer of a step loaded earlier.
        """
        from transformers import AutoTokenizer

        steps = self.available_steps()
        if not steps:
            where = "in the local hub cache (HF_HUB_OFFLINE=1)" if self._offline() else "on the hub"
            raise CheckpointError(f"{self.model_id} has no checkpoint branches (step{{N}}, ...) {where}")
        tokenizer = AutoTokenizer.from_pretrained(self._tokenizer_dir(steps[0]))
        self._check_tokenizer(steps[0], tokenizer)
        return tokenizer

    def digest(self, step: int) -> str:
        """Weight digest of ``step``: from the hub cache when the weights are there (the blob name
        is the LFS sha256), else from hub metadata (LFS oids, no download) when online.

        Raises:
            CheckpointError: ``step`` is not available.
            ValueError: offline and the step's weights are not cached.
        """
        step = self._check_step(step)
        if step not in self._digests:
            digest = self._cached_digest(step) or self._remote_digest(step)
            assert digest is not None  # a step's remote digest, downloading if need be, is never None
            self._digests[step] = digest
        return self._digests[step]

    def _local_weight_files(self, step: int) -> list[Path] | None:
        """The step's weight files in the hub cache (None when not downloaded: nothing is fetched)."""
        from huggingface_hub.errors import LocalEntryNotFoundError

        try:
            folder = self._weights_folder(step)
        except LocalEntryNotFoundError:
            return None
        return weight_files(folder, self.allow_pickle) or None

    def _weights_folder(self, step: int) -> Path:
        """The cached snapshot of ``step``'s weights and index (never downloads)."""
        return self._snapshot(step, _SAFETENSORS_PATTERNS + _PICKLE_PATTERNS + ["*.index.json"], local_only=True)

    def final_digest(self) -> str | None:
        """Weight digest of the ``main`` branch (the final model), or ``None`` when ``main`` has
        no weights (the PolyPythia seed repos) or is neither cached nor reachable."""
        if self._final_digest is False:
            self._final_digest = None
            try:
                self._final_digest = self._cached_digest(None)
                if self._final_digest is None and not self._offline():
                    self._final_digest = self._remote_digest(None, download=False)
            except Exception as error:  # no main branch, no weights on it, or the hub unreachable
                logger.info("%s: no final-model digest from main (%s)", self.model_id, type(error).__name__)
        return self._final_digest if isinstance(self._final_digest, str) else None

    def _cached_digest(self, step: int | None) -> str | None:
        """Digest from cached weight files of ``step``'s branch (``None``: ``main``), if cached."""
        from huggingface_hub.errors import LocalEntryNotFoundError

        try:
            folder = self._snapshot(step, _SAFETENSORS_PATTERNS + _PICKLE_PATTERNS, local_only=True)
        except LocalEntryNotFoundError:
            return None
        if not weight_files(folder, allow_pickle=True):
            return None
        files = self._require_weights(folder, step)  # refuses pickle-only steps
        per_file = {p.name: _sha256_of_file(p) for p in sorted(files, key=lambda p: p.name)}
        if step is not None:
            self._file_digests[step] = per_file
        return combine_digests(list(per_file.values()))

    def _remote_digest(self, step: int | None, download: bool = True) -> str | None:
        """Digest from hub metadata (LFS oids) of ``step``'s branch (``None``: ``main``); with
        ``download=False``, ``None`` where that needs a download."""
        if self._offline():
            raise ValueError(
                f"{self.model_id} step {step}: weights are not in the hub cache {self._repo_cache()} "
                f"and HF_HUB_OFFLINE=1; load the step once online"
            )
        from huggingface_hub import HfApi, hf_hub_download

        api, revision = HfApi(), "main" if step is None else self.revision(step)
        kinds = [("model.safetensors", "model.safetensors.index.json")]
        if self.allow_pickle:
            kinds.append(("pytorch_model.bin", "pytorch_model.bin.index.json"))
        for single, index in kinds:
            info = {f.path: f for f in api.get_paths_info(self.model_id, [single, index], revision=revision)}
            lfs = getattr(info.get(single), "lfs", None)
            if lfs is not None:
                if step is not None:
                    self._file_digests[step] = {single: lfs.sha256}
                return lfs.sha256
            if index in info:
                index_file = hf_hub_download(self.model_id, index, revision=revision, cache_dir=self.cache_dir)
                shards = sorted(set(json.loads(Path(index_file).read_text())["weight_map"].values()))
                shard_info = {f.path: f for f in api.get_paths_info(self.model_id, shards, revision=revision)}
                shas: dict[str, Any] = {s: getattr(getattr(shard_info.get(s), "lfs", None), "sha256", None) for s in shards}
                if all(sha is not None for sha in shas.values()):
                    if step is not None:
                        self._file_digests[step] = shas
                    return combine_digests(list(shas.values()))
        if not download or step is None:
            return None
        # No LFS metadata (unusual): download the weights and hash them.
        folder, _, _ = self._resolve(step)
        return weights_digest(self._require_weights(folder, step))


class LocalSuiteSource(CheckpointSource):
    """A local checkpoint suite (layout in the module docstring), loaded offline.

    Args:
        root: the suite folder.
        model_id: a name for the suite (default: ``suite.json``'s ``model_id``, else the folder name).
        allow_pickle: also load ``.bin`` weights when a step has no safetensors.
        include_zoom: also offer the steps that ``emergence zoom`` re-trained into the overlay
            ``ROOT/zoom/step{N}/`` (off by default: the base schedule is what analyses read).

    Raises:
        ValueError: ``root`` is not a folder, holds no ``step{N}/`` folders, or ``suite.json``
            lists a step whose folder is missing.
    """

    def __init__(self, root: str | Path, model_id: str | None = None, allow_pickle: bool = False,
                 include_zoom: bool = False):
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
        if include_zoom and (self.root / "zoom").is_dir():  # overlay steps never replace base steps
            for p in (self.root / "zoom").iterdir():
                if p.is_dir() and (m := _STEP_NAME.fullmatch(p.name)):
                    folders.setdefault(int(m.group(1)), p)
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
        """The suite's tokenizer, from ``ROOT/tokenizer/`` (else the first step folder with one).

        Raises:
            TokenizerMismatchError: it differs from the tokenizer of a step loaded earlier.
        """
        from transformers import AutoTokenizer

        first = self.available_steps()[0]
        tokenizer = AutoTokenizer.from_pretrained(self._tokenizer_dir(first))
        self._check_tokenizer(first, tokenizer)
        return tokenizer

    def revision(self, step: int) -> str:
        """The step's folder name."""
        folder = self._folders.get(step)
        return folder.name if folder is not None else f"step{step}"

    def final_digest(self) -> str | None:
        """``suite.json``'s ``final_digest`` (the final model's weight digest), if recorded."""
        value = self.metadata.get("final_digest")
        return value if isinstance(value, str) and _SHA256_HEX.fullmatch(value) else None

    def digest(self, step: int) -> str:
        """sha256 of ``step``'s weight file bytes (hashed once, then remembered).

        Raises:
            CheckpointError: ``step`` is not available.
            ValueError: the step has no (allowed) weight files.
        """
        step = self._check_step(step)
        if step not in self._digests:
            files = sorted(self._require_weights(self._folders[step], step), key=lambda p: p.name)
            self._file_digests[step] = {p.name: _sha256_of_file(p) for p in files}
            self._digests[step] = combine_digests(list(self._file_digests[step].values()))
        return self._digests[step]


def open_source(spec: str | Path, **kwargs) -> CheckpointSource:
    """Open a checkpoint source: an existing folder -> :class:`LocalSuiteSource`; a hub id ->
    :class:`HubSource`.

    A hub spec may name the series to follow after a colon (hub ids never hold one):
    ``allenai/OLMo-2-1124-7B:stage2-ingredient1``; ``ID:`` follows the plain ``step{N}`` names.

    Args:
        spec: a hub id (``org/name[:SERIES]``) or a local suite folder.
        **kwargs: passed to the source's constructor; for a local suite only ``model_id``,
            ``allow_pickle`` and ``include_zoom`` apply (hub-only options such as ``cache_dir``
            are ignored there; ``include_zoom`` is ignored by hub sources).

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
        return LocalSuiteSource(path, **{k: v for k, v in kwargs.items()
                                         if k in ("model_id", "allow_pickle", "include_zoom")})
    text = str(spec)
    model_id, colon, series = text.partition(":")
    if is_hub_id(model_id):
        kwargs.pop("include_zoom", None)  # hub checkpoints have no zoom overlay
        if colon:
            kwargs = {**kwargs, "series": series}
        return HubSource(model_id, **kwargs)
    raise ValueError(f"unknown checkpoint source {text!r}: expected {_VALID_SPECS}")


# ----------------------------------------------------------------------------- hazards

#: ``checkpoints.csv`` columns (one row per step of the schedule).
CHECKPOINT_COLUMNS = ["step", "revision", "tokens", "digest", "status", "same_weights_as", "detail", "listing"]


def checkpoint_table(source: CheckpointSource) -> pd.DataFrame:
    """One row per step: what the source holds, its digest and whether the search may use it.

    ``status`` is one of

    * ``searchable``: held, weights unlike every other step's;
    * ``duplicate-excluded``: the same weights as ``same_weights_as`` (other steps, ``;``-joined):
      at most one of those labels is right, so the step is left out of the search;
    * ``duplicate-kept-final``: the final step of a duplicate group whose digest equals the final
      model's (:meth:`CheckpointSource.final_digest`): its label is known to be right;
    * ``partial-duplicate``: a weight shard byte-identical to one of ``same_weights_as`` while the
      other shards differ (``detail`` names the files and their tensors): left out of the search;
    * ``corrupt``: a weight file truncated or with its header overwritten (``detail``: the file
      and what is wrong): left out of the search;
    * ``missing``: in the expected schedule, not held (no hub branch; offline: not in the cache).

    Digests are read for every held step (hub metadata or the cache; local files hashed once).

    Args:
        source: a checkpoint source.

    Returns:
        DataFrame with :data:`CHECKPOINT_COLUMNS`, sorted by step; ``tokens`` (tokens seen) and
        ``digest`` are empty where unknown; ``listing`` is the source's :attr:`listing` on every row.

    Raises:
        ValueError: a held step's weights cannot be read (e.g. offline and not cached).
    """
    import pandas as pd

    from interp.checkpoint_integrity import describe_shared

    held = source.available_steps()
    groups = {step: group for group in source.duplicate_groups() for step in group}
    excluded = source.duplicate_steps()
    partial = source.partial_duplicates()
    corrupt = source.corrupt_steps()
    rows = []
    for step in held:
        group = groups.get(step, [])
        status = "searchable" if not group else ("duplicate-excluded" if step in excluded else "duplicate-kept-final")
        same, detail = ";".join(str(s) for s in group if s != step), ""
        if step in partial and not group:
            others, names = partial[step]
            status, same = "partial-duplicate", ";".join(map(str, others))
            detail = describe_shared(names, source.shared_tensors(step, names), others)
        if step in corrupt:
            status, detail = "corrupt", corrupt[step]
        rows.append({"step": step, "revision": source.revision(step), "tokens": source.tokens_at(step),
                     "digest": source.digest(step), "status": status, "same_weights_as": same, "detail": detail})
    for step in source.missing_steps():
        rows.append({"step": step, "revision": None, "tokens": None, "digest": None, "status": "missing",
                     "same_weights_as": "", "detail": ""})
    table = pd.DataFrame(rows, columns=CHECKPOINT_COLUMNS[:-1]).sort_values("step", kind="stable")
    table["listing"] = source.listing
    return table.astype({"tokens": "Int64"}).reset_index(drop=True)


def _steps_text(steps: Sequence[int], limit: int = 8) -> str:
    shown = ", ".join(str(s) for s in steps[:limit])
    return shown + (f", ... ({len(steps)} in all)" if len(steps) > limit else "")


def hazard_lines(table: pd.DataFrame, name: str = "") -> list[str]:
    """Human-readable hazards of a :func:`checkpoint_table`: one line per kind, none if clean.

    Args:
        table: a :func:`checkpoint_table` (``model``/``seed`` columns, if present, are ignored).
        name: prefix of each line (the run's name).
    """
    prefix = f"{name}: " if name else ""
    lines = []
    excluded = table[table["status"] == "duplicate-excluded"]
    if len(excluded):
        groups = sorted({tuple(sorted([int(r.step)] + [int(s) for s in str(r.same_weights_as).split(";") if s]))
                         for r in excluded.itertuples()})
        kept = table[table["status"] == "duplicate-kept-final"]["step"].tolist()
        text = "; ".join("{" + ", ".join(map(str, g)) + "}" for g in groups)
        lines.append(f"{prefix}{len(excluded)} steps excluded, identical weights within each group {text}"
                     + (f" (kept: final step {kept[0]}, digest equal to the final model's)" if kept else
                        " (no label known right: every step of each group excluded)"))
    for kind in ("partial-duplicate", "corrupt"):
        for row in table[table["status"] == kind].itertuples():
            detail = getattr(row, "detail", "") or ""
            lines.append(f"{prefix}step {int(row.step)} {kind}: {detail}; left out of the search")
    listing = str(table["listing"].iloc[0]) if len(table) else ""
    missing = table[table["status"] == "missing"]["step"].tolist()
    if missing:
        where = "not in the local hub cache" if listing.startswith("cache") else "missing"
        lines.append(f"{prefix}{len(missing)} steps of the schedule {where}: {_steps_text(missing)}")
    if listing.startswith("cache"):
        lines.append(f"{prefix}steps listed from the local hub cache, not the hub: {listing}")
    return lines
