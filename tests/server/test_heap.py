"""The server's garbage collector schedule (`server.heap`): full collections only when quiet,
long-lived objects frozen, nothing leaked for good, the collector given back as it was."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from autorecap.server import heap as heap_module
from autorecap.server.heap import HeapKeeper


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Node:
    """An object in a reference cycle (only the cyclic collector frees it)."""

    def __init__(self) -> None:
        self.me = self


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def state() -> dict[str, float | bool]:
    return {"busy": False, "quiet": 0.0, "streaming": False}


@pytest.fixture
def keeper(clock: Clock, state: dict[str, float | bool]) -> Iterator[HeapKeeper]:
    keeper = HeapKeeper(
        lambda: bool(state["busy"]),
        lambda: float(state["quiet"]),
        lambda: not state["streaming"],
        clock=clock,
    )
    keeper.start()
    try:
        yield keeper
    finally:
        keeper.stop()


def test_start_turns_automatic_full_collections_off_and_stop_restores_everything() -> None:
    before = gc.get_threshold()
    keeper = HeapKeeper()
    keeper.start()
    try:
        assert gc.get_threshold()[:2] == before[:2]
        assert gc.get_threshold()[2] > 1_000_000
        assert gc.get_freeze_count() > 0
    finally:
        keeper.stop()
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_two_servers_share_the_collector_until_the_last_one_stops() -> None:
    before = gc.get_threshold()
    first, second = HeapKeeper(), HeapKeeper()
    first.start()
    second.start()
    first.stop()
    assert gc.get_threshold()[2] > 1_000_000  # the second server still runs
    second.stop()
    assert gc.get_threshold() == before
    second.stop()  # stopping twice changes nothing
    assert gc.get_threshold() == before


def test_a_quiet_tick_collects_new_cycles_and_freezes_the_survivors(
    keeper: HeapKeeper, clock: Clock
) -> None:
    garbage = Node()
    dead = weakref.ref(garbage)
    del garbage
    kept = Node()
    clock.now += heap_module.SWEEP_EVERY_S
    assert keeper.tick() == "sweep"
    assert dead() is None
    assert any(obj is kept for obj in gc.get_objects(2)) is False  # frozen, not in a generation


def test_no_sweep_while_requests_are_answered_until_the_latest_moment(
    keeper: HeapKeeper, clock: Clock, state: dict[str, float | bool]
) -> None:
    state["busy"] = True
    clock.now += heap_module.SWEEP_EVERY_S * 5
    assert keeper.tick() is None
    clock.now += heap_module.SWEEP_AT_LATEST_S
    assert keeper.tick() == "sweep"
    assert keeper.sweeps == 1


def test_no_sweep_more_often_than_its_interval(keeper: HeapKeeper, clock: Clock) -> None:
    clock.now += heap_module.SWEEP_EVERY_S
    assert keeper.tick() == "sweep"
    clock.now += heap_module.SWEEP_EVERY_S / 2
    assert keeper.tick() is None


def test_a_dropped_chat_is_reclaimed_by_the_deep_sweep_after_a_quiet_spell(
    keeper: HeapKeeper, clock: Clock, state: dict[str, float | bool]
) -> None:
    chat = Node()
    dead = weakref.ref(chat)
    keeper.loaded("chat")  # frozen: an ordinary sweep does not see it
    del chat
    clock.now += heap_module.SWEEP_EVERY_S
    assert keeper.tick() == "sweep"
    assert dead() is not None
    keeper.dropped("chat")
    state["quiet"] = heap_module.DEEP_QUIET_S / 2
    clock.now += heap_module.SWEEP_EVERY_S
    assert keeper.tick() == "sweep"  # not quiet long enough for the long walk
    assert dead() is not None
    state["quiet"] = heap_module.DEEP_QUIET_S
    assert keeper.tick() == "deep"
    assert dead() is None
    assert keeper.deep_sweeps == 1
    assert gc.get_freeze_count() > 0  # frozen again after the walk


def test_a_stopped_keeper_does_nothing(clock: Clock) -> None:
    keeper = HeapKeeper(clock=clock)
    clock.now += 1000
    assert keeper.tick() is None
    keeper.loaded("chat")
    assert gc.get_freeze_count() == 0


def test_frozen_cycles_of_a_busy_server_are_reclaimed_once_the_frozen_heap_has_grown(
    keeper: HeapKeeper,
    clock: Clock,
    state: dict[str, float | bool],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A server that is never quiet for long (`quiet_for` stays short) still reclaims cycles
    that died frozen, at a moment no request is open, once they pile up (here by 1% of what
    is frozen alive, not half: the test process may hold millions of objects)."""
    monkeypatch.setattr(heap_module, "DEEP_GROWTH", 1.01)
    state["quiet"] = 1.0
    clock.now += heap_module.SWEEP_EVERY_S
    assert keeper.tick() == "sweep"  # nothing has grown yet
    enough = int(0.02 * keeper.frozen_alive()) + 1  # 1% of what is frozen once they are
    nodes = [Node() for _ in range(enough)]
    dead = weakref.ref(nodes[0])
    keeper.loaded("chat")
    clock.now += heap_module.SWEEP_EVERY_S
    assert keeper.tick() == "sweep"  # a chat loaded is alive: no reason for the long walk
    del nodes
    keeper.dropped("chat")
    state["busy"] = True
    clock.now += heap_module.SWEEP_EVERY_S
    assert keeper.tick() is None  # not while a request is being computed
    state["busy"] = False
    state["streaming"] = True
    assert keeper.tick() == "sweep"  # nor while an answer streams: the walk would stall it
    assert dead() is not None
    state["streaming"] = False
    assert keeper.tick() == "deep"
    assert dead() is None


