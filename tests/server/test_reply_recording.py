"""The reply is recorded after the client has it, so other requests can come first: it still
lands where the client's conversation puts it, and every turn is saved and closed, whatever
happened to the answer (review findings, each failed before its fix)."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from fastapi.testclient import TestClient

from autorecap.server.app import ServerConfig, create_app
from autorecap.server.proxy.turns import ProxyChats
from tests.server.test_echo_fast_path import BASE_SETTINGS, make_registry

CHAT = "late-replies"
SYSTEM = {"role": "system", "content": "You are Mira."}


def said(role: str, text: str) -> dict[str, str]:
    return {"role": role, "content": text}


def request(*messages: dict[str, str]) -> bytes:
    return orjson.dumps({"model": "m", "messages": [SYSTEM, *messages]})


@pytest.fixture(params=[True, False], ids=["fast", "full"])
def registry(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ProxyChats]:
    made = make_registry(tmp_path, "late", BASE_SETTINGS, fast=request.param)
    try:
        yield made
    finally:
        made.close()
        made.store.close()


def texts(registry: ProxyChats) -> list[tuple[str, Any]]:
    return [(m["mes"], m.get("swipes")) for m in registry.chat(CHAT).messages]


def test_a_reply_is_kept_when_an_old_message_is_deleted_during_its_generation(
    registry: ProxyChats,
) -> None:
    first = registry.begin(CHAT, request(said("user", "u1")))
    registry.finish(first, "a1")
    turn = registry.begin(
        CHAT, request(said("user", "u1"), said("assistant", "a1"), said("user", "u2"))
    )
    with registry.edit(CHAT) as session:  # the user deletes the first message in the web UI
        session.delete_message(0)
    registry.finish(turn, "a2")
    assert [text for text, _ in texts(registry)] == ["a1", "u2", "a2"]


def test_a_regeneration_sent_before_the_first_answer_was_recorded_becomes_its_swipe(
    registry: ProxyChats,
) -> None:
    opening = request(said("user", "u1"))
    first = registry.begin(CHAT, opening)  # answered "a1", not recorded yet
    second = registry.begin(CHAT, opening)  # the user swipes for another answer
    registry.finish(first, "a1")
    registry.finish(second, "a2")
    assert texts(registry) == [("u1", None), ("a2", ["a1", "a2"])]


def test_the_same_answer_to_a_request_answered_again_adds_no_swipe_and_no_recap(
    registry: ProxyChats,
) -> None:
    """The same request answered again after the first answer was saved (a retry, or the same
    request sent to two servers, the second reading the first's save): the same answer
    changes nothing, and its recap is not queued again."""
    registry.queue_recaps = True
    opening = request(said("user", "u1"))
    registry.finish(registry.begin(CHAT, opening), "a1")
    while (job := registry.queue.claim()) is not None:  # its recap made (the work not needed)
        registry.queue.complete(job)
    registry.finish(registry.begin(CHAT, opening), "a1")
    _, (reply, swipes) = texts(registry)
    assert (reply, swipes or ["a1"]) == ("a1", ["a1"])  # no second swipe of the same text
    jobs = registry.queue.list(chat_id=CHAT)
    targets = [job.target for job in jobs if job.kind == "message_recap"]
    assert targets
    assert sorted(targets) == sorted(set(targets))
    # Another answer to it still becomes a swipe.
    registry.finish(registry.begin(CHAT, opening), "a2")
    assert texts(registry) == [("u1", None), ("a2", ["a1", "a2"])]


def test_a_reply_the_next_request_already_carried_is_not_recorded_twice(
    registry: ProxyChats,
) -> None:
    first = registry.begin(CHAT, request(said("user", "u1")))
    second = registry.begin(
        CHAT, request(said("user", "u1"), said("assistant", "a1"), said("user", "u2"))
    )
    registry.finish(first, "a1")  # late: the second request brought it already
    registry.finish(second, "a2")
    assert [text for text, _ in texts(registry)] == ["u1", "a1", "u2", "a2"]


def test_a_reply_the_client_moved_on_without_is_not_kept(registry: ProxyChats) -> None:
    first = registry.begin(CHAT, request(said("user", "u1")))
    second = registry.begin(CHAT, request(said("user", "u1"), said("user", "u1, again")))
    registry.finish(first, "a1")  # the client did not wait for it: not in its conversation
    registry.finish(second, "a2")
    assert [text for text, _ in texts(registry)] == ["u1", "u1, again", "a2"]


# --- an upstream that breaks off a stream ---------------------------------------------------------


def breaking_upstream(chunk: bytes, *, clean: bool = False) -> tuple[str, socket.socket]:
    """A loopback upstream that answers every request with one SSE chunk and then closes the
    connection without ending the chunked body (`clean`: after ending it)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.settimeout(10)

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(10)
                data = b""
                while b"\r\n\r\n" not in data:
                    data += conn.recv(65536)
                head, _, rest = data.partition(b"\r\n\r\n")
                length = next(
                    int(line.split(b":")[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length")
                )
                while len(rest) < length:
                    rest += conn.recv(65536)
                conn.sendall(
                    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                    b"Transfer-Encoding: chunked\r\n\r\n"
                    + b"%x\r\n" % len(chunk)
                    + chunk
                    + b"\r\n"
                    + (b"0\r\n\r\n" if clean else b"")
                )

    threading.Thread(target=serve, daemon=True).start()
    return f"http://127.0.0.1:{server.getsockname()[1]}/v1", server


@pytest.mark.parametrize(
    ("chunk", "kept"),
    [
        (b'data: {"choices":[{"delta":{"content":"Hel"}}]}\n\n', ["Ahoy."]),
        (
            b'data: {"choices":[{"delta":{"content":"Hello"},"finish_reason":"stop"}]}\n\n'
            b"data: [DONE]\n\n",
            ["Ahoy.", "Hello"],  # the reply was whole before the connection broke
        ),
    ],
    ids=["broken-mid-reply", "broken-after-done"],
)
@pytest.mark.parametrize("clean", [False, True], ids=["cut", "ended"])
def test_a_stream_the_upstream_breaks_off_still_closes_its_turn(
    tmp_path: Path, chunk: bytes, kept: list[str], clean: bool
) -> None:
    """A stream that ends before its [DONE] or finish_reason, cut or cleanly ended, is no
    reply: the turn closes without one."""
    url, server = breaking_upstream(chunk, clean=clean)
    app = create_app(ServerConfig(upstream=url, db=tmp_path / "p.db", worker=False))
    try:
        with TestClient(app, raise_server_exceptions=False) as client:
            body = {"model": "m", "stream": True, "messages": [said("user", "Ahoy.")]}
            # The client may see the broken body (not the point here).
            with contextlib.suppress(Exception):
                client.post("/c/mira/v1/chat/completions", json=body)
            registry: ProxyChats = app.state.registry
            registry.flush(timeout=10)
            assert registry._open_turns == 0  # settled: saved, jobs queued, flush not stuck
            assert [m["mes"] for m in registry.chat("mira").messages] == kept
    finally:
        server.close()


def test_with_several_choices_streamed_the_first_is_the_reply(tmp_path: Path) -> None:
    """`n` = 2, streamed: the two choices' chunks come interleaved, each with its index; the
    reply recorded is the first choice's, as it is without streaming."""

    def chunk(index: int, text: str) -> bytes:
        choice = {"index": index, "delta": {"content": text}}
        return b"data: " + orjson.dumps({"choices": [choice]}) + b"\n\n"

    stream = (
        chunk(0, "Fair ")
        + chunk(1, "Foul ")
        + chunk(0, "winds.")
        + chunk(1, "weather.")
        + b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
        + b"data: [DONE]\n\n"
    )
    url, server = breaking_upstream(stream, clean=True)
    app = create_app(ServerConfig(upstream=url, db=tmp_path / "p.db", worker=False))
    try:
        with TestClient(app, raise_server_exceptions=False) as client:
            body = {"model": "m", "stream": True, "n": 2, "messages": [said("user", "Ahoy.")]}
            client.post("/c/mira/v1/chat/completions", json=body)
            registry: ProxyChats = app.state.registry
            registry.flush(timeout=10)
            assert [m["mes"] for m in registry.chat("mira").messages] == ["Ahoy.", "Fair winds."]
    finally:
        server.close()
