"""Which chat a request belongs to, and its messages as reconciliation reads them.

A request names its chat by the path (`/c/{chat}/v1/...`) or the `X-Autorecap-Chat` header; a
request that names none belongs to the chat its opening identifies (`fingerprint`: the system
prompt and the first history message, the same for a chat's whole life). May import `core`,
`errors` and `server.proxy.request_json`.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import Any

from autorecap.core.model import NARRATOR_TYPE, Message
from autorecap.core.reconcile import ClientMessage
from autorecap.errors import AutorecapError

HEADER_CHAT = "x-autorecap-chat"
"""The header a client names its chat with (the path's `/c/{chat}/` does the same)."""


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
    return as_client_messages(request_messages(body), start=start, opening=opening)


def as_client_messages(
    items: Sequence[Any], *, start: int = 0, at: int = 0, opening: bool = False
) -> list[ClientMessage]:
    """`client_messages` of a list of message objects; `at` is the index of `items[0]` in
    the request."""
    found: list[ClientMessage] = []
    for index in range(start, len(items)):
        item = items[index]
        if not isinstance(item, dict):
            raise ProxyError("every entry of `messages` must be an object with role and content")
        content = item.get("content")
        role = item.get("role")
        if type(content) is str and type(role) is str and role in _ROLES and "name" not in item:
            found.append(ClientMessage(role, content, "", at + index))
        else:
            if isinstance(content, list):  # [{"type": "text", "text": ...}, {"type": "image"}]
                content = "\n".join(
                    str(part["text"])
                    for part in content
                    if isinstance(part, dict) and "text" in part
                )
            found.append(
                ClientMessage(
                    role_of(item.get("role", "user")),
                    str(content or ""),
                    str(item.get("name") or ""),
                    at + index,
                )
            )
        if opening and found[-1].role != "system":
            break
    return found


_ROLES = frozenset({"user", "assistant", "system"})


def role_of(role: object) -> str:
    """The role as reconciliation sees it: user, assistant, or system for every other
    (`developer`, `tool`, a frontend's own): stored as narrator messages, compared as such."""
    return role if isinstance(role, str) and role in _ROLES else "system"


_SPEAKER_ASKED = re.compile(r"\bWrite [^\n]{1,80}?['’]s? next (?:reply|response|message)")
"""SillyTavern's main prompt names whose reply comes next: in a group chat, another character
each turn."""


def steady(system: str) -> str:
    """A system prompt without what changes from turn to turn in the same chat (the name of
    the group character who speaks next)."""
    return _SPEAKER_ASKED.sub("Write the next reply", system)


def fingerprint(messages: Sequence[ClientMessage], *, settled: bool = True) -> str:
    """A chat id from a request's opening (the system prompt, `steady`, and the first history
    message), which stays the same for the chat's whole life. `settled=False`: the id as it
    was made before `steady` (chats stored then keep it)."""
    system = next((m.content for m in messages if m.role == "system"), "")
    system = steady(system) if settled else system
    first = next((m.content for m in messages if m.role != "system"), "")
    digest = hashlib.sha256(f"{system}\x00{first}".encode("utf-8", "surrogatepass"))
    return f"fp-{digest.hexdigest()[:16]}"


def stored_pairs(messages: Sequence[Message]) -> list[tuple[str, str]]:
    """(role, text) of every stored message, as the client would send it (`role_of` inlined:
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
