"""`Session`: a chat changed the way a frontend changes it, with the seeds' event handlers
(seed 002 eventHandlers.js; seed 000 refresh stages and Case 4; SPEC-NOTES §4.6-§4.8, §4.12)."""

from __future__ import annotations

import logging
import re
import shutil
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from autorecap import Chat, Profiles, SQLiteStore, get_data, read_chat, set_data
from autorecap.core import running
from autorecap.core.events import Event, ManualClock
from autorecap.core.running import SET_ASIDE_PREFIX, STORAGE_KEY
from autorecap.core.scenes import break_indexes
from autorecap.core.slots import SCENE_KEY, Position
from autorecap.recap.detection import detect_scene_breaks
from autorecap.recap.offline.engine import OfflineBackend
from autorecap.session import Session, SessionError
from autorecap.settings import DEFAULT_RUNNING_TEMPLATE, Settings
from autorecap.stfiles.jsonl import write_chat
from autorecap.testing import generate

ISO_MS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
NO_HIDE = Settings(auto_hide_scene_count=-1)


def make_chat(n: int = 6, chat_id: str = "chat-1", breaks: tuple[int, ...] = ()) -> Chat:
    """Alternating user / character messages; the character's have one swipe."""
    messages: list[dict[str, Any]] = []
    for i in range(n):
        if i % 2 == 0:
            messages.append(
                {"name": "Tomas", "is_user": True, "is_system": False, "mes": f"m{i}", "extra": {}}
            )
        else:
            messages.append(
                {
                    "name": "Captain Mira",
                    "is_user": False,
                    "is_system": False,
                    "mes": f"m{i}",
                    "extra": {},
                    "swipe_id": 0,
                    "swipes": [f"m{i}"],
                    "swipe_info": [{"send_date": "2026-03-02T18:00:00.000Z", "extra": {}}],
                }
            )
    chat = Chat(messages, chat_id=chat_id)
    for index in breaks:
        set_data(chat.messages[index], "scene_break", True)
    return chat


def with_recap(chat: Chat, content: str = "The Kestrel sails.", new: int = 0) -> Chat:
    running.add_version(
        chat,
        content,
        scene_count=1,
        excluded_count=0,
        prev_scene_index=0,
        new_scene_index=new,
        now_ms=1_700_000_000_000,
    )
    return chat


def injected(content: str) -> str:
    return DEFAULT_RUNNING_TEMPLATE.replace("{{running_recap}}", content)


def session_for(chat: Chat, settings: Settings = NO_HIDE) -> tuple[Session, ManualClock]:
    clock = ManualClock()
    return Session(chat, clock=clock, settings=settings), clock


def fixture_copy(fixtures_dir: Path, tmp_path: Path, name: str = "mira.jsonl") -> Path:
    target = tmp_path / name
    shutil.copyfile(fixtures_dir / "handmade" / "modern-solo.jsonl", target)
    return target


# --- send / receive (seed 002 handleMessageSent; SPEC-NOTES §2, §4.12) -------------------------


def test_send_appends_a_user_message_shaped_like_sillytavern() -> None:
    session, clock = session_for(make_chat())
    message = session.send("We sail at dawn.")
    assert session.messages[-1] is message
    assert set(message) == {"name", "is_user", "is_system", "send_date", "mes", "extra"}
    assert message["name"] == "Tomas"  # the last user message's name
    assert message["is_user"] is True
    assert message["is_system"] is False
    assert message["mes"] == "We sail at dawn."
    assert message["extra"] == {}
    assert ISO_MS.match(message["send_date"])
    sent = datetime.fromisoformat(message["send_date"].replace("Z", "+00:00"))
    assert sent == datetime.fromtimestamp(clock.wall_ms() / 1000, tz=UTC)
    assert message.chat is session.chat


def test_receive_appends_a_character_message_with_its_first_swipe() -> None:
    session, _ = session_for(make_chat())
    message = session.receive("*Mira nods.* Dawn it is.")
    assert message["name"] == "Captain Mira"
    assert message["is_user"] is False
    assert message["is_system"] is False
    assert message["mes"] == "*Mira nods.* Dawn it is."
    assert message["extra"] == {}
    assert message["swipe_id"] == 0
    assert message["swipes"] == ["*Mira nods.* Dawn it is."]
    (info,) = message["swipe_info"]
    assert set(info) == {"send_date", "gen_started", "gen_finished", "extra"}
    assert info["send_date"] == message["send_date"]
    assert ISO_MS.match(message["send_date"])
    assert info["extra"] == {}


