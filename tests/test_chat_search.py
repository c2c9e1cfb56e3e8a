"""`ChatSearch` (a chat's recall search, in memory or through the store) and the recall tier
in a `Session`: the slot a refresh fills, `Session.recall`, and where the prompt puts it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from autorecap import Chat, Settings, SQLiteStore, set_data
from autorecap.chat_search import ChatSearch
from autorecap.core import running
from autorecap.core.events import ManualClock
from autorecap.core.model import Message
from autorecap.core.prompt import assemble_chat, assemble_text, history_from_chat
from autorecap.core.recall import RECALL_KEY
from autorecap.core.scenes import add_recap_version, mark_break
from autorecap.core.slots import Position
from autorecap.core.tokens import get_counter
from autorecap.session import Session
from autorecap.settings import DEFAULT_RECALL_TEMPLATE
from autorecap.testing import generate

COUNTER = get_counter()
HIDDEN_TEXT = "We hid the brass astrolabe under the galley floorboards."
RECALL_ON = Settings(recall_enabled=True, auto_hide_scene_count=-1)
RECALL_OFF = Settings(recall_enabled=False, auto_hide_scene_count=-1)


def message(text: str, *, user: bool = False, hidden: bool = False) -> dict[str, Any]:
    return {
        "name": "Tomas" if user else "Captain Mira",
        "is_user": user,
        "is_system": hidden,
        "send_date": "2023-05-08T10:00:00.000Z",
        "mes": text,
        "extra": {},
    }


def make_chat(chat_id: str = "recall-chat") -> Chat:
    return Chat(
        [
            message(HIDDEN_TEXT, hidden=True),
            message("Good morning, captain.", user=True),
            message("Morning. The wind is fair today."),
            message("A note about coal prices.", hidden=True),
            message("Where did we put the astrolabe?", user=True),
        ],
        chat_id=chat_id,
    )


def indexes(search: ChatSearch, query: str) -> list[int]:
    return [index for index, _ in search.hits(query)]


def holders(chat: Chat, search: ChatSearch, word: str) -> list[str]:
    """The texts of the messages the hits point at."""
    return [chat.messages[i].text for i in indexes(search, word)]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteStore]:
    opened = SQLiteStore(tmp_path / "db")
    yield opened
    opened.close()


# --- ChatSearch without a store ------------------------------------------------------------------


def test_a_hidden_message_is_found_by_a_rare_word() -> None:
    search = ChatSearch(make_chat())
    assert set(indexes(search, "astrolabe")) == {0, 4}
    assert indexes(search, "floorboards") == [0]
    assert indexes(search, "what was it?") == []


def test_a_message_appended_later_is_found() -> None:
    chat = make_chat()
    search = ChatSearch(chat)
    assert indexes(search, "zeppelin") == []
    chat.append(message("A zeppelin passed overhead.", hidden=True))
    assert indexes(search, "zeppelin") == [5]
    chat.messages.extend(
        [chat.adopt(message("A kestrel.")), chat.adopt(message("Another zeppelin."))]
    )
    assert sorted(indexes(search, "zeppelin")) == [5, 7]
    assert indexes(search, "kestrel") == [6]


def test_a_recap_set_later_is_found() -> None:
    chat = make_chat()
    search = ChatSearch(chat)
    assert indexes(search, "quartermaster") == []
    set_data(chat.messages[2], "memory", "Mira named Tomas quartermaster.")
    assert indexes(search, "quartermaster") == [2]
    set_data(chat.messages[2], "memory", "Mira named Tomas bosun.")
    assert indexes(search, "quartermaster") == []
    assert indexes(search, "bosun") == [2]


def test_a_scene_recap_set_later_is_found() -> None:
    chat = make_chat()
    search = ChatSearch(chat)
    indexes(search, "anything")  # the index is built
    mark_break(chat.messages[3])
    add_recap_version(chat.messages[3], "They crossed the Saltmarsh.", scene_hash="h")
    assert indexes(search, "saltmarsh") == [3]


def test_an_edit_the_chat_is_told_of_is_found() -> None:
    chat = make_chat()
    search = ChatSearch(chat)
    indexes(search, "anything")
    target = chat.messages[0]
    target["mes"] = "We hid the silver sextant in the hold."
    chat.notify_change(target)
    assert indexes(search, "sextant") == [0]
    assert indexes(search, "floorboards") == []


def test_a_message_changed_before_it_was_appended_to_the_index_is_found() -> None:
    chat = make_chat()
    search = ChatSearch(chat)
    indexes(search, "anything")
    added = chat.append(message("A plain note.", hidden=True))
    set_data(added, "memory", "The harpoon was sold.")
    assert indexes(search, "harpoon") == [5]


@pytest.mark.parametrize("where", [0, 1, 3])
def test_after_a_deletion_hits_point_at_the_message_that_holds_the_word(where: int) -> None:
    chat = make_chat()
    chat.append(message("A zeppelin passed overhead.", hidden=True))
    search = ChatSearch(chat)
    assert indexes(search, "zeppelin") == [5]
    del chat.messages[where]
    assert indexes(search, "zeppelin") == [4]
    assert holders(chat, search, "zeppelin") == ["A zeppelin passed overhead."]
    assert all("coal" in text for text in holders(chat, search, "coal"))


def test_a_deletion_then_an_append_of_the_same_length_is_seen() -> None:
    chat = make_chat()
    search = ChatSearch(chat)
    assert indexes(search, "floorboards") == [0]
    del chat.messages[0]
    chat.append(message("A zeppelin passed overhead.", hidden=True))
    assert indexes(search, "floorboards") == []
    assert indexes(search, "zeppelin") == [4]
    assert holders(chat, search, "coal") == ["A note about coal prices."]


def test_a_message_replaced_in_place_is_seen() -> None:
    chat = make_chat()
    search = ChatSearch(chat)
    assert indexes(search, "floorboards") == [0]
    chat.messages[0] = chat.adopt(message("We sold the harpoon.", hidden=True))
    assert indexes(search, "floorboards") == []
    assert indexes(search, "harpoon") == [0]


def test_a_session_deletion_keeps_hits_on_their_messages() -> None:
    chat = make_chat()
    session = Session(chat, clock=ManualClock(), settings=RECALL_OFF)
    assert holders(chat, session.search, "coal") == ["A note about coal prices."]
    session.delete_message(1)
    session.edit_message(1, "Morning. The fog is thick today.")
    assert holders(chat, session.search, "coal") == ["A note about coal prices."]
    assert indexes(session.search, "fog") == [1]
    assert indexes(session.search, "wind") == []


def test_a_plain_dict_appended_to_the_messages_does_not_break_a_refresh() -> None:
    chat = make_chat()
    session = Session(chat, clock=ManualClock(), settings=RECALL_ON)
    session.refresh()
    plain: Any = message("Is the astrolabe still there?", user=True)
    chat.messages.append(plain)
    session.refresh()
    assert HIDDEN_TEXT in session.slots.value(RECALL_KEY)


def test_every_planted_fact_is_found_at_its_message() -> None:
    generated = generate(300, seed=11, chat_id="generated")
    search = ChatSearch(generated.chat)
    assert generated.facts
    for fact in generated.facts:
        assert indexes(search, fact.answer)[0] == fact.index, fact.answer


# --- ChatSearch with a store -------------------------------------------------------------------


def test_store_hits_are_indexes_in_the_loaded_chat(store: SQLiteStore) -> None:
    store.import_chat(make_chat("stored"))
    store.import_chat(make_chat("neighbour"))
    chat = store.load_chat("stored")
    del chat.messages[1]
    store.save(chat, structure=True)
    chat = store.load_chat("stored")
    search = ChatSearch(chat, store)
    assert indexes(search, "coal") == [2]
    assert holders(chat, search, "floorboards") == [HIDDEN_TEXT]
    assert sorted(indexes(search, "astrolabe")) == [0, 3]


def test_store_hits_follow_saved_recaps(store: SQLiteStore) -> None:
    store.import_chat(make_chat("stored"))
    chat = store.load_chat("stored")
    search = ChatSearch(chat, store)
    set_data(chat.messages[1], "memory", "Tomas greeted the quartermaster.")
    store.save(chat, changed=[chat.messages[1]])
    assert indexes(search, "quartermaster") == [1]


def test_a_store_search_of_a_chat_with_deletions_not_yet_saved_points_at_present_messages(
    store: SQLiteStore,
) -> None:
    store.import_chat(make_chat("stored"))
    chat = store.load_chat("stored")
    search = ChatSearch(chat, store)
    del chat.messages[0]  # not saved: the index still holds it
    assert indexes(search, "floorboards") == []
    assert holders(chat, search, "coal") == ["A note about coal prices."]


def test_generated_facts_are_found_through_the_store(store: SQLiteStore) -> None:
    generated = generate(300, seed=12, chat_id="generated")
    store.import_chat(generated.chat)
    chat = store.load_chat("generated")
    del chat.messages[:3]
    store.save(chat, structure=True)
    search = ChatSearch(chat, store)
    for fact in generated.facts:
        if fact.index < 3:
            continue
        assert indexes(search, fact.answer)[0] == fact.index - 3, fact.answer


# --- ChatSearch.recall -------------------------------------------------------------------------


def test_recall_asks_about_the_newest_user_message() -> None:
    chat = make_chat()
    text, pieces = ChatSearch(chat).recall(RECALL_ON, COUNTER)
    assert [(p.index, p.kind, p.text) for p in pieces] == [(0, "message", HIDDEN_TEXT)]
    header = DEFAULT_RECALL_TEMPLATE.replace("{{recall}}", "")
    assert text == f"{header}- [scene 1 · #0 · 8 May 2023] {HIDDEN_TEXT}"


def test_recall_of_a_given_query() -> None:
    text, pieces = ChatSearch(make_chat()).recall(RECALL_ON, COUNTER, "And the coal?")
    assert [p.index for p in pieces] == [3]
    assert "coal prices" in text
    assert ChatSearch(make_chat()).recall(RECALL_ON, COUNTER, "what was it?") == ("", [])
    assert ChatSearch(Chat([], chat_id="empty")).recall(RECALL_ON, COUNTER) == ("", [])


def test_recall_leaves_out_what_the_running_recap_says() -> None:
    chat = make_chat()
    running.add_version(
        chat,
        f"Earlier: {HIDDEN_TEXT}",
        scene_count=1,
        excluded_count=0,
        prev_scene_index=0,
        new_scene_index=0,
        now_ms=1_700_000_000_000,
    )
    assert ChatSearch(chat).recall(RECALL_ON, COUNTER) == ("", [])


def test_recall_keeps_to_its_budget() -> None:
    settings = Settings(recall_enabled=True, auto_hide_scene_count=-1, recall_max_tokens=10)
    assert ChatSearch(make_chat()).recall(settings, COUNTER) == ("", [])
    settings = Settings(recall_enabled=True, auto_hide_scene_count=-1, recall_max_tokens=0)
    assert ChatSearch(make_chat()).recall(settings, COUNTER) == ("", [])


# --- the recall tier in a session ----------------------------------------------------------------


def session_for(chat: Chat, settings: Settings) -> Session:
    return Session(chat, clock=ManualClock(), settings=settings)


@pytest.mark.parametrize(
    "settings", [RECALL_ON, Settings(recall_enabled=True)], ids=["no-hide", "defaults"]
)
def test_a_refresh_fills_the_recall_slot_when_recall_is_on(settings: Settings) -> None:
    session = session_for(make_chat(), settings)
    session.refresh()
    slot = session.slots.get(RECALL_KEY)
    assert slot is not None
    assert HIDDEN_TEXT in slot.value
    assert slot.value.startswith(DEFAULT_RECALL_TEMPLATE.replace("{{recall}}", ""))
    assert (slot.position, slot.depth) == (Position.IN_CHAT, 1)
    assert [p.index for p in session.last_recall] == [0]


def test_the_recall_slot_follows_the_newest_message() -> None:
    session = session_for(make_chat(), RECALL_ON)
    session.refresh()
    session.send("And what about the coal?", quiet=True)
    session.refresh()
    assert "coal prices" in session.slots.value(RECALL_KEY)
    assert HIDDEN_TEXT not in session.slots.value(RECALL_KEY)
    assert [p.index for p in session.last_recall] == [3]


def test_with_recall_off_the_slot_is_empty() -> None:
    session = session_for(make_chat(), RECALL_OFF)
    session.refresh()
    assert session.slots.value(RECALL_KEY) == ""
    assert session.last_recall == []


def test_turning_recall_off_empties_the_slot() -> None:
    session = session_for(make_chat(), RECALL_ON)
    session.refresh()
    assert session.slots.value(RECALL_KEY)
    session.settings = RECALL_OFF
    session.refresh()
    assert session.slots.value(RECALL_KEY) == ""
    assert session.last_recall == []


def test_with_the_chat_disabled_the_slot_is_emptied() -> None:
    session = session_for(make_chat(), RECALL_ON)
    session.refresh()
    assert session.last_recall
    session.settings = Settings(
        recall_enabled=True, auto_hide_scene_count=-1, default_chat_enabled=False
    )
    session.refresh()
    assert session.slots.value(RECALL_KEY) == ""
    assert session.last_recall == []


@pytest.mark.parametrize("settings", [RECALL_ON, RECALL_OFF], ids=["on", "off"])
def test_session_recall_answers_whatever_the_setting(settings: Settings) -> None:
    session = session_for(make_chat(), settings)
    pieces = session.recall("Is the astrolabe safe?")
    assert [(p.index, p.text) for p in pieces] == [(0, HIDDEN_TEXT)]
    assert [p.index for p in session.recall()] == [0]  # the newest user message
    assert [p.index for p in session.recall("the coal")] == [3]
    assert session.recall("what was it?") == []


def test_the_prompt_carries_the_recall_just_before_the_newest_message() -> None:
    chat = make_chat()
    session = session_for(chat, RECALL_ON)
    session.refresh()
    recalled = session.slots.value(RECALL_KEY)
    built = assemble_chat("You are Mira.", history_from_chat(chat.messages), session.slots, COUNTER)
    assert built.messages[-1] == {"role": "user", "content": "Where did we put the astrolabe?"}
    assert built.messages[-2] == {"role": "system", "content": recalled}
    assert [m["content"] for m in built.messages].count(HIDDEN_TEXT) == 0  # hidden stays out
    assert RECALL_KEY in built.injected
    text = assemble_text(
        "You are Mira.", history_from_chat(chat.messages), session.slots, COUNTER
    ).text
    assert text.index(HIDDEN_TEXT) < text.index("Tomas: Where did we put the astrolabe?")
    assert text.index("Captain Mira: Morning.") < text.index(HIDDEN_TEXT)


def test_a_session_over_a_stored_chat_recalls_through_the_store(store: SQLiteStore) -> None:
    store.import_chat(make_chat("stored"))
    with Session("stored", store=store, clock=ManualClock(), settings=RECALL_ON) as session:
        assert session.search.store is store
        session.refresh()
        assert HIDDEN_TEXT in session.slots.value(RECALL_KEY)
        assert [p.index for p in session.last_recall] == [0]
        message_ids = [m.id for m in session.messages]
    assert all(isinstance(i, int) for i in message_ids)


def test_recall_pieces_come_from_messages_of_the_chat() -> None:
    chat = make_chat()
    pieces = ChatSearch(chat).recall(RECALL_ON, COUNTER, "astrolabe coal")[1]
    assert sorted(p.index for p in pieces) == [0, 3]
    for found in pieces:
        target: Message = chat.messages[found.index]
        assert target.is_hidden
        assert found.text == target.text
