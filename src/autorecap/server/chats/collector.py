"""The garbage collector's schedule while a server runs: its full collections only between
requests.

The server keeps every open chat in memory: with a hundred chats of 1,000 messages that is
millions of objects that live as long as the server. CPython's collector walks all of them at
every full (generation 2) collection, which it starts on its own schedule: measured here such a
walk took up to 200 ms, during which no request is answered.

So, while a server runs, the collector's own full collections are off, and:
- a chat's objects, once loaded, go to the permanent generation (`gc.freeze()`): no collection
  walks them again;
- `tick()`, about four times a second, makes a full collection of what is not frozen (a few
  milliseconds) and freezes the survivors, when no request is being answered and a second has
  passed since the last one (`SWEEP_EVERY_S`), or after `SWEEP_AT_LATEST_S` whatever happens,
  so a server that is never quiet still collects;
- frozen objects are freed by reference counting as usual; only reference cycles among them (a
  chat let go of: its messages point back at it) wait for a deep sweep, which unfreezes and walks
  everything (200-350 ms for a hundred chats of 1,000 messages): when no request is open and
  none has come for `DEEP_QUIET_S` after chats were let go of, at the first moment with no
  request open once `DEEP_AFTER_DROPPED` chats were let go of (a busy server that cycles through
  more chats than it keeps open), and at least every `DEEP_AT_LATEST_S` whatever happens.

What it buys, measured by `bench/bench_proxy.py` (100 paced clients on chats of 1,000 messages,
2 cores, the same run otherwise): the added p99 not streaming was 3.4 ms with this schedule and
80 ms with CPython's own (its full collections walk the 100 chats in the middle of requests); the
medians were the same (2.0 and 1.9 ms). The deep sweep buys memory, not time: without it a chat
let go of would stay frozen for good (`tests/server/test_bounded_memory.py`). What the old
schedule added on top (a learnt share of what small sweeps freeze that dies later, which called
for deep sweeps in traffic) found nothing to free in that benchmark, and is gone.

The collector is the whole process's, so the schedule is too: the first server that starts it
turns it on, the last one that stops it gives the collector back as it was.
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable

SWEEP_EVERY_S = 1.0
"""How often a quiet server makes its (small) full collection."""
SWEEP_AT_LATEST_S = 30.0
"""A server that is never quiet still collects this often (a short pause, not a skipped one)."""
DEEP_QUIET_S = 10.0
"""How long a server must have been quiet, after chats were let go of, before a deep sweep."""
DEEP_AFTER_DROPPED = 32
"""Chats let go of since the last deep sweep after which a moment with no request open will do,
quiet or not: their frozen cycles are memory the server would otherwise keep for an hour."""
DEEP_AT_LATEST_S = 3600.0
"""A deep sweep at least this often, even in the middle of traffic (one pause an hour)."""
_OFF = 1_000_000_000
"""A generation 2 threshold that is never reached: the collector's own full collections off."""


class Collector:
    """See the module docstring. `busy()` says whether requests are being answered now,
    `quiet_for()` for how long none has been, and `idle()` whether no request is open at all
    (none waiting for its upstream either)."""

    _lock = threading.Lock()
    _users = 0
    _thresholds: tuple[int, int, int] = (700, 10, 10)

    def __init__(
        self,
        busy: Callable[[], bool] = lambda: False,
        quiet_for: Callable[[], float] = lambda: float("inf"),
        idle: Callable[[], bool] = lambda: True,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.busy = busy
        self.quiet_for = quiet_for
        self.idle = idle
        self.clock = clock
        self.started = False
        self.sweeps = 0
        self.deep_sweeps = 0
        self._last_sweep = clock()
        self._last_deep = clock()
        self._dropped = 0
        """Chats let go of since the last deep sweep (their cycles wait for one)."""

    def start(self) -> None:
        """Turn the collector's own full collections off and freeze what exists now."""
        if self.started:
            return
        with Collector._lock:
            if Collector._users == 0:
                Collector._thresholds = gc.get_threshold()
                young, middle, _ = Collector._thresholds
                gc.set_threshold(young, middle, _OFF)
                gc.freeze()
            Collector._users += 1
        self.started = True

    def stop(self) -> None:
        """Give the collector back as it was (everything unfrozen) when no server uses it."""
        if not self.started:
            return
        self.started = False
        with Collector._lock:
            Collector._users -= 1
            if Collector._users == 0:
                gc.unfreeze()
                gc.set_threshold(*Collector._thresholds)

    def loaded(self, chat_id: str) -> None:
        """A chat was loaded: its objects live as long as it stays open, never walk them."""
        if self.started:
            gc.freeze()

    def dropped(self, chat_id: str) -> None:
        """A chat was let go of: its frozen objects wait for the next deep sweep."""
        self._dropped += 1

    def tick(self) -> str | None:
        """The periodic call: a sweep, a deep sweep or nothing (the name of what was done)."""
        if not self.started:
            return None
        now = self.clock()
        if self._deep_due(now):
            self.sweep(deep=True)
            return "deep"
        since = now - self._last_sweep
        if (not self.busy() and since >= SWEEP_EVERY_S) or since >= SWEEP_AT_LATEST_S:
            self.sweep()
            return "sweep"
        return None

    def _deep_due(self, now: float) -> bool:
        if now - self._last_deep >= DEEP_AT_LATEST_S:
            return True
        if not self._dropped or not self.idle():
            return False
        return self._dropped >= DEEP_AFTER_DROPPED or (
            not self.busy() and self.quiet_for() >= DEEP_QUIET_S
        )

    def sweep(self, *, deep: bool = False) -> None:
        """A full collection of what is not frozen (`deep`: of everything), then freeze."""
        if deep:
            gc.unfreeze()
        gc.collect()
        gc.freeze()
        now = self.clock()
        self._last_sweep = now
        self.sweeps += 1
        if deep:
            self._last_deep = now
            self._dropped = 0
            self.deep_sweeps += 1
