"""The proxy's fast path (`server.echo`) against the full reconciliation.

Two registries on two SQLite files with the same settings, one with `fast = True`, one with
`fast = False`, get the same client requests on one chat. After every request both must send the
same messages upstream, regenerate the same reply, and keep the same stored chat. The client keeps
its own message list the way a frontend does (the reply appended after each answer, unless a step
says otherwise); between requests the server side changes the chat identically in both (recaps,
the running recap, hidden messages, scene breaks, edits through the API).
"""

from __future__ import annotations

import copy
import json
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, Phase, event, given, settings
from hypothesis import strategies as st

from autorecap.core import running
from autorecap.core.data import edit_memory, get_data, get_memory
from autorecap.core.model import Chat
from autorecap.core.recall import RECALL_KEY
from autorecap.core.slots import SCENE_KEY, SHORT_KEY
from autorecap.jobs.queue import JobQueue
from autorecap.profiles import Profiles
from autorecap.server.proxy.turns import ProxyChats, Turn
from autorecap.session import Session
from autorecap.store.sqlite import SQLiteStore

CHAT = "echo-chat"
MAIN_PROMPT = "You are Mira, captain of the Gull. Stay in character."
IMAGE = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
NOW_MS = 1_700_000_000_000
WORDS = [
    "We sail at dawn.",
    "The harbour master wants his fee.",
    "Mira counts the coins twice.",
    "A storm gathers in the west.",
    "Tomas hides the map under the floorboards.",
    "The bosun owes Mira three silver crowns.",
    "Yes.",
    "Hello there, captain.",
]
BASE_SETTINGS: dict[str, Any] = {
    "message_recap_injection_enabled": True,
    "message_recap_context_type": "absolute",
    "message_recap_context_limit": 4000,
    "refresh_debounce_ms": 600_000,  # no refresh on a timer thread: every refresh is explicit
}
IN_CHAT_AT_DEPTH_2: dict[str, Any] = {
    **BASE_SETTINGS,
    "message_recap_position": 1,
    "message_recap_depth": 2,
    "running_scene_recap_position": 1,
    "running_scene_recap_depth": 3,
    "auto_hide_scene_count": 1,
}


# --- two registries ------------------------------------------------------------------------------


ENCODINGS: dict[str, Callable[[list[dict[str, Any]]], bytes]] = {
    "compact": lambda messages: orjson.dumps({"model": "m", "messages": messages}),
    # Python's json: ", " and ": " separators, non-ASCII escaped, `messages` first.
    "spaced": lambda messages: json.dumps(
        {"messages": messages, "model": "m", "stream": False, "temperature": 0.7}
    ).encode(),
    # Indented, over several lines, fields on both sides of `messages`.
    "indented": lambda messages: json.dumps(
        {"stream": True, "messages": messages, "max_tokens": 300},
        indent=2,
        ensure_ascii=False,
    ).encode(),
}
"""Ways real clients write a request: the fast path reads every one of them."""


def make_registry(root: Path, name: str, values: dict[str, Any], *, fast: bool) -> ProxyChats:
    store = SQLiteStore(root / f"{name}.db", synchronous="OFF")
    profiles = Profiles(root / name / "settings.json")  # never the user's home
    profiles.set_many(values)
    registry = ProxyChats(store, JobQueue(store), profiles=profiles, queue_recaps=False)
    registry.fast = fast
    return registry


def summary(chat: Chat) -> list[tuple[Any, ...]]:
    """What must be the same in both stored chats, message by message."""
    return [
        (
            bool(m.get("is_user")),
            m.is_narrator,
            m.get("name"),
            m.get("mes"),
            bool(m.get("is_system")),
            m.get("swipes"),
            m.get("swipe_id"),
            get_memory(m),
            get_data(m, "include"),
        )
        for m in chat.messages
    ]


