"""Requests as bytes (`server.wire`): every message found where it lies, whatever JSON writer
made the request, and outgoing requests spliced from those bytes that parse as expected."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autorecap.server.proxy.request_json import (
    RequestError,
    elements_after,
    layout,
    opening_elements,
    parse_body,
    splice,
    tail_fields,
)

WRITERS: dict[str, Callable[[Any], bytes]] = {
    "orjson": orjson.dumps,
    "json": lambda value: json.dumps(value).encode(),
    "json-indent": lambda value: json.dumps(value, indent=2, ensure_ascii=False).encode(),
    "json-tight": lambda value: json.dumps(value, separators=(",", ":")).encode(),
    "json-tabs": lambda value: json.dumps(value, indent="\t").encode() + b"\r\n",
}

tricky = st.text(alphabet=st.sampled_from(list('ab {}[]",:\\\n\t\u00e9\U0001f600')), max_size=12)
texts = st.one_of(st.text(max_size=40), tricky)
parts = st.lists(
    st.one_of(
        st.builds(lambda t: {"type": "text", "text": t}, texts),
        st.just({"type": "image_url", "image_url": {"url": "data:image/png;base64,AAA="}}),
    ),
    min_size=1,
    max_size=3,
)
messages = st.lists(
    st.fixed_dictionaries(
        {"role": st.sampled_from(["system", "user", "assistant", "tool"])},
        optional={
            "content": st.one_of(texts, parts, st.none()),
            "name": texts,
            "tool_calls": st.just([{"id": "c1", "function": {"name": "f", "arguments": "{}"}}]),
        },
    ),
    min_size=1,
    max_size=8,
)
others = st.dictionaries(
    st.sampled_from(["model", "stream", "temperature", "stop", "extra_body", "n", "mes{sages"]),
    st.one_of(
        st.booleans(),
        st.none(),
        st.integers(-5, 10**6),
        st.floats(-2, 2, allow_nan=False),
        texts,
        st.lists(texts, max_size=2),
        st.dictionaries(texts, st.integers(-(2**53), 2**53), max_size=2),
    ),
    max_size=4,
)


def body_with(fields: dict[str, Any], items: list[dict[str, Any]], at: int) -> dict[str, Any]:
    """A request body with `messages` as its field number `at` (key order is the writer's)."""
    pairs = list(fields.items())
    at = min(at, len(pairs))
    return dict([*pairs[:at], ("messages", items), *pairs[at:]])


@settings(max_examples=300, deadline=None)
@given(
    fields=others,
    items=messages,
    at=st.integers(0, 4),
    writer=st.sampled_from(sorted(WRITERS)),
)
def test_every_message_is_found_where_it_lies(
    fields: dict[str, Any], items: list[dict[str, Any]], at: int, writer: str
) -> None:
    body = body_with(fields, items, at)
    raw = WRITERS[writer](body)
    found = layout(raw)
    assert found is not None
    assert raw[found.opening : found.opening + 1] == b"["
    assert raw[found.close : found.close + 1] == b"]"
    assert [orjson.loads(raw[s:e]) for s, e in zip(found.starts, found.ends, strict=True)] == items
    before = list(body)[: list(body).index("messages")]
    assert found.head == {key: body[key] for key in before}
    after = {key: value for key, value in body.items() if key not in before and key != "messages"}
    assert tail_fields(raw, found.close) == after
    for k in range(len(items)):  # the rest of the array, after any message
        rest = elements_after(raw, found.ends[k])
        assert rest == (found.starts[k + 1 :], found.ends[k + 1 :], found.close)


@settings(max_examples=300, deadline=None)
@given(
    fields=others,
    items=messages,
    writer=st.sampled_from(sorted(WRITERS)),
    data=st.data(),
)
def test_a_spliced_request_holds_the_chosen_messages_and_ours(
    fields: dict[str, Any], items: list[dict[str, Any]], writer: str, data: st.DataObject
) -> None:
    body = body_with(fields, items, 1)
    raw = WRITERS[writer](body)
    found = layout(raw)
    assert found is not None
    kept = sorted(data.draw(st.sets(st.integers(0, len(items) - 1))))
    chosen: list[int | dict[str, Any]] = list(kept)
    for _ in range(data.draw(st.integers(0, 3))):
        ours = {"role": "system", "content": data.draw(texts)}
        chosen.insert(data.draw(st.integers(0, len(chosen))), ours)
    out = splice(raw, found.opening, found.close, found.starts, found.ends, chosen)
    expected = [items[item] if isinstance(item, int) else item for item in chosen]
    assert orjson.loads(out) == {**body, "messages": expected}


@given(items=messages, writer=st.sampled_from(sorted(WRITERS)))
def test_the_opening_is_read_without_the_rest(items: list[dict[str, Any]], writer: str) -> None:
    raw = WRITERS[writer]({"model": "m", "messages": items, "stream": True})
    opening = opening_elements(raw, lambda item: item.get("role") == "system")
    count = next((i for i, m in enumerate(items) if m.get("role") != "system"), len(items) - 1)
    assert opening == items[: count + 1]


@pytest.mark.parametrize(
    "raw",
    [
        b'[{"role": "user"}]',  # not an object
        b'{"model": "m"}',  # no messages
        b'{"messages": {"role": "user"}}',  # not an array
        b'{"messages": [{"role": "user"}, "hi"]}',  # an element that is not an object
        b'{"messages": [{"role": "user"}], "messages": [{"role": "user"}]}',  # twice
        b'{"messages": [{"role": "user"}]',  # unterminated
    ],
)
def test_bodies_laid_out_otherwise_are_left_to_the_full_parse(raw: bytes) -> None:
    assert layout(raw) is None


def test_the_tail_must_be_the_rest_of_an_object() -> None:
    assert tail_fields(b'{"messages": [{}], "stream": true}', 16) == {"stream": True}
    assert tail_fields(b'{"messages": [{}],}', 16) is None
    assert tail_fields(b'{"messages": [{}]} x', 16) is None
    assert tail_fields(b'{"messages": [{}]}  \n', 16) == {}


def test_an_unreadable_body_is_a_400_that_says_what_is_wrong() -> None:
    with pytest.raises(RequestError, match="not JSON") as caught:
        parse_body(b"{nope")
    assert caught.value.http_status == 400
    with pytest.raises(RequestError, match="must be a JSON object"):
        parse_body(b"[1, 2]")
    assert parse_body(b'{"a": "\\ud800"}') == {"a": "\ud800"}  # a lone surrogate
