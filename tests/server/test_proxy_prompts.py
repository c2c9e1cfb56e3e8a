"""Prompts a frontend places among the messages (SillyTavern's post-history instructions after
the newest message, an author's note at a depth): sent on where they are, never stored, and
the messages around them keep their ids (their recaps, their swipes) turn after turn. A
narrator message, which SillyTavern also sends with the `system` role, is stored."""

from __future__ import annotations

from typing import Any

import httpx

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
