"""refresh_memory() and its stages: exclusion (seed 002), inclusion flags against a direct port
of the seed loop (seeds 000/002, SPEC-NOTES §4.2), the short-term tier (§4.4), auto-hide (§4.6)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autorecap import INCLUDED, Message, get_data, get_memory, set_data
from autorecap.core import running
from autorecap.core.autohide import HideChange, apply_auto_hide, hide_boundary
from autorecap.core.memory import (
    MemoryState,
    check_message_exclusion,
    refresh_memory,
    short_token_limit,
    update_inclusion_flags,
)
from autorecap.core.model import Chat
from autorecap.core.slots import SCENE_KEY, SHORT_KEY, ExtensionPrompts, Position
from autorecap.core.tokens import TokenCounter
from autorecap.settings import Settings
from autorecap.testing import generate

COUNTER = TokenCounter("cl100k")

# ---- the reference: seed 002's update_message_inclusion_flags(), ported as written ----------


def reference_flags(messages: list[Message], settings: Settings, group_id: str | None) -> list[Any]:
    """A direct port of the seed's loop (seed 000 Stage 5 / seed 002), kept deliberately naive:
    it concatenates the recaps into one growing string and counts that string on every step.
    The count of a join is SPEC-NOTES §4.2's: the parts' counts plus one per separator."""

    def count_join(text: str) -> int:
        parts = text.split("\n") if text else []
        return sum(COUNTER.count_uncached(p) for p in parts) + max(0, len(parts) - 1)

    limit = short_token_limit(settings)
    flags: list[Any] = [None] * len(messages)
    message_recap_limit_reached = False
    recap = ""
    for i in range(len(messages) - 1, -1, -1):
        message = messages[i]
        include = check_message_exclusion(message, settings, COUNTER, group_id)
        if not include:
            flags[i] = None
            continue
        if not message_recap_limit_reached:
            memory = get_memory(message)
            if not memory:
                flags[i] = None
                continue
            new_recap = f"{memory}\n{recap}" if recap else memory  # concatenate_recap
            if count_join(new_recap) > limit:
                message_recap_limit_reached = True
                recap = ""
            else:
                flags[i] = INCLUDED
                recap = new_recap
                continue
        flags[i] = None
    return flags


def flags_of(messages: list[Message]) -> list[Any]:
    return [get_data(m, "include") for m in messages]


settings_strategy = st.builds(
    Settings,
    include_user_messages=st.booleans(),
    include_system_messages=st.booleans(),
    include_narrator_messages=st.booleans(),
    message_length_threshold=st.sampled_from([0, 0, 5, 20]),
    message_recap_context_limit=st.sampled_from([0, 1, 2, 5, 10, 50, 100, 400]),
    message_recap_context_type=st.sampled_from(["percent", "absolute"]),
    context_size=st.sampled_from([256, 2048, 8192]),
)


@settings(max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n=st.integers(0, 80),
    seed=st.integers(0, 10_000),
    config=settings_strategy,
    excluded=st.sets(st.integers(0, 79), max_size=6),
    without_recap=st.sets(st.integers(0, 79), max_size=10),
)
def test_flags_equal_the_seed_loop_on_generated_chats(
    n: int, seed: int, config: Settings, excluded: set[int], without_recap: set[int]
) -> None:
    """seeds 000/002 + SPEC-NOTES §4.2: same flags as the seed loop, on thousands of chats."""
    chat = generate(n, seed=seed, with_recaps=True, hidden_rate=0.1).chat
    for i in excluded & set(range(n)):
        set_data(chat.messages[i], "exclude", True)
    for i in without_recap & set(range(n)):
        set_data(chat.messages[i], "memory", None)
    expected = reference_flags(chat.messages, config, None)
    included, _ = update_inclusion_flags(chat.messages, config, COUNTER)
    assert flags_of(chat.messages) == expected
    assert [m for m in chat.messages if get_data(m, "include") == INCLUDED] == included


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 10_000),
    config=settings_strategy,
    steps=st.lists(
        st.tuples(
            st.sampled_from(["append", "recap", "unrecap", "exclude", "break", "refresh"]),
            st.integers(0, 10_000),
        ),
        min_size=1,
        max_size=25,
    ),
)
def test_incremental_refresh_equals_a_full_one(
    seed: int, config: Settings, steps: list[tuple[str, int]]
) -> None:
    """An incremental refresh (MemoryState) ends in exactly the state a fresh full refresh gives:
    same flags, same hidden messages, same injection."""
    chat = generate(40, seed=seed, with_recaps=True).chat
    state, slots = MemoryState(), ExtensionPrompts()
    touch = state.touch
    chat.listeners.append(touch)
    assert refresh_memory(chat, config, slots, COUNTER, state=state).full
    kinds = []
    for action, value in steps:
        chat.listeners.remove(touch)  # the refresh's own writes are not "outside" changes
        if action == "append":
            added = chat.append({"name": "T", "is_user": value % 2 == 0, "mes": f"line {value}"})
            if value % 3:
                set_data(added, "memory", f"T does thing {value}")
        chat.listeners.append(touch)
        if action == "recap":
            set_data(chat.messages[value % len(chat.messages)], "memory", f"new recap {value}")
        elif action == "unrecap":
            set_data(chat.messages[value % len(chat.messages)], "memory", None)
        elif action == "exclude":
            set_data(chat.messages[value % len(chat.messages)], "exclude", value % 2 == 0)
        elif action == "break":
            set_data(chat.messages[value % len(chat.messages)], "scene_break", value % 2 == 0)
        chat.listeners.remove(touch)
        last = refresh_memory(chat, config, slots, COUNTER, state=state)
        kinds.append(last.full)
        chat.listeners.append(touch)
    if all(action in ("append", "refresh", "recap", "unrecap", "exclude") for action, _ in steps):
        assert not any(kinds)  # no scene break changed: every refresh was incremental
    incremental = (flags_of(chat.messages), [m.is_hidden for m in chat.messages])
    fresh = copy.deepcopy(chat)
    full = refresh_memory(fresh, config, ExtensionPrompts(), COUNTER)
    assert (flags_of(fresh.messages), [m.is_hidden for m in fresh.messages]) == incremental
    # what the last incremental refresh returned: the same messages in short-term memory
    positions = {id(m): i for i, m in enumerate(chat.messages)}
    fresh_positions = {id(m): i for i, m in enumerate(fresh.messages)}
    assert [positions[id(m)] for m in last.included] == [
        fresh_positions[id(m)] for m in full.included
    ]


def test_a_refresh_after_a_message_without_a_recap_keeps_the_last_walk() -> None:
    """The inclusion walk reads only recapped messages: a new message without a recap leaves
    its result standing (no walk), and a new recap, or a recapped message changed from outside,
    makes it run again."""
    chat = generate(30, seed=3, with_recaps=True).chat
    config = Settings(message_recap_context_type="absolute", message_recap_context_limit=60)
    state, slots = MemoryState(), ExtensionPrompts()
    refresh_memory(chat, config, slots, COUNTER, state=state)
    chat.listeners.append(state.touch)
    before = refresh_memory(chat, config, slots, COUNTER, state=state).included
    assert before
    assert not state.walk_due
    plain = chat.append({"name": "T", "is_user": True, "mes": "no recap here"})
    set_data(plain, "exclude", False)  # changed from outside, but the walk never visits it
    after = refresh_memory(chat, config, slots, COUNTER, state=state)
    assert after.included == before
    assert not after.full
    assert not state.walk_due
    assert not state.touched  # nothing left over for the next refresh to go through
    newest = chat.append({"name": "T", "is_user": False, "mes": "this one has one"})
    set_data(newest, "memory", "T answers at length")
    after = refresh_memory(chat, config, slots, COUNTER, state=state)
    assert after.included[-1] is newest
    assert get_data(newest, "include") == INCLUDED
    set_data(newest, "exclude", True)  # a recapped message changed from outside: walked again
    after = refresh_memory(chat, config, slots, COUNTER, state=state)
    assert newest not in after.included
    assert get_data(newest, "include") is None


# ---- exclusion criteria (seed 002 check_message_exclusion), one test each -------------------


def msg(**fields: Any) -> Message:
    base: dict[str, Any] = {"name": "Mira", "is_user": False, "mes": "A long enough message."}
    base.update(fields)
    return Message(base)


def test_exclusion_1_extension_system_memory() -> None:
    message = msg()
    set_data(message, "is_auto_recap_system_memory", True)
    assert not check_message_exclusion(message, Settings(), COUNTER)


def test_exclusion_2_explicit_exclude() -> None:
    message = msg()
    set_data(message, "exclude", True)
    assert not check_message_exclusion(message, Settings(), COUNTER)


def test_exclusion_3_user_messages() -> None:
    assert check_message_exclusion(msg(is_user=True), Settings(), COUNTER)
    off = Settings(include_user_messages=False)
    assert not check_message_exclusion(msg(is_user=True), off, COUNTER)


def test_exclusion_4_thought_messages() -> None:
    assert not check_message_exclusion(msg(is_thoughts=True), Settings(), COUNTER)


def test_exclusion_5_system_hidden_messages() -> None:
    assert check_message_exclusion(msg(is_system=True), Settings(), COUNTER)
    off = Settings(include_system_messages=False)
    assert not check_message_exclusion(msg(is_system=True), off, COUNTER)


def test_exclusion_6_narrator_messages() -> None:
    narrator = msg(extra={"type": "narrator"})
    assert check_message_exclusion(narrator, Settings(), COUNTER)
    assert not check_message_exclusion(narrator, Settings(include_narrator_messages=False), COUNTER)


def test_exclusion_7_disabled_group_characters() -> None:
    config = Settings(disabled_group_characters={"g1": ["Bram.png"]})
    bram = msg(name="Bram", original_avatar="Bram.png")
    assert not check_message_exclusion(bram, config, COUNTER, "g1")
    assert check_message_exclusion(bram, config, COUNTER, "g2")
    assert check_message_exclusion(bram, config, COUNTER, None)  # not a group chat
    assert check_message_exclusion(
        msg(name="Juno", original_avatar="Juno.png"), config, COUNTER, "g1"
    )


def test_exclusion_8_below_the_token_threshold() -> None:
    config = Settings(message_length_threshold=4)
    assert not check_message_exclusion(msg(mes="Hi."), config, COUNTER)
    assert check_message_exclusion(msg(mes="A long enough message."), config, COUNTER)
    # SillyTavern's getTokenCount counts only strings: a number mes is 0 tokens.
    assert not check_message_exclusion(msg(mes=123456789), config, COUNTER)


def test_no_message_is_excluded() -> None:
    assert not check_message_exclusion(None, Settings(), COUNTER)


# ---- the short-term limit (seed 003 get_short_token_limit) -----------------------------------


def test_short_token_limit_percent_and_absolute() -> None:
    assert short_token_limit(Settings()) == 819  # floor(8192 * 10 / 100)
    assert short_token_limit(Settings(context_size=1000, message_recap_context_limit=15)) == 150
    absolute = Settings(message_recap_context_type="absolute", message_recap_context_limit=1000)
    assert short_token_limit(absolute) == 1000


def test_flags_stop_at_the_first_recap_that_does_not_fit() -> None:
    messages = [msg() for _ in range(5)]
    for i, m in enumerate(messages):
        set_data(m, "memory", "word " * (3 if i != 2 else 30))
    limit = Settings(message_recap_context_type="absolute", message_recap_context_limit=20)
    included, _ = update_inclusion_flags(messages, limit, COUNTER)
    assert flags_of(messages) == [None, None, None, INCLUDED, INCLUDED]
    assert included == messages[3:]


def test_flags_are_written_only_where_they_change() -> None:
    messages = [msg() for _ in range(3)]
    for m in messages:
        set_data(m, "memory", "short")
    _, written = update_inclusion_flags(messages, Settings(), COUNTER)
    assert written == 3
    _, written = update_inclusion_flags(messages, Settings(), COUNTER)
    assert written == 0
    unflagged = msg()
    update_inclusion_flags([unflagged], Settings(), COUNTER)
    assert "extra" not in unflagged  # a missing flag already reads as None: nothing written


# ---- refresh_memory() stages (seed 000) ------------------------------------------------------


def chat_with_recap(content: str = "Mira owes Osric 340 crowns.") -> Chat:
    chat = generate(30, seed=1, with_recaps=True).chat
    set_data(chat.messages[10], "scene_break", True)
    running.add_version(
        chat,
        content,
        scene_count=1,
        excluded_count=1,
        prev_scene_index=0,
        new_scene_index=10,
        now_ms=1,
    )
    return chat


def test_refresh_registers_the_scene_slot_with_the_settings() -> None:
    slots = ExtensionPrompts()
    config = Settings(
        running_scene_recap_position=1,
        running_scene_recap_depth=4,
        running_scene_recap_role=2,
        running_scene_recap_scan=True,
    )
    result = refresh_memory(chat_with_recap(), config, slots, COUNTER)
    slot = slots.get(SCENE_KEY)
    assert slot is not None
    assert (slot.position, slot.depth, slot.role, slot.scan) == (1, 4, 2, True)
    assert slot.value == result.text
    assert result.text.startswith("# Story Memory\n\n")
    assert result.text.endswith("Mira owes Osric 340 crowns.")


def test_refresh_when_disabled_sets_an_empty_slot_and_returns_empty() -> None:
    """seed 000 Stage 4: setExtensionPrompt(key, "", IN_PROMPT, 0); return ""."""
    chat = chat_with_recap()
    slots = ExtensionPrompts()
    config = Settings(chats_enabled={chat.id: False})
    result = refresh_memory(chat, config, slots, COUNTER)
    assert result.text == ""
    assert not result.enabled
    assert slots.get(SCENE_KEY) == slots.get(SCENE_KEY).__class__(
        "", Position.IN_PROMPT, 0, False, 0
    )
    assert all(get_data(m, "include") is None for m in chat.messages)  # flags untouched


def test_refresh_with_no_running_recap_sets_an_empty_slot() -> None:
    """seed 000 Case 1: no recap -> "" is still registered."""
    slots = ExtensionPrompts()
    result = refresh_memory(generate(10, seed=2).chat, Settings(), slots, COUNTER)
    assert result.text == ""
    assert SCENE_KEY in slots
    assert slots.value(SCENE_KEY) == ""


def test_refresh_with_an_empty_template_injects_the_raw_recap() -> None:
    """seed 000 Case 2."""
    slots = ExtensionPrompts()
    result = refresh_memory(
        chat_with_recap("raw text"), Settings(running_scene_recap_template="  "), slots, COUNTER
    )
    assert result.text == "raw text"


def test_short_term_tier_is_off_by_default_and_injects_when_on() -> None:
    """SPEC-NOTES §4.4."""
    chat = chat_with_recap()
    slots = ExtensionPrompts()
    refresh_memory(chat, Settings(), slots, COUNTER)
    assert SHORT_KEY not in slots
    config = Settings(
        message_recap_injection_enabled=True, message_recap_template="Recent:\n{{memories}}"
    )
    result = refresh_memory(chat, config, slots, COUNTER)
    slot = slots.get(SHORT_KEY)
    assert slot is not None
    assert (slot.position, slot.depth, slot.role) == (1, 4, 0)
    recaps = [get_memory(m) for m in result.included]
    assert slot.value == "Recent:\n" + "\n".join(recaps)
    assert recaps
    assert result.included == sorted(result.included, key=chat.messages.index)
    refresh_memory(chat, Settings(), slots, COUNTER)
    assert slots.value(SHORT_KEY) == ""  # turned off again: kept, empty, skipped when placed


# ---- auto-hide (seed 003, SPEC-NOTES §4.6) ----------------------------------------------------


@pytest.mark.parametrize(
    ("breaks", "count", "expected"),
    [
        ([9, 19, 29], 2, 19),
        ([9, 19, 29], 1, 29),
        ([9, 19, 29], 3, 9),
        ([9, 19, 29], 4, -1),
        ([9, 19, 29], 0, 29),
        ([9, 19, 29], -1, -1),
        ([], 0, -1),
        ([], 2, -1),
    ],
)
def test_hide_boundary(breaks: list[int], count: int, expected: int) -> None:
    assert hide_boundary(breaks, count) == expected


def hidden_chat(n: int = 30, breaks: tuple[int, ...] = (9, 19)) -> Chat:
    chat = generate(n, seed=5, hidden_rate=0.0).chat
    for index in breaks:
        set_data(chat.messages[index], "scene_break", True)
    return chat


def test_auto_hide_hides_marks_and_unhides_when_no_longer_covered() -> None:
    chat = hidden_chat()
    slots = ExtensionPrompts()
    result = refresh_memory(
        chat, Settings(auto_hide_scene_count=1, auto_hide_only_recapped=False), slots, COUNTER
    )
    assert result.hide_changes == [HideChange(0, 19, True)]
    assert [m.is_hidden for m in chat.messages] == [True] * 20 + [False] * 10
    assert all(get_data(m, "auto_hidden") for m in chat.messages[:20])
    result = refresh_memory(
        chat, Settings(auto_hide_scene_count=2, auto_hide_only_recapped=False), slots, COUNTER
    )
    assert result.hide_changes == [HideChange(10, 19, False)]
    assert [m.is_hidden for m in chat.messages] == [True] * 10 + [False] * 20
    assert not any(get_data(m, "auto_hidden") for m in chat.messages[10:])
    refresh_memory(
        chat, Settings(auto_hide_scene_count=-1, auto_hide_only_recapped=False), slots, COUNTER
    )
    assert not any(m.is_hidden for m in chat.messages)


def test_auto_hide_never_touches_the_users_own_hides() -> None:
    chat = hidden_chat()
    chat.messages[3]["is_system"] = True  # hidden by the user: no mark
    chat.messages[25]["is_system"] = True
    refresh_memory(
        chat,
        Settings(auto_hide_scene_count=1, auto_hide_only_recapped=False),
        ExtensionPrompts(),
        COUNTER,
    )
    assert get_data(chat.messages[3], "auto_hidden") is None
    refresh_memory(
        chat,
        Settings(auto_hide_scene_count=-1, auto_hide_only_recapped=False),
        ExtensionPrompts(),
        COUNTER,
    )
    assert chat.messages[3].is_hidden
    assert chat.messages[25].is_hidden
    assert not chat.messages[4].is_hidden


def test_removing_a_break_unhides_what_it_covered() -> None:
    chat = hidden_chat()
    state = MemoryState()
    chat.listeners.append(state.touch)
    refresh_memory(
        chat,
        Settings(auto_hide_scene_count=0, auto_hide_only_recapped=False),
        ExtensionPrompts(),
        COUNTER,
        state=state,
    )
    assert sum(m.is_hidden for m in chat.messages) == 20
    set_data(chat.messages[19], "scene_break", False)
    refresh_memory(
        chat,
        Settings(auto_hide_scene_count=0, auto_hide_only_recapped=False),
        ExtensionPrompts(),
        COUNTER,
        state=state,
    )
    assert [m.is_hidden for m in chat.messages] == [True] * 10 + [False] * 20


def test_a_setting_changed_in_place_makes_the_next_refresh_a_full_one() -> None:
    chat = hidden_chat()
    state, settings = (
        MemoryState(),
        Settings(auto_hide_scene_count=0, auto_hide_only_recapped=False),
    )
    chat.listeners.append(state.touch)
    assert refresh_memory(chat, settings, ExtensionPrompts(), COUNTER, state=state).full
    assert not refresh_memory(chat, settings, ExtensionPrompts(), COUNTER, state=state).full
    settings.auto_hide_scene_count = 2  # the same object, changed
    assert refresh_memory(chat, settings, ExtensionPrompts(), COUNTER, state=state).full
    assert [m.is_hidden for m in chat.messages] == [True] * 10 + [False] * 20
    settings.chats_enabled["elsewhere"] = False  # a change inside a mutable field counts too
    assert refresh_memory(chat, settings, ExtensionPrompts(), COUNTER, state=state).full


def test_invisible_breaks_do_not_count() -> None:
    chat = hidden_chat()
    set_data(chat.messages[19], "scene_break_visible", False)
    refresh_memory(
        chat,
        Settings(auto_hide_scene_count=0, auto_hide_only_recapped=False),
        ExtensionPrompts(),
        COUNTER,
    )
    assert sum(m.is_hidden for m in chat.messages) == 10


def test_by_default_auto_hide_hides_only_what_the_running_recap_holds() -> None:
    """`auto_hide_only_recapped`: a scene is hidden once the current running version covers
    it; while its recap lags, it stays in the prompt; a version moved back unhides again."""
    chat = hidden_chat(breaks=(9, 19, 25))
    state = MemoryState()
    chat.listeners.append(state.touch)
    settings = Settings(auto_hide_scene_count=1)

    def refresh() -> list[bool]:
        refresh_memory(chat, settings, ExtensionPrompts(), COUNTER, state=state)
        return [m.is_hidden for m in chat.messages]

    def fold_in(count: int, end: int) -> None:
        previous = running.current(chat)
        running.add_version(
            chat,
            f"- scenes 1 to {count}",
            scene_count=count,
            excluded_count=1,
            prev_scene_index=int(previous["new_scene_index"]) if previous else 0,
            new_scene_index=end,
            now_ms=count,
        )

    assert not any(refresh())  # the seed's rule would hide 0-25: no recap holds them yet
    fold_in(1, 9)
    assert refresh() == [True] * 10 + [False] * 20
    fold_in(2, 19)
    assert refresh() == [True] * 20 + [False] * 10
    fold_in(3, 25)
    assert refresh() == [True] * 26 + [False] * 4  # the seed's boundary: never past it
    running.select_version(chat, 0)  # versions are numbered from 0
    assert refresh() == [True] * 10 + [False] * 20
    assert all(get_data(m, "auto_hidden") for m in chat.messages[:10])


@pytest.mark.parametrize(
    ("breaks", "count", "covered", "expected"),
    [([9, 19], 1, -1, -1), ([9, 19], 1, 9, 9), ([9, 19], 1, 30, 19), ([9, 19], 0, 19, 19)],
)
def test_hide_boundary_never_passes_what_is_covered(
    breaks: list[int], count: int, covered: int, expected: int
) -> None:
    assert hide_boundary(breaks, count, covered) == expected


def test_changes_come_in_contiguous_ranges() -> None:
    chat = hidden_chat()
    chat.messages[5]["is_system"] = True
    changes = apply_auto_hide(chat.messages, 12)
    assert changes == [HideChange(0, 4, True), HideChange(6, 12, True)]
