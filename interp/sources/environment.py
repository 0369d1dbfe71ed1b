"""What besides a suite's config decides its trained weights: the training text (the standard
library's sources), the package versions, the CPU kernel level. Recorded in each run's suite.json
(:func:`environment`) and hashed into the suite's cache folder (:func:`environment_key`);
:mod:`interp.sources.embedded` trains with them, :mod:`interp.sources.catalogue` names the folder.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import sysconfig
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

if TYPE_CHECKING:
    from interp.sources.catalogue import SuiteConfig


#: Folders of the standard library left out of the training text (at any depth).
_LEFT_OUT = frozenset({"site-packages", "test", "tests", "idlelib"})


def _sources_in_path_order(folder: Path) -> Iterator[Path]:
    """The ``.py`` files under ``folder`` in the order of ``sorted(folder.rglob("*.py"))`` (paths
    compared part by part), skipping the :data:`_LEFT_OUT` folders and symlinked folders.

    A depth-first walk over each folder's entries sorted by name yields exactly that order, so
    a caller that needs only the first few MB stops after a few folders instead of listing all
    ~13 000 paths of the standard library first (3 s of ``rglob`` on a 2-core machine).
    """
    with os.scandir(folder) as scan:
        entries = sorted(scan, key=lambda entry: entry.name)
    for entry in entries:
        if entry.is_dir() and not entry.is_symlink():
            if entry.name not in _LEFT_OUT:
                yield from _sources_in_path_order(Path(entry.path))
        elif entry.name.endswith(".py"):
            yield Path(entry.path)


@functools.lru_cache(maxsize=2)
def stdlib_corpus(max_bytes: int) -> np.ndarray:
    """The bytes of the standard library's ``.py`` sources, sorted by path, concatenated.

    Tests and site-packages are left out (:data:`_LEFT_OUT`). The corpus depends on the Python
    version: the suite's cache folder is keyed by it too. The files are read in the order of
    ``sorted(stdlib.rglob("*.py"))`` (:func:`_sources_in_path_order`; the tests hold the two equal).

    Returns:
        ``uint8`` array of at most ``max_bytes`` bytes.
    """
    chunks, total = [], 0
    for path in _sources_in_path_order(Path(sysconfig.get_paths()["stdlib"])):
        data = path.read_bytes()
        chunks.append(data)
        total += len(data)
        if total >= max_bytes:
            break
    return np.frombuffer(b"\n".join(chunks)[:max_bytes], dtype=np.uint8)


@functools.lru_cache(maxsize=2)
def corpus_digest(max_bytes: int) -> str:
    """sha256 (hex) of :func:`stdlib_corpus` ``(max_bytes)``: the training text's identity."""
    return hashlib.sha256(stdlib_corpus(max_bytes).tobytes()).hexdigest()


def simd_flags() -> list[str]:
    """The CPU's SIMD feature flags (avx*, fma, amx*, sse4*) from /proc/cpuinfo; [] elsewhere."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return []
    flags = next((line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith("flags")), [])
    return sorted(f for f in flags if f.startswith(("avx", "amx", "sse4", "fma")))


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``'s ``model name``; the platform's processor or machine elsewhere)."""
    import platform

    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def environment(cfg: SuiteConfig) -> dict:
    """What, besides the config, can change the trained weights: recorded in each run's suite.json.

    Package versions (torch, transformers, transformer_lens, numpy), the full Python version,
    the sha256 of the training text (the standard library's sources differ between Python patch
    releases), torch's CPU kernel level (``torch.backends.cpu.get_cpu_capability()``, or
    ``ATEN_CPU_CAPABILITY`` when set), the CPU model and SIMD flags, the torch thread count, and
    ``kernel_pins``: whether this process runs with :data:`interp.core.kernel_pins.PINS` (and if not, why).
    """
    import sys
    from importlib.metadata import PackageNotFoundError, version

    from interp.core import kernel_pins

    def pkg(name: str) -> str | None:
        try:
            return version(name)
        except PackageNotFoundError:
            return None

    return {
        "python": sys.version.split()[0],
        "python_full": sys.version,
        "packages": {name: pkg(name) for name in ("torch", "transformers", "transformer-lens", "numpy", "safetensors")},
        "corpus_sha256": corpus_digest(cfg.corpus_bytes),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "aten_cpu_capability_env": os.environ.get("ATEN_CPU_CAPABILITY"),
        "cpu_model": cpu_model(),
        "cpu_simd_flags": simd_flags(),
        "torch_threads": torch.get_num_threads(),
        "kernel_pins": kernel_pins.record(),
    }


def environment_key_parts(cfg: SuiteConfig) -> dict[str, str | None]:
    """The parts of :func:`environment` that change the weights (measured here, see
    docs/embedded.md): ``corpus``, the training text's digest (the standard library's sources:
    another Python version gives another text); ``cpu``, the kernel level the workers train with
    (the pinned set, :func:`interp.core.kernel_pins.level_label`, where the pins apply; else the
    level torch runs here: AVX2 and AVX-512 kernels give different weights after 300 steps);
    ``torch`` and ``transformers``, their versions (their kernels and model code). The thread
    count is part of the config (``cfg.threads``)."""
    from interp.core import kernel_pins

    env = environment(cfg)
    return {
        "corpus": env["corpus_sha256"],
        "torch": env["packages"]["torch"],
        "transformers": env["packages"]["transformers"],
        "cpu": kernel_pins.level_label(),
    }


def environment_key(cfg: SuiteConfig) -> str:
    """Short hash (8 hex digits) of :func:`environment_key_parts`: the second half of the suite's
    cache folder name (:func:`interp.sources.catalogue.suite_dir`)."""
    return hash_parts(environment_key_parts(cfg))


def hash_parts(parts: dict[str, str | None]) -> str:
    """8 hex digits of the sha256 of ``parts`` as sorted JSON: an environment key."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:8]
