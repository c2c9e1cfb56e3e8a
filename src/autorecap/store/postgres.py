"""The store on PostgreSQL: any number of servers and workers, on any machines, on one database.

The store's logic is `autorecap.store.sql`; here are PostgreSQL's parts:
- connections from a pool (psycopg 3, `psycopg_pool`), each statement's `?` turned into `%s`;
- a save locks its chat's row (`FOR UPDATE`) before it takes the next revision from a sequence,
  so saves of one chat from several servers take turns and the revisions of a chat grow in the
  order they commit; reads that belong together run in one `REPEATABLE READ` snapshot;
- every save notifies the others (`NOTIFY autorecap_changes` with the chat's id, delivered at
  commit); `data_version` counts the notices other connections sent, heard on a connection of
  its own that `LISTEN`s (`Listener`), so a server learns of another's saves without polling;
- recall searches the `tsvector` index (`postgres_migrations`), ranked by `ts_rank` with each
  word weighed by its rarity in the chat (its idf, as BM25 weighs it);
- the settings live here too (a row per owner, saved only over the revision it was read at,
  announced on `autorecap_settings`), so every machine runs with the same ones.

May import: core, stfiles, store, psycopg, psycopg_pool.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from functools import lru_cache
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout

from autorecap.store.base import Db, Rows
from autorecap.store.migrations import SettingsConflictError, StoreError
from autorecap.store.postgres_migrations import apply_migrations
from autorecap.store.search import searched_words
from autorecap.store.sql import HIGHEST_REV, SqlStore

log = logging.getLogger("autorecap.store")
CHANNEL = "autorecap_changes"
SETTINGS_CHANNEL = "autorecap_settings"
"""Where a settings save is announced (its payload: the owner)."""
POOL_SIZE = 10
"""Connections a process keeps at most: a server's request threads and worker threads share
them. Many processes on one database call for a pooler in front (docs/SCALING.md)."""
CONNECT_TIMEOUT_S = 10.0
RANK_WEIGHTS = "{0.0, 0.67, 0.83, 1.0}"
"""`ts_rank` weights of D, C, B, A: unused, scene recap, text, recap, in the proportions the
SQLite index weighs its columns (0.8, 1, 1.2; `ts_rank` takes none above 1)."""


def redacted(url: str) -> str:
    """The URL without its password (in its user part or as `?password=`), for messages and
    logs."""
    parts = urlsplit(url)
    if parts.query:
        query = re.sub(r"(^|&)(password=)[^&]*", r"\1\2***", parts.query)
        parts = parts._replace(query=query)
        url = urlunsplit(parts)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port:
        host += f":{parts.port}"
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))


_PARAM = re.compile(r"'[^']*'|\?|%")


@lru_cache(maxsize=512)
def _pg_sql(sql: str) -> str:
    """`?` parameters as psycopg's `%s` (a literal `%` doubled); quoted text left alone."""

    def swap(match: re.Match[str]) -> str:
        found = match.group(0)
        return "%s" if found == "?" else "%%" if found == "%" else found

    return _PARAM.sub(swap, sql)


