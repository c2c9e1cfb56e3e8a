"""Scene breaks and versioned scene recaps, stored where ST-Auto-Recap stores them: on the message
that ends the scene, under `extra.auto_recap_memory` (SPEC-NOTES §1)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autorecap.core.data import NAMESPACE, get_data, set_data
from autorecap.core.model import Chat, Message
from autorecap.core.scenes import (
    Scene,
    SceneError,
    add_recap_version,
    break_indexes,
    clear_recap,
    content_hash,
    edit_recap,
    is_break,
    mark_break,
    recap_versions,
    rename_break,
    scenes,
    select_recap_version,
    set_visible,
    unmark_break,
)
from autorecap.stfiles.jsonl import parse_chat, serialize_chat

RECAP_KEYS = {
    "scene_recap_memory",
    "scene_recap_versions",
    "scene_recap_current_index",
    "scene_recap_hash",
    "scene_recap_metadata",
    "scene_recap_include",
}


def make_chat(n: int = 12, chat_id: str = "scenes-1") -> Chat:
    """`n` alternating user/character messages; message 5 has two swipes (the second active)."""
    messages: list[dict[str, Any]] = []
    for i in range(n):
        message: dict[str, Any] = {
            "name": "Tomas" if i % 2 == 0 else "Captain Mira",
            "is_user": i % 2 == 0,
            "is_system": False,
            "send_date": f"2026-03-02T18:{i:02d}:00.000Z",
            "mes": f"Message {i} on the Kestrel.",
            "extra": {},
        }
        if i == 5:
            message["swipes"] = ["first take", message["mes"]]
            message["swipe_id"] = 1
            message["swipe_info"] = [{"extra": {}}, {"extra": {}}]
        messages.append(message)
    return Chat(messages, chat_id=chat_id)


def namespace(message: Message) -> dict[str, Any]:
    """The raw namespace dict, read without the data API."""
    value: dict[str, Any] = message["extra"][NAMESPACE]
    return value


# --- marking, unmarking, renaming ----------------------------------------------------------------


def test_mark_break_writes_the_extension_keys() -> None:
    chat = make_chat()
    mark_break(chat.messages[3], "The storm")
    assert namespace(chat.messages[3]) == {
        "scene_break": True,
        "scene_break_visible": True,
        "scene_break_name": "The storm",
    }
    mark_break(chat.messages[7])
    assert namespace(chat.messages[7]) == {"scene_break": True, "scene_break_visible": True}
    mark_break(chat.messages[9], visible=False)
    assert namespace(chat.messages[9])["scene_break_visible"] is False
    assert is_break(chat.messages[3])
    assert is_break(chat.messages[9])
    assert not is_break(chat.messages[4])
    assert break_indexes(chat.messages) == [3, 7, 9]


def test_break_data_reaches_the_active_swipe() -> None:
    chat = make_chat()
    mark_break(chat.messages[5], "Swiped")
    active = chat.messages[5]["swipe_info"][1]["extra"][NAMESPACE]
    assert active["scene_break"] is True
    assert active["scene_break_name"] == "Swiped"
    assert NAMESPACE not in chat.messages[5]["swipe_info"][0]["extra"]


def test_unmark_rename_and_set_visible() -> None:
    chat = make_chat()
    message = chat.messages[4]
    mark_break(message, "Old name")
    rename_break(message, "New name")
    assert namespace(message)["scene_break_name"] == "New name"
    set_visible(message, False)
    assert namespace(message)["scene_break_visible"] is False
    assert is_break(message)
    set_visible(message, True)
    assert namespace(message)["scene_break_visible"] is True
    unmark_break(message)
    assert namespace(message)["scene_break"] is False
    assert not is_break(message)
    assert break_indexes(chat.messages) == []


def test_unmark_keeps_the_recap_versions() -> None:
    chat = make_chat()
    message = chat.messages[4]
    mark_break(message)
    add_recap_version(message, "They sail.", scene_hash="h1")
    unmark_break(message)
    assert recap_versions(message) == ["They sail."]
    assert namespace(message)["scene_recap_memory"] == "They sail."
    assert scenes(chat.messages)[0].closed is False  # no longer a scene of its own


@pytest.mark.parametrize(
    ("operation", "message_part"),
    [
        (unmark_break, "not a scene break"),
        (lambda m: rename_break(m, "x"), "not a scene break: mark it first"),
        (lambda m: set_visible(m, False), "not a scene break"),
        (
            lambda m: add_recap_version(m, "text", scene_hash="h"),
            "a scene recap goes on the message that ends the scene: mark it first",
        ),
        (lambda m: edit_recap(m, "mine"), "mark it first"),
    ],
    ids=["unmark", "rename", "set_visible", "add_recap_version", "edit_recap"],
)
def test_break_operations_on_ordinary_messages_fail_and_write_nothing(
    operation: Any, message_part: str
) -> None:
    chat = make_chat()
    message = chat.messages[2]
    before = copy.deepcopy(dict(message))
    with pytest.raises(SceneError, match=message_part):
        operation(message)
    assert dict(message) == before


def test_unmarked_break_refuses_new_recaps() -> None:
    chat = make_chat()
    message = chat.messages[6]
    mark_break(message)
    unmark_break(message)
    with pytest.raises(SceneError):
        add_recap_version(message, "late", scene_hash="h")
    with pytest.raises(SceneError):
        rename_break(message, "late")


# --- cutting a chat into scenes ------------------------------------------------------------------


def test_scenes_closed_and_open_with_default_names() -> None:
    chat = make_chat(12)
    mark_break(chat.messages[3])
    mark_break(chat.messages[7], "The storm")
    add_recap_version(chat.messages[3], "Tomas hires Mira.", scene_hash="h")
    found = scenes(chat.messages)
    assert found == [
        Scene(0, 0, 3, True, "Scene 1 (0-3)", "Tomas hires Mira."),
        Scene(1, 4, 7, True, "The storm", ""),
        Scene(2, 8, 11, False, "", ""),
    ]
    assert [s.length for s in found] == [4, 4, 4]


def test_scenes_without_an_open_scene_and_edge_cases() -> None:
    chat = make_chat(6)
    mark_break(chat.messages[0])
    mark_break(chat.messages[5])
    found = scenes(chat.messages)
    assert found == [
        Scene(0, 0, 0, True, "Scene 1 (0-0)", ""),
        Scene(1, 1, 5, True, "Scene 2 (1-5)", ""),
    ]
    assert scenes([]) == []
    assert scenes(make_chat(3).messages) == [Scene(0, 0, 2, False, "", "")]


def test_scene_name_empty_string_falls_back_to_default() -> None:
    chat = make_chat(8)
    mark_break(chat.messages[4], "")
    assert scenes(chat.messages)[0].name == "Scene 1 (0-4)"


@given(
    n=st.integers(min_value=0, max_value=30),
    breaks=st.sets(st.integers(min_value=0, max_value=29), max_size=10),
)
def test_scenes_cover_the_chat_contiguously(n: int, breaks: set[int]) -> None:
    chat = make_chat(n)
    for index in sorted(b for b in breaks if b < n):
        mark_break(chat.messages[index])
    found = scenes(chat.messages)
    covered = [i for scene in found for i in range(scene.start, scene.end + 1)]
    assert covered == list(range(n))
    assert [s.number for s in found] == list(range(len(found)))
    assert [s.end for s in found if s.closed] == sorted(b for b in breaks if b < n)
    assert all(s.closed for s in found[:-1])


# --- versioned scene recaps ----------------------------------------------------------------------


def test_recap_versions_grow_and_follow_selection() -> None:
    chat = make_chat()
    message = chat.messages[7]
    mark_break(message, "The storm")
    assert add_recap_version(message, "First.", scene_hash="aaa", metadata={"backend": "x"}) == 0
    assert add_recap_version(message, "Second.", scene_hash="bbb") == 1
    raw = namespace(message)
    assert raw["scene_recap_versions"] == ["First.", "Second."]
    assert raw["scene_recap_current_index"] == 1
    assert raw["scene_recap_memory"] == "Second."
    assert raw["scene_recap_hash"] == "bbb"
    assert raw["scene_recap_metadata"] == {}
    assert raw["scene_recap_include"] is True

    assert select_recap_version(message, 0) == "First."
    raw = namespace(message)
    assert raw["scene_recap_memory"] == "First."
    assert raw["scene_recap_current_index"] == 0
    assert raw["scene_recap_versions"] == ["First.", "Second."]
    assert scenes(chat.messages)[0].recap == "First."

    assert select_recap_version(message, 1) == "Second."
    assert namespace(message)["scene_recap_memory"] == "Second."


def test_edit_recap_adds_an_edited_version() -> None:
    chat = make_chat()
    message = chat.messages[7]
    mark_break(message)
    add_recap_version(message, "Machine.", scene_hash="hash-1", metadata={"backend": "offline"})
    assert edit_recap(message, "Mine.") == 1
    raw = namespace(message)
    assert raw["scene_recap_versions"] == ["Machine.", "Mine."]
    assert raw["scene_recap_current_index"] == 1
    assert raw["scene_recap_memory"] == "Mine."
    assert raw["scene_recap_metadata"] == {"edited": True}
    assert raw["scene_recap_hash"] == "hash-1"  # the scene it describes is the same one
    assert select_recap_version(message, 0) == "Machine."
    assert recap_versions(message) == ["Machine.", "Mine."]


def test_bad_version_indexes() -> None:
    chat = make_chat()
    message = chat.messages[7]
    mark_break(message)
    with pytest.raises(SceneError, match="this scene has no recap yet"):
        select_recap_version(message, 0)
    add_recap_version(message, "One.", scene_hash="h")
    add_recap_version(message, "Two.", scene_hash="h")
    with pytest.raises(SceneError, match=r"no scene recap version 2: there are 2 \(0 to 1\)"):
        select_recap_version(message, 2)
    with pytest.raises(SceneError, match="no scene recap version -1"):
        select_recap_version(message, -1)
    assert namespace(message)["scene_recap_current_index"] == 1
    assert namespace(message)["scene_recap_memory"] == "Two."


def test_clear_recap_forgets_every_recap_key() -> None:
    chat = make_chat()
    message = chat.messages[7]
    mark_break(message, "Named")
    add_recap_version(message, "One.", scene_hash="h", metadata={"a": 1})
    clear_recap(message)
    assert set(namespace(message)) & (RECAP_KEYS - {"scene_recap_include"}) == set()
    assert recap_versions(message) == []
    assert is_break(message)
    assert namespace(message)["scene_break_name"] == "Named"


# --- content hash --------------------------------------------------------------------------------


def test_content_hash_changes_with_text_only() -> None:
    chat = make_chat()
    members = chat.messages[0:4]
    before = content_hash(members)
    assert before == content_hash(list(members))
    assert len(before) == 16

    # Recap data, breaks, hiding and send dates are not the scene's content.
    mark_break(members[3], "A name")
    add_recap_version(members[3], "A recap.", scene_hash=before)
    set_data(members[1], "memory", "a message recap")
    members[2]["is_system"] = True
    members[0]["send_date"] = "2030-01-01T00:00:00.000Z"
    assert content_hash(members) == before

    members[1]["mes"] = "Message 1 on the Kestrel, edited."
    edited = content_hash(members)
    assert edited != before
    members[1]["mes"] = "Message 1 on the Kestrel."
    assert content_hash(members) == before

    assert content_hash(members[:3]) != before  # a message fewer
    assert content_hash(list(reversed(members))) != before  # another order
    members[0]["name"] = "Someone else"
    assert content_hash(members) != before


def test_content_hash_does_not_run_messages_together() -> None:
    one = Chat([{"name": "A", "mes": "ab"}, {"name": "A", "mes": "c"}])
    two = Chat([{"name": "A", "mes": "a"}, {"name": "A", "mes": "bc"}])
    assert content_hash(one.messages) != content_hash(two.messages)


# --- storage: raw keys and a file round trip -----------------------------------------------------


def test_everything_survives_a_serialize_parse_round_trip() -> None:
    chat = make_chat(12, chat_id="round-trip")
    mark_break(chat.messages[3], "Hiring")
    add_recap_version(chat.messages[3], "Tomas hires Mira.", scene_hash="h3", metadata={"b": 1})
    edit_recap(chat.messages[3], "Tomas hires Mira for 60 crowns.")
    select_recap_version(chat.messages[3], 0)
    mark_break(chat.messages[5], visible=False)
    add_recap_version(chat.messages[5], "A storm.", scene_hash="h5")
    set_data(chat.messages[8], "auto_scene_break_checked", True)

    data = serialize_chat(chat)
    lines = data.split(b"\n")
    raw3 = json.loads(lines[4])["extra"][NAMESPACE]
    assert raw3 == {
        "scene_break": True,
        "scene_break_visible": True,
        "scene_break_name": "Hiring",
        "scene_recap_memory": "Tomas hires Mira.",
        "scene_recap_versions": ["Tomas hires Mira.", "Tomas hires Mira for 60 crowns."],
        "scene_recap_current_index": 0,
        "scene_recap_hash": "h3",
        "scene_recap_metadata": {"edited": True},
        "scene_recap_include": True,
    }
    raw5 = json.loads(lines[6])
    assert raw5["extra"][NAMESPACE]["scene_break_visible"] is False
    assert raw5["swipe_info"][1]["extra"][NAMESPACE]["scene_recap_memory"] == "A storm."
    assert json.loads(lines[9])["extra"][NAMESPACE] == {"auto_scene_break_checked": True}

    parsed = parse_chat(data, chat_id="round-trip")
    assert scenes(parsed.messages) == scenes(chat.messages)
    for before, after in zip(chat.messages, parsed.messages, strict=True):
        assert dict(after) == dict(before)
    assert recap_versions(parsed.messages[3]) == recap_versions(chat.messages[3])
    assert get_data(parsed.messages[8], "auto_scene_break_checked") is True
    assert serialize_chat(parsed) == data

    # Working on the parsed chat goes on where the original left off.
    assert select_recap_version(parsed.messages[3], 1) == "Tomas hires Mira for 60 crowns."
    assert add_recap_version(parsed.messages[5], "A worse storm.", scene_hash="h5b") == 1
