"""The embedded store: SQLite in WAL mode, one row per message.

A message keeps the bytes it was imported with (`raw`) and gets its JSON in `data` only once it
differs, so an import is a bulk insert of lines and an unchanged chat exports byte for byte.
Saving a change writes just the changed rows, in one short transaction.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from pathlib import Path
from typing import Any

from autorecap.core.jsjson import loads_strict
from autorecap.core.model import Chat, ChatRevs, KeptLine, Message
from autorecap.paths import autorecap_home
from autorecap.stfiles.jsonl import (
    kept_line_anchor,
    message_line,
    serialize_chat,
)
from autorecap.store.base import ChatInfo, ChatStore
from autorecap.store.migrations import (
    StoreError,
    UnknownChatError,
    apply_migrations,
)
from autorecap.store.order import StoredOrder, appended_to, saved, stored_count
from autorecap.store.revisions import (
    Pulled,
    apply_header,
    apply_rows,
    next_rev,
    stale,
    stored_header,
    stored_header_text,
    write_message,
)
from autorecap.store.rows import (
    Transaction,
    changed_header_json,
    changed_message_json,
    index_at_or_before,
    layout_from_json,
    layout_json,
)
from autorecap.store.search import search

DB_FILE = "autorecap.db"
ORDERS_KEPT = 1024
"""How many chats' stored orders a connection remembers (the least recently written go)."""


