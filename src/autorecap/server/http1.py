"""The proxy's HTTP/1.1 client for its upstream: keep-alive connections on asyncio, responses
parsed by httptools (the parser uvicorn uses).

Why not aiohttp, which the proxy used before: what the HTTP client costs per request is most of
what a relay adds to a reply, and the proxy has 2 ms for everything. Sending 200 KB chat
completions one after another to a loopback upstream in another process, aiohttp took about 1.4
times the wall time and 2.3 times the CPU of this client (555 against 409 us a request, 217
against 93 us of CPU; httpx 944 and 683: `bench/bench_upstream_client.py`). aiohttp builds URL,
request and response objects and runs its own stream reader for every request; this client
writes a request with one `writelines` call and hands each parsed piece of the answer straight to
the request waiting for it.

What it does: one request at a time per connection, idle connections kept for the next request
(an idle one the upstream has closed is dropped; a request sent on a kept connection that the
upstream closed before answering anything is sent once more, on a new connection), `https://`
through the standard `ssl` module, `user:password@` in the base URL as basic authentication,
bodies by length, chunked or up to the connection's close. A silent upstream (no byte for
`read_timeout`) is an `UpstreamTimeoutError`; a caller that gives up on a response closes its
connection, which is how the upstream learns that the client left.
"""

from __future__ import annotations

import asyncio
import base64
import ssl
from collections import deque
from collections.abc import AsyncIterator
from urllib.parse import unquote, urlsplit

import httptools

HIGH_WATER = 1 << 20
"""Bytes of an answer held unread before the connection stops reading (a slow client)."""


class UpstreamHTTPError(OSError):
    """The upstream could not be reached, or broke off, or answered something that is not
    HTTP. The class name says which (error messages show it)."""


class UpstreamDisconnectedError(UpstreamHTTPError):
    """The upstream closed the connection before its answer was whole."""


class UpstreamProtocolError(UpstreamHTTPError):
    """The upstream's answer is not valid HTTP/1.1."""


class UpstreamTimeoutError(UpstreamHTTPError, TimeoutError):
    """No byte from the upstream for the read timeout (or no connection in the connect
    timeout)."""


class _Connection(asyncio.Protocol):
    """One connection: the answer being read is parsed as it arrives, and whoever waits for it
    is woken at each piece."""

    headers: list[tuple[bytes, bytes]]
    error: BaseException | None

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.transport: asyncio.Transport | None = None
        self.lost = False
        self.aborted = False
        self.paused = False
        self._waiter: asyncio.Future[None] | None = None
        self.pieces: deque[bytes] = deque()
        self.begin()

    def begin(self) -> None:
        """Ready for the next request's answer."""
        self._parser = httptools.HttpResponseParser(self)
        self.pieces.clear()
        self.buffered = 0
        self.status = 0
        self.headers = []
        self.head_done = self.complete = self.until_close = self.answered = False
        self.keep_alive = False
        self.error = None

    # --- asyncio.Protocol ------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.answered = True
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as error:
            self.error = UpstreamProtocolError(f"the upstream's answer is not HTTP/1.1: {error}")
            self.abort()
            self._wake()

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        if not self.complete and self.error is None:
            if self.head_done and self.until_close and exc is None:
                self.complete = True  # a body without a length ends with the connection
            else:
                self.error = UpstreamDisconnectedError(
                    "the upstream closed the connection before its answer was whole"
                )
        self._wake()

    # --- httptools callbacks ---------------------------------------------------------------------

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name, value))

    def on_headers_complete(self) -> None:
        self.status = self._parser.get_status_code()
        self.head_done = True
        names = {name.lower() for name, _ in self.headers}
        self.until_close = (
            b"content-length" not in names
            and b"transfer-encoding" not in names
            and self.status >= 200
            and self.status not in (204, 304)
        )
        self._wake()

    def on_body(self, body: bytes) -> None:
        self.pieces.append(bytes(body))
        self.buffered += len(body)
        if self.buffered > HIGH_WATER and not self.paused and self.transport is not None:
            self.transport.pause_reading()
            self.paused = True
        self._wake()

    def on_message_complete(self) -> None:
        self.complete = True
        # Asked now: once the message is complete the parser is reset for the next one.
        self.keep_alive = self._parser.should_keep_alive()
        self._wake()

    # --- waiting ---------------------------------------------------------------------------------

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def wait(self, timeout: float) -> None:
        """Until something more of the answer came (or it failed): raises what went wrong."""
        if self.error is not None:
            raise self.error
        waiter = self._waiter = self.loop.create_future()
        timer = self.loop.call_later(timeout, _time_out, waiter, timeout)
        try:
            await waiter
        finally:
            timer.cancel()
            self._waiter = None
        if self.error is not None:
            raise self.error

    def take(self) -> bytes:
        """The answer's bytes received so far and not yet taken."""
        if len(self.pieces) == 1:
            data = self.pieces.popleft()
        else:
            data = b"".join(self.pieces)
            self.pieces.clear()
        self.buffered = 0
        if self.paused and self.transport is not None:
            self.paused = False
            self.transport.resume_reading()
        return data

    def reusable(self) -> bool:
        return self.complete and self.keep_alive and not self.lost

    def abort(self) -> None:
        if self.transport is not None and not self.aborted:
            self.transport.abort()
        self.lost = self.aborted = True


