"""The OpenAI-compatible memory proxy, end to end: a real uvicorn server between the official
`openai` client (and httpx) and a real loopback upstream."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import openai
import pytest

from autorecap.core import running
from autorecap.core.data import get_memory, set_data
from autorecap.core.model import Chat, Message
from autorecap.core.reconcile import ClientMessage
from autorecap.profiles import Profiles
from autorecap.server.proxy.matching import fingerprint
from autorecap.settings import DEFAULT_RUNNING_TEMPLATE
from autorecap.store import open_store

from .conftest import COMPLETION_BODY, MODELS_BODY, Proxy, StartProxy, Upstream

MakeClient = Callable[[str], openai.OpenAI]

MODEL = "loopback-7b"
SYSTEM = {"role": "system", "content": "You are Mira, captain of the Heron."}


def user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def bot(text: str) -> dict[str, str]:
    return {"role": "assistant", "content": text}


def texts(chat: Chat) -> list[str]:
    return [m.text for m in chat.messages]


def ids(chat: Chat) -> list[int | None]:
    return [m.id for m in chat.messages]


def post_chat(http: httpx.Client, base: str, messages: list[dict[str, Any]], **extra: Any) -> Any:
    response = http.post(
        f"{base}/chat/completions", json={"model": MODEL, "messages": messages, **extra}
    )
    assert response.status_code == 200, response.text
    return response


@pytest.fixture
def db_path(db_url: str) -> str:
    """The proxy suite runs on both backends: SQLite and PostgreSQL."""
    return db_url


def seed_chat(
    db: str | Path,
    chat_id: str,
    messages: list[dict[str, Any]],
    *,
    breaks: tuple[int, ...] = (),
    recap: str | None = None,
) -> None:
    """Store a chat before the proxy starts (the proxy keeps its chats in memory once loaded)."""
    store = open_store(db)
    try:
        store.import_chat(Chat(chat_id=chat_id))
        chat = store.load_chat(chat_id)
        for message in messages:
            chat.append(message)
        for index in breaks:
            set_data(chat.messages[index], "scene_break", True)
            set_data(chat.messages[index], "scene_break_visible", True)
        if recap is not None:
            end = breaks[-1] if breaks else len(chat.messages) - 1
            running.add_version(
                chat,
                recap,
                scene_count=1,
                excluded_count=0,
                prev_scene_index=-1,
                new_scene_index=end,
                now_ms=1_700_000_000_000,
            )
        store.save(chat, header=True, structure=True)
    finally:
        store.close()


def st_message(name: str, text: str, *, is_user: bool) -> dict[str, Any]:
    message: dict[str, Any] = {
        "name": name,
        "is_user": is_user,
        "is_system": False,
        "send_date": "2026-03-02T18:11:40.000Z",
        "mes": text,
        "extra": {},
    }
    if not is_user:
        message.update(swipe_id=0, swipes=[text], swipe_info=[{"extra": {}}])
    return message


def wait_until(check: Callable[[], Any], *, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out after {timeout} s waiting for {what}"
        time.sleep(0.1)


# --- 1. non-streaming ----------------------------------------------------------------------------


def test_a_reply_reaches_the_openai_client_unchanged_and_is_recorded(
    proxy: Proxy, upstream: Upstream, openai_client: MakeClient
) -> None:
    answer = "Aye — we sail at dawn, à l'aube. 🌅"
    upstream.reply(answer)
    client = openai_client(proxy.chat_url("dawn"))
    completion = client.chat.completions.create(
        model=MODEL, messages=[SYSTEM, user("Do we sail at dawn?")], temperature=0.7
    )
    assert completion.choices[0].message.content == answer
    assert completion.id == "chatcmpl-1"
    assert completion.usage is not None
    assert completion.usage.total_tokens == 15
    # The upstream got the request as sent (no memory yet: nothing injected).
    sent = upstream.chat_requests[-1]
    assert sent.path == "/v1/chat/completions"
    assert sent.json["model"] == MODEL
    assert sent.json["temperature"] == 0.7
    assert sent.messages == [SYSTEM, user("Do we sail at dawn?")]
    assert sent.headers["authorization"] == "Bearer test"
    # The exchange is stored.
    stored = proxy.stored("dawn")
    assert texts(stored) == ["Do we sail at dawn?", answer]
    assert [m.is_user for m in stored.messages] == [True, False]
    assert all(m.id is not None for m in stored.messages)


def test_a_reply_keeps_its_exact_bytes(
    proxy: Proxy, upstream: Upstream, http: httpx.Client
) -> None:
    upstream.reply("Bytes, untouched: é ✓")
    response = post_chat(http, proxy.chat_url("bytes"), [SYSTEM, user("Say it exactly.")])
    assert response.content == upstream.bodies[-1]
    assert response.headers["content-type"].startswith("application/json")
    assert response.headers["x-autorecap-chat"] == "bytes"
    assert texts(proxy.stored("bytes"))[-1] == "Bytes, untouched: é ✓"


# --- 2. streaming --------------------------------------------------------------------------------


def test_a_stream_reaches_the_openai_client_chunk_by_chunk(
    proxy: Proxy, upstream: Upstream, openai_client: MakeClient
) -> None:
    upstream.stream(["Fair winds", " and following", " seas."], delay=1.0)
    client = openai_client(proxy.chat_url("streamed"))
    stream = client.chat.completions.create(
        model=MODEL, messages=[SYSTEM, user("Any news?")], stream=True
    )
    deltas: list[str] = []
    received: list[float] = []
    with stream:
        for chunk in stream:
            received.append(time.monotonic())
            deltas.append(chunk.choices[0].delta.content or "")
    assert deltas == ["Fair winds", " and following", " seas."]
    log = upstream.streams[-1]
    assert len(log.started) == 3
    # Chunk k was in the client's hands before the upstream wrote chunk k+1.
    assert received[0] < log.started[1]
    assert received[1] < log.started[2]
    # The openai client hangs up at `[DONE]`; the proxy records the reply as its relay ends.
    wait_until(
        lambda: len(proxy.stored("streamed").messages) == 2, timeout=5, what="the stored reply"
    )
    assert texts(proxy.stored("streamed")) == ["Any news?", "Fair winds and following seas."]


def test_a_streamed_reply_is_recorded_when_the_client_hangs_up_at_done(
    proxy: Proxy, upstream: Upstream, openai_client: MakeClient
) -> None:
    """The official client stops reading at `data: [DONE]` and closes the connection, without
    waiting for the end of the HTTP body. An upstream that sends `[DONE]` and ends its body a
    moment later (here 0.5 s) then loses the reply.

    BUG: `relay()` keeps the text only when `aiter_raw()` ran to its end (`completed`); the
    hang-up cancels the relay while it waits for the end of the body, so its `finally` calls
    `registry.finish(turn, "")`, which records nothing, though the client got the whole reply."""
    upstream.stream(["All hands", " on deck."], tail=0.5)
    client = openai_client(proxy.chat_url("done"))
    stream = client.chat.completions.create(
        model=MODEL, messages=[SYSTEM, user("Report!")], stream=True
    )
    with stream:
        deltas = [chunk.choices[0].delta.content for chunk in stream]
    assert deltas == ["All hands", " on deck."]
    assert upstream.streams[-1].done.wait(5)
    wait_until(lambda: len(proxy.stored("done").messages) == 2, timeout=3, what="the stored reply")
    assert texts(proxy.stored("done")) == ["Report!", "All hands on deck."]


def test_a_stream_keeps_its_exact_bytes_and_is_relayed_as_it_comes(
    proxy: Proxy, upstream: Upstream, http: httpx.Client
) -> None:
    upstream.stream(["Land", " ho!"], delay=1.0)
    body = {"model": MODEL, "messages": [SYSTEM, user("Anything?")], "stream": True}
    received: list[tuple[float, bytes]] = []
    with http.stream("POST", f"{proxy.chat_url('raw-stream')}/chat/completions", json=body) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        assert r.headers["x-autorecap-chat"] == "raw-stream"
        for piece in r.iter_raw():
            received.append((time.monotonic(), piece))
    log = upstream.streams[-1]
    assert len(log.writes) == 2
    assert b"".join(piece for _, piece in received) == log.payload
    # Everything the client held before the upstream wrote chunk 2 is exactly chunk 1.
    early = b"".join(piece for at, piece in received if at < log.started[1])
    assert early == log.writes[0]
    assert texts(proxy.stored("raw-stream")) == ["Anything?", "Land ho!"]


# --- 3. which chat a request belongs to ----------------------------------------------------------


def test_the_chat_id_in_the_path_names_the_chat(proxy: Proxy, openai_client: MakeClient) -> None:
    client = openai_client(proxy.chat_url("by-path"))
    client.chat.completions.create(model=MODEL, messages=[SYSTEM, user("Hello.")])
    assert proxy.chat_ids() == ["by-path"]
    assert texts(proxy.stored("by-path")) == ["Hello.", "Reply 1."]


def test_the_chat_header_names_the_chat(proxy: Proxy, openai_client: MakeClient) -> None:
    client = openai_client(proxy.url)
    raw = client.chat.completions.with_raw_response.create(
        model=MODEL,
        messages=[SYSTEM, user("Hello.")],
        extra_headers={"X-Autorecap-Chat": "by-header"},
    )
    assert raw.headers["x-autorecap-chat"] == "by-header"
    assert raw.parse().choices[0].message.content == "Reply 1."
    assert proxy.chat_ids() == ["by-header"]
    assert texts(proxy.stored("by-header")) == ["Hello.", "Reply 1."]


def test_the_path_wins_over_the_header(proxy: Proxy, http: httpx.Client) -> None:
    response = http.post(
        f"{proxy.chat_url('path-id')}/chat/completions",
        json={"model": MODEL, "messages": [SYSTEM, user("Hi.")]},
        headers={"X-Autorecap-Chat": "header-id"},
    )
    assert response.headers["x-autorecap-chat"] == "path-id"
    assert proxy.chat_ids() == ["path-id"]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize(
    "chat_id",
    ["Captain Mira - 2026-03-02@18h11m40s", "ミラ - 2026-03-02@18h11m40s"],
    ids=["latin", "japanese"],
)
def test_a_sillytavern_chat_id_in_the_path(
    chat_id: str, stream: bool, proxy: Proxy, upstream: Upstream, http: httpx.Client
) -> None:
    """SillyTavern chat ids are `<character name> - <date>`, and names are often not Latin.

    BUG (japanese): the proxy echoes the id in the `X-Autorecap-Chat` response header, which
    Starlette encodes as latin-1: `UnicodeEncodeError` -> a 500 for a JSON answer (after the
    upstream was called and the reply recorded), a reset connection for a stream (the upstream
    response opened by `client.send(..., stream=True)` is never closed)."""
    base = f"{proxy.origin}/c/{quote(chat_id)}/v1"
    request = {"model": MODEL, "messages": [SYSTEM, user("Hello.")], "stream": stream}
    response = http.post(f"{base}/chat/completions", json=request)
    assert response.status_code == 200, response.text
    written = upstream.streams[-1].payload if stream else upstream.bodies[-1]
    assert response.content == written
    assert proxy.chat_ids() == [chat_id]
    assert texts(proxy.stored(chat_id)) == ["Hello.", "Reply 1."]


def test_without_an_id_a_conversation_keeps_its_fingerprint_chat(
    proxy: Proxy, http: httpx.Client
) -> None:
    first = post_chat(http, proxy.url, [SYSTEM, user("We need a map.")])
    second = post_chat(
        http, proxy.url, [SYSTEM, user("We need a map."), bot("Reply 1."), user("Where?")]
    )
    other = post_chat(http, proxy.url, [SYSTEM, user("A different tale begins.")])
    chat_id = first.headers["x-autorecap-chat"]
    assert chat_id.startswith("fp-")
    assert second.headers["x-autorecap-chat"] == chat_id
    other_id = other.headers["x-autorecap-chat"]
    assert other_id.startswith("fp-")
    assert other_id != chat_id
    assert proxy.chat_ids() == sorted([chat_id, other_id])
    assert texts(proxy.stored(chat_id)) == ["We need a map.", "Reply 1.", "Where?", "Reply 2."]
    assert texts(proxy.stored(other_id)) == ["A different tale begins.", "Reply 3."]


def test_a_chat_the_frontend_trims_to_its_context_stays_one_chat(
    proxy: Proxy, upstream: Upstream, http: httpx.Client
) -> None:
    """SillyTavern fits a long chat to its context by leaving out the oldest messages, so the
    opening changes every turn: each request is still a turn of the same chat, the messages
    left out stay, and what goes upstream is the window the client sent."""
    history = [user("We need a map.")]
    chat_id = ""
    for turn in range(8):
        window = history[-6:]  # the newest six messages fit the frontend's context
        response = post_chat(http, proxy.url, [SYSTEM, *window])
        chat_id = chat_id or response.headers["x-autorecap-chat"]
        assert response.headers["x-autorecap-chat"] == chat_id
        sent = upstream.chat_requests[-1].json["messages"]
        assert [m["content"] for m in sent[1:]] == [m["content"] for m in window]
        history += [bot(response.json()["choices"][0]["message"]["content"]), user(f"Turn {turn}")]
    assert proxy.chat_ids() == [chat_id]
    assert texts(proxy.stored(chat_id)) == [m["content"] for m in history[:-1]]
    # another chat with the same system prompt and its own messages is another chat
    other = post_chat(http, proxy.url, [SYSTEM, user("A different tale begins.")])
    assert other.headers["x-autorecap-chat"] != chat_id


def test_a_trimmed_chat_is_found_again_after_a_restart(
    start_proxy: StartProxy, upstream: Upstream, http: httpx.Client
) -> None:
    """The chat a window belongs to is not open in a server just started: it is found among
    the chats saved last."""
    history = [user("We need a map.")]
    first = start_proxy()
    for turn in range(4):
        response = post_chat(http, first.url, [SYSTEM, *history[-6:]])
        history += [bot(response.json()["choices"][0]["message"]["content"]), user(f"T{turn}")]
    chat_id = response.headers["x-autorecap-chat"]
    first.stop()
    second = start_proxy()
    response = post_chat(http, second.url, [SYSTEM, *history[-6:]])
    assert response.headers["x-autorecap-chat"] == chat_id
    assert second.chat_ids() == [chat_id]
    assert texts(second.stored(chat_id))[:-1] == [m["content"] for m in history]


def test_two_chats_with_the_same_opening_are_kept_apart(proxy: Proxy, http: httpx.Client) -> None:
    """SillyTavern's "Start new chat" with the same character sends the same prompt and
    greeting: the second chat is a chat of its own, and going back and forth between the two
    deletes nothing of either (each message keeps its id); taking back a few of the newest
    messages is still a deletion."""
    greeting = bot("The tavern door creaks open.")

    def turn(history: list[dict[str, str]], text: str) -> Any:
        history.append(user(text))
        response = post_chat(http, proxy.url, [SYSTEM, *history])
        history.append(bot(response.json()["choices"][0]["message"]["content"]))
        return response.headers["x-autorecap-chat"]

    first: list[dict[str, str]] = [greeting]
    for number in range(4):
        first_id = turn(first, f"First chat, turn {number}.")
    ids_before = ids(proxy.stored(first_id))
    second: list[dict[str, str]] = [greeting]
    second_id = turn(second, "A second chat begins.")
    assert second_id != first_id
    assert ids(proxy.stored(first_id)) == ids_before  # the first chat untouched
    assert turn(first, "Back in the first chat.") == first_id
    assert turn(second, "And the second again.") == second_id
    assert ids(proxy.stored(first_id))[: len(ids_before)] == ids_before
    assert texts(proxy.stored(second_id)) == [m["content"] for m in second]
    assert texts(proxy.stored(first_id)) == [m["content"] for m in first]
    # taking back the newest two messages and saying something else: the same chat
    del first[-2:]
    assert turn(first, "No, wait.") == first_id
    assert texts(proxy.stored(first_id)) == [m["content"] for m in first]


def test_a_group_chat_without_an_id_is_one_chat_whoever_speaks_next(
    proxy: Proxy, http: httpx.Client
) -> None:
    """SillyTavern's prompt in a group chat names the character whose reply comes next, so it
    changes every turn; the chat it belongs to does not."""
    prompt = "Write {}'s next reply in a fictional chat between Mae, Rook and Tomas."
    history = [user("Tomas: Who has the key?")]
    found = set()
    for speaker in ("Mae", "Rook", "Mae"):
        sent = [{"role": "system", "content": prompt.format(speaker)}, *history]
        response = post_chat(http, proxy.url, sent)
        found.add(response.headers["x-autorecap-chat"])
        reply = response.json()["choices"][0]["message"]["content"]
        history += [bot(reply), user("Tomas: And then?")]
    assert len(found) == 1
    assert proxy.chat_ids() == sorted(found)


def test_a_chat_stored_under_its_earlier_fingerprint_keeps_it(
    proxy: Proxy, http: httpx.Client
) -> None:
    """Fingerprints made before they left out the speaker asked for: a chat stored under one
    is found again, not started anew."""
    prompt = {"role": "system", "content": "Write Mira's next reply in a chat between Mira and Jo."}
    said = [ClientMessage("system", prompt["content"]), ClientMessage("user", "Ahoy.")]
    earlier = fingerprint(said, settled=False)
    assert earlier != fingerprint(said)
    first = post_chat(http, proxy.chat_url(earlier), [prompt, user("Ahoy.")])
    reply = first.json()["choices"][0]["message"]["content"]
    for _ in range(2):
        again = post_chat(http, proxy.url, [prompt, user("Ahoy."), bot(reply), user("Well?")])
        assert again.headers["x-autorecap-chat"] == earlier
    assert proxy.chat_ids() == [earlier]


# --- 4. the running recap is injected ------------------------------------------------------------

RECAP = "Mira stole the harbour master's ledger and owes Captain Vos forty crowns."
RECAP_TEXT = DEFAULT_RUNNING_TEMPLATE.replace("{{running_recap}}", RECAP).strip()
SEEDED = [
    st_message("User", "We board the Heron at midnight.", is_user=True),
    st_message("Mira", "The Heron slips out of the harbour.", is_user=False),
]
SEEDED_CLIENT = [
    user("We board the Heron at midnight."),
    bot("The Heron slips out of the harbour."),
]


@pytest.fixture
def recap_chat(db_path: str | Path) -> str:
    seed_chat(db_path, "c1", SEEDED, breaks=(1,), recap=RECAP)
    return "c1"


def test_the_running_recap_goes_before_the_main_prompt_by_default(
    recap_chat: str, start_proxy: StartProxy, upstream: Upstream, openai_client: MakeClient
) -> None:
    proxy = start_proxy()
    client = openai_client(proxy.chat_url(recap_chat))
    asked = [SYSTEM, *SEEDED_CLIENT, user("Where are we headed?")]
    client.chat.completions.create(model=MODEL, messages=asked)
    sent = upstream.chat_requests[-1].messages
    assert RECAP_TEXT.startswith("# Story Memory")
    assert sent == [{"role": "system", "content": RECAP_TEXT}, *asked]
    # The memory is not chat history: the stored chat holds the conversation only.
    assert texts(proxy.stored(recap_chat)) == [
        "We board the Heron at midnight.",
        "The Heron slips out of the harbour.",
        "Where are we headed?",
        "Reply 1.",
    ]


def test_the_running_recap_at_depth_0_in_chat_follows_the_last_message(
    recap_chat: str,
    start_proxy: StartProxy,
    upstream: Upstream,
    openai_client: MakeClient,
    installation_settings: Profiles,
) -> None:
    profiles = installation_settings
    profiles.set("running_scene_recap_position", 1)
    profiles.set("running_scene_recap_depth", 0)
    proxy = start_proxy()
    client = openai_client(proxy.chat_url(recap_chat))
    asked = [SYSTEM, *SEEDED_CLIENT, user("Where are we headed?")]
    client.chat.completions.create(model=MODEL, messages=asked)
    sent = upstream.chat_requests[-1].messages
    assert sent == [*asked, {"role": "system", "content": RECAP_TEXT}]


@pytest.mark.parametrize("carried", ["own message", "inside the main prompt"])
def test_a_recap_the_client_already_carries_is_not_injected_twice(
    carried: str,
    recap_chat: str,
    start_proxy: StartProxy,
    upstream: Upstream,
    openai_client: MakeClient,
) -> None:
    """The client's prompt already holds the memory (a frontend that pastes it, or a client
    that echoes the previous prompt): it must reach the upstream once, with the main prompt.

    BUG: it reaches the upstream zero times. `split_request` drops every system message that
    contains the injection (as "not history"), `_outgoing` builds the request from what is
    left, and since `carries_injection` is set nothing is injected either; when the recap sits
    inside the main prompt, the main prompt is dropped with it."""
    if carried == "own message":
        head = [SYSTEM, {"role": "system", "content": RECAP_TEXT}]
    else:
        head = [{"role": "system", "content": f"{SYSTEM['content']}\n\n{RECAP_TEXT}"}]
    proxy = start_proxy()
    client = openai_client(proxy.chat_url(recap_chat))
    client.chat.completions.create(
        model=MODEL, messages=[*head, *SEEDED_CLIENT, user("Where are we headed?")]
    )
    # The client's prompt is not taken as history either way.
    assert texts(proxy.stored(recap_chat))[2:] == ["Where are we headed?", "Reply 1."]
    contents = upstream.chat_requests[-1].contents
    assert sum(content.count(RECAP) for content in contents) == 1, contents
    assert any(SYSTEM["content"] in content for content in contents), contents


# --- 5. hidden messages never reach the upstream -------------------------------------------------


def test_auto_hidden_messages_are_left_out_of_the_upstream_request(
    db_path: str | Path,
    start_proxy: StartProxy,
    upstream: Upstream,
    openai_client: MakeClient,
    installation_settings: Profiles,
) -> None:
    seed_chat(
        db_path,
        "hidden",
        [
            *SEEDED,
            st_message("User", "Next morning we land on the isle.", is_user=True),
            st_message("Mira", "The isle is quiet, too quiet.", is_user=False),
        ],
        breaks=(1,),
    )
    installation_settings.set("auto_hide_scene_count", 0)  # hide all up to the last break
    installation_settings.set("auto_hide_only_recapped", False)  # even with no running recap
    proxy = start_proxy()
    client = openai_client(proxy.chat_url("hidden"))
    asked = [
        SYSTEM,
        *SEEDED_CLIENT,
        user("Next morning we land on the isle."),
        bot("The isle is quiet, too quiet."),
        user("We scout the beach."),
    ]
    client.chat.completions.create(model=MODEL, messages=asked)
    sent = upstream.chat_requests[-1].messages
    assert sent == [SYSTEM, *asked[3:]]
    # The hidden messages are still in the chat (hidden, not deleted).
    stored = proxy.stored("hidden")
    assert len(stored.messages) == 6
    assert [m.is_hidden for m in stored.messages] == [True, True, False, False, False, False]
    assert texts(stored)[:2] == [m["content"] for m in SEEDED_CLIENT]
    # The next turn, sending the hidden messages again, changes nothing about them.
    client.chat.completions.create(
        model=MODEL, messages=[*asked, bot("Reply 1."), user("And then?")]
    )
    assert upstream.chat_requests[-1].messages == [
        SYSTEM,
        *asked[3:],
        bot("Reply 1."),
        user("And then?"),
    ]
    assert ids(proxy.stored("hidden"))[:6] == ids(stored)


# --- 6. reconciling the client's history with the stored chat ------------------------------------


def test_append_regenerate_edit_and_delete_through_the_proxy(
    proxy: Proxy, upstream: Upstream, openai_client: MakeClient
) -> None:
    client = openai_client(proxy.chat_url("story"))

    def ask(*history: dict[str, str]) -> str:
        completion = client.chat.completions.create(model=MODEL, messages=[SYSTEM, *history])
        return completion.choices[0].message.content or ""

    u1, u2, u3 = user("Hoist the sails."), user("Set course north."), user("Ready the boats.")
    r1 = bot(ask(u1))
    first = proxy.stored("story")
    assert texts(first) == ["Hoist the sails.", "Reply 1."]

    # append
    assert ask(u1, r1, u2) == "Reply 2."
    appended = proxy.stored("story")
    assert texts(appended) == ["Hoist the sails.", "Reply 1.", "Set course north.", "Reply 2."]
    assert ids(appended)[:2] == ids(first)

    # regenerate: the last reply left out -> the new reply is a second swipe of it
    assert ask(u1, r1, u2) == "Reply 3."
    assert upstream.chat_requests[-1].messages == [SYSTEM, u1, r1, u2]
    regenerated = proxy.stored("story")
    assert ids(regenerated) == ids(appended)
    last = regenerated.messages[-1]
    assert last.text == "Reply 3."
    assert last.swipes == ["Reply 2.", "Reply 3."]
    assert last.swipe_id == 1
    r3 = bot("Reply 3.")

    # edit an earlier user message (and go on)
    edited_u1 = user("Hoist every sail we have.")
    ask(edited_u1, r1, u2, r3, u3)
    edited = proxy.stored("story")
    assert texts(edited) == [
        "Hoist every sail we have.",
        "Reply 1.",
        "Set course north.",
        "Reply 3.",
        "Ready the boats.",
        "Reply 4.",
    ]
    assert ids(edited)[:4] == ids(regenerated)

    # delete: the client drops the last exchanges
    ask(edited_u1, r1, u2)
    deleted = proxy.stored("story")
    assert texts(deleted) == [
        "Hoist every sail we have.",
        "Reply 1.",
        "Set course north.",
        "Reply 5.",
    ]
    assert ids(deleted)[:3] == ids(edited)[:3]
    assert not set(ids(deleted)[3:]) & set(ids(edited))


def test_a_streamed_regeneration_becomes_a_swipe(
    proxy: Proxy, upstream: Upstream, http: httpx.Client
) -> None:
    base = proxy.chat_url("swipes")
    post_chat(http, base, [SYSTEM, user("Sing.")])
    with http.stream(
        "POST",
        f"{base}/chat/completions",
        json={"model": MODEL, "messages": [SYSTEM, user("Sing.")], "stream": True},
    ) as response:
        assert response.status_code == 200
        response.read()
    last = proxy.stored("swipes").messages[-1]
    assert last.swipes == ["Reply 1.", "Reply 2."]
    assert last.swipe_id == 1
    assert len(proxy.stored("swipes").messages) == 2


def test_swiping_back_to_an_earlier_reply_keeps_the_others(
    proxy: Proxy, http: httpx.Client
) -> None:
    """After two regenerations the reply has three swipes; the user picks the first and goes
    on: it is selected, and the other two stay."""
    base = proxy.chat_url("swipe-back")
    for _ in range(3):
        post_chat(http, base, [SYSTEM, user("Sing.")])
    swipes = proxy.stored("swipe-back").messages[-1].swipes
    assert swipes is not None
    assert len(swipes) == 3
    post_chat(http, base, [SYSTEM, user("Sing."), bot(swipes[0]), user("Again!")])
    reply = proxy.stored("swipe-back").messages[1]
    assert reply.swipes == swipes
    assert reply.swipe_id == 0
    assert reply.text == swipes[0]


def _memories(proxy: Proxy, chat_id: str) -> dict[int | None, str] | None:
    """Every message's recap by message id, once every message has one (else None)."""
    messages: list[Message] = proxy.stored(chat_id).messages
    found = {m.id: get_memory(m) for m in messages}
    return found if all(found.values()) else None


