"""Command-line options derived from a settings dataclass: one ``--name-with-dashes`` option per
field, so that a field added once is an option of every command that takes the dataclass.

A field describes itself in its metadata: ``help`` (the one description of the field, which the
option's ``--help`` shows and a Python reader finds in ``dataclasses.fields(cls)``) and, for a
field whose type the command line cannot parse (a tuple), ``parse`` (text -> value, raising
``ValueError`` with a one-line message). :func:`setting` writes such a field. The option's type and
default are the field's (or those of a given instance, e.g. a command's own defaults); a ``bool``
field is a ``--name/--no-name`` switch. The values are not checked here: the dataclass checks them
when the command builds it from them (``TrainConfig(**fields)``, ``StudyConfig(**fields)``).

Used by ``emergence synth train`` (:class:`synthetic.training.TrainConfig`) and every command that
takes the study settings (:class:`interp.core.settings.StudyConfig`, through
:func:`interp.cli.options.study_options`: ``run``, ``demo``, ``timeline``, ``curve``, ``bisect``,
``rank-heads``, ``decompose``, ``readiness``, ``scrub``, ``population``), each naming the fields it
reads (``include``) or the few it does not (``exclude``). typer reads a command's options
from its signature (and the annotations beside it), so :func:`with_field_options` writes the
fields into the command's ``__signature__``; the command takes them as ``**fields``.
"""

from __future__ import annotations

import dataclasses
import inspect
import typing
from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["field_help", "field_options", "setting", "with_field_options"]


def setting(default: Any, help: str, parse: Callable[[str], Any] | None = None, flag: str | None = None) -> Any:
    """A dataclass field with its ``help`` (and, when its type needs one, the command line's
    ``parse``; when the field's name would make a poor flag, its ``flag``) in its metadata:
    ``threshold: float = setting(0.5, "Greedy-accuracy threshold.")``."""
    metadata: dict[str, Any] = {"help": help}
    if parse is not None:
        metadata["parse"] = parse
    if flag is not None:
        metadata["flag"] = flag
    return dataclasses.field(default=default, metadata=metadata)


def field_help(cls: type, name: str) -> str:
    """The ``help`` metadata of field ``name`` of dataclass ``cls`` (for an option declared by hand
    elsewhere, so that its text is still the field's).

    Raises:
        ValueError: ``name`` is not a field of ``cls`` (the fields named).
    """
    fields = {f.name: f for f in dataclasses.fields(cls)}
    if name not in fields:
        raise ValueError(f"{name!r} is not a field of {cls.__name__}; fields: {', '.join(fields)}")
    return str(fields[name].metadata.get("help", ""))


def field_options(
    cls: type,
    defaults: Any = None,
    exclude: Iterable[str] = (),
    include: Iterable[str] | None = None,
    panel: str | None = None,
) -> list[inspect.Parameter]:
    """One keyword-only ``typer.Option`` parameter per field of dataclass ``cls``, in field order.

    Args:
        cls: the dataclass (its fields carry ``help`` and optionally ``parse`` metadata).
        defaults: an instance of ``cls`` whose values are the options' defaults (None: the fields'
            own defaults).
        exclude: field names the command does not offer.
        include: the field names the command offers (None: every field not in ``exclude``); give
            one of ``include`` and ``exclude``.
        panel: the ``--help`` panel the options are listed under (None: typer's ``Options``).

    Returns:
        ``inspect.Parameter`` objects: name the field's, flag ``--`` plus the name with dashes
        (``--n-boot``; ``--scan/--no-scan`` for a ``bool``), annotation the field's type (``str``
        for a field with ``parse``, whose option reads its text through it).

    Raises:
        ValueError: a name in ``exclude`` or ``include`` that is not a field of ``cls``, or both given.
    """
    import typer  # here: the settings module writes its fields with setting() and imports no CLI

    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    exclude, include = set(exclude), None if include is None else set(include)
    for label, given in (("exclude", exclude), ("include", include or set())):
        unknown = sorted(given - set(names))
        if unknown:
            raise ValueError(f"{label}={unknown}: not fields of {cls.__name__}; fields: {', '.join(names)}")
    if include is not None and exclude:
        raise ValueError(f"give include or exclude, not both (include={sorted(include)}, exclude={sorted(exclude)})")
    offered = include if include is not None else set(names) - exclude
    params = []
    for f in dataclasses.fields(cls):
        if f.name not in offered:
            continue
        default = getattr(defaults, f.name) if defaults is not None else f.default
        flag = f.metadata.get("flag") or "--" + f.name.replace("_", "-")
        annotation = hints[f.name]
        parse = f.metadata.get("parse")
        if annotation is bool:
            flag = f"{flag}/--no-{f.name.replace('_', '-')}"
        if parse is not None:
            annotation = str | None if default is None else str
            shown = ",".join(map(str, default)) if isinstance(default, tuple) else True
            option = typer.Option(
                default, flag, help=f.metadata.get("help"), parser=parse, show_default=shown, rich_help_panel=panel
            )
        elif typing.get_origin(annotation) is typing.Literal:  # text, checked by the dataclass in one line
            annotation = str
            option = typer.Option(default, flag, help=f.metadata.get("help"), metavar="<choice>", rich_help_panel=panel)
        else:
            option = typer.Option(default, flag, help=f.metadata.get("help"), rich_help_panel=panel)
        params.append(inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=option, annotation=annotation))
    return params


def with_field_options(
    command: Callable,
    cls: type,
    defaults: Any = None,
    exclude: Iterable[str] = (),
    include: Iterable[str] | None = None,
    panel: str | None = None,
) -> Callable:
    """``command`` with the options of :func:`field_options` after its own: its signature's
    parameters (the ``**fields`` that receives the fields' values left out) followed by one per
    field, written into ``__signature__`` and ``__annotations__`` where typer reads them, and the
    names of the fields offered in ``command.field_options`` (a tuple, field order). Apply it
    before registering the command (``app.command()(with_field_options(run, StudyConfig))``).

    Raises:
        ValueError: ``command`` takes no ``**fields``, a field whose name one of ``command``'s own
            parameters already has, or as :func:`field_options`.
    """
    fields = field_options(cls, defaults, set(exclude), include, panel)
    signature = inspect.signature(command)
    if not any(p.kind is p.VAR_KEYWORD for p in signature.parameters.values()):
        raise ValueError(f"{command.__name__} takes no **fields to receive the options of {cls.__name__}")
    own = [p for p in signature.parameters.values() if p.kind is not p.VAR_KEYWORD]
    clash = sorted({p.name for p in own} & {p.name for p in fields})
    if clash:
        raise ValueError(f"{command.__name__} has its own parameters named like fields of {cls.__name__}: {clash}")
    hints = typing.get_type_hints(command)
    params = [p.replace(annotation=hints.get(p.name, p.annotation)) for p in own] + fields
    command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    command.__annotations__ = {p.name: p.annotation for p in params}
    command.field_options = tuple(p.name for p in fields)  # type: ignore[attr-defined]
    return command
