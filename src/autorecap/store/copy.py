"""Moving an installation: every row of one store into another, SQLite or PostgreSQL.

Chats (with their message ids, positions and revisions as they are), the lines kept beside
them, and the job queue (jobs, their dependencies, results and the pause switch) are copied row
for row, so that a job still names its message and a copy read before the move still knows
which revision it reflects. The target must be empty. Chats are written one per transaction,
then the queue in one; the target's counters (revisions, ids) are moved past what was copied.
Each chat is then exported from both stores and compared byte for byte.

Stop the servers and workers on the source first: what they write during the copy is not in it.

May import: store.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

from autorecap.store.base import ChatStore, Db
from autorecap.store.migrations import StoreError

CHAT_TABLES: tuple[tuple[str, str, str], ...] = (
    (
        "chats",
        "id, header_raw, header_data, layout, source, next_pos, created_at, updated_at, rev, "
        "header_rev, order_rev",
        "id",
    ),
    ("messages", "id, chat_id, pos, raw, eol, data, line, rev", "pos"),
    ("kept_lines", "chat_id, seq, line, raw, eol, reason, after_pos", "seq"),
)
"""A chat's rows: (table, columns, order within the chat)."""
QUEUE_TABLES: tuple[tuple[str, str, str], ...] = (
    (
        "jobs",
        "id, kind, chat_id, target, priority, state, attempts, max_retries, not_before, "
        "lease_until, worker, error, progress, note, cancel_requested, created_at, updated_at, "
        "finished_at",
        "id",
    ),
    ("job_deps", "job_id, depends_on", "job_id, depends_on"),
    ("job_results", "kind, chat_id, target, input_hash", "kind, chat_id, target"),
    ("queue_state", "key, value", "key"),
)


Rows = dict[str, list[tuple[object, ...]]]
"""Rows by table."""


@dataclass
class CopyReport:
    """What a copy moved."""

    chats: int = 0
    messages: int = 0
    jobs: int = 0
    mismatched: list[str] = field(default_factory=list)
    """Chats whose export differs between the stores (none, or the copy is wrong)."""


def copy_store(
    source: ChatStore,
    target: ChatStore,
    *,
    progress: Callable[[str], None] | None = None,
) -> CopyReport:
    """Copy every row of `source` into `target` (empty); see the module docstring."""
    if _count(target, "chats") + _count(target, "jobs"):
        raise StoreError(
            "the target store is not empty: copy into a new database (or a new SQLite file)"
        )
    report = CopyReport()
    chat_ids = [info.id for info in source.list_chats()]
    for chat_id in chat_ids:
        rows: Rows = source.read(partial(_chat_rows, chat_id=chat_id))
        target.run(partial(_insert_all, rows=rows))
        report.chats += 1
        report.messages += len(rows["messages"])
        if progress is not None:
            progress(chat_id)
    queue: Rows = source.read(_queue_rows)
    target.run(partial(_insert_all, rows=queue))
    report.jobs = len(queue["jobs"])
    target.after_copy()
    for chat_id in chat_ids:
        if source.export_chat(chat_id) != target.export_chat(chat_id):
            report.mismatched.append(chat_id)
    return report


def _chat_rows(db: Db, chat_id: str) -> Rows:
    found: Rows = {}
    for table, columns, order in CHAT_TABLES:
        key = "id" if table == "chats" else "chat_id"
        found[table] = [
            tuple(_plain(value) for value in row)
            for row in db.execute(
                f"SELECT {columns} FROM {table} WHERE {key} = ? ORDER BY {order}", (chat_id,)
            ).fetchall()
        ]
    return found


def _queue_rows(db: Db) -> Rows:
    return {
        table: [
            tuple(row)
            for row in db.execute(f"SELECT {columns} FROM {table} ORDER BY {order}").fetchall()
        ]
        for table, columns, order in QUEUE_TABLES
    }


def _insert_all(db: Db, rows: Rows) -> None:
    for table, columns, _ in (*CHAT_TABLES, *QUEUE_TABLES):
        if rows.get(table):
            marks = ",".join("?" * len(columns.split(",")))
            db.executemany(f"INSERT INTO {table} ({columns}) VALUES ({marks})", rows[table])


def _count(store: ChatStore, table: str) -> int:
    return int(store.read(lambda db: db.execute(f"SELECT count(*) FROM {table}").fetchone()[0]))


def _plain(value: object) -> object:
    return bytes(value) if isinstance(value, memoryview) else value
