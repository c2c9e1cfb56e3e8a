"""Message recaps: made by a backend, stored with seed 004's keys on the message's active swipe.

Every message that passes the exclusion criteria gets a recap (`memory`, with `reasoning` and
`prefill` when the backend gives them). A failure stores `error` and the chat goes on. A recap
the user edited (`edited`) is never overwritten unless forced. With a `Session`, a
`MessageRecapper` queues a recap when a message is sent or received or swiped to a new reply, and
regenerates it when the message is edited.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from autorecap.core.data import get_data, get_memory, update_data
from autorecap.core.events import Event
from autorecap.core.memory import check_message_exclusion
from autorecap.core.model import Chat, Message
from autorecap.core.names import character_name_of, user_name_of
from autorecap.core.tokens import TokenCounter
from autorecap.errors import AutorecapError
from autorecap.llm.base import ContextMessage, RecapBackend, RecapRequest, RecapResult
from autorecap.session import Session
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
    return RecapRequest(
        text=message.text,
        name=message.name,
        user=user_name_of(chat),
        char=character_name_of(chat),
        context=tuple(ContextMessage(m.name, m.text) for m in before),
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
    messages (`(0, 0)` when none needs one). With `concurrency > 1` the backend
    is called that many times at once (LLM calls are independent); results are stored in
    message order on this thread, so a chat is only ever written by one thread."""
    stats = RecapStats()
    total = len(chat.messages)
    todo = [
        i
        for i, m in enumerate(chat.messages)
        if needs_recap(m, settings, counter, group_id, force=force)
    ]
    stats.skipped = total - len(todo)
    if not todo:
        if progress is not None:
            progress(0, 0)  # nothing to do: done
        return stats
    if concurrency <= 1 or len(todo) <= 1:
        for done, index in enumerate(todo, start=1):
            outcome = recap_message(
                chat, index, backend, settings, counter, force=force, group_id=group_id
            )
            _count(stats, chat, index, outcome)
            if progress is not None:
                progress(done, len(todo))
        return stats
    requests = {i: build_request(chat, i, settings, counter) for i in todo}
    with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="autorecap-llm") as pool:
        futures = {index: pool.submit(backend.message_recap, requests[index]) for index in todo}
        for done, index in enumerate(todo, start=1):
            try:
                result: RecapResult | AutorecapError = futures[index].result()
            except AutorecapError as error:
                result = error
            store_result(chat.messages[index], result)
            _count(stats, chat, index, not isinstance(result, AutorecapError))
            if progress is not None:
                progress(done, len(todo))
    return stats


def store_result(message: Message, result: RecapResult | AutorecapError) -> None:
    """Store a recap (seed 004's keys), or the error that stopped it."""
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


class MessageRecapper:
    """Keeps a session's message recaps up to date as its events fire.

    Recaps are queued (by message, not index, so deletions do not confuse them) and made by
    `run_pending()`, or at once with `immediate=True`, or on a background thread with
    `start()`.
    """

    def __init__(
        self,
        session: Session,
        backend: RecapBackend,
        *,
        immediate: bool = False,
        scenes: bool = True,
    ) -> None:
        self.session = session
        self.backend = backend
        self.immediate = immediate
        self.scenes = scenes
        """Also find scene breaks as messages arrive (`auto_scene_break_on_new_message`) and
        when the chat opens (`auto_scene_break_on_load`), then recap new scenes and fold them
        into the running recap."""
        self.scene_failures: list[str] = []
        self._queue: dict[int, tuple[Message, bool]] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._stopping = False
        for event in (Event.MESSAGE_SENT, Event.MESSAGE_RECEIVED, Event.MESSAGE_SWIPED):
            # A new swipe starts with no recap (the handler cleared it), so it gets one; an
            # existing swipe keeps the recap it has.
            session.on(event, self._on_new)
        session.on(Event.MESSAGE_EDITED, self._on_changed)
        if scenes and session.settings.auto_scene_break_on_load:
            self.keep_scenes()

    def keep_scenes(self) -> int:
        """Find new scene breaks, recap the closed scenes, fold them into the running recap;
        returns the breaks found. Failures are kept in `scene_failures`; the chat goes on."""
        from autorecap.pipeline import detect_scene_breaks, recap_scenes, update_running_recap

        session = self.session
        with session.lock:
            try:
                found = detect_scene_breaks(session.chat, self.backend, session.settings)
            except AutorecapError as error:
                self.scene_failures.append(f"scene detection: {error}")
                return 0
            if found:
                recap_scenes(
                    session.chat,
                    self.backend,
                    session.settings,
                    session.counter,
                    failures=self.scene_failures,
                )
                update_running_recap(
                    session.chat,
                    self.backend,
                    session.settings,
                    session.counter,
                    now_ms=session.clock.wall_ms(),
                    failures=self.scene_failures,
                )
                session.refresh()
            return len(found)

    @property
    def pending(self) -> int:
        """Messages waiting for a recap."""
        with self._lock:
            return len(self._queue)

    def _on_new(self, event: Event, index: int | None) -> None:
        if index is not None:
            self._enqueue(self.session.messages[index], force=False)

    def _on_changed(self, event: Event, index: int | None) -> None:
        if index is not None:  # an edit: the old recap no longer fits the text
            self._enqueue(self.session.messages[index], force=True)

    def _enqueue(self, message: Message, *, force: bool) -> None:
        with self._lock:
            previous = self._queue.get(id(message))
            self._queue[id(message)] = (message, force or bool(previous and previous[1]))
        if self.immediate:
            self.run_pending()
        self._wake.set()

    def run_pending(self) -> int:
        """Make the queued recaps now; returns how many were stored."""
        made = 0
        while True:
            with self._lock:
                if not self._queue:
                    break
                key = next(iter(self._queue))
                message, force = self._queue.pop(key)
            session = self.session
            with session.lock:
                try:
                    index = next(i for i, m in enumerate(session.messages) if m is message)
                except StopIteration:
                    continue  # deleted meanwhile
                edited = bool(get_data(message, "edited"))
                outcome = recap_message(
                    session.chat,
                    index,
                    self.backend,
                    session.settings,
                    session.counter,
                    force=force and not edited,
                    group_id=session.group_id,
                )
            if outcome:
                made += 1
        if made:
            if self.scenes and self.session.settings.auto_scene_break_on_new_message:
                self.keep_scenes()
            self.session.refresh_debounced()
        return made

    def start(self) -> None:
        """Make recaps on a background thread as they are queued."""
        if self._thread is not None:
            return
        self._stopping = False
        self._thread = threading.Thread(target=self._loop, name="autorecap-recaps", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the background thread after the recap in progress."""
        self._stopping = True
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None

    def _loop(self) -> None:
        while not self._stopping:
            self._wake.wait(timeout=1.0)
            self._wake.clear()
            if not self._stopping:
                self.run_pending()
