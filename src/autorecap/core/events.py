"""Chat events (seed 002) and a debouncer that runs on an injectable clock.

The seeds' handlers react to SillyTavern's events; here the `Session` fires the same events when
it changes a chat. Refreshes after `message_swiped`, `message_edited` and `more_messages_loaded`
go through a debouncer (SPEC-NOTES §4.12, 300 ms): a burst gives one refresh. Tests drive time
with `ManualClock`; real use runs on `ThreadClock`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol


class Event(StrEnum):
    """SillyTavern's event names that the seeds handle."""

    CHAT_CHANGED = "chat_changed"
    MESSAGE_SENT = "message_sent"
    MESSAGE_RECEIVED = "message_received"
    MESSAGE_EDITED = "message_edited"
    MESSAGE_DELETED = "message_deleted"
    MESSAGE_SWIPED = "message_swiped"
    MORE_MESSAGES_LOADED = "more_messages_loaded"


IMMEDIATE_REFRESH = frozenset(
    {Event.CHAT_CHANGED, Event.MESSAGE_SENT, Event.MESSAGE_RECEIVED, Event.MESSAGE_DELETED}
)
"""Events that refresh memory at once (seed 002: critical events); the rest debounce."""


class Cancellable(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    """Time for the core: what `now()` is and how to run something later."""

    def now(self) -> float:
        """Seconds, monotonic."""
        ...

    def call_later(self, delay: float, callback: Callable[[], None]) -> Cancellable:
        """Run `callback` after `delay` seconds."""
        ...

    def wall_ms(self) -> int:
        """Wall-clock time in milliseconds (timestamps of running recap versions)."""
        ...


class ThreadClock:
    """The real clock: callbacks run on timer threads."""

    def now(self) -> float:
        return time.monotonic()

    def call_later(self, delay: float, callback: Callable[[], None]) -> Cancellable:
        timer = threading.Timer(delay, callback)
        timer.daemon = True
        timer.start()
        return timer

    def wall_ms(self) -> int:
        return int(time.time() * 1000)


@dataclass(order=True)
class _Pending:
    due: float
    seq: int
    callback: Callable[[], None] = field(compare=False)
    cancelled: bool = field(default=False, compare=False)

    def cancel(self) -> None:
        self.cancelled = True


class ManualClock:
    """A clock that moves only when told to: `advance(seconds)` runs what falls due."""

    def __init__(self, start: float = 0.0, wall_ms: int = 1_700_000_000_000) -> None:
        self._now = start
        self._wall_start = wall_ms
        self._start = start
        self._pending: list[_Pending] = []
        self._seq = 0

    def now(self) -> float:
        return self._now

    def wall_ms(self) -> int:
        return self._wall_start + int((self._now - self._start) * 1000)

    def call_later(self, delay: float, callback: Callable[[], None]) -> Cancellable:
        self._seq += 1
        pending = _Pending(self._now + max(0.0, delay), self._seq, callback)
        self._pending.append(pending)
        return pending

    def advance(self, seconds: float) -> None:
        """Move time forward, running every callback that falls due, in order."""
        target = self._now + seconds
        while True:
            due = sorted(p for p in self._pending if not p.cancelled and p.due <= target)
            if not due:
                break
            first = due[0]
            self._pending.remove(first)
            self._now = first.due
            first.callback()
        self._pending = [p for p in self._pending if not p.cancelled]
        self._now = target

    @property
    def pending(self) -> int:
        """How many callbacks wait."""
        return sum(1 for p in self._pending if not p.cancelled)


class Debouncer:
    """Runs `callback` once, `delay` seconds after the last `trigger()`."""

    def __init__(self, clock: Clock, delay: float, callback: Callable[[], None]) -> None:
        self._clock = clock
        self.delay = delay
        self._callback = callback
        self._handle: Cancellable | None = None
        self._lock = threading.Lock()

    def trigger(self) -> None:
        """(Re)start the wait."""
        with self._lock:
            if self._handle is not None:
                self._handle.cancel()
            handle: list[Cancellable] = []
            handle.append(self._clock.call_later(self.delay, lambda: self._fire(handle[0])))
            self._handle = handle[0]

    def cancel(self) -> None:
        """Drop a pending call."""
        with self._lock:
            if self._handle is not None:
                self._handle.cancel()
                self._handle = None

    @property
    def pending(self) -> bool:
        """True while a call waits."""
        return self._handle is not None

    def _fire(self, handle: Cancellable) -> None:
        with self._lock:
            if self._handle is not handle:
                return  # cancelled or replaced after it fell due: a newer call will run
            self._handle = None
        self._callback()