class PgDb:
    """A pooled connection, speaking the SQL of `autorecap.store.sql` (`Db`)."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn

    def execute(self, sql: str, params: Sequence[Any] = (), /) -> Rows:
        return self.conn.execute(_pg_sql(sql), tuple(params))

    def executemany(self, sql: str, params: Iterable[Sequence[Any]], /) -> object:
        rows = [tuple(p) for p in params]
        if not rows:
            return None
        with self.conn.cursor() as cursor:
            cursor.executemany(_pg_sql(sql), rows)
        return None


class PostgresStore(SqlStore):
    """Chats in a PostgreSQL database (`postgresql://user:password@host/dbname`)."""

    dialect = "postgresql"
    lock_chat = " FOR UPDATE"

    def __init__(
        self, url: str, *, pool_size: int = POOL_SIZE, listen_url: str | None = None
    ) -> None:
        super().__init__()
        self.url = url
        self.listen_url = listen_url or url
        """Where the listening connection goes: behind a pooler in transaction mode, which
        `LISTEN` does not survive, straight to PostgreSQL (`$AUTORECAP_DB_LISTEN`)."""
        self.name = redacted(url)
        self._own: set[int] = set()
        """The backend ids of this store's pooled connections: their notices are our own."""
        timeout: dict[str, Any] = (
            {} if "connect_timeout" in url else {"connect_timeout": int(CONNECT_TIMEOUT_S)}
        )
        try:
            # One connection first: a wrong URL fails at once with the server's own reason
            # (a pool would retry until its timeout), and the schema is brought up to date.
            with psycopg.connect(url, autocommit=True, **timeout) as conn:
                apply_migrations(conn)
        except psycopg.Error as error:
            raise StoreError(
                f"cannot open the store at {self.name}: {_reason(error)}; check that "
                "PostgreSQL runs there and the URL (user, password, database) is right"
            ) from None
        self._pool = ConnectionPool(
            url,
            min_size=1,
            max_size=pool_size,
            kwargs={"autocommit": True, **timeout},
            configure=self._configure,
            open=False,
            name="autorecap",
        )
        try:
            self._pool.open(wait=True, timeout=CONNECT_TIMEOUT_S)
        except PoolTimeout as error:
            self._pool.close()
            raise StoreError(f"cannot open the store at {self.name}: {_reason(error)}") from None
        self._listener: Listener | None = None
        self._listener_lock = threading.Lock()

    def _failed(self, what: str, error: BaseException) -> StoreError:
        return StoreError(f"could not {what} the store at {self.name}: {_reason(error)}")

    def _configure(self, conn: psycopg.Connection[Any]) -> None:
        self._own.add(conn.info.backend_pid)

    # --- what SqlStore asks of a backend ------------------------------------------------------

    @contextmanager
    def _reading(self) -> Iterator[Db]:
        try:
            with self._pool.connection() as conn:
                conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                try:
                    yield PgDb(conn)
                finally:
                    conn.execute("COMMIT")  # read only: a failed one just ends
        except (PoolTimeout, psycopg.Error) as error:
            raise self._failed("read", error) from None

    @contextmanager
    def _writing(self) -> Iterator[Db]:
        try:
            with self._pool.connection() as conn, conn.transaction():
                yield PgDb(conn)
        except (PoolTimeout, psycopg.Error) as error:
            raise self._failed("save to", error) from None

    def after_copy(self) -> None:
        with self._writing() as db:
            db.execute(f"SELECT setval('store_rev', greatest(coalesce(({HIGHEST_REV}), 0), 1))")
            for table in ("messages", "jobs"):
                db.execute(
                    f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                    f"coalesce((SELECT max(id) FROM {table}), 0) + 1, false)"
                )

    def _next_rev(self, db: Db) -> int:
        return int(db.execute("SELECT nextval('store_rev')").fetchone()[0])

    def _changed(self, db: Db, chat_id: str) -> None:
        db.execute("SELECT pg_notify(?, ?)", (CHANNEL, chat_id))

    # --- other processes' saves ------------------------------------------------------------

    def data_version(self) -> int:
        """Counts the saves other connections notified since this store started listening
        (it starts at the first call)."""
        return self._listening().version

    def _listening(self) -> Listener:
        """The listener, started at the first question (a command that only reads or writes
        once has no use for one)."""
        with self._listener_lock:
            if self._listener is None:
                self._listener = Listener(self.listen_url, self._own)
            return self._listener

    def changed_chats(self) -> set[str] | None:
        """The chats other connections saved since the last call (None: unknown, as after the
        listener reconnected: look at every chat)."""
        listener = self._listener
        return listener.take_changed() if listener is not None else None

    # --- settings ----------------------------------------------------------------------------

    keeps_settings = True

    def read_settings(self, owner: str) -> tuple[str, int] | None:
        with self._reading() as db:
            row = db.execute("SELECT data, rev FROM settings WHERE owner = ?", (owner,)).fetchone()
        return None if row is None else (str(row[0]), int(row[1]))

    def write_settings(self, owner: str, text: str, rev: int | None) -> int:
        with self._writing() as db:
            if rev is None:
                row = db.execute(
                    "INSERT INTO settings (owner, data, rev, updated_at) VALUES (?, ?, 1, ?) "
                    "ON CONFLICT (owner) DO NOTHING RETURNING rev",
                    (owner, text, time.time()),
                ).fetchone()
            else:
                row = db.execute(
                    "UPDATE settings SET data = ?, rev = rev + 1, updated_at = ? "
                    "WHERE owner = ? AND rev = ? RETURNING rev",
                    (text, time.time(), owner, rev),
                ).fetchone()
            if row is None:
                whose = f"the owner {owner!r}" if owner else "the installation"
                raise SettingsConflictError(
                    f"the settings of {whose} were changed elsewhere meanwhile"
                )
            db.execute("SELECT pg_notify(?, ?)", (SETTINGS_CHANNEL, owner))
        return int(row[0])

    def settings_owners(self) -> list[str]:
        with self._reading() as db:
            rows = db.execute("SELECT owner FROM settings ORDER BY owner").fetchall()
        return [row[0] for row in rows]

    def settings_version(self) -> int:
        """Counts every settings notice heard, this process's own too (another object of
        this process may hold the owner's settings)."""
        return self._listening().settings_version

    # --- recall ----------------------------------------------------------------------------

    def search(self, chat_id: str, query: str, limit: int = 50) -> list[tuple[int, float]]:
        """The chat's messages that best match `query` (the same words the SQLite index looks
        for), best first."""
        words = searched_words(query)
        if not words:
            return []
        each = ["phraseto_tsquery('autorecap', %s)"] * len(words)
        # (ts_rank gives a phrase ("14-02-27") a message lacks 1e-20, not 0: only a match counts)
        ranks = ", ".join(
            f"CASE WHEN recall @@ {q} THEN ts_rank('{RANK_WEIGHTS}', recall, {q}, 1) ELSE 0 END"
            for q in each
        )
        # BM25's idea on ts_rank: each word's match counts by how few of the chat's messages
        # hold it (its idf), since ts_rank alone weighs "Sefa", in every message, as much as
        # "Cistern". One pass over the chat's matches gives each word's ranks and counts; the
        # chat's size is a second, index-only count.
        sql = (
            f"WITH hit AS MATERIALIZED (SELECT id, ARRAY[{ranks}] AS r FROM messages "
            f"WHERE chat_id = %s AND recall @@ ({' || '.join(each)})), "
            "ranked AS (SELECT hit.id, u.i, u.v FROM hit, unnest(hit.r) WITH ORDINALITY "
            "AS u(v, i) WHERE u.v > 0), "
            # (each word's idf once, in float8: numeric's ln on every match cost more than
            # the search)
            "idf AS (SELECT i, ln(1 + (chat.n - count(*) + 0.5) / (count(*) + 0.5)) AS w "
            "FROM ranked, (SELECT count(*)::float8 AS n FROM messages WHERE chat_id = %s) AS chat "
            "GROUP BY i, chat.n) "
            "SELECT id, sum(w * v) AS rank FROM ranked JOIN idf USING (i) "
            "GROUP BY id ORDER BY rank DESC, id LIMIT %s"
        )
        params = [*(w for word in words for w in (word, word)), chat_id, *words, chat_id, limit]
        try:
            with self._pool.connection() as conn:
                rows = conn.execute(sql, params).fetchall()
        except (PoolTimeout, psycopg.Error) as error:
            raise self._failed("search", error) from None
        return [(int(row_id), float(rank)) for row_id, rank in rows]

    def close(self) -> None:
        if self._listener is not None:
            self._listener.stop()
        self._pool.close()