class Twins:
    """The fast registry and the slow one, driven alike and compared after every change."""

    def __init__(self, root: Path, values: dict[str, Any], encoding: str = "compact") -> None:
        self.fast = make_registry(root, "fast", values, fast=True)
        self.slow = make_registry(root, "slow", values, fast=False)
        self.both = (self.fast, self.slow)
        self.requests = 0
        self.encoding = encoding
        """How the client writes its JSON (`ENCODINGS`), the same way every time."""

    def close(self) -> None:
        for registry in self.both:
            registry.close()
            registry.store.close()

    def request(self, messages: list[dict[str, Any]], reply: str) -> Turn:
        """Send the same request to both, as the client's JSON, compare what goes upstream,
        record `reply` on both and compare the stored chats."""
        self.requests += 1
        raw = ENCODINGS[self.encoding](messages)
        fast = self.fast.begin(CHAT, raw)
        slow = self.slow.begin(CHAT, raw)
        where = f"request {self.requests}: {messages!r}"
        assert orjson.loads(fast.body) == orjson.loads(slow.body), f"bodies differ at {where}"
        assert fast.stream == slow.stream
        assert fast.regenerate == slow.regenerate, f"regenerate differs at {where}"
        for registry, turn in ((self.fast, fast), (self.slow, slow)):
            registry.record(turn, reply)
            registry.settle(turn)
        self.check(where)
        return fast

    def change(self, change: Callable[[Session], object]) -> None:
        """The same server-side change on both chats (through the API's path: `edit`, which
        saves), memory refreshed afterwards."""
        for registry in self.both:
            with registry.edit(CHAT) as session:
                change(session)
                session.refresh()
        self.check(f"a server-side change after request {self.requests}")

    def memory_text(self) -> str:
        texts = [registry.memory_text(CHAT) for registry in self.both]
        assert texts[0] == texts[1]
        return texts[0]

    def check(self, where: str) -> None:
        chats = [registry.chat(CHAT) for registry in self.both]
        stored = [registry.store.load_chat(CHAT) for registry in self.both]
        assert summary(chats[0]) == summary(chats[1]), f"stored chats differ after {where}"
        assert len(chats[0].messages) == len(chats[1].messages)
        assert running.versions(chats[0]) == running.versions(chats[1])
        for registry, chat, saved in zip(self.both, chats, stored, strict=True):
            assert summary(saved) == summary(chat), f"{registry.fast=}: not saved after {where}"
        slots = [registry.session(CHAT).slots for registry in self.both]
        for key in (SCENE_KEY, SHORT_KEY):
            assert slots[0].value(key) == slots[1].value(key), f"slot {key} differs after {where}"
        assert self.slow.fast_turns == 0


@pytest.fixture
def twins(tmp_path: Path) -> Iterator[Twins]:
    made = Twins(tmp_path, IN_CHAT_AT_DEPTH_2)
    try:
        yield made
    finally:
        made.close()


# --- the client ----------------------------------------------------------------------------------


def user(text: str, form: str = "plain") -> dict[str, Any]:
    if form == "named":
        return {"role": "user", "content": text, "name": "Tomas"}
    if form == "parts":
        return {"role": "user", "content": [{"type": "text", "text": text}, IMAGE]}
    return {"role": "user", "content": text}


