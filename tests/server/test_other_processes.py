"""The server reads in what other processes save to its store (an `autorecap worker` beside
`autorecap serve --no-worker`, the command line), and never writes over it.

A second store on the same database stands for the other process, on SQLite (a second
connection to the file: SQLite tells a connection of another's commits the same way whether it
is in this process or not) and on PostgreSQL (a second pool: its notices reach the first
store's listener as another server's would).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from autorecap.core import running
from autorecap.core.data import get_data, get_memory, set_data
from autorecap.core.slots import SCENE_KEY, SHORT_KEY
from autorecap.jobs.queue import JobQueue
from autorecap.jobs.runner import Worker
from autorecap.profiles import Profiles
from autorecap.recap.backend import RecapBackend
from autorecap.recap.backends import make_backend
from autorecap.server.chats import refresh as freshness
from autorecap.server.proxy.turns import ProxyChats
from autorecap.settings import Settings
from autorecap.store import ChatStore, open_store

from .conftest import VOYAGE

CHAT = "elsewhere"
LINES = VOYAGE[:6]


def body(lines: list[str]) -> bytes:
    messages = [{"role": "system", "content": "You are Mira."}]
    for number, line in enumerate(lines):
        messages.append({"role": "user" if number % 2 == 0 else "assistant", "content": line})
    return orjson.dumps({"model": "m", "messages": messages})


@pytest.fixture
def setup(db_url: str, tmp_path: Path) -> Iterator[tuple[ProxyChats, ChatStore]]:
    """A registry holding CHAT in memory, and another store on its database."""
    mine = open_store(db_url)
    registry = ProxyChats(mine, JobQueue(mine), profiles=Profiles(tmp_path / "settings.json"))
    registry.settle(registry.begin(CHAT, body(LINES)))
    mine.data_version()  # listening from here on (PostgreSQL)
    other = open_store(db_url)
    yield registry, other
    other.close()
    registry.close()
    mine.close()


def pulled(registry: ProxyChats) -> int:
    """`pull_changed` once the other process's save is known: at once on SQLite, when its
    notice has come on PostgreSQL (within milliseconds; at most 5 s)."""
    deadline = time.monotonic() + 5
    while True:
        count = registry.outside.pull_changed()
        if count or time.monotonic() > deadline:
            return count
        time.sleep(0.005)


def recap_elsewhere(other: ChatStore, *indexes: int) -> None:
    theirs = other.load_chat(CHAT)
    for index in indexes:
        set_data(theirs.messages[index], "memory", f"recap {index} made elsewhere")
    other.save(theirs, changed=[theirs.messages[i] for i in indexes])


def test_recaps_saved_by_another_process_are_read_in_and_injected(
    setup: tuple[ProxyChats, ChatStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(freshness, "REFRESH_EVERY_S", 0.0)  # refreshed as soon as read in
    registry, other = setup
    session = registry.session(CHAT)
    assert session.slots.value(SHORT_KEY) == ""
    recap_elsewhere(other, 1, 2, 3)
    assert pulled(registry) == 1
    chat = session.chat
    assert [get_memory(chat.messages[i]) for i in (1, 2, 3)] == [
        f"recap {i} made elsewhere" for i in (1, 2, 3)
    ]
    assert registry.outside.pull_changed() == 0  # nothing new since
    # Read in as the in-process worker's recaps are: the memory is refreshed at once.
    assert not session.stale
    assert all(get_data(chat.messages[i], "include") for i in (1, 2, 3))
    # A running recap version made elsewhere is read in and injected into the next request.
    theirs = other.load_chat(CHAT)
    running.add_version(
        theirs,
        "The Heron sailed east with the ledger.",
        scene_count=1,
        excluded_count=0,
        prev_scene_index=-1,
        new_scene_index=3,
        now_ms=0,
    )
    other.save(theirs, header=True)
    assert pulled(registry) == 1
    assert "The Heron sailed east" in session.slots.value(SCENE_KEY)
    turn = registry.begin(CHAT, body([*LINES, "Where now?"]))
    sent = orjson.loads(turn.body)["messages"]
    assert any("The Heron sailed east" in str(m.get("content")) for m in sent)
    registry.settle(turn)
    assert running.current(other.load_chat(CHAT))["content"].startswith("The Heron sailed")


def test_a_save_whose_notice_was_lost_is_read_in_by_the_recheck(
    setup: tuple[ProxyChats, ChatStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A notice can be lost (PostgreSQL names the chats another process saved; a listening
    connection that broke, or a notice taken for our own, names none): the look at every open
    chat's revision that `watch` makes every `RECHECK_S` reads the save in anyway."""
    registry, other = setup
    session = registry.session(CHAT)
    recap_elsewhere(other, 1)
    pulled(registry)  # whatever the notices said, taken
    recap_elsewhere(other, 2)
    monkeypatch.setattr(registry.store, "data_version", lambda: -1)  # no change heard of
    monkeypatch.setattr(registry.store, "changed_chats", lambda: set())  # nor any chat named
    registry.outside.pull_changed()
    assert registry.outside.pull_changed() == 0
    assert get_memory(session.chat.messages[2]) != "recap 2 made elsewhere"
    assert registry.outside.pull_changed(every=True) == 1
    assert get_memory(session.chat.messages[2]) == "recap 2 made elsewhere"


