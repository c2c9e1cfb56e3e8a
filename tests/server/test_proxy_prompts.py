"""Prompts a frontend places among the messages (SillyTavern's post-history instructions after
the newest message, an author's note at a depth): sent on where they are, never stored, and
the messages around them keep their ids (their recaps, their swipes) turn after turn. A
narrator message, which SillyTavern also sends with the `system` role, is stored."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import httpx
import orjson
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from autorecap.core.model import Chat
from autorecap.core.reconcile import ClientMessage, plan
from autorecap.core.slots import Position
from autorecap.jobs.queue import JobQueue
from autorecap.profiles import Profiles
from autorecap.server.proxy.outgoing import outgoing_messages
from autorecap.server.proxy.turns import ProxyChats
from autorecap.session import Session
from autorecap.store import open_store
from tests.server.conftest import Proxy, Upstream

from .test_proxy import bot, post_chat, texts, user

MAIN = {"role": "system", "content": "Write Mira's next reply in a chat between Mira and Jonah."}
NOTE = {"role": "system", "content": "[Author's note: the weather keeps getting worse.]"}
AFTER = {"role": "system", "content": "[Write one paragraph. Stay in character.]"}


def _request(history: list[dict[str, str]]) -> list[dict[str, Any]]:
    """As SillyTavern lays it out: the note two messages from the end, the instructions
    after the newest message."""
    at = max(0, len(history) - 2)
    return [MAIN, *history[:at], NOTE, *history[at:], AFTER]


def test_notes_and_instructions_are_sent_in_place_and_never_stored(
    proxy: Proxy, upstream: Upstream, http: httpx.Client
) -> None:
    base = proxy.chat_url("storm")
    history = [user("We sail at dawn?"), bot("At dawn, if the wind holds."), user("And now?")]
    kept: dict[str, int | None] = {}
    for turn in range(5):
        response = post_chat(http, base, _request(history))
        sent = upstream.chat_requests[-1].json["messages"]
        assert sent == _request(history)  # nothing to inject yet: the very same list
        chat = proxy.stored("storm")
        reply = response.json()["choices"][0]["message"]["content"]
        if turn == 0:
            # A chat's first request cannot tell a note from a narrator message: it is
            # stored, and deleted alone when the next request shows it moved.
            assert NOTE["content"] in texts(chat)
        else:
            assert texts(chat) == [m["content"] for m in history] + [reply]
        assert AFTER["content"] not in texts(chat)
        for message in chat.messages:  # nothing deleted and added again
            assert kept.setdefault(message.text, message.id) == message.id
        history += [bot(reply), user(f"Turn {turn}: what now?")]


def test_a_narrator_message_is_stored_where_it_was_said(
    proxy: Proxy, upstream: Upstream, http: httpx.Client
) -> None:
    base = proxy.chat_url("narrated")
    history: list[dict[str, str]] = [user("We sail at dawn?")]
    reply = post_chat(http, base, [MAIN, *history]).json()["choices"][0]["message"]["content"]
    storm = {"role": "system", "content": "A storm breaks over the bay."}
    history += [bot(reply), storm, user("We hold on!")]
    post_chat(http, base, [MAIN, *history, AFTER])
    chat = proxy.stored("narrated")
    assert [m.text for m in chat.messages][:4] == [m["content"] for m in history]
    assert chat.messages[2].is_narrator
    assert AFTER["content"] not in texts(chat)


def _outgoing(sent: list[dict[str, Any]], stored: list[tuple[str, str]], depth: int) -> list[str]:
    """The contents the upstream would get, with a memory at `depth`."""
    messages = [ClientMessage(m["role"], m["content"], "", at) for at, m in enumerate(sent)]
    result = plan(stored, messages)
    session = Session(Chat(chat_id="placed"))
    for message in result.history:
        session.chat.append({"mes": message.content, "is_user": message.role == "user"})
    session.slots.set("memory", "MEMORY", Position.IN_CHAT, depth)
    return [m["content"] for m in outgoing_messages(session, result, sent, None)]


def test_a_memory_at_a_depth_counts_chat_messages_not_the_clients_prompts() -> None:
    """SillyTavern counts a depth in chat messages, and puts its post-history instructions
    after everything: the proxy places the memory the same way around the client's prompts."""
    said = [user("u0"), bot("a1"), user("u2")]
    assert _outgoing([MAIN, *said, AFTER], [], 1) == [
        MAIN["content"],
        "u0",
        "a1",
        "MEMORY",
        "u2",
        AFTER["content"],
    ]
    assert _outgoing([MAIN, *said, AFTER], [], 0) == [
        MAIN["content"],
        "u0",
        "a1",
        "u2",
        "MEMORY",
        AFTER["content"],
    ]
    # An author's note known for one (stored chat: u0 a1 u2 a3; now two from the end).
    stored = [("user", "u0"), ("assistant", "a1"), ("user", "u2"), ("assistant", "a3")]
    sent = [MAIN, user("u0"), bot("a1"), NOTE, user("u2"), bot("a3"), user("u4")]
    out = _outgoing(sent, stored, 2)
    assert out == [MAIN["content"], "u0", "a1", NOTE["content"], "u2", "MEMORY", "a3", "u4"]


