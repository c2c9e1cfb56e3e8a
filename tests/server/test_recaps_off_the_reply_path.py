"""No LLM call on the reply path: with `recap_backend="upstream"` the in-process worker makes
its recaps through the upstream, and while one of those calls is open for a chat, a chat
completion for the same chat is answered at once; the recap lands when its call ends.

The upstream holds the worker's recap calls (recognised by their prompts) until the test
releases them, so "at once" is an order of events, not a duration: the reply arrives while the
held call has not been answered yet. A proxy that waited for the recap would get its reply only
after the hold timed out, and the test would say so.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
import openai
import pytest

from autorecap.core import running
from autorecap.core.data import get_data, get_memory
from autorecap.core.model import Chat
from autorecap.core.scenes import content_hash
from autorecap.server.proxy.turns import ProxyChats
from autorecap.settings import (
    DEFAULT_MESSAGE_RECAP_PROMPT,
    DEFAULT_RUNNING_RECAP_PROMPT,
    DEFAULT_SCENE_RECAP_PROMPT,
)

from .conftest import HeldRequest, Proxy, Recorded, StartProxy, Upstream

MakeClient = Callable[[str], openai.OpenAI]

MODEL = "loopback-7b"
CHAT = "heron"
SYSTEM = {"role": "system", "content": "You are Mira, captain of the Heron."}
DEADLINE_S = 20.0

TURNS = [
    "Mira hides the stolen ledger under the captain's bunk.",
    "Vos arrives at the docks demanding forty crowns.",
    "We pay Vos twenty crowns and promise the rest by spring.",
    "The Heron slips out of the harbour at dusk.",
    "A storm catches us two days east of Corsa.",
]


def _asking(fragment: str, prompt: str) -> Callable[[Recorded], bool]:
    """A recap call of the worker's, told apart from the client's turns by its prompt."""
    assert fragment in prompt, f"{fragment!r} no longer identifies the prompt"
    return lambda request: any(fragment in content for content in request.contents)


IS_MESSAGE_RECAP = _asking("Write the note for", DEFAULT_MESSAGE_RECAP_PROMPT)
IS_SCENE_RECAP = _asking("Recap the scene", DEFAULT_SCENE_RECAP_PROMPT)
IS_RUNNING_RECAP = _asking("running memory", DEFAULT_RUNNING_RECAP_PROMPT)
MESSAGE_RECAP = " ".join(
    f"Crate {n} of the Heron's cargo was checked and stowed." for n in range(14)
)
"""A message recap long enough that two of them pass a scene recap's cap (250 tokens)."""


def user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def bot(text: str) -> dict[str, str]:
    return {"role": "assistant", "content": text}


def wait_until(check: Callable[[], Any], *, what: str, timeout: float = DEADLINE_S) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out after {timeout} s waiting for {what}"
        time.sleep(0.05)


def answered_while_held(held: HeldRequest) -> None:
    """The reply just arrived: the held recap call must still be open."""
    late = "the chat completion was answered only after the recap call it should not wait for"
    assert not held.timed_out, late
    assert not held.answered.is_set(), late


@dataclass
class Conversation:
    """One chat of a proxy whose worker recaps through the upstream."""

    proxy: Proxy
    upstream: Upstream
    client: openai.OpenAI
    http: httpx.Client

    @property
    def registry(self) -> ProxyChats:
        registry: ProxyChats = self.proxy.server.config.app.state.registry
        return registry

    def ask(self, *history: dict[str, str]) -> dict[str, str]:
        """A chat completion through the official client; returns the reply as a message."""
        completion = self.client.chat.completions.create(model=MODEL, messages=[SYSTEM, *history])
        return bot(completion.choices[0].message.content or "")

    def turns(self, count: int) -> list[dict[str, str]]:
        """`count` turns from scratch; returns the history (user and assistant messages)."""
        history: list[dict[str, str]] = []
        for text in TURNS[:count]:
            history.append(user(text))
            history.append(self.ask(*history))
        return history

    def sent_for(self, text: str) -> Recorded:
        """The client's request the upstream got for the turn that ended with `text`."""
        found = [r for r in self.upstream.chat_requests if r.contents[-1] == text]
        assert len(found) == 1, f"expected one upstream request ending with {text!r}"
        return found[0]

    def live(self, read: Callable[[Chat], Any]) -> Any:
        """`read(chat)` on the proxy's in-memory chat, under the chat's lock."""
        with self.registry.chat_lock(CHAT):
            return read(self.registry.chat(CHAT))

    def stored(self) -> Chat:
        return self.proxy.stored(CHAT)

    def idle(self) -> bool:
        """No recap job of the chat queued or running (the turns' jobs are queued first)."""
        self.proxy.settled()
        counts = self.registry.queue.counts(CHAT)
        return counts["queued"] == 0 and counts["running"] == 0

    def wait_idle(self) -> None:
        wait_until(self.idle, what="the worker to finish the chat's recap jobs")
        assert self.registry.queue.counts(CHAT)["failed"] == 0, self.registry.queue.list(
            states=("failed",)
        )

    def mark_scene(self, index: int) -> None:
        response = self.http.post(
            f"{self.proxy.origin}/api/chats/{CHAT}/scenes", json={"index": index}
        )
        assert response.status_code == 200, response.text

    def regenerate_scene(self, index: int) -> list[int]:
        """Queue the recap of the scene ending at `index` (then the running recap)."""
        response = self.http.post(f"{self.proxy.origin}/api/chats/{CHAT}/scenes/{index}/regenerate")
        assert response.status_code == 200, response.text
        jobs: list[int] = response.json()["jobs"]
        return jobs


