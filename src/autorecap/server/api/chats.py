"""Chats and their messages: the REST API's routes under `/api/chats` (docs/API.md). Scenes and
the running recap are in `api_scenes`, memory switches and the prompt preview in `api_memory`.

Every route maps the client's chat id to the store's (`Scope.internal`), so another key's chat
is a 404 like an unknown one, and reads or changes the chat through `ChatRegistry.edit`: the
proxy, the worker and the API share one in-memory copy of each chat.
"""

from __future__ import annotations

import contextlib
import time
import weakref
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Header, Query, Request, Response
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool

from autorecap.core.data import (
    cleared_recap,
    edit_memory,
    get_data,
    get_memory,
    set_data,
    update_data,
)
from autorecap.core.pins import set_pinned
from autorecap.core.scenes import scenes
from autorecap.errors import ChatFileError, LineProblem
from autorecap.jobs.handlers import MESSAGE_PRIORITY, enqueue_pipeline
from autorecap.jobs.queue import JobError
from autorecap.profiles import Profiles
from autorecap.recap.messages import needs_recap
from autorecap.server.access import Scope, header_text
from autorecap.server.api.dependencies import Owner, Registry
from autorecap.server.api.errors import (
    ApiError,
    ConflictError,
    InvalidValueError,
    TooLargeError,
)
from autorecap.server.api.views import (
    ChatFacts,
    SceneNames,
    chat_facts,
    chat_summary,
    message_at,
    message_json,
    open_chat,
    running_json,
    unknown_chat,
)
from autorecap.server.chats.registry import ChatRegistry
from autorecap.stfiles.jsonl import parse_chat
from autorecap.store.migrations import StoreError

router = APIRouter()

MAX_IMPORT_BYTES = 200 * 1024 * 1024
"""The largest chat file `POST /api/chats` takes (a 413 beyond it)."""
MAX_PAGE = 1000
"""The most messages one `GET .../messages` returns."""

# Summaries of chats no request has opened, by registry and chat: (updated_at, facts). Listing
# chats then reads each chat from the store once, not on every listing.
_FACTS: weakref.WeakKeyDictionary[ChatRegistry, dict[str, tuple[float, ChatFacts]]] = (
    weakref.WeakKeyDictionary()
)


def _profiles(registry: ChatRegistry, scope: Scope) -> Profiles:
    profiles = registry.profiles_for(scope.owner)
    profiles.reload()  # a settings change elsewhere (CLI, API) shows at once
    return profiles


# --- chats ---------------------------------------------------------------------------------------


@router.get("/chats")
def list_chats(scope: Owner, registry: Registry) -> dict[str, Any]:
    """The chats this key owns, most recently changed first."""
    profiles = _profiles(registry, scope)
    loaded = set(registry.sessions())
    cache = _FACTS.setdefault(registry, {})
    chats = []
    for info in registry.store.list_chats():
        external = scope.external(info.id)
        if external is None:
            continue
        facts: ChatFacts | None = None
        try:
            if info.id in loaded:  # the live copy: it may be ahead of the store
                with registry.edit(info.id) as session:
                    facts = chat_facts(session.chat)
            else:
                cached = cache.get(info.id)
                if cached is not None and cached[0] == info.updated_at:
                    facts = cached[1]
                else:
                    facts = chat_facts(registry.store.load_chat(info.id))
                    cache[info.id] = (info.updated_at, facts)
        except StoreError:  # deleted while we listed
            continue
        chats.append(chat_summary(external, info.id, facts, info.updated_at, profiles))
    return {"chats": chats}


_UPLOAD = {
    "requestBody": {
        "required": True,
        "content": {"application/x-ndjson": {"schema": {"type": "string", "format": "binary"}}},
    }
}


