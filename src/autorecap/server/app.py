"""The OpenAI-compatible memory proxy (FastAPI).

`POST /v1/chat/completions` (streaming or not), `POST /v1/completions` and `GET /v1/models`,
also under `/c/{chat_id}/v1/...`. A chat completion is reconciled with the stored chat, the
memory is refreshed and placed, auto-hidden messages are dropped, and the request goes upstream;
the answer comes back chunk by chunk, bytes unchanged, and is recorded as a message. Recaps are
made afterwards by the in-process worker, never on the reply path.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from autorecap.errors import AutorecapError
from autorecap.jobs.queue import JobQueue
from autorecap.jobs.runner import Worker
from autorecap.llm.base import RecapBackend
from autorecap.llm.openai_compat import OpenAICompatBackend, make_backend
from autorecap.server.access import KeyRing, request_scope
from autorecap.server.api import api_router
from autorecap.server.proxy import HEADER_CHAT, ChatRegistry, client_messages, fingerprint
from autorecap.server.responses import error_response
from autorecap.settings import Settings
from autorecap.store.sqlite import SQLiteStore

log = logging.getLogger("autorecap.server")
_HOP_HEADERS = {"content-length", "transfer-encoding", "connection", "content-encoding"}


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
    keyring = KeyRing.from_file(config.keys_file) if config.keys_file is not None else None
    store = SQLiteStore(config.db)
    queue = JobQueue(store)
    registry = ChatRegistry(
        store, queue, context_size=config.context_size, keys_on=keyring is not None
    )
    state: dict[str, Any] = {}

    def backend_for(settings: Settings) -> RecapBackend:
        if config.recap_backend == "upstream":
            return OpenAICompatBackend(
                base_url=upstream,
                model=settings.llm_model,
                api_key_env=config.api_key_env or "",
                message_prompt=settings.message_recap_prompt,
            )
        return make_backend(settings, backend="offline")

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        state["client"] = httpx.AsyncClient(
            timeout=httpx.Timeout(config.timeout_s, connect=10),
            limits=httpx.Limits(max_connections=1000, max_keepalive_connections=200),
        )
        worker = None
        thread = None
        if config.worker:
            worker = Worker(
                queue,
                backend_for,
                chat_source=registry.chat,
                lock=registry.lock,
                idle_sleep=0.5,
                yield_to=registry.requests_waiting,
            )
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
            if worker is not None and thread is not None:
                worker.stop()
                thread.join(timeout=30)
            await state["client"].aclose()
            store.close()

    app = FastAPI(title="autorecap memory proxy", lifespan=lifespan)
    app.state.registry = registry
    app.state.queue = queue
    app.state.store = store
    app.state.keyring = keyring

    @app.exception_handler(AutorecapError)
    async def autorecap_error(request: Request, error: AutorecapError) -> JSONResponse:
        return error_response(error.http_status, str(error))

    app.include_router(api_router())

    def upstream_headers(request: Request) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        key = os.environ.get(config.api_key_env, "") if config.api_key_env else ""
        if key:
            headers["Authorization"] = f"Bearer {key}"
        elif keyring is None and request.headers.get("authorization"):
            # With keys on, the client's key is autorecap's, never the upstream's.
            headers["Authorization"] = request.headers["authorization"]
        return headers

    async def chat_completions(request: Request, chat_id: str | None) -> Response:
        try:
            body = await request.json()
        except ValueError:
            return _error(400, "the request body is not JSON")
        if not isinstance(body, dict):
            return _error(400, "the request body must be a JSON object")
        try:
            scope = request_scope(request)
            incoming = client_messages(body)
            chosen = (
                chat_id or _header_text(request.headers.get(HEADER_CHAT)) or fingerprint(incoming)
            )
            turn = registry.begin(scope.internal(chosen), body)
        except AutorecapError as error:
            return _error(error.http_status, str(error))
        outgoing = dict(body)
        outgoing["messages"] = turn.messages
        client: httpx.AsyncClient = state["client"]
        url = f"{upstream}/chat/completions"
        headers = upstream_headers(request)
        if body.get("stream"):
            upstream_request = client.build_request("POST", url, json=outgoing, headers=headers)
            try:
                response = await client.send(upstream_request, stream=True)
            except httpx.HTTPError as error:
                return _error(
                    502, f"the upstream at {upstream} cannot be reached ({type(error).__name__})"
                )
            if response.status_code >= 400:
                content = await response.aread()
                await response.aclose()
                return Response(content, response.status_code, media_type=_media(response))

            async def relay() -> AsyncIterator[bytes]:
                pieces: list[bytes] = []
                completed = False
                try:
                    async for chunk in response.aiter_raw():
                        pieces.append(chunk)
                        yield chunk
                    completed = True
                finally:
                    # A client that went away cancels this generator: closing the upstream
                    # response drops its connection, which stops the generation there.
                    await response.aclose()
                    body = b"".join(pieces)
                    # A client may hang up at [DONE] before the body ends: the reply is whole.
                    whole = completed or b"[DONE]" in body or _FINISHED.search(body) is not None
                    registry.finish(turn, _streamed_text(body) if whole else "")

            return StreamingResponse(
                relay(),
                status_code=response.status_code,
                media_type=_media(response),
                headers={"X-Autorecap-Chat": quote(chosen, safe=_SAFE)},
            )
        try:
            response = await client.post(url, json=outgoing, headers=headers)
        except httpx.HTTPError as error:
            return _error(
                502, f"the upstream at {upstream} cannot be reached ({type(error).__name__})"
            )
        if response.status_code < 400:
            registry.finish(turn, _reply_text(response.content))
        return Response(
            response.content,
            response.status_code,
            media_type=_media(response),
            headers={"X-Autorecap-Chat": quote(chosen, safe=_SAFE)},
        )

    async def passthrough(request: Request, path: str) -> Response:
        try:
            request_scope(request)
        except AutorecapError as error:
            return _error(error.http_status, str(error))
        client: httpx.AsyncClient = state["client"]
        body = await request.body()
        try:
            response = await client.request(
                request.method,
                f"{upstream}/{path}",
                content=body or None,
                headers=upstream_headers(request),
            )
        except httpx.HTTPError as error:
            return _error(
                502, f"the upstream at {upstream} cannot be reached ({type(error).__name__})"
            )
        return Response(response.content, response.status_code, media_type=_media(response))

    @app.post("/v1/chat/completions")
    async def chat_default(request: Request) -> Response:
        return await chat_completions(request, None)

    @app.post("/c/{chat_id}/v1/chat/completions")
    async def chat_named(chat_id: str, request: Request) -> Response:
        return await chat_completions(request, chat_id)

    @app.post("/v1/completions")
    async def completions_default(request: Request) -> Response:
        return await passthrough(request, "completions")

    @app.post("/c/{chat_id}/v1/completions")
    async def completions_named(chat_id: str, request: Request) -> Response:
        return await passthrough(request, "completions")

    @app.get("/v1/models")
    async def models_default(request: Request) -> Response:
        return await passthrough(request, "models")

    @app.get("/c/{chat_id}/v1/models")
    async def models_named(chat_id: str, request: Request) -> Response:
        return await passthrough(request, "models")

    return app


_FINISHED = re.compile(rb'"finish_reason"\s*:\s*"')
_SAFE = " !#$&'()*+,/:;=?@[]~"


def _header_text(value: str | None) -> str | None:
    """A header as the client meant it: HTTP carries bytes, which Starlette reads as Latin-1."""
    if not value:
        return None
    try:
        return value.encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return value


_error = error_response


def _media(response: httpx.Response) -> str:
    return str(response.headers.get("content-type", "application/json"))


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
