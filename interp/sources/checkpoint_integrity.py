"""Checkpoint files that are not what their label says: corrupt files and shards shared between steps.

Two hazards beyond whole-checkpoint duplicates (:meth:`interp.sources.CheckpointSource.duplicate_steps`):

* **corrupt**: a weight file cut short (a download interrupted) or with its header overwritten.
  A safetensors file is an 8-byte little-endian header length N, N bytes of JSON naming each
  tensor's dtype, shape and ``data_offsets`` into the data that follows, then the data
  (https://github.com/huggingface/safetensors, "Format"). :func:`safetensors_problem` checks that
  structure from the header alone (no tensor is read): a truncated file has less data than its
  header's offsets need, an overwritten header is not JSON or names offsets that do not fit.
  Whole files that lack a tensor the model needs (transformers would initialise it at random
  on every load) or hold one it does not have are corrupt too
  (:func:`interp.sources.tensor_check.tensor_problem`, from the headers' names).
* **corrupt**, too: weights that hold a NaN or an inf (a diverged step;
  :mod:`interp.sources.weight_scan`, checked in the same read that hashes a local file), a shard
  that the folder's ``*.index.json`` names but the folder lacks, and two weight sets in one folder
  (a ``model.safetensors`` beside complete shards, or pickle ``.bin`` weights beside safetensors:
  which one is the step's is unknown, so neither is chosen silently).
* **needs-remote-code**: the step's ``config.json`` names classes of its own (``auto_map``); this
  tool does not run a checkpoint's code, so the step is left out and refused in one line.
* **partial-duplicate**: a sharded checkpoint whose shard is byte-identical to a shard of another
  step whose weights otherwise differ (pythia-12b's branches step50000 and step58000 carry the
  final model's first shard and their own others). Compared per shard by sha256 (the hub's LFS
  oid, so no download is needed online); the tensors of the shared shards are named from the
  shard's header or the checkpoint's ``*.index.json``.

Both kinds of step are left out of the search (:meth:`CheckpointSource.searchable_steps`) and
reported in ``checkpoints.csv`` (:func:`interp.sources.checkpoint_table`).

:class:`WeightFileChecks` holds these checks for every source (a base class of
:class:`~interp.sources.base.CheckpointSource`: ``corrupt_reason``, ``partial_duplicates``, ...).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from interp.sources.loading import (
    CheckpointError,
    CorruptCheckpointError,
    _sha256_of_file,
    pickle_weight_files,
    weight_files,
)
from interp.sources.remote_code import remote_code_request
from interp.sources.tensor_check import tensor_problem
from interp.sources.weight_scan import describe_non_finite, non_finite_names, scan_file

if TYPE_CHECKING:
    import pandas as pd

    from interp.sources.base import CheckpointSource

#: Bytes per element of the safetensors dtypes.
DTYPE_BYTES = {
    "F64": 8,
    "F32": 4,
    "F16": 2,
    "BF16": 2,
    "I64": 8,
    "I32": 4,
    "I16": 2,
    "I8": 1,
    "U64": 8,
    "U32": 4,
    "U16": 2,
    "U8": 1,
    "BOOL": 1,
    "F8_E4M3": 1,
    "F8_E5M2": 1,
}
#: Largest header accepted (the safetensors library's own limit is 100 MB).
MAX_HEADER_BYTES = 100_000_000


def safetensors_problem(path: str | Path) -> str | None:
    """What is wrong with a safetensors file's structure, or None when it is whole.

    Reads the 8-byte length and the JSON header only.

    Returns:
        One phrase (``"truncated: ..."``, ``"header overwritten: ..."``) or None.
    """
    path = Path(path)
    if not path.exists():  # a link whose target is not there (a hub cache's blob deleted)
        return f"a dangling link: the file it points to ({Path(os.readlink(path)).name}) is not there"
    size = path.stat().st_size
    if size < 8:
        return f"truncated: {size} bytes, not even the 8-byte header length"
    with open(path, "rb") as handle:
        n = int.from_bytes(handle.read(8), "little")
        if n > min(size - 8, MAX_HEADER_BYTES):
            return (
                f"header overwritten or file truncated: the header length reads {n} bytes, the file holds "
                f"{size - 8} after it"
            )
        raw = handle.read(n)
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return f"header overwritten: its {n} bytes are not JSON"
    if not isinstance(header, dict):
        return "header overwritten: not a JSON object of tensors"
    data = size - 8 - n
    end = 0
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            start, stop = (int(v) for v in info["data_offsets"])
            shape = [int(d) for d in info["shape"]]
            dtype = str(info["dtype"])
        except (KeyError, TypeError, ValueError):
            return f"header overwritten: tensor {name!r} has no dtype, shape and data_offsets"
        if not 0 <= start <= stop:
            return f"header overwritten: tensor {name!r} has data_offsets {[start, stop]}"
        if dtype in DTYPE_BYTES and (stop - start) != math.prod(shape) * DTYPE_BYTES[dtype]:
            return f"header overwritten: tensor {name!r} ({dtype} {shape}) spans {stop - start} bytes"
        end = max(end, stop)
    if end > data:
        return f"truncated: the tensors need {end} bytes of data, the file holds {data}"
    if end < data:
        return f"{data - end} bytes after the last tensor (the header does not describe the file)"
    return None


def file_problem(path: str | Path) -> str | None:
    """:func:`safetensors_problem` for ``.safetensors`` files; other files (pickle ``.bin``) are
    not checked (None)."""
    path = Path(path)
    return safetensors_problem(path) if path.name.endswith(".safetensors") else None


def tensor_names(folder: Path | None, file_name: str) -> list[str]:
    """Tensor names stored in ``folder/file_name``: from its header when the file is there, else
    from the folder's ``*.index.json`` weight map; [] when neither is readable."""
    if folder is None:
        return []
    path = folder / file_name
    if path.is_file() and safetensors_problem(path) is None:
        with open(path, "rb") as handle:
            n = int.from_bytes(handle.read(8), "little")
            header = json.loads(handle.read(n).decode("utf-8"))
        return sorted(k for k in header if k != "__metadata__")
    for index in sorted(folder.glob("*.index.json")):
        try:
            weight_map = json.loads(index.read_text())["weight_map"]
        except (OSError, ValueError, KeyError):
            continue
        return sorted(t for t, f in weight_map.items() if f == file_name)
    return []


