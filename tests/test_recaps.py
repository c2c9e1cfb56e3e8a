"""Message recaps (`autorecap.recap.messages`): `recap_all` / `recap_message` store seed 004's
keys on the message and its active swipe, honour the exclusion settings and user edits, survive
failing backends; `MessageRecapper` keeps a `Session`'s recaps up to date; `build_request`."""

from __future__ import annotations

import time
from typing import Any

import pytest

from autorecap import Chat, ManualClock, Settings, edit_memory, get_data, get_memory, set_data
from autorecap.core.data import NAMESPACE
from autorecap.core.model import Message
from autorecap.core.tokens import TokenCounter
from autorecap.recap.backend import LLMError, RecapBackend, RecapRequest, RecapResult
from autorecap.recap.messages import build_request, needs_recap, recap_all, recap_message
from autorecap.recap.offline.engine import OfflineBackend
from autorecap.recapper import MessageRecapper
from autorecap.session import Session
from autorecap.testing import generate

COUNTER = TokenCounter("cl100k")
DEFAULTS = Settings()


class ScriptedBackend(RecapBackend):
    """Recaps as `recap:<text>`; raises `LLMError` for texts in `failing`; records requests."""

    name = "scripted"

    def __init__(
        self,
        *,
        failing: set[str] | None = None,
        reasoning: str | None = None,
        prefill: str | None = None,
    ) -> None:
        self.failing = set(failing or ())
        self.reasoning = reasoning
        self.prefill = prefill
        self.requests: list[RecapRequest] = []

    def message_recap(self, request: RecapRequest) -> RecapResult:
        self.requests.append(request)
        if request.text in self.failing:
            raise LLMError("the LLM server answered 500 (model exploded)", status=500)
        return RecapResult(
            memory=f"recap:{request.text}", reasoning=self.reasoning, prefill=self.prefill
        )

    # The rest of the backend interface: not used by message recaps.
    def scene_recap(self, request: Any) -> RecapResult:
        raise NotImplementedError

    def combine(self, request: Any) -> RecapResult:
        raise NotImplementedError

    def find_scene_breaks(self, request: Any) -> list[int]:
        raise NotImplementedError


def swipe_namespace(message: Message) -> dict[str, Any] | None:
    """The recap data stored on the message's active swipe."""
    info = message.get("swipe_info")
    swipe_id = message.get("swipe_id")
    if not isinstance(info, list) or not isinstance(swipe_id, int) or swipe_id >= len(info):
        return None
    extra = info[swipe_id].get("extra") or {}
    namespace = extra.get(NAMESPACE)
    return namespace if isinstance(namespace, dict) else None


def active_swipe_data(message: Message) -> dict[str, Any]:
    """Like `swipe_namespace`, for a message known to have its recap data on its swipe."""
    stored = swipe_namespace(message)
    assert stored is not None
    return stored


def simple_chat(texts: list[str], *, hidden: tuple[int, ...] = ()) -> Chat:
    """Alternating Tomas (user) / Captain Mira (character, with one swipe) messages."""
    messages: list[dict[str, Any]] = []
    for i, text in enumerate(texts):
        message: dict[str, Any] = {
            "name": "Tomas" if i % 2 == 0 else "Captain Mira",
            "is_user": i % 2 == 0,
            "is_system": i in hidden,
            "mes": text,
            "extra": {},
        }
        if i % 2:
            message |= {"swipe_id": 0, "swipes": [text], "swipe_info": [{"extra": {}}]}
        messages.append(message)
    return Chat(messages, chat_id="recaps-test")


# --- recap_all on a generated chat ---------------------------------------------------------


@pytest.fixture(scope="module")
def recapped() -> tuple[Chat, Any]:
    generated = generate(300, seed=1)
    stats = recap_all(generated.chat, OfflineBackend(COUNTER), DEFAULTS, COUNTER)
    return generated.chat, stats


