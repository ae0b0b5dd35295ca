"""The typer app every command module registers on (imported by them and by the package)."""

from __future__ import annotations

from typing import Annotated

import typer

from .. import __version__

__all__ = ["app"]

_HELP = (
    "Keep an LLM agent inside its model's context window.\n\n"
    "Exit codes: 0 done (doctor: the store is clean); 1 a problem found (doctor: broken invariants; "
    "simulate: an unrecovered rejection) or an internal error; 2 bad input or usage (missing, binary "
    "or malformed files, JSON nested too deep, unknown models, bad options, a port in use); 3 the store "
    "failed, was busy, is newer than this library, or is not a store. Errors are one line on stderr."
)

app = typer.Typer(
    name="contextwindow",
    help=_HELP,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
"""The ``contextwindow`` command; each command module registers on it when imported."""


def _print_version(asked: bool) -> None:
    if asked:
        typer.echo(f"contextwindow {__version__}")
        raise typer.Exit(0)


@app.callback(help=_HELP)
def _root(
    version: Annotated[
        bool,
        typer.Option("--version", help="Print the version and exit.", is_eager=True, callback=_print_version),
    ] = False,
) -> None:
    """Keep an LLM agent inside its model's context window."""
