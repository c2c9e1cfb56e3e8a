"""The Typer application and the consoles every command prints to."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console

from autorecap import __version__

app = typer.Typer(
    name="autorecap",
    help="Long-chat memory for LLM roleplay, on SillyTavern chat files.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
out = Console(highlight=False)
err = Console(stderr=True, highlight=False)


def _version(value: bool) -> None:
    if value:
        out.print(f"autorecap {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = False,
) -> None:
    """Long-chat memory for LLM roleplay, on SillyTavern chat files."""
