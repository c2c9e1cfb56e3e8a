"""What the SQL stores share: chats as rows, saved change by change, with revisions.

A message keeps the bytes it was imported with (`raw`) and gets its JSON in `data` only once it
differs, so an import is a bulk insert of lines and an unchanged chat exports byte for byte.
Saving a change writes just the changed rows, in one short transaction, stamped with the next
revision (`autorecap.store.revisions`).

The SQL here is the part SQLite and PostgreSQL both speak (`?` marks a parameter; the
PostgreSQL connection turns them into its own). A backend (`SQLiteStore`, `PostgresStore`)
provides its connections and transactions (`_reading`, `_writing`), the next revision, its
migrations, its full-text search and how it learns of other processes' saves.

May import: core, stfiles, store.
"""

from __future__ import annotations

import json
import threading
import time
from abc import abstractmethod
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any, TypeVar

from autorecap.core.jsjson import loads_strict
from autorecap.core.model import Chat, ChatRevs, KeptLine, Message
from autorecap.stfiles.jsonl import kept_line_anchor, message_line, serialize_chat
from autorecap.store.base import ChatInfo, ChatStore, Db, Pulled
from autorecap.store.migrations import StoreError, UnknownChatError
from autorecap.store.order import StoredOrder, appended_to, saved, stored_count
from autorecap.store.revisions import (
    apply_header,
    apply_rows,
    stale,
    stored_header,
    stored_header_text,
    write_message,
)
from autorecap.store.rows import (
    changed_header_json,
    changed_message_json,
    index_at_or_before,
    layout_from_json,
    layout_json,
)

T = TypeVar("T")
IDS_PER_QUERY = 500
"""Values one `IN (...)` holds at most (SQLite takes at most 32,766 parameters)."""
ORDERS_KEPT = 1024
"""How many chats' stored orders a store remembers (the least recently written go)."""


