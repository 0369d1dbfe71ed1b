"""A local suite on disk: :class:`LocalSuiteSource` (layout in :mod:`interp.sources.base`), and the
overlay of re-trained steps ``emergence zoom`` writes (``ROOT/zoom/step{N}/``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from interp.sources.base import CheckpointSource
from interp.sources.layouts import (
    OTHER_SHAPE,
    NoCheckpointFolders,
    find_step_folders,
    folder_problems,
    folder_tokens,
)
from interp.sources.loading import (
    _SHA256_HEX,
    _STEP_NAME,
    _TOKENIZER_PATTERNS,
    CorruptCheckpointError,
    _sha256_of_file,
    combine_digests,
    weight_candidates,
)

if TYPE_CHECKING:  # the bridge and transformers are imported when first needed (slow imports)
    import pandas as pd
    from transformers import PreTrainedTokenizerBase


class LocalSuiteSource(CheckpointSource):
    """A local checkpoint suite or training run (layouts in :mod:`interp.sources.layouts`), loaded offline.

    The checkpoint folders may be named ``step{N}/`` (this toolkit's suites), ``checkpoint-{N}/``
    (transformers ``Trainer``), ``global_step{N}/``, ``iter_{N:07d}/``, ``step-{N}/``,
    ``step_{N}/``, ``ckpt-{N}/``, hub branch names (``step{N}-tokens{M}B/``, tokens recorded), or
    anything ``step_pattern`` describes. A run folder with no checkpoint folders may hold one
    single-file checkpoint per step instead (Lightning ``.ckpt``, nanoGPT ``.pt``, a plain state
    dict in ``.pt``/``.bin``/``.safetensors``: :mod:`interp.sources.checkpoint_files`), each
    converted once into a Hugging Face folder in the cache. The model's config is given once
    where the checkpoints lack it: ``config`` (``--config``), else the run folder's ``config.json``
    (a step folder's own ``config.json`` wins), else what a file records. A damaged folder (no
    ``config.json`` and none given for the run, one that is not JSON, or one whose model shape differs from the run's) stays
    listed and is marked ``corrupt`` (:meth:`corrupt_reason`, ``checkpoints.csv``), left out of
    every search; loading it raises :class:`CorruptCheckpointError`, except a step of another
    shape, which loads with a one-line ``RuntimeWarning`` (it is a whole model, asked for by
    step). A folder with no weight files at all is listed as missing, with the reason.

    Args:
        root: the suite or run folder.
        model_id: a name for the suite (default: ``suite.json``'s ``model_id``, else the folder name).
        allow_pickle: also load ``.bin`` weights when a step has no safetensors (unpickling can
            run code: only for a run you trust; ``--allow-pickle`` on the command line).
        include_zoom: also offer the steps that ``emergence zoom`` re-trained into the overlay
            ``ROOT/zoom/step{N}/`` (off by default: the base schedule is what analyses read).
        step_pattern: how the checkpoint folders (or files, without their suffix) are named
            (``"epoch{E}-step{N}"``; :func:`interp.sources.layouts.check_step_pattern`); None: recognised.
        config: the model's ``config.json`` (or a folder holding one) for every step that holds
            none (``--config``); None: the run folder's ``config.json``, if any.

    Raises:
        ValueError: ``root`` is not a folder (a checkpoint file: its folder is named); its folders
            follow none of the conventions, or two, and it holds no checkpoint files (one line
            naming what was found and what would be read); ``config`` is not a config.json;
            single-file checkpoints that need full unpickling without ``allow_pickle``, whose
            step is not known, or with no config given or recorded; ``suite.json`` lists a step
            whose folder is missing; no folder holds weight files.
    """

    def __init__(
        self,
        root: str | Path,
        model_id: str | None = None,
        allow_pickle: bool = False,
        include_zoom: bool = False,
        step_pattern: str | None = None,
        config: str | Path | None = None,
    ):
        super().__init__()
        self.root = Path(root).expanduser()
        if self.root.is_file():
            raise ValueError(
                f"local suite {str(self.root)!r} is a file; give the folder that holds the run's checkpoints "
                f"({str(self.root.parent)!r}: one checkpoint folder or file per step)"
            )
        if not self.root.is_dir():
            raise ValueError(
                f"local suite {str(self.root)!r} is not a folder; expected a folder of checkpoint folders "
                "(step{N}/, checkpoint-{N}/, ...) or of checkpoint files (.ckpt, .pt, .bin, .safetensors)"
            )
        from interp.sources.checkpoint_files import read_config_file

        #: the run's config.json given once (``config``, else ROOT/config.json): serves steps without one
        self.run_config: Path | None = None
        if config is not None:
            given = Path(config).expanduser()
            read_config_file(given)  # checked: one line when it is not a transformers config
            self.run_config = given / "config.json" if given.is_dir() else given
        elif (self.root / "config.json").is_file():
            self.run_config = self.root / "config.json"
        meta_file = self.root / "suite.json"
        self.metadata: dict = json.loads(meta_file.read_text()) if meta_file.is_file() else {}
        #: {step: single-file checkpoint} when the run is one file per step (else empty)
        self._files: dict[int, Path] = {}
        file_problems: dict[int, str] = {}
        try:
            folders, self.layout = find_step_folders(self.root, step_pattern)
        except NoCheckpointFolders as err:
            folders, self.layout, file_problems = self._read_files(err, step_pattern, allow_pickle, config)
        if "steps" in self.metadata:
            declared = sorted(int(s) for s in self.metadata["steps"])
            missing = [s for s in declared if s not in folders]
            if missing:
                raise ValueError(f"{meta_file} lists steps {missing[:5]} but their {self.layout}/ folders are missing")
            folders = {s: folders[s] for s in declared}
        if include_zoom and (self.root / "zoom").is_dir():  # overlay steps never replace base steps
            for p in (self.root / "zoom").iterdir():
                if p.is_dir() and (m := _STEP_NAME.fullmatch(p.name)):
                    folders.setdefault(int(m.group(1)), p)
        self.model_id = model_id or self.metadata.get("model_id") or self.root.name
        self.allow_pickle = allow_pickle
        self.trust_remote_code = False
        #: steps whose folder holds no weight file at all: {step: reason}; listed as missing
        self._no_weights = {
            s: why for s, p in folders.items() if not self._files and (why := self._weightless(p)) is not None
        }
        if len(self._no_weights) == len(folders):
            step = min(folders)
            raise ValueError(
                f"local suite {str(self.root)!r}: none of its {len(folders)} {self.layout}/ folders holds "
                f"Hugging Face weights ({folders[step].name}/: {self._no_weights[step]}); convert the checkpoints "
                "with model.save_pretrained(...) first"
            )
        self._weightless_folders = {s: folders[s] for s in self._no_weights}
        self._folders = dict(sorted((s, p) for s, p in folders.items() if s not in self._no_weights))
        #: damaged folders (config.json missing, unreadable or of another shape), or single-file
        #: checkpoints that could not be read or converted: {step: reason}
        self._folder_problems = {
            **folder_problems({s: p for s, p in self._folders.items() if s not in file_problems}, self.run_config),
            **file_problems,
        }
        #: tokens seen per step, where the folder names carry them (``step100-tokens205K``)
        self._tokens = folder_tokens(self._folders) if not self._files else {}

    def _read_files(
        self, err: NoCheckpointFolders, step_pattern: str | None, allow_pickle: bool, config: str | Path | None
    ) -> tuple[dict[int, Path], str, dict[int, str]]:
        """The run's single-file checkpoints, converted ({step: folder}, layout, {step: problem}),
        or ``err`` with what else would be read when the folder holds none."""
        from interp.sources.checkpoint_files import (
            CHECKPOINT_SUFFIXES,
            checkpoint_file_candidates,
            find_checkpoint_files,
            read_config_file,
        )

        if not checkpoint_file_candidates(self.root):
            nested = [
                p.name
                for p in sorted(self.root.iterdir())
                if p.is_dir() and not p.name.startswith(".") and checkpoint_file_candidates(p)
            ]
            hint = f"; did you mean {str(self.root / nested[0])!r} (it holds checkpoint files)?" if nested else ""
            raise ValueError(
                f"{err}; nor checkpoint files ({', '.join(CHECKPOINT_SUFFIXES)}: Lightning, nanoGPT, a state dict){hint}"
            ) from None
        run_config = read_config_file(self.run_config) if self.run_config is not None else None
        road = find_checkpoint_files(self.root, step_pattern, allow_pickle, run_config)
        self._files = road.files
        return road.folders, road.layout, road.problems

    @staticmethod
    def _weightless(folder: Path) -> str | None:
        """Why ``folder`` holds no weight file (safetensors or ``.bin``), or None when it holds one."""
        if any(True for _ in weight_candidates(folder)):
            return None
        found = sorted(p.name for p in folder.iterdir())
        shown = ", ".join(found[:4]) + (f", ... ({len(found)} files)" if len(found) > 4 else "")
        return f"no weight files (found {shown or 'nothing'})"

    def _model_config_file(self, step: int, folder: Path) -> Path:
        """The step folder's own ``config.json``, else the run's given once (:attr:`run_config`)."""
        own = folder / "config.json"
        return own if own.is_file() or self.run_config is None else self.run_config

    def tokens_at(self, step: int) -> int | None:
        """Tokens seen at ``step`` when its folder name carries them (``step100-tokens205K``: 205000)."""
        return self._tokens.get(step)

    def _require_weights(self, folder: Path, step: int | None) -> list[Path]:
        if step in self._files and step in self._folder_problems:  # a file that could not be converted
            raise CorruptCheckpointError(
                f"{self.model_id} step {step}: {self._folder_problems[step]}; the step is left out: re-save it"
            )
        return super()._require_weights(folder, step)

    def missing_steps(self) -> list[int]:
        """Steps whose checkpoint folder exists but holds no weight files (ascending)."""
        return sorted(self._no_weights)

    def _missing_reason(self, step: int) -> str:
        if step in self._no_weights:
            return f" ({self.root.name}/{self._weightless_folders[step].name}/: {self._no_weights[step]})"
        return ""

    def corrupt_reason(self, step: int) -> str | None:
        """As :meth:`CheckpointSource.corrupt_reason`, and first the folder's own damage:
        ``"config.json: ..."`` (missing, not JSON, or another model's shape)."""
        step = self._check_step(step)
        if step in self._folder_problems:
            self._problems[step] = self._folder_problems[step]
        return super().corrupt_reason(step)

    def _refuse_corrupt(self, step: int, files) -> None:
        problem = self._folder_problems.get(step)
        if problem is not None and problem.startswith(OTHER_SHAPE):  # a whole model, asked for by step
            import warnings

            warnings.warn(
                f"{self.model_id} step {step} ({self._folders[step].name}/): {problem}; loaded as asked, "
                "left out of every search",
                RuntimeWarning,
                stacklevel=3,
            )
        elif problem is not None:
            raise CorruptCheckpointError(
                f"{self.model_id} step {step} ({self._folders[step].name}/): {self._folder_problems[step]}; "
                "the step is left out: re-save or re-train it"
            )
        super()._refuse_corrupt(step, files)

    def loss_curve(self) -> pd.DataFrame | None:
        """The run's training loss per logged step: ``loss.csv`` (this toolkit's trainer), else the
        ``log_history`` of the newest readable ``trainer_state.json`` (transformers ``Trainer``;
        a file cut short is named in a warning and the next older one read).

        Returns:
            DataFrame with columns ``step`` (optimizer steps), ``loss`` (nats), ``lr``; None when
            the run records no loss.
        """
        import pandas as pd

        from interp.sources.layouts import trainer_loss

        if (self.root / LOSS_FILE).is_file():
            return pd.read_csv(self.root / LOSS_FILE)
        return trainer_loss(self.root, self._folders)

    def available_steps(self) -> list[int]:
        """The suite's steps, sorted ascending."""
        return list(self._folders)

    def _resolve(self, step: int) -> tuple[Path, str, str | None]:
        folder = self._folders[step]
        return folder, self.revision(step), None

    def _bridge_name(self, folder: Path) -> str:
        return str(folder)  # a local path: the bridge never looks it up on the hub

    def _tokenizer_dir(self, step: int, folder: Path | None = None) -> Path:
        """Where the tokenizer is read: ``ROOT/tokenizer/``, else the step's own folder, else the run
        folder itself (a ``Trainer`` run saves it there once, at the end), else any other step's."""
        own = self.root / "tokenizer"
        if own.is_dir():
            return own
        for candidate in [self._folders[step], self.root, *self._folders.values()]:
            if any((candidate / name).is_file() for name in _TOKENIZER_PATTERNS):
                return candidate
        raise ValueError(
            f"local suite {str(self.root)!r} has no tokenizer: looked in {self.root.name}/tokenizer/, "
            f"{self.root.name}/ and its {len(self._folders)} {self.layout}/ folders for tokenizer.json, "
            "tokenizer_config.json, vocab.json or tokenizer.model; save one with tokenizer.save_pretrained(ROOT)"
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
        return self._model_config_file(step, self._folders[step])

    def revision(self, step: int) -> str:
        """The step's folder name (its file's name for a run of single-file checkpoints)."""
        if step in self._files:
            return self._files[step].name
        folder = self._folders.get(step)
        folder = folder or self._weightless_folders.get(step)
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
        if step in self._files and step in self._folder_problems and step not in self._digests:
            self._digests[step] = _sha256_of_file(self._files[step])  # not converted: the file's own bytes
        if step not in self._digests:
            files = sorted(self._require_weights(self._folders[step], step), key=lambda p: p.name)
            self._file_digests[step] = self._scan_weight_files(step, files)  # the same read checks the values
            self._digests[step] = combine_digests(list(self._file_digests[step].values()))
        return self._digests[step]


#: The loss file of a run this toolkit trained (``interp.sources.embedded.LOSS_FILE``, written there;
#: read here without importing the trainer).
LOSS_FILE = "loss.csv"

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
