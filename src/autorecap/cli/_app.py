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
DB_HELP = (
    "Where chats are stored: a SQLite file (default: autorecap.db in AUTORECAP_HOME), "
    "sqlite:///FILE, or postgresql://user:password@host/dbname. $AUTORECAP_DB sets it for "
    "every command."
)
DbOption = Annotated[str | None, typer.Option("--db", help=DB_HELP, show_default=False)]
"""The `--db` every command that reads the store takes (`autorecap.store.open_store`)."""
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
