"""Tier 1, message recaps: made by a backend, stored with seed 004's keys on the message's active
swipe.

Every message that passes the exclusion criteria gets a recap (`memory`, with `reasoning` and
`prefill` when the backend gives them). A failure stores `error` and the chat goes on. A recap
the user edited (`edited`) is never overwritten unless forced.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from autorecap.core.data import get_data, get_memory, update_data
from autorecap.core.memory import check_message_exclusion
from autorecap.core.model import Chat, Message
from autorecap.core.names import character_name_of, said, user_name_of
from autorecap.core.tokens import TokenCounter
from autorecap.errors import AutorecapError
from autorecap.recap.backend import ContextMessage, RecapBackend, RecapRequest, RecapResult
from autorecap.settings import Settings

log = logging.getLogger("autorecap")


@dataclass
class RecapStats:
    """What a batch of message recaps did."""

    made: int = 0
    skipped: int = 0
    failed: int = 0
    errors: list[str] = field(default_factory=list)


def build_request(
    chat: Chat, index: int, settings: Settings, counter: TokenCounter
) -> RecapRequest:
    """The request for message `index`: its text, author, and the messages just before it."""
    message = chat.messages[index]
    before = [
        m
        for m in chat.messages[max(0, index - settings.message_recap_context_messages) : index]
        if not m.is_hidden
    ]
    earlier = [get_memory(m) for m in chat.messages[max(0, index - 2) : index]]
    name, text = said(message)
    return RecapRequest(
        text=text,
        name=name,
        user=user_name_of(chat),
        char=character_name_of(chat),
        context=tuple(ContextMessage(*said(m)) for m in before),
        earlier_recaps=tuple(r for r in earlier if r),
        max_tokens=settings.message_recap_max_tokens,
    )


def needs_recap(
    message: Message,
    settings: Settings,
    counter: TokenCounter,
    group_id: str | None = None,
    *,
    force: bool = False,
) -> bool:
    """True when the message should get a (new) recap."""
    if not check_message_exclusion(message, settings, counter, group_id):
        return False
    unused = settings.skip_unused_message_recaps and not settings.message_recap_injection_enabled
    if unused and not force:
        return False  # nothing would inject it: the scene is recapped from its messages
    if not message.text.strip():
        return False
    if get_data(message, "edited") and not force:
        return False
    return force or not get_memory(message) or bool(get_data(message, "error"))


def recap_message(
    chat: Chat,
    index: int,
    backend: RecapBackend,
    settings: Settings,
    counter: TokenCounter,
    *,
    force: bool = False,
    group_id: str | None = None,
) -> bool | None:
    """Recap message `index`: True when a recap was stored, False when it failed (its `error`
    was stored), None when the message needs none."""
    message = chat.messages[index]
    if not needs_recap(message, settings, counter, group_id, force=force):
        return None
    request = build_request(chat, index, settings, counter)
    try:
        result = backend.message_recap(request)
    except AutorecapError as error:
        store_result(message, error)
        log.warning("recap of message %d failed: %s", index, error)
        return False
    store_result(message, result)
    return True


def recap_all(
    chat: Chat,
    backend: RecapBackend,
    settings: Settings,
    counter: TokenCounter,
    *,
    force: bool = False,
    group_id: str | None = None,
    progress: Callable[[int, int], None] | None = None,
    concurrency: int = 1,
) -> RecapStats:
    """Recap every message that needs one, oldest first; `progress(done, total)` counts those
    messages (`(0, 0)` when none needs one). A backend that recaps several messages per call
    gets them in runs of consecutive messages (`batches`); with `concurrency > 1` that many
    calls run at once. Results are stored in message order on this thread, so a chat is only
    ever written by one thread."""
    stats = RecapStats()
    todo = [
        i
        for i, m in enumerate(chat.messages)
        if needs_recap(m, settings, counter, group_id, force=force)
    ]
    stats.skipped = len(chat.messages) - len(todo)
    if not todo:
        if progress is not None:
            progress(0, 0)  # nothing to do: done
        return stats
    groups = batches(chat, todo, backend.batch_tokens, counter)
    done = 0

    def store(group: list[int], results: list[RecapResult | AutorecapError]) -> None:
        nonlocal done
        for index, result in zip(group, results, strict=True):
            store_result(chat.messages[index], result)
            _count(stats, chat, index, not isinstance(result, AutorecapError))
            if isinstance(result, AutorecapError):
                log.warning("recap of message %d failed: %s", index, result)
        done += len(group)
        if progress is not None:
            progress(done, len(todo))

    if concurrency <= 1 or len(groups) <= 1:
        for group in groups:
            requests = [build_request(chat, i, settings, counter) for i in group]
            store(group, backend.message_recaps(requests))
        return stats
    with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="autorecap-llm") as pool:
        futures = [
            pool.submit(
                backend.message_recaps, [build_request(chat, i, settings, counter) for i in group]
            )
            for group in groups
        ]
        for group, future in zip(groups, futures, strict=True):
            store(group, future.result())
    return stats


def batches(
    chat: Chat, indexes: list[int], batch_tokens: int, counter: TokenCounter, most: int = 60
) -> list[list[int]]:
    """`indexes` (in chat order) cut into runs for one call each, holding at most
    `batch_tokens` tokens of messages together (and at most `most` messages); one each when
    the backend takes one message per call (`batch_tokens` 0)."""
    if batch_tokens <= 0:
        return [[i] for i in indexes]
    groups: list[list[int]] = []
    size = 0
    for index in indexes:
        tokens = counter.count(chat.messages[index].text)
        current = groups[-1] if groups else None
        if current is None or size + tokens > batch_tokens or len(current) >= most:
            groups.append([index])
            size = tokens
        else:
            current.append(index)
            size += tokens
    return groups


def store_result(message: Message, result: RecapResult | AutorecapError) -> None:
    """Store a recap (seed 004's keys, and `scene_start` when the LLM said the message opens
    a scene), or the error that stopped it."""
    if isinstance(result, AutorecapError):
        update_data(message, {"error": str(result)})
        return
    update_data(
        message,
        {
            "memory": result.memory,
            "error": None,
            "reasoning": result.reasoning,
            "prefill": result.prefill,
            "edited": False,
            # An LLM that recapped the message in a batch said whether it opens a new scene:
            # scene detection with `scene_break_detection: "llm"` reads it as a cue.
            "scene_start": True if result.extras.get("scene_start") else None,
        },
    )


def _count(stats: RecapStats, chat: Chat, index: int, outcome: bool | None) -> None:
    if outcome is None:
        stats.skipped += 1
    elif outcome:
        stats.made += 1
    else:
        stats.failed += 1
        stats.errors.append(f"message {index}: {get_data(chat.messages[index], 'error')}")
