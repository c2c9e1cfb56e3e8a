"""The combined recap (seed 003, off by default): every message recap merged into one narrative,
versioned like the running recap, made again when the recaps were edited or every `EVERY` new
ones, injected in its own slot with `combined_recap_enabled`."""

from __future__ import annotations

import pytest

from autorecap import set_data
from autorecap.core import combined, running
from autorecap.core.memory import refresh_memory
from autorecap.core.model import Chat
from autorecap.core.slots import ExtensionPrompts, Position
from autorecap.core.tokens import TokenCounter
from autorecap.errors import AutorecapError
from autorecap.recap.combined_recap import EVERY, update_combined_recap
from autorecap.recap.offline.engine import OfflineBackend
from autorecap.recap.pipeline import run_pipeline
from autorecap.sample import sample_chat_path
from autorecap.settings import Settings
from autorecap.stfiles.jsonl import read_chat

COUNTER = TokenCounter("cl100k")
BACKEND = OfflineBackend(COUNTER)
ON = Settings(combined_recap_enabled=True, combined_recap_max_tokens=300)


def chat_of(count: int) -> Chat:
    chat = Chat(chat_id="combined")
    for i in range(count):
        message = chat.adopt({"name": "Mira", "is_user": False, "mes": f"Message {i}."})
        chat.messages.append(message)
        set_data(message, "memory", f"Mira paid Osric {100 + i} crowns at Berth {i}.")
    return chat


def update(chat: Chat, **options: object) -> int:
    return update_combined_recap(chat, BACKEND, ON, COUNTER, now_ms=5, **options)  # type: ignore[arg-type]


def test_a_version_holds_facts_from_the_whole_chat_within_the_cap() -> None:
    chat = chat_of(60)
    assert update(chat) == 1
    version = combined.current(chat)
    assert version is not None
    content = str(version["content"])
    assert COUNTER.count(content) <= 300
    assert version["message_count"] == 60
    assert version["timestamp"] == 5
    numbers = [i for i in range(60) if f"{100 + i} crowns" in content]
    # Facts from across the chat, not only its newest recaps (which of the near-equal ones
    # is kept is the selection's to choose).
    assert numbers[0] < 15
    assert numbers[-1] > 40
    assert running.current(chat) is None  # the running recap is kept apart


def test_nothing_is_made_again_until_the_recaps_change_enough() -> None:
    chat = chat_of(30)
    assert update(chat) == 1
    assert update(chat) == 0  # the same recaps
    for i in range(30, 30 + EVERY - 1):
        message = chat.adopt({"name": "Mira", "is_user": False, "mes": f"Message {i}."})
        chat.messages.append(message)
        set_data(message, "memory", f"Mira paid Osric {100 + i} crowns at Berth {i}.")
    assert update(chat) == 0  # fewer than EVERY new recaps
    message = chat.adopt({"name": "Mira", "is_user": False, "mes": "One more."})
    chat.messages.append(message)
    set_data(message, "memory", "Mira sold the Kestrel's old topsail for 12 crowns.")
    assert update(chat) == 1
    set_data(chat.messages[3], "memory", "Mira hid the chart in the flour barrel.")
    assert update(chat) == 1  # an edit: made again at once
    assert update(chat, force=True) == 1
    assert [v["version"] for v in combined.versions(chat)] == [0, 1, 2, 3]


def test_excluded_messages_and_a_chat_without_recaps_give_nothing() -> None:
    chat = chat_of(5)
    for message in chat.messages:
        set_data(message, "exclude", True)
    assert update(chat) == 0
    assert combined.current(chat) is None


def test_versions_are_selected_and_injected_in_their_slot_only_when_on() -> None:
    chat = chat_of(40)
    update(chat)
    set_data(chat.messages[0], "memory", "Mira sold the chart to Vane for 900 crowns.")
    update(chat)
    combined.select_version(chat, 0)
    slots = ExtensionPrompts()
    refresh_memory(chat, Settings(), slots, COUNTER)
    assert combined.COMBINED_KEY not in slots
    refresh_memory(chat, ON, slots, COUNTER)
    slot = slots.get(combined.COMBINED_KEY)
    assert slot is not None
    assert slot.position == Position.BEFORE_PROMPT
    assert slot.value.startswith("The story so far, in short:\n")
    assert "900 crowns" not in slot.value  # version 0 is the one selected
    combined.select_version(chat, 1)
    refresh_memory(chat, ON, slots, COUNTER)
    assert "900 crowns" in slots.value(combined.COMBINED_KEY)
    with pytest.raises(AutorecapError, match="no combined recap version 7"):
        combined.select_version(chat, 7)


def test_the_pipeline_makes_it_only_when_on() -> None:
    chat = read_chat(sample_chat_path())
    stats = run_pipeline(chat, BACKEND, Settings(), COUNTER, now_ms=0)
    assert stats.combined_versions == 0
    assert combined.current(chat) is None
    stats = run_pipeline(chat, BACKEND, ON, COUNTER, now_ms=0)
    assert stats.combined_versions == 1
    content = str(combined.current(chat)["content"])  # type: ignore[index]
    assert "Aster Hollow" in content  # where they go
    assert "Hesk" in content  # whom they owe


def test_a_backend_that_cannot_merge_is_a_failure_not_a_crash() -> None:
    class NoMerge(OfflineBackend):
        def merge_recaps(self, request: object) -> object:  # type: ignore[override]
            raise AutorecapError("no merging here")

    failures: list[str] = []
    chat = chat_of(3)
    made = update_combined_recap(chat, NoMerge(COUNTER), ON, COUNTER, now_ms=0, failures=failures)
    assert made == 0
    assert failures == ["combined recap: no merging here"]
