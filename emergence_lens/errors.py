"""One error handler for every ``emergence`` command: an escaping error becomes one line
naming the command and the bad value (exit status 2); ``--debug`` shows the traceback."""

from __future__ import annotations

#: Optional packages -> the extra that installs them (the message for a missing one says so).
OPTIONAL_EXTRAS = {"ray": "ray", "wandb": "wandb"}

EXIT_BAD_INPUT = 2


def one_line(err: BaseException) -> str:
    """A one-line description of ``err`` for a user: the message of our own ``ValueError``s as
    it is; the file and the reason for an ``OSError``; the missing package and how to install it
    for an import error; the exception's type and first line for anything else."""
    if isinstance(err, ModuleNotFoundError) and err.name:
        package = err.name.split(".")[0]
        extra = OPTIONAL_EXTRAS.get(package)
        hint = f"pip install 'emergence-lens[{extra}]'" if extra else f"pip install {package}"
        return f"needs the package {package!r}, which is not installed: {hint}"
    if isinstance(err, OSError) and err.strerror and err.filename:
        return f"{err.strerror}: {err.filename!r}"
    text = str(err).strip()
    if isinstance(err, KeyError) and len(err.args) == 1:
        text = f"missing key {err.args[0]!r}"
    first = text.splitlines()[0] if text else ""
    if isinstance(err, ValueError) and first:
        return first
    return f"{type(err).__name__}: {first}" if first else type(err).__name__
