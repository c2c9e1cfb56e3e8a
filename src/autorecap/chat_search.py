"""The recall tier for one chat: its search, and what a turn recalls.

A stored chat is searched through the store's full-text index, which the store keeps in step
with every save. A chat outside the store (a chat file, a chat in memory) gets an index of its
own in memory: built once, then kept in step with the chat's changes (a changed message is
indexed again, messages added at the end are added; only a list changed in the middle is read
again whole).

May import: core, store.
"""

from __future__ import annotations

from autorecap.core import running
from autorecap.core.data import get_data, get_memory
from autorecap.core.model import Chat, Message
from autorecap.core.recall import RecallPiece, query_text, recall_pieces, recall_text
from autorecap.core.tokens import TokenCounter
from autorecap.settings import Settings
from autorecap.store.base import ChatStore
from autorecap.store.search import MemoryIndex

SEARCHED = 20
"""How many matches a turn looks at (most are left out as visible or already said)."""


class ChatSearch:
    """Searches one chat. See the module docstring."""

    def __init__(self, chat: Chat, store: ChatStore | None = None) -> None:
        self.chat = chat
        self.store = store
        self._index: MemoryIndex | None = None
        self._held: list[Message] = []
        """The messages the memory index holds, in its order."""
        self._touched: dict[int, Message] = {}
        self._ids: dict[int, int] = {}
        """Stored message id -> index, as last mapped (`_index_of`)."""
        self._ids_version: int | None = -1
        self._ids_count = -1
        self._reshaped: int | None = None
        """The message list's `reshaped` at the last search: its changes other than appends."""
        self._where: dict[int, int] = {}
        """id() of each message the memory index holds -> its place."""
        if store is None:
            chat.listeners.append(self._on_change)

    def hits(self, query: str, limit: int = SEARCHED) -> list[tuple[int, float]]:
        """(message index, score) of the messages that best match `query`, best first."""
        if self.store is not None:
            found = self.store.search(self.chat.id, query, limit)
            return [(i, score) for mid, score in found if (i := self._index_of(mid)) is not None]
        index = self._current_index()
        return index.search(query, limit)

    def recall(
        self,
        settings: Settings,
        counter: TokenCounter,
        query: str | None = None,
        *,
        breaks: list[int] | None = None,
    ) -> tuple[str, list[RecallPiece]]:
        """What this turn recalls: the injection text and its pieces. `query`: what to look
        for (default: the newest user message and the reply before it); `breaks`: the scene
        breaks' indexes when the caller keeps them (`MemoryState.breaks`)."""
        asked = query if query is not None else query_text(self.chat.messages)
        if not asked.strip():
            return "", []
        known = running.injection_text(self.chat, "")
        hits = self.hits(asked)
        pieces = recall_pieces(self.chat, hits, asked, counter, known=known, breaks=breaks)
        return recall_text(
            pieces, settings.recall_template, settings.recall_max_tokens, counter, asked
        )

    def _index_of(self, message_id: int) -> int | None:
        """The index of the stored message with this id: from a map of the ids, made again
        only when a message is not where the map says (messages came or went since)."""
        messages = self.chat.messages
        index = self._ids.get(message_id)
        if index is not None and index < len(messages) and _id(messages[index]) == message_id:
            return index
        version = getattr(messages, "version", None)
        if self._ids_version == version and self._ids_count == len(messages):
            return None  # not in this chat as it is (not saved yet, or gone)
        self._ids = {mid: i for i, m in enumerate(messages) if (mid := _id(m)) is not None}
        self._ids_version, self._ids_count = version, len(messages)
        return self._ids.get(message_id)

    def _current_index(self) -> MemoryIndex:
        messages = self.chat.messages
        if self._index is None:
            self._index = MemoryIndex()
            self._reload()
        held = len(self._held)
        # A list that only grew keeps its `reshaped` count: no need to compare it item by item.
        reshaped = getattr(messages, "reshaped", None)
        if len(messages) < held or (
            (reshaped is None or reshaped != self._reshaped)
            and any(a is not b for a, b in zip(messages, self._held, strict=False))
        ):
            self._reload()  # changed other than at its end
        elif len(messages) > held:
            added = messages[held:]
            self._index.append([_row(m) for m in added])
            self._held.extend(added)
            self._where.update((id(m), held + i) for i, m in enumerate(added))
        self._reshaped = reshaped
        if self._touched:
            for key, message in self._touched.items():
                if key in self._where:
                    self._index.update(self._where[key], _row(message))
            self._touched.clear()
        return self._index

    def _reload(self) -> None:
        assert self._index is not None
        self._held = list(self.chat.messages)
        self._where = {id(m): i for i, m in enumerate(self._held)}
        self._index.load([_row(m) for m in self._held])
        self._touched.clear()

    def _on_change(self, message: Message | None) -> None:
        if message is not None:
            self._touched[id(message)] = message


def _row(message: Message) -> tuple[str, str, str]:
    text = message.get("mes")  # read as a plain dict may be, which the list can hold
    scene = get_data(message, "scene_recap_memory")
    return (
        text if isinstance(text, str) else "",
        get_memory(message) or "",
        scene if isinstance(scene, str) else "",
    )


def _id(message: Message) -> int | None:
    return message.id if isinstance(message, Message) else None