def test_send_and_receive_use_the_header_names_in_an_empty_chat() -> None:
    chat = Chat(
        [],
        chat_id="empty",
        header={"chat_metadata": {}, "user_name": "Ana", "character_name": "Bo"},
    )
    session, _ = session_for(chat)
    assert session.send("hi")["name"] == "Ana"
    assert session.receive("hello")["name"] == "Bo"
    assert session.send("named", name="Someone")["name"] == "Someone"


@pytest.mark.parametrize(
    ("event", "act"),
    [
        (Event.MESSAGE_SENT, lambda s: s.send("hello")),
        (Event.MESSAGE_RECEIVED, lambda s: s.receive("hello")),
    ],
)
def test_send_and_receive_fire_their_event_and_refresh_at_once(event: Event, act: Any) -> None:
    # SPEC-NOTES §4.12 / seed 002: message_sent and message_received refresh at once; listeners
    # get the new message's index, after the seeds' handler ran.
    session, clock = session_for(with_recap(make_chat()))
    seen: list[tuple[Event, int | None, int]] = []
    session.on(event, lambda e, i: seen.append((e, i, session.refreshes)))
    before = session.refreshes
    act(session)
    assert session.refreshes == before + 1
    assert seen == [(event, 6, before + 1)]
    assert clock.pending == 0  # nothing debounced
    assert session.slots.value(SCENE_KEY) == injected("The Kestrel sails.")


def test_listeners_can_be_registered_by_event_name() -> None:
    session, _ = session_for(make_chat())
    seen: list[int | None] = []
    session.on("message_sent", lambda e, i: seen.append(i))
    session.send("a")
    session.send("b")
    assert seen == [6, 7]


def test_message_sent_logs_the_last_injection_at_debug(caplog: pytest.LogCaptureFixture) -> None:
    # seed 002 handleMessageSent: debug(`[MEMORY INJECTION] scene_injection:\n${...}`).
    session, _ = session_for(with_recap(make_chat(), "Mira is wary."))
    with caplog.at_level(logging.DEBUG, logger="autorecap"):
        session.send("hello")
    records = [r for r in caplog.records if "[MEMORY INJECTION]" in r.getMessage()]
    assert len(records) == 1
    assert records[0].name == "autorecap"
    assert records[0].levelno == logging.DEBUG
    assert records[0].getMessage() == (
        "[MEMORY INJECTION] scene_injection:\n" + injected("Mira is wary.")
    )


def test_message_sent_logs_nothing_without_an_injection(caplog: pytest.LogCaptureFixture) -> None:
    # seed 002 handleMessageSent: `if (last_scene_injection)` -- no recap, no log line.
    session, _ = session_for(make_chat())
    with caplog.at_level(logging.DEBUG, logger="autorecap"):
        session.send("hello")
    assert not [r for r in caplog.records if "[MEMORY INJECTION]" in r.getMessage()]


# --- edits and swipes: the debounced refresh (seed 000 Case 4; SPEC-NOTES §4.12) ---------------


def test_edit_message_changes_the_text_and_debounces_the_refresh() -> None:
    session, clock = session_for(make_chat())
    seen: list[int | None] = []
    session.on(Event.MESSAGE_EDITED, lambda e, i: seen.append(i))
    before = session.refreshes
    message = session.edit_message(1, "edited reply")
    assert message["mes"] == "edited reply"
    assert message["swipes"] == ["edited reply"]  # the active swipe's text too
    assert seen == [1]
    assert session.refreshes == before  # debounced: not yet
    clock.advance(0.25)
    assert session.refreshes == before
    clock.advance(0.1)  # 300 ms after the edit
    assert session.refreshes == before + 1
    clock.advance(5)
    assert session.refreshes == before + 1


def test_refresh_if_stale_refreshes_only_after_a_change() -> None:
    # The proxy refreshes once after applying a request's changes; when the last change's
    # handler refreshed already, that second refresh is skipped.
    session, clock = session_for(with_recap(make_chat(), "Mira is wary."))
    session.send("hello")  # message_sent refreshed at once
    before = session.refreshes
    assert session.refresh_if_stale() == injected("Mira is wary.")
    assert session.refreshes == before
    session.edit_message(1, "edited reply")  # debounced: the chat changed, no refresh yet
    assert session.refresh_if_stale() == injected("Mira is wary.")
    assert session.refreshes == before + 1
    clock.advance(1)  # the explicit refresh cancelled the debounced one
    assert session.refreshes == before + 1
    session.chat.messages[0]["mes"] = "changed from outside"
    session.chat.notify_change(session.chat.messages[0])
    session.refresh_if_stale()
    assert session.refreshes == before + 2