def test_recap_all_recaps_every_message(recapped: tuple[Chat, Any]) -> None:
    chat, stats = recapped
    assert stats.made == len(chat.messages) == 300
    assert stats.failed == 0
    assert stats.skipped == 0
    assert stats.errors == []
    for message in chat.messages:
        memory = get_data(message, "memory")
        assert isinstance(memory, str)
        assert memory
        assert get_data(message, "error") is None
        assert get_data(message, "edited") is False
        assert get_memory(message) == memory
        # Who spoke opens the recap; a narrator needs no name.
        assert memory.startswith(f"{message.name}: ") != message.is_narrator


def test_recaps_are_stored_on_the_active_swipe_too(recapped: tuple[Chat, Any]) -> None:
    chat, _ = recapped
    with_swipes = [m for m in chat.messages if isinstance(m.get("swipe_info"), list)]
    assert any(len(m["swipes"]) > 1 for m in with_swipes)  # some messages have alternatives
    assert with_swipes
    for message in with_swipes:
        stored = swipe_namespace(message)
        assert stored is not None
        assert stored == message["extra"][NAMESPACE]
        assert stored is not message["extra"][NAMESPACE]  # a copy, not the same object
        for index, info in enumerate(message["swipe_info"]):
            if index != message["swipe_id"]:  # the other swipes got nothing
                assert NAMESPACE not in (info.get("extra") or {})


def test_hidden_and_narrator_messages_are_recapped_by_default(
    recapped: tuple[Chat, Any],
) -> None:
    chat, _ = recapped
    hidden = [m for m in chat.messages if m.is_hidden]
    narrators = [m for m in chat.messages if m.is_narrator]
    assert hidden
    assert narrators
    assert all(get_memory(m) for m in hidden + narrators)


def test_recap_all_again_changes_nothing() -> None:
    chat = generate(60, seed=2).chat
    backend = OfflineBackend(COUNTER)
    recap_all(chat, backend, DEFAULTS, COUNTER)
    before = [dict(m["extra"][NAMESPACE]) for m in chat.messages]
    progress: list[tuple[int, int]] = []
    stats = recap_all(
        chat, backend, DEFAULTS, COUNTER, progress=lambda d, t: progress.append((d, t))
    )
    assert (stats.made, stats.skipped, stats.failed) == (0, 60, 0)
    assert [dict(m["extra"][NAMESPACE]) for m in chat.messages] == before
    assert progress == [(0, 0)]  # progress counts the messages that need a recap: none


@pytest.mark.parametrize(
    ("settings", "left_out"),
    [
        (Settings(include_system_messages=False), lambda m: m.is_hidden),
        (Settings(include_user_messages=False), lambda m: m.is_user),
        (Settings(include_narrator_messages=False), lambda m: m.is_narrator),
    ],
    ids=["no-hidden", "no-user", "no-narrator"],
)
def test_the_exclusion_settings_are_honoured(settings: Settings, left_out: Any) -> None:
    chat = generate(300, seed=1).chat
    stats = recap_all(chat, OfflineBackend(COUNTER), settings, COUNTER)
    out = [m for m in chat.messages if left_out(m)]
    assert out
    assert stats.skipped == len(out)
    assert stats.made == len(chat.messages) - len(out)
    for message in chat.messages:
        assert bool(get_memory(message)) is not left_out(message)
        if left_out(message):
            assert get_data(message, "memory") is None
            assert swipe_namespace(message) is None


def test_excluded_messages_get_no_recap() -> None:
    chat = simple_chat(["We sail at dawn.", "Dawn it is.", "Pay Pell 40 crowns.", "Done."])
    set_data(chat.messages[1], "exclude", True)
    set_data(chat.messages[2], "exclude", True)
    stats = recap_all(chat, ScriptedBackend(), DEFAULTS, COUNTER)
    assert (stats.made, stats.skipped) == (2, 2)
    assert get_memory(chat.messages[0]) == "recap:We sail at dawn."
    assert get_memory(chat.messages[1]) == ""
    assert get_memory(chat.messages[2]) == ""
    assert get_memory(chat.messages[3]) == "recap:Done."


