"""The proxy's upstream client: proxies from the environment, and an upstream that fails (broken
off mid-answer, refusing connections, silent past the timeout) or quotes the server's key in its
answer. Through a real proxy (uvicorn on 127.0.0.1) and a real loopback upstream that
misbehaves as scripted."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import httpx
import openai
import pytest
from hypothesis import given
from hypothesis import strategies as st

from autorecap.core.data import get_memory
from autorecap.server.proxy.key_mask import KeyMask

from .conftest import Proxy, StartProxy, Upstream

SYSTEM = {"role": "system", "content": "You are Mira, captain of the Heron."}
KEY_VARIABLE = "AUTORECAP_TEST_CANARY_KEY"
CANARY = "sk-canary-7f3a9c2e51d84b06"


def request(text: str, *, stream: bool) -> dict[str, object]:
    return {
        "model": "m",
        "messages": [SYSTEM, {"role": "user", "content": text}],
        "stream": stream,
    }


def server_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name.startswith(("autorecap", "uvicorn"))]


# --- proxies from the environment ------------------------------------------------------------


def test_http_proxy_and_no_proxy_from_the_environment_are_followed(
    start_proxy: StartProxy,
    upstream: Upstream,
    http: httpx.Client,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The loopback upstream stands in for a forward proxy: a request sent through a proxy names
    # its whole URL on the request line. The upstream's own host does not resolve, so nothing
    # but the proxy can answer.
    origin = upstream.url.removesuffix("/v1")
    monkeypatch.setenv("HTTP_PROXY", origin)
    monkeypatch.setenv("NO_PROXY", "")
    through = start_proxy(upstream_url="http://llm.invalid:8080/v1")
    upstream.reply("Through the proxy.")
    answer = http.post(
        f"{through.chat_url('p')}/chat/completions", json=request("Hi", stream=False)
    )
    assert answer.status_code == 200
    assert upstream.last.path == "http://llm.invalid:8080/v1/chat/completions"
    # NO_PROXY names the host: reached directly, so the unresolvable name fails.
    monkeypatch.setenv("NO_PROXY", "llm.invalid")
    direct = start_proxy(upstream_url="http://llm.invalid:8080/v1")
    answer = http.post(f"{direct.chat_url('q')}/chat/completions", json=request("Hi", stream=False))
    assert answer.status_code == 502
    assert "llm.invalid" in answer.json()["error"]["message"]


# --- an upstream that breaks off ------------------------------------------------------------


def test_a_stream_that_breaks_off_ends_with_an_error_event_and_a_clean_end(
    proxy: Proxy, upstream: Upstream, http: httpx.Client
) -> None:
    upstream.stream(["Mira ", "looks ", "up."], break_after=2)
    with http.stream(
        "POST", f"{proxy.chat_url('broken')}/chat/completions", json=request("Status?", stream=True)
    ) as answer:
        assert answer.status_code == 200
        body = answer.read()  # the stream ends properly: no error reading it to its end
    events = [e for e in body.decode().split("\n\n") if e.strip()]
    assert events[-1] == "data: [DONE]"
    error = json.loads(events[-2].removeprefix("data: "))["error"]
    assert error["code"] == 502
    assert error["type"] == "upstream_error"
    assert "broke off" in error["message"]
    assert upstream.url.split("/v1")[0] in error["message"]
    assert b"Mira " in body
    assert b"looks " in body
    # The half answer is not recorded as the reply: the chat ends with the user's message.
    stored = proxy.stored("broken")
    assert [m.text for m in stored.messages] == ["Status?"]


def test_the_official_client_raises_the_break_as_an_api_error(
    proxy: Proxy, upstream: Upstream, openai_client: object
) -> None:
    upstream.stream(["Mira ", "looks ", "up."], break_after=1)
    client = openai.OpenAI(base_url=proxy.url, api_key="test", max_retries=0, timeout=20)
    try:
        stream = client.chat.completions.create(
            model="m",
            messages=[SYSTEM, {"role": "user", "content": "Status?"}],  # type: ignore[list-item]
            stream=True,
        )
        with pytest.raises(openai.APIError, match="broke off"):
            for _ in stream:
                pass
    finally:
        client.close()


def test_a_whole_answer_that_breaks_off_is_a_502_in_the_error_shape(
    proxy: Proxy, upstream: Upstream, http: httpx.Client
) -> None:
    upstream.broken_reply("Mira looks up from the charts and sighs.")
    answer = http.post(
        f"{proxy.chat_url('half')}/chat/completions", json=request("Status?", stream=False)
    )
    assert answer.status_code == 502
    error = answer.json()["error"]
    assert error["code"] == 502
    assert "broke off its answer" in error["message"]
    assert "ClientPayloadError" in error["message"]


@pytest.mark.parametrize(
    ("body", "content_type", "stream"),
    [
        pytest.param(b"<!doctype html><title>Open WebUI</title>", "text/html", False, id="page"),
        pytest.param(b"<html><body>Welcome</body></html>", "text/html", True, id="page-stream"),
        pytest.param(b'{"choices": [{"message": ', "application/json", False, id="cut-json"),
    ],
)
def test_a_success_that_is_no_api_answer_is_a_502_that_says_what_to_check(
    body: bytes,
    content_type: str,
    stream: bool,
    proxy: Proxy,
    upstream: Upstream,
    http: httpx.Client,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # An upstream URL that names a site instead of its API answers 200 with its home page.
    caplog.set_level(logging.INFO)
    upstream.error(200, body, content_type)
    answer = http.post(
        f"{proxy.chat_url('site')}/chat/completions", json=request("Hello?", stream=stream)
    )
    assert answer.status_code == 502
    message = answer.json()["error"]["message"]
    assert content_type in message
    assert "ending in /v1" in message
    assert [m.text for m in proxy.stored("site").messages] == ["Hello?"]  # no reply kept
    assert any("upstream" in r.getMessage() for r in server_records(caplog))
    upstream.reply("Mira nods.")  # the next answer that is one is relayed and kept
    answer = http.post(
        f"{proxy.chat_url('site')}/chat/completions", json=request("Hello?", stream=False)
    )
    assert answer.json()["choices"][0]["message"]["content"] == "Mira nods."


# --- expected failures are one log line ------------------------------------------------------


def test_expected_failures_are_one_log_line_each_without_a_traceback(
    start_proxy: StartProxy,
    upstream: Upstream,
    dead_url: str,
    http: httpx.Client,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    refused = start_proxy(upstream_url=dead_url)
    answer = http.post(
        f"{refused.chat_url('refused-chat')}/chat/completions", json=request("Hello?", stream=False)
    )
    assert answer.status_code == 502
    upstream.stream(["Mira ", "looks ", "up."], break_after=1)
    working = start_proxy()
    with http.stream(
        "POST",
        f"{working.chat_url('broken-chat')}/chat/completions",
        json=request("Status?", stream=True),
    ) as streamed:
        streamed.read()
    slow = start_proxy(timeout_s=0.3)
    upstream.stream(["Mira ", "thinks."], delay=2.0)
    with http.stream(
        "POST",
        f"{slow.chat_url('silent-chat')}/chat/completions",
        json=request("Well?", stream=True),
    ) as streamed:
        assert b'"upstream_error"' in streamed.read()
    for proxy in (refused, working, slow):
        proxy.settled()
    records = server_records(caplog)
    assert not [r for r in records if r.exc_info], "a traceback was logged"
    assert not [r for r in records if r.levelno >= logging.ERROR]
    failures = [r for r in records if "the upstream at" in r.getMessage()]
    by_chat = {
        chat: [r.getMessage() for r in failures if repr(chat) in r.getMessage()]
        for chat in ("refused-chat", "broken-chat", "silent-chat")
    }
    assert all(len(lines) == 1 for lines in by_chat.values()), by_chat
    assert "ClientConnectorError" in by_chat["refused-chat"][0]
    assert "broke off" not in by_chat["broken-chat"][0]  # the log says what failed, plainly
    assert "streamed answer" in by_chat["broken-chat"][0]
    assert "Timeout" in by_chat["silent-chat"][0]


# --- the server's key, quoted by the upstream ------------------------------------------------


def test_a_key_quoted_across_chunks_reaches_neither_the_client_nor_the_store(
    start_proxy: StartProxy,
    upstream: Upstream,
    http: httpx.Client,
    db_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv(KEY_VARIABLE, CANARY)
    proxy = start_proxy(api_key_env=KEY_VARIABLE)
    # The key split over three events, and cut inside an event's JSON as well.
    upstream.stream(["Your key: sk-can", "ary-7f3a9c2e", "51d84b06. Keep it safe."])
    with http.stream(
        "POST", f"{proxy.chat_url('leak')}/chat/completions", json=request("Key?", stream=True)
    ) as sent:
        body = sent.read()
    upstream.reply(f"Whole answer with {CANARY} inside.")
    whole = http.post(
        f"{proxy.chat_url('leak')}/chat/completions", json=request("Again?", stream=False)
    ).content
    assert upstream.last.headers["authorization"] == f"Bearer {CANARY}"  # it was used
    for seen in (body, whole):
        assert CANARY.encode() not in seen
        assert b"***" in seen
    reply = "".join(
        json.loads(e[6:])["choices"][0]["delta"].get("content", "")
        for e in body.decode().split("\n\n")
        if e.startswith("data: {")
    )
    assert reply == "Your key: ***. Keep it safe."
    stored = proxy.stored("leak")
    texts = [m.text for m in stored.messages] + [get_memory(m) for m in stored.messages]
    assert not [t for t in texts if CANARY in t]
    assert any("***" in t for t in texts)
    proxy.stop()
    for path in db_path.parent.iterdir():
        if path.is_file():
            assert CANARY.encode() not in path.read_bytes(), path.name
    assert not [r for r in caplog.records if CANARY in r.getMessage()]


@given(
    st.lists(st.sampled_from(["sk-", "key", "s", "k", "-", "x", " ", "sk-key"]), max_size=12),
    st.lists(st.integers(min_value=0, max_value=40), max_size=6),
)
def test_the_key_mask_blanks_the_key_however_the_stream_is_cut(
    words: list[str], cuts: list[int]
) -> None:
    text = "".join(words).encode()
    mask = KeyMask(b"sk-key")
    points = sorted({min(c, len(text)) for c in cuts})
    pieces = [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True)]
    shown = b"".join(mask.feed(piece) for piece in pieces) + mask.flush()
    assert shown == text.replace(b"sk-key", b"***")
