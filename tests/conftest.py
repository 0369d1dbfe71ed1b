"""Shared test helpers and fixtures.

Checkpoint fixtures (tests/test_checkpoints.py): tiny random GPT-NeoX checkpoints saved with
``save_pretrained``, a byte-level tokenizer folder, and a Hugging Face hub cache built on disk in
the hub's own layout (``models--ORG--NAME/{blobs,refs,snapshots}``) so the hub code path runs
offline. Other modules may append their own fixtures below; these are self-contained.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest
import torch

TINY_REPO = "EleutherAI/pythia-14m-seed3"


def save_tiny_neox(directory: str | Path, seed: int = 0, d_model: int = 32, n_layers: int = 2,
                   n_heads: int = 4, d_vocab: int = 256, n_ctx: int = 64, safetensors: bool = True) -> Path:
    """Save a random GPT-NeoX (Pythia architecture: rotary on 25 % of head dims, parallel
    residual, untied embeddings) with ``save_pretrained``; returns ``directory``."""
    from transformers import GPTNeoXForCausalLM

    from interp.catalogue import neox_config

    config = neox_config(d_model, n_layers, n_heads, d_vocab, n_ctx)
    torch.manual_seed(seed)
    model = GPTNeoXForCausalLM(config).eval()
    directory = Path(directory)
    model.save_pretrained(directory)
    if not safetensors:  # transformers 5 always writes safetensors: convert to a pickle checkpoint
        from safetensors.torch import load_file

        weights = directory / "model.safetensors"
        torch.save(load_file(weights), directory / "pytorch_model.bin")
        weights.unlink()
    return directory


def save_byte_tokenizer(directory: str | Path) -> Path:
    """Save :func:`interp.checkpoints.make_byte_tokenizer` into ``directory``."""
    from interp.checkpoints import make_byte_tokenizer

    make_byte_tokenizer().save_pretrained(directory)
    return Path(directory)


def add_hub_revision(cache_dir: Path, repo_id: str, revision: str, files: dict[str, Path]) -> str:
    """Put ``files`` (name in repo -> file on disk) into a hub cache as branch ``revision``.

    Layout as huggingface_hub writes it: blobs named by sha256 (the LFS oid), one snapshot folder
    per commit whose entries are relative symlinks to the blobs, ``refs/{revision}`` holding the
    commit sha (40 hex, no newline). Returns the commit sha.
    """
    repo = cache_dir / ("models--" + repo_id.replace("/", "--"))
    for sub in ("blobs", "refs", "snapshots"):
        (repo / sub).mkdir(parents=True, exist_ok=True)
    digests = {}
    for name, src in sorted(files.items()):
        digest = hashlib.sha256(Path(src).read_bytes()).hexdigest()
        blob = repo / "blobs" / digest
        if not blob.exists():
            shutil.copyfile(src, blob)
        digests[name] = digest
    commit = hashlib.sha1(f"{revision}:{sorted(digests.items())}".encode()).hexdigest()
    snapshot = repo / "snapshots" / commit
    snapshot.mkdir(parents=True, exist_ok=True)
    for name, digest in digests.items():
        link = snapshot / name
        link.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(os.path.relpath(repo / "blobs" / digest, link.parent), link)
    (repo / "refs" / revision).write_text(commit)
    return commit


@pytest.fixture
def one_torch_thread():
    """One torch thread for the test (the value training runs use; restored afterwards)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def byte_tokenizer_dir(tmp_path_factory) -> Path:
    """A saved byte-level tokenizer (256 tokens, id = byte value)."""
    return save_byte_tokenizer(tmp_path_factory.mktemp("byte_tokenizer"))


@pytest.fixture(scope="session")
def tiny_hub_cache(tmp_path_factory, byte_tokenizer_dir) -> dict:
    """A hub cache holding ``EleutherAI/pythia-14m-seed3`` at step0, step1, step2 (step1's
    weights again, as the hub serves duplicated weights on some branches) and step4 (pickle
    weights only). Returns {"cache_dir", "repo_id", "commits", "models"} (models: step -> the
    saved checkpoint folder)."""
    root = tmp_path_factory.mktemp("hub")
    cache_dir = root / "cache"
    models = {0: save_tiny_neox(root / "m0", seed=0), 1: save_tiny_neox(root / "m1", seed=1),
              4: save_tiny_neox(root / "m4", seed=4, safetensors=False)}
    models[2] = models[1]
    tokenizer_files = {p.name: p for p in byte_tokenizer_dir.iterdir()}
    commits = {}
    for step, folder in sorted(models.items()):
        files = {p.name: p for p in folder.iterdir() if p.is_file()}
        commits[step] = add_hub_revision(cache_dir, TINY_REPO, f"step{step}", {**files, **tokenizer_files})
    return {"cache_dir": cache_dir, "repo_id": TINY_REPO, "commits": commits, "models": models}


@pytest.fixture(scope="session")
def tiny_local_suite(tmp_path_factory):
    """A local suite of three random tiny GPT-NeoX checkpoints (steps 0, 100, 200) and a tokenizer."""
    root = tmp_path_factory.mktemp("suite")
    for seed, step in enumerate([0, 100, 200]):
        save_tiny_neox(root / f"step{step}", seed=seed)
    save_byte_tokenizer(root / "tokenizer")
    return root


@pytest.fixture
def hub_offline(monkeypatch):
    """``HF_HUB_OFFLINE=1`` for this test: the env var and huggingface_hub's import-time constant."""
    from huggingface_hub import constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)


def load_analysis(name: str):
    """The reproduction module ``analyses.<name>`` (a package: ``python -m analyses.<name>``)."""
    import importlib

    return importlib.import_module(f"analyses.{name}")
