"""What besides a suite's config decides its trained weights: the training text (shipped with the
package, :data:`TRAINING_TEXT`), the torch and transformers releases, the CPU kernel level. Recorded in each run's suite.json
(:func:`environment`) and hashed into the suite's cache folder (:func:`environment_key`);
:mod:`interp.sources.embedded` trains with them, :mod:`interp.sources.catalogue` names the folder.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

if TYPE_CHECKING:
    from interp.sources.catalogue import SuiteConfig


#: The training text shipped with the package (``interp/data/``): its name, the sha256 of its
#: decompressed bytes (the suite key's ``corpus`` part) and its length in bytes. Version 1 is the
#: first 4,000,000 bytes of CPython 3.11.7's ``Lib/*.py`` sources (sorted by path, ``test``,
#: ``tests``, ``idlelib`` and ``site-packages`` left out, files joined by a newline; the files are
#: listed in ``training-text-v1.files.tsv``, their licence is ``training-text-v1.LICENSE.txt``):
#: exactly the text the documented suite was trained on when the trainer read the running
#: interpreter's standard library, so the documented weights did not change when it was shipped.
TRAINING_TEXT = {
    "name": "training-text-v1.xz",
    "sha256": "7fb0c883bd8ae8a6745388c3a2d4db79c7ec6998d902576c818c8f61cbb3d196",
    "n_bytes": 4_000_000,
}


class TrainingTextError(RuntimeError):
    """The training text shipped with the package is missing, unreadable or not the recorded bytes.

    Fix: reinstall the package (``make setup``, or ``pip install --force-reinstall emergence-lens``);
    a checkout's ``interp/data/training-text-v1.xz`` is restored by ``git checkout -- interp/data``.
    """


@functools.lru_cache(maxsize=1)
def _training_text_bytes() -> bytes:
    """The whole shipped training text, decompressed and checked against :data:`TRAINING_TEXT`."""
    import lzma
    from importlib.resources import files

    resource = files("interp.data").joinpath(TRAINING_TEXT["name"])
    try:
        data = lzma.decompress(resource.read_bytes())
    except (OSError, lzma.LZMAError) as error:
        raise TrainingTextError(
            f"the training text {resource} cannot be read ({error}); reinstall the package"
        ) from None
    digest = hashlib.sha256(data).hexdigest()
    if digest != TRAINING_TEXT["sha256"]:
        raise TrainingTextError(
            f"the training text {resource} is damaged: sha256 {digest[:16]}, recorded "
            f"{TRAINING_TEXT['sha256'][:16]}; reinstall the package"
        )
    return data


def training_text(max_bytes: int) -> np.ndarray:
    """The first ``max_bytes`` bytes of the training text shipped with the package.

    The same bytes on every interpreter and platform: the text is data of the package
    (:data:`TRAINING_TEXT`), checked against its recorded sha256 on first use, never read from the
    running Python's own files.

    Args:
        max_bytes: how many bytes (at most :data:`TRAINING_TEXT` ``["n_bytes"]``, 4,000,000).

    Returns:
        ``UInt8[ndarray, " n_bytes"]``: read-only, ``max_bytes`` long.

    Raises:
        ValueError: ``max_bytes`` is not in 1 .. 4,000,000.
        TrainingTextError: the shipped file is missing or damaged.
    """
    limit = TRAINING_TEXT["n_bytes"]
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or not 0 < max_bytes <= limit:
        raise ValueError(f"corpus_bytes={max_bytes!r}: the shipped training text has {limit:,} bytes; use 1 .. {limit}")
    return np.frombuffer(_training_text_bytes(), dtype=np.uint8)[:max_bytes]


@functools.lru_cache(maxsize=2)
def corpus_digest(max_bytes: int) -> str:
    """sha256 (hex) of :func:`training_text` ``(max_bytes)``: the training text's identity."""
    return hashlib.sha256(training_text(max_bytes).tobytes()).hexdigest()


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
    the sha256 of the training text (:func:`corpus_digest`), torch's CPU kernel level (``torch.backends.cpu.get_cpu_capability()``, or
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
    """The parts of :func:`environment` that change the weights (measured, see docs/embedded.md).

    - ``corpus``: the training text's digest (:func:`corpus_digest`; the package ships the text,
      so this changes only with the package's text version or ``cfg.corpus_bytes``);
    - ``cpu``: the kernel level the workers train with (the pinned set,
      :func:`interp.core.kernel_pins.level_label`, where the pins apply; else the level torch runs
      here: AVX2 and AVX-512 kernels give different weights after 300 steps);
    - ``torch`` and ``transformers``: their releases (kernels and model code). torch's local build
      label is left out (:func:`torch_release`): the registry's CUDA build of a release trains the
      same CPU bytes as its CPU build (docs/embedded.md, "What decides the bits").

    The interpreter is not a part: nothing the trainer reads depends on it. The thread count is
    part of the config (``cfg.threads``).
    """
    from interp.core import kernel_pins

    return {**recorded_key_parts(environment(cfg)), "cpu": kernel_pins.level_label()}


def torch_release(version: str | None) -> str | None:
    """A torch version without its local build label: ``"2.13.0+cu130"`` -> ``"2.13.0"`` (PEP 440's
    public version; ``None`` stays ``None``)."""
    return version.split("+", 1)[0] if version else version


def environment_key(cfg: SuiteConfig) -> str:
    """Short hash (8 hex digits) of :func:`environment_key_parts`: the second half of the suite's
    cache folder name (:func:`interp.sources.catalogue.suite_dir`)."""
    return hash_parts(environment_key_parts(cfg))


def hash_parts(parts: dict[str, str | None]) -> str:
    """8 hex digits of the sha256 of ``parts`` as sorted JSON: an environment key."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:8]


def recorded_key_parts(env: dict) -> dict[str, str | None]:
    """The environment key's parts in an :func:`environment` record (this process's, or a trained
    run's suite.json ``environment``), except ``cpu`` (the pins' label is not recorded):
    ``corpus``, ``torch`` (its release, :func:`torch_release`) and ``transformers``."""
    packages = env.get("packages") or {}
    return {
        "corpus": env.get("corpus_sha256"),
        "torch": torch_release(packages.get("torch")),
        "transformers": packages.get("transformers"),
    }


def why_trained_here(suite: Path, cfg: SuiteConfig) -> str | None:
    """One line, where ``suite`` (this environment's cache folder of ``cfg``) lacks runs that a
    folder of the same config trained in another environment holds: which folder, which part of
    the key differs (e.g. ``transformers 5.24.0 there, 5.25.0 here``) and why this environment
    trains its own copy. None where no such folder is cached.
    """
    digest = suite.name.split("-")[0]
    here = environment_key_parts(cfg)
    for other in sorted(suite.parent.glob(f"{digest}-*")):
        if other == suite or not other.is_dir():
            continue
        meta_files = sorted(other.glob("*/suite.json"))
        if not meta_files:
            continue
        try:
            there = recorded_key_parts(json.loads(meta_files[0].read_text(encoding="utf-8")).get("environment") or {})
        except (OSError, ValueError):
            continue
        differ = [f"{part} {there[part]} there, {here[part]} here" for part in there if there[part] != here[part]]
        what = "; ".join(differ) if differ else "the CPU kernel level"
        return (
            f"note: {other} holds this suite trained in another environment ({what}); the weights depend on "
            "it, so this environment trains its own copy in "
            f"{suite.name} (constraints.txt pins the documented versions; `emergence env` compares them)"
        )
    return None
