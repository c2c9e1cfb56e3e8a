"""Two processes on one store (SQLite and PostgreSQL): a save from an old copy is refused,
`pull` brings the other process's changes into a copy held in memory."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from autorecap import get_data, get_memory, set_data
from autorecap.core import running
from autorecap.store import ChatStore, open_store
from autorecap.store.migrations import StaleChatError
from autorecap.testing import generate_chat


@pytest.fixture
def stores(db_url: str) -> Iterator[tuple[ChatStore, ChatStore]]:
    """Two stores on one database (SQLite or PostgreSQL): the server's and a worker's
    (another process)."""
    server = open_store(db_url)
    server.import_chat(generate_chat(20, seed=3, chat_id="g"))
    worker = open_store(db_url)
    yield server, worker
    worker.close()
    server.close()


def test_saves_of_different_messages_from_two_copies_both_land(
    stores: tuple[ChatStore, ChatStore],
) -> None:
    server, worker = stores
    mine, theirs = server.load_chat("g"), worker.load_chat("g")
    set_data(theirs.messages[3], "memory", "the worker's recap")
    worker.save(theirs, changed=[theirs.messages[3]])
    set_data(mine.messages[5], "include", "Recap of message(s)")
    server.save(mine, changed=[mine.messages[5]])
    stored = server.load_chat("g")
    assert get_memory(stored.messages[3]) == "the worker's recap"
    assert get_data(stored.messages[5], "include") == "Recap of message(s)"


def test_a_save_of_a_message_changed_elsewhere_is_refused_until_pulled(
    stores: tuple[ChatStore, ChatStore],
) -> None:
    server, worker = stores
    mine, theirs = server.load_chat("g"), worker.load_chat("g")
    set_data(theirs.messages[3], "memory", "the worker's recap")
    worker.save(theirs, changed=[theirs.messages[3]])
    set_data(mine.messages[3], "include", "Recap of message(s)")
    with pytest.raises(StaleChatError, match="message 3"):
        server.save(mine, changed=[mine.messages[3]])
    assert get_data(server.load_chat("g").messages[3], "include") is None  # nothing written
    pulled = server.pull(mine, pending=[mine.messages[3]])
    assert pulled.messages == [mine.messages[3]]
    # Both changes are in the copy now: the worker's recap, and the flag set here.
    assert get_memory(mine.messages[3]) == "the worker's recap"
    assert get_data(mine.messages[3], "include") == "Recap of message(s)"
    server.save(mine, changed=[mine.messages[3]])
    stored = worker.load_chat("g")
    assert get_memory(stored.messages[3]) == "the worker's recap"
    assert get_data(stored.messages[3], "include") == "Recap of message(s)"
    assert not server.pull(mine)  # in step again: nothing to bring


def test_a_message_not_changed_here_is_replaced_by_the_stored_one(
    stores: tuple[ChatStore, ChatStore],
) -> None:
    server, worker = stores
    mine, theirs = server.load_chat("g"), worker.load_chat("g")
    live = mine.messages[4]
    set_data(theirs.messages[4], "memory", "made elsewhere")
    set_data(theirs.messages[6], "scene_break", True)
    worker.save(theirs, changed=[theirs.messages[4], theirs.messages[6]])
    pulled = server.pull(mine)
    assert sorted(mine.messages.index(m) for m in pulled.messages) == [4, 6]
    assert mine.messages[4] is live  # the same object: whoever holds it sees the change
    assert get_memory(live) == "made elsewhere"
    assert get_data(mine.messages[6], "scene_break") is True
    assert dict(live) == dict(worker.load_chat("g").messages[4])


def test_a_recap_made_for_text_edited_here_meanwhile_is_not_taken(
    stores: tuple[ChatStore, ChatStore],
) -> None:
    server, worker = stores
    mine, theirs = server.load_chat("g"), worker.load_chat("g")
    set_data(theirs.messages[2], "memory", "a recap of the old text")
    worker.save(theirs, changed=[theirs.messages[2]])
    mine.messages[2]["mes"] = "edited here, not saved yet"
    server.pull(mine, pending=[mine.messages[2]])
    assert get_memory(mine.messages[2]) == ""
    server.save(mine, changed=[mine.messages[2]])  # the copy is in step: the edit is saved
    stored = worker.load_chat("g").messages[2]
    assert stored["mes"] == "edited here, not saved yet"
    assert get_memory(stored) == ""


def test_header_changes_from_both_sides_are_merged_key_by_key(
    stores: tuple[ChatStore, ChatStore],
) -> None:
    server, worker = stores
    mine, theirs = server.load_chat("g"), worker.load_chat("g")
    theirs.metadata[running.STORAGE_KEY] = {"versions": [{"content": "from the worker"}]}
    worker.save(theirs, header=True)
    mine.metadata["note_prompt"] = "set here"
    with pytest.raises(StaleChatError, match="header"):
        server.save(mine, header=True)
    assert server.pull(mine, header_pending=True).header
    assert mine.metadata[running.STORAGE_KEY] == {"versions": [{"content": "from the worker"}]}
    assert mine.metadata["note_prompt"] == "set here"
    server.save(mine, header=True)
    stored = worker.load_chat("g")
    assert stored.metadata["note_prompt"] == "set here"
    assert stored.metadata[running.STORAGE_KEY]["versions"][0]["content"] == "from the worker"


def test_a_header_not_changed_here_is_replaced(
    stores: tuple[ChatStore, ChatStore],
) -> None:
    server, worker = stores
    mine, theirs = server.load_chat("g"), worker.load_chat("g")
    theirs.metadata["from_elsewhere"] = 1
    worker.save(theirs, header=True)
    assert server.pull(mine).header
    assert mine.metadata["from_elsewhere"] == 1


def test_a_deleted_or_reshaped_chat_is_reported_not_merged(
    stores: tuple[ChatStore, ChatStore],
) -> None:
    server, worker = stores
    mine, theirs = server.load_chat("g"), worker.load_chat("g")
    del theirs.messages[0]
    worker.save(theirs, structure=True)
    pulled = server.pull(mine)
    assert pulled.reshaped
    assert len(mine.messages) == 20  # untouched: the caller reads the chat again
    worker.delete_chat("g")
    assert server.pull(mine).gone


def test_a_chat_saved_only_here_has_nothing_to_pull(
    stores: tuple[ChatStore, ChatStore],
) -> None:
    server, _ = stores
    mine = server.load_chat("g")
    for index in (1, 2, 3):
        set_data(mine.messages[index], "memory", f"recap {index}")
        server.save(mine, changed=[mine.messages[index]])
    mine.append({"name": "User", "is_user": True, "mes": "new"})
    server.save(mine, structure=True)
    assert not server.pull(mine)