def test_what_sweeps_froze_counts_toward_a_deep_sweep(
    keeper: HeapKeeper,
    clock: Clock,
    state: dict[str, float | bool],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Objects a sweep froze may die in cycles later: their share (`death_rate`) counts toward
    the growth."""
    monkeypatch.setattr(heap_module, "DEEP_GROWTH", 1.01)
    state["quiet"] = 1.0
    assert keeper.death_rate == heap_module.DEATH_RATE_START  # nothing measured yet
    enough = int(0.01 * keeper.frozen_alive() / keeper.death_rate) + 1
    nodes = [Node() for _ in range(enough)]
    dead = weakref.ref(nodes[0])
    clock.now += heap_module.SWEEP_EVERY_S
    assert keeper.tick() == "sweep"  # the nodes survive it, frozen
    del nodes
    clock.now += heap_module.SWEEP_EVERY_S
    assert keeper.tick() == "deep"
    assert dead() is None


def test_a_deep_sweep_that_finds_nothing_dead_makes_what_sweeps_freeze_count_for_less(
    keeper: HeapKeeper,
    clock: Clock,
    state: dict[str, float | bool],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What the sweeps froze was alive for good (a chat's new messages): the deep sweep finds
    no garbage, and the same growth again no longer calls for the long walk."""
    monkeypatch.setattr(heap_module, "DEEP_GROWTH", 1.01)
    monkeypatch.setattr(heap_module, "EVIDENCE", 1)
    state["quiet"] = 1.0
    gc.collect()  # no stray garbage for the deep sweep to count
    enough = int(0.01 * keeper.frozen_alive() / keeper.death_rate) + 1
    alive = [Node() for _ in range(enough)]
    clock.now += heap_module.SWEEP_EVERY_S
    assert keeper.tick() == "sweep"
    clock.now += heap_module.SWEEP_EVERY_S
    assert keeper.tick() == "deep"  # taken on trust the first time
    assert keeper.death_rate == heap_module.DEATH_RATE_FLOOR
    more = [Node() for _ in range(enough)]
    for _ in range(3):
        clock.now += heap_module.SWEEP_EVERY_S
        assert keeper.tick() == "sweep"
    assert keeper.deep_sweeps == 1
    assert len(alive) + len(more) == 2 * enough


def test_a_deep_sweep_that_finds_what_sweeps_froze_dead_raises_their_share(
    keeper: HeapKeeper,
    clock: Clock,
    state: dict[str, float | bool],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Cycles that died frozen, found by a deep sweep after a quiet spell: the share goes up,
    so the next ones are swept up on growth again."""
    monkeypatch.setattr(heap_module, "EVIDENCE", 1)
    keeper.death_rate = heap_module.DEATH_RATE_FLOOR
    gc.collect()
    nodes = [Node() for _ in range(1000)]
    dead = weakref.ref(nodes[0])
    clock.now += heap_module.SWEEP_EVERY_S
    assert keeper.tick() == "sweep"  # frozen alive
    del nodes
    state["quiet"] = heap_module.DEEP_QUIET_S
    clock.now += heap_module.DEEP_EVERY_S
    assert keeper.tick() == "deep"
    assert dead() is None
    assert keeper.death_rate > 0.9  # all of them (the list itself too) died


def test_a_deep_sweep_at_least_once_an_hour_even_in_traffic(
    keeper: HeapKeeper, clock: Clock, state: dict[str, float | bool]
) -> None:
    state["busy"] = True
    clock.now += heap_module.DEEP_AT_LATEST_S
    assert keeper.tick() == "deep"


def test_a_chat_loaded_then_dropped_counts_as_dead_and_no_longer_as_alive(
    keeper: HeapKeeper,
) -> None:
    alive = keeper.frozen_alive()
    nodes = [Node() for _ in range(20_000)]
    keeper.loaded("chat")
    assert keeper.frozen_alive() >= alive + len(nodes)
    assert keeper.maybe_dead() < len(nodes)
    del nodes
    keeper.dropped("chat")
    assert keeper.frozen_alive() == alive
    assert keeper.maybe_dead() >= 20_000


def test_after_a_deep_sweep_nothing_is_counted_as_maybe_dead(
    keeper: HeapKeeper, clock: Clock, state: dict[str, float | bool]
) -> None:
    kept = [Node() for _ in range(1000)]
    keeper.loaded("chat")
    keeper.dropped("chat")
    clock.now += heap_module.SWEEP_EVERY_S
    assert keeper.tick() == "sweep"  # freezes what the test made since
    assert keeper.maybe_dead() > 0
    state["quiet"] = heap_module.DEEP_QUIET_S
    assert keeper.tick() == "deep"
    assert keeper.maybe_dead() == 0
    assert keeper.frozen_alive() >= len(kept)


def test_a_deep_sweep_that_frees_dropped_chats_does_not_lower_the_share(
    keeper: HeapKeeper,
    clock: Clock,
    state: dict[str, float | bool],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Part of what a dropped chat froze at its loading may be alive still: the count cannot
    tell the sweeps' share apart, so it is only ever raised then."""
    monkeypatch.setattr(heap_module, "EVIDENCE", 1)
    gc.collect()
    chat = [Node() for _ in range(5000)]
    keeper.loaded("chat")
    alive = [Node() for _ in range(5000)]
    clock.now += heap_module.SWEEP_EVERY_S
    assert keeper.tick() == "sweep"  # the alive nodes, frozen by a sweep
    del chat
    keeper.dropped("chat")
    state["quiet"] = heap_module.DEEP_QUIET_S
    assert keeper.tick() == "deep"
    assert keeper.death_rate == heap_module.DEATH_RATE_START
    assert len(alive) == 5000


def test_a_deep_sweep_after_too_few_swept_objects_keeps_the_share(
    keeper: HeapKeeper, clock: Clock, state: dict[str, float | bool]
) -> None:
    keeper.death_rate = 0.5
    state["busy"] = True
    clock.now += heap_module.DEEP_AT_LATEST_S
    assert keeper.tick() == "deep"  # the hourly one, with next to nothing swept
    assert keeper.death_rate == 0.5
