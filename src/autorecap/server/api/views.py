"""What the REST API's routes share: opening a chat for a request, and how messages, scenes and
running recap versions look as JSON (docs/API.md)."""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from autorecap.core import running
from autorecap.core.autohide import MARK
from autorecap.core.data import INCLUDED, get_data, get_memory
from autorecap.core.model import Chat, Message
from autorecap.core.names import cast_of, character_key_of, character_name_of, user_name_of
from autorecap.core.pins import is_pinned
from autorecap.core.scenes import (
    BREAK_CAUSES,
    Scene,
    break_indexes,
    is_break,
    recap_versions,
    scene_name,
)
from autorecap.profiles import Profiles
from autorecap.server.access import Scope
from autorecap.server.api.errors import NotFoundError
from autorecap.server.chats.registry import ChatRegistry
from autorecap.session import Session
from autorecap.settings import chat_enabled


def unknown_chat(chat: str) -> NotFoundError:
    """The one answer for a chat this key does not have: unknown, or another key's."""
    return NotFoundError(
        f"no chat {chat!r}: GET /api/chats lists your chats, POST /api/chats imports one",
        field="chat",
    )


@contextmanager
def open_chat(
    scope: Scope, registry: ChatRegistry, chat: str, *, flush: bool = False
) -> Iterator[Session]:
    """The chat's shared session with its lock held; what changed is saved on the way out.
    With `flush`, changes the proxy has not saved yet are saved first (new messages get their
    store ids, which jobs need)."""
    internal = scope.internal(chat)
    with registry.hold(internal):
        if not registry.store.has_chat(internal):
            raise unknown_chat(chat)
        if flush:
            with registry.edit(internal):
                pass
        with registry.edit(internal) as session:
            yield session


def message_at(session: Session, index: int) -> Message:
    """Message `index` of the session's chat (404 when there is none)."""
    count = len(session.chat.messages)
    if not 0 <= index < count:
        raise NotFoundError(
            f"no message {index}: the chat has {count} message(s)"
            + (f", 0 to {count - 1}" if count else "")
            + "; GET .../messages lists them",
            field="index",
        )
    return session.chat.messages[index]


def break_at(session: Session, index: int) -> Message:
    """The message at `index`, which must end a scene (404 otherwise)."""
    message = message_at(session, index)
    if not is_break(message):
        raise NotFoundError(
            f"message {index} is not a scene break: GET .../scenes lists the scenes and where "
            "they end (break_index)",
            field="index",
        )
    return message


# --- chats -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ChatFacts:
    """What a chat summary reads from the chat itself."""

    messages: int
    character: str
    user: str
    character_key: str | None
    running_versions: int


def chat_facts(chat: Chat) -> ChatFacts:
    cast = cast_of(chat)
    return ChatFacts(
        len(chat.messages),
        ", ".join(cast) if len(cast) > 1 else character_name_of(chat),  # a group: its cast
        user_name_of(chat),
        character_key_of(chat),
        len(running.versions(chat)),
    )


def chat_summary(
    external: str, internal: str, facts: ChatFacts, updated_at: float | None, profiles: Profiles
) -> dict[str, Any]:
    """`{"id", "messages", "character", "user", "updated_at", "enabled", "running_versions"}`;
    `enabled` is read from the owner's settings as they are now."""
    settings = profiles.settings_for(internal, facts.character_key)
    return {
        "id": external,
        "messages": facts.messages,
        "character": facts.character,
        "user": facts.user,
        "updated_at": updated_at,
        "enabled": chat_enabled(settings, internal),
        "running_versions": facts.running_versions,
    }


# --- messages ------------------------------------------------------------------------------------


class SceneNames:
    """Names of scene breaks ("Scene 3 (40-61)" when unnamed), finding the breaks only when a
    name needs them: a page of messages does not walk the whole chat otherwise."""

    def __init__(self, messages: Sequence[Message]) -> None:
        self._messages = messages
        self._breaks: list[int] | None = None

    def name(self, index: int) -> str:
        message = self._messages[index]
        named = get_data(message, "scene_break_name")
        if named:
            return str(named)
        if self._breaks is None:
            self._breaks = break_indexes(self._messages)
        number = bisect.bisect_left(self._breaks, index)
        start = self._breaks[number - 1] + 1 if number else 0
        return scene_name(message, number, start, index)


