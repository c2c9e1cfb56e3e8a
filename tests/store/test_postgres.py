"""What only the PostgreSQL store does, on a real server: its migrations (from empty, from each
earlier version, all or nothing, taking turns), saves of one chat from two stores at once, the
notices other stores' saves send, its errors, and which store `--db` names. What both backends
do alike is in `test_store.py`, `test_revisions.py` and `test_search.py`."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from autorecap import get_memory, set_data
from autorecap.core.model import Chat
from autorecap.store import ChatStore, SQLiteStore, StoreError, open_store
from autorecap.store import postgres_migrations as pgm
from autorecap.store.location import store_location
from autorecap.store.migrations import StaleChatError
from autorecap.store.postgres import PostgresStore, redacted
from autorecap.testing import generate_chat


@pytest.fixture
def store(postgres_url: str) -> Iterator[PostgresStore]:
    opened = open_store(postgres_url)
    assert isinstance(opened, PostgresStore)
    yield opened
    opened.close()


def tables(url: str) -> set[str]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
        ).fetchall()
    return {row[0] for row in rows}


# --- migrations ---------------------------------------------------------------------------------


def test_migrations_from_an_empty_database(postgres_url: str) -> None:
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        assert pgm.schema_version(conn) == 0
        assert pgm.apply_migrations(conn) == [m.number for m in pgm.MIGRATIONS]
        assert pgm.schema_version(conn) == pgm.MIGRATIONS[-1].number
        assert pgm.apply_migrations(conn) == []  # applied once only
    assert {"chats", "messages", "kept_lines", "jobs", "job_deps", "autorecap_schema"} <= tables(
        postgres_url
    )


@pytest.mark.parametrize("version", [m.number for m in pgm.MIGRATIONS[:-1]])
def test_migrations_from_each_earlier_version_keep_the_chats(
    postgres_url: str, version: int
) -> None:
    """A database left at an earlier version, with a chat stored in it, is brought up to date
    when a store opens it; the chat reads back whole and its messages are indexed for recall
    (the index came with migration 3)."""
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        assert pgm.apply_migrations(conn, until=version) == list(range(1, version + 1))
        conn.execute(
            "INSERT INTO chats (id, header_raw, layout, next_pos, created_at, updated_at, rev, "
            "header_rev, order_rev) VALUES ('old', NULL, %s, 2, 0, 0, 1, 1, 1)",
            (
                '{"bom": false, "default_eol": "\\n", "final_eol": "", "header_eol": "", '
                '"header_had_metadata": false, "header_valid": false}',
            ),
        )
        for pos, text in enumerate(
            ["The lantern hung over the quay.", "Nine crowns, moon-ground."]
        ):
            conn.execute(
                "INSERT INTO messages (chat_id, pos, raw, eol, line, rev) "
                "VALUES ('old', %s, %s, %s, %s, 1)",
                (pos, f'{{"name":"Mira","mes":"{text}"}}'.encode(), b"\n", pos + 1),
            )
    store = open_store(postgres_url)
    try:
        chat = store.load_chat("old")
        assert [m.text for m in chat.messages] == [
            "The lantern hung over the quay.",
            "Nine crowns, moon-ground.",
        ]
        assert store.search("old", "crowns") == [(chat.messages[1].id, pytest.approx(1, abs=1))]
        set_data(chat.messages[0], "memory", "A lantern over the quay.")
        store.save(chat, changed=[chat.messages[0]])
        assert get_memory(store.load_chat("old").messages[0]) == "A lantern over the quay."
    finally:
        store.close()


def test_a_failing_migration_leaves_no_partial_schema(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(conn: psycopg.Connection) -> None:
        conn.execute("CREATE TABLE half (x integer)")
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(pgm, "MIGRATIONS", (pgm.PgMigration(1, "broken", broken),))
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        with pytest.raises(RuntimeError, match="disk on fire"):
            pgm.apply_migrations(conn)
        assert pgm.schema_version(conn) == 0
    assert "half" not in tables(postgres_url)


def test_a_newer_schema_is_refused(postgres_url: str) -> None:
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        pgm.apply_migrations(conn)
        conn.execute("UPDATE autorecap_schema SET version = 999")
    with pytest.raises(StoreError, match="schema version 999, newer than this autorecap"):
        open_store(postgres_url)


def test_servers_starting_at_once_on_an_empty_database_take_turns(postgres_url: str) -> None:
    opened: list[ChatStore] = []
    failures: list[BaseException] = []

    def start() -> None:
        try:
            opened.append(open_store(postgres_url))
        except BaseException as error:
            failures.append(error)

    threads = [threading.Thread(target=start) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    try:
        assert failures == []
        assert len(opened) == 4
        with psycopg.connect(postgres_url) as conn:
            assert pgm.schema_version(conn) == pgm.MIGRATIONS[-1].number
    finally:
        for store in opened:
            store.close()


# --- several stores on one database --------------------------------------------------------------


def test_header_saves_of_one_chat_from_two_stores_at_once_never_both_land(
    postgres_url: str,
) -> None:
    """Two servers save the running recap of one chat at the same moment, from copies read at
    the same revision. A save locks the chat's row before it checks the revision, so they take
    turns: one lands, the other is refused as stale (never both, the second writing over the
    first). The row is held locked while both start, so that their reads overlap."""
    first, second = open_store(postgres_url), open_store(postgres_url)
    try:
        first.import_chat(generate_chat(6, seed=1, chat_id="g"))
        copies = [first.load_chat("g"), second.load_chat("g")]
        outcomes: list[str] = []

        def save(store: ChatStore, chat: Chat, text: str) -> None:
            chat.metadata["note"] = text
            try:
                store.save(chat, header=True)
                outcomes.append(text)
            except StaleChatError:
                outcomes.append("stale")

        with psycopg.connect(postgres_url) as holder:
            holder.execute("SELECT 1 FROM chats WHERE id = 'g' FOR UPDATE")
            threads = [
                threading.Thread(target=save, args=(first, copies[0], "first")),
                threading.Thread(target=save, args=(second, copies[1], "second")),
            ]
            for thread in threads:
                thread.start()
            time.sleep(0.3)  # both are waiting for the row now
            holder.rollback()
        for thread in threads:
            thread.join(10)
        assert sorted(outcomes) in (["first", "stale"], ["second", "stale"])
        landed = next(o for o in outcomes if o != "stale")
        assert first.load_chat("g").metadata["note"] == landed
    finally:
        first.close()
        second.close()


def heard(store: ChatStore, start: int) -> None:
    """Wait until the store heard another's save after `start` (its `data_version`)."""
    deadline = time.monotonic() + 5
    while store.data_version() == start and time.monotonic() < deadline:
        time.sleep(0.005)


