"""Recognising a chat's next request cheaply (the fast path).

A frontend sends the whole history with every request: the previous request's messages, the
reply it got, and the new message. Parsing 200 KB of JSON, matching 1,000 messages and writing
them out again is most of what the proxy would cost per request. So the proxy remembers each
chat's last request (`Echo`): its bytes, where each message lies in them
(`proxy.request_json`), and the stored messages they matched. When the next request begins
with exactly the same bytes (one comparison) and no stored message it matched was changed
meanwhile (the chat's change listener says which were), only the bytes after them are parsed
and reconciled (`repeat_of`), and the outgoing request is the client's bytes with the hidden
messages cut out and the memory put in.

Prompts after the newest message (SillyTavern's post-history instructions, in every request)
are left out of what is remembered and put back after everything. Anything unusual (a system
message among the messages, an edit in the middle, another JSON layout, a context size to fit)
takes the full path, which gives the same result; a property test compares the two.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from operator import methodcaller
from typing import Any

import orjson

from autorecap.core.model import Chat, Message
from autorecap.core.prompt import assemble_messages
from autorecap.core.reconcile import ClientMessage, Op, Plan, plan
from autorecap.core.slots import ExtensionPrompts
from autorecap.server.proxy.matching import ProxyError, as_client_messages, stored_pairs
from autorecap.server.proxy.request_json import Layout, elements_after, layout, splice, tail_fields

_TEXT = methodcaller("get", "mes")
"""A stored message's `mes` (mapped over whole chats: C-level calls, no Python loop)."""


@dataclass
class Echo:
    """A chat's last reconciled request, and the stored messages its history matched: the
    request's element `lead + i` is stored message `i`, for every `i < history`."""

    chat: Chat
    raw: bytes
    layout: Layout
    lead: int
    """The leading system messages (the main prompt)."""
    system: list[ClientMessage]
    messages: list[Message]
    """The stored messages matched by the history (held: their `id()`s stay theirs)."""
    where: dict[int, int]
    """`id()` of each of them -> its index."""
    texts: list[Any]
    """Their `mes` when matched (a message edited meanwhile changes it)."""
    hidden: set[int]
    """The indexes of those that are hidden."""
    visible: array[int]
    """The request elements of the others, ascending (`lead + i`): kept up to date as messages
    come, recomputed when one is hidden or shown."""
    shape: tuple[list[Message], int]
    """The chat's message list and its count of removals and moves (`MessageList.reshaped`)
    when `messages` were its first items: while both are the same, they still are."""

    @property
    def history(self) -> int:
        return len(self.messages)


def remember(chat: Chat, raw: bytes, sent: list[Any], result: Plan) -> Echo | None:
    """What to keep of a request reconciled in full, when its history holds only user and
    assistant messages (after `result`'s operations, the stored chat begins with exactly
    them), any prompts come after all of them, and its bytes are laid out as `server.wire`
    expects."""
    lead = 0
    while lead < len(result.system) and result.system[lead].at == lead:
        lead += 1
    if lead != len(result.system):
        return None  # a system message inside the history carries our memory
    # Prompts after the newest message (post-history instructions) are the request's last
    # elements: the echo ends before them, the next request brings them again.
    after = len(result.prompts)
    ends_with_them = all(
        prompt.at == len(sent) - after + number and place == len(result.history)
        for number, (place, prompt) in enumerate(result.prompts)
    )
    if not ends_with_them:
        return None  # a prompt among the messages: the full path places it
    history = len(sent) - lead - after
    if history < 1 or len(result.history) != history or result.offset:
        return None  # (a window on the newest messages takes the full path)
    if any(m.role == "system" for m in result.history) or len(chat.messages) < history:
        return None
    found = layout(raw)
    if found is None or len(found.starts) != len(sent):
        return None
    if after:
        kept = len(sent) - after
        found = Layout(
            found.opening, found.starts[:kept], found.ends[:kept], found.close, found.head
        )
    matched = chat.messages[:history]
    hidden = {index for index, message in enumerate(matched) if message.get("is_system")}
    return Echo(
        chat,
        raw,
        found,
        lead,
        list(result.system),
        matched,
        {id(message): index for index, message in enumerate(matched)},
        list(map(_TEXT, matched)),
        hidden,
        _visible(lead, history, hidden),
        _shape(chat.messages),
    )


def _shape(messages: list[Message]) -> tuple[list[Message], int]:
    return messages, getattr(messages, "reshaped", -1)


def _lines_up(echo: Echo, stored: list[Message]) -> bool:
    """True when the chat's first messages are still the ones the echo matched: in O(1) when
    nothing was removed or moved since, else compared one by one."""
    matched = echo.history
    if len(stored) < matched:
        return False
    listed, reshaped = echo.shape
    if listed is stored and reshaped >= 0 and reshaped == getattr(stored, "reshaped", -1):
        return True
    return stored[:matched] == echo.messages


def _visible(lead: int, history: int, hidden: set[int]) -> array[int]:
    return array("q", (lead + index for index in range(history) if index not in hidden))