def shared_files(
    file_digests: dict[int, dict[str, str]], digests: dict[int, str]
) -> dict[int, tuple[list[int], list[str]]]:
    """Steps that hold a weight file byte-identical to one of another step whose whole weights differ.

    Args:
        file_digests: step -> {weight file name: sha256 hex} (steps without them left out).
        digests: step -> the whole checkpoint's digest.

    Returns:
        ``{step: (other steps sharing a file, shared file names)}``, each sorted.
    """
    holders: dict[str, list[tuple[int, str]]] = {}
    for step, files in file_digests.items():
        for name, digest in files.items():
            holders.setdefault(digest, []).append((step, name))
    found: dict[int, tuple[set[int], set[str]]] = {}
    for group in holders.values():
        for step, name in group:
            others = {o for o, _ in group if o != step and digests.get(o) != digests.get(step)}
            if others:
                entry = found.setdefault(step, (set(), set()))
                entry[0].update(others)
                entry[1].add(name)
    return {step: (sorted(o), sorted(n)) for step, (o, n) in sorted(found.items())}


def describe_shared(names: Iterable[str], tensors: list[str], others: list[int], limit: int = 4) -> str:
    """``"shares model-00001-of-00002.safetensors (3 tensors: a, b, c) with step 2000"``."""
    shown = ", ".join(tensors[:limit]) + (f", ... ({len(tensors)} in all)" if len(tensors) > limit else "")
    what = f" ({len(tensors)} tensors: {shown})" if tensors else ""
    steps = ", ".join(map(str, others))
    return f"shares {', '.join(names)}{what} with step{'s' if len(others) > 1 else ''} {steps}"


# ----------------------------------------------------------------------------- hazards

#: ``checkpoints.csv`` columns (one row per step of the schedule).
CHECKPOINT_COLUMNS = ["step", "revision", "tokens", "digest", "status", "same_weights_as", "detail", "listing"]


