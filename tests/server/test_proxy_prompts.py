"""Prompts a frontend places among the messages (SillyTavern's post-history instructions after
the newest message, an author's note at a depth): sent on where they are, never stored, and
the messages around them keep their ids (their recaps, their swipes) turn after turn. A
narrator message, which SillyTavern also sends with the `system` role, is stored."""

from __future__ import annotations

from typing import Any

import httpx

from autorecap.core.model import Chat
from autorecap.core.reconcile import ClientMessage, plan
from autorecap.core.slots import Position
from autorecap.server.proxy.outgoing import outgoing_messages
from autorecap.session import Session
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
