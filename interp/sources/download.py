"""Checkpoint revisions of a step-named hub repository fetched into the hub cache: ``emergence
download SRC`` and :func:`download`, so that ``emergence run SRC`` / ``el.open_source(SRC)`` work
afterwards without a network (``HF_HUB_OFFLINE=1``).

What it fetches: per chosen revision (branch), the files :class:`~interp.sources.hub.HubSource`
reads (``config.json``, the tokenizer files, ``*.safetensors`` and their index; ``*.bin`` only
with ``allow_pickle`` for a revision without safetensors), into the standard hub cache layout
(``models--ORG--NAME/{blobs,refs,snapshots}``; ``HF_HUB_CACHE`` or ``cache_dir``), through
``huggingface_hub.snapshot_download`` (its progress bars, its etag and size checks).

* **Sizes first.** Every revision's file list (``list_repo_tree``: sizes, LFS sha256, git blob ids)
  is read before anything downloads; :meth:`DownloadPlan.lines` prints per revision the bytes in
  all and the bytes still to fetch, then the totals.
* **Resumable.** A revision whose files are all in the cache at the branch's current commit is
  skipped; a stopped download keeps every finished file (huggingface_hub moves a file into the
  cache only when whole), so the same command continues where it stopped.
* **Digest-checked.** huggingface_hub checks sizes, not contents. Every file is hashed here
  against the hub's listing (sha256 for LFS files, the git blob sha1 for the others; the checks of
  ``HfApi.verify_repo_checksums``); a damaged file is named, removed and fetched again, and a
  second mismatch raises :class:`~interp.sources.loading.CorruptCheckpointError`. Files already in
  the cache are hashed too unless ``rehash=False`` (hashing reads every byte: ~1 s per GB).
* **Which revisions.** ``steps`` (each must be a branch of the repository), ``grid=N`` (N revisions
  evenly spread over the repository's list of checkpoints, first and last included: a
  bisection's probes are not known in advance, and it bisects over whatever steps the cache
  holds) or all of them.

Fetching on demand needs nothing from here: online, :meth:`HubSource.load` fetches a step that
is not cached (``snapshot_download``), so a bisection online downloads only the steps it probes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from interp.sources.hub import HubSource, _network_error
from interp.sources.loading import (
    _CONFIG_PATTERNS,
    _PICKLE_PATTERNS,
    _SAFETENSORS_PATTERNS,
    _TOKENIZER_PATTERNS,
    CheckpointError,
    CorruptCheckpointError,
    HubUnavailableError,
    nearest_steps,
)


@dataclass(frozen=True)
class HubFile:
    """One file of a revision as the hub lists it.

    Attributes:
        path: the file's path in the repository.
        size: its size (bytes).
        sha256: the LFS oid (sha256 of the contents), or ``None`` for a file kept in git.
        git_sha1: the git blob id (sha1 of ``blob <size>\\0`` and the contents).
    """

    path: str
    size: int
    sha256: str | None
    git_sha1: str

    def digest_of(self, path: Path) -> str:
        """The digest of the file at ``path`` computed the way the hub lists this file's."""
        from huggingface_hub.utils.sha import git_hash, sha_fileobj

        with open(path, "rb") as handle:
            return sha_fileobj(handle).hex() if self.sha256 else git_hash(handle.read())

    @property
    def expected(self) -> str:
        """The digest the hub lists (sha256 for LFS files, else the git blob sha1)."""
        return self.sha256 or self.git_sha1


@dataclass
class RevisionPlan:
    """One revision to fetch.

    Attributes:
        step: training step (optimizer steps).
        revision: the branch name.
        commit: the branch's commit on the hub.
        files: the files fetched for it.
        cached: the paths already in the cache at that commit with the listed size.
        status: ``to fetch``, ``complete`` (cached before), ``fetched``, or with ``re-fetched
            (damaged: FILE, ...)`` when a damaged file was fetched again.
    """

    step: int
    revision: str
    commit: str
    files: list[HubFile]
    cached: set[str] = field(default_factory=set)
    status: str = "to fetch"

    @property
    def total_bytes(self) -> int:
        """Bytes of all its files."""
        return sum(f.size for f in self.files)

    @property
    def missing_bytes(self) -> int:
        """Bytes still to fetch (files not in the cache)."""
        return sum(f.size for f in self.files if f.path not in self.cached)


