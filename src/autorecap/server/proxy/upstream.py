"""The proxy's connection to the upstream LLM server: send a request, relay the answer.

The HTTP client is aiohttp: one `ClientSession` per server, its connections kept alive and
pooled, TLS verified with the system's certificates. A proxy named by `HTTP_PROXY` or
`HTTPS_PROXY` is used unless `NO_PROXY` exempts the upstream's host, read once when the server
starts (the upstream does not change): aiohttp's own `trust_env` reads them, and `~/.netrc`, on
a worker thread for every request, two thread hops that doubled its CPU per request. No total
timeout (a long generation streams for minutes); a connection not made in `CONNECT_TIMEOUT_S`,
or an upstream silent for `timeout_s`, is given up.

The answer comes back as it arrives, bytes unchanged (the upstream is asked for no compression
and nothing is buffered), except that the server's upstream key is masked wherever the upstream
quotes it, across chunks and a stream's events too (`proxy.key_mask`). A client that leaves
closes the upstream connection, which stops the generation there. An upstream that fails in an
expected way (refused, timed out, broke off) is one log line naming the chat and the cause; the
client gets OpenAI's error shape: a 502, or, once a stream has begun, an error event and a
clean end.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import urllib.request
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Self
from urllib.parse import urlsplit

import aiohttp
import anyio
from fastapi.responses import Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from autorecap.server.errors import error_response
from autorecap.server.proxy.key_mask import KeyMask, StreamKeyMask

log = logging.getLogger("autorecap.server")

Done = Callable[[bytes | None, bool], Awaitable[None]]
"""`done(answer, streamed)`: the whole answer (masked), or None when there was none."""

_FINISHED = re.compile(rb'"finish_reason"\s*:\s*"')
CONNECT_TIMEOUT_S = 10.0
FAILURES = (aiohttp.ClientError, asyncio.TimeoutError, OSError)
"""How an upstream fails in the expected ways: refused, unknown host, TLS, timed out, broke
off, spoke no HTTP. Anything else is a bug of ours and keeps its traceback."""


class Upstream:
    """The upstream at `base` (`http(s)://host:port/v1`); `shown` is how errors name it (no
    credentials). `open()` it inside the running event loop (the server's lifespan)."""

    def __init__(self, base: str, shown: str, *, timeout_s: float) -> None:
        self.base = base.rstrip("/")
        self.shown = shown
        self.timeout_s = timeout_s
        self._session: aiohttp.ClientSession | None = None
        self.proxy: str | None = None
        """The proxy the upstream is reached through (`env_proxy`), if any."""

    async def open(self) -> None:
        if self._session is None:
            self.proxy = env_proxy(self.base)
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=0, keepalive_timeout=60),
                timeout=aiohttp.ClientTimeout(
                    total=None, sock_connect=CONNECT_TIMEOUT_S, sock_read=self.timeout_s
                ),
                auto_decompress=False,
                cookie_jar=aiohttp.DummyCookieJar(),  # one client's cookies are not another's
                skip_auto_headers=("User-Agent",),
            )

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def forward(
        self,
        method: str,
        path: str,
        content: bytes | None,
        headers: dict[str, str],
        *,
        stream: bool,
        chat: str = "",
        extra_headers: dict[str, str] | None = None,
        done: Done | None = None,
        key: str = "",
        completion: bool = True,
    ) -> Response:
        """Send the request upstream and relay the answer: streamed chunk by chunk as it
        arrives, bytes unchanged but for `key` masked; an error with its status and body.
        `done` gets the whole answer when it came, else None, after the client has it.
        `chat` names the request in the log. A `completion`'s success that is a web page or
        (whole) no JSON is answered as the upstream's failure."""
        await self.open()
        assert self._session is not None
        sent = {**headers, "Accept-Encoding": "identity"}
        url = f"{self.base}/{path}"
        try:
            response = await self._session.request(
                method, url, data=content, headers=sent, proxy=self.proxy
            )
        except FAILURES as error:
            self._failed(chat, error, "before answering")
            if done is not None:
                await done(None, stream)
            return self.unreachable(error)
        media = response.headers.get("content-type", "application/json")
        if completion and response.status < 400 and "html" in media:
            # A web page where an API answer belongs: the upstream URL names a site, not its
            # API (a client would choke on the page with a parse error of its own).
            response.close()
            log.warning("chat %r: the upstream at %s answered with a web page", chat, self.shown)
            if done is not None:
                await done(None, stream)
            return self.not_an_api(media)
        if not stream or response.status >= 400:
            mask = KeyMask(key.encode("utf-8"))
            try:
                body = await response.read()
            except FAILURES as error:
                response.close()
                self._failed(chat, error, "in the middle of its answer")
                if done is not None:
                    await done(None, stream)
                return self.unreachable(error, began=True)
            response.release()
            if completion and response.status < 400 and not _is_json(body):
                log.warning(
                    "chat %r: the upstream at %s answered %d with no JSON",
                    chat,
                    self.shown,
                    response.status,
                )
                if done is not None:
                    await done(None, stream)
                return self.not_an_api(media)
            body = mask.feed(body) + mask.flush()
            answer = body if response.status < 400 else None

            async def handed_on() -> None:
                if done is not None:
                    await done(answer, stream)

            # Handed on after the answer is sent: recording it is not the client's wait.
            return _Answer(
                body,
                response.status,
                media_type=media,
                headers=extra_headers if not stream else None,
            ).then(handed_on)

        outcome: list[bytes | None] = [None]
        # A stream of server-sent events is passed on whole events at a time, each masked (the
        # key may be spread over several deltas); anything else streamed, byte by byte.
        masked: KeyMask | StreamKeyMask = (
            StreamKeyMask(key.encode("utf-8"))
            if "event-stream" in media
            else KeyMask(key.encode("utf-8"))
        )

        left = [False]
        """The client went away (so the upstream connection was closed on purpose)."""

        def client_left() -> None:
            left[0] = True
            response.close()

        async def relay() -> AsyncGenerator[bytes, None]:
            pieces: list[bytes] = []
            completed = False
            try:
                try:
                    async for chunk in response.content.iter_any():
                        shown = masked.feed(chunk)
                        if shown:
                            pieces.append(shown)
                            yield shown
                except FAILURES as error:
                    if left[0]:
                        return  # the client left: closing the response ended the stream
                    self._failed(chat, error, "in the middle of a streamed answer")
                    yield masked.flush(broken=True) + _error_event(self.broke_off(error))
                    return
                rest = masked.flush()
                if rest:
                    pieces.append(rest)
                    yield rest
                completed = True
            finally:
                # A client that went away cancels this generator: closing the upstream
                # connection stops the generation there.
                if completed:
                    response.release()
                else:
                    response.close()
                streamed = b"".join(pieces)
                # A reply is whole when it says so ([DONE], or a finish_reason): a client may
                # hang up at [DONE] before the body ends, and a body that ends without either
                # was cut short, however cleanly.
                if b"[DONE]" in streamed or _FINISHED.search(streamed):
                    outcome[0] = streamed
                elif completed:
                    log.warning(
                        "chat %s: the upstream's stream ended without [DONE] or a "
                        "finish_reason; the answer is not recorded as the reply",
                        chat or "-",
                    )

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
        streamed.on_disconnect = client_left
        return streamed.then(after)

    def _failed(self, chat: str, error: BaseException, when: str) -> None:
        log.warning(
            "chat %r: the upstream at %s failed %s: %s", chat, self.shown, when, _cause(error)
        )

    def unreachable(self, error: BaseException, *, began: bool = False) -> Response:
        """The 502 for a request the upstream did not answer whole."""
        if began:
            return error_response(502, self.broke_off(error))
        if isinstance(error, aiohttp.ClientConnectorError | aiohttp.InvalidURL):
            what = "cannot be reached"
        else:
            what = "did not answer"
        return error_response(502, f"the upstream at {self.shown} {what} ({_cause(error)})")

    def not_an_api(self, media: str) -> Response:
        """The 502 for a successful answer that is no API answer (a web page, broken JSON)."""
        return error_response(
            502,
            f"the upstream at {self.shown} answered with {media or 'no content type'}, not "
            "an API answer: is the upstream URL the API's base (usually ending in /v1)?",
        )

    def broke_off(self, error: BaseException) -> str:
        return f"the upstream at {self.shown} broke off its answer ({_cause(error)})"


