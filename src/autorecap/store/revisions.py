"""Bringing what another process saved into a chat held in memory (`ChatStore.pull`).

Every save stamps the rows it writes with the next store-wide revision. A chat read from the
store remembers the revisions it reflects (`Chat.revs`, `Message._rev`), so that it can read just
what changed since, and a save from an old copy is refused (`StaleChatError`) instead of
writing over another process's work: a recap worker beside the server, for one.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Collection
from typing import Any

from autorecap.core.data import merge_stored_data
from autorecap.core.jsjson import loads_strict
from autorecap.core.model import Chat, FileLayout, Message
from autorecap.store.base import Db, Pulled
from autorecap.store.migrations import StaleChatError
from autorecap.store.rows import changed_message_json


def stored_header_text(
    header_raw: bytes | None, header_data: str | None, layout: FileLayout
) -> str | None:
    """The stored header's JSON: its data, else the line as read (None: no valid header)."""
    if header_data is not None:
        return header_data
    if header_raw is not None and layout.header_valid:
        return header_raw.decode("utf-8")
    return None


def stored_header(header_raw: bytes | None, header_data: str | None, layout: FileLayout) -> Any:
    if header_data is not None:
        return json.loads(header_data)
    if header_raw is not None and layout.header_valid:
        return loads_strict(header_raw.decode("utf-8"))
    return {}


def merge_header(
    base: dict[str, Any], ours: dict[str, Any], theirs: dict[str, Any]
) -> dict[str, Any]:
    """A header changed here and elsewhere since `base`: theirs, with what we changed of
    `chat_metadata` (key by key) and of the header's other fields kept."""
    merged = copy.deepcopy(theirs)
    missing = object()
    for key in set(base) | set(ours):
        if key == "chat_metadata":
            continue
        if ours.get(key, missing) != base.get(key, missing):
            if key in ours:
                merged[key] = copy.deepcopy(ours[key])
            else:
                merged.pop(key, None)
    found = base.get("chat_metadata")
    base_meta: dict[str, Any] = found if isinstance(found, dict) else {}
    our_meta = ours.get("chat_metadata")
    if isinstance(our_meta, dict):
        their_meta = merged.get("chat_metadata")
        if not isinstance(their_meta, dict):
            their_meta = merged["chat_metadata"] = {}
        for key in set(base_meta) | set(our_meta):
            if our_meta.get(key, missing) != base_meta.get(key, missing):
                if key in our_meta:
                    their_meta[key] = copy.deepcopy(our_meta[key])
                else:
                    their_meta.pop(key, None)
    return merged


def apply_rows(
    chat: Chat,
    rows: list[tuple[int, bytes | None, str | None, int]],
    pending: Collection[Message],
    pulled: Pulled,
) -> None:
    """Put stored rows `(id, raw, data, rev)` into the chat's messages of the same ids. A
    message in `pending` (changed here, not saved yet) keeps its text and fields and what of
    its data changed here, and takes the rest of the stored data (`merge_stored_data`), unless
    its text changed here: what was made elsewhere was made for the old text."""
    if not rows:
        return
    by_id = {m._id: m for m in chat.messages if m._id is not None}
    waiting = {id(m) for m in pending}
    for row_id, raw, data, row_rev in rows:
        live = by_id.get(row_id)
        if live is None or live._rev == row_rev:
            continue
        if data is not None:
            values = json.loads(data)
        else:
            assert raw is not None
            values = loads_strict(raw.decode("utf-8"))
        live._rev = row_rev
        if id(live) in waiting:
            stored = Message(values)
            if stored.text != live.text or stored.swipe_id != live.swipe_id:
                continue  # its text changed here: what was made elsewhere is the old text's
            if merge_stored_data(live, stored):
                pulled.messages.append(live)
        else:
            live.clear()
            live.update(values)
            live._base = None
            pulled.messages.append(live)


def apply_header(
    chat: Chat, stored: dict[str, Any], text: str | None, rev: int, pending: bool
) -> None:
    """Put the stored header (`text`: its stored JSON) into the chat: as it is, or
    (`pending`: the header changed here too) merged with what changed here since the last
    read."""
    revs = chat.revs
    if pending:
        base = json.loads(revs.header_base) if revs.header_base else {}
        merged = merge_header(base, chat.header, stored)
    else:
        merged = stored
    chat.header.clear()
    chat.header.update(merged)
    revs.header, revs.header_base = rev, text


def write_message(db: Db, chat: Chat, message: Message, rev: int) -> None:
    """Write one message's row, unless another process changed it since this copy read it
    (then the save is refused: `StaleChatError`)."""
    data = changed_message_json(message)
    if message._rev is None:
        db.execute("UPDATE messages SET data = ?, rev = ? WHERE id = ?", (data, rev, message._id))
        return
    cursor = db.execute(
        "UPDATE messages SET data = ?, rev = ? WHERE id = ? AND rev = ?",
        (data, rev, message._id, message._rev),
    )
    if (
        cursor.rowcount == 0
        and db.execute("SELECT 1 FROM messages WHERE id = ?", (message._id,)).fetchone()
    ):
        raise stale(chat, f"message {chat.messages.index(message)}")


def stale(chat: Chat, what: str) -> StaleChatError:
    return StaleChatError(
        f"chat {chat.id!r}: {what} changed in the store since this copy was read (another "
        "process saved it); nothing was written: read the changes and save again"
    )
