"""The REST API under `/api`: everything the CLI can do with a chat's memory, over HTTP.

Every route acts for the request's `Scope` (its API key's owner, or everyone when access control
is off) and only ever sees that owner's chats. Chats are changed through the proxy's
`ChatRegistry` (`registry.edit(internal_id)`), so the API, the proxy and the in-process worker
share one in-memory copy of each chat.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request

from autorecap.server.access import Scope, request_scope
from autorecap.server.proxy import ChatRegistry


def _registry(request: Request) -> ChatRegistry:
    registry: ChatRegistry = request.app.state.registry
    return registry


Owner = Annotated[Scope, Depends(request_scope)]
"""Who is asking (see `autorecap.server.access`)."""
Registry = Annotated[ChatRegistry, Depends(_registry)]


def api_router() -> APIRouter:
    router = APIRouter(prefix="/api", tags=["memory"])

    from autorecap.server import api_admin, api_chats, api_memory, api_scenes

    router.include_router(api_chats.router)
    router.include_router(api_scenes.router)
    router.include_router(api_memory.router)
    router.include_router(api_admin.router)
    return router
