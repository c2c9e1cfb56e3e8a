"""The server's application: the proxy's routes, the REST API and the web UI on one FastAPI app,
around one `ProxyChats` (the open chats) and one job queue on the store; the recap worker, the
watch on other processes' saves and the collector's schedule run for the server's lifetime.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi_offline import FastAPIOffline
from starlette.exceptions import HTTPException as StarletteHTTPException

from autorecap.errors import AutorecapError
from autorecap.jobs.queue import JobQueue
from autorecap.recap.backend import RecapBackend
from autorecap.recap.backends import make_backend
from autorecap.server.access import KeyRing
from autorecap.server.api import api_router
from autorecap.server.api.errors import http_error_response, validation_error_response
from autorecap.server.chats.collector import Collector
from autorecap.server.chats.registry import OPEN_CHATS
from autorecap.server.errors import SafeJSONResponse, error_response
from autorecap.server.proxy.routes import add_proxy_routes
from autorecap.server.proxy.turns import ProxyChats
from autorecap.server.proxy.upstream import Upstream
from autorecap.server.web.routes import web_router
from autorecap.settings import Settings
from autorecap.store.location import open_store

log = logging.getLogger("autorecap.server")
SWITCH_INTERVAL_S = 0.0005


@dataclass
class ServerConfig:
    """What `autorecap serve` was started with."""

    upstream: str
    api_key_env: str | None = None
    db: str | Path | None = None
    """The store: a SQLite file, or a PostgreSQL URL (`open_store`)."""
    recap_backend: str = "offline"
    context_size: int | None = None
    worker: bool = True
    timeout_s: float = 600.0
    durable: bool = False
    """fsync every commit (SQLite synchronous=FULL) instead of at checkpoints."""
    keys_file: Path | None = None
    """With a keys file, every request needs a key and each key sees only its own chats."""
    open_chats: int = OPEN_CHATS
    """Chats kept in memory at most (`chats.registry`)."""


def shown_upstream(upstream: str) -> str:
    """The upstream as logs and error messages name it: without a user:password@ or a query
    string, either of which may hold a key ("...?key=sk-...")."""
    url = httpx.URL(upstream).copy_with(username=None, password=None)
    return str(url.copy_with(query=None)) + ("?…" if url.query else "")


def create_app(config: ServerConfig) -> FastAPI:
    """The proxy application (see the module docstring)."""
    upstream = config.upstream.rstrip("/")
    if not upstream.startswith(("http://", "https://")):
        raise AutorecapError(
            f"--upstream {config.upstream!r} must be an http(s) URL such as "
            "http://127.0.0.1:8080/v1"
        )
    shown = shown_upstream(upstream)
    keyring = KeyRing.from_file(config.keys_file) if config.keys_file is not None else None
    # WAL with synchronous=NORMAL by default: a crash of autorecap loses nothing committed,
    # a power cut may lose the last commits, which the client sends again anyway.
    store = open_store(config.db, durable=config.durable)
    queue = JobQueue(store)
    registry = ProxyChats(
        store,
        queue,
        context_size=config.context_size,
        keys_on=keyring is not None,
        open_chats=config.open_chats,
    )
    relay = Upstream(upstream, shown, timeout_s=config.timeout_s)

    def backend_for(settings: Settings) -> RecapBackend:
        if config.recap_backend == "upstream":
            # Every recap setting of the chat's owner (prompts, prefill, temperature, retries),
            # sent to the upstream with the upstream's key (the server's, else the one its
            # client sent), for the model `llm_model` names, else the one its clients ask for.
            return make_backend(
                settings,
                backend="openai",
                base_url=upstream,
                api_key_env=config.api_key_env or "",
                key=lambda: registry.seen_key,
                model=settings.llm_model or (lambda: registry.seen_model),
            )
        return make_backend(settings, backend="offline")

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # The event loop gives up the GIL at every socket call; with the recap worker busy it
        # would wait up to 5 ms (Python's default switch interval) to get it back, per call.
        switch_interval = sys.getswitchinterval()
        sys.setswitchinterval(SWITCH_INTERVAL_S)
        collector = Collector(registry.busy, registry.quiet_for, registry.idle)
        collector.start()
        registry.collector = collector
        sweeper = asyncio.create_task(_keep(collector))
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
                registry.collector = None
                collector.stop()
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

    add_proxy_routes(app, registry, relay, key_env=config.api_key_env, keyring=keyring)
    return app


async def _keep(collector: Collector) -> None:
    """The garbage collector's schedule while the server runs (`chats.collector`)."""
    while True:
        await asyncio.sleep(0.25)
        collector.tick()
