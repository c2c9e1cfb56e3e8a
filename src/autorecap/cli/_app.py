"""The Typer application and the consoles every command prints to."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from autorecap import __version__
from autorecap.errors import AutorecapError
from autorecap.profiles import Profiles, profiles_of
from autorecap.store import open_store
from autorecap.store.base import ChatStore
from autorecap.store.location import store_location

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
LOOPBACK = ("127.0.0.1", "localhost", "::1")
"""Host names of this machine only."""
FAILURES_SHOWN = 10


def print_failures(failures: list[str]) -> None:
    """Failures ("where: what") on stderr, those that say the same thing together: a wrong
    key fails every job alike, and one line with their count says it better than ten."""
    groups: dict[str, list[str]] = {}
    for failure in failures:
        where, _, what = failure.partition(": ")
        groups.setdefault(what or where, []).append(where if what else "")
    for what, wheres in list(groups.items())[:FAILURES_SHOWN]:
        if len(wheres) == 1:
            line = f"{wheres[0]}: {what}" if wheres[0] else what
        else:
            line = f"{wheres[0]} … {wheres[-1]} ({len(wheres)} alike): {what}"
        err.print(f"[yellow]failed:[/] {escape(line)}", soft_wrap=True)
    if len(groups) > FAILURES_SHOWN:
        err.print(f"… and {len(groups) - FAILURES_SHOWN} other failures (`autorecap jobs list`)")


_OPENED: list[ChatStore] = []


def command_store(db: str | None, *, existing: bool = False) -> ChatStore:
    """The store `--db` names (`open_store`), closed when the command ends (`main` calls
    `close_command_stores`: a PostgreSQL store holds connections and a listening thread).
    `existing`: a command on stored chats, which makes no new SQLite file (a mistyped --db)."""
    where = store_location(db)
    if existing and isinstance(where, Path) and not where.exists():
        raise AutorecapError(
            f"no database at {str(where)!r}: check --db (`autorecap import FILE --db {where}` "
            "makes one)"
        )
    store = open_store(db)
    _OPENED.append(store)
    return store


def close_command_stores() -> None:
    while _OPENED:
        _OPENED.pop().close()


def command_profiles(db: str | None, store: ChatStore | None) -> Profiles:
    """The installation's settings for a command on `store` (None: on a chat file): the
    store's when it keeps them, else as `profiles_at` finds them."""
    return profiles_of("", store) if store is not None else profiles_at(db)


def profiles_at(db: str | None) -> Profiles:
    """The installation's settings for a command: in the database `--db` (else
    `$AUTORECAP_DB`) names when it keeps them (PostgreSQL), else in `$AUTORECAP_HOME`'s files
    (no SQLite file is opened for them). The store is closed when the command ends."""
    if isinstance(store_location(db), str):
        return profiles_of("", command_store(db))
    return Profiles()


LenientOption = Annotated[
    bool, typer.Option("--lenient", help="Keep malformed lines as they are instead of stopping.")
]
ChatArgument = Annotated[
    str, typer.Argument(help="A chat file (.jsonl) or the id of a stored chat.")
]
"""The chat a command works on, as every command names it."""


def read_text_file(path: Path, what: str) -> str:
    """A text file the user names (`what`: what it is for), as UTF-8; a clear error when it
    cannot be read."""
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise AutorecapError(f'{what} "{path}" is not UTF-8 text: save it as UTF-8') from None
    except IsADirectoryError:
        raise AutorecapError(f'{what} "{path}" is a folder: give a text file') from None
    except OSError as error:
        raise AutorecapError(f'cannot read {what} "{path}": {error.strerror}') from None


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