def test_a_save_over_a_row_saved_elsewhere_keeps_both_changes(
    setup: tuple[ProxyChats, ChatStore],
) -> None:
    registry, other = setup
    recap_elsewhere(other, 2)
    # The server changes the same message before it has read the other process's save.
    with registry.edit(CHAT) as session:
        set_data(session.chat.messages[2], "exclude", True)
    stored = other.load_chat(CHAT).messages[2]
    assert get_memory(stored) == "recap 2 made elsewhere"
    assert get_data(stored, "exclude") is True
    assert get_memory(registry.chat(CHAT).messages[2]) == "recap 2 made elsewhere"


def test_the_next_turn_saves_without_undoing_recaps_made_elsewhere(
    setup: tuple[ProxyChats, ChatStore],
) -> None:
    registry, other = setup
    recap_elsewhere(other, 1, 4)
    turn = registry.begin(CHAT, body([*LINES, "Where now?"]))
    registry.record(turn, "To Ilmar.")
    registry.settle(turn)
    stored = other.load_chat(CHAT)
    assert get_memory(stored.messages[1]) == "recap 1 made elsewhere"
    assert get_memory(stored.messages[4]) == "recap 4 made elsewhere"
    assert [m.text for m in stored.messages][-2:] == ["Where now?", "To Ilmar."]


def test_a_chat_reshaped_elsewhere_is_read_again(
    setup: tuple[ProxyChats, ChatStore],
) -> None:
    registry, other = setup
    before = registry.session(CHAT)
    theirs = other.load_chat(CHAT)
    del theirs.messages[-1]
    other.save(theirs, structure=True)
    assert pulled(registry) == 1
    after = registry.session(CHAT)
    assert after is not before
    assert len(after.chat.messages) == len(LINES) - 1
    # The client's list is still the truth: its next request puts the message back.
    registry.settle(registry.begin(CHAT, body(LINES)))
    assert [m.text for m in other.load_chat(CHAT).messages] == LINES


def test_a_turn_survives_its_chat_being_reshaped_elsewhere_twice_before_its_save(
    setup: tuple[ProxyChats, ChatStore],
) -> None:
    # Only the last copy dropped was remembered: a turn begun on an earlier one was taken
    # for a turn on a deleted chat, and its messages were not kept (seen once under load in
    # the PostgreSQL soak test: a user's last turn missing).
    registry, other = setup
    asked = [*LINES, "Where do we anchor tonight?"]
    turn = registry.begin(CHAT, body(asked))
    registry.record(turn, "In the lee of the Gullstone.")
    for _ in range(2):  # another server reshapes the chat, and this one reads it again
        theirs = other.load_chat(CHAT)
        del theirs.messages[-1]
        other.save(theirs, structure=True)
        assert pulled(registry) == 1
        registry.session(CHAT)
    registry.settle(turn)
    stored = [m.text for m in other.load_chat(CHAT).messages]
    assert stored == [*asked, "In the lee of the Gullstone."]