@router.post("/chats", status_code=201, openapi_extra=_UPLOAD)
async def import_chat(
    request: Request,
    scope: Owner,
    registry: Registry,
    chat_id: Annotated[
        str | None, Query(alias="id", description="Store under this id (default: X-Filename).")
    ] = None,
    replace: Annotated[bool, Query(description="Overwrite a chat with the same id.")] = False,
    x_filename: Annotated[str | None, Header(description="The uploaded file's name.")] = None,
) -> dict[str, Any]:
    """Import a SillyTavern chat file: the request body is the file's bytes. Malformed lines
    are kept as they are and reported."""
    data = await _read_upload(request)
    filename = header_text(x_filename)
    name = chat_id if chat_id is not None else _stem(filename)
    return await run_in_threadpool(_import, scope, registry, name, data, replace, filename)


async def _read_upload(request: Request) -> bytes:
    limit = MAX_IMPORT_BYTES
    too_large = TooLargeError(
        f"the chat file is larger than {limit:,} bytes: split it, or import it with the CLI "
        "(`autorecap import FILE`)"
    )
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise too_large
    parts: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise too_large
        parts.append(chunk)
    return b"".join(parts)


def _import(
    scope: Scope,
    registry: ChatRegistry,
    name: str | None,
    data: bytes,
    replace: bool,
    filename: str | None,
) -> dict[str, Any]:
    if name is None:
        name = _free_id(scope, registry)
    if not name.strip():
        raise InvalidValueError(
            "cannot store a chat under an empty id: pass ?id= with a name for the chat",
            field="id",
        )
    internal = scope.internal(name)  # with keys on, an id with '/' is another key's: 404
    if "/" in name:
        raise InvalidValueError(
            f"cannot store a chat as {name!r}: pass ?id= with an id without '/'", field="id"
        )
    problems: tuple[LineProblem, ...] = ()
    try:
        chat = parse_chat(data, chat_id=name)
    except ChatFileError as error:
        if not error.problems:  # an empty file: nothing to keep
            raise
        chat = parse_chat(data, chat_id=name, lenient=True)
        problems = error.problems
        if not chat.header or not chat.messages:
            # Not a chat with a bad line or two: another file (a text, a page, random bytes).
            raise InvalidValueError(
                f"this is not a SillyTavern chat (line {problems[0].line}: "
                f"{problems[0].message}): a chat file holds a JSON header line, then one JSON "
                "message per line",
                field="body",
            ) from None
    if not isinstance(chat.header.get("chat_metadata", {}), dict):
        raise ApiError(
            "line 1: the header's chat_metadata is not an object; fix it (for example "
            '`"chat_metadata": {}`) and import again',
            field="body",
        )
    with registry.hold(internal):
        if registry.store.has_chat(internal):
            if not replace:
                raise ConflictError(
                    f"a chat with id {name!r} already exists: pass replace=true to overwrite "
                    "it, or ?id= to store this one under another id",
                    field="id",
                )
            _cancel_jobs(registry, internal)
        info = registry.store.import_chat(
            chat, chat_id=internal, replace=replace, source=filename or None
        )
        registry.drop(internal)
    summary = chat_summary(
        name, internal, chat_facts(chat), info.updated_at, _profiles(registry, scope)
    )
    return {
        "chat": summary,
        "problems": [{"line": p.line, "message": p.message} for p in problems],
    }


def _stem(filename: str | None) -> str | None:
    if not filename:
        return None
    base = filename.replace("\\", "/").rsplit("/", 1)[-1]
    stem = base[: -len(".jsonl")] if base.lower().endswith(".jsonl") else base
    return stem.strip() or None


def _free_id(scope: Scope, registry: ChatRegistry) -> str:
    base = "chat-" + time.strftime("%Y-%m-%d@%Hh%Mm%Ss")
    name, number = base, 2
    while registry.store.has_chat(scope.internal(name)):
        name, number = f"{base}-{number}", number + 1
    return name


def _cancel_jobs(registry: ChatRegistry, internal: str) -> int:
    """Cancel a chat's waiting and running jobs (it is being deleted or replaced); how many
    there were."""
    waiting = registry.queue.list(states=("queued", "running"), chat_id=internal)
    for job in waiting:
        with contextlib.suppress(JobError):  # it finished meanwhile
            registry.queue.cancel(job.id)
    return len(waiting)


def _updated_at(registry: ChatRegistry, internal: str) -> float | None:
    return next((i.updated_at for i in registry.store.list_chats() if i.id == internal), None)


