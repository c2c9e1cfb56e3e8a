"""Keeping Python's cyclic garbage collector from pausing the proxy in the middle of a request.

The proxy keeps every open chat in memory: with a hundred chats of 1,000 messages that is
millions of objects that live as long as the server. CPython's collector walks all of them at
every full (generation 2) collection, which it starts on its own schedule, and measured here such a
walk took up to 200 ms, during which no request is answered.

So while a server runs, the collector's own full collections are off. Instead the server calls
`HeapKeeper.tick()` about once a second: when no request is being answered, it makes a full
collection and then moves every surviving object to the permanent generation (`gc.freeze()`), so
the next one walks only what was made since, a few milliseconds' worth. A freshly loaded chat is
frozen at once (`loaded()`). Frozen objects are still freed by reference counting as usual; only
reference cycles among them (a deleted chat: its messages point back at it) wait for a deep sweep,
which unfreezes everything and collects it all, pausing the whole process for as long as it walks
(200-350 ms for a hundred chats of 1,000 messages). So it waits for a moment when no request is
open at all, a streamed answer included (`idle`): when the server has been quiet for a while
(`DEEP_QUIET_S`), or when what may have died frozen has grown by half of what is frozen alive;
and at least once an hour whatever happens, and at shutdown.

What may have died frozen: the objects of the chats dropped since the last deep sweep (all of
them), and a share of what the sweeps froze since (`death_rate`). Most of those are alive for
good (a chat's new messages, their recaps); some were a request's state that happened to be in
flight at the sweep and may die in a cycle later. Each deep sweep counts what it found dead and
sets the share from it, so a server whose sweeps freeze no garbage pays for no long walks, and
one that does is swept as often as its garbage calls for. (Counting everything the sweeps froze
as possibly dead, as this keeper first did, made a 300 ms walk in the middle of the paced
benchmark every two minutes; the walks found nothing.)

The collector is process-wide, so the keeper is too: the first server that starts it turns it on,
the last one that stops it restores the collector as it was.
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
"""How long a server must have been quiet before a deep sweep (which walks everything)."""
DEEP_EVERY_S = 600.0
"""How often a deep sweep is wanted, at most."""
DEEP_GROWTH = 1.5
"""A deep sweep at the next idle moment, quiet or not, once what may have died frozen reaches
this many times what is frozen alive: cycles that died frozen (a busy server is never quiet for
long) cannot pile up for long (how far a share taken too low lets them: `DEATH_RATE_FLOOR`)."""
DEATH_RATE_START = 0.25
"""The share of what the sweeps froze that is taken to die in cycles, until a deep sweep has
measured it. This server's own paced benchmark measured none of 190,000 objects."""
DEATH_RATE_FLOOR = 0.2
"""The least share taken. Should the small sweeps start to freeze objects that die in cycles
after a deep sweep found none, those reach at most (DEEP_GROWTH - 1) / DEATH_RATE_FLOOR = 2.5
times the live frozen heap before a deep sweep (or the hourly one) finds them; it then raises
the share, and the bound is half the heap again."""
EVIDENCE = 10_000
"""What the sweeps must have frozen before a deep sweep's count changes the share."""
DEEP_AT_LATEST_S = 3600.0
"""A deep sweep at least this often, even in the middle of traffic (one pause an hour)."""
_OFF = 1_000_000_000
"""A generation 2 threshold that is never reached: the collector's own full collections off."""