def checkpoint_table(source: CheckpointSource) -> pd.DataFrame:
    """One row per step: what the source holds, its digest and whether the search may use it.

    ``status`` is one of

    * ``searchable``: held, weights unlike every other step's;
    * ``duplicate-excluded``: the same weights as ``same_weights_as`` (other steps, ``;``-joined):
      at most one of those labels is right, so the step is left out of the search;
    * ``duplicate-kept-final``: the final step of a duplicate group whose digest equals the final
      model's (:meth:`CheckpointSource.final_digest`): its label is known to be right;
    * ``partial-duplicate``: a weight shard byte-identical to one of ``same_weights_as`` while the
      other shards differ (``detail`` names the files and their tensors): left out of the search;
    * ``corrupt``: a weight file truncated or with its header overwritten, or weight files that
      lack tensors the model needs or hold tensors it does not have (``detail``: the file and
      what is wrong, the tensors named): left out of the search;
    * ``needs-remote-code``: ``config.json`` asks for custom code (``auto_map``; ``detail`` names
      the classes): this tool does not run checkpoint code, so the step is left out of the search;
    * ``missing``: in the expected schedule, not held (no hub branch; offline: not in the cache);
      ``detail`` says more when the step is listed but its weights are not whole (a hub step
      whose download was cut short or whose cache link dangles: the file and the
      ``emergence download ... --steps N`` that repairs it, :meth:`HubSource.cache_gap`).

    Digests are read for every held step (hub metadata or the cache; local files hashed once).

    Args:
        source: a checkpoint source.

    Returns:
        DataFrame with :data:`CHECKPOINT_COLUMNS`, sorted by step; ``tokens`` (tokens seen) and
        ``digest`` are empty where unknown; ``listing`` is the source's :attr:`listing` on every row.

    Raises:
        ValueError: a held step's weights cannot be read (online, the hub unreachable mid-way).
    """
    import pandas as pd

    held = source.available_steps()
    groups = {step: group for group in source.duplicate_groups() for step in group}
    excluded = source.duplicate_steps()
    partial = source.partial_duplicates()
    remote = source.remote_code_steps()
    corrupt = {step: why for step, why in source.corrupt_steps().items() if step not in remote}
    rows = []
    for step in held:
        group = groups.get(step, [])
        status = "searchable" if not group else ("duplicate-excluded" if step in excluded else "duplicate-kept-final")
        same, detail = ";".join(str(s) for s in group if s != step), ""
        if step in partial and not group:
            others, names = partial[step]
            status, same = "partial-duplicate", ";".join(map(str, others))
            detail = describe_shared(names, source.shared_tensors(step, names), others)
        if step in corrupt:
            status, detail = "corrupt", corrupt[step]
        if step in remote:
            status, detail = "needs-remote-code", remote[step]
        rows.append(
            {
                "step": step,
                "revision": source.revision(step),
                "tokens": source.tokens_at(step),
                "digest": source.digest(step),
                "status": status,
                "same_weights_as": same,
                "detail": detail,
            }
        )
    for step in source.missing_steps():
        detail = source.missing_detail(step)  # a half-downloaded hub step: the file and the repair
        rows.append(
            {
                "step": step,
                "revision": source.revision(step) if detail else None,
                "tokens": source.tokens_at(step) if detail else None,
                "digest": None,
                "status": "missing",
                "same_weights_as": "",
                "detail": detail,
            }
        )
    table = pd.DataFrame(rows, columns=CHECKPOINT_COLUMNS[:-1]).sort_values("step", kind="stable")
    table["listing"] = source.listing
    return table.astype({"tokens": "Int64"}).reset_index(drop=True)


def _files_text(files: Sequence[Path]) -> str:
    return files[0].name if len(files) == 1 else f"its {len(files)} weight files"


def _steps_text(steps: Sequence[int], limit: int = 8) -> str:
    shown = ", ".join(str(s) for s in steps[:limit])
    return shown + (f", ... ({len(steps)} in all)" if len(steps) > limit else "")