def test_refresh_if_stale_refreshes_when_memory_is_off_for_the_chat() -> None:
    # With memory off the handlers do not refresh; the slot must still be emptied.
    off = Settings(auto_hide_scene_count=-1, default_chat_enabled=False)
    session, _ = session_for(with_recap(make_chat(), "Mira is wary."), off)
    session.send("hello")
    before = session.refreshes
    assert session.refresh_if_stale() == ""
    assert session.refreshes == before + 1
    assert session.slots.value(SCENE_KEY) == ""


def test_edit_message_of_a_message_without_swipes_changes_only_mes() -> None:
    session, _ = session_for(make_chat())
    message = session.edit_message(0, "new words")
    assert message["mes"] == "new words"
    assert "swipes" not in message


def test_a_burst_of_swipes_gives_exactly_one_refresh() -> None:
    # seed 000 Case 4: rapid swipes -> one refresh, 300 ms after the last swipe.
    chat = make_chat()
    message = chat.messages[1]
    message["swipes"] = ["a", "b", "c"]
    message["swipe_info"] = [{"extra": {}}, {"extra": {}}, {"extra": {}}]
    session, clock = session_for(chat)
    before = session.refreshes
    for to in (1, 2, 1, 0, 2):
        session.swipe(1, to=to)
        clock.advance(0.05)
    assert session.refreshes == before
    clock.advance(0.2)  # 0.45 s after the first swipe, 0.25 s after the last
    assert session.refreshes == before
    clock.advance(0.1)
    assert session.refreshes == before + 1
    clock.advance(10)
    assert session.refreshes == before + 1
    assert message["swipe_id"] == 2
    assert message["mes"] == "c"


def test_load_more_uses_the_debounced_refresh() -> None:
    # SPEC-NOTES §4.12: more_messages_loaded uses the debounced refresh.
    session, clock = session_for(make_chat())
    before = session.refreshes
    session.load_more()
    session.load_more()
    assert session.refreshes == before
    clock.advance(0.3)
    assert session.refreshes == before + 1


def test_refresh_debounce_follows_the_setting() -> None:
    session, clock = session_for(make_chat(), Settings(refresh_debounce_ms=1000))
    before = session.refreshes
    session.edit_message(0, "x")
    clock.advance(0.9)
    assert session.refreshes == before
    clock.advance(0.2)
    assert session.refreshes == before + 1


def test_swipe_to_an_existing_swipe_selects_it_with_its_own_recap() -> None:
    # seed 002 handleMessageSwiped: an existing swipe keeps its recap; SPEC-NOTES §4.1: the
    # selected swipe's own data is what is read next.
    generated = generate(60, seed=3, with_recaps=True, chat_id="gen")
    chat = generated.chat
    index = 8  # 3 swipes, swipe 0 active and recapped
    message = chat.messages[index]
    assert message["swipe_id"] == 0
    recap = get_data(message, "memory")
    assert recap
    session, clock = session_for(chat)
    session.swipe(index, to=1)
    assert message["swipe_id"] == 1
    assert message["mes"] == message["swipes"][1]
    assert get_data(message, "memory") is None
    session.swipe(index, to=0)
    assert message["mes"] == message["swipes"][0]
    assert get_data(message, "memory") == recap
    assert len(message["swipes"]) == 3
    clock.advance(0.3)


def test_a_new_swipe_starts_without_a_recap_and_the_old_swipe_keeps_its_own() -> None:
    # seed 002 handleMessageSwiped: swipe_id == swipes.length -> clear_memory(message).
    generated = generate(60, seed=3, with_recaps=True, chat_id="gen")
    chat = generated.chat
    index = 35  # 2 swipes, swipe 0 active and recapped
    message = chat.messages[index]
    old_text = message["mes"]
    recap = get_data(message, "memory")
    assert recap
    session, clock = session_for(chat)
    seen: list[int | None] = []
    session.on(Event.MESSAGE_SWIPED, lambda e, i: seen.append(i))
    before = session.refreshes
    session.swipe(index, text="*Mira shrugs.* Another answer.")
    assert seen == [index]
    assert message["swipe_id"] == 2
    assert message["swipes"] == [old_text, message["swipes"][1], "*Mira shrugs.* Another answer."]
    assert message["mes"] == "*Mira shrugs.* Another answer."
    assert len(message["swipe_info"]) == 3
    assert ISO_MS.match(message["swipe_info"][2]["send_date"])
    assert get_data(message, "memory") is None  # cleared for the new swipe
    assert message["swipe_info"][2]["extra"]["auto_recap_memory"].get("memory") is None
    assert message["swipe_info"][0]["extra"]["auto_recap_memory"]["memory"] == recap
    assert session.refreshes == before  # debounced
    clock.advance(0.3)
    assert session.refreshes == before + 1
    session.swipe(index, to=0)
    assert get_data(message, "memory") == recap


