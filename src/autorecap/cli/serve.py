"""`serve`: the OpenAI-compatible memory proxy."""

from __future__ import annotations

import errno
import os
import socket
from contextlib import ExitStack, suppress
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from autorecap.cli._app import LOOPBACK, DbOption, app, err
from autorecap.errors import AutorecapError


class RecapSource(StrEnum):
    offline = "offline"
    upstream = "upstream"


@app.command()
def serve(
    upstream: Annotated[
        str, typer.Option(help="The OpenAI-compatible server to forward to (…/v1).")
    ],
    api_key_env: Annotated[
        str | None,
        typer.Option(
            help="Variable holding the upstream key (else the client's key is passed on)."
        ),
    ] = None,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.", min=1, max=65535)] = 8008,
    db: DbOption = None,
    recap_backend: Annotated[
        RecapSource, typer.Option(help="Who writes recaps: offline (free) or the upstream model.")
    ] = RecapSource.offline,
    context_size: Annotated[
        int | None,
        typer.Option(
            help="Trim history to this many tokens (default: leave the client's size).", min=256
        ),
    ] = None,
    keys_file: Annotated[
        Path | None,
        typer.Option(
            "--keys-file",
            help="Turn access control on: one `name: key` per line; every request then needs "
            "one of these keys, and each key sees only its own chats, jobs and settings.",
        ),
    ] = None,
    worker: Annotated[
        bool,
        typer.Option(
            "--worker/--no-worker",
            help="Make the recaps in this process (default), or leave the jobs to `autorecap "
            "worker` processes on the same --db: the server reads their recaps in as they are "
            "saved.",
        ),
    ] = True,
    open_chats: Annotated[
        int,
        typer.Option(
            help="Chats kept in memory at most; the least recently used one is saved and let "
            "go when another is loaded (its next request loads it again).",
            min=1,
        ),
    ] = 256,
    upstream_timeout: Annotated[
        float,
        typer.Option(
            help="Seconds the upstream may stay silent (before answering, or between two "
            "chunks of a stream) before the request fails with a 502 or an error event.",
            min=1,
        ),
    ] = 600.0,
    durable: Annotated[
        bool,
        typer.Option(
            "--durable",
            help="Make every save wait for the disk (SQLite synchronous=FULL); by default a "
            "power cut may lose the last turns, which the frontend sends again anyway.",
        ),
    ] = False,
) -> None:
    """Run the memory proxy: point any OpenAI-compatible frontend's base URL at it."""
    import uvicorn

    from autorecap.server.app import ServerConfig, create_app, shown_upstream

    with ExitStack() as open_sockets:  # closed however the server ends, or fails to start
        listeners = [open_sockets.enter_context(s) for s in _listen(host, port)]
        application = create_app(
            ServerConfig(
                upstream=upstream,
                api_key_env=api_key_env,
                db=db,
                recap_backend=recap_backend.value,
                context_size=context_size,
                keys_file=keys_file,
                durable=durable,
                worker=worker,
                open_chats=open_chats,
                timeout_s=upstream_timeout,
            )
        )
        base = base_url(host, port)
        err.print(
            f"autorecap proxy on {base}/v1 -> {shown_upstream(upstream)} "
            f"(recaps: {recap_backend.value}); per-chat base URL: {base}/c/CHAT/v1"
        )
        err.print(f"web UI: {base}/   API docs: {base}/docs")
        store = application.state.store
        shown_db = getattr(store, "name", db)  # a PostgreSQL URL without its password
        if store.keeps_settings:
            err.print(f"settings: in the database {shown_db} (every server on it reads the same)")
        if not worker:
            where = f" --db {shown_db}" if db is not None else ""
            where += f" --keys-file {keys_file}" if keys_file is not None else ""
            err.print(
                f"recaps: no worker in this process; run `autorecap worker{where}` beside it "
                "(its recaps are read in as they are saved)"
            )
        keyring = application.state.keyring
        if keyring is not None:
            err.print(
                f"access control: on, {len(keyring)} key(s) from {keys_file} (send "
                "`Authorization: Bearer KEY`; each key sees only its own chats)"
            )
        else:
            err.print("access control: off (`--keys-file FILE` turns API keys on)")
            if host not in LOOPBACK:
                err.print(
                    f"[yellow]warning:[/] listening on {host} without keys: anyone who can reach "
                    "this address can read and change every chat"
                )
        config = uvicorn.Config(application, host=host, port=port, log_level="warning")
        server = uvicorn.Server(config)
        with suppress(KeyboardInterrupt):  # Ctrl-C: uvicorn has shut down, a normal end
            server.run(sockets=listeners)
    if not server.started:
        raise SystemExit(STARTUP_FAILURE)


STARTUP_FAILURE = 3
"""The exit code of a server that failed to start (uvicorn's)."""
BACKLOG = 2048
"""Connections waiting to be accepted (uvicorn's default)."""


def base_url(host: str, port: int) -> str:
    """The URL a client reaches the server at (an IPv6 address in brackets)."""
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def _listen(host: str, port: int) -> list[socket.socket]:
    """The server's sockets, listening before anything starts, so that an address that cannot
    be listened on fails with what to do (uvicorn would say so only after the banner, as a
    bare OS error); uvicorn then serves on them instead of binding its own. One per address
    the host names, as uvicorn binds them ("localhost" may be 127.0.0.1 and ::1), an IPv6 one
    for IPv6 only. Listening at once holds the port: a bound socket that does not listen yet
    would not keep another server from binding it too."""
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as error:
        raise AutorecapError(
            f"cannot listen on {host}:{port} ({error.strerror}): check --host"
        ) from None
    listeners: list[socket.socket] = []
    try:
        for family, _kind, _protocol, _name, address in dict.fromkeys(found):
            # Bound and listening, an IPv6 socket for IPv6 only, as asyncio binds them.
            listeners.append(socket.create_server(address, family=family, backlog=BACKLOG))
    except OSError as error:
        for listener in listeners:
            listener.close()
        if error.errno == errno.EADDRINUSE:
            raise AutorecapError(
                f"port {port} on {host} is in use (another server is listening there): "
                "stop it, or pick another port with --port"
            ) from None
        reason = os.strerror(error.errno) if error.errno else str(error)
        raise AutorecapError(
            f"cannot listen on {host}:{port} ({reason}): check --host and --port"
        ) from None
    return listeners
