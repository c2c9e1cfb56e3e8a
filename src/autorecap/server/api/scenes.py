"""Scenes and the running recap: the REST API's routes under `/api/chats/{chat}/scenes` and
`/api/chats/{chat}/running` (docs/API.md)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from autorecap.core import running
from autorecap.core.data import get_data, update_data
from autorecap.core.scenes import edit_recap, recap_versions, rename_break, scenes, set_visible
from autorecap.core.scenes import select_recap_version as select_scene_version
from autorecap.jobs.handlers import RUNNING_PRIORITY, SCENE_PRIORITY
from autorecap.server.api.dependencies import Owner, Registry
from autorecap.server.api.errors import ApiError, ConflictError, InvalidValueError, NotFoundError
from autorecap.server.api.views import (
    break_at,
    message_at,
    open_chat,
    running_json,
    scene_json,
)
from autorecap.server.chats.registry import ChatRegistry
from autorecap.session import Session

router = APIRouter()


def _scenes_json(session: Session) -> dict[str, Any]:
    messages = session.chat.messages
    return {"scenes": [scene_json(messages, scene) for scene in scenes(messages)]}


def _scene_ending_at(session: Session, index: int) -> dict[str, Any]:
    messages = session.chat.messages
    found = next(s for s in scenes(messages) if s.closed and s.end == index)
    return scene_json(messages, found)


# --- scenes --------------------------------------------------------------------------------------


@router.get("/chats/{chat}/scenes")
def list_scenes(chat: str, scope: Owner, registry: Registry) -> dict[str, Any]:
    """The chat cut into scenes: one per break, and the open scene after the last break."""
    with open_chat(scope, registry, chat) as session:
        return _scenes_json(session)


class SceneMark(BaseModel):
    """Where a scene ends, and optionally its name."""

    model_config = ConfigDict(extra="forbid", strict=True)
    index: int = Field(description="The scene's last message.")
    name: str | None = Field(None, description="The scene's name.")


@router.post("/chats/{chat}/scenes")
def mark_scene(chat: str, body: SceneMark, scope: Owner, registry: Registry) -> dict[str, Any]:
    """End a scene after message `index` (auto-hide counts scenes: memory is refreshed), and
    queue its recap, then the running recap's."""
    with open_chat(scope, registry, chat, flush=True) as session:
        message = message_at(session, body.index)
        session.mark_scene_break(body.index, body.name)
        if message.id is not None:
            _queue_scene_recap(registry, session, message.id)
        return _scenes_json(session)


def _queue_scene_recap(registry: ChatRegistry, session: Session, message_id: int) -> list[int]:
    """A new recap of the scene ending at the stored message `message_id`, then the running
    recap (which folds it in, or is made again when the scene was in it already)."""
    settings = session.settings
    scene_job = registry.queue.enqueue(
        "scene_recap",
        session.chat.id,
        message_id,
        priority=SCENE_PRIORITY,
        max_retries=settings.max_retries,
    )
    running_job = registry.queue.enqueue(
        "running_recap",
        session.chat.id,
        priority=RUNNING_PRIORITY,
        max_retries=settings.max_retries,
        depends_on=[scene_job],
    )
    return [scene_job, running_job]


@router.delete("/chats/{chat}/scenes/{index}")
def unmark_scene(chat: str, index: int, scope: Owner, registry: Registry) -> dict[str, Any]:
    """Remove the scene break on message `index` (its recap versions stay on the message)."""
    with open_chat(scope, registry, chat) as session:
        break_at(session, index)
        session.unmark_scene_break(index)
        return _scenes_json(session)


class ScenePatch(BaseModel):
    """Any of: a name, the recap version to use, a recap written by hand, whether the break
    is shown."""

    model_config = ConfigDict(extra="forbid", strict=True)
    name: str = Field("", description="The scene's name.")
    visible: bool = Field(
        True,
        description="Show (true) or hide (false) the break: a hidden one does not count "
        "for auto-hide.",
    )
    selected: int = Field(0, description="Use this recap version (0-based).")
    recap: str = Field("", description="A recap written by hand: a new version, selected.")


