"""A real memory proxy between a real client and a real upstream, all on loopback.

- `upstream`: a scripted OpenAI-compatible server (`ThreadingHTTPServer` in a thread) that
  answers chat completions as JSON or as server-sent events written as HTTP/1.1 chunks (one
  chunk per write, flushed, with a pause between writes), `GET /v1/models` and
  `POST /v1/completions`, and scripted error statuses. It records every request and every byte
  it writes, and notices when a client goes away in the middle of a stream. `hold(...)` keeps
  the chat completions it matches waiting until the test releases them.
- `start_proxy(...)`: `create_app(ServerConfig(...))` served by a real uvicorn server in a thread.
- `openai_client(...)` / `http`: the official `openai` client and httpx, closed after the test.

Every socket is bound to 127.0.0.1 and every wait has a deadline.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
import uvicorn

from autorecap.core.model import Chat
from autorecap.profiles import Profiles, profiles_of
from autorecap.server.app import ServerConfig, create_app
from autorecap.server.proxy.turns import ProxyChats
from autorecap.store import open_store

VOYAGE = [
    "Mira hides the stolen ledger under the captain's bunk.",
    "Vos arrives at the docks demanding forty crowns.",
    "We pay Vos twenty crowns and promise the rest by spring.",
    "The Heron slips out of the harbour at dusk.",
    "A storm catches us two days east of Corsa.",
    "The mast cracks and Tamsin lashes it with spare rope.",
    "At dawn the coast of Ilmar shows through the rain.",
    "Mira sells the ledger to the harbour master for a pardon.",
]
"""A short story, one line per message, for tests that want recaps with something to say."""

_PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy")

MODELS_BODY = (
    b'{"object": "list", "data": [{"id": "loopback-7b", "object": "model", '
    b'"created": 1700000000, "owned_by": "tests"}]}'
)
COMPLETION_BODY = (
    b'{"id": "cmpl-1", "object": "text_completion", "created": 1700000000, '
    b'"model": "loopback-7b",  "choices": [{"index": 0, "text": " and so it began.", '
    b'"finish_reason": "stop", "logprobs": null}], '
    b'"usage": {"prompt_tokens": 3, "completion_tokens": 5, "total_tokens": 8}}'
)


# --- the upstream ------------------------------------------------------------------------------


@dataclass
class Recorded:
    """One request as the upstream saw it."""

    method: str
    path: str
    headers: dict[str, str]
    """Header names lower-cased."""
    raw: bytes
    json: Any

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.json["messages"])

    @property
    def contents(self) -> list[str]:
        return [str(m.get("content")) for m in self.messages]


@dataclass
class Answer:
    """One scripted chat-completion answer. `kind`: reply | stream | status."""

    kind: str
    text: str = ""
    pieces: list[str] = field(default_factory=list)
    delay: float = 0.0
    tail: float = 0.0
    """A pause after the last event (`[DONE]`) before the body ends."""
    status: int = 200
    body: bytes = b""
    content_type: str = "application/json"
    held: HeldRequest | None = None
    """Answer only once this request's hold is released."""
    break_after: int | None = None
    """Drop the connection after this many events (streamed) or half the body (whole)."""


class Hold:
    """Chat completions that match `predicate` wait until `release()` (at most `timeout` s,
    so that nothing hangs), then get `reply`. Requests arriving after the release pass."""

    def __init__(self, predicate: Callable[[Recorded], bool], reply: str, timeout: float) -> None:
        self.predicate = predicate
        self.reply = reply
        self.timeout = timeout
        self.released = threading.Event()
        self.arrived = threading.Event()
        self.held: list[HeldRequest] = []

    def release(self) -> None:
        self.released.set()

    def first(self, timeout: float = 10.0) -> HeldRequest:
        """The first request held, once it has arrived."""
        assert self.arrived.wait(timeout), f"no request was held within {timeout} s"
        return self.held[0]


@dataclass
class HeldRequest:
    """One request a `Hold` kept waiting."""

    recorded: Recorded
    hold: Hold
    arrived: float
    """`time.monotonic()` when it arrived."""
    answered: threading.Event = field(default_factory=threading.Event)
    """Set once its answer has been written."""
    timed_out: bool = False
    """True when it was answered because the hold timed out, not because it was released."""

    @property
    def prompt(self) -> str:
        return "\n".join(self.recorded.contents)

    def wait(self) -> None:
        self.timed_out = not self.hold.released.wait(self.hold.timeout)