@pytest.fixture
def conversation(
    start_proxy: StartProxy, upstream: Upstream, openai_client: MakeClient, http: httpx.Client
) -> Conversation:
    proxy = start_proxy(worker=True, recap_backend="upstream")
    # One message per recap call, so that a held call is one message's (batches have their own
    # tests in tests/recap and tests/jobs), short ones too; message recaps that together pass
    # the scene recap's cap, so that a scene recap is a call (recaps that fit are taken as they
    # are).
    answer = http.patch(
        f"{proxy.origin}/api/settings", json={"llm_batch_tokens": 0, "llm_own_recap_tokens": 0}
    )
    upstream.answer_all(IS_MESSAGE_RECAP, MESSAGE_RECAP)
    assert answer.status_code == 200, answer.text
    return Conversation(proxy, upstream, openai_client(proxy.chat_url(CHAT)), http)


def answer_to(upstream: Upstream, request: Recorded) -> str:
    """What the upstream answered an unscripted, unheld chat completion (`Reply N.`)."""
    number = next(n for n, r in enumerate(upstream.chat_requests, start=1) if r is request)
    return f"Reply {number}."


def scene_recap(chat: Chat, end: int) -> tuple[Any, Any]:
    """(current recap, its hash) of the scene ending at message `end`."""
    message = chat.messages[end]
    return get_data(message, "scene_recap_memory"), get_data(message, "scene_recap_hash")


# --- 1. a message recap --------------------------------------------------------------------------


def test_a_chat_is_answered_while_its_message_recap_call_is_open(
    conversation: Conversation, upstream: Upstream
) -> None:
    memory = "Mira hid the stolen ledger under the captain's bunk."
    hold = upstream.hold(IS_MESSAGE_RECAP, reply=memory)
    u1 = user(TURNS[0])
    r1 = conversation.ask(u1)
    held = hold.first()
    assert f"\n{TURNS[0]}\n" in held.prompt  # the worker recaps the first message first

    u2 = user(TURNS[1])
    r2 = conversation.ask(u1, r1, u2)
    answered_while_held(held)
    assert conversation.sent_for(TURNS[1]).contents[-3:] == [TURNS[0], r1["content"], TURNS[1]]
    hold.release()

    def recapped(chat: Chat) -> bool:
        return bool(chat.messages) and get_memory(chat.messages[0]) == memory

    wait_until(lambda: conversation.live(recapped), what="the held recap in the live chat")
    conversation.wait_idle()
    assert not held.timed_out
    expected = [TURNS[0], r1["content"], TURNS[1], r2["content"]]
    for chat in (conversation.live(lambda chat: chat), conversation.stored()):
        assert [m.text for m in chat.messages] == expected
        assert get_memory(chat.messages[0]) == memory
        assert all(get_memory(m) for m in chat.messages), "a message lost its recap"


# --- 2. a scene recap, then the running recap ----------------------------------------------------