class Listener:
    """A connection of its own that `LISTEN`s for other connections' saves, on a thread. A
    notice from a connection of ours (`own`) is not counted; after the connection broke, the
    version moves on anyway (what was missed is unknown) and it connects again."""

    WAIT_S = 0.5

    def __init__(self, url: str, own: set[int]) -> None:
        self.url = url
        self.own = own
        self.version = 0
        self.settings_version = 0
        self._changed: set[str] | None = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._listen, name="autorecap-listen", daemon=True)
        self._thread.start()
        self._ready.wait(CONNECT_TIMEOUT_S)

    def _missed(self) -> None:
        """Notices may have been missed: every counter moves, and the chats changed are
        unknown."""
        with self._lock:
            self.version += 1
            self.settings_version += 1
            self._changed = None

    def take_changed(self) -> set[str] | None:
        with self._lock:
            changed, self._changed = self._changed, set()
        return changed

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(CONNECT_TIMEOUT_S)

    def _listen(self) -> None:
        connected = False
        while not self._stop.is_set():
            try:
                with psycopg.connect(self.url, autocommit=True) as conn:
                    conn.execute(f"LISTEN {CHANNEL}")
                    conn.execute(f"LISTEN {SETTINGS_CHANNEL}")
                    if connected:
                        # Listening again: what was saved while it was not is unknown.
                        self._missed()
                    connected = True
                    self._ready.set()
                    while not self._stop.is_set():
                        for notice in conn.notifies(timeout=self.WAIT_S):
                            if notice.channel == SETTINGS_CHANNEL:
                                with self._lock:
                                    self.settings_version += 1
                                continue
                            if notice.pid in self.own:
                                continue
                            with self._lock:
                                self.version += 1
                                if self._changed is not None:
                                    self._changed.add(notice.payload)
            except psycopg.Error as error:
                self._missed()
                log.warning("listening for other servers' saves failed (%s); again in 1 s", error)
                self._ready.set()
                self._stop.wait(1.0)


def _reason(error: BaseException) -> str:
    """The first line of a driver's error (never the URL: psycopg leaves passwords out)."""
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__
