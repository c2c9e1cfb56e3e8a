"""What a store remembers of each chat's stored message order, so that a save which only
appends messages writes just those (no read of the order back, no walk of every message).

After a load it is the list of the stored rows' ids; after a save, the chat's message list
itself with its `reshaped` count and length then (`Saved`): no copy, so nothing per save for
the garbage collector to walk."""

from __future__ import annotations

from dataclasses import dataclass

from autorecap.core.model import MessageList


@dataclass(frozen=True, slots=True)
class Saved:
    """A chat's message list as it was saved."""

    messages: MessageList
    reshaped: int
    count: int


StoredOrder = list[int | None] | Saved
"""The stored rows' ids in order (after a load), or the list as saved (after a save)."""


def saved(messages: MessageList) -> Saved:
    return Saved(messages, messages.reshaped, len(messages))


def stored_count(known: StoredOrder) -> int:
    """How many messages the store holds in that order."""
    return known.count if isinstance(known, Saved) else len(known)


def appended_to(known: StoredOrder, messages: MessageList) -> bool:
    """True when `messages` are the stored order followed by messages not stored yet: by
    identity and the reshape count after a save (O(1)), by id after a load."""
    count = stored_count(known)
    if len(messages) < count:
        return False
    if isinstance(known, Saved):
        if known.messages is not messages or messages.reshaped != known.reshaped:
            return False
    elif [m.id for m in messages[:count]] != known:
        return False
    return all(m.id is None for m in messages[count:])
