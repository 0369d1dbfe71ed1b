"""Checkpoint sources: one interface over a training run's checkpoints, on the hub or on disk.

One concept: the door every source shares: steps, digests, the checks a step passes before it
loads (tensors, integrity, remote code, a run-level config) and the load itself; each check's
detail lives in its own module.

A :class:`CheckpointSource` lists the training steps it holds, loads one step as a float32
TransformerLens 4.x ``TransformerBridge`` (``TransformerBridge.boot_transformers``), gives each
step's weight digest, and flags steps whose weights duplicate an earlier step's so that the
point-of-emergence search skips them. Two implementations:

* :class:`HubSource`: any hub repository whose branches name training steps (see
  :mod:`interp.sources.families` for the revision-name grammar and the known families). Pythia and
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

Local suite layout (what :mod:`interp.sources.embedded` writes)::

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
* shared shards and corrupt files (:mod:`interp.sources.checkpoint_integrity`): a step whose weight shard
  is byte-identical to another step's while its other shards differ (``partial-duplicate``), or
  whose weight file is truncated or has its header overwritten (``corrupt``; loading it raises
  :class:`CorruptCheckpointError`), is left out of the search and reported;
* missing steps: steps of the schedule with no branch (Pythia's 154 steps; elsewhere the regular
  grid the listed steps follow, :func:`interp.sources.families.regular_grid`), or not in the cache offline;
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
bridge (:mod:`interp.sources.weight_swap`, what the main job does), the next checkpoint can be read ahead
on a background thread (:meth:`CheckpointSource.prefetch`), and a bridge handed out takes the
weights of the next step loaded; hold two checkpoints with two sources.

The per-file checks (shard digests, corrupt files, shared shards) are the base class
:class:`interp.sources.checkpoint_integrity.WeightFileChecks`; the subclasses are in
:mod:`interp.sources.hub` and :mod:`interp.sources.local`.
"""

from __future__ import annotations

import hashlib
import json
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from interp.core.task_batch import CONTEXT_ATTRIBUTE
from interp.sources.checkpoint_integrity import WeightFileChecks
from interp.sources.loading import (
    _TOKENIZER_PATTERNS,
    CheckpointError,
    CorruptCheckpointError,
    TokenizerMismatchError,
    _default_device,
    _model_bytes,
    _release_dropped,
    _release_memory,
    logger,
    nearest_steps,
    pickle_weight_files,
    quiet_hf_progress,
    refuse_unhookable,
    refuse_unsafe_pickle,
    tokenizer_fingerprint,
    upcast_softmax,
    weight_files,
    weights_digest,
)

if TYPE_CHECKING:  # the bridge and transformers are imported when first needed (slow imports)
    import pandas as pd
    from transformer_lens.model_bridge import TransformerBridge
    from transformers import PreTrainedTokenizerBase

    from interp.sources.weight_swap import WeightSwap

#: config.json keys that give a model's context (positions), the first present wins.
CONTEXT_KEYS = ("max_position_embeddings", "n_positions", "n_ctx", "max_sequence_length", "seq_length")


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