def test_short_and_empty_messages_are_skipped() -> None:
    chat = simple_chat(["ok", "   ", "A much longer message about the voyage to Port Anvil."])
    settings = Settings(message_length_threshold=5)
    stats = recap_all(chat, ScriptedBackend(), settings, COUNTER)
    assert (stats.made, stats.skipped) == (1, 2)
    assert [bool(get_memory(m)) for m in chat.messages] == [False, False, True]


def test_disabled_group_characters_get_no_recap() -> None:
    chat = simple_chat(["Hello.", "Hi.", "Bye.", "Farewell."])
    settings = Settings(disabled_group_characters={"grp": ["Captain Mira"]})
    recap_all(chat, ScriptedBackend(), settings, COUNTER, group_id="grp")
    assert [bool(get_memory(m)) for m in chat.messages] == [True, False, True, False]


# --- user edits ----------------------------------------------------------------------------


def test_an_edited_recap_is_kept_unless_forced() -> None:
    chat = simple_chat(["We sail at dawn.", "Dawn it is, and Pell owes us 40 crowns."])
    backend = ScriptedBackend()
    recap_all(chat, backend, DEFAULTS, COUNTER)
    message = chat.messages[1]
    edit_memory(message, "Mira agreed; Pell owes 40 crowns.")
    assert get_data(message, "edited") is True
    assert active_swipe_data(message)["edited"] is True

    stats = recap_all(chat, backend, DEFAULTS, COUNTER)
    assert stats.made == 0
    assert recap_message(chat, 1, backend, DEFAULTS, COUNTER) is None
    assert not needs_recap(message, DEFAULTS, COUNTER)
    assert get_memory(message) == "Mira agreed; Pell owes 40 crowns."
    assert get_data(message, "edited") is True

    assert needs_recap(message, DEFAULTS, COUNTER, force=True)
    assert recap_message(chat, 1, backend, DEFAULTS, COUNTER, force=True) is True
    assert get_memory(message) == "recap:Dawn it is, and Pell owes us 40 crowns."
    assert get_data(message, "edited") is False
    assert active_swipe_data(message)["memory"] == get_memory(message)


def test_recap_all_forced_overwrites_edited_recaps() -> None:
    chat = simple_chat(["We sail at dawn.", "Dawn it is."])
    backend = ScriptedBackend()
    recap_all(chat, backend, DEFAULTS, COUNTER)
    edit_memory(chat.messages[0], "mine")
    stats = recap_all(chat, backend, DEFAULTS, COUNTER, force=True)
    assert stats.made == 2
    assert get_memory(chat.messages[0]) == "recap:We sail at dawn."


# --- failures --------------------------------------------------------------------------------


def test_a_failing_backend_stores_error_and_the_others_are_recapped() -> None:
    texts = ["We sail at dawn.", "Dawn it is.", "Pay Pell 40 crowns.", "Done.", "Go."]
    chat = simple_chat(texts)
    backend = ScriptedBackend(failing={"Dawn it is.", "Done."})
    stats = recap_all(chat, backend, DEFAULTS, COUNTER)
    assert (stats.made, stats.failed, stats.skipped) == (3, 2, 0)
    assert len(stats.errors) == 2
    assert stats.errors[0].startswith("message 1: ")
    assert "model exploded" in stats.errors[0]
    assert stats.errors[1].startswith("message 3: ")
    for index in (1, 3):
        message = chat.messages[index]
        assert "model exploded" in get_data(message, "error")
        assert get_memory(message) == ""
        assert active_swipe_data(message)["error"] == get_data(message, "error")
    for index in (0, 2, 4):
        assert get_memory(chat.messages[index]) == f"recap:{texts[index]}"
        assert get_data(chat.messages[index], "error") is None

    # A later successful run recaps exactly the failed ones and clears their errors.
    backend.failing.clear()
    backend.requests.clear()
    stats = recap_all(chat, backend, DEFAULTS, COUNTER)
    assert (stats.made, stats.failed, stats.skipped) == (2, 0, 3)
    assert [r.text for r in backend.requests] == ["Dawn it is.", "Done."]
    for index in (1, 3):
        assert get_data(chat.messages[index], "error") is None
        assert get_memory(chat.messages[index]) == f"recap:{texts[index]}"
        assert active_swipe_data(chat.messages[index])["error"] is None


