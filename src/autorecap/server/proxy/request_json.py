"""Chat completion requests as bytes: parsing them, finding their messages without parsing them,
and splicing the outgoing request from the client's own bytes.

A frontend sends the whole history (200 KB for 1,000 messages) with every request. Parsing it
into Python objects and writing it out again is most of what a proxy would spend per request.
So the proxy finds where each message of the `messages` array begins and ends (`layout`), and
when a chat's next request repeats the previous one byte for byte and adds to it, only the new
bytes are parsed; the outgoing request is the client's bytes with the hidden messages cut out
and the memory's messages put in (`splice`).
"""

from __future__ import annotations

import json
import re
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from autorecap.errors import AutorecapError

_WS = re.compile(rb"[ \t\n\r]*")
_STRING = rb'"[^"\\]*(?:\\.[^"\\]*)*"'
_STRING_RE = re.compile(_STRING)
_PLAIN = rb'[^"{}\[\]]*'
_SKIP = re.compile(_PLAIN + rb"(?:" + _STRING + _PLAIN + rb")*")
"""Strings and everything that is not a bracket: what lies between two brackets."""
_FLAT = re.compile(rb'\{[^"{}\[\]]*(?:' + _STRING + rb'[^"{}\[\]]*)*\}')
"""An object with no object or array inside (most messages): matched in one go."""
_SEPARATOR = re.compile(rb"[ \t\n\r]*([,\]])[ \t\n\r]*")
_SCALAR = re.compile(rb"[-+0-9.eE]+|true|false|null")
_OPEN = frozenset(b"{[")
_CLOSE = frozenset(b"}]")
_OBJECT = ord("{")


class RequestError(AutorecapError):
    """A request body the proxy cannot read."""

    http_status = 400


def _ws(raw: bytes, pos: int) -> int:
    """The offset of the first byte at or after `pos` that is not JSON whitespace."""
    found = _WS.match(raw, pos)
    return found.end() if found is not None else pos


def loads(raw: bytes | str) -> Any:
    """JSON in: orjson, or the standard library for what orjson refuses (lone surrogates)."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        try:
            return json.loads(raw)
        except RecursionError:  # nested deeper than orjson's limit too: no chat request is
            raise ValueError("JSON nested too deeply") from None


def dumps(value: Any) -> bytes:
    """JSON out, the same way round (orjson refuses lone surrogates and huge integers)."""
    try:
        return orjson.dumps(value)
    except TypeError:
        return json.dumps(value).encode()


def parse_body(raw: bytes) -> dict[str, Any]:
    """A request body as a JSON object (a `RequestError` otherwise)."""
    try:
        body = loads(raw)
    except ValueError:
        raise RequestError("the request body is not JSON") from None
    if not isinstance(body, dict):
        raise RequestError("the request body must be a JSON object")
    return body


@dataclass
class Layout:
    """Where the `messages` array of a request lies in its bytes."""

    opening: int
    """Offset of its `[`."""
    starts: array[int]
    """Offset of each message's `{` (an array of machine integers, not a list: a thousand
    small objects kept per chat would be walked by each young garbage collection)."""
    ends: array[int]
    """Offset just past each message's `}`."""
    close: int
    """Offset of its `]`."""
    head: dict[str, Any]
    """The body's other fields that come before it."""


def layout(raw: bytes) -> Layout | None:
    """The layout of a valid JSON request body (already parsed: this does not validate), or
    None when it is not one object with one `messages` array of objects."""
    pos = _first_field(raw)
    found: Layout | None = None
    head: dict[str, Any] = {}
    while pos >= 0:
        field = _field_at(raw, pos)
        if field is None:
            return None
        key, pos = field
        if key == "messages":
            if found is not None or raw[pos : pos + 1] != b"[":
                return None  # a second `messages`, or one that is not an array
            elements = elements_of(raw, pos)
            if elements is None:
                return None
            starts, ends, close = elements
            found = Layout(pos, starts, ends, close, dict(head))
            end = close + 1
        else:
            end = _value_end(raw, pos)
            if end < 0:
                return None
            if found is None:
                head[key] = loads(raw[pos:end])
        pos = _ws(raw, end)
        mark = raw[pos : pos + 1]
        if mark == b"}":
            return found
        if mark != b",":
            return None
        pos = _ws(raw, pos + 1)
    return None


def _first_field(raw: bytes) -> int:
    """The offset of a body's first field, -1 when the body is not an object."""
    pos = _ws(raw, 0)
    return _ws(raw, pos + 1) if raw[pos : pos + 1] == b"{" else -1


def _field_at(raw: bytes, pos: int) -> tuple[Any, int] | None:
    """The key of the object field at `pos`, and the offset of its value."""
    key_match = _STRING_RE.match(raw, pos)
    if key_match is None:
        return None
    colon = _ws(raw, key_match.end())
    if raw[colon : colon + 1] != b":":
        return None
    return loads(key_match.group()), _ws(raw, colon + 1)


def elements_of(raw: bytes, opening: int) -> tuple[array[int], array[int], int] | None:
    """(starts, ends, offset of the closing `]`) of the objects in the array that opens at
    `opening`; None when an element is not an object or the array does not close."""
    pos = _ws(raw, opening + 1)
    if raw[pos : pos + 1] == b"]":
        return array("q"), array("q"), pos
    return _elements_from(raw, pos)


