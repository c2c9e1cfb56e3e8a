"""The store on both backends (SQLite and PostgreSQL): import and export byte for byte, stable
ids, one-row saves, saves refused from a stale copy."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from autorecap import get_memory, read_chat, set_data
from autorecap.core.model import Message
from autorecap.stfiles.jsonl import parse_chat
from autorecap.store import ChatStore, StoreError, open_store
from autorecap.store.migrations import StaleChatError
from autorecap.testing import generate_chat
from tests.conftest import fixture_files

HEADER = b'{"chat_metadata":{},"user_name":"unused","character_name":"unused"}'


@pytest.fixture
def store(db_url: str) -> Iterator[ChatStore]:
    opened = open_store(db_url)
    yield opened
    opened.close()


def query(store: ChatStore, sql: str, params: tuple[Any, ...] = ()) -> Any:
    """The first row of a query, read in the store's own transaction."""
    return store.run(lambda db: db.execute(sql, params).fetchone())


@pytest.mark.parametrize("path", fixture_files(), ids=lambda p: p.name)
def test_import_then_export_gives_the_file_back_byte_for_byte(store: ChatStore, path: Path) -> None:
    chat = read_chat(path)
    info = store.import_chat(chat, source=str(path))
    assert info.id == path.name.removesuffix(".jsonl")
    assert store.export_chat(info.id) == path.read_bytes()


def test_kept_lines_survive_the_store(store: ChatStore) -> None:
    data = HEADER + b'\r\n\n{"mes":"a"}\r\n{bad\r\n{"mes":"b"}\r\n'
    store.import_chat(parse_chat(b"\xef\xbb\xbf" + data, chat_id="k", lenient=True))
    assert store.export_chat("k") == b"\xef\xbb\xbf" + data
    chat = store.load_chat("k")
    del chat.messages[0]
    store.save(chat, structure=True)
    assert (
        store.export_chat("k") == b"\xef\xbb\xbf" + HEADER + b"\r\n\n{bad\r\n" + b'{"mes":"b"}\r\n'
    )


def test_an_id_already_taken_is_an_error_unless_replace(store: ChatStore) -> None:
    chat = parse_chat(HEADER + b'\n{"mes":"a"}', chat_id="c")
    store.import_chat(chat)
    with pytest.raises(StoreError, match="'c' is already stored: pass --replace"):
        store.import_chat(chat)
    other = parse_chat(HEADER + b'\n{"mes":"b"}', chat_id="c")
    store.import_chat(other, replace=True)
    assert store.load_chat("c").messages[0]["mes"] == "b"
    store.import_chat(other, chat_id="c2")
    assert sorted(i.id for i in store.list_chats()) == ["c", "c2"]


def test_unknown_chat_errors(store: ChatStore) -> None:
    for action in (store.load_chat, store.export_chat, store.delete_chat):
        with pytest.raises(StoreError, match="no stored chat with id 'ghost'"):
            action("ghost")


def test_message_ids_never_change(store: ChatStore) -> None:
    store.import_chat(generate_chat(20, seed=1, chat_id="g"))
    chat = store.load_chat("g")
    ids = [m.id for m in chat.messages]
    assert all(isinstance(i, int) for i in ids)
    assert len(set(ids)) == 20
    del chat.messages[3]
    set_data(chat.messages[10], "memory", "edited")
    chat.append({"name": "New", "mes": "new"})
    store.save(chat, changed=[chat.messages[10]], structure=True)
    again = store.load_chat("g")
    assert [m.id for m in again.messages[:19]] == ids[:3] + ids[4:]
    assert again.messages[19].id not in ids
    assert again.messages[19].id == chat.messages[19].id
    # Inserting at the front renumbers positions, never ids.
    again.messages.insert(0, again.adopt({"name": "First", "mes": "first"}))
    store.save(again, structure=True)
    third = store.load_chat("g")
    assert [m.id for m in third.messages[1:]] == [m.id for m in again.messages[1:]]
    assert third.messages[0]["mes"] == "first"


