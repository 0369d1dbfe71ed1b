"""What loading a checkpoint needs, for every source: the errors, the tokenizer and digest helpers,
and the memory release between loads (:mod:`interp.sources.base` holds the source class itself).
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
from collections.abc import Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

import torch

from interp.core.devices import choose_device
from interp.core.training_state import OPTIMIZER_FILE
from interp.sources.families import PYTHIA_IDS_TEXT

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
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.json",
    "merges.txt",
    "tokenizer.model",
]
_VALID_HUB_IDS = PYTHIA_IDS_TEXT
_VALID_SPECS = (
    f"{_VALID_HUB_IDS}, another org/name hub repo whose branches name training steps "
    f"(emergence list-models), or an existing local suite folder (ROOT/step{{N}}/ checkpoint folders, or one checkpoint file per step)"
)


class CheckpointError(ValueError):
    """A step that the source does not hold (not on its schedule, not an integer, missing from
    the hub listing or the local suite, or, offline, not in the cache); the message names the
    model, the step and the nearest available steps. Also a step whose ``config.json`` asks for
    custom code (``auto_map``; ``checkpoints.csv`` status ``needs-remote-code``): this tool does
    not run a checkpoint's code.

    Fix: pick a step the source holds (``source.available_steps()``, ``emergence curve SRC``
    lists them; for a hub step not cached offline, download it first: ``emergence download MODEL
    --steps N``, or ``hf download MODEL --revision stepN``).
    """


class HubUnavailableError(ValueError):
    """The hub could not be reached (no network, a DNS failure such as ``[Errno -2] Name or service
    not known``, a proxy, a timeout) and the local hub cache does not hold what was asked (the
    branch listing, a step's files, their metadata); or, with ``HF_HUB_OFFLINE=1``, the cache does
    not hold it. The message names the repository, the branch and the cache folder. A step listed
    from the cache whose weights are not whole (a download cut short leaves only a
    ``blobs/<sha256>.incomplete``; a cache copied without a blob leaves a dangling snapshot link) is
    this too: the searches leave it out (``checkpoints.csv`` status ``missing``, the file and the
    repairing ``emergence download MODEL --steps N`` in ``detail``) and asking for it raises this.

    Fix: check the network (behind a proxy: ``HTTPS_PROXY``) and run again (an interrupted
    ``emergence download`` continues where it stopped); or, on a machine that has a network,
    fetch the branches (``emergence download MODEL --grid 30`` for a search whose steps are not
    known yet, ``--steps N,M`` for given steps; or ``hf download MODEL --revision stepN``, one per
    branch), copy its hub cache (``~/.cache/huggingface/hub``) here, or point ``HF_HUB_CACHE`` at
    it, and set ``HF_HUB_OFFLINE=1``. Offline, unset ``HF_HUB_OFFLINE`` to fetch what the cache
    lacks.
    """


class CorruptCheckpointError(CheckpointError):
    """A weight file of a step is truncated or its header overwritten, or the step's weight files
    lack a tensor the model needs (transformers would fill it at random, other values on every
    load) or hold one it does not have, or hold a NaN or an inf (a diverged step: "weights not
    finite: N tensors, e.g. ..."); a shard its ``*.index.json`` names is not in the folder, or the
    folder holds two weight sets (a ``model.safetensors`` beside complete shards, ``.bin`` beside
    safetensors: both named, neither chosen); in a local run, the step's ``config.json`` is missing, not
    JSON, or gives another model shape than the run's, or its pickle weights hold more than
    tensors (torch's weights-only unpickler refused them). The searches leave the step out
    (``checkpoints.csv`` status ``corrupt``, the file and what is wrong in ``detail``) and loading
    it raises this, naming the file.

    Fix: use another step, or delete that step's files and download (hub) or re-train or re-save
    (local run: ``model.save_pretrained``) them again.
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
    return [
        s
        for s in (available[i - 1] if i > 0 else None, available[i] if i < len(available) else None)
        if s is not None and s != step
    ]


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


#: Pickle files a checkpoint folder holds beside its weights: transformers ``Trainer``'s
#: arguments (``training_args.bin``); never a weight file.
NOT_WEIGHT_FILES = frozenset({"training_args.bin"})


def pickle_weight_files(folder: Path) -> list[Path]:
    """The ``.bin`` (pickle) weight files of one checkpoint folder, sorted (``training_args.bin`` and
    the like, :data:`NOT_WEIGHT_FILES`, left out)."""
    return sorted(p for p in folder.glob("*.bin") if p.name not in NOT_WEIGHT_FILES)


def weight_files(folder: Path, allow_pickle: bool = False) -> list[Path]:
    """The weight files of one checkpoint folder: safetensors, else (if allowed) pickle.

    A resumable checkpoint's optimizer state (:data:`interp.core.training_state.OPTIMIZER_FILE`) is not
    a weight file: two steps with the same weights but different optimizer moments are the same
    model, and the digest of the model must not depend on how it was trained. Nor is a
    ``Trainer``'s ``training_args.bin`` (:data:`NOT_WEIGHT_FILES`).
    """
    safe = sorted(p for p in folder.glob("*.safetensors") if p.name != OPTIMIZER_FILE)
    if safe or not allow_pickle:
        return safe
    return pickle_weight_files(folder)


def weight_candidates(folder: Path) -> list[Path]:
    """Every weight file of ``folder``, safetensors or pickle, whether or not pickle is allowed."""
    return weight_files(folder) or pickle_weight_files(folder)


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
#: garbage bounded (tests/interp/sources/test_checkpoints.py::test_resident_memory_over_30_loads: <= 10 % growth
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


@contextmanager
def refuse_unsafe_pickle(source, step: int, files: Sequence[Path]):
    """Turn torch's refusal of a pickle weight file (its weights-only unpickler met an object that
    is not a tensor: ``UnpicklingError``, several paragraphs that advise ``weights_only=False``)
    into one line naming the step, the file and the object, with no advice to turn the safety
    off; the step is then marked corrupt (``checkpoints.csv``) for the rest of the session.

    Raises:
        CorruptCheckpointError: inside the block, torch refused to unpickle ``files``.
    """
    import pickle

    try:
        yield
    except pickle.UnpicklingError as err:
        found = re.search(r"GLOBAL ([\w.]+)", str(err))
        what = f"it holds {found.group(1)}, not only tensors" if found else str(err).splitlines()[0][:120]
        names = ", ".join(p.name for p in files if p.suffix == ".bin") or ", ".join(p.name for p in files)
        reason = f"{names}: refused by torch's weights-only unpickler ({what})"
        source._problems[step] = reason
        raise CorruptCheckpointError(f"{source.model_id} step {step}: {reason}; the step is left out") from None


#: Architectures whose runs a test takes through the main job's steps: name -> (what the guide
#: calls it, the tests that hold it as ``file::test``). docs/guide.md's architecture table is
#: :func:`architecture_table` (tests/interp/main_job/test_gqa_run.py checks the page against it, and that every
#: test named exists).
ARCHITECTURE_TESTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "GPT-NeoX (Pythia, the embedded suites)": (
        "GPT-NeoX (Pythia; the embedded suites)",
        (
            "tests/interp/main_job/test_main_job.py::test_main_job_tables_and_report",
            "tests/interp/patching/test_patching.py",
        ),
    ),
    "GPT-2": (
        "GPT-2 (a `Trainer` run; nanoGPT `.pt` files)",
        (
            "tests/project/test_own_run.py::test_own_training_run_script_finds_a_real_point_of_emergence",
            "tests/interp/sources/test_checkpoint_files.py::test_nanogpt_checkpoints_give_nanogpts_logits",
            "tests/interp/patching/test_patching_families.py",
        ),
    ),
    "Llama (grouped-query attention too)": (
        "Llama-style: RMSNorm, rotary, SwiGLU, grouped-query attention",
        (
            "tests/interp/main_job/test_gqa_run.py::test_emergence_run_with_head_scores_on_a_grouped_query_suite",
            "tests/interp/patching/test_patching_families.py",
        ),
    ),
    "Qwen2 (grouped-query attention)": (
        "Qwen2 (grouped-query attention, biased q/k/v)",
        ("tests/interp/main_job/test_gqa_run.py::test_emergence_run_with_head_scores_on_a_grouped_query_suite",),
    ),
    "OLMo-2": (
        "OLMo-2 (norms after attention and MLP, QK-norm)",
        ("tests/interp/patching/test_patching_families.py::test_joint_and_weight_targets_fast_equal_reference",),
    ),
}
TESTED_ARCHITECTURES = tuple(ARCHITECTURE_TESTS)


def architecture_table() -> str:
    """docs/guide.md's table of the architectures the tests take through the main job (markdown)."""
    rows = ["| architecture | held by |", "| --- | --- |"]
    for label, tests in ARCHITECTURE_TESTS.values():
        rows.append(f"| {label} | {', '.join(f'`{t}`' for t in tests)} |")
    return "\n".join(rows) + "\n"


@contextmanager
def refuse_unhookable(model_id: str, step: int, config):
    """Turn the bridge's refusal of an architecture it has no adapter for (a ``ValueError`` that
    lists some hundred class names) into one line naming the architecture and the tested ones.

    Raises:
        ValueError: inside the block, ``TransformerBridge.boot_transformers`` found no adapter.
    """
    try:
        yield
    except ValueError as err:
        if "supported architecture" not in str(err):
            raise
        name = ", ".join(getattr(config, "architectures", None) or []) or getattr(config, "model_type", "?")
        raise ValueError(
            f"{model_id} step {step}: {name} is not an architecture the TransformerLens bridge can hook; "
            f"tested here through the whole main job: {'; '.join(TESTED_ARCHITECTURES)} "
            "(the bridge's own list: transformer_lens.model_bridge.supported_architectures)"
        ) from None


def _default_device(device: str | torch.device | None) -> torch.device:
    if isinstance(device, torch.device):
        return device
    return torch.device(choose_device(device))


# ----------------------------------------------------------------------------- sources


def upcast_softmax(bridge) -> int:
    """Make every attention of ``bridge`` take its softmax in float32 and cast the pattern back to
    the scores' dtype before ``hook_pattern`` (TransformerLens's own ``upcast_to_fp32`` option of
    its softmax step, which the GPT-NeoX attention does not turn on;
    :func:`interp.core.adapters.transformer_lens.upcast_attention_softmax`): the bridge's softmax
    is otherwise taken in the model's dtype, and float16 gave NaNs on pythia-70m-deduped
    (TransformerLens issue #104). Returns the number of attention modules changed."""
    from interp.core.adapters.transformer_lens import upcast_attention_softmax

    return sum(upcast_attention_softmax(module) for module in bridge.modules())