def hazard_lines(table: pd.DataFrame, name: str = "") -> list[str]:
    """Human-readable hazards of a :func:`checkpoint_table`: one line per kind, none if clean.

    Args:
        table: a :func:`checkpoint_table` (``model``/``seed`` columns, if present, are ignored).
        name: prefix of each line (the run's name).
    """
    import pandas as pd

    prefix = f"{name}: " if name else ""
    lines = []
    excluded = table[table["status"] == "duplicate-excluded"]
    if len(excluded):
        groups = sorted(
            {
                tuple(sorted([int(r.step)] + [int(s) for s in str(r.same_weights_as).split(";") if s]))
                for r in excluded.itertuples()
            }
        )
        kept = table[table["status"] == "duplicate-kept-final"]["step"].tolist()
        text = "; ".join("{" + ", ".join(map(str, g)) + "}" for g in groups)
        lines.append(
            f"{prefix}{len(excluded)} steps excluded, identical weights within each group {text}"
            + (
                f" (kept: final step {kept[0]}, digest equal to the final model's)"
                if kept
                else " (no label known right: every step of each group excluded)"
            )
        )
    for kind in ("partial-duplicate", "corrupt", "needs-remote-code"):
        for row in table[table["status"] == kind].itertuples():
            detail = getattr(row, "detail", "") or ""
            lines.append(f"{prefix}step {int(row.step)} {kind}: {detail}; left out of the search")
    listing = str(table["listing"].iloc[0]) if len(table) else ""
    details = (
        table["detail"].fillna("") if "detail" in table else pd.Series("", index=table.index)
    )  # older tables lack it
    explained = table[(table["status"] == "missing") & (details != "")]
    for row in explained.itertuples():  # listed, but its files are not whole (an interrupted download)
        lines.append(f"{prefix}step {int(row.step)} missing: {row.detail}; left out of the search")
    missing = table[(table["status"] == "missing") & ~table.index.isin(explained.index)]["step"].tolist()
    if missing:
        where = "not in the local hub cache" if listing.startswith("cache") else "missing"
        lines.append(f"{prefix}{len(missing)} steps of the schedule {where}: {_steps_text(missing)}")
    if listing.startswith("cache"):
        lines.append(f"{prefix}steps listed from the local hub cache, not the hub: {listing}")
    return lines