def test_one_set_data_writes_one_message_row(store: ChatStore) -> None:
    store.import_chat(generate_chat(200, seed=2, chat_id="g"))
    chat = store.load_chat("g")
    message = chat.messages[100]
    set_data(message, "memory", "one change")
    rev_before = query(store, "SELECT max(rev) FROM messages")[0]
    assert store.save(chat, changed=[message]) == 1
    # One message row written (its recall index row follows it by trigger).
    written = query(store, "SELECT count(*) FROM messages WHERE rev > ?", (rev_before,))[0]
    assert written == 1
    assert store.load_chat("g").messages[100]["extra"]["auto_recap_memory"]["memory"] == (
        "one change"
    )


def test_unchanged_messages_store_no_json(store: ChatStore) -> None:
    store.import_chat(generate_chat(30, seed=3, chat_id="g"))
    stored = query(store, "SELECT COUNT(*) FROM messages WHERE data IS NOT NULL")
    assert stored[0] == 0


def test_a_failed_save_writes_nothing(store: ChatStore, monkeypatch: pytest.MonkeyPatch) -> None:
    store.import_chat(generate_chat(10, seed=4, chat_id="g"))
    chat = store.load_chat("g")
    for message in chat.messages[:5]:
        set_data(message, "memory", "part of one logical write")
    from autorecap.store import revisions as revisions_module

    calls = {"n": 0}
    real = revisions_module.changed_message_json

    def fail_on_third(message: object) -> str | None:
        calls["n"] += 1
        if calls["n"] == 3:
            raise OSError("disk full")
        return real(message)

    monkeypatch.setattr(revisions_module, "changed_message_json", fail_on_third)
    with pytest.raises(OSError, match="disk full"):
        store.save(chat, changed=chat.messages[:5])
    monkeypatch.undo()
    reloaded = store.load_chat("g")
    assert all("auto_recap_memory" not in (m.get("extra") or {}) for m in reloaded.messages)


def test_header_changes_are_saved(store: ChatStore) -> None:
    store.import_chat(parse_chat(HEADER + b'\n{"mes":"a"}', chat_id="c"))
    chat = store.load_chat("c")
    chat.metadata["auto_recap_running_scene_recaps"] = {"current_version": 0, "versions": []}
    store.save(chat, header=True)
    assert store.load_chat("c").metadata["auto_recap_running_scene_recaps"]["versions"] == []
    assert store.export_chat("c").startswith(b'{"chat_metadata":{"auto_recap_running_scene')


def test_lone_surrogates_are_stored(store: ChatStore) -> None:
    store.import_chat(parse_chat(HEADER + b'\n{"mes":"a"}', chat_id="c"))
    chat = store.load_chat("c")
    chat.messages[0]["mes"] = "broken \ud800 pair"
    store.save(chat, changed=[chat.messages[0]])
    assert store.load_chat("c").messages[0]["mes"] == "broken \ud800 pair"
    assert store.export_chat("c").endswith(b'{"mes":"broken \\ud800 pair"}')


def test_delete_chat(store: ChatStore) -> None:
    store.import_chat(generate_chat(5, seed=5, chat_id="g"))
    store.delete_chat("g")
    assert not store.has_chat("g")
    assert query(store, "SELECT COUNT(*) FROM messages")[0] == 0


