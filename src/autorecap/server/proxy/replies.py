"""Where a reply goes in its chat, and its text as the upstream sent it (whole or streamed).

The reply is recorded after the client has it, and other requests may have changed the chat
meanwhile: it goes right after the message it answers (usually the last one), as a new swipe
of a regenerated message, or nowhere when the client has moved on without it.
"""

from __future__ import annotations

import json
import logging

from autorecap.core.model import Message
from autorecap.session import Session

log = logging.getLogger("autorecap.server")


def place_reply(
    session: Session, reply: str, *, after: Message | None, regenerate: int | None
) -> Message | None:
    """Record `reply` where it goes, now that other requests may have changed the chat since
    its turn began: usually right after `after`, the message it follows (the last one when
    the turn began), or as a new swipe of `after` when the turn was a regeneration."""
    chat_id = session.chat.id
    messages = session.chat.messages
    anchor = _position(messages, after) if after is not None else -1
    if regenerate is not None:
        if anchor is None:
            log.info("chat %r: the regenerated reply is gone, new answer not kept", chat_id)
            return None
        place = anchor
    else:
        if anchor is None or anchor == len(messages) - 1:  # its predecessor gone: at the end
            return session.receive(reply)
        place = anchor + 1
        if messages[place].is_user or messages[place].is_narrator:
            # The client's next request came first, without this reply: its list is the truth.
            log.info("chat %r moved on without the reply: not kept", chat_id)
            return None
    if messages[place].text.strip() == reply.strip():
        # The same answer is there already: the client's next request carried it, or the same
        # request was answered on two servers, the second after the first had saved. Nothing
        # changes: no swipe, and no recap to redo.
        return None
    return session.swipe(place, text=reply)  # another answer for the same place


def _position(messages: list[Message], wanted: Message | None) -> int | None:
    """The index of the message object `wanted`, searched from the end (where it usually
    is); None when it is no longer there."""
    for index in range(len(messages) - 1, -1, -1):
        if messages[index] is wanted:
            return index
    return None


def reply_text(content: bytes) -> str:
    """The reply's text from a whole chat completion."""
    try:
        data = json.loads(content)
        message = data["choices"][0]["message"]
        return str(message.get("content") or "")
    except (ValueError, KeyError, IndexError, TypeError):
        return ""


def streamed_text(content: bytes) -> str:
    """The reply's text from a server-sent-events stream of chat completion chunks: the first
    choice's (with `n` > 1, the chunks of the choices come interleaved, each with its
    `index`)."""
    parts: list[str] = []
    for line in content.decode("utf-8", "replace").splitlines():
        if not line.startswith("data:"):
            continue
        payload = line[5:].strip()
        if payload == "[DONE]":
            break
        try:
            choices = json.loads(payload)["choices"]
            deltas = [c.get("delta") for c in choices if c.get("index", 0) == 0]
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            continue
        for delta in deltas:
            text = delta.get("content") if isinstance(delta, dict) else None
            if isinstance(text, str):
                parts.append(text)
    return "".join(parts)