def message_status(message: Message) -> str:
    """`included` (in short-term memory), `excluded` (excluded, or a recap that did not fit),
    `error` (the last recap failed) or `none`."""
    if get_data(message, "include") == INCLUDED:
        return "included"
    if get_data(message, "exclude"):
        return "excluded"
    if get_data(message, "error"):
        return "error"
    return "excluded" if get_memory(message) else "none"


def message_json(messages: Sequence[Message], index: int, names: SceneNames) -> dict[str, Any]:
    """One message as the API shows it (docs/API.md, "A `Message`")."""
    message = messages[index]
    swipes = message.swipes
    error = get_data(message, "error")
    return {
        "index": index,
        "name": message.name,
        "is_user": message.is_user,
        "is_system": message.is_system,
        "is_narrator": message.is_narrator,
        "hidden": message.is_hidden,
        "auto_hidden": bool(get_data(message, MARK)),
        "text": message.text,
        "send_date": message.get("send_date"),
        "swipe_id": message.swipe_id,
        "swipes": len(swipes) if swipes is not None else 0,
        "recap": get_memory(message) or None,
        "status": message_status(message),
        "error": str(error) if error else None,
        "exclude": bool(get_data(message, "exclude")),
        "remember": is_pinned(message),
        "edited": bool(get_data(message, "edited")),
        "scene_break": break_json(message, names.name(index)) if is_break(message) else None,
    }


def break_cause(message: Message) -> str | None:
    """Why the break is there (`BREAK_CAUSES`); None for breaks from before causes were kept
    (or from SillyTavern)."""
    cause = get_data(message, "scene_break_cause")
    return cause if cause in BREAK_CAUSES else None


def break_json(message: Message, name: str) -> dict[str, Any]:
    versions = recap_versions(message)
    selected = get_data(message, "scene_recap_current_index")
    return {
        "name": name,
        "visible": get_data(message, "scene_break_visible") is not False,
        "cause": break_cause(message),
        "recap": str(get_data(message, "scene_recap_memory") or "") or None,
        "versions": len(versions),
        "selected": selected if isinstance(selected, int) and versions else None,
    }


# --- scenes and the running recap ----------------------------------------------------------------


def scene_json(messages: Sequence[Message], scene: Scene) -> dict[str, Any]:
    """One scene; the open scene (after the last break) has no break, recap or versions."""
    last = messages[scene.end]
    versions = recap_versions(last) if scene.closed else []
    selected = get_data(last, "scene_recap_current_index") if scene.closed else None
    return {
        "number": scene.number,
        "name": scene.name,
        "start": scene.start,
        "end": scene.end,
        "break_index": scene.end if scene.closed else None,
        "closed": scene.closed,
        "visible": get_data(last, "scene_break_visible") is not False if scene.closed else None,
        "cause": break_cause(last) if scene.closed else None,
        "recap": scene.recap or None,
        "versions": versions,
        "selected": selected if isinstance(selected, int) and versions else None,
    }


def running_json(chat: Chat) -> dict[str, Any]:
    """`{"selected", "versions"}`, newest version first."""
    current = running.current(chat)
    breaks = break_indexes(chat.messages)
    return {
        "selected": current.get("version") if current is not None else None,
        "versions": [version_json(v, breaks) for v in reversed(running.versions(chat))],
    }


def version_json(version: dict[str, Any], breaks: Sequence[int]) -> dict[str, Any]:
    """A running recap version as stored, plus the scenes it covers (their break indexes)."""
    end = version.get("new_scene_index")
    stamp = version.get("timestamp")
    covered = [b for b in breaks if b <= end] if isinstance(end, int) and end >= 0 else []
    return {
        **version,
        "content": str(version.get("content") or ""),
        "scenes": covered,
        "exclude_latest": version.get("excluded_count"),
        "created_at": stamp / 1000 if isinstance(stamp, int | float) and stamp else None,
    }