# --- a conversation of any shape ---------------------------------------------------------------

ACTIONS = st.lists(
    st.one_of(
        st.just(("send",)) | st.just(("send",)) | st.just(("send",)),
        st.just(("regenerate",)),
        st.tuples(st.just("edit"), st.integers(0, 30)),
        st.tuples(st.just("delete"), st.integers(0, 30)),
        st.tuples(
            st.just("narrate"),
        ),
        st.tuples(st.just("note"), st.integers(0, 4)),
        st.just(("no note",)),
        st.just(("instructions",)),
    ),
    min_size=1,
    max_size=14,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(actions=ACTIONS)
# A narrator message edited where the note, moved to its place, now stands just before it: the
# edit is the new text, and the note (a text stored once, elsewhere) is the prompt.
@example(actions=[("send",), ("narrate",), ("note", 4), ("edit", 4)])
def test_the_stored_chat_is_the_clients_messages_whatever_prompts_it_sends(
    actions: list[tuple[Any, ...]],
) -> None:
    """A client with narrator messages, an author's note at a depth that it turns on, off and
    moves, and post-history instructions: after every turn the stored chat is the client's
    messages and the reply, the note at most once (a chat's first request cannot tell it from
    a narrator message), and never the instructions."""
    with tempfile.TemporaryDirectory(prefix="prompts-") as folder:
        store = open_store(str(Path(folder) / "store.db"))
        chats = ProxyChats(store, JobQueue(store), profiles=Profiles(Path(folder) / "s.json"))
        try:
            messages: list[dict[str, str]] = [user("Hello there, captain.")]
            depth: int | None = 2
            after = True
            for number, action in enumerate([("start",), *actions]):
                kind = action[0]
                if kind == "send":
                    messages.append(user(f"Message {number}."))
                elif kind == "regenerate" and messages and messages[-1]["role"] == "assistant":
                    messages.pop()
                elif kind == "edit" and messages:
                    index = action[1] % len(messages)
                    messages[index] = {**messages[index], "content": f"Edited {number}."}
                elif kind == "delete" and len(messages) > 1:
                    # (not the first: a history without its first messages is a window on the
                    # newest ones, as a frontend sends a chat longer than its context)
                    index = 1 + action[1] % (len(messages) - 1)
                    rest = [*messages[:index], *messages[index + 1 :]]
                    if rest[0]["role"] != "system":  # else the main prompt's, to any client
                        messages = rest
                elif kind == "narrate":
                    messages.append({"role": "system", "content": f"Narrated {number}."})
                    messages.append(user(f"Message {number}."))
                elif kind == "note":
                    depth = action[1]
                elif kind == "no note":
                    depth = None
                elif kind == "instructions":
                    after = not after
                sent = [MAIN, *messages]
                if depth is not None:
                    sent.insert(max(1, len(sent) - depth), NOTE)
                if after:
                    sent.append(AFTER)
                if all(m["role"] == "system" for m in sent):
                    continue
                reply = f"Reply {number}."
                chats.finish(
                    chats.begin("any", orjson.dumps({"model": "m", "messages": sent})), reply
                )
                messages.append(bot(reply))  # after a regeneration: a swipe, shown
                stored = [m.text for m in store.load_chat("any").messages]
                assert AFTER["content"] not in stored
                assert stored.count(NOTE["content"]) <= 1
                assert [t for t in stored if t != NOTE["content"]] == [
                    m["content"] for m in messages
                ]
        finally:
            chats.close()
            store.close()
