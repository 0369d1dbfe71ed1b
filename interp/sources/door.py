"""Checkpoint sources from names, the same way for Python and the command line.

A source name is a hub id (Pythia/PolyPythia, or any repo whose branches name training steps,
``ID[:SERIES]``), a local suite folder, or an embedded name
(``embedded``, ``embedded-quick``: every run of that suite; ``embedded/<run>``,
``embedded-quick/<run>``: one run). :func:`check_source_name` refuses a bad name before
anything is loaded or trained; :func:`open_sources` opens the sources (training an embedded
suite on first use); :class:`ReadySources` hands them out as each becomes ready (the main job
analyses trained runs while the others train); :func:`open_source` opens one (the one door: hub id, local folder or embedded run).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from interp.core.near_names import near_name
from interp.sources.catalogue import (
    SUITE_PREFIX,
    SUITES,
    embedded_source_names,
    is_embedded_name,
    is_hub_id,
    resolve_embedded,
    shipped_spec_names,
)
from interp.sources.families import PYTHIA_IDS_TEXT

if TYPE_CHECKING:
    from interp.sources.base import CheckpointSource

# Light on imports (torch, transformers and the sources' modules load inside the functions that
# open something), so that a bad name is refused at once: 3.5 s for `emergence run embeded/...` at
# load 20 on 2 cores, where importing them took 20 s more (issue 71).

VALID_NAMES = (
    f"{PYTHIA_IDS_TEXT}, "
    "another org/name hub repo whose branches name training steps (ID[:SERIES], e.g. OLMo-2), "
    "an existing local suite folder, embedded, embedded-quick, or embedded[-quick]/<run> "
    "(emergence list-models prints them all)"
)


def _looks_like_path(name: str) -> bool:
    return name.startswith(("/", "./", "../", "~")) or Path(name).expanduser().exists()


def shipped_source_names() -> list[str]:
    """Every source name the package ships: the embedded ones (:func:`embedded_source_names`) and
    ``suite:<spec>`` for each shipped suite spec."""
    return embedded_source_names() + [f"{SUITE_PREFIX}{name}" for name in shipped_spec_names()]


def check_source_name(name: str) -> int:
    """Check a source name without loading or training anything; returns how many runs it names.

    A name a few edits from a shipped one (:func:`interp.sources.catalogue.near_name`:
    ``embeded/neox-2l-64d-seed0``) is refused with "did you mean", before it could be taken for a
    hub repo and fetched.

    Raises:
        ValueError: an unknown name (the valid forms listed), a name near a shipped one (that one
            named), an unknown embedded run (the valid runs listed, the nearest named), or a local
            path that is not an existing folder.
    """
    if is_embedded_name(name):
        return len(resolve_embedded(name))
    if _looks_like_path(name):
        path = Path(name).expanduser()
        if path.is_file():
            raise ValueError(
                f"local suite {name!r} is a file; give the folder that holds the run's checkpoints "
                f"({str(path.parent)!r}: one checkpoint folder or file per step)"
            )
        if not path.is_dir():
            raise ValueError(f"local suite folder {name!r} does not exist")
        return 1
    near = near_name(name, shipped_source_names())  # before the hub: a typo is not a repo to fetch
    if near is not None:
        raise ValueError(
            f"unknown checkpoint source {name!r}; did you mean {near!r}? (emergence list-models prints every name)"
        )
    if is_hub_id(name.partition(":")[0]):  # ID:SERIES picks a series of step-named branches
        return 1
    raise ValueError(unknown_source_message(name, VALID_NAMES))


def unknown_source_message(name: str, valid: str) -> str:
    """The one line refusing an unknown source name: the name that works when ``name`` is a bare
    run of an embedded suite (``neox-2l-128d-seed2`` -> ``embedded/neox-2l-128d-seed2``), else the
    valid forms."""
    from interp.sources.catalogue import embedded_source_names

    for prefix in ("embedded/", "embedded-quick/"):
        if prefix + name in embedded_source_names():
            return f"unknown checkpoint source {name!r}; did you mean {prefix + name!r}?"
    return f"unknown checkpoint source {name!r}: expected {valid}"


def check_one_run(name: str, what: str) -> None:
    """Check that ``name`` names exactly one run (``what`` takes one run).

    Raises:
        ValueError: as :func:`check_source_name`, or a suite name with several runs (the message
            lists them).
    """
    if check_source_name(name) != 1:
        runs = [f"{name}/{run}" for _, run in resolve_embedded(name)]
        raise ValueError(f"{what} takes one run, and {name!r} names {len(runs)}: use one of {', '.join(runs)}")


def open_sources(
    names: Sequence[str],
    progress: bool = True,
    include_zoom: bool = False,
    allow_pickle: bool = False,
    step_pattern: str | None = None,
    config: str | Path | None = None,
) -> list[CheckpointSource]:
    """Open every source named (a suite name expands to its runs), in the order given.

    Every name is checked first (:func:`check_source_name`), and every hub or local source is
    opened before any embedded suite is trained, so a bad name or a hub repo that cannot be
    listed fails before minutes of training.

    Args:
        names: source names (see the module docstring).
        progress: show the training bar when an embedded suite is trained.
        include_zoom: local and embedded runs also offer the steps ``emergence zoom`` stored in
            their overlay (``LocalSuiteSource(include_zoom=True)``).
        allow_pickle: hub and local sources also load ``.bin`` (pickle) weights of steps without
            safetensors (``--allow-pickle``; unpickling can run code).
        step_pattern: how local runs name their checkpoint folders (``"epoch{E}-step{N}"``,
            ``--step-pattern``; :mod:`interp.sources.layouts`); None: recognised. Hub and
            embedded names ignore it.
        config: a local run's model ``config.json`` (or its folder) for the steps that hold none
            (``--config``; :class:`interp.sources.local.LocalSuiteSource`). Hub and embedded names ignore it.

    Raises:
        ValueError: see :func:`check_source_name`; a hub repo that cannot be listed (offline
            without a cache, or no such repo) raises its own error here; a local folder whose
            checkpoint folders follow no convention, or two (:func:`interp.sources.layouts.find_step_folders`).
    """
    ready = ReadySources(
        names,
        progress=progress,
        include_zoom=include_zoom,
        allow_pickle=allow_pickle,
        step_pattern=step_pattern,
        config=config,
    )
    by_position = dict(ready.with_positions())
    return [by_position[i] for i in range(len(ready))]


class ReadySources:
    """The sources ``names`` name, iterated as each becomes ready: hub and local sources first,
    then embedded runs, each as soon as it is trained and a core is free
    (:func:`interp.sources.embedded.iter_suite`), so that the main job analyses finished runs while the
    last ones train.

    Constructing it checks every name and opens the hub and local sources (the same early
    failures as :func:`open_sources`); iterating it trains what is missing.
    :func:`interp.main_job.runner.run_study` reads :meth:`with_positions` and reports the runs in the
    order of ``names`` (suite names expanded to their runs), whatever order they arrived in.

    Raises:
        ValueError: as :func:`open_sources`.
    """

    def __init__(
        self,
        names: Sequence[str],
        progress: bool = True,
        include_zoom: bool = False,
        allow_pickle: bool = False,
        step_pattern: str | None = None,
        config: str | Path | None = None,
    ) -> None:
        for name in names:
            check_source_name(name)
        self.progress = progress
        self.include_zoom = include_zoom
        self.allow_pickle = allow_pickle
        options = {
            "include_zoom": include_zoom,
            "allow_pickle": allow_pickle,
            "step_pattern": step_pattern,
            "config": config,
        }
        self._opened = {
            name: open_source(Path(name).expanduser() if name.startswith("~") else name, **options)
            for name in dict.fromkeys(names)
            if not is_embedded_name(name)
        }
        for source in self._opened.values():
            source.tokenizer()  # a hub listing is lazy: a repo with no step branches fails here, before any training
        # (position, opened name) or (position, suite config, run name), in the order of ``names``
        self._slots: list[tuple] = []
        #: (suite config, run) -> the name the run is opened under: the suite as the user named it
        #: (``embedded-quick/<run>`` stays that, never the full suite's ``embedded/<run>``)
        self._labels: dict[tuple[int, str], str] = {}
        for name in names:
            if name in self._opened:
                self._slots.append((len(self._slots), name))
            else:
                for cfg, run in resolve_embedded(name):
                    self._slots.append((len(self._slots), cfg, run))
                    suite = name[: -len(run) - 1] if name.endswith(f"/{run}") else name
                    self._labels.setdefault((id(cfg), run), f"{suite}/{run}")

    def __len__(self) -> int:
        return len(self._slots)

    def __iter__(self) -> Iterator[CheckpointSource]:
        for _, source in self.with_positions():
            yield source

    def with_positions(self) -> Iterator[tuple[int, CheckpointSource]]:
        """``(position, source)`` as each source becomes ready; positions follow ``names``."""
        from interp.sources import embedded
        from interp.sources.local import LocalSuiteSource

        for slot in self._slots:
            if len(slot) == 2:
                yield slot[0], self._opened[slot[1]]
        suites = list(dict.fromkeys(slot[1] for slot in self._slots if len(slot) == 3))
        for cfg in suites:
            wanted: dict[str, list[int]] = {}
            for slot in self._slots:
                if len(slot) == 3 and slot[1] is cfg:
                    wanted.setdefault(slot[2], []).append(slot[0])
            for run, folder in embedded.iter_suite(cfg, progress=self.progress):
                for position in wanted.get(run, []):
                    yield (
                        position,
                        LocalSuiteSource(
                            folder,
                            model_id=self._labels.get((id(cfg), run)),
                            include_zoom=self.include_zoom,
                            allow_pickle=self.allow_pickle,
                        ),
                    )


def open_source(spec: str | Path, **kwargs) -> CheckpointSource:
    """Open a checkpoint source: an existing folder -> :class:`LocalSuiteSource`; a hub id ->
    :class:`HubSource`.

    A hub spec may name the series to follow after a colon (hub ids never hold one):
    ``allenai/OLMo-2-1124-7B:stage2-ingredient1``; ``ID:`` follows the plain ``step{N}`` names.

    Args:
        spec: a hub id (``org/name[:SERIES]``) or a local suite folder.
        **kwargs: passed to the source's constructor; for a local suite only ``model_id``,
            ``allow_pickle``, ``include_zoom``, ``step_pattern`` (how its checkpoint folders are
            named, e.g. ``"epoch{E}-step{N}"``; default: recognised) and ``config`` (the model's
            config.json for steps that hold none) apply (hub-only options such
            as ``cache_dir`` are ignored there; ``include_zoom`` and ``step_pattern`` are ignored
            by hub sources).

    An embedded run name (``embedded/<run>``, ``embedded-quick/<run>``) opens that run of the
    embedded suite (:func:`interp.sources.open_sources`, trained on first use).

    Raises:
        ValueError: ``spec`` is neither (one line listing the valid forms), or names a whole
            embedded suite (use :func:`interp.sources.open_sources` for several runs); a local
            folder whose checkpoint folders follow no convention, or two (one line naming what was
            found and the patterns tried).
    """
    if isinstance(spec, str) and is_embedded_name(spec):
        check_one_run(spec, "open_source")  # before any training
        return open_sources([spec], allow_pickle=bool(kwargs.get("allow_pickle", False)))[0]
    from interp.sources.hub import HubSource
    from interp.sources.loading import _VALID_SPECS
    from interp.sources.local import LocalSuiteSource

    path = Path(spec).expanduser()
    if path.is_dir() or path.is_file():  # a file: refused by the source in one line naming its folder
        return LocalSuiteSource(
            path,
            **{
                k: v
                for k, v in kwargs.items()
                if k in ("model_id", "allow_pickle", "include_zoom", "step_pattern", "config")
            },
        )
    text = str(spec)
    model_id, colon, series = text.partition(":")
    if is_hub_id(model_id):
        kwargs.pop("include_zoom", None)  # hub checkpoints have no zoom overlay
        kwargs.pop("step_pattern", None)  # nor folders: their branch names are parsed (interp.sources.families)
        kwargs.pop("config", None)  # each branch holds its config.json
        if colon:
            kwargs = {**kwargs, "series": series}
        return HubSource(model_id, **kwargs)
    raise ValueError(unknown_source_message(text, _VALID_SPECS))


def zoomed_steps(name: str) -> list[int]:
    """Steps ``emergence zoom`` stored in the overlay of the one run ``name`` names (an embedded
    run already trained in the cache, or a local suite folder), without training or loading
    anything; [] for a hub id, an embedded run not trained yet, or a run never zoomed."""
    from interp.sources.local import overlay_steps

    if is_embedded_name(name):
        from interp.sources.catalogue import suite_dir

        runs = resolve_embedded(name)
        if len(runs) != 1:
            return []
        cfg, run = runs[0]
        return overlay_steps(suite_dir(cfg) / run)
    if _looks_like_path(name):
        return overlay_steps(Path(name).expanduser())
    return []


__all__ = [
    "SUITES",
    "VALID_NAMES",
    "ReadySources",
    "check_one_run",
    "check_source_name",
    "open_sources",
    "zoomed_steps",
]