@dataclass
class DownloadPlan:
    """The revisions :func:`download` fetches (or fetched) and where.

    Attributes:
        model_id: the hub repository.
        series: the series followed (``""``: plain ``step{N}`` names).
        cache_dir: the hub cache folder.
        revisions: one :class:`RevisionPlan` per revision, ascending by step.
        of_steps: how many checkpoint steps the repository lists in that series.
    """

    model_id: str
    series: str
    cache_dir: Path
    revisions: list[RevisionPlan]
    of_steps: int

    @property
    def steps(self) -> list[int]:
        """The chosen steps, ascending (training steps)."""
        return [r.step for r in self.revisions]

    @property
    def total_bytes(self) -> int:
        """Bytes of every chosen revision."""
        return sum(r.total_bytes for r in self.revisions)

    @property
    def missing_bytes(self) -> int:
        """Bytes not yet in the cache."""
        return sum(r.missing_bytes for r in self.revisions)

    def lines(self) -> list[str]:
        """The plan as text: one line per revision (step, branch, files, bytes, to fetch), then the totals."""
        width = max((len(r.revision) for r in self.revisions), default=8)
        rows = [
            f"step {r.step:>7}  {r.revision:<{width}}  {len(r.files):>2} files  {_size(r.total_bytes):>9}  "
            + (f"to fetch {_size(r.missing_bytes)}" if r.missing_bytes else "in the cache")
            for r in self.revisions
        ]
        complete = sum(not r.missing_bytes for r in self.revisions)
        series = f" (series {self.series!r})" if self.series else ""
        rows.append(
            f"{self.model_id}{series}: {len(self.revisions)} of {self.of_steps} checkpoint revisions, "
            f"{_size(self.total_bytes)} in all, {_size(self.missing_bytes)} to fetch "
            f"({complete} already complete); hub cache {self.cache_dir}"
        )
        return rows

    def __repr__(self) -> str:
        return "\n".join(self.lines())


