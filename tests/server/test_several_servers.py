"""Several servers on one store, step by step (the soak test, `test_soak_postgres.py`, runs
the same under load): each server is a `ProxyChats` of its own on its own connection to one
database, on SQLite and on PostgreSQL.

- A client whose requests go to both servers: a turn whose save lands after a later turn's
  (saved by the other server) loses nothing and adds nothing.
- A turn done again queues no recap job for a message whose job already ran.
- A turn whose messages an earlier save of its server wrote (saves lag behind answers under
  load) queues none that the other server queued meanwhile.
- The same request answered on both servers at once: its message and reply are stored once.
- A server whose copy of a chat is behind the other's save reads it in before a turn.
- A worker whose copy of a chat is behind (its message not there yet) reads the chat again
  and recaps the message, rather than taking it for deleted.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from autorecap.core.data import get_memory
from autorecap.jobs.queue import JobQueue
from autorecap.jobs.runner import Worker
from autorecap.profiles import Profiles
from autorecap.recap.backends import make_backend
from autorecap.server.proxy.turns import ProxyChats, Turn
from autorecap.store import ChatStore, open_store

CHAT = "travelling"
SYSTEM = {"role": "system", "content": "You are Mira."}


def request(lines: list[str]) -> bytes:
    messages = [SYSTEM]
    for number, line in enumerate(lines):
        messages.append({"role": "user" if number % 2 == 0 else "assistant", "content": line})
    return orjson.dumps({"model": "m", "messages": messages})


def reply(question: str) -> str:
    return f"An answer to: {question}"


@pytest.fixture
def servers(db_url: str, tmp_path: Path) -> Iterator[tuple[ProxyChats, ProxyChats]]:
    """Two servers on one database, with a chat of two exchanges begun on the first."""
    made: list[tuple[ChatStore, ProxyChats]] = []
    for name in ("a", "b"):
        store = open_store(db_url)
        registry = ProxyChats(
            store, JobQueue(store), profiles=Profiles(tmp_path / f"settings-{name}.json")
        )
        made.append((store, registry))
    first = made[0][1]
    first.finish(first.begin(CHAT, request(["Hello.", reply("Hello."), "Where to?"])), "East.")
    yield made[0][1], made[1][1]
    for store, registry in made:
        registry.close()
        store.close()


def stored_texts(registry: ProxyChats) -> list[str]:
    return [m.text for m in registry.store.load_chat(CHAT).messages]


LINES = ["Hello.", reply("Hello."), "Where to?", "East."]


def answered_on_a_and_overtaken_on_b(a: ProxyChats, b: ProxyChats) -> Turn:
    """The client's next turn goes to a; a answers, but its save has not happened yet when
    the client's turn after that goes to b, carrying a's reply, and b saves first. Returns
    a's turn, to settle."""
    late = a.begin(CHAT, request([*LINES, "By ship?"]))
    a.record(late, reply("By ship?"))
    b.finish(
        b.begin(CHAT, request([*LINES, "By ship?", reply("By ship?"), "When?"])), reply("When?")
    )
    return late


def each_message_queued_once(registry: ProxyChats) -> None:
    """Every stored message of the chat has had exactly one recap job queued."""
    jobs = [j for j in registry.queue.list() if j.kind == "message_recap"]
    stored = registry.store.load_chat(CHAT)
    assert sorted(j.target for j in jobs) == sorted(m.id for m in stored.messages)


def test_a_turn_saved_after_a_later_turn_of_the_other_server_loses_and_adds_nothing(
    servers: tuple[ProxyChats, ProxyChats],
) -> None:
    a, b = servers
    lines = LINES
    late = answered_on_a_and_overtaken_on_b(a, b)
    a.settle(late)  # refused (b added messages): done again on what b saved
    expected = [*lines, "By ship?", reply("By ship?"), "When?", reply("When?")]
    assert stored_texts(a) == expected
    assert [m.text for m in a.chat(CHAT).messages] == expected
    each_message_queued_once(a)


def test_a_turn_done_again_queues_no_recap_that_already_ran(
    servers: tuple[ProxyChats, ProxyChats],
) -> None:
    a, b = servers
    late = answered_on_a_and_overtaken_on_b(a, b)
    # Every queued job runs to its end before the turn is done again on a (a worker on
    # another machine), as if after a read the chat: the copy shows none of their recaps.
    while (job := b.queue.claim()) is not None:
        b.queue.complete(job)
    a.settle(late)
    each_message_queued_once(a)


def test_a_turn_saved_by_an_earlier_save_queues_no_recap_the_other_server_queued(
    servers: tuple[ProxyChats, ProxyChats],
) -> None:
    """Under load a server's saves lag behind its answers: the client's turns go to b, a, b
    before any is saved. b's first save writes its second turn's messages too; a's turn, done
    again on that, queues them (no job yet); their jobs run; b's second turn, settled last,
    finds its messages saved already and must not queue them again."""
    a, b = servers
    first = b.begin(CHAT, request([*LINES, "By ship?"]))
    b.record(first, reply("By ship?"))
    more = [*LINES, "By ship?", reply("By ship?"), "When?"]
    between = a.begin(CHAT, request(more))
    a.record(between, reply("When?"))
    third = b.begin(CHAT, request([*more, reply("When?"), "Why?"]))
    b.record(third, reply("Why?"))
    b.settle(first)  # saves b's whole copy: the third turn's messages as well
    a.settle(between)  # refused: done again on what b saved, whose newest messages are bare
    assert between.replayed
    while (job := a.queue.claim()) is not None:  # a worker runs them (b's copy shows none)
        a.queue.complete(job)
    b.settle(third)
    assert stored_texts(b) == [*more, reply("When?"), "Why?", reply("Why?")]
    each_message_queued_once(b)


