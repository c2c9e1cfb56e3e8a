"""The server's recap worker refreshes a chat's memory when a job has changed it (as the seeds
refresh after a recap), so that the next request finds the memory up to date instead of paying
for every recap made since the last one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from autorecap.core.data import edit_memory, get_data, get_memory
from autorecap.core.slots import SCENE_KEY
from autorecap.jobs.queue import JobQueue
from autorecap.profiles import Profiles
from autorecap.recap.backends import make_backend
from autorecap.server.chats import refresh as freshness
from autorecap.server.proxy.turns import ProxyChats
from autorecap.store.sqlite import SQLiteStore

from .conftest import VOYAGE

CHAT = "after-recaps"
LINES = VOYAGE


def conversation() -> list[dict[str, str]]:
    """The chat of LINES as a client sends it: a system message, then turns in turn."""
    messages = [{"role": "system", "content": "You are Mira."}]
    for number, line in enumerate(LINES):
        messages.append({"role": "user" if number % 2 == 0 else "assistant", "content": line})
    return messages


def body(messages: list[dict[str, str]]) -> bytes:
    return orjson.dumps({"model": "m", "messages": messages})


def test_the_worker_leaves_the_memory_refreshed_after_its_jobs(tmp_path: Path) -> None:
    sqlite = SQLiteStore(tmp_path / "chats.db")
    registry = ProxyChats(sqlite, JobQueue(sqlite), profiles=Profiles(tmp_path / "settings.json"))
    try:
        messages = conversation()
        turn = registry.begin(CHAT, body(messages))
        registry.settle(turn)  # saves the chat and queues its recap jobs
        session = registry.session(CHAT)
        before = session.refreshes
        assert session.slots.value(SCENE_KEY) == ""  # nothing recapped yet

        worker = registry.worker(
            lambda settings: make_backend(settings, backend="offline"), idle_sleep=0.01
        )
        stats = worker.run(until_empty=True)
        assert stats.failed == 0, stats.errors

        chat = session.chat
        recapped = [m for m in chat.messages if get_memory(m)]
        assert recapped, "the offline engine recapped nothing"
        # No request came, yet the memory saw every recap: the worker refreshed it.
        assert session.refreshes > before
        assert all(get_data(m, "include") for m in recapped)
        assert not session.stale  # nothing left for the next request to refresh
    finally:
        registry.close()
        sqlite.close()


def recap_everything(tmp_path: Path) -> tuple[int, int, ProxyChats, SQLiteStore]:
    """(refreshes the worker made, message recaps it made) for a fresh chat of LINES."""
    sqlite = SQLiteStore(tmp_path / "chats.db")
    registry = ProxyChats(sqlite, JobQueue(sqlite), profiles=Profiles(tmp_path / "settings.json"))
    messages = conversation()
    registry.settle(registry.begin(CHAT, body(messages)))
    session = registry.session(CHAT)
    before = session.refreshes
    worker = registry.worker(
        lambda settings: make_backend(settings, backend="offline"), idle_sleep=0.01
    )
    stats = worker.run(until_empty=True)
    assert stats.failed == 0, stats.errors
    assert not session.stale  # whatever the pace, the chat is left refreshed
    recaps = sum(1 for m in session.chat.messages if get_memory(m))
    return session.refreshes - before, recaps, registry, sqlite


@pytest.mark.parametrize("every_s", [0.0, 3600.0])
def test_the_worker_refreshes_a_chat_at_most_every_refresh_every_s(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, every_s: float
) -> None:
    # A refresh costs about the same for one new recap as for many: while the worker goes
    # through a chat's backlog it refreshes at most every REFRESH_EVERY_S, then once more when
    # it runs out of jobs.
    monkeypatch.setattr(freshness, "REFRESH_EVERY_S", every_s)
    refreshes, recaps, registry, sqlite = recap_everything(tmp_path)
    try:
        assert recaps >= 2
        if every_s == 0.0:
            assert refreshes >= recaps  # after every job that changed the chat
        else:
            assert 0 < refreshes < recaps  # only when the worker ran out of jobs
    finally:
        registry.close()
        sqlite.close()


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[ProxyChats]:
    """A registry that has seen one request of CHAT (its first three LINES)."""
    sqlite = SQLiteStore(tmp_path / "chats.db")
    found = ProxyChats(sqlite, JobQueue(sqlite), profiles=Profiles(tmp_path / "settings.json"))
    messages = [{"role": "system", "content": "You are Mira."}]
    messages += [{"role": "user", "content": line} for line in LINES[:3]]
    try:
        found.settle(found.begin(CHAT, body(messages)))
        yield found
    finally:
        found.close()
        sqlite.close()


def test_a_refresh_put_off_by_the_interval_is_made_between_later_jobs(
    registry: ProxyChats, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A worker with a backlog on other chats may not come back to this one for a long time:
    # the refresh the interval put off is made between two later jobs, once it is over.
    monkeypatch.setattr(freshness, "REFRESH_EVERY_S", 3600.0)
    session = registry.session(CHAT)
    session.refresh()
    recapped = session.chat.messages[-1]
    with registry.hold(CHAT):
        edit_memory(recapped, "Vos wants forty crowns.")  # what a recap job writes
        registry.freshness.after_job(CHAT)  # as the job lets go of the chat
    assert session.stale  # put off: refreshed less than an interval ago
    registry.freshness.catch_up()  # the next job is done: the interval is not over
    assert session.stale
    monkeypatch.setattr(freshness, "REFRESH_EVERY_S", 0.0)
    registry.freshness.catch_up()
    assert not session.stale
    assert get_data(recapped, "include")  # the refresh saw the new recap
    refreshes = session.refreshes
    registry.freshness.catch_up()  # nothing left behind: no other refresh
    assert session.refreshes == refreshes


def test_the_worker_calls_after_job_once_per_job(registry: ProxyChats) -> None:
    calls: list[str] = []
    worker = registry.worker(
        lambda settings: make_backend(settings, backend="offline"), idle_sleep=0.01
    )
    worker.after_job = lambda: calls.append("after")
    stats = worker.run(until_empty=True)
    assert stats.done >= 3
    assert len(calls) == stats.done + stats.failed + stats.retried


def test_what_the_worker_saved_is_not_saved_again_by_the_next_turn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker's jobs save their recaps (and the running recap) themselves: the next turn's
    save writes the turn's own messages, not every message the worker recapped since."""
    sqlite = SQLiteStore(tmp_path / "chats.db")
    registry = ProxyChats(sqlite, JobQueue(sqlite), profiles=Profiles(tmp_path / "settings.json"))
    try:
        messages = conversation()
        registry.settle(registry.begin(CHAT, body(messages)))
        worker = registry.worker(
            lambda settings: make_backend(settings, backend="offline"), idle_sleep=0.01
        )
        assert worker.run(until_empty=True).failed == 0
        chat = registry.chat(CHAT)
        assert sum(1 for m in chat.messages if get_memory(m)) >= 4  # the worker wrote these

        saves: list[tuple[list[str], bool]] = []
        save = sqlite.save

        def recorded(chat_: object, **options: object) -> int:
            changed = list(options.pop("changed", ()))  # type: ignore[call-overload]
            saves.append(([m.text for m in changed], bool(options.get("header"))))
            return save(chat_, changed=changed, **options)  # type: ignore[arg-type]

        monkeypatch.setattr(sqlite, "save", recorded)
        messages.append({"role": "user", "content": "We drink to the pardon."})
        turn = registry.begin(CHAT, body(messages))
        registry.finish(turn, "Mira raises her cup.")
        assert saves == [(["We drink to the pardon.", "Mira raises her cup."], False)]
    finally:
        registry.close()
        sqlite.close()