def test_a_save_from_a_copy_whose_messages_changed_elsewhere_is_refused(
    store: ChatStore, db_url: str
) -> None:
    """Another process added a message since this copy was read: saving this copy's list
    would delete it, so the save is refused whole, and `pull` says to read the chat again."""
    store.import_chat(generate_chat(10, seed=6, chat_id="g"))
    mine = store.load_chat("g")
    other = open_store(db_url)
    try:
        theirs = other.load_chat("g")
        theirs.append({"name": "Elsewhere", "mes": "added by another process"})
        other.save(theirs, structure=True)
    finally:
        other.close()
    mine.append({"name": "Here", "mes": "added here"})
    set_data(mine.messages[0], "memory", "written with the refused save")
    with pytest.raises(StaleChatError, match="read the changes and save again"):
        store.save(mine, changed=[mine.messages[0]], structure=True)
    stored = store.load_chat("g")
    assert stored.messages[-1]["mes"] == "added by another process"
    assert get_memory(stored.messages[0]) == ""
    assert mine.messages[-1].id is None  # still new: the next save inserts it
    assert store.pull(mine).reshaped


def test_deleting_then_appending_uses_the_full_save(store: ChatStore) -> None:
    store.import_chat(generate_chat(12, seed=7, chat_id="g"))
    chat = store.load_chat("g")
    del chat.messages[4]
    chat.append({"name": "Bot", "mes": "after a delete"})
    store.save(chat, structure=True)
    again = store.load_chat("g")
    assert [m["mes"] for m in again.messages] == [m["mes"] for m in chat.messages]
    assert [m.id for m in again.messages] == [m.id for m in chat.messages]


def test_a_message_replaced_in_place_after_a_save_is_seen(store: ChatStore) -> None:
    """The order a save remembers is the message objects: another object at the same place
    (even with the same text) is a change of the list, saved in full."""
    store.import_chat(generate_chat(8, seed=8, chat_id="g"))
    chat = store.load_chat("g")
    chat.append({"name": "Bot", "mes": "first"})
    store.save(chat, structure=True)  # remembers the objects
    replaced = chat.messages[3]
    chat.messages[3] = chat.adopt(dict(replaced))  # same content, another message
    chat.append({"name": "Bot", "mes": "second"})
    store.save(chat, structure=True)
    again = store.load_chat("g")
    assert [m["mes"] for m in again.messages] == [m["mes"] for m in chat.messages]
    assert replaced.id not in [m.id for m in again.messages]
    assert [m.id for m in again.messages] == [m.id for m in chat.messages]


@pytest.mark.parametrize(
    "reshape",
    [
        lambda messages: messages.__delitem__(2),
        lambda messages: messages.reverse(),
        lambda messages: messages.insert(0, messages.pop()),
        lambda messages: messages.sort(key=lambda m: m["mes"]),
    ],
    ids=["delete", "reverse", "move", "sort"],
)
def test_a_list_reshaped_after_a_save_is_saved_in_full(
    store: ChatStore, reshape: Callable[[list[Message]], object]
) -> None:
    """After a save the store keeps the list itself (no copy) and how often it was reshaped:
    any change but an append is seen, even when the length comes out as it was."""
    store.import_chat(generate_chat(8, seed=8, chat_id="g"))
    chat = store.load_chat("g")
    chat.append({"name": "Bot", "mes": "first"})
    store.save(chat, structure=True)  # remembers the list
    reshape(chat.messages)
    chat.append({"name": "Bot", "mes": "second"})
    store.save(chat, structure=True)
    again = store.load_chat("g")
    assert [m["mes"] for m in again.messages] == [m["mes"] for m in chat.messages]
    assert [m.id for m in again.messages] == [m.id for m in chat.messages]


def test_plain_dicts_appended_to_the_list_become_messages_when_saved(store: ChatStore) -> None:
    store.import_chat(generate_chat(6, seed=9, chat_id="g"))
    chat = store.load_chat("g")
    store.save(chat, structure=True)
    chat.messages.append({"name": "User", "is_user": True, "mes": "a plain dict"})
    chat.messages += [{"name": "Bot", "mes": "and another"}]
    store.save(chat, structure=True)
    assert all(m.chat is chat and m.id is not None for m in chat.messages)
    assert [m["mes"] for m in store.load_chat("g").messages][-2:] == ["a plain dict", "and another"]
