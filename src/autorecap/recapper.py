"""`MessageRecapper`: a session's recaps made as its events fire, without the job queue (for a
library user who drives a `Session` directly). Imports the session and the recap work."""

from __future__ import annotations

import threading

from autorecap.core.data import get_data
from autorecap.core.events import Event
from autorecap.core.model import Message
from autorecap.errors import AutorecapError
from autorecap.recap.backend import RecapBackend
from autorecap.recap.detection import detect_scene_breaks
from autorecap.recap.messages import recap_message
from autorecap.recap.running_recap import update_running_recap
from autorecap.recap.scenes import recap_scenes
from autorecap.session import Session


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