@router.get("/chats/{chat}")
def get_chat(chat: str, scope: Owner, registry: Registry) -> dict[str, Any]:
    """The chat's summary, its current running recap, how many scenes and its jobs."""
    profiles = _profiles(registry, scope)
    with open_chat(scope, registry, chat) as session:
        internal = session.chat.id
        facts = chat_facts(session.chat)
        recap = running_json(session.chat)
        count = len(scenes(session.chat.messages))
    summary = chat_summary(chat, internal, facts, _updated_at(registry, internal), profiles)
    current = next((v for v in recap["versions"] if v["version"] == recap["selected"]), None)
    return {
        **summary,
        "running": current,
        "scenes": count,
        "jobs": registry.queue.counts(internal),
    }


@router.get("/chats/{chat}/export", response_class=Response)
def export_chat(chat: str, scope: Owner, registry: Registry) -> Response:
    """The chat as a SillyTavern chat file, byte for byte the imported one where unchanged."""
    internal = scope.internal(chat)
    with registry.hold(internal):
        if not registry.store.has_chat(internal):
            raise unknown_chat(chat)
        if internal in registry.sessions():
            with registry.edit(internal):  # save what the proxy has not saved yet
                pass
        # A chat nobody opened is not opened (and refreshed) just to export it.
        data = registry.store.export_chat(internal)
    filename = f"{chat}.jsonl"
    fallback = "".join(c if 32 <= ord(c) < 127 and c not in '"\\' else "_" for c in filename)
    disposition = f"attachment; filename=\"{fallback}\"; filename*=UTF-8''{quote(filename)}"
    return Response(
        data, media_type="application/x-ndjson", headers={"Content-Disposition": disposition}
    )


@router.delete("/chats/{chat}", status_code=204, response_class=Response)
def delete_chat(chat: str, scope: Owner, registry: Registry) -> Response:
    """Delete the chat and cancel its jobs."""
    internal = scope.internal(chat)
    with registry.hold(internal):
        if not registry.store.has_chat(internal):
            raise unknown_chat(chat)
        _cancel_jobs(registry, internal)
        registry.store.delete_chat(internal)
        registry.drop(internal)
    # Its own memory switch and profile binding go with it: a new chat under the same id
    # starts from the defaults.
    profiles = registry.profiles_for(scope.owner)
    profiles.set_chat_enabled(internal, None)
    profiles.unbind(chat=internal)
    _FACTS.get(registry, {}).pop(internal, None)
    return Response(status_code=204)


@router.post("/chats/{chat}/recap")
def recap_chat(
    chat: str,
    scope: Owner,
    registry: Registry,
    force: Annotated[
        bool, Query(description="Redo every message recap, also ones edited by hand.")
    ] = False,
) -> dict[str, Any]:
    """Queue the whole pipeline (message recaps, scene detection, scene recaps, the running
    recap); the server's worker runs it."""
    with open_chat(scope, registry, chat, flush=True) as session:
        if force:  # the queue redoes what has no recap (as `autorecap recap --force`)
            for message in session.chat.messages:
                if get_memory(message) or get_data(message, "error"):
                    update_data(message, cleared_recap(message))
            session.refresh()
        ids = enqueue_pipeline(registry.queue, session.chat, session.settings)
    return {"jobs": len(ids)}


@router.post("/chats/{chat}/jobs/cancel")
def cancel_chat_jobs(chat: str, scope: Owner, registry: Registry) -> dict[str, Any]:
    """Cancel the chat's waiting and running jobs (a running one stops at its next step);
    what they have done is kept, other chats' jobs go on."""
    with open_chat(scope, registry, chat) as session:
        internal = session.chat.id
    return {"cancelled": _cancel_jobs(registry, internal)}


@router.post("/chats/{chat}/jobs/retry")
def retry_chat_jobs(chat: str, scope: Owner, registry: Registry) -> dict[str, Any]:
    """Queue the chat's failed jobs again, with fresh retries (after fixing what made the LLM
    refuse them: its model, key or base URL)."""
    with open_chat(scope, registry, chat) as session:
        internal = session.chat.id
    return {"retried": registry.queue.retry_failed(internal)}