class CheckpointSource(WeightFileChecks, ABC):
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
        self._non_finite: dict[int, dict[str, list[str]]] = {}  # step -> {file: tensors with NaN/inf}, once read
        self._tokenizer_ref: tuple[int, dict[str, str]] | None = None
        self._swap: WeightSwap | None = (
            None  # interp.sources.weight_swap.WeightSwap of the resident bridge, when swapping
        )
        self._bridge_key: tuple | None = None  # (device, dtype) of the resident bridge
        self._fingerprints: dict[str, dict[str, str]] = {}  # tokenizer files' sha256 -> fingerprint
        #: Switch checkpoints by copying weights into the resident bridge (interp.sources.weight_swap)
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
            from interp.sources import weight_swap

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

    # -- the model's context, known before any weights load
    def _config_file(self, step: int) -> Path | None:
        """``step``'s ``config.json`` without reading its weights (None when not at hand)."""
        return None

    def context_length(self) -> tuple[int, str] | None:
        """Positions the model takes (tokens) and where that was read, from the first available
        step's ``config.json`` (``max_position_embeddings``, ``n_positions``, ``n_ctx``,
        ``max_sequence_length`` or ``seq_length``), before any weights load; None when unknown.

        Returns:
            ``(128, "max_position_embeddings in config.json")`` or None.
        """
        steps = self.available_steps()
        try:
            config_file = self._config_file(steps[0]) if steps else None
            raw = json.loads(config_file.read_text()) if config_file is not None else {}
        except Exception:  # not at hand (offline and not cached, no network): unknown
            return None
        for key in CONTEXT_KEYS:
            value = raw.get(key) if isinstance(raw, dict) else None
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value, f"{key} in config.json"
        return None

    def _limit_context(self, tokenizer) -> PreTrainedTokenizerBase:
        """``tokenizer`` with the model's context attached (:data:`interp.core.task_batch.CONTEXT_ATTRIBUTE`):
        every task checks its prompts against it when building its batch, before a model loads."""
        context = self.context_length()
        if context is not None:
            setattr(tokenizer, CONTEXT_ATTRIBUTE, (context[0], f"{self.model_id}: {context[1]}"))
        return tokenizer

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

    def loss_curve(self) -> pd.DataFrame | None:
        """The run's training loss per logged step, where the run records it (a local run's
        ``loss.csv`` or ``trainer_state.json``; see :meth:`LocalSuiteSource.loss_curve`).

        Returns:
            DataFrame with columns ``step`` (optimizer steps), ``loss`` (nats), ``lr``; None when
            the source records no loss (hub checkpoints carry none).
        """
        return None

    def missing_steps(self) -> list[int]:
        """Steps of the expected schedule that this source does not hold (ascending)."""
        return []

    def missing_detail(self, step: int) -> str:
        """Why a step of :meth:`missing_steps` is missing when more is known than its absence (a
        half-downloaded hub step: the file and the command that repairs it); ``""`` otherwise."""
        return ""

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
        switched in by copying its safetensors into that bridge (:mod:`interp.sources.weight_swap`), with
        the same digest and tokenizer checks; the returned model is then the resident bridge.

        Args:
            step: training step (optimizer steps); must be in :meth:`available_steps`.
            device: where the model goes; default ``cuda`` if available, else ``cpu``.

        Raises:
            CheckpointError: ``step`` is not available (names the nearest available steps).
            TokenizerMismatchError: ``step``'s tokenizer differs from the first one this source
                handed out (names both steps).
            CorruptCheckpointError: a weight file is truncated or its header overwritten, a shard
                its index names is absent, the folder holds two weight sets, or the weights hold a
                NaN or an inf (one line naming the step and the file).
            CheckpointError: the step's ``config.json`` asks for custom code (``auto_map``).
            ValueError: the checkpoint has only pickle weights and ``allow_pickle`` is off (one
                line naming the files), the model has no attention heads (nothing to patch), or the
                bridge cannot hook its architecture (one line naming it and the tested ones).
        """
        import time

        from transformer_lens.model_bridge import TransformerBridge
        from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

        from interp.sources import weight_swap

        step = self._check_step(step)
        started = time.perf_counter()
        ahead = self._take_ahead(step)
        if ahead is not None:
            (folder, revision, commit), files = ahead["resolved"], ahead["files"]
        else:
            folder, revision, commit = self._resolve(step)
            files = self._require_weights(folder, step)
        self.refuse_remote_code(step)
        self._refuse_corrupt(step, files)
        config_file = self._model_config_file(step, folder)
        self._require_attention(config_file, step)
        config_text = config_file.read_text()
        digest = self._digests.get(step) or weights_digest(files)
        self._digests[step] = digest
        tokenizer_dir = self._tokenizer_dir(step, folder)
        self._check_tokenizer_files(step, tokenizer_dir)
        device = _default_device(device)
        dtype = self.dtype
        safetensors_only = all(p.suffix == ".safetensors" for p in files)
        if (
            self.swap_weights
            and self._swap is not None
            and self._bridge is not None
            and safetensors_only
            and self._bridge_key == (device, dtype)
        ):
            read_ahead = ahead is not None and "tensors" in ahead
            tensors = ahead["tensors"] if read_ahead and ahead is not None else weight_swap.read_weights(files)
            self.read_seconds += time.perf_counter() - started
            self.refuse_non_finite(step, files, tensors)  # in memory: no second read
            if self._swap.fits(list(tensors), config_text):
                # a read-ahead's tensors are ours and already in the bridge's dtype: adopted, not copied
                self._swap.apply(tensors, adopt=read_ahead and device.type == "cpu")
                del tensors
                return LoadedCheckpoint(model=self._bridge, step=step, digest=digest, revision=revision, commit=commit)
            del tensors

        config = AutoConfig.from_pretrained(config_file, trust_remote_code=self.trust_remote_code)
        # A fresh tokenizer per boot: the bridge edits the one it gets (adds eos/pad tokens).
        tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)

        self._drop_bridge()  # drop the previous bridge before allocating the next one
        with quiet_hf_progress(), refuse_unsafe_pickle(self, step, files):
            hf_model = AutoModelForCausalLM.from_pretrained(
                folder,
                config=config,
                dtype=dtype,
                attn_implementation="eager",
                use_safetensors=None if self.allow_pickle else True,
                trust_remote_code=self.trust_remote_code,
            ).to(device)
        try:
            self.refuse_non_finite(step, files, hf_model.named_parameters())  # in memory: no second read
        except CorruptCheckpointError:
            del hf_model
            _release_memory()
            raise
        hf_named = dict(hf_model.named_parameters()) if self.swap_weights and safetensors_only else None
        with refuse_unhookable(self.model_id, step, config):
            bridge = TransformerBridge.boot_transformers(
                self._bridge_name(folder),
                hf_model=hf_model,
                tokenizer=tokenizer,
                dtype=dtype,
                device=device,
                trust_remote_code=self.trust_remote_code,
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
                logger.info(
                    "%s: no weight-swap plan for %s; every checkpoint boots a bridge", self.model_id, config.model_type
                )
        return LoadedCheckpoint(model=bridge, step=step, digest=digest, revision=revision, commit=commit)

    def _bridge_name(self, folder: Path) -> str:
        return self.model_id

    def _require_weights(self, folder: Path, step: int | None) -> list[Path]:
        files = weight_files(folder, self.allow_pickle)
        if files:
            return files
        pickles = [p.name for p in pickle_weight_files(folder)]
        if pickles:
            raise ValueError(
                f"{self.model_id} step {step} has only pickle weights ({', '.join(pickles)}), refused: "
                "unpickling can run code; only safetensors load unless allow_pickle (--allow-pickle) is given"
            )
        raise ValueError(f"{self.model_id} step {step} has no weight files in {folder}")

    def _model_config_file(self, step: int, folder: Path) -> Path:
        """The ``config.json`` that describes ``step``'s model: the checkpoint folder's own (a local
        run's config given once serves folders without one: :class:`LocalSuiteSource`)."""
        return folder / "config.json"

    def _require_attention(self, config_file: Path, step: int) -> None:
        # Read from config.json itself: transformers' config class divides by the head count and
        # would fail with a ZeroDivisionError. Models without these keys are checked after booting.
        if not config_file.is_file():
            raise ValueError(f"{self.model_id} step {step} has no config.json in {config_file.parent}")
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
        """Available steps minus :meth:`duplicate_steps`, :meth:`partial_duplicates`,
        :meth:`corrupt_steps` and :meth:`remote_code_steps`, sorted ascending."""
        left_out = set(self.duplicate_steps()) | set(self.partial_duplicates()) | set(self.corrupt_steps())
        left_out |= set(self.remote_code_steps())
        return [s for s in self.available_steps() if s not in left_out]

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
