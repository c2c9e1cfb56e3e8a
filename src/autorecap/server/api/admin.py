"""Settings, profiles, the global memory switch and the job queue over HTTP (docs/API.md).

Settings belong to the request's owner: `registry.profiles_for(scope.owner)`, which is the
installation's settings file when access control is off. A change is saved at once and every
session of that owner already open reads it again, so the next request or recap uses it.
Settings keyed by chat id (`chats_enabled`, `disabled_group_characters`, chat bindings) are
stored under the store's ids (`alice/...`) and shown under the ids the owner knows.

Jobs are the owner's: another key's job is a 404, as if it did not exist.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any

from fastapi import APIRouter, Body, Query, status
from pydantic import BaseModel, ConfigDict

from autorecap.errors import AutorecapError
from autorecap.jobs.queue import STATES, Job, JobError, JobQueue
from autorecap.profiles import DEFAULT_PROFILE, Profiles
from autorecap.server.access import NotYoursError, Scope, owner_of
from autorecap.server.api.dependencies import Owner, Registry
from autorecap.server.api.errors import ConflictError, NotFoundError
from autorecap.server.api.views import open_chat
from autorecap.server.chats.registry import ChatRegistry
from autorecap.settings import (
    GLOBAL_KEYS,
    SETTING_NAMES,
    Settings,
    SettingsError,
    require_setting,
)

router = APIRouter()

_CHAT_KEYED = ("chats_enabled", "disabled_group_characters")
"""Settings that are dictionaries keyed by chat id."""
_MOST_JOBS = 500
_CHANGING = threading.Lock()
"""One settings change at a time: `Profiles` writes its whole file on every change."""


class ForbiddenError(AutorecapError):
    """An action that would reach beyond the request's own key."""

    http_status = 403


class NewProfile(BaseModel):
    """`POST /api/profiles`: save a profile, a copy of `source` (default: the active one)."""

    model_config = ConfigDict(extra="forbid", strict=True)
    name: str
    source: str | None = None


class Binding(BaseModel):
    """A chat id and/or a character key a profile is bound to."""

    model_config = ConfigDict(extra="forbid", strict=True)
    chat: str | None = None
    character: str | None = None


class GlobalToggles(BaseModel):
    """`PATCH /api/memory`: the switch that turns memory on or off in every chat at once."""

    model_config = ConfigDict(extra="forbid", strict=True)
    use_global_toggle_state: bool | None = None
    global_toggle_state: bool | None = None


ProfileName = Annotated[str | None, Query(description="A profile (default: the active one).")]


# --- settings ----------------------------------------------------------------------------------


@router.get("/settings", tags=["settings"])
def get_settings(
    scope: Owner,
    registry: Registry,
    chat: Annotated[str | None, Query(description="Show the settings this chat runs with.")] = None,
    profile: ProfileName = None,
) -> dict[str, Any]:
    """Every setting's value (a profile's, or those a chat runs with), the JSON schema of the
    settings, the profiles and their bindings."""
    profiles = _profiles(scope, registry)
    if chat is None:
        return _settings_view(scope, profiles, _known_profile(profiles, profile))
    with open_chat(scope, registry, chat) as session:
        name = profiles.profile_for(session.chat.id, session.character_key)
        settings = profiles.settings_for(session.chat.id, session.character_key)
    view = _settings_view(scope, profiles, name, settings)
    view["chat"] = chat
    return view


@router.patch("/settings", tags=["settings"])
def patch_settings(
    scope: Owner,
    registry: Registry,
    values: Annotated[dict[str, Any], Body(description="Settings to change: {name: value}.")],
    profile: ProfileName = None,
) -> dict[str, Any]:
    """Change settings in a profile (global settings for everyone of this key). Every value is
    checked first: on the first bad one, a 422 naming it, and nothing is saved."""
    with _changing(scope, registry) as profiles:
        name = _known_profile(profiles, profile)
        profiles.set_many(
            {key: _stored_keys(scope, key, value) for key, value in values.items()}, name
        )
    return _settings_view(scope, profiles, name)