class SqlStore(ChatStore):
    """The store's logic on any SQL backend (see the module docstring)."""

    lock_chat = ""
    """What a save's read of its chat's row ends with to lock that row until the commit (the
    backend's `FOR UPDATE`; nothing where a write transaction locks the whole database)."""

    def __init__(self) -> None:
        self.structure_version = 0
        """Counts this store's changes to chats' message lists (caches key on it)."""
        self._orders: dict[str, tuple[int, StoredOrder]] = {}
        """Per chat, its stored order (message ids) as this store last read it, or the message
        list as it last wrote it, with the chat's order revision then: a save that only appends
        messages to an order still at that revision need not read it back."""
        self._orders_lock = threading.Lock()

    # --- what a backend provides ------------------------------------------------------------

    @abstractmethod
    def _reading(self) -> AbstractContextManager[Db]:
        """A connection whose reads agree with each other (one snapshot)."""

    @abstractmethod
    def _writing(self) -> AbstractContextManager[Db]:
        """A connection in a write transaction, committed at the end or rolled back on any
        error (a database error raised as `StoreError`)."""

    @abstractmethod
    def _next_rev(self, db: Db) -> int:
        """The next store-wide revision, inside a write transaction."""

    def _changed(self, db: Db, chat_id: str) -> None:
        """Tell other processes, at the commit, that this chat was saved (where they cannot
        see it by themselves)."""

    # --- queries ----------------------------------------------------------------------------

    def has_chat(self, chat_id: str) -> bool:
        with self._reading() as db:
            row = db.execute("SELECT 1 FROM chats WHERE id = ?", (chat_id,)).fetchone()
        return row is not None

    def list_chats(self) -> list[ChatInfo]:
        with self._reading() as db:
            rows = db.execute(
                """SELECT c.id, c.source, c.created_at, c.updated_at,
                          (SELECT COUNT(*) FROM messages m WHERE m.chat_id = c.id)
                   FROM chats c ORDER BY c.updated_at DESC, c.id"""
            ).fetchall()
        return [
            ChatInfo(id=r[0], source=r[1], created_at=r[2], updated_at=r[3], messages=r[4])
            for r in rows
        ]

    # --- import, load, export -----------------------------------------------------------------

    def import_chat(
        self,
        chat: Chat,
        *,
        chat_id: str | None = None,
        replace: bool = False,
        source: str | None = None,
    ) -> ChatInfo:
        new_id = chat_id or chat.id
        if not new_id:
            raise StoreError("a stored chat needs an id: pass chat_id (CLI: --as ID)")
        now = time.time()
        layout = chat.layout
        self.structure_version += 1
        self._forget_order(new_id)
        with self._writing() as db:
            if _exists(db, new_id, self.lock_chat):
                if not replace:
                    raise StoreError(
                        f"a chat with id {new_id!r} is already stored: pass --replace to "
                        "overwrite it, or --as ID to store this one under another id"
                    )
                db.execute("DELETE FROM chats WHERE id = ?", (new_id,))
            rev = self._next_rev(db)
            header_raw = layout.header_raw
            header_data = changed_header_json(chat.header, header_raw, layout)
            db.execute(
                """INSERT INTO chats (id, header_raw, header_data, layout, source, next_pos,
                                      created_at, updated_at, rev, header_rev, order_rev)
                   VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
                (
                    new_id,
                    header_raw,
                    header_data,
                    layout_json(layout),
                    source,
                    len(chat.messages),
                    now,
                    now,
                    rev,
                    rev,
                    rev,
                ),
            )
            rows = []
            for pos, message in enumerate(chat.messages):
                raw = message._raw
                data = changed_message_json(message)
                if raw is None:
                    # Made in memory: store the line it will be written as, so data stays NULL.
                    raw, data = message_line(message), None
                rows.append((new_id, pos, raw, message._eol, data, message._line, rev))
            db.executemany(
                "INSERT INTO messages (chat_id, pos, raw, eol, data, line, rev) "
                "VALUES (?,?,?,?,?,?,?)",
                rows,
            )
            positions = {id(m): pos for pos, m in enumerate(chat.messages)}
            kept_rows = []
            for seq, kept in enumerate(layout.kept):
                anchor = kept_line_anchor(chat, kept, positions)
                after_pos = -1 if anchor is None else positions[id(anchor)]
                kept_rows.append(
                    (new_id, seq, kept.line, kept.raw, kept.eol, kept.reason, after_pos)
                )
            db.executemany(
                "INSERT INTO kept_lines (chat_id, seq, line, raw, eol, reason, after_pos) "
                "VALUES (?,?,?,?,?,?,?)",
                kept_rows,
            )
            self._changed(db, new_id)
        return ChatInfo(
            id=new_id, source=source, created_at=now, updated_at=now, messages=len(chat.messages)
        )

    def load_chat(self, chat_id: str) -> Chat:
        with self._reading() as db:
            head = db.execute(
                "SELECT header_raw, header_data, layout, rev, header_rev, order_rev FROM chats "
                "WHERE id = ?",
                (chat_id,),
            ).fetchone()
            if head is None:
                raise unknown_chat(chat_id)
            rows = db.execute(
                "SELECT id, pos, raw, eol, data, line, rev FROM messages WHERE chat_id = ? "
                "ORDER BY pos",
                (chat_id,),
            ).fetchall()
            kept_rows = db.execute(
                "SELECT line, raw, eol, reason, after_pos FROM kept_lines WHERE chat_id = ? "
                "ORDER BY seq",
                (chat_id,),
            ).fetchall()
        header_raw, header_data, layout_text, rev, header_rev, order_rev = head
        header_raw = _bytes(header_raw)
        self._remember_order(chat_id, order_rev, [row[0] for row in rows])
        layout = layout_from_json(layout_text)
        layout.header_raw = header_raw
        chat = Chat(chat_id=chat_id, header={})
        chat.layout = layout
        chat.header = stored_header(header_raw, header_data, layout)
        chat.revs = ChatRevs(
            rev, header_rev, order_rev, stored_header_text(header_raw, header_data, layout)
        )
        positions: list[int] = []
        for row_id, pos, raw, eol, data, line, row_rev in rows:
            raw, eol = _bytes(raw), _bytes(eol)
            values = json.loads(data) if data is not None else loads_strict(raw.decode("utf-8"))
            message = Message(values)
            message._raw = raw
            message._eol = eol
            message._line = line
            message._id = row_id
            message._rev = row_rev
            message._chat = chat
            chat.messages.append(message)
            positions.append(pos)
        layout.original_messages = list(chat.messages)
        layout.kept = [
            KeptLine(
                line=line,
                raw=_bytes(raw),
                reason=reason,
                eol=_bytes(eol),
                after_index=index_at_or_before(positions, after_pos),
            )
            for line, raw, eol, reason, after_pos in kept_rows
        ]
        return chat

    def has_message(self, chat_id: str, message_id: int) -> bool:
        with self._reading() as db:
            row = db.execute(
                "SELECT 1 FROM messages WHERE id = ? AND chat_id = ?", (message_id, chat_id)
            ).fetchone()
        return row is not None

    def export_chat(self, chat_id: str) -> bytes:
        return serialize_chat(self.load_chat(chat_id))

    def delete_chat(self, chat_id: str) -> None:
        self.structure_version += 1
        self._forget_order(chat_id)
        with self._writing() as db:
            if not _exists(db, chat_id, self.lock_chat):
                raise unknown_chat(chat_id)
            db.execute("DELETE FROM chats WHERE id = ?", (chat_id,))
            self._changed(db, chat_id)

    # --- saving changes ----------------------------------------------------------------------

    def save(
        self,
        chat: Chat,
        *,
        changed: Iterable[Message] = (),
        header: bool = False,
        structure: bool = False,
        full: bool = False,
        also: Callable[[Db], None] | None = None,
    ) -> int:
        """See `ChatStore.save`. `also(db)` runs inside the same transaction (a job queue marks
        its job done there, so that the recap and the job's completion land together)."""
        written = 0
        chat.adopt_all()
        revs = chat.revs
        new_ids: list[tuple[Message, int]] = []  # this save's own: saves of other chats run too
        rows: list[Message] = []
        header_written = False
        header_text: str | None = None
        reshaped = 0
        with self._writing() as db:
            row = db.execute(
                "SELECT header_raw, layout, next_pos, rev, header_rev, order_rev FROM chats "
                "WHERE id = ?" + self.lock_chat,
                (chat.id,),
            ).fetchone()
            if row is None:
                raise unknown_chat(chat.id)
            header_raw, layout_text, next_pos, stored_rev, header_rev, order_rev = row
            header_raw = _bytes(header_raw)
            rev = self._next_rev(db)
            if header or full:
                if revs.header is not None and header_rev != revs.header:
                    raise stale(chat, "its header (the running recap)")
                layout = layout_from_json(layout_text)
                header_data = changed_header_json(chat.header, header_raw, layout)
                db.execute(
                    "UPDATE chats SET header_data = ?, header_rev = ?, updated_at = ? WHERE id = ?",
                    (header_data, rev, time.time(), chat.id),
                )
                header_text = stored_header_text(header_raw, header_data, layout)
                header_written = True
                written += 1
            if structure or full:
                if revs.order is not None and order_rev != revs.order:
                    raise stale(chat, "its messages (added or removed)")
                reshaped = self._save_structure(db, chat, next_pos, order_rev, new_ids, rev)
                if reshaped:
                    db.execute("UPDATE chats SET order_rev = ? WHERE id = ?", (rev, chat.id))
                    written += reshaped
            seen: set[int] = set()
            for message in chat.messages if full else changed:
                if message._id is None or message._id in seen or message._chat is not chat:
                    continue
                seen.add(message._id)
                write_message(db, chat, message, rev)
                rows.append(message)
                written += 1
            if written:
                db.execute("UPDATE chats SET rev = ? WHERE id = ?", (rev, chat.id))
                self._changed(db, chat.id)
            if also is not None:
                also(db)
        # Ids and revisions go onto the messages only once the transaction committed: after a
        # rollback the messages are still new (the next save inserts them) or as read.
        for message, row_id in new_ids:
            message._id = row_id
            message._rev = rev
            message._chat = chat
        for message in rows:
            message._rev = rev
            message._base = None
        if written:
            if header_written:
                revs.header, revs.header_base = rev, header_text
            if reshaped:
                revs.order = rev
            if revs.synced == stored_rev:  # nobody else wrote in between: still in step
                revs.synced = rev
        if structure or full:
            self._remember_order(chat.id, rev if reshaped else order_rev, saved(chat.messages))
        return written

    # --- changes made by other processes -------------------------------------------------------

    def pull(
        self,
        chat: Chat,
        *,
        pending: Collection[Message] = (),
        header_pending: bool = False,
    ) -> Pulled:
        """Bring into `chat`, a copy read from this store, what other processes saved since:
        changed message rows and the header. `pending`: messages changed in the copy and not
        saved yet; they keep their text and fields and take only the recap pipeline's data
        (`take_pipeline_data`), unless their text changed here (then theirs is stale). With
        `header_pending`, the header is merged three ways, key by key of `chat_metadata`.
        Messages added or removed elsewhere are not merged: `Pulled.reshaped` says to read the
        chat again. Listeners are not notified (the caller tells its caches)."""
        revs = chat.revs
        with self._reading() as db:
            head = db.execute(
                "SELECT rev, header_rev, order_rev, header_raw, header_data, layout FROM chats "
                "WHERE id = ?",
                (chat.id,),
            ).fetchone()
            if head is None:
                return Pulled(gone=True)
            rev, header_rev, order_rev, header_raw, header_data, layout_text = head
            if revs.synced is None or rev == revs.synced:
                return Pulled()
            if order_rev != revs.order:
                return Pulled(reshaped=True)
            rows = db.execute(
                "SELECT id, raw, data, rev FROM messages WHERE chat_id = ? AND rev > ?",
                (chat.id, revs.synced),
            ).fetchall()
        pulled = Pulled()
        apply_rows(chat, [(i, _bytes(raw), data, r) for i, raw, data, r in rows], pending, pulled)
        if header_rev != revs.header:
            header_raw = _bytes(header_raw)
            layout = layout_from_json(layout_text)
            stored = stored_header(header_raw, header_data, layout)
            text = stored_header_text(header_raw, header_data, layout)
            apply_header(chat, stored, text, header_rev, header_pending)
            pulled.header = True
        revs.synced = rev
        return pulled

    def revisions(self, chat_ids: Collection[str] | None = None) -> dict[str, int]:
        """The stored chats' revisions (what `pull` compares with a copy's `revs.synced`): of
        `chat_ids`, or of every chat."""
        with self._reading() as db:
            if chat_ids is None:
                return dict(db.execute("SELECT id, rev FROM chats").fetchall())
            found: dict[str, int] = {}
            for marks, part in in_parts(list(chat_ids)):
                rows = db.execute(f"SELECT id, rev FROM chats WHERE id IN ({marks})", part)
                found.update(rows.fetchall())
            return found

    def run(self, work: Callable[[Db], Any]) -> Any:
        """Run `work(db)` in one write transaction."""
        with self._writing() as db:
            return work(db)

    def read(self, work: Callable[[Db], Any]) -> Any:
        """Run `work(db)` on one consistent view of the store (no writes)."""
        with self._reading() as db:
            return work(db)

    def forget(self, chat_id: str) -> None:
        """Let go of what this store remembers of a chat (its copy in memory is gone: the
        order it remembers would keep its messages alive)."""
        self._forget_order(chat_id)

    # --- the stored order ----------------------------------------------------------------------

    def _remember_order(self, chat_id: str, order_rev: int, order: StoredOrder) -> None:
        """Keep a chat's stored order at `order_rev`, at most `ORDERS_KEPT` of them."""
        with self._orders_lock:
            self._orders.pop(chat_id, None)
            self._orders[chat_id] = (order_rev, order)
            while len(self._orders) > ORDERS_KEPT:
                del self._orders[next(iter(self._orders))]

    def _forget_order(self, chat_id: str) -> None:
        with self._orders_lock:
            self._orders.pop(chat_id, None)

    def _known_order(self, chat_id: str, order_rev: int) -> StoredOrder | None:
        """The remembered order, if the stored one is still at its revision."""
        with self._orders_lock:
            known = self._orders.pop(chat_id, None)
        return known[1] if known is not None and known[0] == order_rev else None

    def _save_structure(
        self,
        db: Db,
        chat: Chat,
        next_pos: int,
        order_rev: int,
        new_ids: list[tuple[Message, int]],
        rev: int,
    ) -> int:
        """Insert new messages, delete removed ones, and keep the stored order."""
        self.structure_version += 1
        known = self._known_order(chat.id, order_rev)
        if known is not None and appended_to(known, chat.messages):
            # Messages appended at the end, and the stored order known: no need to read it.
            fresh = chat.messages[stored_count(known) :]
            _insert(db, chat, fresh, range(next_pos, next_pos + len(fresh)), new_ids, rev)
            db.execute(
                "UPDATE chats SET next_pos = ?, updated_at = ? WHERE id = ?",
                (next_pos + len(fresh), time.time(), chat.id),
            )
            return len(fresh)
        stored = db.execute(
            "SELECT id, pos FROM messages WHERE chat_id = ? ORDER BY pos", (chat.id,)
        ).fetchall()
        current_ids = [m._id for m in chat.messages if m._id is not None]
        present = set(current_ids)
        removed = [(mid,) for mid, _ in stored if mid not in present]
        db.executemany("DELETE FROM messages WHERE id = ?", removed)
        kept_order = [mid for mid, _ in stored if mid in present]
        new_count = len(chat.messages) - len(current_ids)
        if kept_order == current_ids and all(
            m._id is None for m in chat.messages[len(current_ids) :]
        ):
            # The common case: messages appended at the end (or none).
            new_positions = [next_pos + k for k in range(new_count)]
            next_pos += new_count
        else:
            new_positions = _renumber(db, chat, stored, base=next_pos)
            next_pos += len(chat.messages)
            new_count = len(chat.messages)  # every row moved
        _insert(db, chat, [m for m in chat.messages if m._id is None], new_positions, new_ids, rev)
        db.execute(
            "UPDATE chats SET next_pos = ?, updated_at = ? WHERE id = ?",
            (next_pos, time.time(), chat.id),
        )
        return len(removed) + new_count


def in_parts(values: Sequence[T]) -> Iterator[tuple[str, Sequence[T]]]:
    """`values` in parts of at most `IDS_PER_QUERY`, each with its `?,?,...` for `IN (...)`."""
    for start in range(0, len(values), IDS_PER_QUERY):
        part = values[start : start + IDS_PER_QUERY]
        yield ",".join("?" * len(part)), part


def _insert(
    db: Db,
    chat: Chat,
    fresh: Sequence[Message],
    positions: Iterable[int],
    new_ids: list[tuple[Message, int]],
    rev: int,
) -> None:
    """Insert messages not stored yet at `positions` (their ids go in `new_ids`)."""
    for message, pos in zip(fresh, positions, strict=True):
        row = db.execute(
            "INSERT INTO messages (chat_id, pos, raw, eol, data, line, rev) "
            "VALUES (?,?,?,?,?,0,?) RETURNING id",
            (chat.id, pos, None, None, changed_message_json(message), rev),
        ).fetchone()
        new_ids.append((message, int(row[0])))


def _renumber(db: Db, chat: Chat, stored: list[tuple[int, int]], *, base: int) -> list[int]:
    """Number every message `base + index` in the chat's current order (a rare path: a message
    inserted before others, or a reordering). Positions above every old one never collide.
    Kept lines move with the message they follow. Returns the positions of the messages not
    stored yet."""
    new_pos = {m._id: base + i for i, m in enumerate(chat.messages) if m._id is not None}
    for seq, after_pos in db.execute(
        "SELECT seq, after_pos FROM kept_lines WHERE chat_id = ?", (chat.id,)
    ).fetchall():
        anchor = -1
        for mid, pos in stored:  # ordered by old position
            if pos > after_pos:
                break
            anchor = new_pos.get(mid, anchor)
        db.execute(
            "UPDATE kept_lines SET after_pos = ? WHERE chat_id = ? AND seq = ?",
            (anchor, chat.id, seq),
        )
    db.executemany(
        "UPDATE messages SET pos = ? WHERE id = ?", [(p, mid) for mid, p in new_pos.items()]
    )
    return [base + i for i, m in enumerate(chat.messages) if m._id is None]


def _exists(db: Db, chat_id: str, lock: str = "") -> bool:
    return db.execute("SELECT 1 FROM chats WHERE id = ?" + lock, (chat_id,)).fetchone() is not None


def _bytes(value: Any) -> Any:
    """A binary column as `bytes` (a driver may hand back a `memoryview`)."""
    return bytes(value) if isinstance(value, memoryview) else value


HIGHEST_REV = (
    "SELECT max(r) FROM (SELECT max(rev) AS r FROM chats UNION ALL "
    "SELECT max(header_rev) FROM chats UNION ALL SELECT max(order_rev) FROM chats UNION ALL "
    "SELECT max(rev) FROM messages) AS revs"
)
"""The highest revision a store holds (`after_copy`)."""


def unknown_chat(chat_id: str) -> StoreError:
    return UnknownChatError(
        f"no stored chat with id {chat_id!r}: `autorecap chats` lists the stored chats, "
        "`autorecap import FILE` stores one"
    )
