"""The proxy's HTTP/1.1 client (`server.http1`) against scripted loopback servers that speak
raw HTTP: keep-alive reuse, a kept connection the upstream closed, the three ways a body ends,
timeouts, garbage, credentials, https, and a response the caller gives up on."""

from __future__ import annotations

import asyncio
import base64
import ssl
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest
import trustme

from autorecap.server.http1 import (
    HTTP1Client,
    UpstreamDisconnectedError,
    UpstreamProtocolError,
    UpstreamTimeoutError,
)

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


class Server:
    """A loopback server that runs `handler` on every connection and keeps what it saw."""

    def __init__(self, handler: Handler, tls: ssl.SSLContext | None = None) -> None:
        self.handler = handler
        self.tls = tls
        self.connections = 0
        self.heads: list[bytes] = []
        self.closed = asyncio.Event()
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> Server:
        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self.connections += 1
            try:
                await self.handler(reader, writer)
            except (ConnectionError, asyncio.IncompleteReadError):
                pass
            finally:
                writer.close()

        self._server = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=self.tls)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()

    @property
    def base(self) -> str:
        assert self._server is not None
        port = self._server.sockets[0].getsockname()[1]
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{port}/v1"

    async def read_request(self, reader: asyncio.StreamReader) -> bytes:
        """One request's head and body (by Content-Length); b"" when the client closed."""
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            return b""
        self.heads.append(head)
        length = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        return head + await reader.readexactly(length)