@router.delete("/settings/{key}", tags=["settings"])
def reset_setting(
    key: str, scope: Owner, registry: Registry, profile: ProfileName = None
) -> dict[str, Any]:
    """Put one setting back to its default (in a profile, or globally for a global one)."""
    require_setting(key)
    with _changing(scope, registry) as profiles:
        name = _known_profile(profiles, profile)
        profiles.reset(key, name)
    return _settings_view(scope, profiles, name)


# --- profiles ----------------------------------------------------------------------------------


@router.post("/profiles", status_code=status.HTTP_201_CREATED, tags=["settings"])
def save_profile(new: NewProfile, scope: Owner, registry: Registry) -> dict[str, Any]:
    """Save a profile: a copy of `source` (default: the active profile); an existing profile
    of that name is replaced."""
    with _changing(scope, registry) as profiles:
        source = _known_profile(profiles, new.source)
        try:
            profiles.save_profile(new.name, source)
        except SettingsError as error:
            raise SettingsError(str(error), field="name") from None
    return _profiles_view(scope, profiles)


@router.post("/profiles/{name}/load", tags=["settings"])
def load_profile(name: str, scope: Owner, registry: Registry) -> dict[str, Any]:
    """Make a profile the active one (used by chats that have no binding)."""
    with _changing(scope, registry) as profiles:
        profiles.load_profile(_known_profile(profiles, name))
    return _profiles_view(scope, profiles)


@router.delete("/profiles/{name}", tags=["settings"])
def delete_profile(name: str, scope: Owner, registry: Registry) -> dict[str, Any]:
    """Delete a profile and its bindings (not `Default`, the fallback)."""
    with _changing(scope, registry) as profiles:
        _known_profile(profiles, name)
        if name == DEFAULT_PROFILE:
            raise ConflictError(
                f"the {DEFAULT_PROFILE!r} profile is the fallback and cannot be deleted"
            )
        profiles.delete_profile(name)
    return _profiles_view(scope, profiles)


@router.put("/profiles/{name}/bindings", tags=["settings"])
def bind_profile(name: str, binding: Binding, scope: Owner, registry: Registry) -> dict[str, Any]:
    """Use a profile whenever a chat (or any chat of a character) opens."""
    chat = _binding_chat(scope, binding)
    with _changing(scope, registry) as profiles:
        _known_profile(profiles, name)
        if chat is not None:
            profiles.bind(name, chat=chat)
        if binding.character is not None:
            profiles.bind(name, character=binding.character)
    return _profiles_view(scope, profiles)


@router.delete("/profiles/{name}/bindings", tags=["settings"])
def unbind_profile(name: str, binding: Binding, scope: Owner, registry: Registry) -> dict[str, Any]:
    """Remove a chat's or a character's binding to this profile (a binding to another profile
    is left alone)."""
    chat = _binding_chat(scope, binding)
    with _changing(scope, registry) as profiles:
        _known_profile(profiles, name)
        bound = profiles.bindings()
        profiles.unbind(
            chat=chat if chat is not None and bound["chats"].get(chat) == name else None,
            character=binding.character
            if binding.character is not None and bound["characters"].get(binding.character) == name
            else None,
        )
    return _profiles_view(scope, profiles)


# --- the global memory switch ------------------------------------------------------------------


@router.patch("/memory", tags=["memory"])
def patch_memory(toggles: GlobalToggles, scope: Owner, registry: Registry) -> dict[str, Any]:
    """Turn memory on or off in every chat of this key at once (`use_global_toggle_state`
    makes `global_toggle_state` decide), or go back to each chat's own switch."""
    with _changing(scope, registry) as profiles:
        for key, value in toggles.model_dump(exclude_none=True).items():
            profiles.set(key, value)
    return {"global": _global_toggles(profiles)}


# --- jobs --------------------------------------------------------------------------------------


