"""The ``emergence`` command: every group of the toolkit under one name, and one error handler.

- the checkpoint-suite commands of :mod:`interp.cli` (``demo``, ``run``, ``curve``, ``bisect``,
  ``rank-heads``, ``decompose``, ``zoom``, ``scrub``, ``train-suite``, ``list-models``) at the top level;
- ``synth`` (:mod:`synthetic.cli`) and ``sweep`` (a sweep spec into a results store), imported
  only when used, so that ``emergence --help`` does not import torch, and a missing optional
  dependency is one line when its command runs;
- ``population`` (:mod:`interp.population.cli`): survival statistics of the point of emergence over
  seeds, imported only when used (statsmodels);
- ``results`` (:mod:`analyses.results`): re-run every number the results pages quote.

Any error escaping a command is printed as ``error: emergence <command>: <what was wrong>``
with exit status 2 (:mod:`emergence_lens.errors`); ``--debug`` shows the traceback instead.
"""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path

import typer
from typer.core import TyperCommand, TyperGroup
from typer.exceptions import TyperException

from emergence_lens.errors import EXIT_BAD_INPUT, one_line
from interp.cli import app as interp_app

#: Command name -> ("module:attribute" of a typer app, one-line help shown by ``--help``).
LAZY_COMMANDS = {
    "synth": ("synthetic.cli:app", "Synthetic tasks with a known attention pattern (train one model)."),
    "sweep": ("synthetic.cli:sweep_app", "Run a sweep spec (grid x seeds) into a resumable results store."),
    "population": (
        "interp.population.cli:app",
        "Survival statistics of the point of emergence over seeds (Kaplan-Meier, log-rank, Cox).",
    ),
    "results": ("analyses.results:app", "Re-run every number the results pages quote (hours on 2 cores)."),
}


class _LazyCommandError(ValueError):
    """A lazily mounted command (``synth``, ``sweep``, ``population``, ``results``, ...) could not
    be imported: a package it needs is missing or fails to import (the message names it).

    Fix: install what the message names (``pip install 'emergence-lens[EXTRA]'`` for an optional
    extra), or run ``emergence --debug COMMAND`` to see the import's traceback.
    """


