"""How a local training run names its checkpoint folders, and what each folder holds.

A local run is a folder of checkpoint folders, one per training step. The conventions
recognised without being told (:data:`LAYOUTS`), each written as a *step pattern*:

==================  ==========================================================================
``step{N}``         emergence-lens's own suites (:mod:`interp.sources.embedded`)
``checkpoint-{N}``  transformers ``Trainer`` (``save_steps``; ``TrainingArguments.output_dir``)
``global_step{N}``  DeepSpeed and GPT-NeoX (converted to Hugging Face format in place)
``iter_{N:07d}``    Megatron-LM (``iter_0001000``; converted to Hugging Face format in place)
``step-{N}``        common hand-written names
``step_{N}``
``ckpt-{N}``
==================  ==========================================================================

Every name the hub parser reads (:mod:`interp.sources.families`: OLMo's ``step{N}-tokens{M}B``,
OLMo-2's ``stage{k}-step{N}-tokens{M}B``, with one series followed as on the hub) is read from
local folder names too, the tokens recorded (:func:`folder_tokens`).

Any other naming is given as a pattern (``--step-pattern 'epoch{E}-step{N}'`` on the command
line, ``step_pattern=`` in Python): ``{N}`` is the training step (required, once), ``{N:07d}``
a step written with exactly 7 digits, any other ``{LETTERS}`` placeholder an integer that is read
and ignored (an epoch, a stage); the rest of the text is matched literally.
:func:`find_step_folders` matches the folders of a run against the conventions and refuses, in
one line listing what was found and the patterns tried, a run whose folders follow none or two.

:func:`folder_problems` names what is wrong with a checkpoint folder before anything loads:
no ``config.json`` (or one that is not JSON), or a ``config.json`` whose shape (layers, heads,
widths, vocabulary) differs from the rest of the run. A weight file cut short is found by
:mod:`interp.sources.checkpoint_integrity` from its header, as for any source.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "HUB_NAMES",
    "LAYOUTS",
    "SHAPE_KEYS",
    "NoCheckpointFolders",
    "StepPattern",
    "check_step_pattern",
    "find_step_folders",
    "folder_problems",
    "folder_tokens",
    "trainer_loss",
]

#: The folder-name conventions recognised without being told, in the order they are tried.
LAYOUTS: tuple[str, ...] = (
    "step{N}",
    "checkpoint-{N}",
    "global_step{N}",
    "iter_{N:07d}",
    "step-{N}",
    "step_{N}",
    "ckpt-{N}",
)

#: Folders of a run that are never checkpoints (the zoom overlay, a saved tokenizer, logs).
NOT_CHECKPOINTS = {"zoom", "tokenizer", "runs", "logs", "wandb", "__pycache__"}

#: The convention of folders named as hub branches are (:mod:`interp.sources.families`), read
#: where no convention of :data:`LAYOUTS` reads them.
HUB_NAMES = "step{N}-tokens{M} (hub branch names)"


class NoCheckpointFolders(ValueError):
    """A run folder none of whose folders follows a checkpoint convention (the message names what
    was found and the patterns tried); :class:`interp.sources.local.LocalSuiteSource` then reads its
    single-file checkpoints, and only when it holds none is the folder refused (the message then
    also says which files would be read).

    Fix: give the folder that holds the checkpoint folders or files (Lightning: its
    ``checkpoints/`` folder), or their naming with ``--step-pattern`` (``step_pattern=``).
    """


_PLACEHOLDER = re.compile(r"\{([A-Za-z]+)(?::0(\d+)d)?\}")


@dataclass(frozen=True)
class StepPattern:
    """One folder-name convention: its text (``checkpoint-{N}``) and the regex it compiles to."""

    text: str
    regex: re.Pattern

    def step(self, name: str) -> int | None:
        """The training step a folder named ``name`` holds, or None when the name does not match."""
        match = self.regex.fullmatch(name)
        return int(match.group("step")) if match else None


def check_step_pattern(text: str) -> StepPattern:
    """Compile a step pattern (see the module docstring): ``{N}`` the step, ``{N:07d}`` a step of
    exactly 7 digits, other ``{LETTERS}`` an ignored integer, everything else literal.

    Raises:
        ValueError: ``text`` is empty, has no ``{N}`` or two, a placeholder with another format
            than ``:0Kd``, or an unmatched brace (one line naming the pattern and the valid form).
    """
    valid = "e.g. 'checkpoint-{N}', 'iter_{N:07d}', 'epoch{E}-step{N}' ({N}: the step, once)"
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"step pattern {text!r} is empty; expected {valid}")
    parts, pos, steps = [], 0, 0
    for match in _PLACEHOLDER.finditer(text):
        literal = text[pos : match.start()]
        if "{" in literal or "}" in literal:
            raise ValueError(f"step pattern {text!r} has a brace that is not a placeholder; expected {valid}")
        parts.append(re.escape(literal))
        name, width = match.group(1), match.group(2)
        if name == "N":
            steps += 1
            parts.append(f"(?P<step>\\d{{{int(width)}}})" if width else r"(?P<step>\d+)")
        else:
            parts.append(f"\\d{{{int(width)}}}" if width else r"\d+")
        pos = match.end()
    tail = text[pos:]
    if "{" in tail or "}" in tail:
        raise ValueError(f"step pattern {text!r} has a brace that is not a placeholder; expected {valid}")
    parts.append(re.escape(tail))
    if steps != 1:
        raise ValueError(
            f"step pattern {text!r} has {'no' if steps == 0 else steps} {{N}} placeholder"
            f"{'s' if steps > 1 else ''}; expected {valid}"
        )
    return StepPattern(text, re.compile("".join(parts)))


_KNOWN = tuple(check_step_pattern(text) for text in LAYOUTS)


def _shown(names: Sequence[str], limit: int = 5) -> str:
    names = sorted(names)
    if not names:
        return "nothing"
    return ", ".join(f"{n}/" for n in names[:limit]) + (f", ... ({len(names)} in all)" if len(names) > limit else "")


def find_step_folders(root: Path, step_pattern: str | None = None) -> tuple[dict[int, Path], str]:
    """The checkpoint folders of the run in ``root``, by training step, and the convention they follow.

    Args:
        root: the run folder.
        step_pattern: the convention to use (see :func:`check_step_pattern`); None: the one of
            :data:`LAYOUTS` that the folders follow.

    Returns:
        (``{step: folder}``, the pattern's text), steps ascending.

    Raises:
        ValueError: no folder matches (the folders found and the patterns tried named), the
            folders follow two conventions (both named, with a few folders of each), two folders
            name one step (``step-10`` and ``step-010``), or ``step_pattern`` is malformed.
    """
    folders = [p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")]
    candidates = [p for p in folders if p.name not in NOT_CHECKPOINTS]
    patterns = [check_step_pattern(step_pattern)] if step_pattern is not None else list(_KNOWN)
    matched: dict[str, dict[int, list[Path]]] = {}
    for pattern in patterns:
        for folder in candidates:
            step = pattern.step(folder.name)
            if step is not None:
                matched.setdefault(pattern.text, {}).setdefault(step, []).append(folder)
    if step_pattern is None:  # names the hub parser reads and no layout does: OLMo's step{N}-tokens{M}B
        from interp.sources.families import RevisionParser, build_schedule

        parser = RevisionParser()
        hub = [c for c in candidates if parser.parse(c.name) and not any(p.step(c.name) is not None for p in patterns)]
        if hub:
            by_name = {c.name: c for c in hub}
            schedule = build_schedule(by_name)
            matched[HUB_NAMES] = {step: [by_name[r.name]] for step, r in schedule.revisions.items()}
            for rev in schedule.alternates:
                matched[HUB_NAMES][rev.step].append(by_name[rev.name])
    tried = ", ".join(p.text for p in patterns) + (
        ", hub branch names (step{N}-tokens{M}B)" if step_pattern is None else ""
    )
    how = (
        "give the folders' pattern with --step-pattern (step_pattern= in Python), e.g. 'epoch{E}-step{N}'"
        if step_pattern is None
        else "check the pattern against the folder names"
    )
    if not matched:
        inner = [
            f"{folder.name}/ ({pattern.text}/ folders)"
            for folder in sorted(candidates)
            for pattern in patterns
            if any(c.is_dir() and pattern.step(c.name) is not None for c in folder.iterdir())
        ]
        hint = f"; did you mean {inner[0]}?" if inner else ""
        raise NoCheckpointFolders(
            f"local suite {str(root)!r} has no checkpoint folders: found {_shown([p.name for p in candidates])}; "
            f"tried {tried}; {how}{hint}"
        )
    if len(matched) > 1:
        which = "; ".join(
            f"{text} ({_shown([f.name for fs in steps.values() for f in fs], 2)})" for text, steps in matched.items()
        )
        raise ValueError(
            f"local suite {str(root)!r} mixes checkpoint conventions: {which}; "
            "pick one with --step-pattern (step_pattern= in Python)"
        )
    ((text, steps),) = matched.items()
    clashes = {step: fs for step, fs in steps.items() if len(fs) > 1}
    if clashes:
        step, fs = min(clashes.items())
        raise ValueError(
            f"local suite {str(root)!r}: folders {', '.join(sorted(f.name for f in fs))} both name step {step}; "
            "keep one"
        )
    return {step: fs[0] for step, fs in sorted(steps.items())}, text


#: ``config.json`` keys that fix the shape of a model's weights (different names across
#: architectures); two steps of one run must agree on every one they carry.
SHAPE_KEYS = (
    "model_type",
    "architectures",
    "vocab_size",
    "hidden_size",
    "n_embd",
    "d_model",
    "num_hidden_layers",
    "n_layer",
    "num_layers",
    "num_attention_heads",
    "n_head",
    "num_key_value_heads",
    "head_dim",
    "intermediate_size",
    "n_inner",
    "max_position_embeddings",
    "n_positions",
    "rotary_pct",
    "tie_word_embeddings",
)


#: How :func:`folder_problems` begins the reason of a step whose model has another shape.
OTHER_SHAPE = "config.json: another model's shape"


def _config_shape(config_file: Path) -> tuple[dict | None, str | None]:
    """(the shape keys of ``config_file``, None) or (None, what is wrong with it)."""
    if not config_file.is_file():
        return None, "config.json: missing (the checkpoint was cut short while saving?)"
    try:
        raw = json.loads(config_file.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as err:
        return None, f"config.json: not readable JSON ({type(err).__name__}: {str(err).splitlines()[0]})"
    if not isinstance(raw, dict):
        return None, "config.json: not a JSON object"
    return {k: raw[k] for k in SHAPE_KEYS if k in raw}, None


def folder_tokens(folders: dict[int, Path]) -> dict[int, int]:
    """Tokens seen at each step whose folder name carries them (``step100-tokens205K``: 205000),
    read by the hub's revision parser (:class:`interp.sources.families.RevisionParser`)."""
    from interp.sources.families import RevisionParser

    parser = RevisionParser()
    found = {step: parser.parse(folder.name) for step, folder in folders.items()}
    return {step: rev.tokens for step, rev in found.items() if rev is not None and rev.tokens is not None}


def folder_problems(folders: dict[int, Path], run_config: Path | None = None) -> dict[int, str]:
    """What is wrong with each damaged checkpoint folder of one run, before anything loads.

    A folder without a readable ``config.json`` is damaged (unless the run's config, given once,
    serves it); so is one whose ``config.json`` disagrees with the run's shape (:data:`SHAPE_KEYS`):
    the shape most steps share, the final step's on a tie.

    Args:
        folders: ``{step: folder}`` of one run.
        run_config: the run's ``config.json`` given once (the run folder's, or ``--config``): read
            for the folders that hold none; None: every folder must hold its own.

    Returns:
        ``{step: "config.json: what is wrong"}`` for the damaged steps only.
    """
    shapes: dict[int, dict] = {}
    problems: dict[int, str] = {}
    for step, folder in folders.items():
        own = folder / "config.json"
        shape, problem = _config_shape(own if own.is_file() or run_config is None else run_config)
        if problem is not None:
            problems[step] = problem
        else:
            shapes[step] = shape or {}
    if not shapes:
        return problems
    counts = Counter(json.dumps(s, sort_keys=True) for s in shapes.values())
    final = json.dumps(shapes[max(shapes)], sort_keys=True)
    top = max(counts.values())
    reference = final if counts[final] == top else next(k for k, n in counts.items() if n == top)
    ref_shape = json.loads(reference)
    ref_step = max(s for s, shape in shapes.items() if json.dumps(shape, sort_keys=True) == reference)
    for step, shape in shapes.items():
        keys = sorted(k for k in set(shape) | set(ref_shape) if shape.get(k) != ref_shape.get(k))
        if keys:
            differ = ", ".join(f"{k} {shape.get(k)!r} vs {ref_shape.get(k)!r}" for k in keys[:4])
            problems[step] = f"{OTHER_SHAPE} than step {ref_step}'s ({differ})"
    return dict(sorted(problems.items()))


#: The file transformers' ``Trainer`` writes into each checkpoint (and, with ``save_state()``,
#: the run folder): ``log_history`` holds ``{"step", "loss", "learning_rate", ...}`` per logging step.
TRAINER_STATE = "trainer_state.json"


def trainer_loss(root: Path, folders: dict[int, Path]) -> pd.DataFrame | None:
    """The training loss a ``Trainer`` run logged: ``log_history`` of the newest readable
    ``trainer_state.json`` (the run folder's, else the latest checkpoint's; each holds the whole
    history up to its step). A file that is not readable JSON (cut short while saving) is named in
    a ``RuntimeWarning`` and the next older one is read.

    Args:
        root: the run folder.
        folders: ``{step: checkpoint folder}`` of the run.

    Returns:
        DataFrame with columns ``step`` (optimizer steps), ``loss`` (nats, the mean over the logging
        interval), ``lr`` (the learning rate logged with it; NaN when not logged), one row per
        logged step, ascending; None when no ``trainer_state.json`` records a loss.
    """
    import warnings

    import pandas as pd

    candidates = [root / TRAINER_STATE] + [folders[s] / TRAINER_STATE for s in sorted(folders, reverse=True)]
    for path in (c for c in candidates if c.is_file()):
        try:
            history = json.loads(path.read_text()).get("log_history")
        except (OSError, UnicodeDecodeError, ValueError, AttributeError) as err:
            warnings.warn(
                f"{path.parent.name}/{TRAINER_STATE} is not readable ({type(err).__name__}: "
                f"{str(err).splitlines()[0] if str(err) else 'cut short'}); the loss is read from an older checkpoint",
                RuntimeWarning,
                stacklevel=2,
            )
            continue
        rows = [
            {"step": int(e["step"]), "loss": float(e["loss"]), "lr": float(e.get("learning_rate", float("nan")))}
            for e in history or []
            if isinstance(e, dict) and "loss" in e and "step" in e
        ]
        if rows:
            table = pd.DataFrame(rows, columns=["step", "loss", "lr"])
            return table.drop_duplicates("step", keep="last").sort_values("step").reset_index(drop=True)
    return None