def test_recaps_of_untouched_messages_survive_edits_and_deletions(
    start_proxy: StartProxy, upstream: Upstream, openai_client: MakeClient
) -> None:
    proxy = start_proxy(worker=True)
    client = openai_client(proxy.chat_url("recaps"))

    def ask(*history: dict[str, str]) -> dict[str, str]:
        completion = client.chat.completions.create(model=MODEL, messages=[SYSTEM, *history])
        return bot(completion.choices[0].message.content or "")

    u1 = user("Mira hides the stolen ledger under the captain's bunk.")
    u2 = user("Vos arrives at the docks demanding forty crowns.")
    u3 = user("We pay Vos twenty crowns and promise the rest by spring.")
    r1 = ask(u1)
    r2 = ask(u1, r1, u2)
    r3 = ask(u1, r1, u2, r2, u3)
    before = wait_until(lambda: _memories(proxy, "recaps"), timeout=15, what="the first recaps")
    assert len(before) == 6
    chat = proxy.stored("recaps")
    (i1, j1, i2, j2, i3, j3) = ids(chat)

    # Edit u2: its recap is made again; every other message keeps its recap.
    u2_edited = user("Vos arrives at the docks with six armed men, demanding eighty crowns.")
    ask(u1, r1, u2_edited, r2, u3, r3, user("We run for the ship."))

    def edit_recapped() -> dict[int | None, str] | None:
        found = _memories(proxy, "recaps")
        return found if found and len(found) == 8 and found[i2] != before[i2] else None

    after_edit = wait_until(edit_recapped, timeout=15, what="the edited message's new recap")
    for kept in (i1, j1, j2, i3, j3):
        assert after_edit[kept] == before[kept]

    # Delete everything after u2: what is left keeps its recaps.
    ask(u1, r1, u2_edited)
    after_delete = wait_until(
        lambda: (found := _memories(proxy, "recaps")) and len(found) == 4 and found,
        timeout=15,
        what="the recaps after the deletion",
    )
    assert list(after_delete)[:3] == [i1, j1, i2]
    for kept in (i1, j1, i2):
        assert after_delete[kept] == after_edit[kept]
    # Recaps were made offline: the upstream saw only the client's five chat completions.
    assert [r.path for r in upstream.requests] == ["/v1/chat/completions"] * 5


