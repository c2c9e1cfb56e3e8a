"""Which store a `--db` names: a SQLite file (the embedded default) or a PostgreSQL database.

- nothing: `$AUTORECAP_DB` when set, else `autorecap.db` in `$AUTORECAP_HOME`;
- `postgresql://user:password@host:5432/dbname` (or `postgres://`, or a socket folder as
  `postgresql://user@/dbname?host=/run/postgresql`): PostgreSQL;
- `sqlite:///relative/file.db`, `sqlite:////absolute/file.db`, or a plain path: SQLite.

`$AUTORECAP_DB_LISTEN` gives PostgreSQL's listening connection a URL of its own (see
`LISTEN_ENV`).

May import: store.
"""

from __future__ import annotations

import os
from pathlib import Path

from autorecap.store.base import ChatStore
from autorecap.store.migrations import StoreError

ENV = "AUTORECAP_DB"
LISTEN_ENV = "AUTORECAP_DB_LISTEN"
"""A second PostgreSQL URL for the connection that listens for other processes' saves, where
`--db` goes through a pooler in transaction mode (PgBouncer): straight to the server."""
_POSTGRES = ("postgresql://", "postgres://")
_SQLITE = "sqlite://"


def store_location(db: str | Path | None = None) -> str | Path | None:
    """What `db` (else `$AUTORECAP_DB`) names: a PostgreSQL URL, a SQLite path, or None for
    the default file."""
    if db is None:
        db = os.environ.get(ENV) or None
    if db is None or isinstance(db, Path):
        return db
    if db.startswith(_POSTGRES):
        return db
    if db.startswith(_SQLITE):
        path = db[len(_SQLITE) :]
        if not path.startswith("/") or path == "/":
            raise StoreError(
                f"cannot read the store URL {db!r}: write sqlite:///FILE (three slashes, a "
                "relative path) or sqlite:////ABSOLUTE/FILE"
            )
        return Path(path[1:])
    if "://" in db:
        scheme = db.split("://", 1)[0]
        raise StoreError(
            f"unknown kind of store {scheme!r}: --db takes a SQLite file, sqlite:///FILE or "
            "postgresql://user:password@host/dbname"
        )
    return Path(db)


def open_store(db: str | Path | None = None, *, durable: bool = True) -> ChatStore:
    """Open the store `db` names (see the module docstring). `durable=False` lets SQLite skip
    a sync per commit (PostgreSQL's durability is the server's own setting)."""
    where = store_location(db)
    if isinstance(where, str):
        from autorecap.store.postgres import PostgresStore  # only where PostgreSQL is asked for

        return PostgresStore(where, listen_url=os.environ.get(LISTEN_ENV) or None)
    from autorecap.store.sqlite import SQLiteStore

    return SQLiteStore(where, synchronous="FULL" if durable else "NORMAL")