def test_a_new_swipe_on_a_message_without_swipes_keeps_the_first_text() -> None:
    session, _ = session_for(make_chat())
    message = session.swipe(0, text="second version")
    assert message["swipes"] == ["m0", "second version"]
    assert message["swipe_id"] == 1
    assert message["mes"] == "second version"
    assert len(message["swipe_info"]) == 2


# --- deletion (seed 002 handleMessageDeleted; SPEC-NOTES §4.7, §4.9) ---------------------------


def test_delete_message_refreshes_at_once_and_cleans_up_running_recaps() -> None:
    generated = generate(60, seed=3, with_recaps=True, chat_id="gen")
    chat = generated.chat
    first, second = generated.scene_ends  # 28, 58
    for end in (first, second):
        set_data(chat.messages[end], "scene_break", True)
    for content, prev, new in (("scene one", 0, first), ("scenes one and two", first, second)):
        running.add_version(
            chat,
            content,
            scene_count=1,
            excluded_count=0,
            prev_scene_index=prev,
            new_scene_index=new,
            now_ms=0,
        )
    session, clock = session_for(chat)
    seen: list[int | None] = []
    session.on(Event.MESSAGE_DELETED, lambda e, i: seen.append(i))
    assert session.slots.value(SCENE_KEY) == injected("scenes one and two")

    before = session.refreshes
    deleted = session.delete_message(5)
    assert deleted not in chat.messages
    assert len(chat.messages) == 59
    assert seen == [5]
    assert session.refreshes == before + 1  # at once
    assert clock.pending == 0
    v0, v1 = session.running_versions()
    assert (v0["new_scene_index"], v1["prev_scene_index"], v1["new_scene_index"]) == (
        first - 1,
        first - 1,
        second - 1,
    )

    session.delete_message(second - 1)  # the current version's scene break
    assert [v["version"] for v in session.running_versions()] == [0]
    assert session.slots.value(SCENE_KEY) == injected("scene one")
    assert session.refreshes == before + 2


def test_deleting_the_last_message_by_negative_index_keeps_running_recaps() -> None:
    # SPEC-NOTES §4.9: a deletion shifts only the indexes after the deleted message. Session
    # accepts negative indexes (-1 = the last message); deleting a plain last message must not
    # move or drop the running recap of an earlier scene.
    chat = with_recap(make_chat(n=8, breaks=(3,)), "scene one", new=3)
    session, _ = session_for(chat)
    session.delete_message(-1)
    assert len(chat.messages) == 7
    assert [v["new_scene_index"] for v in session.running_versions()] == [3]
    assert session.slots.value(SCENE_KEY) == injected("scene one")


# --- disabled chats (seed 000 Stage 4; seed 002 chat_enabled early exits) ----------------------


def test_a_disabled_chat_injects_an_empty_slot_in_prompt_at_depth_0() -> None:
    # seed 000 Stage 4: setExtensionPrompt(`${MODULE_NAME}_scene`, "", IN_PROMPT, 0).
    chat = with_recap(make_chat())
    settings = Settings(chats_enabled={chat.id: False}, running_scene_recap_position=1)
    session, _ = session_for(chat, settings)
    assert not session.enabled
    slot = session.slots.get(SCENE_KEY)
    assert slot is not None
    assert slot.value == ""
    assert slot.position == Position.IN_PROMPT
    assert slot.position == 0
    assert slot.depth == 0
    assert session.refresh() == ""


def test_a_disabled_chat_skips_the_sent_deleted_and_swiped_handlers() -> None:
    # seed 002: handleMessageSent / Deleted / Swiped start with `if (!chat_enabled()) return;`.
    chat = with_recap(make_chat(n=6, breaks=(3,)), new=3)
    set_data(chat.messages[5], "memory", "Mira's last words.")
    session, clock = session_for(chat, Settings(chats_enabled={chat.id: False}))
    before = session.refreshes
    session.send("hello")
    assert session.refreshes == before
    session.delete_message(6)
    assert session.refreshes == before
    session.swipe(5, text="a new reply")
    assert clock.pending == 0  # no debounced refresh scheduled
    clock.advance(1)
    assert session.refreshes == before
    assert get_data(chat.messages[5], "memory") == "Mira's last words."  # not cleared