@router.get("/jobs", tags=["jobs"])
def list_jobs(
    scope: Owner,
    registry: Registry,
    chat: Annotated[str | None, Query(description="Only this chat's jobs.")] = None,
    state: Annotated[
        str | None, Query(description=f"Only these states, comma-separated: {', '.join(STATES)}.")
    ] = None,
) -> dict[str, Any]:
    """This key's jobs, newest first (at most 500), with counts per state."""
    states = _states(state)
    queue = registry.queue
    internal = scope.internal(chat) if chat is not None else None
    prefix = _prefix(scope)
    jobs = queue.list(
        states=states, chat_id=internal, chat_prefix=prefix, newest_first=True, limit=_MOST_JOBS
    )
    positions = _Positions(registry)
    return {
        "counts": queue.counts(internal, chat_prefix=prefix),
        "paused": queue.paused,
        "jobs": [_job_view(scope, job, positions) for job in jobs],
    }


@router.post("/jobs/pause", tags=["jobs"])
def pause_jobs(scope: Owner, registry: Registry) -> dict[str, Any]:
    """Workers take no new jobs until resumed (running ones finish)."""
    _whole_queue(registry, "pause")
    registry.queue.pause()
    return {"paused": registry.queue.paused}


@router.post("/jobs/resume", tags=["jobs"])
def resume_jobs(scope: Owner, registry: Registry) -> dict[str, Any]:
    """Workers take jobs again."""
    _whole_queue(registry, "resume")
    registry.queue.resume()
    return {"paused": registry.queue.paused}


@router.post("/jobs/{job_id}/retry", tags=["jobs"])
def retry_job(job_id: int, scope: Owner, registry: Registry) -> dict[str, Any]:
    """Queue a failed or cancelled job again, with fresh retries."""
    queue = registry.queue
    _own_job(scope, queue, job_id)
    try:
        queue.retry(job_id)
    except JobError as error:
        raise ConflictError(str(error)) from None
    return {"job": _job_view(scope, queue.get(job_id), _Positions(registry))}


@router.post("/jobs/{job_id}/cancel", tags=["jobs"])
def cancel_job(job_id: int, scope: Owner, registry: Registry) -> dict[str, Any]:
    """Cancel a queued job at once, or a running one when it next checks (`result`:
    "cancelled" or "cancelling")."""
    queue = registry.queue
    _own_job(scope, queue, job_id)
    try:
        result = queue.cancel(job_id)
    except JobError as error:
        raise ConflictError(str(error)) from None
    return {"job": _job_view(scope, queue.get(job_id), _Positions(registry)), "result": result}


# --- helpers -----------------------------------------------------------------------------------


def _profiles(scope: Scope, registry: ChatRegistry) -> Profiles:
    profiles = registry.profiles_for(scope.owner)
    profiles.reload()  # the CLI may have changed the file while the server runs
    return profiles


@contextmanager
def _changing(scope: Scope, registry: ChatRegistry) -> Iterator[Profiles]:
    """The owner's settings, to change; afterwards, the owner's open sessions read them
    again (only when the change went through)."""
    with _CHANGING:
        profiles = _profiles(scope, registry)
        yield profiles
    for chat_id in registry.sessions():
        if owner_of(chat_id, registry.keys_on) != scope.owner:
            continue
        try:
            with registry.edit(chat_id) as session:
                session.reload_settings()
        except AutorecapError:
            continue  # deleted meanwhile: nothing left to update


def _known_profile(profiles: Profiles, name: str | None) -> str:
    if name is None:
        return profiles.active_profile
    if name not in profiles.profile_names():
        known = ", ".join(profiles.profile_names())
        raise NotFoundError(f"no profile named {name!r}: the profiles are {known}")
    return name


def _stored_keys(scope: Scope, key: str, value: Any) -> Any:
    """A chat-keyed setting as stored: the owner's chat ids made store ids."""
    if key not in _CHAT_KEYED or not isinstance(value, dict):
        return value
    try:
        return {scope.internal(str(chat)): entry for chat, entry in value.items()}
    except NotYoursError as error:
        raise SettingsError(f"setting {key!r}: {error}", field=key) from None


def _shown_keys(scope: Scope, value: dict[str, Any]) -> dict[str, Any]:
    shown = {}
    for chat, entry in value.items():
        external = scope.external(chat)
        if external is not None:
            shown[external] = entry
    return shown