def test_a_failed_regeneration_keeps_the_old_recap_and_marks_the_error() -> None:
    chat = simple_chat(["We sail at dawn."])
    backend = ScriptedBackend()
    recap_message(chat, 0, backend, DEFAULTS, COUNTER)
    backend.failing.add("We sail at dawn.")
    assert recap_message(chat, 0, backend, DEFAULTS, COUNTER, force=True) is False
    assert get_memory(chat.messages[0]) == "recap:We sail at dawn."
    assert "model exploded" in get_data(chat.messages[0], "error")
    # The error makes it due again without forcing.
    assert needs_recap(chat.messages[0], DEFAULTS, COUNTER)


# --- reasoning and prefill -------------------------------------------------------------------


def test_reasoning_and_prefill_are_stored() -> None:
    chat = simple_chat(["We sail at dawn.", "Dawn it is."])
    backend = ScriptedBackend(reasoning="Who said what?", prefill="In short, ")
    recap_all(chat, backend, DEFAULTS, COUNTER)
    message = chat.messages[1]
    assert get_data(message, "memory") == "recap:Dawn it is."
    assert get_data(message, "reasoning") == "Who said what?"
    assert get_data(message, "prefill") == "In short, "
    assert get_memory(message) == "In short, recap:Dawn it is."
    assert active_swipe_data(message)["prefill"] == "In short, "

    # A regeneration without them clears them.
    recap_message(chat, 1, ScriptedBackend(), DEFAULTS, COUNTER, force=True)
    assert get_data(message, "reasoning") is None
    assert get_data(message, "prefill") is None
    assert get_memory(message) == "recap:Dawn it is."


# --- build_request ---------------------------------------------------------------------------


def test_build_request_shows_the_messages_just_before() -> None:
    texts = [f"message {i}" for i in range(8)]
    chat = simple_chat(texts)
    request = build_request(chat, 6, DEFAULTS, COUNTER)
    assert request.text == "message 6"
    assert request.name == "Tomas"
    assert [(c.name, c.text) for c in request.context] == [
        ("Captain Mira", "message 3"),
        ("Tomas", "message 4"),
        ("Captain Mira", "message 5"),
    ]
    assert request.user == "Tomas"
    assert request.char == "Captain Mira"
    assert request.max_tokens == DEFAULTS.message_recap_max_tokens
    assert request.earlier_recaps == ()


@pytest.mark.parametrize("count", [0, 1, 2, 5, 10])
def test_build_request_context_never_exceeds_the_setting(count: int) -> None:
    chat = simple_chat([f"message {i}" for i in range(12)], hidden=(7, 8))
    settings = Settings(message_recap_context_messages=count)
    for index in range(12):
        context = build_request(chat, index, settings, COUNTER).context
        assert len(context) <= min(count, index)
        texts = [c.text for c in context]
        assert "message 7" not in texts
        assert "message 8" not in texts
        assert all(int(t.split()[1]) < index for t in texts)  # only earlier ones
        assert texts == sorted(texts, key=lambda t: int(t.split()[1]))


def test_build_request_passes_the_recaps_just_before() -> None:
    chat = simple_chat(["a", "b", "c", "d"])
    set_data(chat.messages[0], "memory", "recap a")
    set_data(chat.messages[2], "memory", "recap c")
    set_data(chat.messages[2], "prefill", "P: ")
    assert build_request(chat, 3, DEFAULTS, COUNTER).earlier_recaps == ("P: recap c",)
    assert build_request(chat, 2, DEFAULTS, COUNTER).earlier_recaps == ("recap a",)


def test_build_request_takes_the_names_from_the_chat() -> None:
    generated = generate(40, seed=5, user="Ann", character="Bosun Kell")
    for index in (5, 20, 39):
        request = build_request(generated.chat, index, DEFAULTS, COUNTER)
        assert request.user == "Ann"
        assert request.char == "Bosun Kell"
        assert request.name == generated.chat.messages[index].name


