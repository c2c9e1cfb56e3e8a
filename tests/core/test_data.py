"""The message data API of seed 004, with the swipe rules of SPEC-NOTES §4.1."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import autorecap
from autorecap import (
    Chat,
    Message,
    MessageDataError,
    clear_memory,
    edit_memory,
    get_data,
    get_memory,
    get_previous_swipe_memory,
    has_data,
    select_swipe,
    set_data,
)
from autorecap.core.data import data_column
from autorecap.stfiles.jsonl import parse_chat, serialize_chat


def swiped(active: int, count: int = 3) -> Message:
    """A character message with `count` swipes, each with its own swipe_info entry."""
    return Message(
        {
            "name": "Mira",
            "is_user": False,
            "mes": f"reply {active}",
            "extra": {"api": "openai"},
            "swipe_id": active,
            "swipes": [f"reply {i}" for i in range(count)],
            "swipe_info": [
                {"send_date": f"2026-01-0{i + 1}T00:00:00.000Z", "extra": {"api": "openai"}}
                for i in range(count)
            ],
        }
    )


# seed 004: "set_data(message, key, value)" stores under message.extra.auto_recap_memory[key]
def test_set_data_stores_under_the_namespace() -> None:
    message = Message({"mes": "Alice enters.", "extra": {"other_extension": {"x": 1}}})
    set_data(message, "memory", "Alice entered the library.")
    assert message["extra"]["auto_recap_memory"] == {"memory": "Alice entered the library."}
    assert message["extra"]["other_extension"] == {"x": 1}
    assert get_data(message, "memory") == "Alice entered the library."


# seed 004: "Pattern 1: Store Recap After Generation"
def test_pattern_1_store_recap_after_generation() -> None:
    message = Message({"mes": "text", "extra": {}})
    set_data(message, "memory", "recap")
    set_data(message, "reasoning", "because")
    set_data(message, "error", None)
    assert get_data(message, "memory") == "recap"
    assert get_data(message, "reasoning") == "because"
    assert has_data(message, "error")
    assert get_data(message, "error") is None


# seed 004: "Pattern 2: Read Recap for Display"
def test_pattern_2_read_recap_for_display() -> None:
    message = Message({"mes": "text"})
    assert get_memory(message) == ""
    set_data(message, "memory", "Alice left.")
    set_data(message, "include", autorecap.INCLUDED)
    assert get_memory(message) == "Alice left."
    assert get_data(message, "include") == "Recap of message(s)"


# seed 004: "Pattern 3: Check Data Existence": null and missing both read as None, has_data tells
def test_pattern_3_null_and_missing_are_told_apart_by_has_data() -> None:
    message = Message({"mes": "text"})
    assert get_data(message, "error") is None
    assert not has_data(message, "error")
    set_data(message, "error", None)
    assert get_data(message, "error") is None
    assert has_data(message, "error")


# seed 004: "Pattern 4: Update Scene Break State"
def test_pattern_4_update_scene_break_state() -> None:
    message = Message({"mes": "text", "extra": {}})
    set_data(message, "scene_break", True)
    set_data(message, "scene_break_visible", True)
    set_data(message, "scene_break_name", "Chapter 2")
    assert message["extra"]["auto_recap_memory"] == {
        "scene_break": True,
        "scene_break_visible": True,
        "scene_break_name": "Chapter 2",
    }


# seed 004: "Pattern 5: Clear Recap Data" and clear_memory()
def test_pattern_5_clear_memory_clears_every_recap_key() -> None:
    message = Message({"mes": "text"})
    autorecap.update_data(
        message,
        {
            "memory": "m",
            "error": "e",
            "reasoning": "r",
            "prefill": "p",
            "edited": True,
            "exclude": True,
            "scene_break": True,
        },
    )
    clear_memory(message)
    namespace = message["extra"]["auto_recap_memory"]
    assert namespace == {
        "memory": None,
        "error": None,
        "reasoning": None,
        "prefill": None,
        "edited": False,
        "exclude": False,
        "scene_break": True,
    }


# seed 004: "Safe Data Access": get_data(null, ...) is undefined, no error
def test_get_data_on_no_message_or_odd_extra_is_none() -> None:
    assert get_data(None, "memory") is None
    assert not has_data(None, "memory")
    assert get_data(Message({"extra": None}), "memory") is None
    assert get_data(Message({"extra": "text"}), "memory") is None
    assert get_data({"extra": {"auto_recap_memory": {"memory": "plain dict"}}}, "memory") == (
        "plain dict"
    )


# seed 004: "Missing Message": set_data(null) throws
def test_set_data_on_no_message_is_a_clear_error() -> None:
    with pytest.raises(MessageDataError, match="no message"):
        set_data(None, "memory", "x")
    with pytest.raises(MessageDataError, match="no message"):
        edit_memory(None, "x")
    with pytest.raises(MessageDataError, match="no message"):
        clear_memory(None)


def test_set_data_refuses_an_extra_that_is_not_an_object() -> None:
    message = Message({"mes": "x", "extra": ["not", "an", "object"]})
    with pytest.raises(MessageDataError, match="'extra' is a list"):
        set_data(message, "memory", "x")
    assert message["extra"] == ["not", "an", "object"]


def test_set_data_refuses_a_namespace_that_is_not_an_object() -> None:
    message = Message({"mes": "x", "extra": {"auto_recap_memory": "oops"}})
    with pytest.raises(MessageDataError, match="auto_recap_memory is a str"):
        set_data(message, "memory", "x")


def test_set_data_creates_a_null_or_missing_extra() -> None:
    for message in (Message({"mes": "x", "extra": None}), Message({"mes": "x"})):
        set_data(message, "memory", "m")
        assert message["extra"] == {"auto_recap_memory": {"memory": "m"}}


# seed 004: "Swipe Synchronization", SPEC-NOTES §4.1: the whole namespace goes to the active swipe
@pytest.mark.parametrize("active", [0, 1, 2])
def test_set_data_copies_the_namespace_to_the_active_swipe_including_swipe_0(active: int) -> None:
    message = swiped(active)
    set_data(message, "memory", f"recap for swipe {active}")
    set_data(message, "include", None)
    for index, info in enumerate(message["swipe_info"]):
        stored = info["extra"].get("auto_recap_memory")
        if index == active:
            assert stored == {"memory": f"recap for swipe {active}", "include": None}
            assert info["extra"]["api"] == "openai"
        else:
            assert stored is None


def test_swipe_copy_is_independent_of_the_message_namespace() -> None:
    message = swiped(1)
    set_data(message, "scene_recap_versions", ["v1"])
    get_data(message, "scene_recap_versions").append("v2")
    assert message["swipe_info"][1]["extra"]["auto_recap_memory"]["scene_recap_versions"] == ["v1"]


def test_set_data_creates_a_missing_swipe_extra() -> None:
    message = Message({"mes": "a", "swipe_id": 1, "swipes": ["b", "a"], "swipe_info": [{}, {}]})
    set_data(message, "memory", "m")
    assert message["swipe_info"] == [{}, {"extra": {"auto_recap_memory": {"memory": "m"}}}]


@pytest.mark.parametrize(
    "fields",
    [
        {"swipe_id": 2, "swipes": ["a", "b", "c"], "swipe_info": [{}, {}]},  # no entry
        {"swipes": ["a"], "swipe_info": [{}]},  # no swipe_id
        {"swipe_id": "1", "swipes": ["a", "b"], "swipe_info": [{}, {}]},  # odd type
        {"swipe_id": 0, "swipes": ["a"], "swipe_info": None},
    ],
)
def test_nothing_is_invented_when_the_active_swipe_has_no_entry(fields: dict[str, Any]) -> None:
    message = Message({"mes": "a", **fields})
    before = {k: v for k, v in message.items() if k != "extra"}
    set_data(message, "memory", "m")
    assert {k: v for k, v in message.items() if k != "extra"} == before


# seed 004: "Independent Swipe Data"; SPEC-NOTES §4.1: switching swipes loads that swipe's data
def test_each_swipe_keeps_its_own_recap_and_switching_loads_it() -> None:
    message = swiped(0, count=2)
    set_data(message, "memory", "Recap for swipe 0")
    select_swipe(message, 1)
    assert message["mes"] == "reply 1"
    assert message["send_date"] == "2026-01-02T00:00:00.000Z"
    assert get_data(message, "memory") is None  # no stale data from swipe 0
    set_data(message, "memory", "Recap for swipe 1")
    select_swipe(message, 0)
    assert get_data(message, "memory") == "Recap for swipe 0"
    assert message["swipe_info"][1]["extra"]["auto_recap_memory"]["memory"] == "Recap for swipe 1"


def test_switching_to_a_swipe_without_info_drops_the_stale_recap_only() -> None:
    message = Message(
        {
            "mes": "a",
            "swipe_id": 0,
            "swipes": ["a", "b"],
            "extra": {"auto_recap_memory": {"memory": "for a"}, "api": "kobold"},
        }
    )
    select_swipe(message, 1)
    assert message["mes"] == "b"
    assert message["extra"] == {"api": "kobold"}


def test_selecting_a_swipe_that_does_not_exist_is_an_error() -> None:
    with pytest.raises(MessageDataError, match="swipe 5 does not exist: the message has 3"):
        select_swipe(swiped(0), 5)
    with pytest.raises(MessageDataError, match="has no swipes"):
        select_swipe(Message({"mes": "x"}), 0)


# seed 004: get_previous_swipe_memory(message, key)
def test_get_previous_swipe_memory() -> None:
    message = swiped(0)
    set_data(message, "memory", "first")
    assert get_previous_swipe_memory(message, "memory") is None  # swipe 0 has no previous
    select_swipe(message, 1)
    assert get_previous_swipe_memory(message, "memory") == "first"
    assert get_previous_swipe_memory(None, "memory") is None
    assert get_previous_swipe_memory(Message({"mes": "x"}), "memory") is None


# seed 004: get_memory(message) puts the prefill in front of the recap
def test_get_memory_includes_the_prefill() -> None:
    message = Message({"mes": "x"})
    set_data(message, "prefill", "In this scene: ")
    assert get_memory(message) == ""  # a prefill alone is no recap
    set_data(message, "memory", "Alice entered the library.")
    assert get_memory(message) == "In this scene: Alice entered the library."


# seed 004: edit_memory(message, text) sets memory, clears error/reasoning/prefill, edited=true
def test_edit_memory() -> None:
    message = Message({"mes": "x"})
    autorecap.update_data(message, {"memory": "old", "error": "e", "reasoning": "r"})
    edit_memory(message, "Corrected recap text...")
    assert message["extra"]["auto_recap_memory"] == {
        "memory": "Corrected recap text...",
        "error": None,
        "reasoning": None,
        "prefill": None,
        "edited": True,
    }


def test_edit_memory_with_the_same_text_changes_nothing() -> None:
    message = Message({"mes": "x"})
    set_data(message, "memory", "same")
    edit_memory(message, "same")
    assert get_data(message, "edited") is None


# seed 004, "Migration Notes": data under the old namespace reads as if it were under the new one
def test_legacy_namespace_reads_as_current() -> None:
    message = Message({"mes": "x", "extra": {"auto_summarize_memory": {"memory": "old recap"}}})
    assert get_data(message, "memory") == "old recap"
    assert has_data(message, "memory")
    assert get_memory(message) == "old recap"
    assert "auto_recap_memory" not in message["extra"]  # reading never writes


def test_a_data_column_reads_as_get_data_does_message_by_message() -> None:
    messages = [
        Message({"mes": "no extra"}),
        Message({"mes": "extra not an object", "extra": "x"}),
        Message({"mes": "no namespace", "extra": {"other": {"memory": "theirs"}}}),
        Message({"mes": "current", "extra": {"auto_recap_memory": {"memory": "new"}}}),
        Message({"mes": "legacy", "extra": {"auto_summarize_memory": {"memory": "old"}}}),
        Message(
            {
                "mes": "both",
                "extra": {
                    "auto_recap_memory": {"memory": "new"},
                    "auto_summarize_memory": {"memory": "old"},
                },
            }
        ),
        Message(
            {
                "mes": "bad current",
                "extra": {"auto_recap_memory": 3, "auto_summarize_memory": {"memory": "old"}},
            }
        ),
        Message({"mes": "null", "extra": {"auto_recap_memory": {"memory": None}}}),
    ]
    column = data_column(messages, "memory")
    assert column == [get_data(m, "memory") for m in messages]
    assert column == [None, None, None, "new", "old", "new", "old", None]


def test_legacy_namespace_moves_on_the_first_write() -> None:
    message = swiped(0, count=1)
    message["extra"]["auto_summarize_memory"] = {"memory": "old recap", "include": None}
    message["swipe_info"][0]["extra"]["auto_summarize_memory"] = {"memory": "old recap"}
    set_data(message, "edited", True)
    assert message["extra"] == {
        "api": "openai",
        "auto_recap_memory": {"memory": "old recap", "include": None, "edited": True},
    }
    assert message["swipe_info"][0]["extra"] == {
        "api": "openai",
        "auto_recap_memory": {"memory": "old recap", "include": None, "edited": True},
    }


def test_both_namespaces_merge_with_the_current_one_winning() -> None:
    message = Message(
        {
            "mes": "x",
            "extra": {
                "auto_recap_memory": {"memory": "new"},
                "auto_summarize_memory": {"memory": "old", "exclude": True},
            },
        }
    )
    assert get_data(message, "memory") == "new"
    set_data(message, "include", None)
    assert message["extra"] == {
        "auto_recap_memory": {"memory": "new", "exclude": True, "include": None}
    }


def test_untouched_legacy_messages_keep_their_bytes(tmp_path: Path) -> None:
    lines = [
        b'{"chat_metadata":{},"user_name":"unused","character_name":"unused"}',
        b'{"name":"A","mes":"one","extra":{"auto_summarize_memory":{"memory":"r1"}}}',
        b'{"name":"B","mes":"two","extra":{"auto_summarize_memory":{"memory":"r2"}}}',
    ]
    chat = parse_chat(b"\n".join(lines), chat_id="legacy")
    set_data(chat.messages[1], "memory", "rewritten")
    written = serialize_chat(chat).split(b"\n")
    assert written[1] == lines[1]
    assert written[2] == (
        b'{"name":"B","mes":"two","extra":{"auto_recap_memory":{"memory":"rewritten"}}}'
    )


# seed 004: writes trigger a (debounced) save; SPEC-NOTES §4.1: no chat, nothing saved
def test_writes_notify_the_chat_they_belong_to() -> None:
    chat = Chat([{"name": "A", "mes": "one"}])
    seen: list[Message | None] = []
    chat.listeners.append(seen.append)
    set_data(chat.messages[0], "memory", "m")
    edit_memory(chat.messages[0], "n")
    select_swipe(chat.append(swiped(0)), 1)
    assert seen == [chat.messages[0], chat.messages[0], chat.messages[1]]


def test_a_message_without_a_chat_can_be_written_to() -> None:
    message = Message({"mes": "x"})
    set_data(message, "memory", "kept in memory only")
    assert message.chat is None
    assert get_data(message, "memory") == "kept in memory only"