@dataclass
class StreamLog:
    """What the upstream wrote for one streamed answer."""

    writes: list[bytes] = field(default_factory=list)
    """The payload of each HTTP chunk, in order."""
    started: list[float] = field(default_factory=list)
    """`time.monotonic()` just before each chunk was written."""
    done: threading.Event = field(default_factory=threading.Event)
    broken: threading.Event = field(default_factory=threading.Event)
    """Set when a write failed because the client had closed the connection."""

    @property
    def payload(self) -> bytes:
        return b"".join(self.writes)


def sse_chunk(content: str, *, index: int, last: bool = False) -> bytes:
    """One `chat.completion.chunk` event as the upstream writes it."""
    delta: dict[str, Any] = {"content": content}
    if index == 0:
        delta = {"role": "assistant", "content": content}
    event = {
        "id": "chatcmpl-stream",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": "loopback-7b",
        "choices": [{"index": 0, "delta": delta, "finish_reason": "stop" if last else None}],
    }
    return b"data: " + json.dumps(event, ensure_ascii=False).encode() + b"\n\n"


def reply_body(text: str) -> bytes:
    """A chat completion written the way no JSON library in the proxy would re-write it
    (odd spacing, raw UTF-8), so that byte equality means the bytes were passed through."""
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "loopback-7b",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }
    return json.dumps(body, ensure_ascii=False, indent=1, separators=(" ,", " :  ")).encode()


