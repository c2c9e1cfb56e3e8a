"""Keeping the server's upstream key out of what the upstream answers.

An upstream that refuses a key quotes it in its error, and a model can be talked into repeating
what it was sent. So every answer is masked before the client or the store sees it: the key
becomes `***` wherever it appears in the bytes (`KeyMask`, across network chunks too), and in a
streamed completion also where the model writes it over several events' deltas
(`StreamKeyMask`): the end of a delta that could be the start of the key waits for the next
delta, and the events around it are rewritten with the same text in total (so a delta that
merely ends with the key's first letters moves them to the next event). A stream of events is
passed on whole events at a time, so that a stream broken off mid-event leaves no half event
before the error event (`flush(broken=True)` drops it).
"""

from __future__ import annotations

import json
import re
from typing import Any, AnyStr

MASK = "***"
LONGEST_EVENT = 1 << 20
"""An event not ended after this many bytes is not one: passed on, masked as bytes only."""
_EVENT_END = re.compile(rb"\r\n\r\n|\n\n|\r\r")
_FIELDS = ("content", "reasoning_content", "reasoning", "refusal")
"""The delta fields a chat completion chunk streams text in (`text` for text completions)."""


def _kept(text: AnyStr, key: AnyStr) -> int:
    """The length of the longest end of `text` that is the start of `key` (and not all of it)."""
    for size in range(min(len(key) - 1, len(text)), 0, -1):
        if text.endswith(key[:size]):
            return size
    return 0


class KeyMask:
    """Blanks `key` out of bytes fed in chunks: the tail of a chunk that could be the start of
    the key is held back until the next chunk says whether it is."""

    def __init__(self, key: bytes) -> None:
        self.key = key
        self._held = b""

    def feed(self, chunk: bytes) -> bytes:
        if not self.key:
            return chunk
        data = (self._held + chunk).replace(self.key, MASK.encode())
        keep = _kept(data, self.key)
        self._held = data[len(data) - keep :]
        return data[: len(data) - keep]

    def flush(self, *, broken: bool = False) -> bytes:
        """What is held back, at the stream's end (bytes have no half events to drop)."""
        held, self._held = self._held, b""
        return held


class StreamKeyMask:
    """`KeyMask` for a server-sent-events stream of completion chunks, which also blanks the
    key out of the text the deltas add up to (see the module docstring)."""

    def __init__(self, key: bytes) -> None:
        self.key = key.decode("utf-8", "replace")
        self._bytes = KeyMask(key)
        self._partial = b""
        """The start of an event whose end has not come yet."""
        self._held: dict[tuple[int, str], str] = {}
        """Text held back per (choice, field): it may be the start of the key."""
        self._template: dict[str, Any] | None = None
        """The last chunk seen, for an event that carries held text out at the end."""

    def feed(self, chunk: bytes) -> bytes:
        data = self._partial + self._bytes.feed(chunk)
        out: list[bytes] = []
        start = 0
        for end in _EVENT_END.finditer(data):
            event = data[start : end.end()]
            out.append(self._event(event) if self.key else event)
            start = end.end()
        self._partial = data[start:]
        if len(self._partial) > LONGEST_EVENT:  # not server-sent events after all: no waiting
            out.append(self._partial)
            self._partial = b""
        return b"".join(out)

    def flush(self, *, broken: bool = False) -> bytes:
        """What is left when the stream ends: held text first, then any unfinished event
        (dropped when the stream `broken` off: half an event is not one)."""
        rest = self._partial + self._bytes.flush()
        self._partial = b""
        return self._release() + (b"" if broken else rest)

    def _event(self, event: bytes) -> bytes:
        payload = event.strip()
        if not payload.startswith(b"data:"):
            return event
        body = payload[5:].strip()
        if body == b"[DONE]":
            return self._release() + event
        try:
            chunk = json.loads(body)
        except ValueError:
            return event
        if not isinstance(chunk, dict) or not isinstance(chunk.get("choices"), list):
            return event
        self._template = chunk
        changed = False
        for choice in chunk["choices"]:
            if isinstance(choice, dict):
                changed |= self._choice(choice)
        if not changed:
            return event
        return b"data: " + json.dumps(chunk, ensure_ascii=False).encode() + b"\n\n"

    def _choice(self, choice: dict[str, Any]) -> bool:
        """Mask one choice's text in place (True when it changed)."""
        index = choice.get("index", 0)
        index = index if isinstance(index, int) else 0
        delta = choice.get("delta")
        places: list[tuple[dict[str, Any], str]] = []
        if isinstance(delta, dict):
            places += [(delta, name) for name in _FIELDS]
        if "text" in choice:
            places.append((choice, "text"))
        finished = choice.get("finish_reason") is not None
        changed = False
        for holder, name in places:
            value = holder.get(name)
            held = self._held.pop((index, name), "")
            if not isinstance(value, str):
                if held:  # the field is not in this chunk: the held text waits on
                    self._held[(index, name)] = held
                continue
            text = (held + value).replace(self.key, MASK)
            keep = 0 if finished else _kept(text, self.key)
            if keep:
                self._held[(index, name)] = text[-keep:]
                text = text[:-keep]
            if text != value:
                holder[name] = text
                changed = True
        if finished:  # nothing comes after: what is held is not the key
            for (held_index, name), held in list(self._held.items()):
                if held_index == index and isinstance(delta, dict) and name in _FIELDS:
                    delta[name] = str(delta.get(name) or "") + held
                    del self._held[(held_index, name)]
                    changed = True
        return changed

    def _release(self) -> bytes:
        """Held text as an event of its own (the stream ends without more text)."""
        if not self._held:
            return b""
        template = self._template or {}
        choices: dict[int, dict[str, Any]] = {}
        for (index, name), held in self._held.items():
            choice = choices.setdefault(index, {"index": index, "finish_reason": None})
            if name == "text":
                choice["text"] = held
            else:
                choice.setdefault("delta", {})[name] = held
        self._held.clear()
        chunk = {k: v for k, v in template.items() if k not in ("choices", "usage")}
        chunk["choices"] = list(choices.values())
        return b"data: " + json.dumps(chunk, ensure_ascii=False).encode() + b"\n\n"
