"""The proxy's routes: `POST /v1/chat/completions` (streaming or not), `POST /v1/completions`
and `GET /v1/models`, also under `/c/{chat_id}/v1/...`.

A chat completion is matched to its chat (`proxy.matching`), reconciled with it and given its
memory (`proxy.turns`, `proxy.outgoing`), sent upstream and its answer relayed chunk by chunk
(`proxy.upstream`), then recorded as a message (`proxy.replies`). Recaps are made afterwards by
the worker, never on the reply path.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar
from urllib.parse import quote

from fastapi import FastAPI, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from autorecap.errors import AutorecapError
from autorecap.server.access import KeyRing, header_text, request_scope
from autorecap.server.errors import error_response
from autorecap.server.proxy.matching import (
    HEADER_CHAT,
    as_client_messages,
    fingerprint,
    request_messages,
    role_of,
)
from autorecap.server.proxy.replies import reply_text, streamed_text
from autorecap.server.proxy.request_json import dumps, loads, opening_elements, parse_body
from autorecap.server.proxy.turns import ProxyChats, Turn
from autorecap.server.proxy.upstream import Upstream

log = logging.getLogger("autorecap.server")
T = TypeVar("T")


def add_proxy_routes(
    app: FastAPI,
    registry: ProxyChats,
    relay: Upstream,
    *,
    key_env: str | None,
    keyring: KeyRing | None,
) -> None:
    """The proxy's routes on `app`: sent upstream through `relay`, with the key in the
    environment variable `key_env` (else the client's own, when access control is off)."""

    def upstream_key() -> str:
        """The server's upstream key, read at each request (never kept, logged or stored): masked
        wherever an upstream quotes it (an upstream that refuses a key quotes it in its error)."""
        return os.environ.get(key_env, "") if key_env else ""

    def upstream_headers(request: Request) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        key = upstream_key()
        if key:
            headers["Authorization"] = f"Bearer {key}"
        elif keyring is None and request.headers.get("authorization"):
            # With keys on, the client's key is autorecap's, never the upstream's.
            headers["Authorization"] = request.headers["authorization"]
            registry.seen_key = headers["Authorization"].removeprefix("Bearer ").strip()
        return headers

    async def in_chat(chat_id: str, work: Callable[[], T], *, reads: bool = False) -> T:
        """Run `work` with the chat's lock: at once when it is free (no thread hop), else on a
        worker thread, so that the event loop never waits for a recap job's save. `reads`:
        `work` asks the database (it always runs on a worker thread then)."""
        lock = registry.chat_lock(chat_id)
        if not reads and lock.acquire(blocking=False):
            try:
                return work()
            finally:
                lock.release()
        return await run_in_threadpool(work)  # `work` waits for the lock (as wanted) there

    async def chat_completions(request: Request, chat_id: str | None) -> Response:
        # Counted as answering while the proxy computes (reconciling, building the request,
        # recording the reply): recap jobs hold back then. Not while the upstream generates,
        # which may take a minute: the worker's time, and no CPU of the reply path's.
        with registry.answering():
            prepared = await prepare(request, chat_id)
        if isinstance(prepared, Response):
            return prepared
        turn, content, chosen, stream = prepared

        async def done(answer: bytes | None, streamed: bool) -> None:
            try:
                if answer is not None:
                    reply = streamed_text(answer) if streamed else reply_text(answer)
                    with registry.answering():
                        await in_chat(turn.chat_id, lambda: registry.record(turn, reply))
            finally:
                registry.settle_later(turn)  # whatever happened: the turn is saved and closed

        try:
            return await relay.forward(
                "POST",
                "chat/completions",
                content,
                upstream_headers(request),
                stream=stream,
                chat=chosen,
                extra_headers={"X-Autorecap-Chat": quote(chosen, safe=_SAFE)},
                done=done,
                key=upstream_key(),
            )
        except BaseException:
            registry.settle_later(turn)  # no answer: what the request itself changed is saved
            raise

    async def prepare(
        request: Request, chat_id: str | None
    ) -> Response | tuple[Turn, bytes, str, bool]:
        """The turn, the body to send upstream, the chat's id as the client named it (or its
        fingerprint) and whether to stream; or the error to answer with."""
        raw = await request.body()
        try:
            scope = request_scope(request)
            chosen = chat_id or header_text(request.headers.get(HEADER_CHAT))
            body = None
            earlier = ""
            if not chosen:
                opening = opening_elements(raw, _leading)
                if opening is None:
                    body = parse_body(raw)
                    opening = request_messages(body)
                said = as_client_messages(opening, opening=True)
                chosen = fingerprint(said)
                earlier = scope.internal(fingerprint(said, settled=False))
            internal = registry.alias_of(scope.internal(chosen))
            if earlier and not registry.is_open(internal):
                # A chat whose oldest messages the frontend no longer sends has another
                # opening each turn: it may be one of this key's open chats (`continued`).
                parsed = body if body is not None else parse_body(raw)
                found = await run_in_threadpool(
                    registry.continued,
                    internal,
                    earlier,
                    parsed,
                    lambda other: scope.external(other) is not None,
                )
                internal, body = found or internal, parsed
            turn = await in_chat(
                internal,
                lambda: registry.begin(internal, raw, body, by_opening=bool(earlier)),
                reads=registry.begin_reads_store,
            )
        except AutorecapError as error:
            return error_response(error.http_status, str(error))
        return turn, turn.body, scope.external(turn.chat_id) or chosen, turn.stream

    async def text_completions(request: Request, chat_id: str | None) -> Response:
        """A text completion: the prompt is one string, so there is no history to reconcile;
        when the request names a stored chat (path or header), that chat's memory goes at the
        top of the prompt, unless the prompt already carries it."""
        with registry.answering():
            raw = await request.body()
            try:
                scope = request_scope(request)
                body = loads(raw)
            except AutorecapError as error:
                return error_response(error.http_status, str(error))
            except ValueError:
                return error_response(400, "the request body is not JSON")
            if not isinstance(body, dict):
                return error_response(400, "the request body must be a JSON object")
            named = chat_id or header_text(request.headers.get(HEADER_CHAT))
            extra: dict[str, str] = {}
            prompt = body.get("prompt")
            if named and isinstance(prompt, str):
                try:
                    internal = scope.internal(named)
                except AutorecapError as error:
                    return error_response(error.http_status, str(error))
                if registry.known(internal):
                    memory = await in_chat(internal, lambda: registry.memory_text(internal))
                    if memory.strip() and memory.strip() not in prompt:
                        raw = dumps({**body, "prompt": f"{memory}\n{prompt}"})
                    extra["X-Autorecap-Chat"] = quote(named, safe=_SAFE)
        return await relay.forward(  # the upstream's time is not the proxy's (see above)
            "POST",
            "completions",
            raw,
            upstream_headers(request),
            stream=bool(body.get("stream")),
            chat=named or "",
            extra_headers=extra,
            key=upstream_key(),
        )

    async def passthrough(request: Request, path: str) -> Response:
        try:
            request_scope(request)
        except AutorecapError as error:
            return error_response(error.http_status, str(error))
        body = await request.body()
        return await relay.forward(
            request.method,
            path,
            body or None,
            upstream_headers(request),
            stream=False,
            key=upstream_key(),
            completion=False,
        )

    # Chat completions skip FastAPI's middleware and routing (`_ChatLane`).
    stack = app.build_middleware_stack
    app.build_middleware_stack = lambda: _ChatLane(stack(), chat_completions, app)  # type: ignore[method-assign]

    @app.post("/v1/chat/completions")
    async def chat_default(request: Request) -> Response:
        return await chat_completions(request, None)

    @app.post("/c/{chat_id}/v1/chat/completions")
    async def chat_named(chat_id: str, request: Request) -> Response:
        return await chat_completions(request, chat_id)

    @app.post("/v1/completions")
    async def completions_default(request: Request) -> Response:
        return await text_completions(request, None)

    @app.post("/c/{chat_id}/v1/completions")
    async def completions_named(chat_id: str, request: Request) -> Response:
        return await text_completions(request, chat_id)

    @app.get("/v1/models")
    async def models_default(request: Request) -> Response:
        return await passthrough(request, "models")

    @app.get("/c/{chat_id}/v1/models")
    async def models_named(chat_id: str, request: Request) -> Response:
        return await passthrough(request, "models")


_CHAT_PATH = "/v1/chat/completions"
Lane = Callable[[Request, str | None], Awaitable[Response]]


class _ChatLane:
    """A short way in for chat completions, in front of the whole application: they go
    straight to their handler instead of through FastAPI's middleware and routing, which every
    chunk of a streamed answer would otherwise pass through too. The routes stay declared (the
    docs list them, and any path this does not recognise goes the long way)."""

    def __init__(self, app: Any, lane: Lane, owner: FastAPI) -> None:
        self.app = app
        self.lane = lane
        self.owner = owner

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] == "POST" and not scope.get("root_path"):
            chat_id = _chat_of_path(scope["path"])
            if chat_id is not None:
                scope["app"] = self.owner
                try:
                    response = await self.lane(Request(scope, receive), chat_id or None)
                except AutorecapError as error:  # what the app's exception handler does
                    response = error_response(error.http_status, str(error))
                except Exception:  # what ServerErrorMiddleware would do, in our error shape
                    log.exception("a chat completion failed")
                    response = error_response(500, "the proxy failed on this request (see its log)")
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _chat_of_path(path: str) -> str | None:
    """ "" for `/v1/chat/completions`, the chat id for `/c/{chat_id}/v1/chat/completions`
    (one path segment, as the declared route matches), else None."""
    if path == _CHAT_PATH:
        return ""
    if path.startswith("/c/") and path.endswith(_CHAT_PATH):
        chat_id = path[3 : -len(_CHAT_PATH)]
        if chat_id and "/" not in chat_id:
            return chat_id
    return None


def _leading(message: Any) -> bool:
    """A message of a request's opening system block (see `fingerprint`)."""
    return isinstance(message, dict) and role_of(message.get("role", "user")) == "system"


_SAFE = " !#$&'()*+,/:;=?@[]~"
