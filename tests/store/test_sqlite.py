"""What only the SQLite store does: its migrations, WAL, and a save that only appends not
reading the stored order back (seen in the statements it runs). The rest: `test_store.py`."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from autorecap.store import SQLiteStore, StoreError
from autorecap.store.migrations import (
    MIGRATIONS,
    apply_migrations,
    schema_version,
)
from autorecap.testing import generate_chat

HEADER = b'{"chat_metadata":{},"user_name":"unused","character_name":"unused"}'


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteStore]:
    opened = SQLiteStore(tmp_path / "store.db")
    yield opened
    opened.close()


def test_migrations_from_an_empty_database(tmp_path: Path) -> None:
    db = sqlite3.connect(tmp_path / "empty.db", isolation_level=None)
    assert schema_version(db) == 0
    assert apply_migrations(db) == [m.number for m in MIGRATIONS]
    assert schema_version(db) == MIGRATIONS[-1].number
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"chats", "messages", "kept_lines"} <= tables
    assert apply_migrations(db) == []  # applied once only


def test_migrations_from_the_oldest_schema(tmp_path: Path) -> None:
    db = sqlite3.connect(tmp_path / "old.db", isolation_level=None)
    assert apply_migrations(db, until=1) == [1]
    assert apply_migrations(db) == [m.number for m in MIGRATIONS if m.number > 1]


def test_a_failing_migration_leaves_no_partial_schema(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from autorecap.store import migrations

    def broken(db: sqlite3.Connection) -> None:
        db.execute("CREATE TABLE half (x)")
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(migrations, "MIGRATIONS", (migrations.Migration(1, "broken", broken),))
    db = sqlite3.connect(tmp_path / "b.db", isolation_level=None)
    with pytest.raises(RuntimeError):
        migrations.apply_migrations(db)
    assert schema_version(db) == 0
    assert db.execute("SELECT name FROM sqlite_master WHERE name='half'").fetchone() is None


def test_a_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "future.db"
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA user_version = 999")
    db.close()
    with pytest.raises(StoreError, match="schema version 999, newer than this autorecap"):
        SQLiteStore(path)


def test_store_is_wal_in_autorecap_home(home: Path) -> None:
    store = SQLiteStore()
    assert store.path == home / "autorecap.db"
    mode = store._db.execute("PRAGMA journal_mode").fetchone()[0]
    store.close()
    assert mode == "wal"


def _statements(store: SQLiteStore) -> list[str]:
    seen: list[str] = []
    store._db.set_trace_callback(seen.append)
    return seen


def test_an_append_only_save_does_not_read_the_message_order_back(store: SQLiteStore) -> None:
    store.import_chat(generate_chat(50, seed=5, chat_id="g"))
    chat = store.load_chat("g")
    seen = _statements(store)
    for turn in range(3):
        chat.append({"name": "User", "is_user": True, "mes": f"turn {turn}"})
        chat.append({"name": "Bot", "mes": f"reply {turn}"})
        store.save(chat, structure=True)
    assert not [s for s in seen if "SELECT id, pos FROM messages" in s]
    assert [m["mes"] for m in store.load_chat("g").messages] == [m["mes"] for m in chat.messages]
