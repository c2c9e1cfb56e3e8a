"""Reading a chat completion request's messages, and recognising a chat's next request cheaply.

A frontend sends the whole history with every request: the previous request's messages, the
reply it got, and the new message. Reconciling 1,000 messages from scratch (a Python object per
message, a comparison per message) is most of what the proxy costs per request. So the proxy
remembers each chat's last request (`Echo`): when the new request begins with exactly the same
messages (one C-level list comparison) and the stored messages it matched still hold the same
texts, only the messages after it are reconciled (`fast_plan`), and the outgoing list is built
from the client's own message objects (`prompt.assemble_messages`).

Anything unusual (a system message inside the history, an edit in the middle, a context size to
fit) takes the full path, which gives the same result; a property test compares the two.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from operator import methodcaller
from typing import Any

from autorecap.core.model import NARRATOR_TYPE, Chat, Message
from autorecap.core.reconcile import ClientMessage, Op, Plan, plan
from autorecap.errors import AutorecapError

_TEXT = methodcaller("get", "mes")
"""A stored message's `mes` (mapped over whole chats: C-level calls, no Python loop)."""


class ProxyError(AutorecapError):
    """A request the proxy cannot make sense of."""

    http_status = 400


def request_messages(body: dict[str, Any]) -> list[Any]:
    """The request's `messages` list (an error when there is none)."""
    raw = body.get("messages")
    if not isinstance(raw, list) or not raw:
        raise ProxyError("the request has no `messages` list: send an OpenAI chat completion")
    return raw


def client_messages(
    body: dict[str, Any], *, start: int = 0, opening: bool = False
) -> list[ClientMessage]:
    """The request's messages as text (multi-part contents keep their text parts), from index
    `start`; `opening`: only up to the first message that is not a system message."""
    raw = request_messages(body)
    found: list[ClientMessage] = []
    for at in range(start, len(raw)):
        item = raw[at]
        if not isinstance(item, dict):
            raise ProxyError("every entry of `messages` must be an object with role and content")
        content = item.get("content")
        role = item.get("role")
        if type(content) is str and type(role) is str and role in _ROLES and "name" not in item:
            found.append(ClientMessage(role, content, "", at))
        else:
            if isinstance(content, list):  # [{"type": "text", "text": ...}, {"type": "image"}]
                content = "\n".join(
                    str(part["text"])
                    for part in content
                    if isinstance(part, dict) and "text" in part
                )
            found.append(
                ClientMessage(
                    _role(item.get("role", "user")),
                    str(content or ""),
                    str(item.get("name") or ""),
                    at,
                )
            )
        if opening and found[-1].role != "system":
            break
    return found


_ROLES = frozenset({"user", "assistant", "system"})


def _role(role: object) -> str:
    """The role as reconciliation sees it: user, assistant, or system for every other
    (`developer`, `tool`, a frontend's own): stored as narrator messages, compared as such."""
    return role if isinstance(role, str) and role in _ROLES else "system"


def fingerprint(messages: Sequence[ClientMessage]) -> str:
    """A chat id from a request's opening (the system prompt and the first history message),
    which stays the same for the chat's whole life."""
    system = next((m.content for m in messages if m.role == "system"), "")
    first = next((m.content for m in messages if m.role != "system"), "")
    digest = hashlib.sha256(f"{system}\x00{first}".encode("utf-8", "surrogatepass"))
    return f"fp-{digest.hexdigest()[:16]}"


def stored_pairs(messages: Sequence[Message]) -> list[tuple[str, str]]:
    """(role, text) of every stored message, as the client would send it (`_role` inlined:
    this runs over the whole chat when a request is reconciled in full)."""
    pairs = []
    for message in messages:
        text = message.get("mes")
        if type(text) is not str:
            text = message.text
        if message.get("is_user"):
            pairs.append(("user", text))
            continue
        extra = message.get("extra")
        narrator = type(extra) is dict and extra.get("type") == NARRATOR_TYPE
        pairs.append(("system" if narrator else "assistant", text))
    return pairs


@dataclass
class Echo:
    """A chat's last reconciled request: its messages as sent, and the texts of the stored
    messages they matched (the first `history` stored messages)."""

    chat: Chat
    sent: list[Any]
    lead: int
    """The leading system messages (the main prompt)."""
    ids: list[int]
    """`id()` of the stored messages matched by the request's history, once reconciled (a
    message deleted meanwhile shifts them, even when its neighbour has the same text)."""
    texts: list[Any]
    """Their `mes` (a message edited meanwhile changes it)."""

    @property
    def history(self) -> int:
        return len(self.sent) - self.lead


def remember(chat: Chat, sent: list[Any], result: Plan) -> Echo | None:
    """What to keep of a reconciled request, when its history holds only user and assistant
    messages (after `result`'s operations, the stored chat begins with exactly them)."""
    lead = 0
    while lead < len(result.system) and result.system[lead].at == lead:
        lead += 1
    if lead != len(result.system):
        return None  # a system message inside the history carries our memory
    history = len(sent) - lead
    if len(result.history) != history or any(m.role == "system" for m in result.history):
        return None
    if len(chat.messages) < history:
        return None
    matched = chat.messages[:history]
    return Echo(chat, sent, lead, list(map(id, matched)), list(map(_TEXT, matched)))


def extend(echo: Echo, chat: Chat, sent: list[Any]) -> Echo | None:
    """The echo of a request `fast_plan` reconciled (its operations applied): the texts
    already checked, and those of the stored messages it added."""
    history = len(sent) - echo.lead
    if len(chat.messages) < history:
        return None
    added = chat.messages[echo.history : history]
    return Echo(
        chat,
        sent,
        echo.lead,
        echo.ids + list(map(id, added)),
        echo.texts + list(map(_TEXT, added)),
    )


def fast_plan(
    echo: Echo | None, chat: Chat, sent: list[Any], injected: Sequence[str]
) -> Plan | None:
    """The plan for a request that repeats the chat's last request and adds to it, reconciling
    only what it adds; None when the full comparison is needed."""
    if echo is None or echo.chat is not chat:
        return None
    known = len(echo.sent)
    if len(sent) < known or sent[:known] != echo.sent:
        return None
    matched = echo.history
    stored = chat.messages
    if len(stored) < matched:
        return None
    kept = stored[:matched]
    if list(map(id, kept)) != echo.ids or list(map(_TEXT, kept)) != echo.texts:
        return None  # a stored message was edited or removed meanwhile
    added = client_messages({"messages": sent}, start=known)
    if any(m.role == "system" for m in added):
        return None  # a system message inside the history: the full path sorts it out
    system = client_messages({"messages": sent[: echo.lead]}) if echo.lead else []
    markers = [text.strip() for text in injected if text and text.strip()]
    carries = any(marker in m.content for m in system for marker in markers)
    tail = plan(stored_pairs(stored[matched:]), added, generating=True)
    return Plan(
        system=system,
        history=[],  # not needed: the outgoing list is made from the client's own messages
        ops=[_shifted(op, matched) for op in tail.ops],
        regenerate=None if tail.regenerate is None else tail.regenerate + matched,
        carries_injection=carries,
    )


def _shifted(op: Op, by: int) -> Op:
    return op if op.index < 0 else Op(op.kind, op.index + by, op.message)
