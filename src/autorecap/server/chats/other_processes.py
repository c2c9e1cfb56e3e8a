"""Reading into the server's chats what other processes save to the store.

The server keeps its chats in memory. Another process may save to the same database meanwhile:
an `autorecap worker` running the server's recap jobs (`autorecap serve --no-worker`), or the
command line. Every save is stamped with a store-wide revision (`autorecap.store.revisions`), so:
- a look at the store's `data_version` (`watch`, every `POLL_S`) finds the chats another
  process changed, and reads just their changed rows into the copies in memory, then refreshes
  their memory as the in-process worker would (`Freshness.after_job`). On SQLite that is one
  cheap query; on PostgreSQL it is a number in memory, moved by the notices (`LISTEN/NOTIFY`)
  other servers and workers send as they save, which also name the chats; and every
  `RECHECK_S` every open chat's revision is compared with the store's anyway, since a notice
  can be lost;
- a save of the server's own that another process got ahead of is refused by the store; the
  server reads the changes in (keeping its own) and saves again (`ChatRegistry._save`).

A chat deleted or reshaped (messages added or removed) by another process is dropped from memory
and read again on its next use: the client's next request, which carries the whole list, is
reconciled with it as usual.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from contextlib import AbstractContextManager
from typing import Protocol

from autorecap.core.model import Message
from autorecap.errors import AutorecapError
from autorecap.server.chats.pending_saves import Unsaved
from autorecap.server.chats.refresh import Freshness
from autorecap.session import Session
from autorecap.store.base import ChatStore

log = logging.getLogger("autorecap.server")
POLL_S = 0.05
"""How often the server looks for saves of other processes (one cheap query when none)."""
RECHECK_S = 2.0
"""How often every open chat's revision is compared with the store's whatever the notices
said: a notice can be lost (a listening connection that broke, a save whose notice named
another process), and a chat no request touches would then stay behind for good (a two-server
soak showed one whose running recap never reached the other server's preview)."""
CATCH_UP_S = 1.0
"""The longest a refresh of a chat read in waits for a moment with no request answered."""


class OpenChats(Protocol):
    """The open chats, as this module reads into them (`chats.registry.ChatRegistry`)."""

    store: ChatStore
    freshness: Freshness

    def hold(self, chat_id: str) -> AbstractContextManager[None]: ...

    def open_copy(self, chat_id: str) -> tuple[Session, Unsaved] | None: ...

    def synced(self) -> dict[str, int | None]: ...

    def drop(self, chat_id: str) -> None: ...

    def read_again(self, chat_id: str) -> None: ...

    def idle(self) -> bool: ...

    def reload_settings(self) -> int: ...


class Outside:
    """One registry's view of the other processes' saves (see the module docstring)."""

    def __init__(self, registry: OpenChats) -> None:
        self._registry = registry
        self._version: int | None = None
        self._settings_version = 0
        self.pulls = 0
        """Chats read in so far (for tests and benchmarks)."""

    def pull(
        self,
        chat_id: str,
        pending: Iterable[Message] = (),
        header_pending: bool = False,
        *,
        refresh: bool = True,
    ) -> bool:
        """Read into the in-memory chat what other processes saved since, keeping its changes
        not saved yet (`pending`: more of them than the chat's own unsaved list), and refresh
        its memory on the worker's terms (`refresh=False`: later, off the reply path). A chat
        deleted or reshaped elsewhere is dropped from memory: False."""
        registry = self._registry
        with registry.hold(chat_id):
            found = registry.open_copy(chat_id)
            if found is None:
                return False
            session, unsaved = found
            chat = session.chat
            waiting = {id(m): m for m in pending} | unsaved.messages
            header_waiting = header_pending or unsaved.header
            pulled = registry.store.pull(
                chat, pending=waiting.values(), header_pending=header_waiting
            )
            self.pulls += 1
            if pulled.gone:
                log.info("chat %r was deleted by another process", chat_id)
                registry.drop(chat_id)
                return False
            if pulled.reshaped:
                log.info("chat %r was changed by another process: it is read again", chat_id)
                registry.read_again(chat_id)
                return False
            for message in pulled.messages:
                chat.notify_change(message)  # the memory's caches, the echo's watch
                if id(message) not in waiting:  # as stored: nothing to save
                    unsaved.messages.pop(id(message), None)
            if pulled.header:
                header_was = unsaved.header
                chat.notify_change(None)
                unsaved.header = header_was
            if refresh:
                registry.freshness.after_job(chat_id)
            else:
                registry.freshness.later(chat_id)
            return True

    def pull_changed(self, *, every: bool = False) -> int:
        """`pull` every chat in memory that another process saved since it was read, when the
        database changed at all (else nothing is asked of it). Returns how many were read in.

        On PostgreSQL the store names the chats that changed (the notices it heard), so only
        those are looked at; on SQLite every open chat's revision is. `every`: look at every
        open chat's revision whatever the notices said (`watch` does, every `RECHECK_S`)."""
        registry = self._registry
        version = registry.store.data_version()
        if version == self._version and not every:
            return 0
        self._version = version
        changed = registry.store.changed_chats()
        known = registry.synced()
        if changed is not None and not every:
            known = {chat_id: rev for chat_id, rev in known.items() if chat_id in changed}
        if not known:
            return 0
        stored = registry.store.revisions(known if changed is not None or every else None)
        count = 0
        for chat_id, synced in known.items():
            if synced is not None and stored.get(chat_id) != synced:
                # Refreshing the memory (and saving what it changed) waits for a moment with
                # no request being answered, as the in-process worker's jobs do.
                self.pull(chat_id, refresh=registry.idle())
                count += 1
        return count

    def settings_changed(self) -> int:
        """Run the open chats whose owner's settings another process changed with the new
        ones (stores that keep settings: PostgreSQL). Returns how many chats."""
        version = self._registry.store.settings_version()
        if version == self._settings_version:
            return 0
        self._settings_version = version
        return self._registry.reload_settings()

    def watch(self, stop: threading.Event) -> None:
        """Poll until `stop` is set (the server runs this on a thread of its own). The
        refreshes put off are made when no request is being answered, or at the latest after
        `CATCH_UP_S` of constant traffic."""
        caught_up = rechecked = time.monotonic()
        while not stop.wait(POLL_S):
            try:
                every = time.monotonic() - rechecked >= RECHECK_S
                if every:
                    rechecked = time.monotonic()
                self.pull_changed(every=every)
                self.settings_changed()
                if self._registry.idle() or time.monotonic() - caught_up > CATCH_UP_S:
                    self._registry.freshness.catch_up()
                    caught_up = time.monotonic()
            except AutorecapError as error:  # the store busy or gone: try again next time
                log.warning("reading other processes' changes failed: %s", error)
