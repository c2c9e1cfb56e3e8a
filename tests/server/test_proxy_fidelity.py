"""What the client sends reaches the upstream whole: a message's other fields (a name, image
parts, tool calls) are sent on as they came, only hidden messages are left out and the memory
placed."""

from __future__ import annotations

import httpx

from tests.server.conftest import Proxy, Upstream

MODEL = "loopback-7b"


def test_fields_and_multi_part_contents_reach_the_upstream_unchanged(
    proxy: Proxy, upstream: Upstream, http: httpx.Client
) -> None:
    picture = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
    messages = [
        {"role": "system", "content": "You are Mira.", "name": "main"},
        {"role": "user", "content": [{"type": "text", "text": "Look at this map."}, picture]},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "read_map", "arguments": '{"x": 1}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "North: the Shoals."},
        {"role": "user", "content": "So?", "name": "Jonah"},
    ]
    body = {"model": MODEL, "messages": messages, "temperature": 0.3, "seed": 7}
    response = http.post(f"{proxy.chat_url('fidelity')}/chat/completions", json=body)
    assert response.status_code == 200
    sent = upstream.chat_requests[-1].json
    assert sent["messages"] == messages  # nothing to inject yet: the very same list
    assert sent["temperature"] == 0.3
    assert sent["seed"] == 7
    stored = proxy.stored("fidelity")
    assert [m.text for m in stored.messages][:2] == ["Look at this map.", ""]