def test_a_chat_enabled_by_the_global_toggle() -> None:
    # seed 002 chat_enabled(): the global toggle wins over the chat's own switch.
    chat = with_recap(make_chat())
    settings = Settings(
        use_global_toggle_state=True, global_toggle_state=True, chats_enabled={chat.id: False}
    )
    session, _ = session_for(chat, settings)
    assert session.enabled
    assert session.slots.value(SCENE_KEY) == injected("The Kestrel sails.")


def test_set_enabled_false_turns_the_injection_off_and_persists_it() -> None:
    chat = with_recap(make_chat(chat_id="toggled"))
    session = Session(chat, clock=ManualClock())
    assert session.slots.value(SCENE_KEY) == injected("The Kestrel sails.")
    session.set_enabled(False)
    assert not session.enabled
    slot = session.slots.get(SCENE_KEY)
    assert slot is not None
    assert (slot.value, slot.position, slot.depth) == ("", 0, 0)
    assert Profiles().settings_for("toggled").chats_enabled == {"toggled": False}
    session.set_enabled(None)  # back to the default (on)
    assert session.enabled
    assert session.slots.value(SCENE_KEY) == injected("The Kestrel sails.")
    assert Profiles().settings_for("toggled").chats_enabled == {}


def test_set_enabled_false_also_turns_off_a_session_with_given_settings() -> None:
    # `set_enabled` says it turns memory on or off for this chat and refreshes. A session built
    # with explicit settings (the dry-run form) must not silently keep injecting.
    chat = with_recap(make_chat(chat_id="fixed"))
    session, _ = session_for(chat, Settings())
    session.set_enabled(False)
    assert Profiles().settings_for("fixed").chats_enabled == {"fixed": False}
    assert not session.enabled
    assert session.slots.value(SCENE_KEY) == ""


# --- chat_changed: profile and slots (seed 002 handleChatChanged; SPEC-NOTES §3) ---------------


def test_chat_changed_loads_the_profile_bound_to_the_chat(
    fixtures_dir: Path, tmp_path: Path
) -> None:
    # seed 002 handleChatChanged -> auto_load_profile(); refresh_memory() uses its position.
    path = fixture_copy(fixtures_dir, tmp_path)
    profiles = Profiles()
    profiles.save_profile("in chat")
    profiles.set("running_scene_recap_position", 1, profile="in chat")
    profiles.set("running_scene_recap_depth", 5, profile="in chat")
    profiles.set("running_scene_recap_role", 2, profile="in chat")
    profiles.bind("in chat", chat="mira")
    with Session(path, clock=ManualClock()) as session:
        slot = session.slots.get(SCENE_KEY)
        assert slot is not None
        assert (slot.position, slot.depth, slot.role) == (1, 5, 2)
        assert "A storm split the mainmast." in slot.value
    with Session(fixture_copy(fixtures_dir, tmp_path, "other.jsonl"), clock=ManualClock()) as s:
        assert s.slots.get(SCENE_KEY).position == 2  # type: ignore[union-attr]


def test_chat_changed_reloads_the_profile_and_sets_the_slots_again() -> None:
    # SPEC-NOTES §3: switching chats clears every slot, so chat_changed sets them again.
    chat = with_recap(make_chat(chat_id="switch"))
    session = Session(chat, clock=ManualClock())
    session.slots.set("another_extension", "stale", 0, 0)
    profiles = session.profiles
    profiles.save_profile("deep")
    profiles.set("running_scene_recap_position", 1, profile="deep")
    profiles.bind("deep", chat="switch")
    session._fire(Event.CHAT_CHANGED, None)  # what SillyTavern's chat switch triggers
    assert "another_extension" not in session.slots
    slot = session.slots.get(SCENE_KEY)
    assert slot is not None
    assert slot.position == 1
    assert slot.value == injected("The Kestrel sails.")


def test_the_profile_bound_to_a_chat_file_also_sets_its_save_debounce(
    fixtures_dir: Path, tmp_path: Path
) -> None:
    # seed 002 auto_load_profile(): a chat runs with its bound profile, save_debounce_ms
    # included (SPEC-NOTES §5). The profile is bound by chat id, the file name without .jsonl.
    path = fixture_copy(fixtures_dir, tmp_path)
    profiles = Profiles()
    profiles.save_profile("eager")
    profiles.set("save_debounce_ms", 0, profile="eager")
    profiles.bind("eager", chat="mira")
    with Session(path, clock=ManualClock()) as session:
        assert session.settings.save_debounce_ms == 0
        assert session.open is not None
        assert session.open.debounce_ms == 0