def _binding_chat(scope: Scope, binding: Binding) -> str | None:
    if binding.chat is None and binding.character is None:
        raise SettingsError("name a chat or a character (or both) to bind", field="chat")
    return scope.internal(binding.chat) if binding.chat is not None else None


def _settings_view(
    scope: Scope, profiles: Profiles, name: str, settings: Settings | None = None
) -> dict[str, Any]:
    if settings is None:
        settings = Settings.model_validate({key: profiles.get(key, name) for key in SETTING_NAMES})
    values = settings.model_dump(mode="json")
    for key in _CHAT_KEYED:
        values[key] = _shown_keys(scope, values[key])
    return {
        "profile": name,
        "values": values,
        "global_keys": sorted(GLOBAL_KEYS),
        "schema": _schema(),
        **_profiles_view(scope, profiles),
    }


def _profiles_view(scope: Scope, profiles: Profiles) -> dict[str, Any]:
    bound = profiles.bindings()
    return {
        "profiles": profiles.profile_names(),
        "active_profile": profiles.active_profile,
        "bindings": {
            "chat": _shown_keys(scope, bound["chats"]),
            "character": bound["characters"],
        },
    }


@functools.cache
def _schema() -> dict[str, Any]:
    return Settings.model_json_schema()


def _global_toggles(profiles: Profiles) -> dict[str, bool]:
    return {
        "use_global_toggle_state": bool(profiles.get("use_global_toggle_state")),
        "global_toggle_state": bool(profiles.get("global_toggle_state")),
    }


def _states(text: str | None) -> tuple[str, ...]:
    if text is None or not text.strip():
        return STATES
    wanted = tuple(part.strip() for part in text.split(",") if part.strip())
    unknown = [name for name in wanted if name not in STATES]
    if unknown:
        raise SettingsError(
            f"unknown job state {unknown[0]!r}: use one or more of {', '.join(STATES)}",
            field="state",
        )
    return wanted


def _prefix(scope: Scope) -> str | None:
    return f"{scope.owner}/" if scope.owner else None


def _own_job(scope: Scope, queue: JobQueue, job_id: int) -> Job:
    try:
        job = queue.get(job_id)
    except JobError:
        job = None
    if job is not None and scope.owns(job.chat_id):
        return job
    raise NotFoundError(f"no job {job_id}: GET /api/jobs lists your jobs")


def _whole_queue(registry: ChatRegistry, action: str) -> None:
    if registry.keys_on:
        raise ForbiddenError(
            f"with API keys on, no key may {action} the whole queue: it holds every key's jobs "
            f"(the operator can: `autorecap jobs {action}`)"
        )


class _Positions:
    """Where the messages jobs work on are now: a job names its message by its stable id, the
    API by its index."""

    def __init__(self, registry: ChatRegistry) -> None:
        self._registry = registry
        self._chats: dict[str, dict[int, int]] = {}

    def index(self, chat_id: str, message_id: int | None) -> int | None:
        if message_id is None:
            return None
        found = self._chats.get(chat_id)
        if found is None:
            found = self._chats[chat_id] = self._read(chat_id)
        return found.get(message_id)

    def _read(self, chat_id: str) -> dict[int, int]:
        registry = self._registry
        if chat_id in registry.sessions():  # the in-memory chat may be ahead of the store
            ids: list[int | None] = [m.id for m in list(registry.chat(chat_id).messages)]
        else:
            rows = registry.store.run(
                lambda db: db.execute(
                    "SELECT id FROM messages WHERE chat_id = ? ORDER BY pos", (chat_id,)
                ).fetchall()
            )
            ids = [row[0] for row in rows]
        return {message_id: index for index, message_id in enumerate(ids) if message_id is not None}


def _job_view(scope: Scope, job: Job, positions: _Positions) -> dict[str, Any]:
    return {
        "id": job.id,
        "kind": job.kind,
        "chat": scope.external(job.chat_id),
        "target_index": positions.index(job.chat_id, job.target),
        "target_id": job.target,
        "state": job.state,
        "attempts": job.attempts,
        "max_retries": job.max_retries,
        "progress": job.progress,
        "note": job.note,
        "error": job.error,
        "created_at": job.created_at,
        "updated_at": job.updated_at,
    }