def _time_out(waiter: asyncio.Future[None], timeout: float) -> None:
    if not waiter.done():
        waiter.set_exception(UpstreamTimeoutError(f"the upstream sent nothing for {timeout:g} s"))


class UpstreamResponse:
    """An answer whose head has arrived; read its body with `read` or `iter_any`, then
    `release` it (the connection is kept for the next request) or `close` it."""

    def __init__(self, client: HTTP1Client, connection: _Connection) -> None:
        self._client = client
        self._connection = connection
        self.status = connection.status
        self.headers = {
            name.decode("latin-1").lower(): value.decode("latin-1")
            for name, value in connection.headers
        }

    async def read(self) -> bytes:
        """The whole body."""
        connection = self._connection
        parts: list[bytes] = []
        try:
            while True:
                if connection.pieces:
                    parts.append(connection.take())
                if connection.complete:
                    return parts[0] if len(parts) == 1 else b"".join(parts)
                await connection.wait(self._client.read_timeout)
        except BaseException:
            self.close()
            raise

    async def iter_any(self) -> AsyncIterator[bytes]:
        """The body as it arrives, a piece at a time."""
        connection = self._connection
        try:
            while True:
                if connection.pieces:
                    yield connection.take()
                elif connection.complete:
                    return
                else:
                    await connection.wait(self._client.read_timeout)
        except BaseException:
            self.close()
            raise

    def release(self) -> None:
        """Done with the answer: its connection serves the next request when the answer was
        read to its end, else it is closed."""
        self._client.put_back(self._connection)

    def close(self) -> None:
        """Close the connection (the upstream sees the client leave)."""
        self._connection.abort()


class HTTP1Client:
    """Requests to one upstream (`http(s)://host[:port][/prefix]`)."""

    def __init__(self, base: str, *, connect_timeout: float, read_timeout: float) -> None:
        parts = urlsplit(base)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{base!r} is not an http(s) URL")
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.prefix = parts.path.rstrip("/")
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self._ssl = ssl.create_default_context() if parts.scheme == "https" else None
        shown_host = f"[{self.host}]" if ":" in self.host else self.host
        default_port = self.port == (443 if self._ssl else 80)
        self._host_header = shown_host if default_port else f"{shown_host}:{self.port}"
        self._basic: str | None = None
        if parts.username is not None:
            pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
            self._basic = "Basic " + base64.b64encode(pair.encode("utf-8")).decode("ascii")
        self._idle: list[_Connection] = []
        self._loop: asyncio.AbstractEventLoop | None = None

    async def request(
        self, method: str, path: str, headers: dict[str, str], body: bytes | None
    ) -> UpstreamResponse:
        """Send `method` to `{prefix}/{path}` and wait for the answer's head."""
        head = self._head(method, path, headers, body)
        for attempt in range(2):
            connection = self._take()
            reused = connection is not None
            if connection is None:
                connection = await self._connect()
            connection.begin()
            assert connection.transport is not None
            connection.transport.writelines((head, body) if body else (head,))
            try:
                while not connection.head_done:
                    await connection.wait(self.read_timeout)
            except UpstreamDisconnectedError:
                connection.abort()
                if reused and not connection.answered and attempt == 0:
                    continue  # the upstream had closed the kept connection: a new one
                raise
            except BaseException:
                connection.abort()
                raise
            return UpstreamResponse(self, connection)
        raise AssertionError("unreachable")  # pragma: no cover

    def _head(self, method: str, path: str, headers: dict[str, str], body: bytes | None) -> bytes:
        lines = [f"{method} {self.prefix}/{path} HTTP/1.1", f"Host: {self._host_header}"]
        named = {name.lower() for name in headers}
        if self._basic is not None and "authorization" not in named:
            lines.append(f"Authorization: {self._basic}")
        for name, value in headers.items():
            if any(c in name or c in value for c in "\r\n\0"):
                raise UpstreamProtocolError(f"the header {name!r} holds a line break")
            lines.append(f"{name}: {value}")
        if body is not None or method in ("POST", "PUT", "PATCH"):
            lines.append(f"Content-Length: {len(body or b'')}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1", "replace")

    def _take(self) -> _Connection | None:
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # connections belong to the loop that made them
            self._idle.clear()
            self._loop = loop
        while self._idle:
            connection = self._idle.pop()
            if not connection.lost:
                return connection
        return None

    async def _connect(self) -> _Connection:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self.connect_timeout):
                _, connection = await loop.create_connection(
                    lambda: _Connection(loop),
                    self.host,
                    self.port,
                    ssl=self._ssl,
                    server_hostname=self.host if self._ssl is not None else None,
                )
        except TimeoutError as error:
            raise UpstreamTimeoutError(
                f"no connection to the upstream in {self.connect_timeout:g} s"
            ) from error
        return connection

    def put_back(self, connection: _Connection) -> None:
        if connection.reusable() and connection.loop is self._loop:
            self._idle.append(connection)
        else:
            connection.abort()

    async def close(self) -> None:
        """Close the idle connections."""
        while self._idle:
            self._idle.pop().abort()
