"""At most `open_chats` chats in memory: the least recently used one that nothing holds is saved
and let go, a chat whose reply is on its way is never let go, and one let go of is read again,
whole, on its next request."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from autorecap.jobs.queue import JobQueue
from autorecap.server.proxy.turns import ProxyChats
from autorecap.store.migrations import StoreError
from autorecap.store.sqlite import SQLiteStore


def request(*texts: str) -> bytes:
    roles = ["user", "assistant"]
    messages = [{"role": roles[i % 2], "content": t} for i, t in enumerate(texts)]
    return orjson.dumps({"model": "m", "messages": messages})


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[ProxyChats]:
    store = SQLiteStore(tmp_path / "open.db")
    made = ProxyChats(store, JobQueue(store), open_chats=2, queue_recaps=False)
    try:
        yield made
    finally:
        made.close()
        store.close()


def test_the_least_recently_used_chat_is_saved_and_let_go(registry: ProxyChats) -> None:
    for name in ("a", "b"):
        registry.finish(registry.begin(name, request(f"hello {name}")), f"reply {name}")
    registry.begin("a", request("hello a", "reply a", "again a"))  # a is used again: b is oldest
    registry.finish(registry.begin("c", request("hello c")), "reply c")
    assert registry.sessions() == ["a", "c"]
    assert registry.locks() <= 3
    # b was saved before it was let go: read again, it is whole.
    assert [m.text for m in registry.chat("b").messages] == ["hello b", "reply b"]
    assert len(registry.sessions()) == 2


def test_a_chat_whose_reply_is_on_its_way_is_not_let_go(registry: ProxyChats) -> None:
    waiting = registry.begin("slow", request("tell me a long story"))  # upstream generating
    for name in ("x", "y", "z"):
        registry.finish(registry.begin(name, request(f"hi {name}")), f"yo {name}")
    assert "slow" in registry.sessions()
    registry.finish(waiting, "Once upon a time.")
    assert [m.text for m in registry.chat("slow").messages] == [
        "tell me a long story",
        "Once upon a time.",
    ]


def test_a_chat_whose_save_fails_keeps_its_changes_until_a_save_succeeds(
    registry: ProxyChats, monkeypatch: pytest.MonkeyPatch
) -> None:
    registry.finish(registry.begin("a", request("hello a")), "reply a")
    real_save = registry.store.save
    failures = [1]

    def save_once_busy(chat: Any, **options: Any) -> Any:
        if chat.id == "a" and failures:
            failures.pop()
            raise StoreError("the store is busy: try again")
        return real_save(chat, **options)

    monkeypatch.setattr(registry.store, "save", save_once_busy)
    with pytest.raises(StoreError), registry.edit("a") as session:
        session.edit_message(1, "reply a, edited")  # in memory; its save fails
    for name in ("b", "c"):  # over the bound: a is let go of, saved first, this time for good
        registry.finish(registry.begin(name, request(f"hello {name}")), f"reply {name}")
    assert "a" not in registry.sessions()
    assert [m.text for m in registry.chat("a").messages] == ["hello a", "reply a, edited"]
