"""A local suite on disk: :class:`LocalSuiteSource` (layout in :mod:`interp.sources.base`), and the
overlay of re-trained steps ``emergence zoom`` writes (``ROOT/zoom/step{N}/``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from interp.sources.catalogue import (  # noqa: F401
    POLYPYTHIA_SIZES,
    is_embedded_name,
    is_hub_id,
    is_pythia_id,
    pythia_model_ids,
)

if TYPE_CHECKING:  # the bridge and transformers are imported when first needed (slow imports)
    from transformers import PreTrainedTokenizerBase
from interp.sources.base import CheckpointSource
from interp.sources.loading import (
    _SHA256_HEX,
    _STEP_NAME,
    _TOKENIZER_PATTERNS,
    _sha256_of_file,
    combine_digests,
)


class LocalSuiteSource(CheckpointSource):
    """A local checkpoint suite (layout in the module docstring), loaded offline.

    Args:
        root: the suite folder.
        model_id: a name for the suite (default: ``suite.json``'s ``model_id``, else the folder name).
        allow_pickle: also load ``.bin`` weights when a step has no safetensors.
        include_zoom: also offer the steps that ``emergence zoom`` re-trained into the overlay
            ``ROOT/zoom/step{N}/`` (off by default: the base schedule is what analyses read).

    Raises:
        ValueError: ``root`` is not a folder, holds no ``step{N}/`` folders, or ``suite.json``
            lists a step whose folder is missing.
    """

    def __init__(
        self, root: str | Path, model_id: str | None = None, allow_pickle: bool = False, include_zoom: bool = False
    ):
        super().__init__()
        self.root = Path(root).expanduser()
        if not self.root.is_dir():
            raise ValueError(
                f"local suite {str(self.root)!r} is not a folder; expected ROOT/step{{N}}/ checkpoint folders"
            )
        meta_file = self.root / "suite.json"
        self.metadata: dict = json.loads(meta_file.read_text()) if meta_file.is_file() else {}
        folders = {
            int(m.group(1)): p for p in self.root.iterdir() if p.is_dir() and (m := _STEP_NAME.fullmatch(p.name))
        }
        if "steps" in self.metadata:
            declared = sorted(int(s) for s in self.metadata["steps"])
            missing = [s for s in declared if s not in folders]
            if missing:
                raise ValueError(f"{meta_file} lists steps {missing[:5]} but their step{{N}}/ folders are missing")
            folders = {s: folders[s] for s in declared}
        if not folders:
            raise ValueError(f"local suite {str(self.root)!r} has no step{{N}}/ checkpoint folders")
        if include_zoom and (self.root / "zoom").is_dir():  # overlay steps never replace base steps
            for p in (self.root / "zoom").iterdir():
                if p.is_dir() and (m := _STEP_NAME.fullmatch(p.name)):
                    folders.setdefault(int(m.group(1)), p)
        self._folders = dict(sorted(folders.items()))
        self.model_id = model_id or self.metadata.get("model_id") or self.root.name
        self.allow_pickle = allow_pickle
        self.trust_remote_code = False

    def available_steps(self) -> list[int]:
        """The suite's steps, sorted ascending."""
        return list(self._folders)

    def _resolve(self, step: int) -> tuple[Path, str, str | None]:
        folder = self._folders[step]
        return folder, folder.name, None

    def _bridge_name(self, folder: Path) -> str:
        return str(folder)  # a local path: the bridge never looks it up on the hub

    def _tokenizer_dir(self, step: int, folder: Path | None = None) -> Path:
        own = self.root / "tokenizer"
        if own.is_dir():
            return own
        for folder in [self._folders[step], *self._folders.values()]:
            if any((folder / name).is_file() for name in _TOKENIZER_PATTERNS):
                return folder
        raise ValueError(
            f"local suite {str(self.root)!r} has no tokenizer: expected ROOT/tokenizer/ (tokenizer.save_pretrained)"
        )

    def tokenizer(self) -> PreTrainedTokenizerBase:
        """The suite's tokenizer, from ``ROOT/tokenizer/`` (else the first step folder with one),
        carrying the model's context (:meth:`context_length`) for the tasks' prompt check.

        Raises:
            TokenizerMismatchError: it differs from the tokenizer of a step loaded earlier.
        """
        from transformers import AutoTokenizer

        first = self.available_steps()[0]
        tokenizer = AutoTokenizer.from_pretrained(self._tokenizer_dir(first))
        self._check_tokenizer(first, tokenizer)
        return self._limit_context(tokenizer)

    def _config_file(self, step: int) -> Path | None:
        return self._folders[step] / "config.json"

    def revision(self, step: int) -> str:
        """The step's folder name."""
        folder = self._folders.get(step)
        return folder.name if folder is not None else f"step{step}"

    def final_digest(self) -> str | None:
        """``suite.json``'s ``final_digest`` (the final model's weight digest), if recorded."""
        value = self.metadata.get("final_digest")
        return value if isinstance(value, str) and _SHA256_HEX.fullmatch(value) else None

    def digest(self, step: int) -> str:
        """sha256 of ``step``'s weight file bytes (hashed once, then remembered).

        Raises:
            CheckpointError: ``step`` is not available.
            ValueError: the step has no (allowed) weight files.
        """
        step = self._check_step(step)
        if step not in self._digests:
            files = sorted(self._require_weights(self._folders[step], step), key=lambda p: p.name)
            self._file_digests[step] = {p.name: _sha256_of_file(p) for p in files}
            self._digests[step] = combine_digests(list(self._file_digests[step].values()))
        return self._digests[step]


#: Folder of a run's zoom overlay: ``RUN/zoom/step{N}/`` (written by :mod:`interp.zoom`).
ZOOM_DIR = "zoom"


def overlay_steps(run: str | Path) -> list[int]:
    """Steps stored in the run's zoom overlay (``RUN/zoom/step{N}/``), sorted."""
    folder = Path(run) / ZOOM_DIR
    if not folder.is_dir():
        return []
    return sorted(
        int(p.name[4:]) for p in folder.iterdir() if p.is_dir() and p.name[4:].isdigit() and p.name.startswith("step")
    )


def finished_run(folder: str | Path) -> bool:
    """Whether ``folder`` holds a finished run of a trained suite: its ``suite.json`` is present and
    every step it lists has its ``step{N}/`` folder.

    A folder with ``suite.json`` but missing step folders (a removal or a copy cut short) is
    damaged: it is named on standard error and removed, so that the caller trains the run again
    instead of trusting it. False when ``suite.json`` is absent (a run not finished, left for
    :func:`interp.sources.interrupted.adopt_interrupted`).
    """
    import sys

    from interp.core.io import remove_folder

    folder = Path(folder)
    meta_file = folder / "suite.json"
    if not meta_file.is_file():
        return False
    try:
        steps = [int(s) for s in json.loads(meta_file.read_text()).get("steps", [])]
    except (ValueError, TypeError, AttributeError) as err:
        why = f"unreadable suite.json: {err}"
    else:
        missing = [s for s in steps if not (folder / f"step{s}").is_dir()]
        if not missing:
            return True
        why = f"suite.json lists steps {missing[:5]} without their step{{N}}/ folders"
    print(f"{folder}: damaged run folder ({why}); it is removed and trained again", file=sys.stderr)
    remove_folder(folder)
    return False
