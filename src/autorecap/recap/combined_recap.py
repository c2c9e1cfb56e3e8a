"""The combined recap (seed 003, off by default): every message recap merged into one narrative
(`RecapBackend.merge_recaps`), a new version when the recaps changed: at once when they were
edited or removed, every `EVERY` new recaps as the chat grows (merging them all costs an LLM a
whole read of the recaps).

May import: core, recap, settings.
"""

from __future__ import annotations

from autorecap.core import combined
from autorecap.core.model import Chat
from autorecap.core.tokens import TokenCounter
from autorecap.errors import AutorecapError
from autorecap.recap.backend import Failure, MergeRequest, RecapBackend
from autorecap.recap.running_recap import enforce_cap
from autorecap.settings import Settings

EVERY = 20
"""New message recaps that make a new version while the chat only grows."""


def update_combined_recap(
    chat: Chat,
    backend: RecapBackend,
    settings: Settings,
    counter: TokenCounter,
    *,
    now_ms: int,
    failures: list[str] | None = None,
    force: bool = False,
) -> int:
    """Make a new version when it is due (see the module docstring) or `force`d; returns the
    versions added (0 or 1)."""
    recaps = combined.message_recaps(chat.messages)
    if not recaps:
        return 0
    fingerprint = combined.recaps_hash(recaps)
    last = combined.current(chat)
    if last is not None and not force:
        if last.get("recaps_hash") == fingerprint:
            return 0
        grown = len(recaps) - int(last.get("message_count", 0) or 0)
        if 0 < grown < EVERY:
            return 0
    request = MergeRequest(tuple(r for _, r in recaps), settings.combined_recap_max_tokens)
    try:
        result = backend.merge_recaps(request)
    except AutorecapError as error:
        if failures is not None:
            failures.append(Failure(f"combined recap: {error}", error))
        return 0
    text = enforce_cap(result.memory, settings.combined_recap_max_tokens, counter)
    if not text.strip():
        return 0
    combined.add_version(
        chat, text, message_count=len(recaps), fingerprint=fingerprint, now_ms=now_ms
    )
    return 1
