"""Checkpoints on the Hugging Face hub: :class:`HubSource` (see :mod:`interp.sources.base` for the
shared design: digests, hazards, tokenizer checks, memory)."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from interp.core.training_state import OPTIMIZER_FILE
from interp.sources.catalogue import is_hub_id, is_pythia_id
from interp.sources.families import (
    RevisionParser,
    Schedule,
    build_schedule,
    family_of,
    regular_grid,
)

if TYPE_CHECKING:  # the bridge and transformers are imported when first needed (slow imports)
    from transformers import PreTrainedTokenizerBase
from interp.sources.base import CheckpointSource
from interp.sources.loading import (
    _CONFIG_PATTERNS,
    _PICKLE_PATTERNS,
    _SAFETENSORS_PATTERNS,
    _TOKENIZER_PATTERNS,
    _VALID_HUB_IDS,
    PYTHIA_STEPS,
    CheckpointError,
    HubUnavailableError,
    _sha256_of_file,
    combine_digests,
    logger,
    weight_files,
    weights_digest,
)

#: Revisions the messages suggest fetching for a search whose steps are not known yet
#: (``emergence download SRC --grid 30``; :mod:`interp.sources.download`).
SUGGESTED_GRID = 30


def _network_error(error: BaseException) -> bool:
    """Whether ``error`` is the network failing (an ``OSError``, httpx's transport errors: a DNS
    failure, a refused connection, a timeout), not an answer of the hub."""
    names = {c.__name__ for c in type(error).__mro__}
    return isinstance(error, OSError) or bool(names & {"TransportError", "RequestError", "TimeoutException"})


class HubSource(CheckpointSource):
    """Checkpoints on the Hugging Face hub, one branch per training step.

    The branches are read online with ``list_repo_refs`` (if the hub cannot be reached, from the
    cache, and :attr:`listing` says so) and with ``HF_HUB_OFFLINE=1`` from the cache's ``refs/``.
    Branch names are parsed by :class:`interp.sources.families.RevisionParser` (``step{N}``,
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
            ``tokens``, ``unit``, ``series``); see :class:`interp.sources.families.RevisionParser`.

    Raises:
        ValueError: a malformed id, an unknown id in the Pythia namespace, an empty / invalid
            schedule, or a bad ``revision_regex``.
    """

    _final_folders = False  # a step's cache folder fills as it downloads; a repo may hold two formats

    def __init__(
        self,
        model_id: str,
        steps: Sequence[int] | None = None,
        cache_dir: str | Path | None = None,
        allow_pickle: bool = False,
        trust_remote_code: bool = False,
        allow_any_id: bool = False,
        series: str | None = None,
        revision_regex: str | None = None,
    ):
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
        self.parser = RevisionParser(
            revision_regex if revision_regex is not None else (family.revision_regex if family else None)
        )
        self._listing = ""
        self._commits: dict[str, str] = {}  # branch -> commit, from the hub's listing
        self._schedule: Schedule | None = None
        self._available: list[int] | None = None
        self._gaps: dict[int, str] = {}  # step -> why the cache cannot give its weights (cache_gap)
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

    def _hub_failure(self, what: str, revision: str | None, error: Exception) -> Exception:
        """The error to raise when the hub (or, offline, the cache) failed to give ``what``: the
        hub's own answer (no such branch) unchanged; no such repository, or a gated one, as one
        line saying what to do; else a :class:`HubUnavailableError` saying what to do (one line)."""
        from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError, RevisionNotFoundError

        if isinstance(error, GatedRepoError):
            return ValueError(
                f"{what} of {self.model_id}: the repository is gated; accept its conditions on its hub page, "
                f"then log in (`hf auth login`) or set HF_TOKEN"
            )
        if isinstance(error, RepositoryNotFoundError):
            return ValueError(
                f"unknown hub repository {self.model_id!r}: the hub has no such model repository ({what}); "
                f"check the id (emergence list-models lists the known families); a private one needs a token "
                f"(`hf auth login`, or HF_TOKEN)"
            )
        if isinstance(error, RevisionNotFoundError):
            return error  # the hub answered: not a network failure
        text = str(error).strip()
        said = f"{type(error).__name__}: {text.splitlines()[0]}" if text else type(error).__name__
        download = self._download_hint(revision)
        if self._offline():
            return HubUnavailableError(
                f"{what} of {self.model_id}: HF_HUB_OFFLINE=1 and the local hub cache {self._repo_cache()} "
                f"does not hold it ({said}); unset HF_HUB_OFFLINE to fetch it, or on a machine with a network "
                f"run {download} and copy that hub cache here (or set HF_HUB_CACHE to it)"
            )
        return HubUnavailableError(
            f"{what} of {self.model_id}: the hub could not be reached ({said}) and the local hub cache "
            f"{self._repo_cache()} does not hold it; check the network (a proxy: HTTPS_PROXY) and run again, "
            f"or on a machine with a network run {download}, copy that hub cache here (or set HF_HUB_CACHE to "
            f"it) and set HF_HUB_OFFLINE=1"
        )

    def _download_hint(self, revision: str | None) -> str:
        """The command that fetches ``revision`` (``None``: a grid of revisions for a search)."""
        rev = self.parser.parse(revision) if revision else None
        choice = f"--steps {rev.step}" if rev is not None else f"--grid {SUGGESTED_GRID}"
        name = self.model_id if self.series_requested is None else f"{self.model_id}:{self.series_requested}"
        return f"`emergence download {name} {choice}`"

    def _no_branches_error(self) -> Exception:
        """The error for a repository (offline: a cache) with no checkpoint branch."""
        if self._offline():
            return HubUnavailableError(
                f"{self.model_id} has no checkpoint branches (step{{N}}, ...) in the local hub cache "
                f"{self._repo_cache()} (HF_HUB_OFFLINE=1): fetch them with {self._download_hint(None)} "
                f"(with HF_HUB_OFFLINE unset, or on a machine with a network, then copy that hub cache here or "
                f"set HF_HUB_CACHE to it)"
            )
        return CheckpointError(
            f"{self.model_id} has no checkpoint branches (step{{N}}, ...) on the hub: it publishes no "
            f"intermediate checkpoints; use a repository that does (emergence list-models), or pass "
            f"HubSource(revision_regex=...) when its branch names differ"
        )

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
                raise self._hub_failure("cannot list the branches", None, error) from error
            self._listing = f"cache (hub unreachable: {type(error).__name__})"
            logger.warning(
                "cannot reach the hub for %s (%s); using the %d cached branches",
                self.model_id,
                type(error).__name__,
                len(cached),
            )
            return cached
        self._listing = "hub"
        self._commits = {b.name: b.target_commit for b in refs.branches if getattr(b, "target_commit", None)}
        return [b.name for b in refs.branches]

    @property
    def schedule(self) -> Schedule:
        """The parsed branches of the followed series (listed once, then remembered)."""
        if self._schedule is None:
            self._schedule = build_schedule(self._branch_names(), self.parser, self.series_requested)
            if self._schedule.alternates:
                logger.warning(
                    "%s: %d branches name a step another branch already names (kept: %s)",
                    self.model_id,
                    len(self._schedule.alternates),
                    ", ".join(self._schedule.revisions[r.step].name for r in self._schedule.alternates[:3]),
                )
            if self._schedule.unparsed:
                names = self._schedule.unparsed
                logger.warning(
                    "%s: %d branch names look like checkpoints but do not parse, left out: %s%s; "
                    "pass HubSource(revision_regex=...) to read them",
                    self.model_id,
                    len(names),
                    ", ".join(names[:5]),
                    f", ... ({len(names)} in all)" if len(names) > 5 else "",
                )
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
        within the schedule when one is set (Pythia's 154 steps). Listed from the cache (offline,
        or the hub unreachable), a step is held only when its weights are: a step whose download
        was cut short (:meth:`cache_gap`) is missing, with :meth:`missing_detail` saying why.

        Raises:
            HubUnavailableError: offline (``HF_HUB_OFFLINE=1``) and the cache holds no checkpoint
                branch of the repository: the message says what to fetch and how
                (``emergence download``), instead of an empty list that fails later.
        """
        if self._available is None:
            listed = set(self.schedule.revisions)
            steps = sorted(listed & set(self.steps) if self.steps is not None else listed)
            if self._listing.startswith("cache"):
                self._gaps = {step: gap for step in steps if (gap := self.cache_gap(step)) is not None}
                steps = [step for step in steps if step not in self._gaps]
            self._available = steps
        if not self._available and self._offline():
            raise self._no_branches_error()
        return list(self._available)

    def cache_gap(self, step: int) -> str | None:
        """Why the local hub cache cannot give ``step``'s weights, or None when it holds them.

        An interrupted ``emergence download`` leaves the branch's ref and snapshot folder with no
        weight file (the bytes fetched so far sit in ``blobs/<sha256>.incomplete``); a cache copied
        without its blobs, or a blob deleted, leaves a snapshot link that dangles. Both read as
        "not downloaded" to huggingface_hub, so offline they are found here, from the files alone
        (no weight is read). Pickle-only steps are not a gap (they are refused when loaded).

        Returns:
            One phrase naming the file and ending ``repair: `emergence download ... --steps N```.
        """
        repo, revision = self._repo_cache(), self.revision(step)
        command = self._download_hint(revision)
        if self.cache_dir is not None:  # the cache this source reads, not the default one
            command = f"{command[:-1]} --cache {self.cache_dir}`"
        repair = f"repair: {command}"
        if self._offline():
            repair += " with HF_HUB_OFFLINE unset (or on a machine with a network, then copy that hub cache here)"
        ref = repo / "refs" / revision
        folder = repo / "snapshots" / ref.read_text().strip() if ref.is_file() else None
        if folder is None or not folder.is_dir():
            return f"branch {revision} has no snapshot folder in the local hub cache {repo}; {repair}"
        weights = [p for p in sorted(folder.glob("*.safetensors")) if p.name != OPTIMIZER_FILE]
        weights += sorted(folder.glob("*.bin"))
        for path in weights:
            if not path.exists():  # a link whose blob is not there
                blob = Path(os.readlink(path)).name if path.is_symlink() else path.name
                return (
                    f"{revision}/{path.name} in the local hub cache is a dangling link (its blob "
                    f"{blob[:12]}... is not in {repo / 'blobs'}); {repair}"
                )
        for index in sorted(folder.glob("*.index.json")):
            try:
                shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
            except (OSError, ValueError, KeyError, AttributeError):
                continue
            absent = [name for name in shards if not (folder / name).exists()]
            if absent:
                return (
                    f"{revision}/{absent[0]} (named by {index.name}; {len(absent)} of {len(shards)} shards absent) "
                    f"is not in the local hub cache {repo}; {repair}"
                )
        if weights:
            return None
        partial = sorted((repo / "blobs").glob("*.incomplete"))
        cut = "; ".join(f"blobs/{p.name[:12]}...incomplete holds {p.stat().st_size} bytes" for p in partial[:3])
        cut = f", a download cut short ({cut})" if partial else ""
        return f"branch {revision} has no weight file in the local hub cache {repo}{cut}; {repair}"

    def missing_detail(self, step: int) -> str:
        """:meth:`cache_gap` of a step listed from the cache and left out for it; ``""`` otherwise."""
        self.available_steps()
        return self._gaps.get(step, "")

    def expected_steps(self) -> list[int]:
        """The schedule the source should have: ``steps`` when set (Pythia's 154), else the
        regular grid of the listed steps (:func:`interp.sources.families.regular_grid`), else none."""
        if self.steps is not None:
            return list(self.steps)
        return regular_grid(list(self.schedule.revisions))

    def missing_steps(self) -> list[int]:
        """Steps of :meth:`expected_steps` with no branch on the hub (offline: not in the cache),
        and those listed from the cache without their weights (:meth:`cache_gap`)."""
        available = set(self.available_steps())
        return sorted({s for s in self.expected_steps() if s not in available} | set(self._gaps))

    def revision(self, step: int) -> str:
        """The branch name of ``step`` (``step1000``, ``stage1-step1000-tokens5B``, ...)."""
        rev = self.schedule.revisions.get(step)
        return rev.name if rev is not None else f"step{step}"

    def commit(self, step: int) -> str | None:
        """The commit of ``step``'s branch as the hub listed it (``None``: listed from the cache)."""
        _ = self.schedule
        return self._commits.get(self.revision(step))

    def tokens_at(self, step: int) -> int | None:
        """Tokens seen at ``step`` (tokens), from the branch name (``tokens{M}B``), else ``None``."""
        rev = self.schedule.revisions.get(step)
        return None if rev is None else rev.tokens

    def _check_step(self, step: int) -> int:
        """As :meth:`CheckpointSource._check_step`; a step listed from the cache without whole
        weights (:meth:`cache_gap`) is a :class:`HubUnavailableError` naming the file and the repair."""
        self.available_steps()
        if not isinstance(step, bool) and isinstance(step, int) and step in self._gaps:
            raise HubUnavailableError(f"{self.model_id} step {step}: {self._gaps[step]}")
        return super()._check_step(step)

    def _missing_reason(self, step: int) -> str:
        if self.steps is not None and step not in self.steps:
            return f" (not in its {len(self.steps)}-step schedule)"
        where = f"series {self.series!r}" if self.series else "its step branches"
        if self._offline():
            return f" in the local hub cache (HF_HUB_OFFLINE=1; {where})"
        return (
            f" (no branch for step {step} in {where} on the hub)"
            if self.series
            else f" (no branch step{step} on the hub)"
        )

    def _snapshot(self, step: int | None, patterns: list[str], local_only: bool = False) -> Path:
        """A snapshot folder of ``step``'s branch (``None``: the ``main`` branch)."""
        from huggingface_hub import snapshot_download

        revision = "main" if step is None else self.revision(step)
        try:
            folder = snapshot_download(
                self.model_id,
                revision=revision,
                cache_dir=self.cache_dir,
                allow_patterns=patterns,
                local_files_only=local_only,
            )
        except Exception as error:
            from huggingface_hub.errors import IncompleteSnapshotError

            if local_only and isinstance(error, IncompleteSnapshotError) and error.snapshot_path:
                # the branch's other files (a .bin beside the .safetensors) were not fetched: the
                # callers look for the files they need in the folder
                return Path(error.snapshot_path)
            if local_only:  # the callers ask the cache only and handle its absence
                raise
            raise self._hub_failure(f"cannot fetch branch {revision}", revision, error) from error
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
        """The tokenizer, from the snapshot folder (tokenizer files only) of the first available step,
        carrying the model's context (:meth:`context_length`, from that step's ``config.json``)
        for the tasks' prompt check.

        Raises:
            CheckpointError: the hub lists no checkpoint branch.
            HubUnavailableError: offline, the cache holds no checkpoint branch (the message says
                how to fetch some: ``emergence download``).
            TokenizerMismatchError: it differs from the tokenizer of a step loaded earlier.
        """
        from transformers import AutoTokenizer

        steps = self.available_steps()
        if not steps:
            raise self._no_branches_error()
        tokenizer = AutoTokenizer.from_pretrained(self._tokenizer_dir(steps[0]))
        self._check_tokenizer(steps[0], tokenizer)
        return self._limit_context(tokenizer)

    def _config_file(self, step: int) -> Path | None:
        return self._snapshot(step, _CONFIG_PATTERNS) / "config.json"

    def digest(self, step: int) -> str:
        """Weight digest of ``step``: from the hub cache when the weights are there (the blob name
        is the LFS sha256), else from hub metadata (LFS oids, no download) when online.

        Raises:
            CheckpointError: ``step`` is not available.
            HubUnavailableError: offline and the step's weights are not cached, or the hub could
                not be reached (one line saying what to do).
        """
        step = self._check_step(step)
        if step not in self._digests:
            try:
                digest = self._cached_digest(step) or self._remote_digest(step)
            except Exception as error:
                if not _network_error(error):
                    raise
                what = f"cannot read the weights' metadata of branch {self.revision(step)}"
                raise self._hub_failure(what, self.revision(step), error) from error
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
            raise HubUnavailableError(
                f"{self.model_id} step {step}: weights are not in the hub cache {self._repo_cache()} "
                f"and HF_HUB_OFFLINE=1; unset HF_HUB_OFFLINE to fetch them, or on a machine with a network run "
                f"{self._download_hint(None if step is None else self.revision(step))} and copy that hub cache "
                f"here (or set HF_HUB_CACHE to it)"
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
                shas: dict[str, Any] = {
                    s: getattr(getattr(shard_info.get(s), "lfs", None), "sha256", None) for s in shards
                }
                if all(sha is not None for sha in shas.values()):
                    if step is not None:
                        self._file_digests[step] = shas
                    return combine_digests(list(shas.values()))
        if not download or step is None:
            return None
        # No LFS metadata (unusual): download the weights and hash them.
        folder, _, _ = self._resolve(step)
        return weights_digest(self._require_weights(folder, step))