def _size(n: int) -> str:
    for unit, scale in (("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n} B"


def grid_steps(steps: Sequence[int], n: int) -> list[int]:
    """``n`` steps evenly spread over ``steps`` by position: the first, the last and ``n - 2``
    between (a publisher's denser early checkpoints, Pythia's log-spaced 0-512, keep their share).

    Args:
        steps: checkpoint steps, ascending.
        n: how many to keep, 2 to ``len(steps)``.
    """
    last = len(steps) - 1
    # round half up, exactly: position i of n at i * last / (n - 1)
    return [steps[(2 * i * last + n - 1) // (2 * (n - 1))] for i in range(n)]


def _choose_steps(source: HubSource, steps: Sequence[int] | None, grid: int | None) -> tuple[list[int], int]:
    """The steps to fetch and how many the repository lists (one-line errors for bad choices)."""
    available = source.available_steps()
    if not available:
        raise source._no_branches_error()
    if steps is not None:
        for step in steps:
            if step not in available:
                near = ", ".join(map(str, nearest_steps(step, available)))
                raise CheckpointError(f"{source.model_id} has no checkpoint at step {step}; nearest: {near}")
        return sorted(set(steps)), len(available)
    if grid is not None:
        if grid > len(available):
            raise ValueError(
                f"grid={grid}: {source.model_id} has {len(available)} checkpoint revisions; "
                f"use a grid of 2 to {len(available)}, or all of them (--all)"
            )
        return grid_steps(available, grid), len(available)
    return available, len(available)


def _check_choice(steps: Sequence[int] | None, grid: int | None, cache_dir: str | Path | None) -> None:
    if steps is not None and grid is not None:
        raise ValueError("pass steps or grid, not both (steps: those steps; grid=N: N spread over the repository)")
    if steps is not None:
        if not len(steps):
            raise ValueError("steps=[]: name at least one step, e.g. steps=[1000, 2000]")
        bad = [s for s in steps if isinstance(s, bool) or not isinstance(s, int) or s < 0]
        if bad:
            raise ValueError(f"steps: {bad[0]!r} is not a training step; expected integers >= 0, e.g. 1000,2000")
    if grid is not None and (isinstance(grid, bool) or not isinstance(grid, int) or grid < 2):
        raise ValueError(f"grid={grid!r}: need an integer of at least 2 (the first and the last revision)")
    if cache_dir is not None and Path(cache_dir).expanduser().exists() and not Path(cache_dir).expanduser().is_dir():
        raise ValueError(f"cache folder {str(cache_dir)!r} (--cache) is a file, not a folder")


def open_hub_source(name: str, cache_dir: str | Path | None = None, allow_pickle: bool = False) -> HubSource:
    """The :class:`HubSource` of a hub source name (``ORG/NAME[:SERIES]``), refusing other names.

    Raises:
        ValueError: an embedded run or a local folder (nothing to download), or an unknown name.
    """
    from interp.sources.catalogue import is_embedded_name
    from interp.sources.door import check_source_name, open_source

    if is_embedded_name(name) or Path(name).expanduser().exists():
        raise ValueError(
            f"{name!r} is not a hub repository: download fetches hub checkpoints (an org/name id such as "
            f"EleutherAI/pythia-70m-seed3); embedded suites are trained here (emergence train-suite)"
        )
    check_source_name(name)
    source = open_source(name, cache_dir=cache_dir, allow_pickle=allow_pickle)
    assert isinstance(source, HubSource)
    return source


def _hub_down(model_id: str, what: str, error: Exception) -> Exception:
    """A :class:`HubUnavailableError` saying to run again when ``error`` is the network or the hub
    failing (a 5xx answer); else ``error`` itself (the hub's own answer)."""
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

    status = getattr(getattr(error, "response", None), "status_code", None)
    if isinstance(error, HfHubHTTPError) and (status is None or status < 500):
        return error  # the hub answered (no such branch or file): not the network
    if not (_network_error(error) or isinstance(error, LocalEntryNotFoundError)):
        return error
    text = str(error).strip()
    said = f"{type(error).__name__}: {text.splitlines()[0]}" if text else type(error).__name__
    return HubUnavailableError(
        f"{what} of {model_id}: the hub could not be reached ({said}); check the network (a proxy: "
        f"HTTPS_PROXY) and run the same command again: it keeps every file already fetched and continues"
    )


def plan_download(
    source: str | HubSource,
    steps: Sequence[int] | None = None,
    grid: int | None = None,
    cache_dir: str | Path | None = None,
    allow_pickle: bool = False,
) -> DownloadPlan:
    """The revisions :func:`download` would fetch, with their files and sizes; nothing is downloaded.

    Args: as :func:`download`.

    Returns:
        a :class:`DownloadPlan` (``print(plan)``: a line per revision, then the totals).

    Raises:
        ValueError: as :func:`download`.
        CheckpointError, HubUnavailableError: as :func:`download`.
    """
    from huggingface_hub import HfApi, constants
    from huggingface_hub.hf_api import RepoFile
    from huggingface_hub.utils import filter_repo_objects

    _check_choice(steps, grid, cache_dir)
    if isinstance(source, str):
        source = open_hub_source(source, cache_dir=cache_dir, allow_pickle=allow_pickle)
    if constants.is_offline_mode():
        raise HubUnavailableError(
            f"cannot download {source.model_id}: HF_HUB_OFFLINE=1 is set, so nothing is fetched from the hub; "
            f"unset it (HF_HUB_OFFLINE=0 emergence download ...), or download on a machine with a network and "
            f"copy its hub cache here"
        )
    chosen, of_steps = _choose_steps(source, steps, grid)
    snapshots = source._repo_cache() / "snapshots"
    api, revisions, pickle_only = HfApi(), [], []
    for step in chosen:
        name = source.revision(step)
        commit = source.commit(step)
        try:
            tree = [
                f
                for f in api.list_repo_tree(source.model_id, revision=commit or name, recursive=True)
                if isinstance(f, RepoFile)
            ]
            commit = commit or api.repo_info(source.model_id, revision=name).sha
        except Exception as error:
            raise _hub_down(source.model_id, f"cannot list the files of branch {name}", error) from error
        by_path = {f.path: f for f in tree}
        patterns = _CONFIG_PATTERNS + _TOKENIZER_PATTERNS + _SAFETENSORS_PATTERNS
        if not any(p.endswith(".safetensors") for p in by_path):
            if not allow_pickle:
                pickle_only.append(step)
            patterns = patterns + _PICKLE_PATTERNS
        files = [
            HubFile(p, int(f.size), f.lfs.sha256 if f.lfs is not None else None, f.blob_id)
            for p in sorted(filter_repo_objects(list(by_path), allow_patterns=patterns))
            for f in (by_path[p],)
        ]
        cached = {f.path for f in files if _cached_size(snapshots / str(commit) / f.path) == f.size}
        revisions.append(RevisionPlan(step, name, str(commit), files, cached))
    if pickle_only:
        raise ValueError(
            f"{source.model_id}: step(s) {', '.join(map(str, pickle_only[:8]))} have only pickle weights (.bin), "
            f"which run code when loaded; pass --allow-pickle (HubSource(allow_pickle=True)) to fetch and load them"
        )
    return DownloadPlan(source.model_id, source.series, source._repo_cache().parent, revisions, of_steps)


def _cached_size(path: Path) -> int | None:
    return path.stat().st_size if path.exists() else None


def download(
    source: str | HubSource,
    steps: Sequence[int] | None = None,
    grid: int | None = None,
    cache_dir: str | Path | None = None,
    allow_pickle: bool = False,
    rehash: bool = True,
    dry_run: bool = False,
    progress: bool = True,
    echo: Callable[[str], None] | None = print,
) -> DownloadPlan:
    """Fetch checkpoint revisions of a step-named hub repository into the hub cache (module docstring).

    Args:
        source: a hub source name, ``ORG/NAME`` or ``ORG/NAME:SERIES`` (Pythia / PolyPythia, OLMo,
            OLMo-2, any repository whose branches name training steps: ``emergence list-models``),
            or a :class:`HubSource` (its own ``cache_dir`` is used then).
        steps: the training steps to fetch; each must be a branch of the repository.
        grid: fetch ``grid`` revisions evenly spread over the repository's checkpoints
            (:func:`grid_steps`); neither ``steps`` nor ``grid``: every revision.
        cache_dir: hub cache folder (default ``HF_HUB_CACHE``, ``~/.cache/huggingface/hub``); read it
            later with ``HF_HUB_CACHE=cache_dir`` or ``open_source(..., cache_dir=cache_dir)``.
        allow_pickle: also fetch ``.bin`` weights of revisions without safetensors.
        rehash: hash the files found in the cache too (files fetched now are always hashed).
        dry_run: list the revisions and their sizes only.
        progress: huggingface_hub's progress bars (bytes, files).
        echo: where the plan and the damaged files are reported, one line each (``None``: nowhere).

    Returns:
        the :class:`DownloadPlan`, each revision's ``status`` set (``complete``, ``fetched``, ...).

    Raises:
        ValueError: an unknown or non-hub source, ``steps`` and ``grid`` both given, a bad step or
            grid, pickle-only revisions without ``allow_pickle`` (all before anything downloads).
        CheckpointError: a step the repository has no branch for (the nearest named).
        HubUnavailableError: ``HF_HUB_OFFLINE=1``, or the hub could not be reached (the message
            says to run again: fetched files are kept).
        CorruptCheckpointError: a file still differs from the hub's digest after a second download.
    """
    from huggingface_hub import hf_hub_download, snapshot_download
    from huggingface_hub.utils import are_progress_bars_disabled, disable_progress_bars, enable_progress_bars

    say = echo or (lambda line: None)
    plan = plan_download(source, steps=steps, grid=grid, cache_dir=cache_dir, allow_pickle=allow_pickle)
    for line in plan.lines():
        say(line)
    if dry_run:
        return plan
    model_id, cache = plan.model_id, plan.cache_dir
    was_disabled = are_progress_bars_disabled()
    if not progress:
        disable_progress_bars()
    try:
        for done, rev in enumerate(plan.revisions):
            snapshot = cache / f"models--{model_id.replace('/', '--')}" / "snapshots" / rev.commit
            before, had_missing = set(rev.cached), bool(rev.missing_bytes)
            if had_missing:
                try:
                    snapshot_download(
                        model_id,
                        revision=rev.revision,
                        cache_dir=cache,
                        allow_patterns=[f.path for f in rev.files],
                    )
                except Exception as error:
                    what = (
                        f"download stopped at branch {rev.revision} ({done} of {len(plan.revisions)} revisions "
                        f"complete)"
                    )
                    raise _hub_down(model_id, what, error) from error
            damaged = []
            for f in rev.files:
                if f.path in before and not rehash:
                    continue
                path = snapshot / f.path
                actual = f.digest_of(path)
                if actual == f.expected:
                    continue
                say(
                    f"damaged: {model_id} {rev.revision}/{f.path} ({path.resolve()}): digest {actual[:16]}..., "
                    f"the hub lists {f.expected[:16]}...; fetching it again"
                )
                damaged.append(f.path)
                path.resolve().unlink(missing_ok=True)
                path.unlink(missing_ok=True)
                hf_hub_download(model_id, f.path, revision=rev.commit, cache_dir=cache)
                again = f.digest_of(path)
                if again != f.expected:
                    raise CorruptCheckpointError(
                        f"{model_id} {rev.revision}/{f.path}: digest {again[:16]}... after a second download, the "
                        f"hub lists {f.expected[:16]}...; the file is damaged on the way (a proxy, the disk): "
                        f"fetch it elsewhere, or pick another step"
                    )
            rev.cached = {f.path for f in rev.files}
            status = "fetched" if had_missing else "complete"
            rev.status = status + (f" (re-fetched damaged: {', '.join(damaged)})" if damaged else "")
    finally:
        if not progress and not was_disabled:
            enable_progress_bars()
    fetched = sum(r.status.startswith("fetched") for r in plan.revisions)
    say(
        f"{model_id}: {len(plan.revisions)} revisions in {cache} ({fetched} fetched now, "
        f"{len(plan.revisions) - fetched} already there); offline use: HF_HUB_OFFLINE=1"
        + ("" if cache_dir is None else f" HF_HUB_CACHE={cache}")
        + f" emergence run {model_id}"
    )
    return plan


__all__ = ["DownloadPlan", "HubFile", "RevisionPlan", "download", "grid_steps", "open_hub_source", "plan_download"]