@router.patch("/chats/{chat}/scenes/{index}")
def patch_scene(
    chat: str, index: int, body: ScenePatch, scope: Owner, registry: Registry
) -> dict[str, Any]:
    """Rename the scene ending at message `index`, select one of its recap versions, save an
    edited recap as a new version, or hide or show its break. Returns the scene."""
    given = body.model_fields_set
    if not given:
        raise ApiError('send any of {"name"}, {"selected"}, {"recap"}, {"visible"}', field="body")
    if {"selected", "recap"} <= given:
        raise ApiError(
            "send selected or recap, not both: a recap written by hand becomes the selected "
            "version",
            field="recap",
        )
    if "recap" in given and not body.recap.strip():
        raise InvalidValueError("the recap is empty: write the scene's recap", field="recap")
    recap_changed = bool({"recap", "selected"} & given)
    with open_chat(scope, registry, chat, flush=recap_changed) as session:
        message = break_at(session, index)
        if "selected" in given:
            count = len(recap_versions(message))
            if not 0 <= body.selected < count:
                raise NotFoundError(
                    f"no recap version {body.selected} for this scene: it has {count}"
                    + (f" (0 to {count - 1})" if count else "; regenerate it first"),
                    field="selected",
                )
            select_scene_version(message, body.selected)
        if "name" in given:
            rename_break(message, body.name)
        if "recap" in given:
            edit_recap(message, body.recap)
        if "visible" in given:
            set_visible(message, body.visible)
        session.refresh()
        if recap_changed:
            # The running recap is made again with the scene's new recap (`running_recap`).
            registry.queue.enqueue(
                "running_recap",
                session.chat.id,
                priority=RUNNING_PRIORITY,
                max_retries=session.settings.max_retries,
            )
        return _scene_ending_at(session, index)


@router.post("/chats/{chat}/scenes/{index}/regenerate")
def regenerate_scene(chat: str, index: int, scope: Owner, registry: Registry) -> dict[str, Any]:
    """Queue a new recap of the scene ending at message `index` (also when its recap was
    written by hand), then the running recap."""
    with open_chat(scope, registry, chat, flush=True) as session:
        message = break_at(session, index)
        if message.id is None:
            raise ConflictError("the message is not saved yet: try again in a moment")
        metadata = get_data(message, "scene_recap_metadata")
        kept = dict(metadata) if isinstance(metadata, dict) else {}
        kept.pop("edited", None)
        # An out-of-date hash and no "edited" mark: the scene recap job makes a new version.
        update_data(message, {"scene_recap_hash": None, "scene_recap_metadata": kept})
        jobs = _queue_scene_recap(registry, session, message.id)
    return {"jobs": jobs}


# --- the running recap ---------------------------------------------------------------------------


@router.get("/chats/{chat}/running")
def get_running(chat: str, scope: Owner, registry: Registry) -> dict[str, Any]:
    """The running recap's versions, newest first, and which one is injected."""
    with open_chat(scope, registry, chat) as session:
        return running_json(session.chat)


class RunningPatch(BaseModel):
    """One of: the version to inject, or an edited text (saved as a new version)."""

    model_config = ConfigDict(extra="forbid", strict=True)
    selected: int = Field(0, description="Inject this version from now on.")
    content: str = Field("", description="The recap's new text: a new version, injected.")


def _version_exists(session: Session, number: int, field: str) -> None:
    numbers = [v.get("version") for v in running.versions(session.chat)]
    if number not in numbers:
        known = ", ".join(str(n) for n in numbers) or "none yet"
        raise NotFoundError(
            f"no running recap version {number}: the versions are {known}", field=field
        )


@router.patch("/chats/{chat}/running")
def patch_running(
    chat: str, body: RunningPatch, scope: Owner, registry: Registry
) -> dict[str, Any]:
    """Select a running recap version, or save an edit as a new version."""
    given = body.model_fields_set
    if len(given) != 1:
        raise ApiError('send either {"selected": N} or {"content": "text"}', field="body")
    if "content" in given and not body.content.strip():
        raise InvalidValueError("the recap is empty: write the running recap", field="content")
    with open_chat(scope, registry, chat) as session:
        if "selected" in given:
            _version_exists(session, body.selected, "selected")
            session.select_version(body.selected)
        else:
            if running.current(session.chat) is None:
                raise ConflictError(
                    "this chat has no running recap yet to edit: POST /api/chats/{chat}/recap "
                    "makes one",
                    field="content",
                )
            session.edit_running_recap(body.content)
        return running_json(session.chat)


@router.delete("/chats/{chat}/running/{version}")
def delete_running_version(
    chat: str, version: int, scope: Owner, registry: Registry
) -> dict[str, Any]:
    """Delete a running recap version (when it was injected, the newest left takes over)."""
    with open_chat(scope, registry, chat) as session:
        _version_exists(session, version, "version")
        session.delete_version(version)
        return running_json(session.chat)
