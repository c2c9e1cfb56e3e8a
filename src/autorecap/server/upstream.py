"""The proxy's connection to the upstream LLM server: send a request, relay the answer.

aiohttp, one session with keep-alive connections: on a 200 KB chat completion it costs less than
half what httpx does per request, which is most of what the proxy adds to a reply. The answer
comes back as it arrives, bytes unchanged (the upstream is asked for no compression), and a
client that leaves closes the upstream connection, which stops the generation there.
"""

from __future__ import annotations

import re
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Self

import aiohttp
import anyio
from fastapi.responses import Response, StreamingResponse
from starlette.types import Receive, Scope, Send

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
        self._session: aiohttp.ClientSession | None = None

    def session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=1000, limit_per_host=0),
                # No total limit: a long generation streams for minutes. A silent upstream
                # (no byte for `timeout_s`) is given up on.
                timeout=aiohttp.ClientTimeout(
                    total=None, sock_connect=CONNECT_TIMEOUT_S, sock_read=self.timeout_s
                ),
                trust_env=False,  # the upstream is reached directly, whatever HTTP_PROXY says
            )
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

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
        url = f"{self.base}/{path}"
        sent = {**headers, "Accept-Encoding": "identity"}
        try:
            response = await self.session().request(method, url, data=content, headers=sent)
        except (TimeoutError, aiohttp.ClientError) as error:
            if done is not None:
                await done(None, stream)
            return self.unreachable(error)
        media = response.headers.get("Content-Type", "application/json")
        if not stream or response.status >= 400:
            try:
                body = await response.read()
            except (TimeoutError, aiohttp.ClientError) as error:
                response.close()
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
                async for chunk in response.content.iter_any():
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

        return _Stream(
            body_iterator, status_code=response.status, media_type=media, headers=extra_headers
        ).then(after)

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


class _Stream(_Then, StreamingResponse):
    """A streamed answer, then `after`: when the stream has ended, failed (the upstream
    dropped the connection or fell silent) or lost its client."""


async def _finally(after: After | None) -> None:
    if after is not None:
        with anyio.CancelScope(shield=True):  # even when the request's task is cancelled
            await after()
