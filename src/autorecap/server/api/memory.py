"""Memory switches, the prompt preview and the combined recap: the REST API's routes under
`/api/chats/{chat}/memory`, `/preview` and `/combined` (docs/API.md)."""

from __future__ import annotations

from enum import IntEnum
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query
from pydantic import BaseModel, ConfigDict

from autorecap.core import combined
from autorecap.core.names import character_name_of, user_name_of
from autorecap.core.prompt import HistoryItem, assemble_chat, assemble_text, history_from_chat
from autorecap.core.recall import query_text, set_recall_slot
from autorecap.core.slots import Position, Role
from autorecap.server.api.dependencies import Owner, Registry
from autorecap.server.api.errors import InvalidValueError, NotFoundError
from autorecap.server.api.views import open_chat
from autorecap.session import Session

router = APIRouter()


# --- memory switches -----------------------------------------------------------------------------


def _memory_json(session: Session) -> dict[str, Any]:
    settings = session.settings
    return {
        "enabled": session.enabled,
        "chat": settings.chats_enabled.get(session.chat.id),
        "global": {
            "use_global_toggle_state": settings.use_global_toggle_state,
            "global_toggle_state": settings.global_toggle_state,
        },
    }


@router.get("/chats/{chat}/memory")
def get_memory_switch(chat: str, scope: Owner, registry: Registry) -> dict[str, Any]:
    """Whether memory is on for this chat, and why (its own switch, the global one)."""
    with open_chat(scope, registry, chat) as session:
        session.reload_settings()
        return _memory_json(session)


class MemorySwitch(BaseModel):
    """The chat's own switch; null removes it (the chat follows the default)."""

    model_config = ConfigDict(extra="forbid", strict=True)
    chat: bool | None


@router.patch("/chats/{chat}/memory")
def patch_memory_switch(
    chat: str, body: MemorySwitch, scope: Owner, registry: Registry
) -> dict[str, Any]:
    """Turn memory on or off for this chat (null: follow the default)."""
    with open_chat(scope, registry, chat) as session:
        session.set_enabled(body.chat)
        return _memory_json(session)


# --- the prompt preview --------------------------------------------------------------------------


@router.get("/chats/{chat}/preview")
def preview(
    chat: str,
    scope: Owner,
    registry: Registry,
    format: Annotated[
        Literal["messages", "text"], Query(description="Chat or text completion.")
    ] = "messages",
    context_size: Annotated[
        int | None, Query(ge=1, description="Tokens (default: the server's, else the setting).")
    ] = None,
    query: Annotated[
        str | None,
        Query(
            max_length=20_000,
            description="What the recall tier looks for (shown even when the tier is off); "
            "default: the newest user message, when the tier is on.",
        ),
    ] = None,
) -> dict[str, Any]:
    """What would go upstream for this chat now, after a refresh, with its settings (the
    history and the memory; the client's own system prompt is not known here), and what the
    recall tier brought back, with each piece's score and source."""
    if query is not None and not query.strip():
        raise InvalidValueError(
            "the query is empty: give the text recall looks for, or leave query out to use "
            "the newest user message"
        )
    with open_chat(scope, registry, chat) as session:
        session.reload_settings()  # refreshes too
        session.recall_into_slot()  # the server's refreshes do not search
        pieces = session.last_recall
        if query is not None:
            text, pieces = session.search.recall(session.settings, session.counter, query)
            set_recall_slot(session.slots, text if session.enabled else "", session.settings)
        loaded = session.chat
        size = context_size or registry.context_size or session.settings.context_size
        history = history_from_chat(loaded.messages, group=loaded.is_group and format == "messages")
        if format == "messages":
            result = assemble_chat("", history, session.slots, session.counter, context_size=size)
        else:
            result = assemble_text(
                "",
                history,
                session.slots,
                session.counter,
                user_name=user_name_of(loaded),
                char_name=character_name_of(loaded),
                context_size=size,
            )
        placed = set(result.injected)
        injections = [
            {
                "key": key,
                "text": slot.value,
                "position": _name(Position, slot.position),
                "depth": slot.depth,
                "role": _name(Role, slot.role),
            }
            for key, slot in session.slots.items()
            if key in placed
        ]
        answer: dict[str, Any] = {"format": format}
        if format == "messages":
            included = set(result.included)
            kept = [item for item in history if item.index in included]
            answer["messages"] = _mark_injected(result.messages, kept)
        else:
            answer["text"] = result.text
        answer.update(
            injections=injections,
            hidden=result.hidden,
            dropped=result.dropped,
            tokens={
                "total": result.tokens,
                "injected": result.injected_tokens,
                "history": result.history_tokens,
                "context_size": size,
            },
            enabled=session.enabled,
            recall={
                "enabled": session.settings.recall_enabled,
                "query": query if query is not None else query_text(loaded.messages),
                "pieces": [
                    {
                        "index": piece.index,
                        "kind": piece.kind,
                        "source": piece.source,
                        "score": round(piece.score, 3),
                        "text": piece.text,
                    }
                    for piece in pieces
                ],
            },
        )
        return answer


def _name(kind: type[IntEnum], value: int) -> str:
    """`in_chat` for Position.IN_CHAT, `system` for Role.SYSTEM (the number if unknown)."""
    try:
        return kind(value).name.lower()
    except ValueError:
        return str(value)


def _mark_injected(messages: list[dict[str, str]], kept: list[HistoryItem]) -> list[dict[str, Any]]:
    """Mark which messages of a built prompt were injected: walking back from the end, the
    history messages kept come in order; whatever else is there was placed by autorecap."""
    marked: list[dict[str, Any]] = []
    pending = len(kept) - 1
    for message in reversed(messages):
        item = kept[pending] if pending >= 0 else None
        is_history = (
            item is not None and message["role"] == item.role and message["content"] == item.content
        )
        if is_history:
            pending -= 1
        marked.append({**message, "injected": not is_history})
    marked.reverse()
    return marked


# --- the combined recap ---------------------------------------------------------------------------


def combined_json(session: Session) -> dict[str, Any]:
    """The combined recap's versions, newest first, which one is injected, and whether the tier
    is on."""
    found = combined.versions(session.chat)
    now = combined.current(session.chat)
    return {
        "enabled": session.settings.combined_recap_enabled,
        "selected": now.get("version") if now is not None else None,
        "versions": [
            {
                "version": v.get("version"),
                "timestamp": v.get("timestamp"),
                "content": v.get("content"),
                "message_count": v.get("message_count"),
            }
            for v in reversed(found)
        ],
    }


@router.get("/chats/{chat}/combined")
def get_combined(chat: str, scope: Owner, registry: Registry) -> dict[str, Any]:
    """The combined recap's versions (made by the recap jobs while `combined_recap_enabled` is
    on), newest first, and which one is injected."""
    with open_chat(scope, registry, chat) as session:
        return combined_json(session)


class CombinedPatch(BaseModel):
    """The combined recap version to inject."""

    model_config = ConfigDict(extra="forbid", strict=True)
    selected: int


@router.patch("/chats/{chat}/combined")
def patch_combined(
    chat: str, body: CombinedPatch, scope: Owner, registry: Registry
) -> dict[str, Any]:
    """Inject another combined recap version from now on."""
    with open_chat(scope, registry, chat) as session:
        numbers = [v.get("version") for v in combined.versions(session.chat)]
        if body.selected not in numbers:
            known = ", ".join(str(n) for n in numbers) or "none yet"
            raise NotFoundError(
                f"no combined recap version {body.selected}: the versions are {known}",
                field="selected",
            )
        combined.select_version(session.chat, body.selected)
        session.refresh()
        return combined_json(session)
