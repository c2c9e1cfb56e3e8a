"""A `Session`: one open chat with its settings, slots and memory, changed the way a frontend
changes it. Every change fires the seeds' event, and the seeds' handlers (seed 002) run.

```python
with autorecap.Session("Captain Mira - 2026-03-02@18h11m40s") as session:
    session.send("We sail at dawn.")
    session.receive("*Mira nods.* Dawn it is.")
    session.slots.value("auto_recap_memory_scene")   # what goes into the next prompt
```
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any

from autorecap.autosave import OpenChat, open_chat, target_chat_id
from autorecap.chat_search import ChatSearch
from autorecap.core import running
from autorecap.core.data import clear_memory, select_swipe, set_data
from autorecap.core.events import Clock, Debouncer, Event, ThreadClock
from autorecap.core.memory import MemoryState, RefreshResult, refresh_memory
from autorecap.core.model import Chat, Message
from autorecap.core.names import character_key_of, character_name_of, user_name_of
from autorecap.core.recall import RECALL_KEY, RecallPiece, set_recall_slot
from autorecap.core.scenes import mark_break
from autorecap.core.slots import ExtensionPrompts
from autorecap.core.tokens import TokenCounter, get_counter
from autorecap.errors import AutorecapError
from autorecap.profiles import Profiles, profiles_of
from autorecap.settings import Settings, chat_enabled
from autorecap.store.base import ChatStore

log = logging.getLogger("autorecap")

Listener = Callable[[Event, int | None], None]


class SessionError(AutorecapError):
    """A session operation on a message that does not exist, or a closed session."""


class Session:
    """One chat, open, with its memory kept up to date. See the module docstring.

    `target` is a chat file, the id of a stored chat, an `OpenChat`, or a `Chat` (then nothing
    is saved: a dry run, as `autorecap inject` does). `indexed_in`: the store a `Chat` was
    loaded from, whose full-text index the recall tier then searches (else the chat gets an
    index of its own in memory).
    """

    def __init__(
        self,
        target: str | Path | OpenChat | Chat,
        *,
        store: ChatStore | None = None,
        profiles: Profiles | None = None,
        clock: Clock | None = None,
        settings: Settings | None = None,
        character_key: str | None = None,
        group_id: str | None = None,
        save_debounce_ms: int | None = None,
        indexed_in: ChatStore | None = None,
        lenient: bool = False,
    ) -> None:
        # The settings of the store the chat is in, when it keeps them (PostgreSQL).
        self.profiles = profiles if profiles is not None else profiles_of("", store or indexed_in)
        self.clock: Clock = clock if clock is not None else ThreadClock()
        self._fixed_settings = settings
        self.open: OpenChat | None
        if isinstance(target, Chat):
            self.open, self.chat = None, target
        elif isinstance(target, OpenChat):
            self.open, self.chat = target, target.chat
        else:
            probe = settings or self.profiles.settings_for(target_chat_id(target))
            debounce = save_debounce_ms if save_debounce_ms is not None else probe.save_debounce_ms
            self.open = open_chat(target, store=store, debounce_ms=debounce, lenient=lenient)
            self.chat = self.open.chat
        self.character_key = character_key or character_key_of(self.chat)
        self.group_id = (
            group_id if group_id is not None else (self.chat.id if self.chat.is_group else None)
        )
        self.slots = ExtensionPrompts()
        self.state = MemoryState()
        stored_in = self.open.store if self.open is not None else indexed_in
        self.search = ChatSearch(self.chat, stored_in)
        self.last_recall: list[RecallPiece] = []
        """What the last refresh recalled (the recall tier, when it is on)."""
        self.recall_on_refresh = True
        """Every refresh fills the recall slot for the newest message. The server turns this
        off: it refreshes after every recap job and every reply, when no prompt is built, and
        searches once where one is (`recall_into_slot`: a turn, a preview)."""
        self.settings = self._load_settings()
        self.counter: TokenCounter = get_counter(self.settings.tokenizer)
        self.last_injection = ""
        self._closed = False
        self.last_result: RefreshResult | None = None
        self.refreshes = 0
        self.warnings: list[str] = []
        self._lock = threading.RLock()
        self._refreshing = False
        self._stale = True
        """Whether the chat changed since the last refresh (`refresh_if_stale`)."""
        self.refreshed_at = float("-inf")
        """`clock.now()` at the last refresh."""
        self._listeners: dict[Event, list[Listener]] = {}
        self._debounced = Debouncer(
            self.clock, self.settings.refresh_debounce_ms / 1000, self._debounced_refresh
        )
        self.chat.listeners.append(self._on_change)
        # A chat read from a file (open or not) counts as an import: SPEC-NOTES §4.8.
        from_file = self.chat.path is not None or self.chat.layout.from_file
        warning = running.adopt_chat_id(self.chat, from_file=from_file)
        if warning:
            self.warnings.append(warning)
            log.warning(warning)
        self._fire(Event.CHAT_CHANGED, None)

    # --- the chat ----------------------------------------------------------------------------

    @property
    def id(self) -> str:
        """The chat id."""
        return self.chat.id

    @property
    def messages(self) -> list[Message]:
        """The chat's messages."""
        return self.chat.messages

    @property
    def lock(self) -> threading.RLock:
        """Held while the session changes the chat: hold it to change the chat from a thread."""
        return self._lock

    @property
    def enabled(self) -> bool:
        """Seed 002's `chat_enabled()` for this chat."""
        return chat_enabled(self.settings, self.chat.id)

    def on(self, event: Event | str, listener: Listener) -> None:
        """Call `listener(event, message_index)` whenever `event` fires (after the seeds'
        handler ran)."""
        self._listeners.setdefault(Event(event), []).append(listener)

    # --- changing the chat the way a frontend does ---------------------------------------------

    def send(
        self, text: str, *, name: str | None = None, quiet: bool = False, dated: bool = True
    ) -> Message:
        """The user sends a message: append it, fire `message_sent` (with `quiet`, only the
        listeners hear of it and memory is not refreshed: for adding many messages at once,
        followed by one `refresh()`). `dated=False`: no `send_date`, for a message written
        at a moment nobody knows (history that arrived all at once)."""
        self._usable()
        _text_of(text)
        message = {
            "name": name or user_name_of(self.chat),
            "is_user": True,
            "is_system": False,
            **({"send_date": self._iso_now()} if dated else {}),
            "mes": text,
            "extra": {},
        }
        return self._append(message, Event.MESSAGE_SENT, quiet=quiet)

    def receive(
        self,
        text: str,
        *,
        name: str | None = None,
        extra: dict[str, Any] | None = None,
        quiet: bool = False,
        dated: bool = True,
    ) -> Message:
        """A character's reply arrives: append it (with its first swipe), fire
        `message_received`. `dated`: as for `send`."""
        self._usable()
        _text_of(text)
        now = self._iso_now()
        moments = {"send_date": now, "gen_started": now, "gen_finished": now} if dated else {}
        message = {
            "name": name or character_name_of(self.chat),
            "is_user": False,
            "is_system": False,
            **({"send_date": now} if dated else {}),
            "mes": text,
            "extra": dict(extra or {}),
            "swipe_id": 0,
            "swipes": [text],
            "swipe_info": [{**moments, "extra": dict(extra or {})}],
        }
        return self._append(message, Event.MESSAGE_RECEIVED, quiet=quiet)

    def edit_message(self, index: int, text: str) -> Message:
        """The user edits a message's text (and its active swipe): fire `message_edited`."""
        self._usable()
        _text_of(text)
        with self._lock:
            index = self._position(index)
            message = self.chat.messages[index]
            message["mes"] = text
            swipes = message.get("swipes")
            swipe_id = message.swipe_id
            if isinstance(swipes, list) and swipe_id is not None and 0 <= swipe_id < len(swipes):
                swipes[swipe_id] = text
            self.chat.notify_change(message)
            self._fire(Event.MESSAGE_EDITED, index)
            return message

    def delete_message(self, index: int) -> Message:
        """The user deletes a message: fire `message_deleted` (which cleans up running recap
        versions whose scene is gone)."""
        self._usable()
        with self._lock:
            index = self._position(index)
            message = self.chat.messages[index]
            del self.chat.messages[index]
            running.shift_after_deletion(self.chat, index)
            self.state.invalidate()
            self.chat.notify_change(None)
            self._fire(Event.MESSAGE_DELETED, index)
            return message

    def swipe(self, index: int, *, to: int | None = None, text: str | None = None) -> Message:
        """Swipe a message: to an existing swipe (`to`), or to a new one (`text`, the new
        reply). Fires `message_swiped`; a new swipe starts with no recap (seed 002)."""
        self._usable()
        with self._lock:
            index = self._position(index)
            message = self.chat.messages[index]
            if (to is None) == (text is None):
                raise SessionError("swipe to an existing swipe (to=N) or to a new one (text=...)")
            if to is not None:
                select_swipe(message, to)
                self._fire(Event.MESSAGE_SWIPED, index)
                return message
            swipes = message.get("swipes")
            if not isinstance(swipes, list):
                swipes = message["swipes"] = [message.get("mes", "")]
                message.setdefault(
                    "swipe_info", [{"send_date": message.get("send_date"), "extra": {}}]
                )
            # SillyTavern moves swipe_id one past the last swipe before it generates: that is how
            # the handler knows this is a new swipe. Listeners hear of it once the reply is in.
            message["swipe_id"] = len(swipes)
            _HANDLERS[Event.MESSAGE_SWIPED](self, index)
            now = self._iso_now()
            swipes.append(text)
            message["mes"] = text
            message["send_date"] = now
            info = message.get("swipe_info")
            if isinstance(info, list):
                extra = message.get("extra")
                info.append(
                    {
                        "send_date": now,
                        "gen_started": now,
                        "gen_finished": now,
                        "extra": dict(extra) if isinstance(extra, dict) else {},
                    }
                )
            self.chat.notify_change(message)
            self._notify(Event.MESSAGE_SWIPED, index)
            return message

    def mark_scene_break(self, index: int, name: str | None = None) -> Message:
        """End a scene at message `index` (and refresh: auto-hide counts scenes)."""
        self._usable()
        with self._lock:
            message = self.chat.messages[self._position(index)]
            mark_break(message, name, cause="user")
            self.refresh()
            return message

    def unmark_scene_break(self, index: int) -> Message:
        """Remove the scene break at message `index`."""
        self._usable()
        with self._lock:
            message = self.chat.messages[self._position(index)]
            set_data(message, "scene_break", False)
            self.refresh()
            return message

    def load_more(self) -> None:
        """Older messages were loaded into view: fire `more_messages_loaded`."""
        self._fire(Event.MORE_MESSAGES_LOADED, None)

    # --- memory ------------------------------------------------------------------------------

    def refresh(self) -> str:
        """`refresh_memory()` now; returns the injection text (`""` when disabled)."""
        self._usable()
        with self._lock:
            self._debounced.cancel()
            self._refreshing = True
            try:
                result = refresh_memory(
                    self.chat,
                    self.settings,
                    self.slots,
                    self.counter,
                    state=self.state,
                    group_id=self.group_id,
                )
            finally:
                self._refreshing = False
            if self.recall_on_refresh or not result.enabled:
                self.recall_into_slot(result.enabled)
            self._stale = False
            self.refreshed_at = self.clock.now()
            self.refreshes += 1
            self.last_result = result
            if result.enabled:
                self.last_injection = result.text
            return result.text

    def recall(self, text: str | None = None) -> list[RecallPiece]:
        """What the recall tier brings back for `text` (default: the newest user message and
        the reply before it), best first, whether or not the tier is on."""
        self._usable()
        if text is not None and not _text_of(text).strip():
            raise SessionError("recall(text): the text is empty; pass None for the newest message")
        with self._lock:
            _, pieces = self.search.recall(self.settings, self.counter, text)
            return pieces

    def recall_into_slot(self, enabled: bool = True) -> None:
        """Fill the recall slot for the chat as it is now (empty it when the tier or the
        chat's memory is off). A refresh does this; the proxy also does it on the reply path
        when it lets the refresh wait until after the reply."""
        if enabled and self.settings.recall_enabled and chat_enabled(self.settings, self.chat.id):
            breaks = self.state.breaks if self.state.valid else None
            text, self.last_recall = self.search.recall(self.settings, self.counter, breaks=breaks)
            set_recall_slot(self.slots, text, self.settings)
        elif RECALL_KEY in self.slots:
            set_recall_slot(self.slots, "", self.settings)
            self.last_recall = []

    @property
    def stale(self) -> bool:
        """Whether a message changed, came or went since the last refresh."""
        return self._stale

    def refresh_if_stale(self) -> str:
        """`refresh()`, unless no message changed, came or went since the last one (an event's
        handler refreshed already): the injection text."""
        with self._lock:
            if self._stale:
                return self.refresh()
            return self.last_result.text if self.last_result is not None else ""

    def refresh_debounced(self) -> None:
        """`refresh_memory_debounced()`: one refresh `refresh_debounce_ms` after the last call."""
        self._debounced.trigger()

    def reload_settings(self) -> None:
        """Read the settings again (profile, toggles) and refresh."""
        with self._lock:
            self.settings = self._load_settings()
            self.counter = get_counter(self.settings.tokenizer)
            self._debounced.delay = self.settings.refresh_debounce_ms / 1000
            self.refresh()

    def set_enabled(self, enabled: bool | None) -> None:
        """Turn memory on or off for this chat (None: follow the default) and refresh."""
        self._usable()
        self.profiles.set_chat_enabled(self.chat.id, enabled)
        if self._fixed_settings is not None:
            switches = dict(self._fixed_settings.chats_enabled)
            if enabled is None:
                switches.pop(self.chat.id, None)
            else:
                switches[self.chat.id] = enabled
            self._fixed_settings = self._fixed_settings.model_copy(
                update={"chats_enabled": switches}
            )
        self.reload_settings()

    def running_versions(self) -> list[dict[str, Any]]:
        """The running recap's versions, oldest first."""
        return running.versions(self.chat)

    def select_version(self, number: int) -> None:
        """Inject running recap version `number` from now on."""
        self._usable()
        with self._lock:
            running.select_version(self.chat, number)
            self.refresh()

    def edit_running_recap(self, content: str) -> dict[str, Any]:
        """Replace the running recap's text: adds a version, which becomes current."""
        self._usable()
        with self._lock:
            version = running.edit_version(self.chat, content, now_ms=self.clock.wall_ms())
            self.refresh()
            return version

    def delete_version(self, number: int) -> None:
        """Delete running recap version `number`."""
        self._usable()
        with self._lock:
            running.delete_version(self.chat, number)
            self.refresh()

    # --- lifecycle ---------------------------------------------------------------------------

    def flush(self) -> None:
        """Save pending changes now."""
        if self.open is not None:
            self.open.flush()

    def close(self) -> None:
        """Stop refreshing and save everything. The session cannot be used after."""
        self._closed = True
        self._debounced.cancel()
        if self._on_change in self.chat.listeners:
            self.chat.listeners.remove(self._on_change)
        if self.open is not None:
            self.open.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Session({self.chat.id!r}, messages={len(self.chat.messages)})"

    # --- the seeds' handlers (seed 002) --------------------------------------------------------

    def _fire(self, event: Event, index: int | None) -> None:
        with self._lock:
            _HANDLERS[event](self, index)
            self._notify(event, index)

    def _notify(self, event: Event, index: int | None) -> None:
        for listener in self._listeners.get(event, ()):
            listener(event, index)

    def _handle_chat_changed(self, index: int | None) -> None:
        self.settings = self._load_settings()  # auto_load_profile()
        self.slots.clear()  # SillyTavern clears every slot when the chat changes
        self.state.invalidate()
        self.refresh()

    def _handle_message_sent(self, index: int | None) -> None:
        if not self.enabled:
            return
        self.refresh()
        if self.last_injection:
            log.debug("[MEMORY INJECTION] scene_injection:\n%s", self.last_injection)

    def _handle_message_received(self, index: int | None) -> None:
        if self.enabled:
            self.refresh()

    def _handle_message_deleted(self, index: int | None) -> None:
        if not self.enabled:
            return
        running.cleanup_invalid(self.chat)
        self.refresh()

    def _handle_message_swiped(self, index: int | None) -> None:
        if not self.enabled or index is None:
            return
        message = self.chat.messages[index]
        swipes = message.get("swipes")
        if isinstance(swipes, list) and message.get("swipe_id") == len(swipes):
            clear_memory(message)  # a new swipe starts with no recap
        self.refresh_debounced()

    def _handle_debounced_event(self, index: int | None) -> None:
        if self.enabled:
            self.refresh_debounced()

    # --- internals ---------------------------------------------------------------------------

    def _append(self, message: dict[str, Any], event: Event, *, quiet: bool = False) -> Message:
        with self._lock:
            added = self.chat.append(message)
            self.chat.notify_change(added)
            if quiet:
                self._notify(event, len(self.chat.messages) - 1)
            else:
                self._fire(event, len(self.chat.messages) - 1)
            return added

    def _usable(self) -> None:
        if self._closed:
            raise SessionError(
                f"the session of {self.chat.id!r} is closed: open a new Session to go on"
            )

    def _position(self, index: int) -> int:
        """`index` as a position from the start (negative indexes count from the end)."""
        count = len(self.chat.messages)
        if not -count <= index < count:
            raise SessionError(
                f"no message {index}: the chat has {count} message(s) (0 to {count - 1}, "
                f"or -{count} to -1 from the end)"
                if count
                else f"no message {index}: the chat is empty"
            )
        return index % count

    def _on_change(self, message: Message | None) -> None:
        if not self._refreshing:
            self._stale = True
            self.state.touch(message)

    def _debounced_refresh(self) -> None:
        self.refresh()

    def _load_settings(self) -> Settings:
        if self._fixed_settings is not None:
            return self._fixed_settings
        self.profiles.reload()  # the CLI or another process may have changed the file
        return self.profiles.settings_for(self.chat.id, self.character_key)

    def _iso_now(self) -> str:
        stamp = datetime.fromtimestamp(self.clock.wall_ms() / 1000, tz=UTC)
        return stamp.isoformat(timespec="milliseconds").replace("+00:00", "Z")


_HANDLERS: dict[Event, Callable[[Session, int | None], None]] = {
    Event.CHAT_CHANGED: Session._handle_chat_changed,
    Event.MESSAGE_SENT: Session._handle_message_sent,
    Event.MESSAGE_RECEIVED: Session._handle_message_received,
    Event.MESSAGE_DELETED: Session._handle_message_deleted,
    Event.MESSAGE_SWIPED: Session._handle_message_swiped,
    Event.MESSAGE_EDITED: Session._handle_debounced_event,
    Event.MORE_MESSAGES_LOADED: Session._handle_debounced_event,
}


def _text_of(text: object) -> str:
    """A message's text, which must be a string."""
    if not isinstance(text, str):
        raise SessionError(f"a message's text is a string, not {type(text).__name__}")
    return text