# --- scene breaks and auto-hide (SPEC-NOTES §4.6) ----------------------------------------------


def test_marking_a_scene_break_with_count_0_hides_up_to_it_and_unmarking_unhides() -> None:
    chat = make_chat(n=8)
    chat.messages[6]["is_system"] = True  # hidden by the user: never unhidden
    session, _ = session_for(chat, Settings(auto_hide_scene_count=0, auto_hide_only_recapped=False))
    before = session.refreshes
    message = session.mark_scene_break(3, name="Leaving port")
    assert session.refreshes == before + 1
    assert get_data(message, "scene_break") is True
    assert get_data(message, "scene_break_visible") is True
    assert get_data(message, "scene_break_name") == "Leaving port"
    assert [m.is_system for m in chat.messages] == [True] * 4 + [False, False, True, False]
    session.unmark_scene_break(3)
    assert session.refreshes == before + 2
    assert get_data(message, "scene_break") is False
    assert [m.is_system for m in chat.messages] == [False] * 6 + [True, False]
    assert not any(get_data(m, "auto_hidden") for m in chat.messages)


def test_a_later_scene_break_moves_the_hidden_range() -> None:
    # SPEC-NOTES §4.6 with N = 2: everything up to and including b(k-N+1) is hidden.
    chat = make_chat(n=10)
    session, _ = session_for(chat, Settings(auto_hide_scene_count=2, auto_hide_only_recapped=False))
    session.mark_scene_break(2)
    assert not any(m.is_system for m in chat.messages)  # k = 1 < N = 2: nothing hidden
    session.mark_scene_break(6)
    assert [m.is_system for m in chat.messages] == [True] * 3 + [False] * 7
    session.mark_scene_break(8)
    assert [m.is_system for m in chat.messages] == [True] * 7 + [False] * 3
    session.unmark_scene_break(6)
    assert [m.is_system for m in chat.messages] == [True] * 3 + [False] * 7


def test_reload_settings_reads_changes_made_to_the_settings_file() -> None:
    # `Session.reload_settings`: "Read the settings again (profile, toggles) and refresh." A
    # change saved to settings.json by someone else (the CLI, another Profiles object) must be
    # seen, as seed 002's get_settings() always reads the current settings.
    chat = with_recap(make_chat(chat_id="reloaded"))
    session = Session(chat, clock=ManualClock())
    assert session.slots.get(SCENE_KEY).position == 2  # type: ignore[union-attr]
    Profiles().set("running_scene_recap_position", 0)  # the active profile, saved to the file
    session.reload_settings()
    assert session.settings.running_scene_recap_position == 0
    assert session.slots.get(SCENE_KEY).position == 0  # type: ignore[union-attr]


# --- the running recap through the session (SPEC-NOTES §4.7) ----------------------------------


def test_editing_and_selecting_running_recap_versions_changes_the_slot() -> None:
    chat = with_recap(make_chat(n=6, breaks=(3,)), "first text", new=3)
    session, clock = session_for(chat)
    clock.advance(2)
    before = session.refreshes
    version = session.edit_running_recap("edited text")
    assert version["version"] == 1
    assert version["timestamp"] == clock.wall_ms()
    assert version["new_scene_index"] == 3
    assert session.refreshes == before + 1
    assert session.slots.value(SCENE_KEY) == injected("edited text")
    assert [v["content"] for v in session.running_versions()] == ["first text", "edited text"]
    session.select_version(0)
    assert session.slots.value(SCENE_KEY) == injected("first text")
    session.select_version(1)
    session.delete_version(1)
    assert session.slots.value(SCENE_KEY) == injected("first text")
    with pytest.raises(running.RunningRecapError, match="the versions are 0"):
        session.select_version(9)


def test_editing_the_running_recap_without_one_raises() -> None:
    session, _ = session_for(make_chat())
    with pytest.raises(running.RunningRecapError):
        session.edit_running_recap("nothing yet")
    assert session.slots.value(SCENE_KEY) == ""


# --- persistence (SPEC-NOTES §4.8, §4.11) ------------------------------------------------------