def test_another_stores_saves_are_heard_and_name_their_chats(postgres_url: str) -> None:
    mine, theirs = open_store(postgres_url), open_store(postgres_url)
    try:
        mine.import_chat(generate_chat(4, seed=2, chat_id="a"))
        mine.import_chat(generate_chat(4, seed=3, chat_id="b"))
        start = mine.data_version()
        assert mine.changed_chats() == set()
        chat = mine.load_chat("a")
        set_data(chat.messages[0], "memory", "saved here")
        mine.save(chat, changed=[chat.messages[0]])
        time.sleep(0.2)
        assert mine.data_version() == start  # our own saves are not news to us
        other = theirs.load_chat("b")
        set_data(other.messages[1], "memory", "saved by another server")
        theirs.save(other, changed=[other.messages[1]])
        heard(mine, start)
        assert mine.data_version() > start
        assert mine.changed_chats() == {"b"}
        assert mine.changed_chats() == set()  # taken
        assert mine.revisions(["b"]) == {"b": theirs.revisions()["b"]}
    finally:
        mine.close()
        theirs.close()


def test_the_listening_connection_may_go_elsewhere(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As behind a pooler in transaction mode: the pool through it, the listener straight to
    # the server (here: the same server, told apart by the application name).
    monkeypatch.setenv("AUTORECAP_DB_LISTEN", postgres_url + "&application_name=listening")
    mine, theirs = open_store(postgres_url), open_store(postgres_url)
    try:
        mine.import_chat(generate_chat(4, seed=2, chat_id="a"))
        start = mine.data_version()
        with psycopg.connect(postgres_url) as conn:
            names = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'listening'"
            ).fetchone()
        assert names == (1,)
        other = theirs.load_chat("a")
        set_data(other.messages[1], "memory", "saved by another server")
        theirs.save(other, changed=[other.messages[1]])
        heard(mine, start)
        assert mine.changed_chats() == {"a"}
    finally:
        mine.close()
        theirs.close()