def test_the_same_request_answered_on_both_servers_is_stored_once(
    servers: tuple[ProxyChats, ProxyChats],
) -> None:
    a, b = servers
    body = request(["Hello.", reply("Hello."), "Where to?", "East.", "By ship?"])
    turns = [a.begin(CHAT, body), b.begin(CHAT, body)]
    for registry, turn in zip((a, b), turns, strict=True):
        registry.record(turn, reply("By ship?"))
    for registry, turn in zip((a, b), turns, strict=True):
        registry.settle(turn)
    assert stored_texts(a) == [
        "Hello.",
        reply("Hello."),
        "Where to?",
        "East.",
        "By ship?",
        reply("By ship?"),
    ]
    assert len(a.store.load_chat(CHAT).messages[-1].swipes or [reply("By ship?")]) == 1


def test_a_server_reads_in_the_other_servers_turn_before_its_own(
    servers: tuple[ProxyChats, ProxyChats],
) -> None:
    a, b = servers
    lines = ["Hello.", reply("Hello."), "Where to?", "East."]
    b.session(CHAT)  # b has the chat open from before
    a.finish(a.begin(CHAT, request([*lines, "By ship?"])), reply("By ship?"))
    turn = b.begin(CHAT, request([*lines, "By ship?", reply("By ship?"), "When?"]))
    if b.store.dialect != "sqlite":  # read in as the turn began (SQLite: by `Outside.watch`)
        assert turn.replayed is False
        assert [m.text for m in b.chat(CHAT).messages][-3:] == [
            "By ship?",
            reply("By ship?"),
            "When?",
        ]
    b.record(turn, reply("When?"))
    b.settle(turn)
    assert stored_texts(b) == [*lines, "By ship?", reply("By ship?"), "When?", reply("When?")]


def test_a_worker_whose_copy_is_behind_reads_the_chat_again_and_recaps_the_message(
    servers: tuple[ProxyChats, ProxyChats], db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, _ = servers
    store = open_store(db_url)
    try:
        worker = Worker(JobQueue(store), lambda settings: make_backend(settings, backend="offline"))
        worker.chat(CHAT)  # its copy, read now
        # It will not hear of the next save (as when another server's notice is still on its
        # way): only the store itself can tell it the message is there.
        monkeypatch.setattr(store, "data_version", lambda: 0)
        worker.chat(CHAT)
        lines = ["Hello.", reply("Hello."), "Where to?", "East."]
        a.finish(a.begin(CHAT, request([*lines, "By ship?"])), reply("By ship?"))
        stats = worker.run(until_empty=True)
        assert (stats.failed, stats.retried) == (0, 0), stats.errors
        stored = store.load_chat(CHAT)
        assert [m.text for m in stored.messages][-2:] == ["By ship?", reply("By ship?")]
        assert all(get_memory(m) for m in stored.messages[-2:])  # the two it had not read
        assert all(j.state == "done" for j in a.queue.list())
    finally:
        store.close()


def test_a_regeneration_done_again_with_a_narrator_message_deleted_keeps_its_reply(
    servers: tuple[ProxyChats, ProxyChats],
) -> None:
    """A turn done again whose plan both deletes a stored narrator message and regenerates
    the last reply is no "later request saved first": the reply becomes a swipe."""
    a, b = servers

    def sent(*messages: dict[str, str]) -> bytes:
        return orjson.dumps({"model": "m", "messages": [SYSTEM, *messages]})

    def said(role: str, text: str) -> dict[str, str]:
        return {"role": role, "content": text}

    storm = said("system", "A storm breaks over the bay.")
    after = said("system", "[Write one paragraph.]")
    base = [said("user", "Hello."), said("assistant", reply("Hello.")), said("user", "Where to?")]
    base += [said("assistant", "East."), storm, said("user", "By ship?")]
    a.finish(a.begin(CHAT, sent(*base)), "Aye.")
    b.session(CHAT)
    more = [*base, said("assistant", "Aye."), said("user", "Now?")]
    late = b.begin(CHAT, sent(*more, after))
    b.record(late, "Now.")
    # The user deletes the narrator message and asks for another reply, on server a.
    again = a.begin(CHAT, sent(*[m for m in more if m is not storm], after))
    a.record(again, "Right now.")
    b.settle(late)
    a.settle(again)  # done again on what b saved
    assert again.replayed
    messages = a.store.load_chat(CHAT).messages
    assert storm["content"] not in [m.text for m in messages]
    assert messages[-1].swipes == ["Now.", "Right now."]