def _load(name: str) -> TyperCommand:
    target, _ = LAZY_COMMANDS[name]
    module_name, attr = target.split(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise _LazyCommandError(f"'emergence {name}' is unavailable: {one_line(err)}") from err
    command = typer.main.get_command(getattr(module, attr))
    command.name = name
    return command


def _listed_as_one_line(command: TyperCommand | None) -> TyperCommand | None:
    """Give ``command`` a ``short_help``: its docstring's first paragraph as one line, which is
    what ``emergence --help`` lists (typer's rich mode would keep the docstring's line breaks
    there, mid-sentence)."""
    if command is not None and command.short_help is None and command.help:
        command.short_help = " ".join(inspect.cleandoc(command.help).split("\n\n")[0].split())
    return command


#: Key of ``Context.meta`` (shared by a command's nested contexts) holding the words after ``emergence``.
_WORDS = "emergence_lens.words"


class RootGroup(TyperGroup):
    """Eager commands from :mod:`interp.cli`, lazy ones from :data:`LAZY_COMMANDS`, and the one
    error handler (in :meth:`invoke`, so it covers every command and sub-command)."""

    def main(self, *args, **kwargs):
        _help_width()
        return super().main(*args, **kwargs)

    def list_commands(self, ctx: typer.Context) -> list[str]:
        return super().list_commands(ctx) + [n for n in LAZY_COMMANDS if n not in self.commands]

    def get_command(self, ctx: typer.Context, cmd_name: str) -> TyperCommand | None:
        if cmd_name in LAZY_COMMANDS and cmd_name not in self.commands:
            # A stand-in for the help listing; resolve_command loads the real one.
            return TyperCommand(cmd_name, help=LAZY_COMMANDS[cmd_name][1])
        return _listed_as_one_line(super().get_command(ctx, cmd_name))

    def resolve_command(self, ctx: typer.Context, args: list[str]):
        ctx.meta[_WORDS] = list(args)  # the sub-command and what follows it, for an error's first words
        if args and args[0] in LAZY_COMMANDS and args[0] not in self.commands:
            return args[0], _load(args[0]), args[1:]
        return super().resolve_command(ctx, args)

    def invoke(self, ctx: typer.Context):
        try:
            return super().invoke(ctx)
        except (TyperException, typer.Exit, typer.Abort):  # usage errors, exits: typer prints them
            raise
        except BrokenPipeError:  # `emergence ... | head`: the reader left; click exits quietly (status 1)
            raise
        except Exception as err:
            if ctx.params.get("debug"):
                raise
            lines = getattr(err, "lines", None)  # a task file: one line per bad row (interp.tasks.files)
            for line in lines if isinstance(lines, list) and lines else [one_line(err)]:
                typer.echo(f"error: {_command_path(ctx.meta.get(_WORDS, []))}: {line}", err=True)
            raise typer.Exit(EXIT_BAD_INPUT) from None


def _command_path(words: list[str]) -> str:
    """``emergence <command> [<sub-command>]`` from the command line's leading words."""
    names = []
    for word in words[:2]:
        if word.startswith("-"):
            break
        names.append(word)
        if word != "synth":
            break
    return " ".join(["emergence", *names])


def _help_width() -> None:
    """Help read through a pipe or a file (``emergence run --help | less``, a notebook cell) keeps
    120 columns instead of rich's 80 (``run --help``: 87 lines, 198 at 80); a terminal keeps its own
    width, and ``TERMINAL_WIDTH`` or ``COLUMNS`` still decide when set. Decided at each call
    (:meth:`RootGroup.main`), from the environment and the standard output of that call."""
    import os
    import sys

    import typer.rich_utils as rich_utils

    piped = not ("COLUMNS" in os.environ or "TERMINAL_WIDTH" in os.environ or sys.stdout.isatty())
    rich_utils.MAX_WIDTH = HELP_WIDTH if piped else None


#: Columns of ``--help`` when stdout is not a terminal.
HELP_WIDTH = 120

app = typer.Typer(
    cls=RootGroup,
    help="emergence-lens: find the point of emergence and the heads behind it.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.registered_commands += interp_app.registered_commands


def _print_version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        typer.echo(f"emergence-lens {version('emergence-lens')}")
        raise typer.Exit()


@app.callback()
def _root(
    threads: int | None = typer.Option(
        None,
        "--threads",
        min=1,
        envvar="EMERGENCE_LENS_THREADS",
        help="torch CPU threads (default: torch's choice). 1 is fastest on a busy machine.",
    ),
    debug: bool = typer.Option(
        False, "--debug", envvar="EMERGENCE_LENS_DEBUG", help="Show the full traceback of an error."
    ),
    version: bool = typer.Option(
        False, "--version", is_eager=True, callback=_print_version, help="Print emergence-lens's version and exit."
    ),
) -> None:
    """emergence-lens: find the point of emergence and the heads behind it."""
    if threads is not None:
        import torch

        torch.set_num_threads(threads)


@app.command("env")
def env(
    json_out: bool = typer.Option(False, "--json", help="Print the report as JSON."),
    cache: Path | None = typer.Option(None, help="The cache root (default: $EMERGENCE_LENS_CACHE or ~/.cache)."),
):
    """What a bug report needs (versions, CPU, kernel level, GPU, cache), and whether this machine
    trains the embedded suite docs/ describe, or which part differs."""
    import json

    from interp.sources.machine import environment_report, format_environment_report

    report = environment_report(cache)
    typer.echo(json.dumps(report, indent=2) if json_out else format_environment_report(report))


def main() -> None:
    """Console-script entry point (``[project.scripts] emergence``)."""
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
