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
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from autorecap.core.jsjson import dumps_canonical, loads_strict
from autorecap.core.model import Chat, FileLayout, KeptLine, Message
from autorecap.paths import autorecap_home
from autorecap.stfiles.jsonl import (
    data_matches_raw,
    kept_line_anchor,
    message_line,
    serialize_chat,
)
from autorecap.store.base import ChatInfo, ChatStore
from autorecap.store.migrations import StoreError, UnknownChatError, apply_migrations
from autorecap.store.order import StoredOrder, appended_to, saved, stored_count

DB_FILE = "autorecap.db"


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
            if self._exists(new_id):
                if not replace:
                    raise StoreError(
                        f"a chat with id {new_id!r} is already stored: pass --replace to "
                        "overwrite it, or --as ID to store this one under another id"
                    )
                self._db.execute("DELETE FROM chats WHERE id = ?", (new_id,))
            header_raw = layout.header_raw
            header_data = self._changed_json(chat.header, header_raw, layout)
            self._db.execute(
                """INSERT INTO chats (id, header_raw, header_data, layout, source, next_pos,
                                      created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)""",
                (
                    new_id,
                    header_raw,
                    header_data,
                    _layout_json(layout),
                    source,
                    len(chat.messages),
                    now,
                    now,
                ),
            )
            rows = []
            for pos, message in enumerate(chat.messages):
                raw = message._raw
                data = _changed_message_json(message)
                if raw is None:
                    # Made in memory: store the line it will be written as, so data stays NULL.
                    raw, data = message_line(message), None
                rows.append((new_id, pos, raw, message._eol, data, message._line))
            self._db.executemany(
                "INSERT INTO messages (chat_id, pos, raw, eol, data, line) VALUES (?,?,?,?,?,?)",
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
                "SELECT header_raw, header_data, layout FROM chats WHERE id = ?", (chat_id,)
            ).fetchone()
            if head is None:
                raise self._unknown(chat_id)
            rows = self._db.execute(
                "SELECT id, pos, raw, eol, data, line FROM messages WHERE chat_id = ? ORDER BY pos",
                (chat_id,),
            ).fetchall()
            kept_rows = self._db.execute(
                "SELECT line, raw, eol, reason, after_pos FROM kept_lines WHERE chat_id = ? "
                "ORDER BY seq",
                (chat_id,),
            ).fetchall()
            self._check_orders()
            self._orders[chat_id] = [row[0] for row in rows]
        header_raw, header_data, layout_text = head
        layout = _layout_from_json(layout_text)
        layout.header_raw = header_raw
        chat = Chat(chat_id=chat_id, header={})
        chat.layout = layout
        if header_data is not None:
            chat.header = json.loads(header_data)
        elif header_raw is not None and layout.header_valid:
            chat.header = loads_strict(header_raw.decode("utf-8"))
        positions: list[int] = []
        for row_id, pos, raw, eol, data, line in rows:
            values = json.loads(data) if data is not None else loads_strict(raw.decode("utf-8"))
            message = Message(values)
            message._raw = raw
            message._eol = eol
            message._line = line
            message._id = row_id
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
                after_index=_index_at_or_before(positions, after_pos),
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
        new_ids: list[tuple[Message, int]] = []  # this save's own: saves of other chats run too
        with self._lock, self._transaction():
            row = self._db.execute(
                "SELECT header_raw, layout, next_pos FROM chats WHERE id = ?", (chat.id,)
            ).fetchone()
            if row is None:
                raise self._unknown(chat.id)
            header_raw, layout_text, next_pos = row
            if header or full:
                self._db.execute(
                    "UPDATE chats SET header_data = ?, updated_at = ? WHERE id = ?",
                    (
                        self._changed_json(chat.header, header_raw, _layout_from_json(layout_text)),
                        time.time(),
                        chat.id,
                    ),
                )
                written += 1
            if structure or full:
                written += self._save_structure(chat, next_pos, new_ids)
            seen: set[int] = set()
            for message in chat.messages if full else changed:
                if message._id is None or message._id in seen or message._chat is not chat:
                    continue
                seen.add(message._id)
                self._db.execute(
                    "UPDATE messages SET data = ? WHERE id = ?",
                    (_changed_message_json(message), message._id),
                )
                written += 1
            if also is not None:
                also(self._db)
        # Ids go onto the messages only once the transaction committed: after a rollback the
        # messages are still new, and the next save inserts them.
        for message, row_id in new_ids:
            message._id = row_id
            message._chat = chat
        if structure or full:
            with self._lock:
                self._check_orders()
                self._orders[chat.id] = saved(chat.messages)
        return written

    def _check_orders(self) -> None:
        """Clear `_orders` when another connection committed since it was made (hold the
        lock)."""
        version = self._db.execute("PRAGMA data_version").fetchone()[0]
        if version != self._orders_version:
            self._orders.clear()
            self._orders_version = version

    def data_version(self) -> int:
        """Changes whenever another connection (another process) commits to the database."""
        with self._lock:
            version: int = self._db.execute("PRAGMA data_version").fetchone()[0]
        return version

    def run(self, work: Callable[[sqlite3.Connection], Any]) -> Any:
        """Run `work(db)` in one transaction, with the store's lock held (one writer)."""
        with self._lock, self._transaction():
            return work(self._db)

    def _save_structure(self, chat: Chat, next_pos: int, new_ids: list[tuple[Message, int]]) -> int:
        """Insert new messages, delete removed ones, and keep the stored order."""
        self.structure_version += 1
        self._check_orders()
        known = self._orders.pop(chat.id, None)
        if known is not None and appended_to(known, chat.messages):
            # Messages appended at the end, and the stored order known: no need to read it.
            fresh = chat.messages[stored_count(known) :]
            self._insert(chat, fresh, range(next_pos, next_pos + len(fresh)), new_ids)
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
        self._insert(chat, [m for m in chat.messages if m._id is None], new_positions, new_ids)
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
    ) -> None:
        """Insert messages not stored yet at `positions` (their ids go in `new_ids`)."""
        for message, pos in zip(fresh, positions, strict=True):
            cursor = self._db.execute(
                "INSERT INTO messages (chat_id, pos, raw, eol, data, line) VALUES (?,?,?,?,?,0)",
                (chat.id, pos, None, None, _changed_message_json(message)),
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

    def close(self) -> None:
        with self._lock:
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

    def _transaction(self) -> _Transaction:
        return _Transaction(self._db)

    @staticmethod
    def _changed_json(value: dict[str, Any], raw: bytes | None, layout: FileLayout) -> str | None:
        if raw is not None and layout.header_valid and data_matches_raw(value, raw):
            return None
        if raw is not None and not layout.header_valid and not value:
            return None
        return _storable(value)


class _Transaction:
    """`BEGIN IMMEDIATE ... COMMIT`, rolled back on any error (one logical write, all or none)."""

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
            if kind is not None and issubclass(kind, sqlite3.Error):
                raise StoreError(f"could not save to the store: {rest[0]}") from None


def _changed_message_json(message: Message) -> str | None:
    raw = message._raw
    if raw is not None and data_matches_raw(message, raw):
        return None
    return _storable(message)


def _storable(value: dict[str, Any]) -> str:
    text = dumps_canonical(value)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates cannot be stored as TEXT; escape them
        text = json.dumps(value, ensure_ascii=True, separators=(",", ":"), allow_nan=False)
    return text


def _layout_json(layout: FileLayout) -> str:
    return json.dumps(
        {
            "bom": layout.bom,
            "default_eol": layout.default_eol.decode("ascii"),
            "final_eol": layout.final_eol.decode("ascii"),
            "header_eol": (layout.header_eol or b"").decode("ascii"),
            "header_had_metadata": layout.header_had_metadata,
            "header_valid": layout.header_valid,
            "from_file": layout.from_file,
        }
    )


def _layout_from_json(text: str) -> FileLayout:
    data = json.loads(text)
    return FileLayout(
        bom=data["bom"],
        default_eol=data["default_eol"].encode("ascii"),
        final_eol=data["final_eol"].encode("ascii"),
        header_eol=data["header_eol"].encode("ascii") or None,
        header_had_metadata=data["header_had_metadata"],
        header_valid=data["header_valid"],
        from_file=bool(data.get("from_file", False)),
    )


def _index_at_or_before(positions: list[int], after_pos: int) -> int:
    index = -1
    for i, pos in enumerate(positions):
        if pos <= after_pos:
            index = i
        else:
            break
    return index