class _InterruptedOnce:
    """The offline engine; during its first message recap, another process saves a change to
    the same message (which the worker's save must not undo)."""

    def __init__(self, inner: RecapBackend, other: ChatStore, index: int) -> None:
        self.inner = inner
        self.other = other
        self.index = index
        self.name = inner.name
        self.calls = 0

    def message_recap(self, request: object) -> object:
        self.calls += 1
        if self.calls == 1:
            theirs = self.other.load_chat(CHAT)
            set_data(theirs.messages[self.index], "noted_elsewhere", True)
            self.other.save(theirs, changed=[theirs.messages[self.index]])
        return self.inner.message_recap(request)  # type: ignore[arg-type]

    def message_recaps(self, requests: list[object]) -> list[object]:
        return [self.message_recap(request) for request in requests]

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)


@pytest.mark.parametrize("shared", [True, False], ids=["server-worker", "standalone-worker"])
def test_a_job_whose_save_was_refused_runs_again_on_the_changes(
    setup: tuple[ProxyChats, ChatStore], shared: bool
) -> None:
    registry, other = setup
    queue = registry.queue
    jobs = [j for j in queue.list(chat_id=CHAT) if j.kind == "message_recap"]
    first = min(jobs, key=lambda job: job.id)  # taken first: its message is interrupted
    index = [m.id for m in registry.chat(CHAT).messages].index(first.target)
    backends: list[_InterruptedOnce] = []

    def backend_for(settings: Settings) -> RecapBackend:
        backends.append(_InterruptedOnce(make_backend(settings, backend="offline"), other, index))
        return backends[-1]  # type: ignore[return-value]

    if shared:
        worker = registry.worker(backend_for, idle_sleep=0.01)
    else:
        worker = Worker(JobQueue(other), backend_for, idle_sleep=0.01)
    stats = worker.run(until_empty=True)
    assert (stats.failed, stats.retried) == (0, 0), stats.errors
    stored_chat = other.load_chat(CHAT)
    recapped = sum(1 for m in stored_chat.messages if get_memory(m))
    # The server's worker keeps its recap through the merge and saves it with the other
    # process's change; a standalone worker reads the chat again and makes the recap again.
    assert backends[0].calls == recapped + (0 if shared else 1)
    stored = stored_chat.messages[index]
    assert get_data(stored, "noted_elsewhere") is True  # the other process's change
    assert get_memory(stored)  # and the recap


def test_a_chat_left_stale_by_a_refused_save_is_refreshed_later(
    setup: tuple[ProxyChats, ChatStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A refresh's save is refused: another process saved the same message meanwhile. Its
    change is read in just after the refresh, too soon for another: `catch_up` makes it."""
    monkeypatch.setattr(freshness, "REFRESH_EVERY_S", 3600.0)
    registry, other = setup
    session = registry.session(CHAT)
    session.refreshed_at = session.clock.now() - 7200.0  # the first read-in is due a refresh
    fresh = registry.freshness
    save = fresh._save

    def save_after_another_process(chat_id: str) -> None:
        theirs = other.load_chat(CHAT)
        if get_memory(theirs.messages[1]) != "recap 1 redone elsewhere":
            set_data(theirs.messages[1], "memory", "recap 1 redone elsewhere")
            other.save(theirs, changed=[theirs.messages[1]])  # between the refresh and its save
        save(chat_id)

    monkeypatch.setattr(fresh, "_save", save_after_another_process)
    recap_elsewhere(other, 1)
    assert pulled(registry) == 1
    chat = session.chat
    assert get_memory(chat.messages[1]) == "recap 1 redone elsewhere"  # read in by the retry
    assert session.stale
    fresh.catch_up()  # the interval is not over
    assert session.stale
    monkeypatch.setattr(freshness, "REFRESH_EVERY_S", 0.0)
    fresh.catch_up()
    assert not session.stale
    stored = other.load_chat(CHAT).messages[1]
    assert get_data(stored, "include")  # the refresh's change, saved
    assert get_memory(stored) == "recap 1 redone elsewhere"