def elements_after(raw: bytes, end: int) -> tuple[array[int], array[int], int] | None:
    """`elements_of` for the rest of an array, after an element that ends at `end`."""
    after = _SEPARATOR.match(raw, end)
    if after is None:
        return None
    if after.group(1) == b"]":
        return array("q"), array("q"), after.start(1)
    return _elements_from(raw, after.end())


def _elements_from(raw: bytes, pos: int) -> tuple[array[int], array[int], int] | None:
    starts: array[int] = array("q")
    ends: array[int] = array("q")
    flat = _FLAT.match
    separator = _SEPARATOR.match
    while True:
        if pos >= len(raw) or raw[pos] != _OBJECT:
            return None
        found = flat(raw, pos)
        end = found.end() if found is not None else _value_end(raw, pos)
        if end < 0:
            return None
        starts.append(pos)
        ends.append(end)
        after = separator(raw, end)
        if after is None:
            return None
        if after.group(1) == b"]":
            return starts, ends, after.start(1)
        pos = after.end()


def tail_fields(raw: bytes, close: int) -> dict[str, Any] | None:
    """The body's fields after the `messages` array that closes at `close`, parsed (None
    when what follows is not the rest of a JSON object)."""
    pos = _ws(raw, close + 1)
    mark = raw[pos : pos + 1]
    if mark == b"}":
        return {} if not raw[pos + 1 :].strip(b" \t\n\r") else None
    if mark != b",":
        return None
    first = _ws(raw, pos + 1)
    if raw[first : first + 1] != b'"':
        return None  # `,}` is no JSON, though `{` + `}` would be
    try:
        fields = orjson.loads(b"{" + raw[pos + 1 :])
    except orjson.JSONDecodeError:
        return None
    return fields if isinstance(fields, dict) else None


def _value_end(raw: bytes, pos: int) -> int:
    """Offset just past the JSON value at `pos` (-1 when it does not end)."""
    first = raw[pos : pos + 1]
    if first == b'"':
        found = _STRING_RE.match(raw, pos)
        return found.end() if found is not None else -1
    if first and first[0] not in _OPEN:
        scalar = _SCALAR.match(raw, pos)
        return scalar.end() if scalar is not None else -1
    depth = 0
    size = len(raw)
    skip = _SKIP.match
    while pos < size:
        mark = raw[pos]
        if mark in _OPEN:
            depth += 1
        elif mark in _CLOSE:
            depth -= 1
            if depth == 0:
                return pos + 1
        else:  # an unterminated string
            return -1
        found = skip(raw, pos + 1)
        pos = found.end() if found is not None else pos + 1
    return -1


def opening_elements(raw: bytes, leading: Callable[[Any], bool]) -> list[Any] | None:
    """The first messages of a request, parsed, up to and including the first for which
    `leading` is false (a chat's fingerprint is made of the system messages and the first
    other one), without reading the rest; None when the body is not laid out as expected
    (the caller parses it whole)."""
    pos = _first_field(raw)
    while pos >= 0:
        field = _field_at(raw, pos)
        if field is None:
            return None
        key, pos = field
        if key == "messages":
            return _first_elements(raw, pos, leading)
        end = _value_end(raw, pos)
        if end < 0:
            return None
        pos = _ws(raw, end)
        if raw[pos : pos + 1] != b",":
            return None
        pos = _ws(raw, pos + 1)
    return None


def _first_elements(raw: bytes, opening: int, leading: Callable[[Any], bool]) -> list[Any] | None:
    if raw[opening : opening + 1] != b"[":
        return None
    found: list[Any] = []
    pos = _ws(raw, opening + 1)
    while pos < len(raw) and raw[pos] == _OBJECT:
        end = _value_end(raw, pos)
        if end < 0:
            return None
        try:
            element = loads(raw[pos:end])
        except ValueError:
            return None
        found.append(element)
        if not leading(element):
            return found
        after = _SEPARATOR.match(raw, end)
        if after is None or after.group(1) != b",":
            return found
        pos = after.end()
    return found if found else None


def splice(
    raw: bytes,
    opening: int,
    close: int,
    starts: Sequence[int],
    ends: Sequence[int],
    items: Sequence[int | dict[str, Any]],
) -> bytes:
    """The request `raw` with its `messages` array made of `items`: an int is the client's
    message at that index (its bytes, as sent), a dict a message of ours. Runs of the client's
    consecutive messages are copied as one slice."""
    kinds = list(map(type, items))
    parts: list[bytes] = []
    at = 0
    while at < len(items):
        try:
            stop = kinds.index(dict, at)
        except ValueError:
            stop = len(items)
        if stop > at:
            _runs(raw, starts, ends, items[at:stop], parts)
        if stop < len(items):
            parts.append(dumps(items[stop]))
        at = stop + 1
    return b"".join((raw[: opening + 1], b",".join(parts), raw[close:]))


def _runs(
    raw: bytes,
    starts: Sequence[int],
    ends: Sequence[int],
    indexes: Sequence[Any],
    parts: list[bytes],
) -> None:
    """The client's messages `indexes` (ascending), as few slices of `raw` as they allow."""
    first, last = indexes[0], indexes[-1]
    if last - first == len(indexes) - 1:  # no gap: one slice (the usual case)
        parts.append(raw[starts[first] : ends[last]])
        return
    run_start = first
    previous = first
    for index in indexes[1:]:
        if index != previous + 1:
            parts.append(raw[starts[run_start] : ends[previous]])
            run_start = index
        previous = index
    parts.append(raw[starts[run_start] : ends[previous]])
