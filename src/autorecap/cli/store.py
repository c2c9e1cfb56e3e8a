"""`import`, `export`, `chats` and `delete`: chats in the store; `store copy`: all of it."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from autorecap.cli._app import DbOption, app, out
from autorecap.errors import AutorecapError
from autorecap.profiles import Profiles
from autorecap.settings_places import (
    GivenSettings,
    owner_label,
    put_settings,
    settings_documents,
)
from autorecap.stfiles.atomic import atomic_write
from autorecap.stfiles.jsonl import chat_id_for, read_chat
from autorecap.store import open_store
from autorecap.store.copy import copy_store


@app.command("import")
def import_(
    files: Annotated[list[Path], typer.Argument(help="SillyTavern chat files (.jsonl).")],
    as_id: Annotated[
        str | None, typer.Option("--as", help="Store under this id (one file only).")
    ] = None,
    replace: Annotated[
        bool, typer.Option("--replace", help="Overwrite a stored chat with the same id.")
    ] = False,
    lenient: Annotated[
        bool, typer.Option("--lenient", help="Keep malformed lines instead of stopping.")
    ] = False,
    db: DbOption = None,
) -> None:
    """Store chat files, each under its chat id (the file name without .jsonl)."""
    if as_id is not None and len(files) != 1:
        raise AutorecapError("--as names one chat: import one file at a time with it")
    store = open_store(db)
    try:
        chats = [(path, read_chat(path, lenient=lenient)) for path in files]
        ids = [as_id or chat_id_for(path) for path, _ in chats]
        duplicates = sorted({i for i in ids if ids.count(i) > 1})
        if duplicates:
            raise AutorecapError(
                f"two files would be stored as {duplicates[0]!r}: import them separately "
                "with --as ID"
            )
        for (path, chat), chat_id in zip(chats, ids, strict=True):
            info = store.import_chat(
                chat, chat_id=chat_id, replace=replace, source=str(path.resolve())
            )
            kept = len(chat.layout.kept)
            note = f", {kept} line(s) kept as-is" if kept else ""
            plural = "" if info.messages == 1 else "s"
            out.print(
                f"stored [bold]{escape(info.id)}[/] ({info.messages} message{plural}{note})",
                soft_wrap=True,
            )
    finally:
        store.close()


@app.command()
def export(
    chat: Annotated[str, typer.Argument(help="Id of a stored chat.")],
    output: Annotated[Path, typer.Option("-o", "--output", help="File to write.")],
    db: DbOption = None,
) -> None:
    """Write a stored chat as a SillyTavern chat file (byte for byte the imported file while
    unchanged)."""
    store = open_store(db)
    try:
        data = store.export_chat(chat)
    finally:
        store.close()
    atomic_write(output, data)
    out.print(f"wrote {escape(str(output))} ({len(data):,} bytes)", soft_wrap=True)


@app.command()
def chats(db: DbOption = None) -> None:
    """List the stored chats."""
    store = open_store(db)
    try:
        infos = store.list_chats()
    finally:
        store.close()
    if not infos:
        out.print("no stored chats yet: `autorecap import FILE` stores one")
        return
    table = Table()
    table.add_column("chat id")
    table.add_column("messages", justify="right")
    table.add_column("changed")
    table.add_column("imported from")
    for info in infos:
        changed = datetime.fromtimestamp(info.updated_at).strftime("%Y-%m-%d %H:%M")
        table.add_row(escape(info.id), str(info.messages), changed, escape(info.source or ""))
    out.print(table)


@app.command()
def delete(
    chat: Annotated[str, typer.Argument(help="Id of a stored chat.")],
    yes: Annotated[bool, typer.Option("--yes", help="Do not ask for confirmation.")] = False,
    db: DbOption = None,
) -> None:
    """Remove a chat from the store (export it first if you want a copy)."""
    store = open_store(db)
    try:
        if not store.has_chat(chat):
            store.delete_chat(chat)  # raises the "no stored chat" error
        if not yes and not typer.confirm(f"Delete the stored chat {chat!r}?"):
            raise typer.Exit(1)
        store.delete_chat(chat)
    finally:
        store.close()
    out.print(f"deleted {escape(chat)}")


store_app = typer.Typer(help="The store as a whole: move an installation to another store.")
app.add_typer(store_app, name="store")


@store_app.command("copy")
def store_copy(
    source: Annotated[
        str,
        typer.Option(
            "--from", help="The store to copy: a SQLite file, sqlite:///FILE or postgresql://..."
        ),
    ],
    target: Annotated[
        str, typer.Option("--to", help="An empty store to copy into (made when missing).")
    ],
    no_settings: Annotated[
        bool,
        typer.Option("--no-settings", help="Leave the settings and profiles where they are."),
    ] = False,
) -> None:
    """Copy every chat, with its message ids and revisions, the job queue, and every owner's
    settings and profiles from one store into another (SQLite to PostgreSQL and back); each
    chat's export is then compared byte for byte. A SQLite installation keeps its settings in
    AUTORECAP_HOME's files, a PostgreSQL one in the database. Stop the servers and workers on
    the source first."""
    origin = open_store(source)
    try:
        destination = open_store(target)
        try:
            documents = {} if no_settings else settings_documents(origin)
            for owner, text in documents.items():  # each must read as settings: checked here
                where = f"the source's settings of {owner_label(owner)}"
                Profiles(place=GivenSettings(text, where))
            put_settings(destination, documents, check=True)  # refused before anything moves
            report = copy_store(origin, destination)
            settings = put_settings(destination, documents)
        finally:
            destination.close()
    finally:
        origin.close()
    out.print(
        f"copied {report.chats} chat(s), {report.messages:,} message(s) and "
        f"{report.jobs} job(s); each chat exports byte for byte the same from both stores"
        if not report.mismatched
        else f"copied {report.chats} chat(s), but these export differently: "
        + ", ".join(escape(c) for c in report.mismatched)
    )
    if documents:
        owners = ", ".join(repr(o) if o else "the installation's" for o in sorted(documents))
        out.print(
            f"settings: {owners} ({settings} copied, {len(documents) - settings} already there)",
            soft_wrap=True,
        )
    if report.mismatched:
        raise typer.Exit(1)