def run(test: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(asyncio.wait_for(test(), timeout=20))


def answer(body: bytes, *, status: bytes = b"200 OK", extra: bytes = b"") -> bytes:
    return (
        b"HTTP/1.1 "
        + status
        + b"\r\nContent-Type: application/json\r\n"
        + extra
        + b"Content-Length: %d\r\n\r\n" % len(body)
        + body
    )


def test_a_kept_connection_serves_the_next_request() -> None:
    async def test() -> None:
        async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            while await server.read_request(reader):
                writer.write(answer(b'{"ok": true}'))

        async with Server(handler) as server:
            port = server.base.split(":")[2].split("/")[0]
            client = HTTP1Client(server.base, connect_timeout=5, read_timeout=5)
            for _ in range(3):
                response = await client.request("POST", "chat/completions", {}, b'{"a": 1}')
                assert response.status == 200
                assert response.headers["content-type"] == "application/json"
                assert await response.read() == b'{"ok": true}'
                response.release()
            await client.close()
        assert server.connections == 1
        assert server.heads[0].startswith(b"POST /v1/chat/completions HTTP/1.1\r\n")
        assert f"Host: 127.0.0.1:{port}\r\n".encode() in server.heads[0]
        assert b"Content-Length: 8\r\n" in server.heads[0]

    run(test)


def test_a_kept_connection_the_upstream_closed_is_replaced() -> None:
    async def test() -> None:
        async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            if server.connections == 1:
                await server.read_request(reader)
                writer.write(answer(b"1"))
                await writer.drain()
                # Read the next request, then hang up without a word: the race of a
                # keep-alive timeout with the client's next request.
                await server.read_request(reader)
                return
            while await server.read_request(reader):
                writer.write(answer(b"2"))

        async with Server(handler) as server:
            client = HTTP1Client(server.base, connect_timeout=5, read_timeout=5)
            first = await client.request("POST", "x", {}, b"{}")
            assert await first.read() == b"1"
            first.release()
            second = await client.request("POST", "x", {}, b"{}")
            assert await second.read() == b"2"
            second.release()
            await client.close()
        assert server.connections == 2

    run(test)


def test_a_new_connection_closed_before_the_answer_is_an_error() -> None:
    async def test() -> None:
        async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await server.read_request(reader)  # then hang up

        async with Server(handler) as server:
            client = HTTP1Client(server.base, connect_timeout=5, read_timeout=5)
            with pytest.raises(UpstreamDisconnectedError):
                await client.request("POST", "x", {}, b"{}")
        assert server.connections == 1  # not sent twice

    run(test)


@pytest.mark.parametrize(
    "raw",
    [
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\nhello world",
        b"HTTP/1.0 200 OK\r\nConnection: close\r\n\r\nhello world",
    ],
    ids=["chunked", "length", "until-close"],
)
def test_each_kind_of_body_is_read_whole(raw: bytes) -> None:
    async def test() -> None:
        async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await server.read_request(reader)
            writer.write(raw)
            await writer.drain()

        async with Server(handler) as server:
            client = HTTP1Client(server.base, connect_timeout=5, read_timeout=5)
            response = await client.request("GET", "models", {}, None)
            assert await response.read() == b"hello world"
            response.release()
            await client.close()
        assert b"Content-Length" not in server.heads[0]  # a GET with no body says nothing

    run(test)


def test_a_streamed_body_comes_piece_by_piece_as_it_is_sent() -> None:
    async def test() -> None:
        go_on = asyncio.Event()

        async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await server.read_request(reader)
            writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nfirst \r\n")
            await writer.drain()
            await go_on.wait()
            writer.write(b"6\r\nsecond\r\n0\r\n\r\n")
            await writer.drain()
            await reader.read()

        async with Server(handler) as server:
            client = HTTP1Client(server.base, connect_timeout=5, read_timeout=5)
            response = await client.request("POST", "x", {}, b"{}")
            pieces = response.iter_any()
            assert await anext(pieces) == b"first "  # before the server sent the rest
            go_on.set()
            assert [piece async for piece in pieces] == [b"second"]
            response.release()
            await client.close()

    run(test)


def test_a_silent_upstream_times_out() -> None:
    async def test() -> None:
        async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await server.read_request(reader)
            await reader.read()  # says nothing until the client goes

        async with Server(handler) as server:
            client = HTTP1Client(server.base, connect_timeout=5, read_timeout=0.2)
            with pytest.raises(UpstreamTimeoutError, match=r"sent nothing for 0\.2 s"):
                await client.request("POST", "x", {}, b"{}")
            await client.close()

    run(test)


def test_an_answer_that_is_not_http_is_an_error() -> None:
    async def test() -> None:
        async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await server.read_request(reader)
            writer.write(b"SSH-2.0-OpenSSH_9.2\r\n\r\n")
            await writer.drain()
            await reader.read()

        async with Server(handler) as server:
            client = HTTP1Client(server.base, connect_timeout=5, read_timeout=5)
            with pytest.raises(UpstreamProtocolError, match=r"not HTTP/1\.1"):
                await client.request("POST", "x", {}, b"{}")

    run(test)


def test_credentials_in_the_url_are_sent_unless_a_key_is() -> None:
    async def test() -> None:
        async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            while await server.read_request(reader):
                writer.write(answer(b"{}"))

        async with Server(handler) as server:
            with_credentials = server.base.replace("http://", "http://agent:p%40ss@")
            client = HTTP1Client(with_credentials, connect_timeout=5, read_timeout=5)
            for headers in ({}, {"Authorization": "Bearer sk-key"}):
                response = await client.request("POST", "x", headers, b"{}")
                await response.read()
                response.release()
            await client.close()
        basic = base64.b64encode(b"agent:p@ss")
        assert b"Authorization: Basic " + basic + b"\r\n" in server.heads[0]
        assert b"Authorization: Bearer sk-key\r\n" in server.heads[1]
        assert b"Basic" not in server.heads[1]

    run(test)


def test_a_refused_connection_is_an_os_error() -> None:
    async def test() -> None:
        async with Server(lambda reader, writer: asyncio.sleep(0)) as server:
            base = server.base
        client = HTTP1Client(base, connect_timeout=5, read_timeout=5)
        with pytest.raises(ConnectionRefusedError):
            await client.request("POST", "x", {}, b"{}")

    run(test)


def test_a_response_given_up_on_closes_its_connection() -> None:
    async def test() -> None:
        async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await server.read_request(reader)
            writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\none\r\n")
            await writer.drain()
            assert await reader.read() == b""  # the client closed the connection
            server.closed.set()

        async with Server(handler) as server:
            client = HTTP1Client(server.base, connect_timeout=5, read_timeout=5)
            response = await client.request("POST", "x", {}, b"{}")
            pieces = response.iter_any()
            assert await anext(pieces) == b"one"
            await pieces.aclose()  # as when the proxy's client hangs up
            await asyncio.wait_for(server.closed.wait(), timeout=5)
            # The connection is not kept: the next request opens another.
            response.release()
            assert client._take() is None

    run(test)


def test_a_header_with_a_line_break_is_refused_before_sending() -> None:
    async def test() -> None:
        async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await server.read_request(reader)

        async with Server(handler) as server:
            client = HTTP1Client(server.base, connect_timeout=5, read_timeout=5)
            with pytest.raises(UpstreamProtocolError, match="line break"):
                await client.request("POST", "x", {"X-Evil": "a\r\nHost: elsewhere"}, b"{}")
        assert server.connections == 0

    run(test)


def test_only_http_urls_are_accepted() -> None:
    with pytest.raises(ValueError, match="not an http"):
        HTTP1Client("ftp://example.com/v1", connect_timeout=5, read_timeout=5)


def test_an_https_upstream_is_reached_and_its_certificate_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    authority = trustme.CA()
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert("127.0.0.1").configure_cert(server_tls)

    async def test() -> None:
        async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            while await server.read_request(reader):
                writer.write(answer(b'{"over": "tls"}'))

        async with Server(handler, tls=server_tls) as server:
            # Not trusted: the certificate is refused, nothing is sent.
            untrusting = HTTP1Client(server.base, connect_timeout=5, read_timeout=5)
            with pytest.raises(ssl.SSLCertVerificationError):
                await untrusting.request("POST", "x", {}, b"{}")
            # Trusted through the usual SSL_CERT_FILE: the request goes through.
            bundle = tmp_path / "ca.pem"
            authority.cert_pem.write_to_path(str(bundle))
            monkeypatch.setenv("SSL_CERT_FILE", str(bundle))
            client = HTTP1Client(server.base, connect_timeout=5, read_timeout=5)
            response = await client.request("POST", "x", {}, b"{}")
            assert await response.read() == b'{"over": "tls"}'
            response.release()
            await client.close()
        assert b"Host: 127.0.0.1:" in server.heads[0]

    run(test)


def test_a_large_answer_read_slowly_arrives_whole() -> None:
    """More than the client holds unread (`HIGH_WATER`): it stops reading while the caller is
    behind, and reads on as the caller takes what came."""
    block = bytes(range(256)) * 4096  # 1 MiB
    blocks = 6

    async def test() -> None:
        async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            while await server.read_request(reader):
                writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
                for _ in range(blocks):
                    writer.write(b"%x\r\n%s\r\n" % (len(block), block))
                    await writer.drain()
                writer.write(b"0\r\n\r\n")
                await writer.drain()

        async with Server(handler) as server:
            client = HTTP1Client(server.base, connect_timeout=5, read_timeout=5)
            response = await client.request("GET", "models", {}, None)
            received = bytearray()
            async for piece in response.iter_any():
                received += piece
                await asyncio.sleep(0.01)  # a slow client
            assert received == block * blocks
            response.release()
            again = await client.request("GET", "models", {}, None)  # the same connection
            assert await again.read() == block * blocks
            again.release()
            await client.close()
        assert server.connections == 1

    run(test)