def test_a_chat_is_answered_while_its_scene_and_running_recap_calls_are_open(
    conversation: Conversation, upstream: Upstream
) -> None:
    history = conversation.turns(3)
    conversation.wait_idle()
    # Two closed scenes (0-1, 2-3): the running recap leaves out the latest one and folds in
    # the first, whose recap is the one held.
    conversation.mark_scene(1)
    conversation.mark_scene(3)
    # A running recap that fits is the scene's line appended, with no call: a cap the scene's
    # recap does not fit in makes the worker ask the upstream to condense it.
    answer = conversation.http.patch(
        f"{conversation.proxy.origin}/api/settings", json={"running_scene_recap_max_tokens": 50}
    )
    assert answer.status_code == 200, answer.text
    scene_memory = "Mira hid the ledger; the crew was none the wiser. " + " ".join(
        f"Crate {n} was stowed below." for n in range(12)
    )
    running_memory = "So far: Mira hid a stolen ledger aboard the Heron."
    scene_hold = upstream.hold(IS_SCENE_RECAP, reply=scene_memory)
    running_hold = upstream.hold(IS_RUNNING_RECAP, reply=running_memory)
    conversation.regenerate_scene(1)

    held_scene = scene_hold.first()
    # The first scene only (told by its messages, or by their recaps when those are shorter).
    assert "(0-1)" in held_scene.prompt
    assert TURNS[1] not in held_scene.prompt
    history.append(user(TURNS[3]))
    history.append(conversation.ask(*history))
    answered_while_held(held_scene)
    conversation.proxy.settled()
    scene_hold.release()

    held_running = running_hold.first()
    assert scene_memory in held_running.prompt  # the scene recap landed first
    for chat in (conversation.live(lambda chat: chat), conversation.stored()):
        assert scene_recap(chat, 1)[0] == scene_memory
    history.append(user(TURNS[4]))
    history.append(conversation.ask(*history))
    answered_while_held(held_running)
    running_hold.release()

    def folded(chat: Chat) -> bool:
        current = running.current(chat)
        return current is not None and current.get("content") == running_memory

    wait_until(lambda: conversation.live(folded), what="the held running recap in the live chat")
    conversation.wait_idle()
    for chat in (conversation.live(lambda chat: chat), conversation.stored()):
        assert [m.text for m in chat.messages] == [m["content"] for m in history]
        assert scene_recap(chat, 1)[0] == scene_memory
        assert folded(chat)
    # And it is the memory the next turn carries upstream.
    conversation.ask(*history, user("We ride it out."))
    assert any(running_memory in c for c in conversation.sent_for("We ride it out.").contents)


# --- 3. a scene edited while its recap call is open ----------------------------------------------


@pytest.mark.parametrize(
    "edited",
    [pytest.param(0, id="a-message-inside-the-scene"), pytest.param(3, id="its-last-message")],
)
def test_a_scene_edited_during_its_recap_call_is_recapped_from_the_new_text(
    conversation: Conversation, upstream: Upstream, edited: int
) -> None:
    history = conversation.turns(3)
    conversation.wait_idle()
    conversation.mark_scene(3)  # scene 0-3 closed, 4-5 open
    ids_before = [m.id for m in conversation.stored().messages]
    old_memory = "A recap of the scene as it was before the edit."
    scene_hold = upstream.hold(IS_SCENE_RECAP, reply=old_memory)
    scene_job = conversation.regenerate_scene(3)[0]
    held = scene_hold.first()
    old_text = history[edited]["content"]
    old_recap = conversation.live(lambda chat: get_memory(chat.messages[edited]))
    assert old_text in held.prompt or f": {old_recap}" in held.prompt

    # The client edits a message of the scene (and goes on) while the recap call is open.
    new_text = "Mira burns the stolen ledger in the galley stove."
    history[edited] = {**history[edited], "content": new_text}
    history.append(user(TURNS[3]))
    history.append(conversation.ask(*history))
    answered_while_held(held)
    conversation.proxy.settled()
    # The next job the worker takes is a message recap (of the turn's messages): holding it
    # stops the worker right after the scene job, so what that job did can be looked at.
    message_hold = upstream.hold(IS_MESSAGE_RECAP, reply="Mira burned the ledger.")
    scene_hold.release()
    message_hold.first()

    job = conversation.registry.queue.get(scene_job)
    memory, recorded_hash = conversation.live(lambda chat: scene_recap(chat, 3))
    new_hash = conversation.live(lambda chat: content_hash(chat.messages[0:4]))
    assert not (memory == old_memory and recorded_hash == new_hash), (
        "the recap of the old text was stored as the recap of the edited scene"
    )
    if edited == 3:  # the merge sees the edit on the message it writes to: the job is retried
        assert job.state == "queued", job
        assert "edited" in (job.error or ""), job
        assert memory != old_memory
    message_hold.release()

    conversation.wait_idle()
    scene_calls = [r for r in upstream.chat_requests if IS_SCENE_RECAP(r)]
    last_call = scene_calls[-1]
    # Made from the new text, or from the recap made of it (when the recaps are shorter).
    assert any(new_text in c or ": Mira burned the ledger." in c for c in last_call.contents)
    assert not any(old_text in c or f": {old_recap}\n" in c for c in last_call.contents)
    for chat in (conversation.live(lambda chat: chat), conversation.stored()):
        assert chat.messages[edited].text == new_text  # the client's edit is kept
        assert [m.id for m in chat.messages][: len(ids_before)] == ids_before
        assert [m.text for m in chat.messages] == [m["content"] for m in history]
        memory, recorded_hash = scene_recap(chat, 3)
        assert memory == answer_to(upstream, last_call) != old_memory
        assert recorded_hash == content_hash(chat.messages[0:4])
        assert all(get_memory(m) for m in chat.messages), "a message lost its recap"