# --- 7. errors -----------------------------------------------------------------------------------

ERRORS = [
    pytest.param(
        400,
        b'{"error": {"message": "model \\"x\\" not found", "type": "invalid_request_error"}}',
        "application/json",
        id="400-json",
    ),
    pytest.param(429, b'{"error": {"message": "slow down"}}', "application/json", id="429"),
    pytest.param(503, b"upstream overloaded, try later\n", "text/plain; charset=utf-8", id="503"),
]


@pytest.mark.parametrize(("status", "body", "content_type"), ERRORS)
def test_an_upstream_error_comes_back_unchanged(
    status: int,
    body: bytes,
    content_type: str,
    proxy: Proxy,
    upstream: Upstream,
    openai_client: MakeClient,
    http: httpx.Client,
) -> None:
    for _ in range(3):
        upstream.error(status, body, content_type)
    client = openai_client(proxy.chat_url("errors"))
    with pytest.raises(openai.APIStatusError) as raised:
        client.chat.completions.create(model=MODEL, messages=[SYSTEM, user("Hello?")])
    assert raised.value.status_code == status
    assert raised.value.response.content == body

    url = f"{proxy.chat_url('errors')}/chat/completions"
    request = {"model": MODEL, "messages": [SYSTEM, user("Hello?")]}
    response = http.post(url, json=request)
    assert (response.status_code, response.content) == (status, body)
    assert response.headers["content-type"] == content_type
    with http.stream("POST", url, json={**request, "stream": True}) as streamed:
        assert streamed.status_code == status
        assert streamed.read() == body
    assert len(upstream.chat_requests) == 3
    # No reply was recorded.
    assert texts(proxy.stored("errors")) == ["Hello?"]


