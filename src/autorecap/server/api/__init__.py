"""The REST API under `/api`: everything the CLI can do with a chat's memory, over HTTP
(docs/API.md).

Every route acts for the request's `Owner` (its API key's owner, or everyone when access control
is off) and only ever sees that owner's chats. Chats are read and changed through the server's
`ChatRegistry` (`registry.edit(internal_id)`), so the API, the proxy and the in-process worker
share one in-memory copy of each chat.

One module per part of the API (`chats`, `scenes`, `memory`, `admin`), what they share in
`views` (JSON shapes), `dependencies` and `errors`. May import `server.access`,
`server.errors`, `server.chats` and the services below (session, jobs, recap, store,
profiles, settings, core); never `server.proxy` or `server.web`.
"""

from __future__ import annotations

from fastapi import APIRouter

from autorecap.server.api import admin, chats, memory, scenes


def api_router() -> APIRouter:
    """Every route of the API, under `/api` (mounted by `create_app`)."""
    router = APIRouter(prefix="/api", tags=["memory"])
    router.include_router(chats.router)
    router.include_router(scenes.router)
    router.include_router(memory.router)
    router.include_router(admin.router)
    return router