@dataclass
class Repeat:
    """A request that repeats its chat's last one (`echo`) and adds to it: what it adds,
    reconciled, and how to make the outgoing request once the plan is carried out."""

    echo: Echo
    raw: bytes
    starts: array[int]
    ends: array[int]
    close: int
    fields: dict[str, Any]
    """The body's fields besides `messages`."""
    plan: Plan
    after: int = 0
    """The request's last elements that are prompts after the newest message."""

    def outgoing(
        self, chat: Chat, slots: ExtensionPrompts, touched: dict[int, Message]
    ) -> tuple[bytes, Echo] | None:
        """The body to send upstream (after the plan's operations, `touched`: the messages
        changed since the echo), and the echo of this request; None when the stored chat does
        not line up with the request (the caller takes the full path)."""
        echo = self.echo
        matched = echo.history
        said = len(self.starts) - self.after  # the elements up to the newest message
        history = said - echo.lead
        stored = chat.messages
        if len(stored) < history:
            return None
        hidden = echo.hidden
        where = echo.where
        shown_or_hidden = False
        for message in touched.values():
            index = where.get(id(message))
            if index is None or bool(message.get("is_system")) == (index in hidden):
                continue
            if index in hidden:
                hidden.discard(index)
            else:
                hidden.add(index)
            shown_or_hidden = True
        added = stored[matched:history]
        lead = echo.lead
        for offset, message in enumerate(added):
            index = matched + offset
            where[id(message)] = index
            if message.get("is_system"):
                hidden.add(index)
            elif not shown_or_hidden:
                echo.visible.append(lead + index)
        echo.messages.extend(added)
        echo.shape = _shape(stored)  # the plan is carried out: they are its first messages
        echo.texts.extend(map(_TEXT, added))
        if shown_or_hidden:
            echo.visible = _visible(lead, history, hidden)
        slots = ExtensionPrompts() if self.plan.carries_injection else slots
        items = assemble_messages(list(range(lead)), echo.visible, slots)
        items.extend(range(said, len(self.starts)))  # the prompts after everything
        body = splice(self.raw, echo.layout.opening, self.close, self.starts, self.ends, items)
        echo.raw = self.raw
        echo.layout = Layout(
            echo.layout.opening,
            self.starts[:said],
            self.ends[:said],
            self.close,
            echo.layout.head,
        )
        return body, echo

    @property
    def stream(self) -> bool:
        return bool(self.fields.get("stream"))


def repeat_of(
    echo: Echo | None,
    chat: Chat,
    raw: bytes,
    injected: Sequence[str],
    touched: dict[int, Message],
) -> Repeat | None:
    """The request `raw`, when it repeats the chat's last request byte for byte and adds to
    it, with only what it adds reconciled; None when the full comparison is needed.
    `touched`: the chat's messages changed since the echo was made."""
    if echo is None or echo.chat is not chat:
        return None
    layout = echo.layout
    known = layout.ends[-1]
    if len(raw) <= known or not raw.startswith(memoryview(echo.raw)[:known]):  # no copy
        return None
    more = elements_after(raw, known)
    if more is None:
        return None
    new_starts, new_ends, close = more
    fields = tail_fields(raw, close)
    if fields is None or "messages" in fields:
        return None
    try:  # orjson alone: what it refuses (NaN, a lone surrogate) the full path sorts out
        elements = [
            orjson.loads(raw[start:end]) for start, end in zip(new_starts, new_ends, strict=True)
        ]
    except orjson.JSONDecodeError:
        return None
    count = len(layout.starts)
    try:
        added = as_client_messages(elements, at=count)
    except ProxyError:
        return None
    markers = [text.strip() for text in injected if text and text.strip()]
    after = 0  # prompts after the newest message (post-history instructions)
    while after < len(added) and added[len(added) - 1 - after].role == "system":
        after += 1
    prompts, added = added[len(added) - after :], added[: len(added) - after]
    if any(m.role == "system" for m in added):
        return None  # a system message among the messages: the full path sorts it out
    if any(marker in m.content for m in prompts for marker in markers):
        return None  # the client sends our memory back: the full path keeps it out
    matched = echo.history
    stored = chat.messages
    if not _lines_up(echo, stored):
        return None  # a stored message was removed or replaced meanwhile
    for message in touched.values():
        index = echo.where.get(id(message))
        if index is not None and message.get("mes") != echo.texts[index]:
            return None  # edited meanwhile: the client's text wins, the full path says how
    carries = any(marker in m.content for m in echo.system for marker in markers)
    tail = plan(stored_pairs(stored[matched:]), added, generating=True)
    result = Plan(
        system=echo.system,
        history=[],  # not needed: the outgoing request is made from the client's own bytes
        ops=[_shifted(op, matched) for op in tail.ops],
        regenerate=None if tail.regenerate is None else tail.regenerate + matched,
        carries_injection=carries,
    )
    starts = layout.starts + new_starts
    ends = layout.ends + new_ends
    return Repeat(echo, raw, starts, ends, close, {**layout.head, **fields}, result, after)


def _shifted(op: Op, by: int) -> Op:
    return op if op.index < 0 else Op(op.kind, op.index + by, op.message)