# --- MessageRecapper with a Session ------------------------------------------------------------


def new_session(texts: list[str] | None = None) -> Session:
    chat = simple_chat(texts or [])
    return Session(chat, clock=ManualClock(), settings=Settings())


def test_sent_and_received_messages_are_queued_and_recapped() -> None:
    session = new_session()
    recapper = MessageRecapper(session, ScriptedBackend())
    session.send("We sail at dawn.", name="Tomas")
    assert recapper.pending == 1
    assert get_memory(session.messages[0]) == ""
    assert recapper.run_pending() == 1
    assert recapper.pending == 0
    assert get_memory(session.messages[0]) == "recap:We sail at dawn."

    session.receive("Dawn it is.", name="Captain Mira")
    assert recapper.pending == 1
    assert recapper.run_pending() == 1
    message = session.messages[1]
    assert get_memory(message) == "recap:Dawn it is."
    assert active_swipe_data(message)["memory"] == "recap:Dawn it is."
    assert recapper.run_pending() == 0


def test_the_same_message_is_queued_once() -> None:
    session = new_session(["We sail at dawn.", "Dawn it is."])
    backend = ScriptedBackend()
    recapper = MessageRecapper(session, backend)
    session.edit_message(1, "Noon, then.")
    session.edit_message(1, "Dusk, then.")
    assert recapper.pending == 1
    assert recapper.run_pending() == 1
    assert [r.text for r in backend.requests] == ["Dusk, then."]


def test_immediate_recaps_are_made_at_once() -> None:
    session = new_session()
    recapper = MessageRecapper(session, OfflineBackend(COUNTER), immediate=True)
    session.send("We sail at dawn from Port Anvil.", name="Tomas")
    session.receive("Pell owes us 40 crowns.", name="Captain Mira")
    assert recapper.pending == 0
    assert get_memory(session.messages[0]) == "Tomas: We sail at dawn from Port Anvil."
    assert get_memory(session.messages[1]) == "Captain Mira: Pell owes us 40 crowns."


def test_an_edit_regenerates_the_recap() -> None:
    session = new_session()
    recapper = MessageRecapper(session, ScriptedBackend())
    session.receive("Dawn it is.", name="Captain Mira")
    recapper.run_pending()
    session.edit_message(0, "Dusk it is, and bring 40 crowns.")
    assert recapper.pending == 1
    assert recapper.run_pending() == 1
    message = session.messages[0]
    assert get_memory(message) == "recap:Dusk it is, and bring 40 crowns."
    assert active_swipe_data(message)["memory"] == get_memory(message)


def test_an_edit_leaves_a_user_edited_recap_alone() -> None:
    session = new_session()
    backend = ScriptedBackend()
    recapper = MessageRecapper(session, backend)
    session.receive("Dawn it is.", name="Captain Mira")
    recapper.run_pending()
    edit_memory(session.messages[0], "My own recap.")
    session.edit_message(0, "Dusk it is.")
    assert recapper.pending == 1
    assert recapper.run_pending() == 0
    assert get_memory(session.messages[0]) == "My own recap."
    assert get_data(session.messages[0], "edited") is True
    assert [r.text for r in backend.requests] == ["Dawn it is."]


def test_a_new_swipe_gets_its_own_recap_and_the_old_swipe_keeps_its_own() -> None:
    session = new_session()
    recapper = MessageRecapper(session, ScriptedBackend())
    session.send("Where do we go?", name="Tomas")
    session.receive("To Port Anvil.", name="Captain Mira")
    recapper.run_pending()
    message = session.messages[1]
    assert get_memory(message) == "recap:To Port Anvil."

    session.swipe(1, text="To the Glass Market.")
    assert recapper.pending == 1
    assert recapper.run_pending() == 1
    assert message["swipe_id"] == 1
    assert get_memory(message) == "recap:To the Glass Market."
    assert message["swipe_info"][1]["extra"][NAMESPACE]["memory"] == "recap:To the Glass Market."
    assert message["swipe_info"][0]["extra"][NAMESPACE]["memory"] == "recap:To Port Anvil."

    # Swiping back to the first reply brings its own recap back.
    session.swipe(1, to=0)
    assert get_memory(message) == "recap:To Port Anvil."
    assert message["swipe_info"][1]["extra"][NAMESPACE]["memory"] == "recap:To the Glass Market."