# --- messages ----------------------------------------------------------------------------------


@router.get("/chats/{chat}/messages")
def list_messages(
    chat: str,
    scope: Owner,
    registry: Registry,
    start: Annotated[int, Query(ge=0, description="Index of the first message.")] = 0,
    limit: Annotated[int, Query(ge=0, le=MAX_PAGE, description="How many at most.")] = 200,
) -> dict[str, Any]:
    """A page of messages with their recaps (only the page is serialised)."""
    with open_chat(scope, registry, chat) as session:
        session.refresh()  # inclusion flags and auto-hide as of now (recaps made since)
        messages = session.chat.messages
        names = SceneNames(messages)
        page = [
            message_json(messages, index, names)
            for index in range(start, min(len(messages), start + limit))
        ]
        return {"total": len(messages), "start": start, "messages": page}


@router.get("/chats/{chat}/messages/{index}")
def get_message(chat: str, index: int, scope: Owner, registry: Registry) -> dict[str, Any]:
    """One message."""
    with open_chat(scope, registry, chat) as session:
        session.refresh()
        message_at(session, index)
        return message_json(session.chat.messages, index, SceneNames(session.chat.messages))


class MessagePatch(BaseModel):
    """Any of: a recap written by hand, whether the message is left out of memory."""

    model_config = ConfigDict(extra="forbid", strict=True)  # "yes" or 1 is no boolean
    recap: str = Field("", description="The recap, as the user wrote it (kept: `edited`).")
    exclude: bool = Field(False, description="Leave the message out of memory.")
    remember: bool = Field(
        False, description="Pin the message's recap in the long-term tier (long_term_enabled)."
    )
    was: str | None = Field(
        None,
        description="With recap: the recap the edit began from; when the recap is no longer "
        "that (edited elsewhere meanwhile), nothing is changed and the answer is a 409.",
    )


@router.patch("/chats/{chat}/messages/{index}")
def patch_message(
    chat: str, index: int, body: MessagePatch, scope: Owner, registry: Registry
) -> dict[str, Any]:
    """Edit a message's recap, exclude it from memory (or include it again), or pin it."""
    given = body.model_fields_set
    if not given:
        raise ApiError(
            'send {"recap": "text"}, {"exclude": true|false} and/or {"remember": true|false}',
            field="body",
        )
    if "recap" in given and not body.recap.strip():
        raise InvalidValueError(
            "the recap is empty: write the message's recap (to leave the message out of "
            'memory, send {"exclude": true})',
            field="recap",
        )
    with open_chat(scope, registry, chat) as session:
        message = message_at(session, index)
        if "recap" in given and body.was is not None and (get_memory(message) or "") != body.was:
            raise ConflictError(
                f"the recap of message {index} was changed elsewhere since this edit began; "
                "look at it again, then save your text again to replace it",
                field="was",
            )
        if "recap" in given:
            edit_memory(message, body.recap)
        if "exclude" in given:
            set_data(message, "exclude", body.exclude)
        if "remember" in given:
            set_pinned(message, body.remember)
        session.refresh()
        return message_json(session.chat.messages, index, SceneNames(session.chat.messages))


@router.post("/chats/{chat}/messages/{index}/regenerate")
def regenerate_message(chat: str, index: int, scope: Owner, registry: Registry) -> dict[str, Any]:
    """Queue a new recap of this message (also of one edited by hand)."""
    with open_chat(scope, registry, chat, flush=True) as session:
        message = message_at(session, index)
        settings = session.settings
        if not needs_recap(message, settings, session.counter, session.group_id, force=True):
            raise ConflictError(
                f"message {index} gets no recap: it is excluded, empty, or left out by the "
                "settings (include_user_messages, include_system_messages, "
                "message_length_threshold...); change that first",
                field="index",
            )
        if message.id is None:
            raise ConflictError("the message is not saved yet: try again in a moment")
        update_data(message, cleared_recap(message))
        session.refresh()
        job = registry.queue.enqueue(
            "message_recap",
            session.chat.id,
            message.id,
            priority=MESSAGE_PRIORITY,
            max_retries=settings.max_retries,
        )
    return {"job": job}