@pytest.mark.parametrize(
    "content",
    [
        b'{"model": "loopback-7b"}',
        b'{"model": "loopback-7b", "messages": []}',
        b'{"model": "loopback-7b", "messages": "hello"}',
        b'{"model": "loopback-7b", "messages": ["hello"]}',
        b"[1, 2]",
        b"this is not json",
    ],
)
def test_a_request_without_messages_is_a_400(
    content: bytes, proxy: Proxy, upstream: Upstream, http: httpx.Client
) -> None:
    response = http.post(
        f"{proxy.url}/chat/completions",
        content=content,
        headers={"Content-Type": "application/json"},
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert isinstance(error["message"], str)
    assert error["message"]
    assert upstream.requests == []


def test_an_unreachable_upstream_is_a_502(
    start_proxy: StartProxy, dead_url: str, http: httpx.Client, openai_client: MakeClient
) -> None:
    proxy = start_proxy(upstream_url=dead_url)
    request = {"model": MODEL, "messages": [SYSTEM, user("Anyone there?")]}
    for body in (request, {**request, "stream": True}):
        response = http.post(f"{proxy.url}/chat/completions", json=body)
        assert response.status_code == 502
        assert "cannot be reached" in response.json()["error"]["message"]
    assert http.get(f"{proxy.url}/models").status_code == 502
    with pytest.raises(openai.APIStatusError) as raised:
        openai_client(proxy.url).chat.completions.create(
            model=MODEL, messages=[SYSTEM, user("Anyone there?")]
        )
    assert raised.value.status_code == 502


# --- 8. other routes pass through ----------------------------------------------------------------


def test_models_and_completions_pass_through(
    proxy: Proxy, upstream: Upstream, http: httpx.Client, openai_client: MakeClient
) -> None:
    for base in (proxy.url, proxy.chat_url("any")):
        assert http.get(f"{base}/models").content == MODELS_BODY
        request = {"model": MODEL, "prompt": "Once upon a time", "max_tokens": 5}
        response = http.post(f"{base}/completions", json=request)
        assert (response.status_code, response.content) == (200, COMPLETION_BODY)
        assert upstream.last.path == "/v1/completions"
        assert upstream.last.json == request
    client = openai_client(proxy.url)
    assert [model.id for model in client.models.list()] == [MODEL]
    completion = client.completions.create(model=MODEL, prompt="Once upon a time")
    assert completion.choices[0].text == " and so it began."
    assert proxy.chat_ids() == []  # nothing here is a chat


# --- 9. a client that hangs up ------------------------------------------------------------------


def test_a_client_that_disconnects_cancels_the_upstream_call(
    proxy: Proxy, upstream: Upstream, http: httpx.Client, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="autorecap")
    upstream.stream([f"word{n} " for n in range(20)], delay=0.5)
    body = {"model": MODEL, "messages": [SYSTEM, user("Tell me a long story.")], "stream": True}
    with http.stream("POST", f"{proxy.chat_url('hangup')}/chat/completions", json=body) as r:
        assert r.status_code == 200
        first = next(r.iter_raw())
        assert first.startswith(b"data: ")
    # The client hung up after one chunk: the upstream's writes start failing soon.
    log = upstream.streams[-1]
    assert log.broken.wait(5), f"the upstream kept streaming ({len(log.writes)} chunks written)"
    assert len(log.writes) < 20
    # The proxy is still fine.
    assert post_chat(http, proxy.chat_url("after"), [SYSTEM, user("Still there?")])
    # Closing the upstream connection for a client that left is not the upstream failing.
    assert not [r for r in caplog.records if "the upstream at" in r.getMessage()]


# --- 10. no LLM call on the reply path -----------------------------------------------------------


def test_the_upstream_only_sees_the_clients_chat_completions(
    start_proxy: StartProxy, upstream: Upstream, http: httpx.Client
) -> None:
    proxy = start_proxy(worker=True)  # recap_backend="offline" by default
    base = proxy.chat_url("quiet")
    sent = [
        [SYSTEM, user("The storm breaks over the bay.")],
        [SYSTEM, user("The storm breaks over the bay."), bot("Reply 1."), user("We reef.")],
    ]
    for messages in sent:
        post_chat(http, base, messages)
    with http.stream(
        "POST",
        f"{base}/chat/completions",
        json={
            "model": MODEL,
            "messages": [*sent[1], bot("Reply 2."), user("Hold on!")],
            "stream": True,
        },
    ) as response:
        response.read()
    wait_until(
        lambda: (found := _memories(proxy, "quiet")) and len(found) == 6,
        timeout=15,
        what="the worker's recaps",
    )
    assert [(r.method, r.path) for r in upstream.requests] == [("POST", "/v1/chat/completions")] * 3
    assert [r.contents[-1] for r in upstream.requests] == [
        "The storm breaks over the bay.",
        "We reef.",
        "Hold on!",
    ]