class SQLiteStore(ChatStore):
    """Chats in one SQLite file (default `$AUTORECAP_HOME/autorecap.db`)."""

    def __init__(self, path: str | Path | None = None, *, synchronous: str = "FULL") -> None:
        self.path = Path(path) if path is not None else autorecap_home(create=True) / DB_FILE
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self.structure_version = 0
        """Counts this connection's changes to chats' message lists (caches key on it)."""
        self._orders: dict[str, StoredOrder] = {}
        """Per chat, its stored order as this connection last read it (message ids) or wrote it
        (the message objects, which keep their ids): a save that only appends messages need
        not read it back. Forgotten when another connection commits (`data_version`)."""
        self._orders_version = -1
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

    # --- queries ----------------------------------------------------------------------------

    def has_chat(self, chat_id: str) -> bool:
        with self._lock:
            row = self._db.execute("SELECT 1 FROM chats WHERE id = ?", (chat_id,)).fetchone()
        return row is not None

    def list_chats(self) -> list[ChatInfo]:
        with self._lock:
            rows = self._db.execute(
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
        with self._lock, self._transaction():
            self._orders.pop(new_id, None)
            rev = next_rev(self._db)
            if self._exists(new_id):
                if not replace:
                    raise StoreError(
                        f"a chat with id {new_id!r} is already stored: pass --replace to "
                        "overwrite it, or --as ID to store this one under another id"
                    )
                self._db.execute("DELETE FROM chats WHERE id = ?", (new_id,))
            header_raw = layout.header_raw
            header_data = changed_header_json(chat.header, header_raw, layout)
            self._db.execute(
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
            self._db.executemany(
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
            self._db.executemany(
                "INSERT INTO kept_lines (chat_id, seq, line, raw, eol, reason, after_pos) "
                "VALUES (?,?,?,?,?,?,?)",
                kept_rows,
            )
        return ChatInfo(
            id=new_id, source=source, created_at=now, updated_at=now, messages=len(chat.messages)
        )

    def load_chat(self, chat_id: str) -> Chat:
        with self._lock:
            head = self._db.execute(
                "SELECT header_raw, header_data, layout, rev, header_rev, order_rev FROM chats "
                "WHERE id = ?",
                (chat_id,),
            ).fetchone()
            if head is None:
                raise self._unknown(chat_id)
            rows = self._db.execute(
                "SELECT id, pos, raw, eol, data, line, rev FROM messages WHERE chat_id = ? "
                "ORDER BY pos",
                (chat_id,),
            ).fetchall()
            kept_rows = self._db.execute(
                "SELECT line, raw, eol, reason, after_pos FROM kept_lines WHERE chat_id = ? "
                "ORDER BY seq",
                (chat_id,),
            ).fetchall()
            self._check_orders()
            self._remember_order(chat_id, [row[0] for row in rows])
        header_raw, header_data, layout_text, rev, header_rev, order_rev = head
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
                raw=raw,
                reason=reason,
                eol=eol,
                after_index=index_at_or_before(positions, after_pos),
            )
            for line, raw, eol, reason, after_pos in kept_rows
        ]
        return chat

    def export_chat(self, chat_id: str) -> bytes:
        return serialize_chat(self.load_chat(chat_id))

    def delete_chat(self, chat_id: str) -> None:
        self.structure_version += 1
        with self._lock, self._transaction():
            self._orders.pop(chat_id, None)
            if not self._exists(chat_id):
                raise self._unknown(chat_id)
            self._db.execute("DELETE FROM chats WHERE id = ?", (chat_id,))

    # --- saving changes ----------------------------------------------------------------------

    def save(
        self,
        chat: Chat,
        *,
        changed: Iterable[Message] = (),
        header: bool = False,
        structure: bool = False,
        full: bool = False,
        also: Callable[[sqlite3.Connection], None] | None = None,
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
        with self._lock, self._transaction():
            row = self._db.execute(
                "SELECT header_raw, layout, next_pos, rev, header_rev, order_rev FROM chats "
                "WHERE id = ?",
                (chat.id,),
            ).fetchone()
            if row is None:
                raise self._unknown(chat.id)
            header_raw, layout_text, next_pos, stored_rev, header_rev, order_rev = row
            rev = next_rev(self._db)
            if header or full:
                if revs.header is not None and header_rev != revs.header:
                    raise stale(chat, "its header (the running recap)")
                layout = layout_from_json(layout_text)
                header_data = changed_header_json(chat.header, header_raw, layout)
                self._db.execute(
                    "UPDATE chats SET header_data = ?, header_rev = ?, updated_at = ? WHERE id = ?",
                    (header_data, rev, time.time(), chat.id),
                )
                header_text = stored_header_text(header_raw, header_data, layout)
                header_written = True
                written += 1
            if structure or full:
                if revs.order is not None and order_rev != revs.order:
                    raise stale(chat, "its messages (added or removed)")
                reshaped = self._save_structure(chat, next_pos, new_ids, rev)
                if reshaped:
                    self._db.execute("UPDATE chats SET order_rev = ? WHERE id = ?", (rev, chat.id))
                    written += reshaped
            seen: set[int] = set()
            for message in chat.messages if full else changed:
                if message._id is None or message._id in seen or message._chat is not chat:
                    continue
                seen.add(message._id)
                write_message(self._db, chat, message, rev)
                rows.append(message)
                written += 1
            if written:
                self._db.execute("UPDATE chats SET rev = ? WHERE id = ?", (rev, chat.id))
            if also is not None:
                also(self._db)
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
            with self._lock:
                self._check_orders()
                self._remember_order(chat.id, saved(chat.messages))
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
        with self._lock:
            head = self._db.execute(
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
            rows = self._db.execute(
                "SELECT id, raw, data, rev FROM messages WHERE chat_id = ? AND rev > ?",
                (chat.id, revs.synced),
            ).fetchall()
        pulled = Pulled()
        apply_rows(chat, rows, pending, pulled)
        if header_rev != revs.header:
            layout = layout_from_json(layout_text)
            stored = stored_header(header_raw, header_data, layout)
            text = stored_header_text(header_raw, header_data, layout)
            apply_header(chat, stored, text, header_rev, header_pending)
            pulled.header = True
        revs.synced = rev
        return pulled

    def _remember_order(self, chat_id: str, order: StoredOrder) -> None:
        """Keep a chat's stored order (hold the lock), at most `ORDERS_KEPT` of them."""
        self._orders.pop(chat_id, None)
        self._orders[chat_id] = order
        while len(self._orders) > ORDERS_KEPT:
            del self._orders[next(iter(self._orders))]

    def forget(self, chat_id: str) -> None:
        """Let go of what this connection remembers of a chat (its copy in memory is gone:
        the order it remembers would keep its messages alive)."""
        with self._lock:
            self._orders.pop(chat_id, None)

    def _check_orders(self) -> None:
        """Clear `_orders` when another connection committed since it was made (hold the
        lock)."""
        version = self._db.execute("PRAGMA data_version").fetchone()[0]
        if version != self._orders_version:
            self._orders.clear()
            self._orders_version = version

    def revisions(self) -> dict[str, int]:
        """Every stored chat's revision (what `pull` compares with a copy's `revs.synced`)."""
        with self._lock:
            return dict(self._db.execute("SELECT id, rev FROM chats").fetchall())

    def data_version(self) -> int:
        """Changes whenever another connection (another process) commits to the database."""
        with self._lock:
            version: int = self._db.execute("PRAGMA data_version").fetchone()[0]
        return version

    def run(self, work: Callable[[sqlite3.Connection], Any]) -> Any:
        """Run `work(db)` in one transaction, with the store's lock held (one writer)."""
        with self._lock, self._transaction():
            return work(self._db)

    def _save_structure(
        self, chat: Chat, next_pos: int, new_ids: list[tuple[Message, int]], rev: int
    ) -> int:
        """Insert new messages, delete removed ones, and keep the stored order."""
        self.structure_version += 1
        self._check_orders()
        known = self._orders.pop(chat.id, None)
        if known is not None and appended_to(known, chat.messages):
            # Messages appended at the end, and the stored order known: no need to read it.
            fresh = chat.messages[stored_count(known) :]
            self._insert(chat, fresh, range(next_pos, next_pos + len(fresh)), new_ids, rev)
            self._db.execute(
                "UPDATE chats SET next_pos = ?, updated_at = ? WHERE id = ?",
                (next_pos + len(fresh), time.time(), chat.id),
            )
            return len(fresh)
        stored = self._db.execute(
            "SELECT id, pos FROM messages WHERE chat_id = ? ORDER BY pos", (chat.id,)
        ).fetchall()
        current_ids = [m._id for m in chat.messages if m._id is not None]
        present = set(current_ids)
        removed = [(mid,) for mid, _ in stored if mid not in present]
        self._db.executemany("DELETE FROM messages WHERE id = ?", removed)
        kept_order = [mid for mid, _ in stored if mid in present]
        new_count = len(chat.messages) - len(current_ids)
        if kept_order == current_ids and all(
            m._id is None for m in chat.messages[len(current_ids) :]
        ):
            # The common case: messages appended at the end (or none).
            new_positions = [next_pos + k for k in range(new_count)]
            next_pos += new_count
        else:
            new_positions = self._renumber(chat, stored, base=next_pos)
            next_pos += len(chat.messages)
            new_count = len(chat.messages)  # every row moved
        self._insert(chat, [m for m in chat.messages if m._id is None], new_positions, new_ids, rev)
        self._db.execute(
            "UPDATE chats SET next_pos = ?, updated_at = ? WHERE id = ?",
            (next_pos, time.time(), chat.id),
        )
        return len(removed) + new_count

    def _insert(
        self,
        chat: Chat,
        fresh: Sequence[Message],
        positions: Iterable[int],
        new_ids: list[tuple[Message, int]],
        rev: int,
    ) -> None:
        """Insert messages not stored yet at `positions` (their ids go in `new_ids`)."""
        for message, pos in zip(fresh, positions, strict=True):
            cursor = self._db.execute(
                "INSERT INTO messages (chat_id, pos, raw, eol, data, line, rev) "
                "VALUES (?,?,?,?,?,0,?)",
                (chat.id, pos, None, None, changed_message_json(message), rev),
            )
            new_ids.append((message, int(cursor.lastrowid or 0)))

    def _renumber(self, chat: Chat, stored: list[tuple[int, int]], *, base: int) -> list[int]:
        """Number every message `base + index` in the chat's current order (a rare path: a
        message inserted before others, or a reordering). Positions above every old one never
        collide. Kept lines move with the message they follow. Returns the positions of the
        messages not stored yet."""
        new_pos = {m._id: base + i for i, m in enumerate(chat.messages) if m._id is not None}
        for seq, after_pos in self._db.execute(
            "SELECT seq, after_pos FROM kept_lines WHERE chat_id = ?", (chat.id,)
        ).fetchall():
            anchor = -1
            for mid, pos in stored:  # ordered by old position
                if pos > after_pos:
                    break
                anchor = new_pos.get(mid, anchor)
            self._db.execute(
                "UPDATE kept_lines SET after_pos = ? WHERE chat_id = ? AND seq = ?",
                (anchor, chat.id, seq),
            )
        self._db.executemany(
            "UPDATE messages SET pos = ? WHERE id = ?", [(p, mid) for mid, p in new_pos.items()]
        )
        return [base + i for i, m in enumerate(chat.messages) if m._id is None]

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

    def _exists(self, chat_id: str) -> bool:
        return (
            self._db.execute("SELECT 1 FROM chats WHERE id = ?", (chat_id,)).fetchone() is not None
        )

    def _unknown(self, chat_id: str) -> StoreError:
        return UnknownChatError(
            f"no stored chat with id {chat_id!r}: `autorecap chats` lists the stored chats, "
            "`autorecap import FILE` stores one"
        )

    def _transaction(self) -> Transaction:
        return Transaction(self._db)
