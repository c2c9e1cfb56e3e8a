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


class UnknownChatError(StoreError):
    """No stored chat has this id."""

    http_status = 404


class SettingsConflictError(StoreError):
    """Settings saved from a copy that another process changed since it was read (or a store
    that keeps none): nothing was written."""

    http_status = 409


class StaleChatError(StoreError):
    """A save from a copy of a chat that another process changed since it was read: nothing
    was written. Read what changed (`SQLiteStore.pull`), then save again."""

    http_status = 409


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


def _m002_jobs(db: sqlite3.Connection) -> None:
    _run(
        db,
        """
        CREATE TABLE jobs (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            kind TEXT NOT NULL,
            chat_id TEXT NOT NULL,
            target INTEGER,
            priority INTEGER NOT NULL DEFAULT 0,
            state TEXT NOT NULL DEFAULT 'queued',
            attempts INTEGER NOT NULL DEFAULT 0,
            max_retries INTEGER NOT NULL DEFAULT 5,
            not_before REAL NOT NULL DEFAULT 0,
            lease_until REAL NOT NULL DEFAULT 0,
            worker TEXT,
            error TEXT,
            progress REAL NOT NULL DEFAULT 0,
            note TEXT,
            cancel_requested INTEGER NOT NULL DEFAULT 0,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            finished_at REAL
        );
        CREATE INDEX jobs_ready ON jobs (state, priority DESC, id);
        CREATE TABLE job_deps (
            job_id INTEGER NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
            depends_on INTEGER NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
            PRIMARY KEY (job_id, depends_on)
        );
        CREATE TABLE job_results (
            kind TEXT NOT NULL,
            chat_id TEXT NOT NULL,
            target INTEGER NOT NULL DEFAULT -1,
            input_hash TEXT NOT NULL,
            PRIMARY KEY (kind, chat_id, target)
        );
        CREATE TABLE queue_state (
            key TEXT PRIMARY KEY,
            value TEXT NOT NULL
        );
        """,
    )


def _m003_job_lookup(db: sqlite3.Connection) -> None:
    # Queuing a job first looks for the same job waiting; a chat's jobs are listed and counted.
    _run(db, "CREATE INDEX jobs_by_chat ON jobs (chat_id, kind, target, state);")


def _m004_revisions(db: sqlite3.Connection) -> None:
    # Every save takes the next number of one store-wide counter and stamps what it wrote with
    # it, so that a process holding a chat in memory can read what another process changed
    # since (`SQLiteStore.pull`), and a save from an old copy is refused, not written over.
    _run(
        db,
        """
        CREATE TABLE store_rev (
            only INTEGER PRIMARY KEY CHECK (only = 1),
            value INTEGER NOT NULL
        );
        INSERT INTO store_rev (only, value) VALUES (1, 1);
        ALTER TABLE chats ADD COLUMN rev INTEGER NOT NULL DEFAULT 1;
        ALTER TABLE chats ADD COLUMN header_rev INTEGER NOT NULL DEFAULT 1;
        ALTER TABLE chats ADD COLUMN order_rev INTEGER NOT NULL DEFAULT 1;
        ALTER TABLE messages ADD COLUMN rev INTEGER NOT NULL DEFAULT 1;
        CREATE INDEX messages_by_rev ON messages (chat_id, rev);
        """,
    )


_RECALL_ROW = """
    SELECT id, 'c' || hex(chat_id), json_extract(d, '$.mes'),
        COALESCE(json_extract(d, '$.extra.auto_recap_memory.memory'),
                 json_extract(d, '$.extra.auto_summarize_memory.memory')),
        COALESCE(json_extract(d, '$.extra.auto_recap_memory.scene_recap_memory'),
                 json_extract(d, '$.extra.auto_summarize_memory.scene_recap_memory'))
    FROM (SELECT {id} AS id, {chat} AS chat_id, COALESCE({data}, CAST({raw} AS TEXT)) AS d {source})
    WHERE json_valid(d)"""
"""A message's row of the recall index, read from its stored JSON (the edited `data`, else
the line as read)."""


def _m005_recall_index(db: sqlite3.Connection) -> None:
    # The recall tier's full-text index (FTS5, ranked by BM25): one row per message, with its
    # text, its recap and the recap of the scene it ends, under its chat's key ("c" and the
    # id's hex: one token). Triggers keep it in step with every write of a message, in the
    # same transaction, so it is never rebuilt and never stale. Trigger bodies hold ";", so
    # each statement is run on its own.
    insert = "INSERT INTO recall_index (rowid, chat, text, recap, scene)"
    new = _RECALL_ROW.format(
        id="new.id", chat="new.chat_id", data="new.data", raw="new.raw", source=""
    )
    statements = [
        "CREATE VIRTUAL TABLE recall_index USING fts5("
        "chat, text, recap, scene, tokenize = 'unicode61 remove_diacritics 2')",
        insert
        + _RECALL_ROW.format(
            id="id", chat="chat_id", data="data", raw="raw", source="FROM messages"
        ),
        f"CREATE TRIGGER recall_on_insert AFTER INSERT ON messages BEGIN {insert} {new}; END",
        "CREATE TRIGGER recall_on_update AFTER UPDATE OF chat_id, raw, data ON messages BEGIN "
        f"DELETE FROM recall_index WHERE rowid = old.id; {insert} {new}; END",
        "CREATE TRIGGER recall_on_delete AFTER DELETE ON messages BEGIN "
        "DELETE FROM recall_index WHERE rowid = old.id; END",
    ]
    for statement in statements:
        db.execute(statement)


def _m006_stemmed_recall_index(db: sqlite3.Connection) -> None:
    # The index again, its words stemmed (Porter: "counting" finds "count", "pays" finds
    # "pay"): a question seldom uses the very form of the word it asks about.
    # The triggers of migration 5 write into the new table as they did into the old one.
    db.execute("DROP TABLE recall_index")
    db.execute(
        "CREATE VIRTUAL TABLE recall_index USING fts5("
        "chat, text, recap, scene, tokenize = 'porter unicode61 remove_diacritics 2')"
    )
    db.execute(
        "INSERT INTO recall_index (rowid, chat, text, recap, scene)"
        + _RECALL_ROW.format(
            id="id", chat="chat_id", data="data", raw="raw", source="FROM messages"
        )
    )


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "initial", _m001_initial),
    Migration(2, "jobs", _m002_jobs),
    Migration(3, "job lookup index", _m003_job_lookup),
    Migration(4, "revisions", _m004_revisions),
    Migration(5, "recall index", _m005_recall_index),
    Migration(6, "stemmed recall index", _m006_stemmed_recall_index),
)
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
