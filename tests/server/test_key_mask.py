"""The upstream key masked out of streamed completions (`server.proxy.key_mask`), event by
event, however the network cuts the stream."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from autorecap.server.proxy.key_mask import LONGEST_EVENT, StreamKeyMask

KEY = "sk-live-2f9c41"
PIECES = ["sk-", "live", "-2f9c", "41", " ", "ok", "s", "k", KEY]


def event(content: str, *, finish: str | None = None, index: int = 0) -> bytes:
    chunk = {
        "id": "c1",
        "object": "chat.completion.chunk",
        "choices": [{"index": index, "delta": {"content": content}, "finish_reason": finish}],
    }
    return b"data: " + json.dumps(chunk, separators=(",", ":")).encode() + b"\n\n"


def stream_of(deltas: list[str]) -> bytes:
    body = b"".join(event(d) for d in deltas[:-1]) + event(deltas[-1], finish="stop")
    return body + b"data: [DONE]\n\n"


def text_of(body: bytes) -> str:
    parts = []
    for block in body.decode().split("\n\n"):
        if block.startswith("data: {"):
            for choice in json.loads(block[6:])["choices"]:
                parts.append(choice.get("delta", {}).get("content") or "")
    return "".join(parts)


def relay(body: bytes, cuts: list[int]) -> bytes:
    mask = StreamKeyMask(KEY.encode())
    points = sorted({min(c, len(body)) for c in cuts})
    pieces = [body[a:b] for a, b in zip([0, *points], [*points, len(body)], strict=True)]
    return b"".join(mask.feed(piece) for piece in pieces) + mask.flush()


@given(
    st.lists(
        st.sampled_from(["sk-", "live", "-2f9c", "41", " ", "ok", "s", "k", "sk-live-2f9c41"])
    ),
    st.lists(st.integers(min_value=0, max_value=2000), max_size=8),
)
def test_the_key_never_shows_however_the_deltas_and_the_network_cut_it(
    deltas: list[str], cuts: list[int]
) -> None:
    deltas = [*deltas, "."]
    shown = relay(stream_of(deltas), cuts)
    assert KEY.encode() not in shown
    assert text_of(shown) == "".join(deltas).replace(KEY, "***")
    assert shown.endswith(b"data: [DONE]\n\n")


def test_a_stream_without_the_key_passes_byte_for_byte() -> None:
    body = stream_of(["Mira looks ", "up from the ", "charts."])
    assert relay(body, [5, 77, 200]) == body


def test_events_ended_by_crlf_are_masked_too() -> None:
    body = stream_of(["Key: sk-li", "ve-2f9c41 done"]).replace(b"\n\n", b"\r\n\r\n")
    shown = relay(body, [40])
    assert KEY.encode() not in shown
    assert b"***" in shown


def test_a_stream_that_is_not_events_is_not_held_back() -> None:
    mask = StreamKeyMask(KEY.encode())
    line = b'{"text": "' + b"x" * 1000 + b'"}\n'
    passed = b"".join(mask.feed(line) for _ in range(LONGEST_EVENT // len(line) + 2))
    assert passed  # given on once it cannot be one event, not kept to the end


def test_events_go_on_whole_and_a_broken_off_half_event_is_dropped() -> None:
    for key in (b"", KEY.encode()):  # with or without a key to mask
        mask = StreamKeyMask(key)
        first = event("Mira looks ")
        assert mask.feed(first + b'data: {"choices":[{"index":0,"delta":{"con') == first
        assert mask.flush(broken=True) == b""


def test_reasoning_deltas_are_masked_too() -> None:
    chunks = [
        b'data: {"choices":[{"index":0,"delta":{"reasoning":"the key is sk-li"}}]}\n\n',
        b'data: {"choices":[{"index":0,"delta":{"reasoning":"ve-2f9c41."}}]}\n\n',
        b"data: [DONE]\n\n",
    ]
    mask = StreamKeyMask(KEY.encode())
    shown = b"".join(mask.feed(c) for c in chunks) + mask.flush()
    assert KEY.encode() not in shown
    assert b"***" in shown
