"""Checkpoint sources from names, the same way for Python and the command line.

A source name is a hub id (Pythia/PolyPythia, or any repo whose branches name training steps,
``ID[:SERIES]``), a local suite folder, or an embedded name
(``embedded``, ``embedded-quick``: every run of that suite; ``embedded/<run>``,
``embedded-quick/<run>``: one run). :func:`check_source_name` refuses a bad name before
anything is loaded or trained; :func:`open_sources` opens the sources (training an embedded
suite on first use); :func:`interp.checkpoints.open_source` opens one.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from interp.catalogue import SUITES, is_embedded_name, is_hub_id, resolve_embedded

if TYPE_CHECKING:
    from interp.checkpoints import CheckpointSource

VALID_NAMES = ("a Pythia/PolyPythia hub id (EleutherAI/pythia-{14m,31m,70m,160m,410m}[-seed{1..9}]), "
               "another org/name hub repo whose branches name training steps (ID[:SERIES], e.g. OLMo-2), "
               "an existing local suite folder, embedded, embedded-quick, or embedded[-quick]/<run> "
               "(emergence list-models prints them all)")


def _looks_like_path(name: str) -> bool:
    return name.startswith(("/", "./", "../", "~")) or Path(name).expanduser().exists()


def check_source_name(name: str) -> int:
    """Check a source name without loading or training anything; returns how many runs it names.

    Raises:
        ValueError: an unknown name (the valid forms listed), an unknown embedded run (the valid
            runs listed), or a local path that is not an existing folder.
    """
    if is_embedded_name(name):
        return len(resolve_embedded(name))
    if _looks_like_path(name):
        if not Path(name).expanduser().is_dir():
            raise ValueError(f"local suite folder {name!r} does not exist")
        return 1
    if is_hub_id(name.partition(":")[0]):  # ID:SERIES picks a series of step-named branches
        return 1
    raise ValueError(f"unknown checkpoint source {name!r}: expected {VALID_NAMES}")


def check_one_run(name: str, what: str) -> None:
    """Check that ``name`` names exactly one run (``what`` takes one run).

    Raises:
        ValueError: as :func:`check_source_name`, or a suite name with several runs (the message
            lists them).
    """
    if check_source_name(name) != 1:
        runs = [f"{name}/{run}" for _, run in resolve_embedded(name)]
        raise ValueError(f"{what} takes one run, and {name!r} names {len(runs)}: use one of {', '.join(runs)}")


def open_sources(names: Sequence[str], progress: bool = True) -> list["CheckpointSource"]:
    """Open every source named (a suite name expands to its runs), in the order given.

    Every name is checked first (:func:`check_source_name`), and every hub or local source is
    opened before any embedded suite is trained, so a bad name or a hub repo that cannot be
    listed fails before minutes of training.

    Args:
        names: source names (see the module docstring).
        progress: show the training bar when an embedded suite is trained.

    Raises:
        ValueError: see :func:`check_source_name`; a hub repo that cannot be listed (offline
            without a cache, or no such repo) raises its own error here.
    """
    from interp.checkpoints import LocalSuiteSource, open_source

    for name in names:
        check_source_name(name)
    opened = {name: open_source(Path(name).expanduser() if name.startswith("~") else name)
              for name in dict.fromkeys(names) if not is_embedded_name(name)}
    for source in opened.values():
        source.tokenizer()  # a hub listing is lazy: a repo with no step branches fails here, before any training
    sources = []
    for name in names:
        if name in opened:
            sources.append(opened[name])
            continue
        from interp import embedded

        for cfg, run in resolve_embedded(name):
            folders = embedded.ensure_suite(cfg, progress=progress)
            sources.append(LocalSuiteSource(folders[cfg.run_names().index(run)]))
    return sources


__all__ = ["SUITES", "VALID_NAMES", "check_one_run", "check_source_name", "open_sources"]
