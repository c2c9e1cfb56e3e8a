"""The proxy's traffic, as the recap worker and the garbage collector's schedule see it: how many
requests are being answered now, since when none has been, and which chats' locks requests wait
for. Recap work holds back while requests are answered (`busy`); a job that holds a chat a request
waits for lets go of it at its next pause point (`wanted`, `Worker._pause`)."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator

QUIET_S = 0.05
"""How long after a request the recap worker waits before taking a job."""


class Traffic:
    """Counters of the requests in progress (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._in_flight = 0
        self._last_answered = 0.0
        self._wanting: dict[str, int] = {}

    @contextlib.contextmanager
    def answering(self) -> Iterator[None]:
        """Count a request as in flight while it is being answered (the worker holds back)."""
        with self._lock:
            self._in_flight += 1
        try:
            yield
        finally:
            with self._lock:
                self._in_flight -= 1
                self._last_answered = time.monotonic()

    @contextlib.contextmanager
    def wanting(self, chat_id: str) -> Iterator[None]:
        """Count a request as waiting for (or holding) a chat's lock: a recap job that holds
        it lets go of it at its next pause point, until the request is done with it."""
        with self._lock:
            self._wanting[chat_id] = self._wanting.get(chat_id, 0) + 1
        try:
            yield
        finally:
            with self._lock:
                left = self._wanting.pop(chat_id) - 1
                if left:
                    self._wanting[chat_id] = left

    def wanted(self, chat_id: str) -> bool:
        return chat_id in self._wanting

    def busy(self) -> bool:
        """True while requests are being answered, and for a moment after one (a frontend
        often sends the next request at once): recap jobs wait for a quiet moment."""
        return self._in_flight > 0 or time.monotonic() - self._last_answered < QUIET_S

    def quiet_for(self) -> float:
        """Seconds since the last request was answered (0 while one is)."""
        if self._in_flight > 0:
            return 0.0
        return time.monotonic() - self._last_answered