class HeapKeeper:
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
        self._dropped = False
        self._frozen_after_deep = 0
        """What the last deep sweep froze (alive then)."""
        self._loaded_recently: set[str] = set()
        """The open chats loaded since (their objects were alive when frozen)."""
        self._dropped_since_deep = 0
        """Objects of chats dropped since (dead)."""
        self._swept_since_deep = 0
        """Objects the sweeps froze since (`death_rate` of them taken as dead)."""
        self.death_rate = DEATH_RATE_START
        """The share of what the sweeps freeze that dies in cycles, as the last deep sweep
        found it (see the module docstring)."""
        self._chats: dict[str, int] = {}
        """Objects frozen when each open chat was loaded."""

    def start(self) -> None:
        """Turn the collector's own full collections off and freeze what exists now."""
        if self.started:
            return
        with HeapKeeper._lock:
            if HeapKeeper._users == 0:
                HeapKeeper._thresholds = gc.get_threshold()
                young, middle, _ = HeapKeeper._thresholds
                gc.set_threshold(young, middle, _OFF)
                gc.freeze()
            HeapKeeper._users += 1
        self.started = True
        self._frozen_after_deep = gc.get_freeze_count()

    def stop(self) -> None:
        """Give the collector back as it was (everything unfrozen) when no server uses it."""
        if not self.started:
            return
        self.started = False
        with HeapKeeper._lock:
            HeapKeeper._users -= 1
            if HeapKeeper._users == 0:
                gc.unfreeze()
                gc.set_threshold(*HeapKeeper._thresholds)

    def loaded(self, chat_id: str) -> None:
        """A chat was loaded: its objects live as long as the server, never walk them again."""
        if self.started:
            frozen = self._freeze()
            self._chats[chat_id] = self._chats.get(chat_id, 0) + frozen
            self._loaded_recently.add(chat_id)

    def _freeze(self) -> int:
        """`gc.freeze()`; returns how many objects it froze (only what is not frozen yet is
        counted: `gc.get_freeze_count()` would walk everything)."""
        count = sum(len(gc.get_objects(generation)) for generation in range(3))
        gc.freeze()
        return count

    def dropped(self, chat_id: str) -> None:
        """A chat was forgotten: its frozen objects wait for the next deep sweep."""
        self._dropped = True
        self._dropped_since_deep += self._chats.pop(chat_id, 0)
        self._loaded_recently.discard(chat_id)  # no longer alive

    def tick(self) -> str | None:
        """The periodic call: a sweep, a deep sweep or nothing (the name of what was done)."""
        if not self.started:
            return None
        now = self.clock()
        since = now - self._last_sweep
        quiet = not self.busy()
        if self._deep_due(now, quiet):
            self.sweep(deep=True)
            return "deep"
        if (quiet and since >= SWEEP_EVERY_S) or since >= SWEEP_AT_LATEST_S:
            self.sweep()
            return "sweep"
        return None

    def _deep_due(self, now: float, quiet: bool) -> bool:
        if now - self._last_deep >= DEEP_AT_LATEST_S:
            return True
        if not quiet or not self.idle():
            return False
        if self.maybe_dead() >= (DEEP_GROWTH - 1) * self.frozen_alive():
            return True
        wanted = self._dropped or now - self._last_deep >= DEEP_EVERY_S
        return wanted and self.quiet_for() >= DEEP_QUIET_S

    def maybe_dead(self) -> float:
        """How many frozen objects may have died in cycles since the last deep sweep."""
        return self._dropped_since_deep + self.death_rate * self._swept_since_deep

    def frozen_alive(self) -> int:
        """How many objects were alive when frozen: what the last deep sweep kept, the chats
        loaded since (at least 10,000, so that a small heap is not swept for a handful)."""
        loaded = sum(self._chats[chat_id] for chat_id in self._loaded_recently)
        return max(self._frozen_after_deep + loaded, 10_000)

    def sweep(self, *, deep: bool = False) -> None:
        """A full collection of what is not frozen (`deep`: of everything), then freeze."""
        if deep:
            gc.unfreeze()
        found = gc.collect()  # every unreachable container, frozen or not (refcounting's
        # frees are not counted): what the last small sweep left counts as the sweeps' garbage,
        # which errs toward sweeping sooner
        if deep:
            gc.freeze()
            self._learn(found)
            self._frozen_after_deep = gc.get_freeze_count()  # the one walk of everything
            self._dropped_since_deep = self._swept_since_deep = 0
            self._loaded_recently.clear()
        else:
            self._swept_since_deep += self._freeze()
        now = self.clock()
        self._last_sweep = now
        self.sweeps += 1
        if deep:
            self._last_deep = now
            self._dropped = False
            self.deep_sweeps += 1

    def _learn(self, found: int) -> None:
        """Set `death_rate` from what a deep sweep `found` dead: less the dropped chats'
        objects, the rest is taken to be what the sweeps froze. With chats dropped, the share
        is only raised: what a dropped chat froze at its loading may have been freed by
        reference counting or be alive still, so the difference understates the rest."""
        if self._swept_since_deep < EVIDENCE:
            return  # too few to tell
        share = max(found - self._dropped_since_deep, 0) / self._swept_since_deep
        if self._dropped_since_deep and share < self.death_rate:
            return
        self.death_rate = min(max(share, DEATH_RATE_FLOOR), 1.0)
