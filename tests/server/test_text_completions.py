"""`/v1/completions` (text completion) through the proxy: passed on unchanged without a chat,
with the named chat's memory at the top of the prompt, streamed chunk by chunk."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import openai

from autorecap.core import running
from autorecap.server.proxy.turns import ProxyChats
from tests.server.conftest import COMPLETION_BODY, Proxy, Upstream

MODEL = "loopback-7b"
RECAP = "The Heron left port at dawn; Jonah lost the map."

MakeClient = Callable[[str], openai.OpenAI]


def registry_of(proxy: Proxy) -> ProxyChats:
    registry: ProxyChats = proxy.server.config.app.state.registry
    return registry


def give_memory(proxy: Proxy, http: httpx.Client, chat_id: str) -> None:
    """A chat the proxy knows, with a running recap."""
    body = {"model": MODEL, "messages": [{"role": "user", "content": "We sail at dawn."}]}
    http.post(f"{proxy.chat_url(chat_id)}/chat/completions", json=body).raise_for_status()
    with registry_of(proxy).edit(chat_id) as session:
        running.add_version(
            session.chat,
            RECAP,
            scene_count=1,
            excluded_count=0,
            prev_scene_index=-1,
            new_scene_index=0,
            now_ms=0,
        )


def test_without_a_chat_the_request_and_the_answer_pass_unchanged(
    proxy: Proxy, upstream: Upstream, openai_client: MakeClient
) -> None:
    client = openai_client(proxy.url)
    completion = client.completions.create(model=MODEL, prompt="Once upon a tide", max_tokens=9)
    assert completion.choices[0].text == " and so it began."
    assert upstream.last.path == "/v1/completions"
    assert upstream.last.json == {"model": MODEL, "prompt": "Once upon a tide", "max_tokens": 9}


def test_a_named_chat_puts_its_memory_at_the_top_of_the_prompt_once(
    proxy: Proxy, upstream: Upstream, http: httpx.Client
) -> None:
    give_memory(proxy, http, "tale")
    url = f"{proxy.chat_url('tale')}/completions"
    answer = http.post(url, json={"model": MODEL, "prompt": "Mira: Onward."})
    assert answer.status_code == 200
    assert answer.content == COMPLETION_BODY
    memory = registry_of(proxy).memory_text("tale")  # the running recap through its template
    assert RECAP in memory
    assert upstream.last.json["prompt"] == f"{memory}\nMira: Onward."
    # A prompt that already carries the memory gets nothing more.
    carried = f"{memory}\nMira: Onward."
    http.post(url, json={"model": MODEL, "prompt": carried}).raise_for_status()
    assert upstream.last.json["prompt"] == carried
    # The header names the chat as well as the path does.
    http.post(
        f"{proxy.url}/completions",
        json={"model": MODEL, "prompt": "Jonah: Where to?"},
        headers={"X-Autorecap-Chat": "tale"},
    ).raise_for_status()
    assert upstream.last.json["prompt"] == f"{memory}\nJonah: Where to?"


def test_an_unknown_chat_or_a_disabled_memory_adds_nothing(
    proxy: Proxy, upstream: Upstream, http: httpx.Client
) -> None:
    http.post(
        f"{proxy.chat_url('never-seen')}/completions", json={"model": MODEL, "prompt": "Hi."}
    ).raise_for_status()
    assert upstream.last.json["prompt"] == "Hi."
    assert not registry_of(proxy).known("never-seen")  # a text prompt creates no chat
    give_memory(proxy, http, "quiet")
    registry = registry_of(proxy)
    with registry.edit("quiet") as session:
        session.set_enabled(False)
    http.post(
        f"{proxy.chat_url('quiet')}/completions", json={"model": MODEL, "prompt": "Hi."}
    ).raise_for_status()
    assert upstream.last.json["prompt"] == "Hi."


def test_a_streamed_text_completion_is_relayed_byte_for_byte(
    proxy: Proxy, upstream: Upstream, http: httpx.Client
) -> None:
    body = {"model": MODEL, "prompt": "Once", "stream": True}
    with http.stream("POST", f"{proxy.url}/completions", json=body) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        received = b"".join(response.iter_raw())
    assert received == b"".join(upstream.streams[-1].writes)
    assert b"[DONE]" in received


def test_bad_bodies_get_the_error_shape(proxy: Proxy, http: httpx.Client) -> None:
    response = http.post(f"{proxy.url}/completions", content=b"{not json")
    assert response.status_code == 400
    assert "not JSON" in response.json()["error"]["message"]
    response = http.post(f"{proxy.url}/completions", json=["a", "list"])
    assert response.status_code == 400
    assert "JSON object" in response.json()["error"]["message"]