def env_proxy(url: str) -> str | None:
    """The proxy `HTTP_PROXY`/`HTTPS_PROXY` name for `url`, unless `NO_PROXY` exempts its host
    (the standard library's reading of the variables, as curl's and requests' are)."""
    parts = urlsplit(url)
    if urllib.request.proxy_bypass(parts.hostname or ""):
        return None
    return urllib.request.getproxies().get(parts.scheme) or None


def _cause(error: BaseException) -> str:
    """What went wrong, in a few words: the error's kind, and its message when it has one
    (aiohttp's name the host and port, never a key)."""
    kind = type(error).__name__
    if isinstance(error, asyncio.TimeoutError) and not str(error):
        return f"{kind}: no answer in time"
    text = str(error).strip()
    return f"{kind}: {text}" if text else kind


def _is_json(body: bytes) -> bool:
    try:
        json.loads(body)
    except ValueError:  # UnicodeDecodeError included
        return False
    return True


def _error_event(message: str) -> bytes:
    """An error in a stream that has begun, as OpenAI sends one (`data: {"error": ...}`, which
    the official clients raise as an APIError), then the stream's end."""
    error = {"error": {"message": message, "type": "upstream_error", "code": 502}}
    return b"\n\ndata: " + json.dumps(error).encode() + b"\n\ndata: [DONE]\n\n"


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
    watch for that runs the stream in an anyio task group; one plain task is enough here."""

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
                raise
        finally:
            watcher.cancel()


class _Stream(_Then, _Watched):
    """A streamed answer, then `after`: when the stream has ended, failed (the upstream
    dropped the connection or fell silent) or lost its client."""


async def _finally(after: After | None) -> None:
    if after is not None:
        with anyio.CancelScope(shield=True):  # even when the request's task is cancelled
            await after()
