"""The OpenAI-compatible memory proxy (FastAPI).

`POST /v1/chat/completions` (streaming or not), `POST /v1/completions` and `GET /v1/models`,
also under `/c/{chat_id}/v1/...`. A chat completion is reconciled with the stored chat, the
memory is refreshed and placed, auto-hidden messages are dropped, and the request goes upstream;
the answer comes back chunk by chunk, bytes unchanged (`server.upstream`), and is recorded
as a message. Recaps are
made afterwards by the in-process worker, never on the reply path.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

import httpx
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi_offline import FastAPIOffline
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from autorecap.errors import AutorecapError
from autorecap.jobs.queue import JobQueue
from autorecap.recap.backend import RecapBackend
from autorecap.recap.backends import make_backend
from autorecap.server.access import KeyRing, header_text, request_scope
from autorecap.server.api import api_router
from autorecap.server.api_errors import http_error_response, validation_error_response
from autorecap.server.echo import as_client_messages, request_messages, role_of
from autorecap.server.heap import HeapKeeper
from autorecap.server.proxy import HEADER_CHAT, ChatRegistry, Turn, fingerprint
from autorecap.server.responses import SafeJSONResponse, error_response
from autorecap.server.upstream import Upstream
from autorecap.server.web import web_router
from autorecap.server.wire import dumps, loads, opening_elements, parse_body
from autorecap.settings import Settings
from autorecap.store.sqlite import SQLiteStore

log = logging.getLogger("autorecap.server")
T = TypeVar("T")
SWITCH_INTERVAL_S = 0.0005


@dataclass
class ServerConfig:
    """What `autorecap serve` was started with."""

    upstream: str
    api_key_env: str | None = None
    db: Path | None = None
    recap_backend: str = "offline"
    context_size: int | None = None
    worker: bool = True
    timeout_s: float = 600.0
    durable: bool = False
    """fsync every commit (SQLite synchronous=FULL) instead of at checkpoints."""
    keys_file: Path | None = None
    """With a keys file, every request needs a key and each key sees only its own chats."""


def create_app(config: ServerConfig) -> FastAPI:
    """The proxy application (see the module docstring)."""
    upstream = config.upstream.rstrip("/")
    if not upstream.startswith(("http://", "https://")):
        raise AutorecapError(
            f"--upstream {config.upstream!r} must be an http(s) URL such as "
            "http://127.0.0.1:8080/v1"
        )
    # The upstream as error messages name it: without any user:password@ in the URL.
    shown = str(httpx.URL(upstream).copy_with(username=None, password=None))
    keyring = KeyRing.from_file(config.keys_file) if config.keys_file is not None else None
    # WAL with synchronous=NORMAL by default: a crash of autorecap loses nothing committed,
    # a power cut may lose the last commits, which the client sends again anyway.
    store = SQLiteStore(config.db, synchronous="FULL" if config.durable else "NORMAL")
    queue = JobQueue(store)
    registry = ChatRegistry(
        store, queue, context_size=config.context_size, keys_on=keyring is not None
    )
    relay = Upstream(upstream, shown, timeout_s=config.timeout_s)

    def backend_for(settings: Settings) -> RecapBackend:
        if config.recap_backend == "upstream":
            # Every recap setting of the chat's owner (prompts, prefill, temperature, retries),
            # sent to the upstream with the upstream's key.
            return make_backend(
                settings, backend="openai", base_url=upstream, api_key_env=config.api_key_env or ""
            )
        return make_backend(settings, backend="offline")

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # The event loop gives up the GIL at every socket call; with the recap worker busy it
        # would wait up to 5 ms (Python's default switch interval) to get it back, per call.
        switch_interval = sys.getswitchinterval()
        sys.setswitchinterval(SWITCH_INTERVAL_S)
        heap = HeapKeeper(registry.busy, registry.quiet_for, registry.idle)
        heap.start()
        registry.heap = heap
        sweeper = asyncio.create_task(_keep(heap))
        # What other processes save (an `autorecap worker`, the command line) is read in.
        watch_stop = threading.Event()
        watcher = threading.Thread(
            target=registry.outside.watch, args=(watch_stop,), daemon=True, name="autorecap-watch"
        )
        watcher.start()
        worker = None
        thread = None
        if config.worker:
            worker = registry.worker(backend_for, idle_sleep=0.5)
            thread = threading.Thread(
                target=worker.run,
                kwargs={"until_empty": False},
                daemon=True,
                name="autorecap-server-worker",
            )
            thread.start()
        try:
            yield
        finally:
            try:
                sweeper.cancel()
                watch_stop.set()
                if worker is not None and thread is not None:
                    worker.stop()
                    thread.join(timeout=30)
                watcher.join(timeout=10)
                await relay.close()
                registry.close()
                store.close()
            finally:  # the collector is the whole process's: given back whatever failed
                registry.heap = None
                heap.stop()
                sys.setswitchinterval(switch_interval)

    # FastAPIOffline serves the /docs page's assets itself: no CDN, works offline.
    app = FastAPIOffline(
        title="autorecap memory proxy",
        lifespan=lifespan,
        default_response_class=SafeJSONResponse,
    )
    app.state.registry = registry
    app.state.queue = queue
    app.state.store = store
    app.state.keyring = keyring

    @app.exception_handler(AutorecapError)
    async def autorecap_error(request: Request, error: AutorecapError) -> JSONResponse:
        return error_response(error.http_status, str(error), getattr(error, "field", None))

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, error: RequestValidationError) -> JSONResponse:
        return validation_error_response(error)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, error: StarletteHTTPException) -> JSONResponse:
        return http_error_response(request, error)

    app.include_router(api_router())
    app.include_router(web_router())

    def masked(content: bytes) -> bytes:
        """An upstream body with the server's upstream key blanked out: an upstream that
        refuses a key quotes it in its error, and no client may see the server's key."""
        key = os.environ.get(config.api_key_env, "") if config.api_key_env else ""
        return content.replace(key.encode("utf-8"), b"***") if key else content

    def upstream_headers(request: Request) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        key = os.environ.get(config.api_key_env, "") if config.api_key_env else ""
        if key:
            headers["Authorization"] = f"Bearer {key}"
        elif keyring is None and request.headers.get("authorization"):
            # With keys on, the client's key is autorecap's, never the upstream's.
            headers["Authorization"] = request.headers["authorization"]
        return headers

    async def in_chat(chat_id: str, work: Callable[[], T]) -> T:
        """Run `work` with the chat's lock: at once when it is free (no thread hop), else on a
        worker thread, so that the event loop never waits for a recap job's save."""
        lock = registry.chat_lock(chat_id)
        if lock.acquire(blocking=False):
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
                    reply = _streamed_text(answer) if streamed else _reply_text(answer)
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
                extra_headers={"X-Autorecap-Chat": quote(chosen, safe=_SAFE)},
                done=done,
                mask=masked,
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
            if not chosen:
                opening = opening_elements(raw, _leading)
                if opening is None:
                    body = parse_body(raw)
                    opening = request_messages(body)
                chosen = fingerprint(as_client_messages(opening, opening=True))
            internal = scope.internal(chosen)
            turn = await in_chat(internal, lambda: registry.begin(internal, raw, body))
        except AutorecapError as error:
            return error_response(error.http_status, str(error))
        return turn, turn.body, chosen, turn.stream

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
            extra_headers=extra,
            mask=masked,
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
            mask=masked,
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

    return app


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


async def _keep(heap: HeapKeeper) -> None:
    """The garbage collector's schedule while the server runs (`server.heap`)."""
    while True:
        await asyncio.sleep(0.25)
        heap.tick()


def _leading(message: Any) -> bool:
    """A message of a request's opening system block (see `fingerprint`)."""
    return isinstance(message, dict) and role_of(message.get("role", "user")) == "system"


_SAFE = " !#$&'()*+,/:;=?@[]~"


def _reply_text(content: bytes) -> str:
    try:
        data = json.loads(content)
        message = data["choices"][0]["message"]
        return str(message.get("content") or "")
    except (ValueError, KeyError, IndexError, TypeError):
        return ""


def _streamed_text(content: bytes) -> str:
    """The reply's text from a server-sent-events stream of chat completion chunks."""
    parts: list[str] = []
    for line in content.decode("utf-8", "replace").splitlines():
        if not line.startswith("data:"):
            continue
        payload = line[5:].strip()
        if payload == "[DONE]":
            break
        try:
            delta = json.loads(payload)["choices"][0].get("delta", {})
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            continue
        text = delta.get("content") if isinstance(delta, dict) else None
        if isinstance(text, str):
            parts.append(text)
    return "".join(parts)
