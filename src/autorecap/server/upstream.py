"""The proxy's connection to the upstream LLM server: send a request, relay the answer.

`server.http1`, keep-alive connections (see there why not aiohttp or httpx: per request, what
the HTTP client costs is most of what the proxy adds to a reply). The answer comes back as it
arrives, bytes unchanged (the upstream is asked for no compression), and a client that leaves
closes the upstream connection, which stops the generation there.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Self

import anyio
from fastapi.responses import Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from autorecap.server.http1 import HTTP1Client, UpstreamHTTPError
from autorecap.server.responses import error_response

Done = Callable[[bytes | None, bool], Awaitable[None]]
"""`done(answer, streamed)`: the whole answer, or None when there was none."""

_FINISHED = re.compile(rb'"finish_reason"\s*:\s*"')
CONNECT_TIMEOUT_S = 10.0


class Upstream:
    """The upstream at `base` (`http(s)://host:port/v1`); `shown` is how errors name it (no
    credentials). Open it inside the running event loop (the server's lifespan)."""

    def __init__(self, base: str, shown: str, *, timeout_s: float) -> None:
        self.base = base
        self.shown = shown
        self.timeout_s = timeout_s
        # No total limit: a long generation streams for minutes. A silent upstream (no byte for
        # `timeout_s`) is given up on. Reached directly, whatever HTTP_PROXY says.
        self._client = HTTP1Client(base, connect_timeout=CONNECT_TIMEOUT_S, read_timeout=timeout_s)

    async def close(self) -> None:
        await self._client.close()

    async def forward(
        self,
        method: str,
        path: str,
        content: bytes | None,
        headers: dict[str, str],
        *,
        stream: bool,
        extra_headers: dict[str, str] | None = None,
        done: Done | None = None,
        mask: Callable[[bytes], bytes] = lambda body: body,
    ) -> Response:
        """Send the request upstream and relay the answer: streamed chunk by chunk as it
        arrives, bytes unchanged; an error with its status and body (through `mask`). `done`
        gets the whole answer when it came, else None, after the client has it."""
        sent = {**headers, "Accept-Encoding": "identity"}
        try:
            response = await self._client.request(method, path, sent, content)
        except OSError as error:  # refused, unknown host, TLS, timeout (UpstreamHTTPError)
            if done is not None:
                await done(None, stream)
            return self.unreachable(error)
        media = response.headers.get("content-type", "application/json")
        if not stream or response.status >= 400:
            try:
                body = await response.read()
            except UpstreamHTTPError as error:
                if done is not None:
                    await done(None, stream)
                return self.unreachable(error)
            response.release()
            answer = body if response.status < 400 else None

            async def handed_on() -> None:
                if done is not None:
                    await done(answer, stream)

            # Handed on after the answer is sent: recording it is not the client's wait.
            return _Answer(
                mask(body),
                response.status,
                media_type=media,
                headers=extra_headers if not stream else None,
            ).then(handed_on)

        outcome: list[bytes | None] = [None]

        async def relay() -> AsyncGenerator[bytes, None]:
            pieces: list[bytes] = []
            completed = False
            try:
                async for chunk in response.iter_any():
                    pieces.append(chunk)
                    yield chunk
                completed = True
            finally:
                # A client that went away cancels this generator: closing the upstream
                # connection stops the generation there.
                if completed:
                    response.release()
                else:
                    response.close()
                streamed = b"".join(pieces)
                # A client may hang up at [DONE] before the body ends: the reply is whole.
                if completed or b"[DONE]" in streamed or _FINISHED.search(streamed):
                    outcome[0] = streamed

        body_iterator = relay()

        async def after() -> None:
            """Once the stream has ended, failed, or the client has left (the generator is
            closed first, so that the upstream connection is closed even when the client left
            while a chunk was being sent): hand the answer on."""
            await body_iterator.aclose()
            if done is not None:
                await done(outcome[0], True)

        streamed = _Stream(
            body_iterator, status_code=response.status, media_type=media, headers=extra_headers
        )
        streamed.on_disconnect = response.close
        return streamed.then(after)

    def unreachable(self, error: BaseException) -> Response:
        kind = type(error).__name__
        return error_response(502, f"the upstream at {self.shown} cannot be reached ({kind})")


After = Callable[[], Awaitable[None]]


class _Then:
    """A response that runs `after` once it is sent, or failed to be: whatever happens to the
    client or the upstream, the turn is always handed on (a background task would be skipped
    on an error)."""

    after: After | None = None

    def then(self, after: After) -> Self:
        self.after = after
        return self

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)  # type: ignore[misc]
        finally:
            await _finally(self.after)


class _Answer(_Then, Response):
    """A whole answer, then `after`."""


class _Watched(StreamingResponse):
    """A streamed answer whose client, when it leaves, closes the upstream connection at once
    (`on_disconnect`), even while the upstream is silent, which ends the stream. Starlette's own
    watch for that runs the stream in an anyio task group, which cost about 50 us per answer;
    here one plain task waits for the disconnect."""

    on_disconnect: Callable[[], None] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        gone = False

        async def watch() -> None:
            nonlocal gone
            while (await receive())["type"] != "http.disconnect":
                pass
            gone = True
            if self.on_disconnect is not None:
                self.on_disconnect()

        watcher = asyncio.get_running_loop().create_task(watch())
        try:
            await self.stream_response(send)
        except Exception:
            if not gone:
                raise  # the upstream broke off: uvicorn closes the client's connection
        finally:
            watcher.cancel()


class _Stream(_Then, _Watched):
    """A streamed answer, then `after`: when the stream has ended, failed (the upstream
    dropped the connection or fell silent) or lost its client."""


async def _finally(after: After | None) -> None:
    if after is not None:
        with anyio.CancelScope(shield=True):  # even when the request's task is cancelled
            await after()