def test_swiping_to_an_existing_swipe_does_not_regenerate_its_recap() -> None:
    """Regression: `MessageRecapper` queued a *forced* regeneration on every `message_swiped`,
    also when the user swiped back to an existing reply that already had its recap: the backend
    was called again and the swipe's stored recap replaced (with an LLM: a different text, and a
    paid call)."""
    session = new_session()
    backend = ScriptedBackend()
    recapper = MessageRecapper(session, backend)
    session.receive("To Port Anvil.", name="Captain Mira")
    recapper.run_pending()
    session.swipe(0, text="To the Glass Market.")
    recapper.run_pending()
    assert [r.text for r in backend.requests] == ["To Port Anvil.", "To the Glass Market."]

    session.swipe(0, to=0)
    recapper.run_pending()
    assert get_memory(session.messages[0]) == "recap:To Port Anvil."
    assert [r.text for r in backend.requests] == ["To Port Anvil.", "To the Glass Market."]


def test_an_immediate_recap_of_a_new_swipe_recaps_the_new_text() -> None:
    """Regression: `Session.swipe(text=...)` fires `message_swiped` before it stores the new
    text, and an `immediate=True` recapper recapped right inside that event: the new swipe got a
    recap of the OLD reply."""
    session = new_session()
    recapper = MessageRecapper(session, ScriptedBackend(), immediate=True)
    session.receive("To Port Anvil.", name="Captain Mira")
    session.swipe(0, text="To the Glass Market.")
    message = session.messages[0]
    assert recapper.pending == 0
    assert message["mes"] == "To the Glass Market."
    assert get_memory(message) == "recap:To the Glass Market."
    assert message["swipe_info"][0]["extra"][NAMESPACE]["memory"] == "recap:To Port Anvil."


def test_a_message_deleted_while_queued_is_skipped() -> None:
    session = new_session()
    backend = ScriptedBackend()
    recapper = MessageRecapper(session, backend)
    session.send("We sail at dawn.", name="Tomas")
    session.receive("Dawn it is.", name="Captain Mira")
    assert recapper.pending == 2
    session.delete_message(0)
    assert recapper.run_pending() == 1
    assert [r.text for r in backend.requests] == ["Dawn it is."]
    assert recapper.pending == 0
    assert get_memory(session.messages[0]) == "recap:Dawn it is."


def test_a_failing_recap_in_a_session_stores_the_error() -> None:
    session = new_session()
    recapper = MessageRecapper(session, ScriptedBackend(failing={"Boom."}))
    session.send("Boom.", name="Tomas")
    session.send("Fine.", name="Tomas")
    assert recapper.run_pending() == 1
    assert "model exploded" in get_data(session.messages[0], "error")
    assert get_memory(session.messages[1]) == "recap:Fine."


def test_the_background_thread_makes_queued_recaps() -> None:
    session = new_session()
    recapper = MessageRecapper(session, ScriptedBackend())
    recapper.start()
    try:
        recapper.start()  # a second start is harmless
        session.send("We sail at dawn.", name="Tomas")
        session.receive("Dawn it is.", name="Captain Mira")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with session.lock:
                done = all(get_memory(m) for m in session.messages)
            if done and recapper.pending == 0:
                break
            time.sleep(0.01)
    finally:
        recapper.stop()
    assert recapper.pending == 0
    assert [get_memory(m) for m in session.messages] == [
        "recap:We sail at dawn.",
        "recap:Dawn it is.",
    ]
    assert recapper._thread is None  # stopped and joined

    # Once stopped, nothing is made in the background: recaps wait in the queue.
    session.send("After the stop.", name="Tomas")
    time.sleep(0.05)
    assert recapper.pending == 1
    assert get_memory(session.messages[2]) == ""
    assert recapper.run_pending() == 1