class Upstream:
    """The scripted upstream. Unscripted chat completions get `Reply N.` (N counts the chat
    completions), as JSON or as a two-chunk stream, whichever the request asked for."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._script: deque[Answer] = deque()
        self._holds: list[Hold] = []
        self._standing: list[tuple[Callable[[Recorded], bool], str]] = []
        self.requests: list[Recorded] = []
        self.bodies: list[bytes] = []
        """The body bytes of every non-streamed answer, in order."""
        self.streams: list[StreamLog] = []
        self.stream_started = threading.Event()
        self.stopping = threading.Event()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(self))
        self.httpd.daemon_threads = True
        self.port: int = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self._thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    # --- scripting -----------------------------------------------------------------------------

    def reply(self, text: str) -> Upstream:
        self._push(Answer("reply", text=text))
        return self

    def stream(
        self,
        pieces: list[str],
        *,
        delay: float = 0.0,
        tail: float = 0.0,
        break_after: int | None = None,
    ) -> Upstream:
        self._push(
            Answer("stream", pieces=list(pieces), delay=delay, tail=tail, break_after=break_after)
        )
        return self

    def broken_reply(self, text: str) -> Upstream:
        """A whole answer whose connection drops halfway through its body."""
        self._push(Answer("reply", text=text, break_after=0))
        return self

    def error(self, status: int, body: bytes, content_type: str = "application/json") -> Upstream:
        self._push(Answer("status", status=status, body=body, content_type=content_type))
        return self

    def hold(
        self, predicate: Callable[[Recorded], bool], *, reply: str, timeout: float = 10.0
    ) -> Hold:
        """Keep the chat completions `predicate` matches waiting until `Hold.release()`
        (before the script is consulted: they do not use up scripted answers)."""
        hold = Hold(predicate, reply, timeout)
        with self._lock:
            self._holds.append(hold)
        return hold

    def answer_all(self, predicate: Callable[[Recorded], bool], reply: str) -> None:
        """Answer every chat completion `predicate` matches with `reply`, not held (after the
        holds, before the script)."""
        with self._lock:
            self._standing.append((predicate, reply))

    def forget(self) -> None:
        """Let go of what was recorded so far (a long test's memory is not the proxy's)."""
        with self._lock:
            self.requests.clear()
            self.bodies.clear()
            self.streams.clear()

    def _push(self, answer: Answer) -> None:
        with self._lock:
            self._script.append(answer)

    # --- inspecting ----------------------------------------------------------------------------

    @property
    def chat_requests(self) -> list[Recorded]:
        with self._lock:
            return [r for r in self.requests if r.path.endswith("/chat/completions")]

    @property
    def last(self) -> Recorded:
        with self._lock:
            return self.requests[-1]

    # --- the server's side ---------------------------------------------------------------------

    def _record(self, recorded: Recorded) -> Answer | None:
        with self._lock:
            self.requests.append(recorded)
            if not recorded.path.endswith("/chat/completions"):
                return None
            for hold in self._holds:
                if not hold.released.is_set() and hold.predicate(recorded):
                    held = HeldRequest(recorded, hold, time.monotonic())
                    hold.held.append(held)
                    hold.arrived.set()
                    return Answer("reply", text=hold.reply, held=held)
            for predicate, reply in self._standing:
                if predicate(recorded):
                    return Answer("reply", text=reply)
            if self._script:
                return self._script.popleft()
            number = sum(1 for r in self.requests if r.path.endswith("/chat/completions"))
        text = f"Reply {number}."
        if isinstance(recorded.json, dict) and recorded.json.get("stream"):
            return Answer("stream", pieces=[f"Reply {number}", "."])
        return Answer("reply", text=text)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.stopping.set()  # wakes handlers pausing between chunks
        with self._lock:
            for hold in self._holds:
                hold.release()
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join(timeout=5)


def _make_handler(upstream: Upstream) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # Headers and body go out in separate writes: with Nagle's algorithm on, the body
        # waits for the client's delayed ACK of the headers, 40 ms a request on a kept-alive
        # connection.
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def handle(self) -> None:
            # The proxy may drop a kept-alive connection: nothing to answer then.
            with contextlib.suppress(ConnectionResetError, BrokenPipeError, ConnectionAbortedError):
                super().handle()

        def do_GET(self) -> None:
            self._serve(b"")

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            self._serve(self.rfile.read(length) if length else b"")

        def _serve(self, raw: bytes) -> None:
            try:
                parsed: Any = json.loads(raw) if raw else None
            except ValueError:
                parsed = None
            recorded = Recorded(
                method=self.command,
                path=self.path,
                headers={k.lower(): v for k, v in self.headers.items()},
                raw=raw,
                json=parsed,
            )
            answer = upstream._record(recorded)
            held = answer.held if answer is not None else None
            if held is not None:
                held.wait()
            try:
                if answer is None:
                    self._other(recorded)
                elif answer.kind == "stream":
                    self._stream(answer)
                elif answer.kind == "status":
                    self._send(answer.status, answer.body, answer.content_type)
                else:
                    body = reply_body(answer.text)
                    with upstream._lock:
                        upstream.bodies.append(body)
                    if answer.break_after is not None:
                        self._send_half(body)
                    else:
                        self._send(200, body, "application/json")
            except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
                self.close_connection = True
            finally:
                if held is not None:
                    held.answered.set()

        def _other(self, recorded: Recorded) -> None:
            if recorded.method == "GET" and recorded.path == "/v1/models":
                self._send(200, MODELS_BODY, "application/json")
            elif recorded.method == "POST" and recorded.path.endswith("/completions"):
                if isinstance(recorded.json, dict) and recorded.json.get("stream"):
                    self._stream(Answer("stream", pieces=[" and so", " it began."]))
                else:
                    self._send(200, COMPLETION_BODY, "application/json")
            else:
                self._send(404, b'{"error": {"message": "no such route"}}', "application/json")

        def _send(self, status: int, body: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            self.wfile.flush()

        def _send_half(self, body: bytes) -> None:
            """Headers that promise the whole body, then half of it and a closed connection."""
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            self.close_connection = True

        def _stream(self, answer: Answer) -> None:
            log = StreamLog()
            with upstream._lock:
                upstream.streams.append(log)
            writes = [
                sse_chunk(piece, index=i, last=i == len(answer.pieces) - 1)
                for i, piece in enumerate(answer.pieces)
            ]
            writes[-1] += b"data: [DONE]\n\n"
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.wfile.flush()
            upstream.stream_started.set()
            try:
                for number, payload in enumerate(writes):
                    if number == answer.break_after:
                        self.close_connection = True  # no last chunk: a broken stream
                        return
                    if number and answer.delay and upstream.stopping.wait(answer.delay):
                        self.close_connection = True
                        return
                    log.started.append(time.monotonic())
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(payload), payload))
                    self.wfile.flush()
                    log.writes.append(payload)
                if answer.tail and upstream.stopping.wait(answer.tail):
                    self.close_connection = True
                    return
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
                log.broken.set()
                self.close_connection = True
            finally:
                log.done.set()

    return Handler


@pytest.fixture(autouse=True)
def _no_proxies(monkeypatch: pytest.MonkeyPatch) -> None:
    """httpx (in the proxy and in the clients) honours proxy variables: stay on loopback."""
    for name in _PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")


@pytest.fixture
def upstream() -> Iterator[Upstream]:
    server = Upstream()
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def dead_url() -> str:
    """A loopback base URL with nothing listening."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


