"""The `autorecap` command line: thin, over the library. Parses, calls, prints."""

from __future__ import annotations

from rich.markup import escape

from autorecap.autosave import install_signal_handlers
from autorecap.cli import evaluate, files, jobs, memory, recap, serve, settings, store, tiers
from autorecap.cli._app import app, close_command_stores, err, out
from autorecap.errors import AutorecapError
from autorecap.paths import HOME_ENV, autorecap_home

__all__ = [
    "app",
    "evaluate",
    "files",
    "jobs",
    "main",
    "memory",
    "recap",
    "serve",
    "settings",
    "store",
    "tiers",
]


@app.command()
def home() -> None:
    """Print the folder where autorecap keeps its data (set it with AUTORECAP_HOME)."""
    out.print(str(autorecap_home()))
    err.print(f"[dim](set {HOME_ENV} to use another folder)[/]")


def main(argv: list[str] | None = None) -> None:
    """Entry point of the `autorecap` script: domain errors become one clear line, exit 1."""
    install_signal_handlers()
    try:
        app(args=argv, prog_name="autorecap")
    except AutorecapError as error:
        err.print(f"[red]error:[/] {escape(str(error))}", soft_wrap=True)
        raise SystemExit(1) from None
    finally:
        close_command_stores()
