"""What every REST API route is given: who is asking (`Owner`) and the server's open chats
(`Registry`). May import `server.access` and `server.chats`."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from autorecap.server.access import Scope, request_scope
from autorecap.server.chats.registry import ChatRegistry


def _registry(request: Request) -> ChatRegistry:
    registry: ChatRegistry = request.app.state.registry
    return registry


Owner = Annotated[Scope, Depends(request_scope)]
"""Who is asking (see `autorecap.server.access`)."""
Registry = Annotated[ChatRegistry, Depends(_registry)]
"""The server's open chats, shared with the proxy and the recap worker."""
