"""The server's open chats: each loaded once from the store and kept in memory, one `Session`
and one lock per chat, shared by the proxy's requests, the REST API and the recap worker; every
change saved to the store, and what other processes save read back in.

What is kept is bounded whatever chat ids clients invent: at most `open_chats` chats stay in
memory (the least recently used one not in use is saved and let go when another is loaded), and
a chat's lock lives only as long as its chat is open or someone holds it.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from typing import Any

from autorecap.core.combined import COMBINED_KEY
from autorecap.core.model import Chat, Message
from autorecap.core.pins import LONG_KEY
from autorecap.core.recall import RECALL_KEY
from autorecap.core.slots import SCENE_KEY, SHORT_KEY
from autorecap.errors import AutorecapError
from autorecap.jobs.queue import JobQueue
from autorecap.jobs.runner import Worker
from autorecap.profiles import Profiles, profiles_of
from autorecap.recap.backend import RecapBackend
from autorecap.server.access import owner_of
from autorecap.server.chats.activity import Traffic
from autorecap.server.chats.collector import Collector
from autorecap.server.chats.other_processes import Outside
from autorecap.server.chats.pending_saves import Unsaved
from autorecap.server.chats.refresh import Freshness
from autorecap.session import Session
from autorecap.settings import Settings
from autorecap.store.base import ChatStore
from autorecap.store.migrations import StaleChatError, StoreError
from autorecap.store.sql import unknown_chat

INJECTED_KEYS = (SCENE_KEY, SHORT_KEY, LONG_KEY, COMBINED_KEY, RECALL_KEY)
"""The slots whose text the proxy puts in, which a client may send back."""

log = logging.getLogger("autorecap.server")
SAVE_TRIES = 4
"""How often a save is tried again after reading in what another process saved first."""
OPEN_CHATS = 256
"""How many chats stay in memory by default (`autorecap serve --open-chats`)."""


class ChatRegistry:
    """The open chats (see the module docstring). The API changes a chat with `edit()`,
    which saves on the way out; the proxy's turns are `server.proxy.turns.ProxyChats`."""

    def __init__(
        self,
        store: ChatStore,
        queue: JobQueue,
        *,
        profiles: Profiles | None = None,
        context_size: int | None = None,
        queue_recaps: bool = True,
        keys_on: bool = False,
        open_chats: int = OPEN_CHATS,
    ) -> None:
        self.store = store
        self.queue = queue
        self.profiles = profiles or profiles_of("", store)
        self.keys_on = keys_on
        self.context_size = context_size
        self.queue_recaps = queue_recaps
        self._owner_profiles: dict[str, Profiles] = {"": self.profiles}
        self._applied_loads: dict[str, int] = {"": self.profiles.loads}
        """Each owner's settings reads that its open chats run with (`reload_settings`)."""
        self._guard = threading.Lock()  # the dictionaries below, never held for long
        self.open_chats = max(1, open_chats)
        self._locks: weakref.WeakValueDictionary[str, Any] = weakref.WeakValueDictionary()
        """Each chat's lock, while its chat is open (`_open_locks`) or someone holds it."""
        self._open_locks: dict[str, Any] = {}
        self._sessions: dict[str, Session] = {}
        self._reshaped: weakref.WeakValueDictionary[int, Chat] = weakref.WeakValueDictionary()
        """Copies dropped because another process reshaped their chat, while a turn holds
        them (`reshaped_elsewhere`), by identity: every one, since a chat may be read again
        and dropped again before a turn begun on an older copy is saved."""
        self._used: dict[str, float] = {}
        """When each open chat was last asked for (the least recently used is let go)."""
        self._unsaved: dict[str, Unsaved] = {}
        self.freshness = Freshness(self._sessions, self._guard, self.hold, self._save)
        """The worker's memory refreshes (`chats.refresh`)."""
        self.outside = Outside(self)
        """What other processes save to the store, read into these chats
        (`chats.other_processes`)."""
        self.traffic = Traffic()
        # What the server and the worker ask of the traffic (`chats.activity`).
        self.answering = self.traffic.answering
        self.wanting = self.traffic.wanting
        self.wanted = self.traffic.wanted
        self.busy = self.traffic.busy
        self.quiet_for = self.traffic.quiet_for
        self.collector: Collector | None = None
        """The server's garbage collector schedule: told of chats loaded and dropped."""

    # --- the chats ---------------------------------------------------------------------------

    def profiles_for(self, owner: str) -> Profiles:
        """An owner's settings: the installation's own when access control is off, else the
        owner's (`profiles.profiles_of`: in the store when it keeps settings, else in
        `$AUTORECAP_HOME/users/<owner>/settings.json`), so no key changes another's settings."""
        with self._guard:
            found = self._owner_profiles.get(owner)
            if found is None:
                found = profiles_of(owner, self.store)
                self._owner_profiles[owner] = found
                self._applied_loads[owner] = found.loads
            return found

    def chat_lock(self, chat_id: str) -> Any:
        """The lock of one chat: held by a request, an API call or a recap job while it reads
        or changes that chat. Other chats are not held up."""
        with self._guard:
            return self._lock_of(chat_id)

    def _lock_of(self, chat_id: str) -> Any:
        """The chat's lock, made when there is none (`_guard` held)."""
        lock = self._locks.get(chat_id)
        if lock is None:
            lock = self._locks[chat_id] = threading.RLock()
        return lock

    def locks(self) -> int:
        """How many chat locks exist now (bounded: see the module docstring)."""
        return len(self._locks)

    @contextlib.contextmanager
    def hold(self, chat_id: str) -> Iterator[None]:
        """The chat's lock, for the proxy's own work (requests, the API, saves): counted as
        wanted meanwhile, so that a recap job holding it lets go of it (`Worker._pause`).
        The worker takes `chat_lock` itself."""
        with self.wanting(chat_id), self.chat_lock(chat_id):
            yield

    def chat(self, chat_id: str) -> Chat:
        """The in-memory chat (shared with the worker). A chat that is not stored (deleted
        meanwhile) is an `UnknownChatError`, never created again."""
        return self.session(chat_id, create=False).chat

    def settings_of(self, chat: Chat) -> Settings:
        """The settings a chat runs with (its owner's profiles)."""
        return self.session(chat.id, create=False).settings

    def session(self, chat_id: str, *, create: bool = True) -> Session:
        """The chat's session, loaded once; a chat seen for the first time is created (only
        the proxy's requests do that: `create=False` for everyone else)."""
        session = self._sessions.get(chat_id)
        if session is not None:
            self._used[chat_id] = time.monotonic()
            return session
        with self.hold(chat_id):
            session = self._sessions.get(chat_id)
            if session is not None:
                return session
            if not self.store.has_chat(chat_id):
                if not create:
                    raise unknown_chat(chat_id)
                try:
                    self.store.import_chat(Chat(chat_id=chat_id), chat_id=chat_id)
                except StoreError:
                    if not self.store.has_chat(chat_id):
                        raise  # else another server made it at the same moment: that one
            for attempt in range(SAVE_TRIES):
                session = self._load(chat_id)
                try:
                    self._save(chat_id)  # what opening it changed (its memory's data)
                    break
                except StaleChatError:
                    # Another server added or removed messages since it was read (it was
                    # dropped): read it again.
                    if attempt == SAVE_TRIES - 1 or self._sessions.get(chat_id) is session:
                        raise
            if self.collector is not None:
                self.collector.loaded(chat_id)
        self._let_go_of_unused(keep=chat_id)
        assert session is not None
        return session

    def _load(self, chat_id: str) -> Session:
        """Read a stored chat into memory (its lock held)."""
        chat = self.store.load_chat(chat_id)
        unsaved = Unsaved()
        chat.listeners.append(unsaved.remember)
        owner = owner_of(chat_id, self.keys_on)
        session = Session(chat, profiles=self.profiles_for(owner), indexed_in=self.store)
        session.recall_on_refresh = False  # searched where a prompt is built, not per job
        with self._guard:
            self._unsaved[chat_id] = unsaved
            self._sessions[chat_id] = session
            self._used[chat_id] = time.monotonic()
            self._open_locks[chat_id] = self._lock_of(chat_id)
        return session

    def in_use(self, chat_id: str) -> bool:
        """True while something waits on the chat beyond its lock (the proxy: a reply on its
        way); such a chat is never let go."""
        return False

    def _let_go_of_unused(self, keep: str) -> None:
        """Over `open_chats`: save and let go of the least recently used chats that no one
        holds or waits for (their next request loads them again from the store)."""
        skipped: set[str] = set()
        while len(self._sessions) > self.open_chats:
            with self._guard:
                order = sorted(self._used, key=self._used.__getitem__)
            for chat_id in order:
                if chat_id == keep or chat_id in skipped:
                    continue
                if self.in_use(chat_id) or self.wanted(chat_id):
                    continue
                lock = self.chat_lock(chat_id)
                if not lock.acquire(blocking=False):
                    continue
                try:
                    if self.in_use(chat_id):  # a turn began between the check and the lock
                        skipped.add(chat_id)
                        continue
                    self._save(chat_id)
                    self.drop(chat_id)
                except AutorecapError as error:  # kept, unsaved changes and all
                    log.warning("chat %r could not be saved to let it go: %s", chat_id, error)
                    skipped.add(chat_id)
                    continue
                finally:
                    lock.release()
                break
            else:
                return  # all in use: over the bound for now, let go of later

    def _save(self, chat_id: str) -> None:
        """Write what changed (the chat's lock held): the changed messages' rows, the header
        when it changed, the message list when messages were added or removed."""
        session = self._sessions.get(chat_id)
        if session is None:  # dropped meanwhile
            return
        unsaved = self._unsaved[chat_id]
        version = session.chat.messages.version
        structure = version != unsaved.list_version
        header = unsaved.header
        if not (unsaved.messages or structure or header):
            return
        taken = dict(unsaved.messages)
        changed = list(taken.values())
        unsaved.messages.clear()
        unsaved.header = False
        try:
            for attempt in range(SAVE_TRIES):
                try:
                    self.store.save(
                        session.chat, changed=changed, header=header, structure=structure
                    )
                    break
                except StaleChatError:
                    # Another process (a recap worker, the command line) saved the chat first:
                    # read what it changed in, keeping this copy's changes, and save again.
                    if attempt == SAVE_TRIES - 1 or not self.outside.pull(chat_id, changed, header):
                        raise
        except BaseException:
            # Not saved: still to be saved (the next save, or letting the chat go, tries again).
            unsaved.messages.update(taken)
            unsaved.header = unsaved.header or header
            raise
        unsaved.list_version = version

    def _read_in_and_save(self, chat_id: str) -> None:
        """A recap job's save was refused (another process saved the chat first): read the
        changes in, keeping the job's, and save both, before the job runs again."""
        with self.hold(chat_id):
            if self.outside.pull(chat_id):
                self._save(chat_id)

    def worker(self, backend_for: Callable[[Settings], RecapBackend], **options: Any) -> Worker:
        """A recap worker on these chats: it shares their in-memory copies, their locks and
        their owners' settings, and holds back while requests are being answered."""
        return Worker(
            self.queue,
            backend_for,
            chat_source=self.chat,
            chat_lock=self.chat_lock,
            settings_source=self.settings_of,
            yield_to=self.busy,
            wanted=self.wanted,
            on_chat_released=self.freshness.after_job,
            after_job=self.freshness.catch_up,
            on_idle=self.freshness.refresh_stale,
            on_stale=self._read_in_and_save,
            on_saved=self._saved_by_job,
            **options,
        )

    def _saved_by_job(self, chat: Chat, messages: list[Message], header: bool) -> None:
        """A recap job saved these (the chat's lock held, so they are saved as they are now):
        the next turn's save leaves them out."""
        unsaved = self._unsaved.get(chat.id)
        session = self._sessions.get(chat.id)
        if unsaved is not None and session is not None and session.chat is chat:
            unsaved.saved(messages, header)

    def idle(self) -> bool:
        """True when no request is being answered."""
        return not self.busy()

    def known(self, chat_id: str) -> bool:
        """True for a chat in memory or in the store."""
        return chat_id in self._sessions or self.store.has_chat(chat_id)

    def memory_text(self, chat_id: str) -> str:
        """The chat's memory as text (its injected slots, refreshed), for prompts that are one
        string: the running recap, then the short-term recaps and what the newest message
        recalls when those tiers are on."""
        with self.hold(chat_id):
            session = self.session(chat_id, create=False)
            session.refresh()
            session.recall_into_slot()
            parts = [session.slots.value(key) for key in INJECTED_KEYS]
            return "\n".join(part for part in parts if part and part.strip())

    def open_copy(self, chat_id: str) -> tuple[Session, Unsaved] | None:
        """The chat's in-memory session and what of it is not saved yet (None when it is not
        open)."""
        with self._guard:
            session = self._sessions.get(chat_id)
            return None if session is None else (session, self._unsaved[chat_id])

    def synced(self) -> dict[str, int | None]:
        """The store revision each open chat was last read or saved at."""
        with self._guard:
            return {chat_id: s.chat.revs.synced for chat_id, s in self._sessions.items()}

    def sessions(self) -> list[str]:
        with self._guard:
            return sorted(self._sessions)

    # --- for the REST API ----------------------------------------------------------------------

    @contextlib.contextmanager
    def edit(self, chat_id: str) -> Iterator[Session]:
        """The chat's session, with its lock held; whatever changed is saved on the way out.
        `chat_id` is the store's id (`Scope.internal`). An unknown chat is an error, not a new
        chat: only the proxy creates chats on first sight."""
        with self.hold(chat_id):
            session = self.session(chat_id, create=False)
            try:
                yield session
            finally:
                self._save(chat_id)

    def reload_settings(self) -> int:
        """Read again each owner's settings that another process changed (a look in memory
        when nothing did), and run their open chats with them. Returns how many chats."""
        with self._guard:
            owners = dict(self._owner_profiles)
        moved: set[str] = set()
        for owner, profiles in owners.items():
            profiles.reload()
            # Read again here or anywhere else since (a chat opened, the API): either way the
            # open chats of the owner run with what was read before.
            if self._applied_loads.get(owner) != profiles.loads:
                self._applied_loads[owner] = profiles.loads
                moved.add(owner)
        count = 0
        for chat_id in self.sessions() if moved else ():
            if owner_of(chat_id, self.keys_on) not in moved:
                continue
            try:
                with self.edit(chat_id) as session:
                    session.reload_settings()
                count += 1
            except AutorecapError as error:  # deleted meanwhile, or the store busy
                log.warning("chat %r could not take the new settings: %s", chat_id, error)
        return count

    def read_again(self, chat_id: str) -> None:
        """Drop the in-memory copy of a chat that another process reshaped (added or removed
        messages): its next use reads it again, and a turn begun on the old copy is done
        again on the new one (`reshaped_elsewhere`)."""
        session = self._sessions.get(chat_id)
        if session is not None:
            self._reshaped[id(session.chat)] = session.chat
        self.drop(chat_id)

    def reshaped_elsewhere(self, chat_id: str, chat: Chat) -> bool:
        """Whether `chat` is a copy of this chat that was dropped because another process
        reshaped it."""
        return self._reshaped.get(id(chat)) is chat and chat.id == chat_id

    def drop(self, chat_id: str) -> None:
        """Forget the in-memory copy of a chat (after it was deleted or replaced in the store)."""
        with self.hold(chat_id), self._guard:
            session = self._sessions.pop(chat_id, None)
            self._unsaved.pop(chat_id, None)
            self._used.pop(chat_id, None)
            self._open_locks.pop(chat_id, None)
        self.store.forget(chat_id)
        if session is not None:
            session.chat.listeners.clear()
            if self.collector is not None:
                self.collector.dropped(chat_id)
