"""The embedded store: chats in one SQLite file, in WAL mode.

One connection writes, behind a lock, each save in a `BEGIN IMMEDIATE` transaction; searches
(the recall tier, on the proxy's reply path) read on a connection of their own. Other
processes' commits show in `PRAGMA data_version`. The store's logic is `autorecap.store.sql`.

May import: core, stfiles, store.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from autorecap.paths import autorecap_home
from autorecap.store.base import Db
from autorecap.store.migrations import StoreError, apply_migrations
from autorecap.store.search import search
from autorecap.store.sql import HIGHEST_REV, SqlStore

DB_FILE = "autorecap.db"


class SQLiteStore(SqlStore):
    """Chats in one SQLite file (default `$AUTORECAP_HOME/autorecap.db`)."""

    def __init__(self, path: str | Path | None = None, *, synchronous: str = "FULL") -> None:
        super().__init__()
        self.path = Path(path) if path is not None else autorecap_home(create=True) / DB_FILE
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self._searcher: sqlite3.Connection | None = None
        """The connection searches use (`search`), opened at the first one."""
        self._search_lock = threading.Lock()
        try:
            self._db = sqlite3.connect(
                self.path, isolation_level=None, check_same_thread=False, timeout=30
            )
            self._db.execute("PRAGMA journal_mode = WAL")
            self._db.execute(f"PRAGMA synchronous = {synchronous}")
            self._db.execute("PRAGMA foreign_keys = ON")
            apply_migrations(self._db)
        except sqlite3.Error as error:
            raise StoreError(
                f'cannot open the store "{self.path}": {error}; check the file, or point '
                "AUTORECAP_HOME elsewhere"
            ) from None

    def data_version(self) -> int:
        """Changes whenever another connection (another process) commits to the database."""
        with self._lock:
            version: int = self._db.execute("PRAGMA data_version").fetchone()[0]
        return version

    # --- plumbing ----------------------------------------------------------------------------

    def search(self, chat_id: str, query: str, limit: int = 50) -> list[tuple[int, float]]:
        """The chat's messages that best match `query` in the recall index (`store.search`).

        On a connection of its own: a search is on the proxy's reply path, and in WAL mode a
        reader never waits for the writer (the recap worker saving), as it would for the lock
        of the connection that writes."""
        with self._search_lock:
            if self._searcher is None:
                self._searcher = self._connect_reader()
            if self._searcher is self._db:
                with self._lock:
                    found = search(self._db, chat_id, query, limit)
            else:
                found = search(self._searcher, chat_id, query, limit)
        return [(hit.message_id, hit.score) for hit in found]

    def _connect_reader(self) -> sqlite3.Connection:
        if str(self.path) == ":memory:":
            return self._db  # one in-memory database has one connection
        reader = sqlite3.connect(self.path, check_same_thread=False, timeout=30)
        reader.execute("PRAGMA query_only = ON")
        return reader

    def close(self) -> None:
        with self._lock, self._search_lock:
            if self._searcher is not None and self._searcher is not self._db:
                self._searcher.close()
            self._searcher = None
            self._db.close()

    @contextmanager
    def _reading(self) -> Iterator[Db]:
        with self._lock:
            yield self._db

    @contextmanager
    def _writing(self) -> Iterator[Db]:
        with self._lock, Transaction(self._db):
            yield self._db

    def after_copy(self) -> None:
        # AUTOINCREMENT ids move past the highest one inserted by themselves.
        with self._writing() as db:
            db.execute(f"UPDATE store_rev SET value = max(value, coalesce(({HIGHEST_REV}), 0))")

    def _next_rev(self, db: Db) -> int:
        value: int = db.execute(
            "UPDATE store_rev SET value = value + 1 RETURNING value"
        ).fetchone()[0]
        return value


class Transaction:
    """`BEGIN IMMEDIATE ... COMMIT`, rolled back on any error (one logical write, all or
    none). IMMEDIATE takes the database's write lock at once: the rows a save reads are the
    ones it writes over."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def __enter__(self) -> None:
        try:
            self._db.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as error:
            raise StoreError(
                f"the store is busy or unavailable ({error}): another autorecap may hold it; "
                "try again"
            ) from None

    def __exit__(self, kind: type[BaseException] | None, *rest: object) -> None:
        if kind is None:
            try:
                self._db.execute("COMMIT")
            except sqlite3.Error as error:
                self._db.execute("ROLLBACK")
                raise StoreError(f"could not save to the store: {error}") from None
        else:
            self._db.execute("ROLLBACK")
            if issubclass(kind, sqlite3.Error):
                raise StoreError(f"could not save to the store: {rest[0]}") from None