def test_a_session_on_a_chat_file_saves_its_changes(fixtures_dir: Path, tmp_path: Path) -> None:
    path = fixture_copy(fixtures_dir, tmp_path)
    with Session(path, clock=ManualClock()) as session:
        assert session.id == "mira"
        count = len(session.messages)
        session.send("We sail at dawn.")
        session.receive("*Mira nods.* Dawn it is.")
        session.edit_running_recap("Edited: the Kestrel is at sea.")
    saved = read_chat(path)
    assert len(saved.messages) == count + 2
    assert saved.messages[-2]["mes"] == "We sail at dawn."
    assert saved.messages[-1]["swipes"] == ["*Mira nods.* Dawn it is."]
    stored = saved.metadata[STORAGE_KEY]
    assert stored["chat_id"] == "mira"  # SPEC-NOTES §4.8: a file adopts the storage
    assert stored["current_version"] == 2
    assert running.current(saved)["content"] == "Edited: the Kestrel is at sea."  # type: ignore[index]


def test_a_renamed_chat_file_keeps_its_running_recap(fixtures_dir: Path, tmp_path: Path) -> None:
    # SPEC-NOTES §4.8: opening a file is an import; the storage adopts the file's chat id.
    path = fixture_copy(fixtures_dir, tmp_path, "renamed copy.jsonl")
    with Session(path, clock=ManualClock()) as session:
        assert session.warnings == []
        assert "A storm split the mainmast." in session.slots.value(SCENE_KEY)


def test_a_stored_chat_with_another_chats_recap_keeps_it_aside_and_warns(
    fixtures_dir: Path, tmp_path: Path, home: Path
) -> None:
    # SPEC-NOTES §4.8: in the store, a mismatch that is not a branch keeps the old storage
    # aside, starts empty and warns.
    owner = "Captain Mira - 2026-03-02@18h11m40s512ms"
    store = SQLiteStore(home / "store.db")
    try:
        moved = read_chat(fixture_copy(fixtures_dir, tmp_path))
        moved.layout.from_file = False  # metadata that moved inside the store, not an import
        store.import_chat(moved, chat_id="copied")
        with Session("copied", store=store, clock=ManualClock()) as session:
            assert len(session.warnings) == 1
            assert owner in session.warnings[0]
            assert session.slots.value(SCENE_KEY) == ""
            assert session.running_versions() == []
        saved = store.load_chat("copied")
        assert saved.metadata[STORAGE_KEY]["chat_id"] == "copied"
        aside = saved.metadata[f"{SET_ASIDE_PREFIX}{owner}"]
        assert [v["version"] for v in aside["versions"]] == [0, 1]
    finally:
        store.close()


def test_a_stored_branch_adopts_the_running_recap(
    fixtures_dir: Path, tmp_path: Path, home: Path
) -> None:
    # SPEC-NOTES §4.8: a branch (chat_metadata.main_chat set) adopts the new id.
    chat = read_chat(fixture_copy(fixtures_dir, tmp_path))
    chat.metadata["main_chat"] = "Captain Mira - 2026-03-02@18h11m40s512ms"
    store = SQLiteStore(home / "store.db")
    try:
        store.import_chat(chat, chat_id="Branch #1")
        with Session("Branch #1", store=store, clock=ManualClock()) as session:
            assert session.warnings == []
            assert "A storm split the mainmast." in session.slots.value(SCENE_KEY)
        assert store.load_chat("Branch #1").metadata[STORAGE_KEY]["chat_id"] == "Branch #1"
    finally:
        store.close()


# --- errors ------------------------------------------------------------------------------------


@pytest.mark.parametrize("index", [6, 100, -7])
def test_a_message_index_out_of_range_names_the_valid_range(index: int) -> None:
    session, _ = session_for(make_chat(n=6))
    acts: list[Callable[[], object]] = [
        lambda: session.edit_message(index, "x"),
        lambda: session.delete_message(index),
        lambda: session.swipe(index, to=0),
        lambda: session.mark_scene_break(index),
        lambda: session.unmark_scene_break(index),
    ]
    for act in acts:
        with pytest.raises(SessionError, match=r"0 to 5"):
            act()
    assert len(session.messages) == 6


def test_a_message_index_in_an_empty_chat_says_the_chat_is_empty() -> None:
    session, _ = session_for(Chat([], chat_id="empty"))
    with pytest.raises(SessionError, match="empty"):
        session.delete_message(0)


def test_swipe_needs_exactly_one_of_to_and_text() -> None:
    session, clock = session_for(make_chat())
    with pytest.raises(SessionError, match="to=N"):
        session.swipe(1)
    with pytest.raises(SessionError, match="text="):
        session.swipe(1, to=0, text="both")
    assert session.messages[1]["swipes"] == ["m1"]
    assert clock.pending == 0