class WeightFileChecks:
    """The per-file checks of a :class:`~interp.sources.base.CheckpointSource` (its base class):
    shard digests, corrupt files, shards shared between steps. Reads the source's
    ``_check_step``, ``_resolve``, ``digest``, ``available_steps``, ``kept_duplicate``,
    ``_file_digests``, ``_problems``, ``allow_pickle``, ``trust_remote_code`` and ``model_id``."""

    if TYPE_CHECKING:  # what the source provides (declared for the type checker only)
        model_id: str
        allow_pickle: bool
        trust_remote_code: bool
        _problems: dict[int, str | None]
        _file_digests: dict[int, dict[str, str]]
        _non_finite: dict[int, dict[str, list[str]]]

        def _check_step(self, step: int) -> int: ...
        def _resolve(self, step: int) -> tuple[Path, str, str | None]: ...
        def digest(self, step: int) -> str: ...
        def available_steps(self) -> list[int]: ...
        def kept_duplicate(self, group: Sequence[int]) -> int | None: ...

    def file_digests(self, step: int) -> dict[str, str] | None:
        """``{weight file name: sha256 hex}`` of ``step`` (one entry per shard), or None when only
        the whole digest is known.

        Raises:
            CheckpointError: ``step`` is not available.
        """
        self.digest(step)
        return self._file_digests.get(self._check_step(step))

    def _local_weight_files(self, step: int) -> list[Path] | None:
        """``step``'s weight files when they are on this machine (None: not downloaded)."""
        folder, _, _ = self._resolve(step)
        return weight_files(folder, self.allow_pickle) or None

    #: Whether a step's folder is final as it is (a local run). A hub cache's folder fills as
    #: its files download, and a hub repository may hold one model in two formats: there a shard
    #: not yet fetched or a ``.bin`` beside the safetensors is no damage.
    _final_folders = True

    def corrupt_reason(self, step: int) -> str | None:
        """``"<file>: <what is wrong>"`` when ``step``'s weights on this machine are not whole, or
        None when whole or not downloaded. In order: two weight sets in the folder or a shard its
        index names absent (:meth:`_weight_set_problem`), a file truncated or its header
        overwritten (:func:`interp.sources.checkpoint_integrity.safetensors_problem`), files that
        lack or add tensors against the model of the step's ``config.json``
        (:func:`interp.sources.tensor_check.tensor_problem`, the tensors named), values that are
        not finite (:mod:`interp.sources.weight_scan`, known once the files were read to hash
        them: always for a local run; a hub step when it loads).

        Raises:
            CheckpointError: ``step`` is not available.
        """
        step = self._check_step(step)
        if step not in self._problems:
            files = self._local_weight_files(step) or []
            problem = self._weight_problem(step, files)
            if step not in self._problems:  # a check above may have found more (a load)
                self._problems[step] = problem
        return self._problems[step]

    def _weight_problem(self, step: int, files: Sequence[Path]) -> str | None:
        """What :meth:`corrupt_reason` reports for ``step``'s weight ``files`` (read only as far as
        needed: headers, then the one read that also hashes them)."""
        if not files:
            return None
        folder = files[0].parent
        problem = self._weight_set_problem(step, folder)
        if problem is not None:
            return problem
        for path in files:
            reason = file_problem(path)
            if reason is not None:
                return f"{path.name}: {reason}"
        config = self._model_config_file(step, folder)
        if (names := tensor_problem(files, self.trust_remote_code, config)) is not None:
            return f"{_files_text(files)}: {names}"
        if self._non_finite_known(step):
            return self._non_finite_text(step)
        return None

    def _weight_set_problem(self, step: int, folder: Path) -> str | None:
        """Two weight sets in ``folder`` (a safetensors file beside the shards its index names;
        pickle weights beside safetensors, in a final folder), or a shard the index names that
        the folder lacks (a final folder): one phrase naming the files, or None."""
        safe = weight_files(folder)
        shards: set[str] = set()
        indexes = sorted(folder.glob("*.safetensors.index.json"))
        for index in indexes:
            try:
                named = set(json.loads(index.read_text())["weight_map"].values())
            except (OSError, ValueError, KeyError, AttributeError, TypeError):
                continue
            absent = sorted(name for name in named if not (folder / name).exists())
            if absent and self._final_folders:
                return (
                    f"{absent[0]}: named by {index.name}, not in the folder "
                    f"({len(absent)} of {len(named)} shards absent)"
                )
            shards |= named
        others = [p.name for p in safe if p.name not in shards]
        held_shards = sorted(name for name in shards if (folder / name).exists())
        unknown = f"which one is step {step} is unknown: keep one set, move the other away"
        if held_shards and others:
            index_text = ", ".join(p.name for p in indexes)
            return f"two weight sets: {', '.join(others)} and {', '.join(held_shards)} ({index_text}); {unknown}"
        pickles = [p.name for p in pickle_weight_files(folder)]
        if safe and pickles and self._final_folders:
            return f"two weight sets: {', '.join(p.name for p in safe)} and {', '.join(pickles)}; {unknown}"
        return None

    def _scan_weight_files(self, step: int, files: Sequence[Path]) -> dict[str, str]:
        """``{file name: sha256 hex}`` of ``step``'s weight files, read once each
        (:func:`interp.sources.weight_scan.scan_file`): the same read records which tensors are
        not finite. A file whose structure is damaged is only hashed."""
        digests, bad = {}, {}
        for path in sorted(files, key=lambda p: p.name):
            if file_problem(path) is None:
                digests[path.name], bad[path.name] = scan_file(path)
            else:
                digests[path.name] = _sha256_of_file(path)
        self._non_finite[step] = {name: names for name, names in bad.items() if names}
        return digests

    def _non_finite_known(self, step: int) -> bool:
        """Whether ``step``'s files were read (hashing them reads them: a local run's digest);
        reading them for that here is the one read their digest needs anyway."""
        if step not in self._non_finite:
            try:
                self.digest(step)
            except Exception:  # not at hand (a hub step not cached): known when it loads
                return False
        return step in self._non_finite

    def _non_finite_text(self, step: int) -> str | None:
        bad = self._non_finite.get(step) or {}
        names = sorted(n for names in bad.values() for n in names)
        if not names:
            return None
        where = next(iter(bad)) if len(bad) == 1 else f"its {len(bad)} weight files"
        return f"{where}: {describe_non_finite(names)}"

    def refuse_non_finite(self, step: int, files: Sequence[Path], tensors) -> None:
        """At load, for a step whose files were not read before (a hub step, whose digest is its
        blob's name): refuse it when the ``tensors`` read (``{name: tensor}`` or ``(name,
        tensor)`` pairs, already in memory) hold a NaN or an inf; the step is then corrupt for the
        rest of the session.

        Raises:
            CorruptCheckpointError: one line naming the step, the files and the tensors.
        """
        if step in self._non_finite:
            return
        names = non_finite_names(tensors)
        if names:
            where = _files_text(files)
            self._problems[step] = f"{where}: {describe_non_finite(names)}"
            raise CorruptCheckpointError(
                f"{self.model_id} step {step}: {where} {describe_non_finite(names)}; "
                "the step is left out: download or re-train it again"
            )

    def corrupt_steps(self) -> dict[int, str]:
        """``{step: "<file>: <what is wrong>"}`` for every available step with a corrupt weight file."""
        reasons = {step: self.corrupt_reason(step) for step in self.available_steps()}
        return {step: reason for step, reason in reasons.items() if reason is not None}

    def _refuse_corrupt(self, step: int, files: Sequence[Path]) -> None:
        problem = self._weight_set_problem(step, files[0].parent) if files else None
        if problem is not None:
            self._problems[step] = problem
            raise CorruptCheckpointError(f"{self.model_id} step {step}: {problem}; the step is left out")
        for path in files:
            reason = file_problem(path)
            if reason is not None:
                self._problems[step] = f"{path.name}: {reason}"
                raise CorruptCheckpointError(
                    f"{self.model_id} step {step}: {path.name} is corrupt ({reason}); "
                    "the step is left out: download or re-train it again"
                )
        config = self._model_config_file(step, files[0].parent) if files else None
        names = tensor_problem(files, self.trust_remote_code, config)
        if names is not None:
            self._problems[step] = f"{_files_text(files)}: {names}"
            raise CorruptCheckpointError(
                f"{self.model_id} step {step}: {_files_text(files)} {names}; "
                "the step is left out: download or re-train it again"
            )
        if self._non_finite_known(step) and (text := self._non_finite_text(step)) is not None:
            self._problems[step] = text
            where, what = text.split(": ", 1)
            raise CorruptCheckpointError(
                f"{self.model_id} step {step}: {where} {what}; the step is left out: download or re-train it again"
            )

    def remote_code_reason(self, step: int) -> str | None:
        """What custom code ``step``'s ``config.json`` asks for (``auto_map``), with "this tool does
        not run checkpoint code"; None when it asks for none, when ``trust_remote_code`` is on
        (a hub source told so), or when the config is not on this machine.

        Raises:
            CheckpointError: ``step`` is not available.
        """
        step = self._check_step(step)
        if self.trust_remote_code:
            return None
        try:
            folder = self._weights_folder(step)
        except Exception:  # not at hand (a hub step not cached)
            return None
        return None if folder is None else remote_code_request(folder / "config.json")

    def remote_code_steps(self) -> dict[int, str]:
        """``{step: what it asks for}`` for every available step that needs custom code
        (:meth:`remote_code_reason`): status ``needs-remote-code``, left out of the search."""
        reasons = {step: self.remote_code_reason(step) for step in self.available_steps()}
        return {step: reason for step, reason in reasons.items() if reason is not None}

    def refuse_remote_code(self, step: int) -> None:
        """Raise :class:`CheckpointError` (one line) when ``step`` needs custom code."""
        reason = self.remote_code_reason(step)
        if reason is not None:
            raise CheckpointError(f"{self.model_id} step {step}: {reason}; the step is left out")

    def partial_duplicates(self) -> dict[int, tuple[list[int], list[str]]]:
        """Steps sharing a weight shard with another step whose weights otherwise differ:
        ``{step: (other steps, shared file names)}``.

        As for whole duplicates (:meth:`duplicate_steps`), every such step is left out of the
        search unless it is the final step and its digest equals :meth:`final_digest`.
        """
        steps = self.available_steps()
        digests = {step: self.digest(step) for step in steps}
        files = {step: f for step in steps if (f := self.file_digests(step))}
        found = shared_files(files, digests)
        if found and steps[-1] in found and self.kept_duplicate([steps[-1]]) == steps[-1]:
            del found[steps[-1]]
        return found

    def shared_tensors(self, step: int, names: Sequence[str]) -> list[str]:
        """Names of the tensors stored in ``step``'s weight files ``names`` (from the files'
        headers, else the checkpoint's index), [] when unknown."""
        try:
            folder = self._weights_folder(step)
        except Exception:  # not downloaded: no header to read
            folder = None
        return sorted({t for name in names for t in tensor_names(folder, name)})

    def _weights_folder(self, step: int) -> Path | None:
        return self._resolve(step)[0]
