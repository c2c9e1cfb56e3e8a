"""The combined recap (seed 003): every message recap merged into one narrative, versioned like
the running recap and stored beside it, in `chat_metadata["auto_recap_combined_recaps"]`
(`{chat_id, current_version, versions: [{version, timestamp, content, message_count,
recaps_hash}]}`), injected in a slot of its own when `combined_recap_enabled` is on.

May import: core.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from autorecap.core import running
from autorecap.core.data import get_data, get_memory
from autorecap.core.model import Chat, Message

STORAGE_KEY = "auto_recap_combined_recaps"
COMBINED_KEY = "auto_recap_memory_combined"
"""The combined recap's slot."""


def message_recaps(messages: Sequence[Message]) -> list[tuple[int, str]]:
    """(index, recap) of every message with a recap that is not excluded, in order: what the
    combined recap merges."""
    return [
        (index, recap)
        for index, message in enumerate(messages)
        if (recap := get_memory(message)) and not get_data(message, "exclude")
    ]


def recaps_hash(recaps: Sequence[tuple[int, str]]) -> str:
    """A fingerprint of the recaps merged (a version made from the same ones is not made
    again)."""
    digest = hashlib.sha256()
    for index, recap in recaps:
        digest.update(f"{index}\x00{recap}\x01".encode())
    return digest.hexdigest()[:16]


def versions(chat: Chat) -> list[dict[str, Any]]:
    """Every version, oldest first."""
    return running.versions(chat, key=STORAGE_KEY)


def current(chat: Chat) -> dict[str, Any] | None:
    """The version that is injected."""
    return running.current(chat, key=STORAGE_KEY)


def add_version(
    chat: Chat, content: str, *, message_count: int, fingerprint: str, now_ms: int
) -> dict[str, Any]:
    """Add a version (it becomes the current one)."""
    return running.add_versioned(
        chat,
        content,
        now_ms=now_ms,
        key=STORAGE_KEY,
        message_count=message_count,
        recaps_hash=fingerprint,
    )


def select_version(chat: Chat, number: int) -> dict[str, Any]:
    """Make version `number` the injected one."""
    return running.select_version(chat, number, key=STORAGE_KEY)


def injection_text(chat: Chat, template: str) -> str:
    """The current combined recap through the template (`{{combined_recap}}`); `""` when there
    is none."""
    return running.injection_text(chat, template, key=STORAGE_KEY, placeholder="{{combined_recap}}")