# --- errors --------------------------------------------------------------------------------------


def test_an_unreachable_database_is_a_clear_error_without_the_password(tmp_path: Path) -> None:
    url = f"postgresql://autorecap:s3cret-pw@/nowhere?host={tmp_path}&connect_timeout=1"
    with pytest.raises(StoreError) as caught:
        PostgresStore(url)
    message = str(caught.value)
    assert "cannot open the store at postgresql://autorecap:***@" in message
    assert "check that PostgreSQL runs there" in message
    assert "s3cret-pw" not in message


def test_redacted_hides_only_the_password() -> None:
    assert redacted("postgresql://u:pw@db.example:5433/chats") == (
        "postgresql://u:***@db.example:5433/chats"
    )
    assert redacted("postgresql://u@/chats?host=/run/pg") == "postgresql://u@/chats?host=/run/pg"
    assert redacted("postgresql://u@db/chats?sslmode=require&password=s3cret") == (
        "postgresql://u@db/chats?sslmode=require&password=***"
    )


# --- which store --db names ---------------------------------------------------------------------


def test_db_names_a_sqlite_file_or_a_postgresql_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert store_location("postgresql://u@h/d") == "postgresql://u@h/d"
    assert store_location("postgres://u@h/d") == "postgres://u@h/d"
    assert store_location("sqlite:///rel/file.db") == Path("rel/file.db")
    assert store_location("sqlite:////abs/file.db") == Path("/abs/file.db")
    assert store_location("chats.db") == Path("chats.db")
    assert store_location(None) is None
    monkeypatch.setenv("AUTORECAP_DB", "postgresql://from-env/d")
    assert store_location(None) == "postgresql://from-env/d"
    assert store_location("other.db") == Path("other.db")  # --db wins over the variable
    with pytest.raises(StoreError, match="unknown kind of store 'mysql'"):
        store_location("mysql://u@h/d")
    with pytest.raises(StoreError, match="three slashes"):
        store_location("sqlite://file.db")
    monkeypatch.setenv("AUTORECAP_DB", f"sqlite:///{tmp_path / 'env.db'}")  # sqlite:////tmp/…
    opened = open_store()
    try:
        assert isinstance(opened, SQLiteStore)
        assert opened.path == tmp_path / "env.db"
    finally:
        opened.close()


def test_the_queue_finds_a_waiting_job_through_its_index(store: PostgresStore) -> None:
    """Queuing a job first looks for the same job waiting: on a queue of many jobs that must
    be an index lookup, not a read of the whole table (each turn queues a few)."""
    from autorecap.jobs.queue import JobQueue

    queue = JobQueue(store)
    for target in range(50):
        queue.enqueue("message_recap", "c", target)
    with psycopg.connect(store.url) as conn:
        conn.execute("SET enable_seqscan = off")  # only a query no index can answer scans now
        for condition in ("target IN (7, 8)", "target IS NULL"):
            plan = conn.execute(
                "EXPLAIN SELECT id FROM jobs WHERE kind = 'message_recap' AND chat_id = 'c' "
                f"AND {condition} AND state IN ('queued', 'running')"
            ).fetchall()
            assert "jobs_by_chat" in " ".join(row[0] for row in plan), plan
