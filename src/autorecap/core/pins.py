"""The long-term tier (seed 003): message recaps the user pinned ("remember this"), injected in a
slot of their own on every turn, whatever else the memory holds.

A pin is the message's `remember` flag in its namespace. What is injected is the message's recap
(its text, while it has none), oldest first, within `long_term_max_tokens`: when the pins do not
all fit, the newest are kept (the oldest are likeliest to be in the running recap already).

May import: core.
"""

from __future__ import annotations

from collections.abc import Sequence

from autorecap.core.data import data_column, get_data, get_memory, set_data
from autorecap.core.model import Message
from autorecap.core.tokens import TokenCounter

LONG_KEY = "auto_recap_memory_long"
"""The long-term tier's slot."""
PIN = "remember"
"""The namespace key of a pin."""


def is_pinned(message: Message) -> bool:
    """True when the user pinned the message."""
    return bool(get_data(message, PIN))


def set_pinned(message: Message, pinned: bool) -> None:
    """Pin the message (or unpin it)."""
    set_data(message, PIN, pinned)


def pinned_indexes(messages: Sequence[Message]) -> list[int]:
    """The indexes of the pinned messages, in order."""
    return [i for i, value in enumerate(data_column(messages, PIN)) if value]


def long_term_text(
    messages: Sequence[Message], template: str, max_tokens: int, counter: TokenCounter
) -> tuple[str, list[int]]:
    """The pinned recaps that fit `max_tokens` (newest kept first), oldest first, one per
    line, through the template (`{{memories}}`); and the indexes injected."""
    frame = counter.count(template.replace("{{memories}}", "")) if template.strip() else 0
    spent = frame
    kept: list[int] = []
    for index in reversed(pinned_indexes(messages)):
        line = _line(messages[index])
        if not line:
            continue
        cost = counter.count(line) + 1
        if spent + cost > max_tokens:
            continue
        kept.append(index)
        spent += cost
    kept.reverse()
    if not kept:
        return "", []
    memories = "\n".join(_line(messages[i]) for i in kept)
    text = template.replace("{{memories}}", memories) if template.strip() else memories
    return text, kept


def _line(message: Message) -> str:
    recap = get_memory(message)
    if recap:
        return " ".join(recap.split())
    text = message.get("mes")
    return " ".join(text.split()) if isinstance(text, str) else ""