# --- the proxy ---------------------------------------------------------------------------------


@dataclass
class Proxy:
    """A running proxy."""

    port: int
    db: str | Path
    """Its store: a SQLite file, or a PostgreSQL URL."""
    server: uvicorn.Server
    thread: threading.Thread

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        """The OpenAI base URL."""
        return f"{self.origin}/v1"

    def chat_url(self, chat_id: str) -> str:
        return f"{self.origin}/c/{chat_id}/v1"

    def settled(self) -> None:
        """Wait for the saves the proxy makes after its replies."""
        registry: ProxyChats = self.server.config.app.state.registry
        registry.flush()

    def stored(self, chat_id: str) -> Chat:
        """The chat as saved in the store (read through a second connection), once the
        proxy's pending saves are done."""
        self.settled()
        store = open_store(self.db)
        try:
            return store.load_chat(chat_id)
        finally:
            store.close()

    def chat_ids(self) -> list[str]:
        self.settled()
        store = open_store(self.db)
        try:
            return sorted(info.id for info in store.list_chats())
        finally:
            store.close()

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=15)
        assert not self.thread.is_alive(), "the proxy did not shut down"


StartProxy = Callable[..., Proxy]


@pytest.fixture
def db_path(tmp_path: Path) -> str | Path:
    """The proxy's store: a SQLite file (a module whose tests run on both backends makes it
    its `db_url`)."""
    return tmp_path / "proxy.db"


@pytest.fixture
def installation_settings(db_path: str | Path) -> Iterator[Profiles]:
    """The settings the proxy reads: `AUTORECAP_HOME`'s file on SQLite, the database's on
    PostgreSQL (`profiles.profiles_of`)."""
    store = open_store(db_path)
    try:
        yield profiles_of("", store)
    finally:
        store.close()


@pytest.fixture
def start_proxy(upstream: Upstream, db_path: str | Path) -> Iterator[StartProxy]:
    """Start a proxy (`worker`, `upstream_url` and the other `ServerConfig` fields may be
    given); every proxy started is stopped after the test."""
    started: list[Proxy] = []

    def start(*, upstream_url: str | None = None, worker: bool = False, **options: Any) -> Proxy:
        config = ServerConfig(
            upstream=upstream_url or upstream.url, db=db_path, worker=worker, **options
        )
        app = create_app(config)
        server = uvicorn.Server(
            uvicorn.Config(
                app,
                host="127.0.0.1",
                port=0,
                log_level="warning",
                lifespan="on",
                timeout_graceful_shutdown=5,
            )
        )
        thread = threading.Thread(target=server.run, daemon=True, name="proxy-under-test")
        thread.start()
        deadline = time.monotonic() + 10
        while not server.started:
            assert thread.is_alive(), "the proxy exited while starting"
            assert time.monotonic() < deadline, "the proxy did not start within 10 s"
            time.sleep(0.01)
        port = server.servers[0].sockets[0].getsockname()[1]
        proxy = Proxy(port=port, db=db_path, server=server, thread=thread)
        started.append(proxy)
        return proxy

    yield start
    for proxy in reversed(started):
        proxy.stop()


@pytest.fixture
def proxy(start_proxy: StartProxy) -> Proxy:
    """A proxy with no recap worker."""
    return start_proxy()


# --- the clients -------------------------------------------------------------------------------


@pytest.fixture
def openai_client() -> Iterator[Callable[[str], openai.OpenAI]]:
    """`openai_client(base_url)`: the official client (no retries), closed after the test."""
    made: list[openai.OpenAI] = []

    def make(base_url: str) -> openai.OpenAI:
        client = openai.OpenAI(base_url=base_url, api_key="test", max_retries=0, timeout=20)
        made.append(client)
        return client

    yield make
    for client in made:
        client.close()


@pytest.fixture
def http() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=20) as client:
        yield client