def assistant(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def text_of(message: dict[str, Any]) -> str:
    content = message["content"]
    if isinstance(content, list):
        return "\n".join(part["text"] for part in content if "text" in part)
    return str(content)


def set_text(message: dict[str, Any], text: str) -> None:
    content = message["content"]
    if isinstance(content, list):
        message["content"] = [{"type": "text", "text": text}, *content[1:]]
    else:
        message["content"] = text


@dataclass(frozen=True)
class Send:
    """The user sends a new message (plain, with a `name`, or multi-part with an image)."""

    text: str
    form: str = "plain"


@dataclass(frozen=True)
class Regenerate:
    """Send the list again without the last reply (a swipe)."""


@dataclass(frozen=True)
class Resend:
    """Send the list again as it is."""


@dataclass(frozen=True)
class Edit:
    at: int
    last: bool
    text: str
    then: Send | None


@dataclass(frozen=True)
class Whitespace:
    """The client re-sends a message with a trailing space or newline."""

    at: int
    suffix: str
    then: Send | None


@dataclass(frozen=True)
class Delete:
    at: int
    count: int
    end: bool
    then: Send | None


@dataclass(frozen=True)
class Narrator:
    """A system note inside the history (at `at`, or at the end when None)."""

    at: int | None
    text: str
    then: Send


@dataclass(frozen=True)
class LeadSystem:
    """A second system message in the leading block."""

    text: str
    then: Send | None


@dataclass(frozen=True)
class Carry:
    """The client carries our memory text: merged into the main prompt, as its own message in
    the leading block, or as a system message `depth` messages from the end of the history."""

    how: str
    depth: int
    then: Send | None


@dataclass(frozen=True)
class Instructions:
    """The client starts or stops sending post-history instructions after the newest message
    (SillyTavern's, in every request while they are set)."""

    text: str | None
    then: Send | None


ClientAction = (
    Send
    | Regenerate
    | Resend
    | Edit
    | Whitespace
    | Delete
    | Narrator
    | LeadSystem
    | Carry
    | Instructions
)


@dataclass(frozen=True)
class Recap:
    """Recaps on stored messages."""

    at: tuple[int, ...]
    text: str


@dataclass(frozen=True)
class RunningRecap:
    text: str


@dataclass(frozen=True)
class Hide:
    at: int
    hidden: bool


@dataclass(frozen=True)
class SceneBreak:
    at: int


@dataclass(frozen=True)
class ApiEdit:
    at: int
    text: str


@dataclass(frozen=True)
class ApiDelete:
    at: int


ServerAction = Recap | RunningRecap | Hide | SceneBreak | ApiEdit | ApiDelete

REPLY_POLICIES = ("append", "append", "append", "skip", "other", "space", "named", "empty")
"""What the client does with the answer: append it as recorded, not at all, a different text,
with a trailing whitespace, with a `name` field; `empty`: no answer arrived (nothing recorded)."""


@dataclass(frozen=True)
class Step:
    action: ClientAction | ServerAction
    reply: str = "append"
    answer: str | None = None
    """The reply's text (None: one of its own, `Reply <n>: ...`)."""


class Client:
    """A frontend's message list: the main prompt, then the history."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = [
            {"role": "system", "content": MAIN_PROMPT},
            user("Hello there, captain."),
        ]
        self.after: str | None = None
        """Post-history instructions sent after the messages, never part of them."""

    def sent(self) -> list[dict[str, Any]]:
        """The request's messages: the list, and the instructions after it."""
        after = [{"role": "system", "content": self.after}] if self.after else []
        return [*self.messages, *after]

    @property
    def lead(self) -> int:
        count = 0
        while count < len(self.messages) and self.messages[count]["role"] == "system":
            count += 1
        return count

    @property
    def history(self) -> int:
        return len(self.messages) - self.lead

    def at(self, position: int) -> int | None:
        """The list index of history message `position` (modulo the history's length)."""
        if not self.history:
            return None
        return self.lead + position % self.history

    def send(self, step: Send | None) -> None:
        if step is not None:
            self.messages.append(user(step.text, step.form))

    def apply(self, action: ClientAction, memory: Callable[[], str]) -> None:
        """Change the list as the action says (the request is sent afterwards)."""
        if isinstance(action, Send):
            self.send(action)
        elif isinstance(action, Regenerate):
            if self.history and self.messages[-1]["role"] == "assistant":
                self.messages.pop()
        elif isinstance(action, Edit):
            index = len(self.messages) - 1 if action.last else self.at(action.at)
            if index is not None and index >= self.lead:
                set_text(self.messages[index], action.text)
            self.send(action.then)
        elif isinstance(action, Whitespace):
            index = self.at(action.at)
            if index is not None:
                message = self.messages[index]
                set_text(message, text_of(message) + action.suffix)
            self.send(action.then)
        elif isinstance(action, Delete):
            if self.history:
                count = min(action.count, self.history)
                start = len(self.messages) - count if action.end else self.at(action.at)
                assert start is not None
                del self.messages[start : start + count]
            self.send(action.then)
        elif isinstance(action, Narrator):
            note = {"role": "system", "content": action.text}
            index = self.at(action.at) if action.at is not None else None
            self.messages.insert(len(self.messages) if index is None else index, note)
            self.send(action.then)
        elif isinstance(action, Instructions):
            self.after = action.text
            self.send(action.then)
        elif isinstance(action, LeadSystem):
            self.messages.insert(self.lead, {"role": "system", "content": action.text})
            self.send(action.then)
        elif isinstance(action, Carry):
            text = memory()
            if text:
                if action.how == "merge":
                    self.messages[0]["content"] = f"{self.messages[0]['content']}\n\n{text}"
                elif action.how == "lead":
                    self.messages.insert(self.lead, {"role": "system", "content": text})
                else:
                    index = len(self.messages) - action.depth % (self.history + 1)
                    self.messages.insert(index, {"role": "system", "content": text})
            self.send(action.then)

    def answer(self, reply: str, policy: str) -> None:
        if policy == "append":
            self.messages.append(assistant(reply))
        elif policy == "other":
            self.messages.append(assistant(f"{reply} (trimmed by the user)"))
        elif policy == "space":
            self.messages.append(assistant(f"{reply} \n"))
        elif policy == "named":
            self.messages.append({"role": "assistant", "content": reply, "name": "Mira"})


def server_change(action: ServerAction) -> Callable[[Session], None]:
    def change(session: Session) -> None:
        messages = session.chat.messages
        if not messages:
            return
        if isinstance(action, Recap):
            for at in action.at:
                edit_memory(messages[at % len(messages)], f"{action.text} (#{at})")
        elif isinstance(action, RunningRecap):
            breaks = [i for i, m in enumerate(messages) if get_data(m, "scene_break")]
            running.add_version(
                session.chat,
                action.text,
                scene_count=len(breaks),
                excluded_count=0,
                prev_scene_index=0,
                new_scene_index=breaks[-1] if breaks else len(messages) - 1,
                now_ms=NOW_MS,
            )
        elif isinstance(action, Hide):
            message = messages[action.at % len(messages)]
            message["is_system"] = action.hidden
            session.chat.notify_change(message)
        elif isinstance(action, SceneBreak):
            session.mark_scene_break(action.at % len(messages))
        elif isinstance(action, ApiEdit):
            session.edit_message(action.at % len(messages), action.text)
        elif isinstance(action, ApiDelete):
            session.delete_message(action.at % len(messages))

    return change


PRELUDE = (Recap((0, 1), "Tomas hailed Mira"), RunningRecap("The Gull waits in port."))
"""Memory from the start: the running recap and the first two messages' recaps."""


def converse(twins: Twins, steps: list[Step], *, memory: bool = False) -> Client:
    """Drive both registries with the steps; every request is compared in `Twins.request`."""
    client = Client()
    twins.request(list(client.messages), "Aye, Tomas.")
    client.answer("Aye, Tomas.", "append")
    if memory:
        for change in PRELUDE:
            twins.change(server_change(change))
    for number, step in enumerate(steps, 1):
        action = step.action
        if isinstance(action, ServerAction):
            twins.change(server_change(action))
            continue
        client.apply(action, twins.memory_text)
        reply = step.answer or f"Reply {number}: the tide turns."
        reply = "" if step.reply == "empty" else reply
        twins.request(client.sent(), reply)
        if reply:
            client.answer(reply, step.reply)
    return client


# --- the property --------------------------------------------------------------------------------

texts = st.sampled_from(WORDS)
positions = st.integers(0, 40)
sends = st.builds(Send, texts, st.sampled_from(["plain", "plain", "named", "parts"]))
maybe_send = st.none() | sends
client_actions = st.one_of(
    *[sends] * 8,  # the usual case, most of the time
    st.just(Regenerate()),
    st.just(Resend()),
    st.builds(Edit, positions, st.booleans(), texts, maybe_send),
    st.builds(Whitespace, positions, st.sampled_from([" ", "\n", "  "]), maybe_send),
    st.builds(Delete, positions, st.integers(1, 3), st.booleans(), maybe_send),
    st.builds(Narrator, st.none() | positions, texts, sends),
    st.builds(LeadSystem, st.sampled_from(["Write in the past tense.", "Be brief."]), maybe_send),
    st.builds(Carry, st.sampled_from(["merge", "lead", "history"]), st.integers(0, 4), maybe_send),
    st.builds(Carry, st.just("history"), st.integers(0, 4), maybe_send),
    st.builds(
        Instructions,
        st.sampled_from([None, "[Write one paragraph.]", "[Stay in character.]"]),
        maybe_send,
    ),
)
stored = st.integers(-6, 40)
"""A stored message: from the start, or (negative) from the end, where most changes happen."""
server_actions = st.one_of(
    st.builds(Recap, st.lists(stored, min_size=1, max_size=4).map(tuple), texts),
    st.builds(RunningRecap, texts),
    st.builds(Hide, stored, st.booleans()),
    st.builds(SceneBreak, stored),
    st.builds(ApiEdit, stored, texts),
    st.builds(ApiDelete, stored),
)
answers = st.none() | st.none() | st.sampled_from(["Yes.", "*Mira nods.*", "Hello there, captain."])
client_steps = st.builds(Step, client_actions, st.sampled_from(REPLY_POLICIES), answers)
steps_strategy = st.lists(
    st.one_of(client_steps, client_steps, client_steps, st.builds(Step, server_actions)),
    min_size=3,
    max_size=24,
)
settings_strategy = st.fixed_dictionaries(
    {
        "running_scene_recap_position": st.sampled_from([0, 1, 2]),
        "running_scene_recap_depth": st.integers(0, 4),
        "running_scene_recap_role": st.sampled_from([0, 1, 2]),
        "message_recap_position": st.sampled_from([0, 1, 2]),
        "message_recap_depth": st.integers(0, 4),
        "message_recap_role": st.sampled_from([0, 1, 2]),
        "auto_hide_scene_count": st.sampled_from([-1, 0, 1, 2]),
        # the recall slot changes on every turn (it answers the newest message)
        "recall_enabled": st.booleans(),
        "recall_depth": st.integers(0, 3),
        "long_term_enabled": st.booleans(),
    }
).map(lambda chosen: {**BASE_SETTINGS, **chosen})


@settings(
    max_examples=150,
    deadline=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    values=settings_strategy,
    memory=st.booleans(),
    steps=steps_strategy,
    encoding=st.sampled_from(sorted(ENCODINGS)),
)
def test_the_fast_path_reconciles_every_request_as_the_full_path_does(
    values: dict[str, Any], memory: bool, steps: list[Step], encoding: str
) -> None:
    with tempfile.TemporaryDirectory(prefix="echo-") as root:
        twins = Twins(Path(root), values, encoding)
        try:
            converse(twins, steps, memory=memory)
            share = int(twins.fast.fast_turns / twins.requests * 10) * 10
            event(f"requests on the fast path: {share}% or more" if share else "few or none")
            recalled = twins.fast.session(CHAT).slots.value(RECALL_KEY)
            event("the last request recalled a hidden message" if recalled else "nothing recalled")
        finally:
            twins.close()


# --- the fast path is really taken ---------------------------------------------------------------


def test_the_usual_conversation_takes_the_fast_path_after_the_first_request(twins: Twins) -> None:
    client = Client()
    for number in range(8):
        twins.request(list(client.messages), f"Reply {number}.")
        assert twins.fast.fast_turns == number  # every request after the first
        client.answer(f"Reply {number}.", "append")
        client.send(Send(WORDS[number % len(WORDS)]))


def test_the_fast_path_is_taken_with_memory_in_chat_and_hidden_messages(twins: Twins) -> None:
    client = Client()
    for number in range(4):
        twins.request(list(client.messages), f"Reply {number}.")
        client.answer(f"Reply {number}.", "append")
        client.send(Send(WORDS[number]))
    twins.change(server_change(Recap((0, 1, 2, 3, 5), "Mira agreed to sail")))
    twins.change(server_change(RunningRecap("The Gull left port.")))
    twins.change(server_change(Hide(1, True)))
    memory = twins.memory_text()
    assert "The Gull left port." in memory
    assert "Mira agreed to sail" in memory
    taken = twins.fast.fast_turns
    turn = twins.request(list(client.messages), "Reply 4.")
    assert twins.fast.fast_turns == taken + 1
    sent = [m["content"] for m in turn.messages]
    assert "Reply 0." not in sent  # hidden: left out
    assert sum("The Gull left port." in text for text in sent) == 1
    assert sum("Mira agreed to sail" in text for text in sent) == 1
    # auto-hide (one scene kept) hides what lies before the last break, on the fast path too
    twins.change(server_change(SceneBreak(4)))
    client.answer("Reply 4.", "append")
    client.send(Send("Yes."))
    turn = twins.request(list(client.messages), "Reply 5.")
    assert twins.fast.fast_turns == taken + 2
    assert client.messages[2] not in turn.messages  # message 1 ("Reply 0.") is still hidden
    assert user(WORDS[1]) not in turn.messages  # hidden by auto-hide


def test_a_new_message_on_fresh_memory_is_refreshed_for_by_the_reply(twins: Twins) -> None:
    client = converse(twins, [Step(Send("We sail at dawn."))], memory=True)
    client.send(Send("Yes."))
    registry = twins.fast
    session = registry.session(CHAT)
    assert not session.stale
    refreshes = session.refreshes
    turn = registry.begin(CHAT, ENCODINGS["compact"](client.messages))
    assert registry.fast_turns == 2  # the fast path, its refresh left for later
    assert turn.refresh_due
    assert session.stale
    assert session.refreshes == refreshes
    sent = "\n".join(str(m["content"]) for m in turn.messages)
    assert "The Gull waits in port." in sent
    assert "Tomas hailed Mira" in sent
    registry.record(turn, "Aye.")  # the reply's event refreshes
    assert not session.stale
    assert session.refreshes == refreshes + 1
    registry.settle(turn)
    assert session.refreshes == refreshes + 1


def test_a_turn_with_no_reply_is_refreshed_when_it_is_settled(twins: Twins) -> None:
    client = converse(twins, [Step(Send("We sail at dawn."))], memory=True)
    client.send(Send("Yes."))
    registry = twins.fast
    session = registry.session(CHAT)
    turn = registry.begin(CHAT, ENCODINGS["compact"](client.messages))
    assert turn.refresh_due
    assert session.stale
    registry.record(turn, "")  # the upstream failed: no reply
    registry.settle(turn)
    assert not session.stale
    assert registry.store.load_chat(CHAT).messages[-1]["mes"] == "Yes."


def test_memory_changed_since_its_refresh_is_refreshed_before_the_request_is_built(
    twins: Twins,
) -> None:
    client = converse(twins, [Step(Send("We sail at dawn."))], memory=True)
    client.send(Send("Yes."))
    for registry in twins.both:  # what a recap job does before its refresh is due
        with registry.hold(CHAT):
            edit_memory(registry.chat(CHAT).messages[-1], "Mira will sail at dawn.")
        assert registry.session(CHAT).stale
    turn = twins.request(list(client.messages), "Aye.")  # the same body on both paths
    assert twins.fast.fast_turns == 2
    assert not turn.refresh_due
    assert any("Mira will sail at dawn." in str(m["content"]) for m in turn.messages)


def test_a_regeneration_takes_the_fast_path_and_becomes_a_swipe(twins: Twins) -> None:
    client = Client()
    twins.request(list(client.messages), "Aye.")
    client.answer("Aye.", "append")
    client.send(Send("We sail at dawn."))
    twins.request(list(client.messages), "Dawn it is.")
    assert twins.fast.fast_turns == 1
    turn = twins.request(list(client.messages), "At first light, then.")  # without the reply
    assert twins.fast.fast_turns == 2
    assert turn.regenerate == 3
    assert twins.fast.chat(CHAT).messages[3]["swipes"] == ["Dawn it is.", "At first light, then."]


# --- an edit through the API, a dropped or replaced chat -----------------------------------------


@pytest.mark.parametrize("where", [1, -2], ids=["middle", "last-sent"])
def test_an_edit_through_the_api_sends_the_next_request_down_the_full_path(
    twins: Twins, where: int
) -> None:
    # -2: the last message the previous request carried (-1 is the reply it got, which the
    # next request's added tail is compared with anyway).
    client = Client()
    for number in range(3):
        twins.request(list(client.messages), f"Reply {number}.")
        client.answer(f"Reply {number}.", "append")
        client.send(Send(WORDS[number]))
    assert twins.fast.fast_turns == 2
    twins.change(lambda session: session.edit_message(where, "Edited on the server."))
    assert twins.fast.chat(CHAT).messages[where]["mes"] == "Edited on the server."
    # The client still holds the old text: it is the truth again, on both.
    twins.request(list(client.messages), "Reply 3.")
    assert twins.fast.fast_turns == 2
    assert "Edited on the server." not in [m["mes"] for m in twins.fast.chat(CHAT).messages]
    client.answer("Reply 3.", "append")
    client.send(Send("Yes."))
    twins.request(list(client.messages), "Reply 4.")
    assert twins.fast.fast_turns == 3  # and the fast path is back


def test_an_edit_through_the_api_of_the_last_reply_is_undone_by_the_next_request(
    twins: Twins,
) -> None:
    client = Client()
    for number in range(3):
        twins.request(list(client.messages), f"Reply {number}.")
        client.answer(f"Reply {number}.", "append")
        client.send(Send(WORDS[number]))
    twins.change(lambda session: session.edit_message(-1, "Edited on the server."))
    twins.request(list(client.messages), "Reply 3.")  # the fast path may take it: compared
    texts = [m["mes"] for m in twins.fast.chat(CHAT).messages]
    assert texts[-3:] == ["Reply 2.", WORDS[2], "Reply 3."]


def test_a_dropped_chat_does_not_reuse_its_echo(twins: Twins) -> None:
    client = Client()
    for number in range(2):
        twins.request(list(client.messages), f"Reply {number}.")
        client.answer(f"Reply {number}.", "append")
        client.send(Send(WORDS[number]))
    assert twins.fast.fast_turns == 1
    for registry in twins.both:
        registry.drop(CHAT)
    twins.request(list(client.messages), "Reply 2.")
    assert twins.fast.fast_turns == 1
    client.answer("Reply 2.", "append")
    client.send(Send("Yes."))
    twins.request(list(client.messages), "Reply 3.")
    assert twins.fast.fast_turns == 2


def test_a_replaced_chat_does_not_reuse_its_echo(twins: Twins) -> None:
    client = Client()
    for number in range(2):
        twins.request(list(client.messages), f"Reply {number}.")
        client.answer(f"Reply {number}.", "append")
        client.send(Send(WORDS[number]))
    assert twins.fast.fast_turns == 1
    other = [
        {"name": "Tomas", "is_user": True, "is_system": False, "mes": "Hello there, captain."},
        {"name": "Mira", "is_user": False, "is_system": False, "mes": "Who are you?"},
        {"name": "Tomas", "is_user": True, "is_system": False, "mes": WORDS[0]},
    ]
    for registry in twins.both:  # as the API's import with replace=true does
        registry.store.import_chat(Chat(copy.deepcopy(other)), chat_id=CHAT, replace=True)
        registry.drop(CHAT)
    twins.request(list(client.messages), "Reply 2.")
    assert twins.fast.fast_turns == 1
    texts = [m["mes"] for m in twins.fast.chat(CHAT).messages]
    assert texts == [
        "Hello there, captain.",
        "Reply 0.",
        WORDS[0],
        "Reply 1.",
        WORDS[1],
        "Reply 2.",
    ]


def test_an_echo_of_a_chat_object_that_was_replaced_is_not_used(twins: Twins) -> None:
    # `drop` forgets the echo; should one survive (a request racing a drop), it names the old
    # chat object and must not be used with the new one, here the same texts with the roles
    # of the first two messages swapped.
    client = Client()
    for number in range(2):
        twins.request(list(client.messages), f"Reply {number}.")
        client.answer(f"Reply {number}.", "append")
        client.send(Send(WORDS[number]))
    stale = twins.fast._echoes[CHAT]
    old = twins.fast.chat(CHAT).messages
    swapped = [
        {"name": "x", "is_user": (m.is_user != (i < 2)), "is_system": False, "mes": m["mes"]}
        for i, m in enumerate(old)
    ]
    for registry in twins.both:
        registry.drop(CHAT)
        registry.store.import_chat(Chat(copy.deepcopy(swapped)), chat_id=CHAT, replace=True)
        registry.session(CHAT)
    twins.fast._echoes[CHAT] = stale
    taken = twins.fast.fast_turns
    twins.request(list(client.messages), "Reply 2.")  # compared with the slow registry
    assert twins.fast.fast_turns == taken
    assert [m.is_user for m in twins.fast.chat(CHAT).messages[:2]] == [True, False]


# --- found by the property test ------------------------------------------------------------------


def test_a_client_carrying_the_memory_inside_its_history(twins: Twins) -> None:
    # The full path moves the system message that carries our memory to the leading block and
    # injects nothing; the next request must get the same on the fast path.
    client = Client()
    twins.request(list(client.messages), "Aye.")
    twins.change(server_change(RunningRecap("The Gull left port.")))
    memory = twins.memory_text()
    client.answer("Aye.", "append")
    client.messages.append({"role": "system", "content": memory})
    client.send(Send("We sail at dawn."))
    twins.request(list(client.messages), "Dawn it is.")
    client.answer("Dawn it is.", "append")
    client.send(Send("Yes."))
    turn = twins.request(list(client.messages), "Good.")
    assert sum("The Gull left port." in str(m["content"]) for m in turn.messages) == 1


def test_a_message_deleted_on_the_server_before_one_with_the_same_text(twins: Twins) -> None:
    # The stored texts the echo checks shift by one and still match ("*nods*", "*nods*"): the
    # user's message must come back (the full path restores it), not a second reply.
    client = Client()
    twins.request(list(client.messages), "Aye.")
    client.answer("Aye.", "append")
    client.send(Send("*nods*"))
    twins.request(list(client.messages), "*nods*")
    twins.change(lambda session: session.delete_message(2))  # the user's "*nods*"
    client.answer("*nods*", "append")
    client.send(Send("Go on."))
    twins.request(list(client.messages), "Well.")
    stored = [(m.is_user, m["mes"]) for m in twins.fast.chat(CHAT).messages]
    assert stored[2:4] == [(True, "*nods*"), (False, "*nods*")]


def test_a_message_with_another_role_inside_the_history(twins: Twins) -> None:
    # A "developer" (or "tool") message inside the history is stored as a narrator message and
    # compared as one ("system"): neither path re-creates it and what follows (which would lose
    # their recaps and swipes), and both agree.
    client = Client()
    twins.request(list(client.messages), "Aye.")
    client.answer("Aye.", "append")
    client.messages.append({"role": "developer", "content": "Be terse."})
    client.send(Send("We sail at dawn."))
    twins.request(list(client.messages), "Dawn it is.")
    twins.change(server_change(Recap((-1,), "Mira agreed to sail at dawn")))
    client.answer("Dawn it is.", "append")
    client.send(Send("Yes."))
    twins.request(list(client.messages), "Good.")
    for registry in (twins.slow, twins.fast):
        memories = [get_memory(m) for m in registry.chat(CHAT).messages]
        assert "Mira agreed to sail at dawn (#-1)" in memories


def test_post_history_instructions_take_the_fast_path_and_stay_last(twins: Twins) -> None:
    """SillyTavern's post-history instructions come after the newest message in every request:
    the fast path keeps them out of what it remembers and puts them back after everything."""
    client = Client()
    client.after = "[Write one paragraph.]"
    for number in range(4):
        turn = twins.request(client.sent(), f"Reply {number}.")
        assert twins.fast.fast_turns == number  # every request after the first
        assert turn.messages[-1] == {"role": "system", "content": client.after}
        client.answer(f"Reply {number}.", "append")
        client.send(Send(WORDS[number]))
    twins.change(server_change(RunningRecap("The Gull left port.")))
    taken = twins.fast.fast_turns
    turn = twins.request(client.sent(), "Reply 4.")
    assert twins.fast.fast_turns == taken + 1
    assert turn.messages[-1] == {"role": "system", "content": client.after}
    assert any("The Gull left port." in str(m["content"]) for m in turn.messages)
    stored = [m.text for m in twins.fast.chat(CHAT).messages]
    assert client.after not in stored
