"""Numbered schema migrations, applied in order whenever a database is opened.

Each migration runs in its own transaction together with the bump of `PRAGMA user_version`, so a
database is always at exactly one schema version. Never edit an applied migration: add the next.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass

from autorecap.errors import AutorecapError


class StoreError(AutorecapError):
    """The store cannot do what was asked (unknown chat, id taken, newer schema, I/O)."""


@dataclass(frozen=True)
class Migration:
    number: int
    name: str
    apply: Callable[[sqlite3.Connection], None]


def _run(db: sqlite3.Connection, script: str) -> None:
    # Statement by statement: executescript() would commit the migration's transaction early.
    for statement in script.split(";\n"):
        if statement.strip():
            db.execute(statement)


def _m001_initial(db: sqlite3.Connection) -> None:
    _run(
        db,
        """
        CREATE TABLE chats (
            id TEXT PRIMARY KEY,
            header_raw BLOB,            -- the header line as read (NULL for chats made here)
            header_data TEXT,           -- the header's JSON when it differs from header_raw
            layout TEXT NOT NULL,       -- BOM, line ends, header facts (JSON)
            source TEXT,                -- the file it was imported from, if any
            next_pos INTEGER NOT NULL DEFAULT 0,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL
        );
        CREATE TABLE messages (
            id INTEGER PRIMARY KEY AUTOINCREMENT,   -- stable: never reused, never renumbered
            chat_id TEXT NOT NULL REFERENCES chats(id) ON DELETE CASCADE,
            pos INTEGER NOT NULL,                   -- order within the chat (gaps allowed)
            raw BLOB,                               -- the line as read (NULL for new messages)
            eol BLOB,                               -- its line end as read
            data TEXT,                              -- the message's JSON when it differs from raw
            line INTEGER NOT NULL DEFAULT 0         -- line number it was read from
        );
        CREATE UNIQUE INDEX messages_chat_pos ON messages (chat_id, pos);
        CREATE TABLE kept_lines (
            chat_id TEXT NOT NULL REFERENCES chats(id) ON DELETE CASCADE,
            seq INTEGER NOT NULL,
            line INTEGER NOT NULL,
            raw BLOB NOT NULL,
            eol BLOB,
            reason TEXT NOT NULL,
            after_pos INTEGER NOT NULL,             -- follows the last message with pos <= this
            PRIMARY KEY (chat_id, seq)
        );
        """,
    )


MIGRATIONS: tuple[Migration, ...] = (Migration(1, "initial", _m001_initial),)
"""Every migration, in order. The schema version of a database is its last applied number."""


def schema_version(db: sqlite3.Connection) -> int:
    """The database's schema version (0 for an empty database)."""
    version: int = db.execute("PRAGMA user_version").fetchone()[0]
    return version


def apply_migrations(db: sqlite3.Connection, *, until: int | None = None) -> list[int]:
    """Bring the database up to date (or up to `until`); return the numbers applied."""
    current = schema_version(db)
    latest = MIGRATIONS[-1].number
    if current > latest:
        raise StoreError(
            f"this database has schema version {current}, newer than this autorecap knows "
            f"({latest}): upgrade autorecap, or point AUTORECAP_HOME elsewhere"
        )
    applied: list[int] = []
    for migration in MIGRATIONS:
        if migration.number <= current or (until is not None and migration.number > until):
            continue
        db.execute("BEGIN IMMEDIATE")
        try:
            migration.apply(db)
            db.execute(f"PRAGMA user_version = {migration.number:d}")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")
        applied.append(migration.number)
    return applied