def test_a_chat_imported_from_a_renamed_file_keeps_its_running_recap(
    fixtures_dir: Path, tmp_path: Path, home: Path
) -> None:
    """SPEC-NOTES §4.8 (found in review): an import is an import; the running recap of a
    renamed or copied file adopts the stored chat's id instead of being set aside."""
    store = SQLiteStore(home / "store.db")
    try:
        store.import_chat(read_chat(fixture_copy(fixtures_dir, tmp_path)), chat_id="renamed")
        # The stored file is still byte for byte the imported one until something changes.
        assert store.export_chat("renamed") == fixture_copy(fixtures_dir, tmp_path).read_bytes()
        with Session("renamed", store=store, clock=ManualClock()) as session:
            assert session.warnings == []
            assert [v["version"] for v in session.running_versions()] == [0, 1]
            assert "A storm split the mainmast." in session.slots.value(SCENE_KEY)
        assert store.load_chat("renamed").metadata[STORAGE_KEY]["chat_id"] == "renamed"
    finally:
        store.close()


def test_refreshes_without_recall_keep_the_slot_the_last_turn_filled() -> None:
    chat = generate(120, seed=3).chat
    session = Session(chat, settings=Settings(recall_enabled=True))
    searches: list[object] = []
    search = session.search.recall

    def counted(*args: Any, **kwargs: Any) -> Any:
        searches.append(args)
        return search(*args, **kwargs)

    session.search.recall = counted  # type: ignore[method-assign]
    session.refresh()
    assert len(searches) == 1
    slot = session.slots.value("auto_recap_memory_recall")
    session.recall_on_refresh = False  # as the server's sessions are
    session.receive("A new reply that the next request will ask about anew.")  # refreshes
    session.refresh()
    assert len(searches) == 1
    assert session.slots.value("auto_recap_memory_recall") == slot
    session.recall_into_slot()  # where a prompt is built
    assert len(searches) == 2


def test_a_history_without_dates_then_a_pause_of_a_day_opens_a_scene() -> None:
    """As the proxy records a chat: the history it received at once has no dates, the
    messages it sees pass are dated, and a conversation taken up the next day opens a
    scene there."""
    clock = ManualClock()
    session = Session(Chat(chat_id="pause"), settings=Settings(), clock=clock)
    for i in range(30):
        session.send(f"I check the engine of the boat again, part {i}.", quiet=True, dated=False)
        session.receive(f"The engine of the boat hums, part {i}.", quiet=True, dated=False)
    assert all(m.send_time is None for m in session.chat.messages)
    for day in range(2):
        for i in range(8):
            clock.advance(40)
            session.send(f"Still on the engine of the boat, {day}.{i}.", quiet=True)
            clock.advance(20)
            session.receive(f"The engine of the boat coughs, {day}.{i}.", quiet=True)
        clock.advance(86_400)
    detect_scene_breaks(session.chat, OfflineBackend(), session.settings)
    next_day = 60 + 16  # the first message after the pause
    assert any(abs(b + 1 - next_day) <= 1 for b in break_indexes(session.chat.messages))


def test_a_closed_session_refuses_to_go_on(tmp_path: Path) -> None:
    """What a closed session was asked would be lost: it says so instead."""
    path = tmp_path / "chat.jsonl"
    write_chat(Chat([{"name": "Ann", "is_user": True, "mes": "hi"}], chat_id="chat"), path)
    session = Session(path)
    session.close()
    for act in (
        lambda: session.send("after close"),
        lambda: session.receive("after close"),
        lambda: session.edit_message(0, "changed"),
        lambda: session.recall("hi"),
        lambda: session.refresh(),
    ):
        with pytest.raises(SessionError, match="is closed: open a new Session"):
            act()
    assert [m.text for m in read_chat(path).messages] == ["hi"]


@pytest.mark.parametrize("text", [None, 42, ["hi"]])
def test_a_message_text_must_be_a_string(tmp_path: Path, text: Any) -> None:
    session = Session(Chat([{"name": "Ann", "is_user": True, "mes": "hi"}], chat_id="c"))
    for act in (session.send, session.receive, lambda t: session.edit_message(0, t)):
        with pytest.raises(SessionError, match="a message's text is a string"):
            act(text)
    assert [m.text for m in session.chat.messages] == ["hi"]


def test_recall_of_an_empty_text_is_an_error_that_says_what_to_pass() -> None:
    session = Session(Chat([{"name": "Ann", "is_user": True, "mes": "hi"}], chat_id="c"))
    for blank in ("", " \n"):
        with pytest.raises(SessionError, match="the text is empty; pass None"):
            session.recall(blank)
    assert session.recall(None) == []  # the newest message: nothing hidden to recall yet
