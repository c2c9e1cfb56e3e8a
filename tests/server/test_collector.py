"""The server's garbage collector schedule (`server.chats.collector`): full collections only
when quiet, long-lived objects frozen, dropped chats reclaimed, the collector given back as it
was."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from autorecap.server.chats import collector as schedule
from autorecap.server.chats.collector import Collector


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
def keeper(clock: Clock, state: dict[str, float | bool]) -> Iterator[Collector]:
    keeper = Collector(
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
    keeper = Collector()
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
    first, second = Collector(), Collector()
    first.start()
    second.start()
    first.stop()
    assert gc.get_threshold()[2] > 1_000_000  # the second server still runs
    second.stop()
    assert gc.get_threshold() == before
    second.stop()  # stopping twice changes nothing
    assert gc.get_threshold() == before


def test_a_quiet_tick_collects_new_cycles_and_freezes_the_survivors(
    keeper: Collector, clock: Clock
) -> None:
    garbage = Node()
    dead = weakref.ref(garbage)
    del garbage
    kept = Node()
    clock.now += schedule.SWEEP_EVERY_S
    assert keeper.tick() == "sweep"
    assert dead() is None
    assert any(obj is kept for obj in gc.get_objects(2)) is False  # frozen, not in a generation


def test_no_sweep_while_requests_are_answered_until_the_latest_moment(
    keeper: Collector, clock: Clock, state: dict[str, float | bool]
) -> None:
    state["busy"] = True
    clock.now += schedule.SWEEP_EVERY_S * 5
    assert keeper.tick() is None
    clock.now += schedule.SWEEP_AT_LATEST_S
    assert keeper.tick() == "sweep"
    assert keeper.sweeps == 1


def test_no_sweep_more_often_than_its_interval(keeper: Collector, clock: Clock) -> None:
    clock.now += schedule.SWEEP_EVERY_S
    assert keeper.tick() == "sweep"
    clock.now += schedule.SWEEP_EVERY_S / 2
    assert keeper.tick() is None


def test_a_dropped_chat_is_reclaimed_by_the_deep_sweep_after_a_quiet_spell(
    keeper: Collector, clock: Clock, state: dict[str, float | bool]
) -> None:
    chat = Node()
    dead = weakref.ref(chat)
    keeper.loaded("chat")  # frozen: an ordinary sweep does not see it
    del chat
    clock.now += schedule.SWEEP_EVERY_S
    assert keeper.tick() == "sweep"
    assert dead() is not None
    keeper.dropped("chat")
    state["quiet"] = schedule.DEEP_QUIET_S / 2
    clock.now += schedule.SWEEP_EVERY_S
    assert keeper.tick() == "sweep"  # not quiet long enough for the long walk
    assert dead() is not None
    state["quiet"] = schedule.DEEP_QUIET_S
    assert keeper.tick() == "deep"
    assert dead() is None
    assert keeper.deep_sweeps == 1
    assert gc.get_freeze_count() > 0  # frozen again after the walk


def test_a_stopped_keeper_does_nothing(clock: Clock) -> None:
    keeper = Collector(clock=clock)
    clock.now += 1000
    assert keeper.tick() is None
    keeper.loaded("chat")
    assert gc.get_freeze_count() == 0


def test_a_deep_sweep_at_least_once_an_hour_even_in_traffic(
    keeper: Collector, clock: Clock, state: dict[str, float | bool]
) -> None:
    state["busy"] = True
    clock.now += schedule.DEEP_AT_LATEST_S
    assert keeper.tick() == "deep"


def test_the_deep_sweep_waits_for_no_request_to_be_open(
    keeper: Collector, clock: Clock, state: dict[str, float | bool]
) -> None:
    keeper.dropped("chat")
    state["quiet"] = schedule.DEEP_QUIET_S * 2
    state["streaming"] = True  # an answer still streaming: a long walk would stall it
    clock.now += schedule.SWEEP_EVERY_S
    assert keeper.tick() == "sweep"
    state["streaming"] = False
    clock.now += schedule.SWEEP_EVERY_S
    assert keeper.tick() == "deep"
    clock.now += schedule.SWEEP_EVERY_S
    assert keeper.tick() == "sweep"  # nothing dropped since: no walk of everything


def test_many_chats_let_go_of_call_for_a_deep_sweep_without_a_quiet_spell(
    keeper: Collector, clock: Clock, state: dict[str, float | bool]
) -> None:
    state["quiet"] = 0.0  # a busy server: never quiet for long
    for number in range(schedule.DEEP_AFTER_DROPPED - 1):
        keeper.dropped(f"chat-{number}")
    clock.now += schedule.SWEEP_EVERY_S
    assert keeper.tick() == "sweep"
    keeper.dropped("one more")
    clock.now += schedule.SWEEP_EVERY_S
    state["streaming"] = True  # but not while a request is open
    assert keeper.tick() == "sweep"
    state["streaming"] = False
    assert keeper.tick() == "deep"
