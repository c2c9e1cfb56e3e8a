"""Keeping the chats' memory fresh while the in-process recap worker changes them.

The seeds refresh the memory after every recap. The server does it on the worker's time, so that
the next request finds the memory up to date instead of paying for every recap made since the
last one:
- as a job lets go of a chat it changed (`after_job`), at most every `REFRESH_EVERY_S` per chat,
  since a refresh costs about the same for one new recap as for a hundred;
- between two jobs (`catch_up`), for a chat whose refresh the interval put off, once it is over:
  a worker with a backlog may not come back to that chat for a long time;
- when the worker runs out of jobs (`refresh_stale`), for every chat changed since its refresh.

What a refresh changes (which messages the memory includes) is saved there too, on the worker's
time, rather than by the next turn's save on the reply path's.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager

from autorecap.errors import AutorecapError
from autorecap.session import Session

log = logging.getLogger("autorecap.server")

REFRESH_EVERY_S = 0.1
"""How often, at most, the recap worker refreshes the memory of the chat it works on."""


class Freshness:
    """The worker's refreshes of one registry's sessions (see the module docstring)."""

    def __init__(
        self,
        sessions: dict[str, Session],
        guard: threading.Lock,
        hold: Callable[[str], AbstractContextManager[None]],
        save: Callable[[str], None] = lambda chat_id: None,
    ) -> None:
        self._sessions = sessions
        self._guard = guard  # guards `sessions` and `_behind`
        self._hold = hold
        self._save = save
        """Saves what of a chat is not saved yet (its lock held)."""
        self._behind: dict[str, None] = {}
        """Chats left stale by a job, their refresh put off by the interval."""

    def after_job(self, chat_id: str) -> None:
        """A job is done with a chat (its lock still held): refresh it if the job changed it,
        unless it was refreshed less than `REFRESH_EVERY_S` ago (then `catch_up` will)."""
        session = self._sessions.get(chat_id)
        if session is None or not session.stale:
            return
        if session.clock.now() - session.refreshed_at < REFRESH_EVERY_S:
            with self._guard:
                self._behind[chat_id] = None
            return
        with self._guard:
            self._behind.pop(chat_id, None)
        session.refresh()
        # A save refused by another process's reads its changes in, which may leave the chat
        # stale again and put it behind: that is why it was taken off first.
        self._save_now(chat_id)

    def later(self, chat_id: str) -> None:
        """A chat read in on the reply path (another server's save): its refresh is made by
        `catch_up`, off that path, as a job's is."""
        session = self._sessions.get(chat_id)
        if session is not None and session.stale:
            with self._guard:
                self._behind[chat_id] = None

    def catch_up(self) -> None:
        """Between two jobs (no chat's lock held): refresh the chats whose refresh was put off,
        once their interval is over."""
        if not self._behind:
            return
        with self._guard:
            behind = list(self._behind)
        for chat_id in behind:
            session = self._sessions.get(chat_id)
            if session is None or session.clock.now() - session.refreshed_at >= REFRESH_EVERY_S:
                self._refresh(chat_id)

    def refresh_stale(self) -> None:
        """The worker has no job to take: refresh every chat changed since its last refresh."""
        with self._guard:
            stale = [chat_id for chat_id, session in self._sessions.items() if session.stale]
        for chat_id in stale:
            self._refresh(chat_id)

    def _refresh(self, chat_id: str) -> None:
        with self._hold(chat_id):
            with self._guard:
                self._behind.pop(chat_id, None)
            session = self._sessions.get(chat_id)
            if session is not None and session.stale:
                session.refresh()
                self._save_now(chat_id)

    def _save_now(self, chat_id: str) -> None:
        try:
            self._save(chat_id)
        except AutorecapError as error:  # the next turn's save tries again
            log.warning("chat %r: saving after a memory refresh failed: %s", chat_id, error)
