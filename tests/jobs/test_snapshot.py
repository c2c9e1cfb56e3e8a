"""Work on a copy of a chat with no lock held, merged back key by key (jobs/snapshot.py)."""

from __future__ import annotations

import pytest

from autorecap.core import running
from autorecap.core.data import get_data, get_memory, set_data
from autorecap.core.model import Chat
from autorecap.jobs.snapshot import ChangedMeanwhileError, Snapshot


def make_chat() -> Chat:
    chat = Chat(chat_id="c")
    for n in range(6):
        chat.append({"name": "Mira" if n % 2 else "You", "is_user": n % 2 == 0, "mes": f"m{n}"})
    return chat


def add_running(chat: Chat, text: str) -> None:
    running.add_version(
        chat,
        text,
        scene_count=1,
        excluded_count=0,
        prev_scene_index=-1,
        new_scene_index=2,
        now_ms=0,
    )


def test_the_copy_is_independent_and_its_changes_come_back_key_by_key() -> None:
    chat = make_chat()
    set_data(chat.messages[1], "memory", "Mira waves.")
    seen: list[object] = []
    chat.listeners.append(seen.append)
    snapshot = Snapshot(chat)
    set_data(snapshot.copy.messages[2], "scene_break", True)
    set_data(snapshot.copy.messages[2], "scene_recap_memory", "They met.")
    add_running(snapshot.copy, "They met at the dock.")
    assert get_data(chat.messages[2], "scene_break") is None  # the live chat is untouched
    assert running.current(chat) is None
    # Meanwhile, the live chat gets a message recap on another message, and on the same one.
    set_data(chat.messages[3], "memory", "Mira laughs.")
    set_data(chat.messages[2], "memory", "You ask the way.")
    seen.clear()
    changed, header = snapshot.merge(chat)
    assert changed == [chat.messages[2]]
    assert header
    assert get_data(chat.messages[2], "scene_break") is True
    assert get_data(chat.messages[2], "scene_recap_memory") == "They met."
    assert get_memory(chat.messages[2]) == "You ask the way."  # not overwritten by the copy
    assert get_memory(chat.messages[3]) == "Mira laughs."
    assert get_memory(chat.messages[1]) == "Mira waves."
    current = running.current(chat)
    assert current is not None
    assert current["content"] == "They met at the dock."
    assert chat.messages[2] in seen
    assert None in seen


def test_nothing_changed_means_nothing_merged() -> None:
    chat = make_chat()
    snapshot = Snapshot(chat)
    assert snapshot.merge(chat) == ([], False)


def test_an_edit_of_a_changed_message_meanwhile_refuses_the_merge() -> None:
    chat = make_chat()
    snapshot = Snapshot(chat)
    set_data(snapshot.copy.messages[4], "scene_break", True)
    chat.messages[4]["mes"] = "edited meanwhile"
    with pytest.raises(ChangedMeanwhileError, match="edited during the recap"):
        snapshot.merge(chat)
    assert get_data(chat.messages[4], "scene_break") is None


def test_a_running_recap_edited_meanwhile_refuses_the_merge() -> None:
    chat = make_chat()
    add_running(chat, "Before.")
    snapshot = Snapshot(chat)
    add_running(snapshot.copy, "From the copy.")
    add_running(chat, "Edited by the user meanwhile.")
    with pytest.raises(ChangedMeanwhileError, match="running recap changed"):
        snapshot.merge(chat)
    current = running.current(chat)
    assert current is not None
    assert current["content"] == "Edited by the user meanwhile."


def test_a_message_deleted_meanwhile_is_skipped_and_the_rest_lands() -> None:
    chat = make_chat()
    snapshot = Snapshot(chat)
    set_data(snapshot.copy.messages[1], "scene_break", True)
    set_data(snapshot.copy.messages[5], "scene_break", True)
    del chat.messages[1]
    changed, _ = snapshot.merge(chat)
    assert changed == [chat.messages[4]]  # the old message 5
    assert get_data(chat.messages[4], "scene_break") is True


def test_an_edit_of_an_earlier_message_the_work_read_refuses_the_merge() -> None:
    """A scene recap writes to the scene's last message but reads the whole scene."""
    chat = make_chat()
    snapshot = Snapshot(chat)
    set_data(snapshot.copy.messages[3], "scene_recap_memory", "They met.")
    chat.messages[1]["mes"] = "edited inside the scene"
    with pytest.raises(ChangedMeanwhileError, match="message 1 was edited"):
        snapshot.merge(chat)
    assert get_data(chat.messages[3], "scene_recap_memory") is None
    # An edit after the last message written to does not matter.
    chat.messages[1]["mes"] = "m1"
    chat.messages[5]["mes"] = "a later reply, regenerated"
    changed, _ = snapshot.merge(chat)
    assert changed == [chat.messages[3]]
