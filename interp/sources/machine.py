"""This machine against the documented one: what a bug report needs, and whether this machine
trains the embedded suite docs/ describe (``emergence env``, ``el.environment_report()``).

The suite's cache folder is ``<config digest>-<environment key>``
(:func:`interp.sources.catalogue.suite_dir`); :data:`DOCUMENTED_SUITES` keeps the documented
suite's folder and the parts of its key (:func:`interp.sources.environment.environment_key_parts`),
so that a machine whose folder differs is told which part differs and why.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

from interp.sources.environment import cpu_model, environment_key_parts, simd_flags

#: The embedded suites docs/ describe, by source name: the cache folder each was trained in
#: (``<config digest>-<environment key>``), the parts of that environment key
#: (:func:`interp.sources.environment.environment_key_parts`, so that another machine is told which
#: part differs) and the pages that quote it. The interpreter is no part of it: the training text
#: ships with the package (the same weights on Python 3.11.2, 3.11.7, 3.12 and 3.13).
DOCUMENTED_SUITES: dict[str, dict] = {
    "embedded": {
        "folder": "7cdb30f57c9a-66090669",
        "key_parts": {
            "corpus": "7fb0c883bd8ae8a6745388c3a2d4db79c7ec6998d902576c818c8f61cbb3d196",
            "torch": "2.13.0",
            "transformers": "5.24.0",
            "cpu": "pinned:ATEN_CPU_CAPABILITY=avx2,MKL_CBWR=AVX2,ONEDNN_MAX_CPU_ISA=AVX2",
        },
        "pages": ("docs/results.md", "docs/embedded.md", "README.md"),
    },
}


def _why_part_differs(part: str, documented: dict) -> str:
    """One line: what makes ``part`` of the environment key differ here, and what would make it agree."""
    from interp.core import kernel_pins

    if part == "corpus":
        return (
            "the training text differs from the documented one (another corpus_bytes in the suite's settings, "
            "or another version of the package's text): train with the package's interp/data/training-text-v1.xz"
        )
    if part == "cpu":
        why = kernel_pins.why_not()
        return f"the kernel pins do not apply here: {why}" if why else "the kernel level differs"
    want = documented["key_parts"][part]
    return f"{part} {want} trained the documented suite: install it (constraints.txt pins the versions)"


def environment_report(root: str | Path | None = None) -> dict:
    """What a bug report needs, and whether this machine trains the embedded suites docs/ describe.

    ``emergence env`` prints it (``--json``: as it is). Keys:

    - ``emergence_lens``: ``version``, and ``git_commit`` / ``git_dirty`` when it runs from a checkout;
    - ``python``, ``platform``, ``packages`` (distribution -> version, None when not installed);
    - ``torch``: ``threads``, ``cuda`` (device names, [] without CUDA), ``cuda_version``, ``mps``;
    - ``cpu``: ``model``, ``vendor``, ``simd_flags``, ``avx512f`` (bool), ``torch_level`` (the kernel
      level torch runs in this process) and ``ATEN_CPU_CAPABILITY`` (the variable, None when unset);
    - ``kernel_pins``: ``apply`` (bool), ``why_not`` (one line, or None), ``pins`` (the variables
      the trainer's workers get);
    - ``cache_root`` and ``suites``: per embedded suite (``embedded-quick``, ``embedded``), its
      ``folder`` here, ``runs``, ``runs_cached`` (complete run folders in the cache) and
      ``interrupted``: the folders killed training workers left, each with ``resumes_from_step``
      (the checkpoint the next training continues it from; None: it is removed and the run
      trained again); for the suite docs/ quote (:data:`DOCUMENTED_SUITES`) also
      ``documented_folder``, ``same_as_documented`` and ``differs``: the key parts that differ,
      each with why (a user whose folder differs trains other weights, and the documented points
      of emergence need not hold there).

    Args:
        root: the cache root (default: :func:`interp.core.io.cache_root`); ``~`` is expanded.

    Returns:
        A JSON-safe dict (strings, numbers, bools, None, lists, dicts).

    Raises:
        ValueError: ``root`` exists and is not a folder.
    """
    import platform

    from interp.core import kernel_pins
    from interp.core.io import cache_root
    from interp.core.provenance import git_state, package_versions
    from interp.sources.catalogue import SUITES, suite_dir
    from interp.sources.interrupted import resumable_step, stopped_worker_folders

    root = Path(root).expanduser() if root is not None else cache_root()
    if root.exists() and not root.is_dir():
        raise ValueError(
            f"the cache root {str(root)!r} (--cache) is a file, not a folder: give a folder, or leave it out"
        )
    versions = package_versions()
    versions.pop("python", None)
    try:
        from importlib.metadata import version

        versions["ray"] = version("ray")
    except Exception:  # PackageNotFoundError, or a broken install: reported as missing
        versions["ray"] = None
    flags = simd_flags()
    suites = []
    for name, cfg in SUITES.items():
        folder = suite_dir(cfg, root)
        entry: dict = {
            "name": name,
            "folder": folder.name,
            "runs": len(cfg.run_names()),
            "runs_cached": sum((folder / run / "suite.json").is_file() for run in cfg.run_names()),
            "interrupted": [
                {"folder": tmp.name, "resumes_from_step": (resumable_step(tmp) or (None,))[0]}
                for tmp in stopped_worker_folders(folder)
            ],
        }
        documented = DOCUMENTED_SUITES.get(name)
        if documented is not None:
            parts = environment_key_parts(cfg)
            config_digest = folder.name.split("-")[0]
            differs = {
                part: _why_part_differs(part, documented)
                for part, value in parts.items()
                if value != documented["key_parts"][part]
            }
            if config_digest != documented["folder"].split("-")[0]:
                differs["config"] = "the suite's settings differ from the documented ones (a changed SuiteConfig)"
            entry.update(
                documented_folder=documented["folder"],
                same_as_documented=folder.name == documented["folder"],
                differs=differs,
                pages=list(documented["pages"]),
            )
        suites.append(entry)
    cuda = torch.cuda.is_available()
    return {
        "emergence_lens": {
            "version": versions.pop("emergence-lens", None),
            **git_state(Path(__file__).resolve().parents[2]),
        },
        "python": platform.python_version(),
        "platform": platform.platform(),
        "packages": versions,
        "torch": {
            "threads": torch.get_num_threads(),
            "cuda": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())] if cuda else [],
            "cuda_version": torch.version.cuda,
            "mps": bool(getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()),
        },
        "cpu": {
            "model": cpu_model(),
            "vendor": kernel_pins.cpu_vendor(),
            "simd_flags": flags,
            "avx512f": "avx512f" in flags,
            "torch_level": torch.backends.cpu.get_cpu_capability(),
            "ATEN_CPU_CAPABILITY": os.environ.get("ATEN_CPU_CAPABILITY"),
        },
        "kernel_pins": {
            "apply": kernel_pins.pins_apply(),
            "why_not": kernel_pins.why_not(),
            "pins": dict(kernel_pins.PINS),
        },
        "cache_root": str(root),
        "suites": suites,
    }


def format_environment_report(report: dict) -> str:
    """:func:`environment_report` as the lines ``emergence env`` prints (plain text, paste-able
    into an issue)."""
    el, cpu, pins, tch = report["emergence_lens"], report["cpu"], report["kernel_pins"], report["torch"]
    commit = el.get("git_commit")
    where = f" (git {commit[:12]}{', uncommitted changes' if el.get('git_dirty') else ''})" if commit else ""
    packages = ", ".join(f"{k} {v or 'not installed'}" for k, v in report["packages"].items())
    gpus = ", ".join(tch["cuda"]) + f" (CUDA {tch['cuda_version']})" if tch["cuda"] else "no CUDA device"
    level = cpu["torch_level"] + (
        f" (ATEN_CPU_CAPABILITY={cpu['ATEN_CPU_CAPABILITY']})" if cpu["ATEN_CPU_CAPABILITY"] else ""
    )
    lines = [
        f"emergence-lens   {el['version']}{where}",
        f"python           {report['python']} on {report['platform']}",
        f"packages         {packages}",
        f"torch            {tch['threads']} CPU threads; {gpus}{'; MPS' if tch['mps'] else ''}",
        (
            f"cpu              {cpu['model']} ({cpu['vendor'] or 'vendor unknown'}); "
            f"AVX-512: {'yes' if cpu['avx512f'] else 'no'}; SIMD flags: {' '.join(cpu['simd_flags']) or 'unknown'}"
        ),
        f"torch kernels    {level} in this process",
        "kernel pins      "
        + (
            "apply: suite runs train with " + ", ".join(f"{k}={v}" for k, v in pins["pins"].items())
            if pins["apply"]
            else f"do not apply: {pins['why_not']}"
        ),
        f"cache            {report['cache_root']}",
    ]
    for suite in report["suites"]:
        line = f"  {suite['name']:<15}embedded/{suite['folder']}: {suite['runs_cached']} of {suite['runs']} runs cached"
        froms = [i["resumes_from_step"] for i in suite["interrupted"]]
        if any(step is not None for step in froms):
            line += "; interrupted, continued by the next training from step " + ", ".join(
                str(step) for step in froms if step is not None
            )
        if None in froms:
            line += f"; {froms.count(None)} interrupted with nothing to continue from (trained again)"
        lines.append(line)
        if "documented_folder" in suite:
            pages = ", ".join(suite["pages"])
            if suite["same_as_documented"]:
                lines.append(f"{'':17}the suite {pages} describe: this machine trains the same weights")
            else:
                lines.append(
                    f"{'':17}NOT the suite {pages} describe (embedded/{suite['documented_folder']}): this machine "
                    "trains other weights, and the documented points of emergence need not hold here, because"
                )
                lines += [f"{'':19}{part}: {why}" for part, why in suite["differs"].items()]
    return "\n".join(lines)
