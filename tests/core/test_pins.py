"""The long-term tier (seed 003): pinned message recaps, in their own slot, within their budget
(the newest pins kept), on every refresh while `long_term_enabled` is on."""

from __future__ import annotations

from autorecap import set_data
from autorecap.core.memory import refresh_memory
from autorecap.core.model import Chat
from autorecap.core.pins import (
    LONG_KEY,
    is_pinned,
    long_term_text,
    pinned_indexes,
    set_pinned,
)
from autorecap.core.slots import ExtensionPrompts, Position
from autorecap.core.tokens import TokenCounter
from autorecap.settings import Settings

COUNTER = TokenCounter("cl100k")
TEMPLATE = "Remember:\n{{memories}}"


def chat_of(count: int) -> Chat:
    chat = Chat(chat_id="pins")
    for i in range(count):
        message = chat.adopt({"name": "Mira", "is_user": i % 2 == 0, "mes": f"Message {i}."})
        chat.messages.append(message)
        set_data(message, "memory", f"Mira noted fact number {i} about the Kestrel.")
    return chat


def test_pins_are_set_read_and_cleared() -> None:
    chat = chat_of(6)
    set_pinned(chat.messages[1], True)
    set_pinned(chat.messages[4], True)
    assert pinned_indexes(chat.messages) == [1, 4]
    assert is_pinned(chat.messages[4])
    set_pinned(chat.messages[4], False)
    assert pinned_indexes(chat.messages) == [1]


def test_the_pinned_recaps_oldest_first_through_the_template() -> None:
    chat = chat_of(6)
    for i in (4, 1):
        set_pinned(chat.messages[i], True)
    text, kept = long_term_text(chat.messages, TEMPLATE, 500, COUNTER)
    assert kept == [1, 4]
    assert text == (
        "Remember:\nMira noted fact number 1 about the Kestrel.\n"
        "Mira noted fact number 4 about the Kestrel."
    )


def test_a_pin_without_a_recap_gives_its_text() -> None:
    chat = chat_of(3)
    set_data(chat.messages[2], "memory", None)
    set_pinned(chat.messages[2], True)
    assert long_term_text(chat.messages, "", 500, COUNTER) == ("Message 2.", [2])


def test_the_newest_pins_are_kept_within_the_budget() -> None:
    chat = chat_of(40)
    for message in chat.messages:
        set_pinned(message, True)
    for budget in (0, 15, 40, 120, 400):
        text, kept = long_term_text(chat.messages, TEMPLATE, budget, COUNTER)
        assert COUNTER.count(text) <= budget
        assert kept == list(range(40 - len(kept), 40))  # the newest, in order
    assert long_term_text(chat.messages, TEMPLATE, 0, COUNTER) == ("", [])


def test_refresh_fills_the_slot_only_with_the_tier_on() -> None:
    chat = chat_of(8)
    set_pinned(chat.messages[3], True)
    slots = ExtensionPrompts()
    refresh_memory(chat, Settings(), slots, COUNTER)
    assert LONG_KEY not in slots
    on = Settings(long_term_enabled=True, long_term_position=1, long_term_depth=3)
    refresh_memory(chat, on, slots, COUNTER)
    slot = slots.get(LONG_KEY)
    assert slot is not None
    assert "fact number 3" in slot.value
    assert (slot.position, slot.depth) == (Position.IN_CHAT, 3)
    refresh_memory(chat, Settings(), slots, COUNTER)
    assert slots.value(LONG_KEY) == ""  # turned off: emptied, not left behind
    refresh_memory(chat, on.model_copy(update={"chats_enabled": {"pins": False}}), slots, COUNTER)
    assert slots.value(LONG_KEY) == ""  # the chat's memory is off
