"""A real OpenAI-compatible chat-completions server on loopback, scripted by the test.

`llm_server` runs a `ThreadingHTTPServer` on 127.0.0.1 (an OS-chosen port) in a background
thread. Each request pops the next scripted answer from a queue: a completion, an error status
(with a JSON or text body and an optional `Retry-After`), a malformed body, a JSON body that is
not an object, or a dropped connection; any of them may wait a while first. Every request is
recorded (path, headers, parsed JSON body). Nothing here reaches beyond loopback.
"""

from __future__ import annotations

import json
import socket
import threading
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from autorecap.recap.openai_compat import OpenAICompatBackend

_PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy")


@dataclass
class Scripted:
    """One scripted answer. `kind`: completion | status | malformed | not_object | drop."""

    kind: str
    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


@dataclass
class Recorded:
    """One request as the server saw it."""

    method: str
    path: str
    headers: dict[str, str]
    """Header names lower-cased."""
    raw: bytes
    json: Any


class LLMServer:
    """The scripted server: queue answers with the helpers, read `requests` afterwards."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._script: deque[Scripted] = deque()
        self.requests: list[Recorded] = []
        self.stopping = threading.Event()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(self))
        self.httpd.daemon_threads = True
        self.port: int = self.httpd.server_address[1]
        self.origin = f"http://127.0.0.1:{self.port}"
        self.url = f"{self.origin}/v1"
        """The base URL to give a backend."""
        self._thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    # --- scripting ----------------------------------------------------------------------------

    def reply(
        self,
        content: Any = "A recap.",
        *,
        reasoning_content: str | None = None,
        delay: float = 0.0,
        message: dict[str, Any] | None = None,
    ) -> LLMServer:
        """A normal chat completion (`message` replaces the whole choices[0].message)."""
        if message is None:
            message = {"role": "assistant", "content": content}
            if reasoning_content is not None:
                message["reasoning_content"] = reasoning_content
        body = {
            "id": f"chatcmpl-{len(self._script)}",
            "object": "chat.completion",
            "created": 1_700_000_000,
            "model": "loopback",
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        }
        return self.raw_json(body, delay=delay)

    def raw_json(self, body: Any, *, status: int = 200, delay: float = 0.0) -> LLMServer:
        """Any JSON body (with a 200 by default)."""
        self._push(Scripted("completion", status=status, body=body, delay=delay))
        return self

    def error(
        self,
        status: int,
        body: Any = None,
        *,
        retry_after: str | None = None,
        delay: float = 0.0,
    ) -> LLMServer:
        """An error status; `body` a dict (sent as JSON) or text (sent as text/plain)."""
        if body is None:
            body = {"error": {"message": f"scripted {status}", "type": "server_error"}}
        headers = {"Retry-After": retry_after} if retry_after is not None else {}
        self._push(Scripted("status", status=status, body=body, headers=headers, delay=delay))
        return self

    def malformed(self, *, delay: float = 0.0) -> LLMServer:
        """A 200 whose body claims to be JSON and is not."""
        self._push(Scripted("malformed", delay=delay))
        return self

    def not_object(self, value: Any = None, *, delay: float = 0.0) -> LLMServer:
        """A 200 whose body is JSON but not an object."""
        self._push(
            Scripted(
                "completion", body=["not", "an", "object"] if value is None else value, delay=delay
            )
        )
        return self

    def drop(self, *, delay: float = 0.0) -> LLMServer:
        """Close the connection without answering."""
        self._push(Scripted("drop", delay=delay))
        return self

    def _push(self, item: Scripted) -> None:
        with self._lock:
            self._script.append(item)

    # --- inspecting ---------------------------------------------------------------------------

    @property
    def last(self) -> Recorded:
        """The most recent request."""
        with self._lock:
            return self.requests[-1]

    @property
    def remaining(self) -> int:
        """Scripted answers not used yet."""
        with self._lock:
            return len(self._script)

    # --- the server's side --------------------------------------------------------------------

    def _next(self, recorded: Recorded) -> Scripted:
        with self._lock:
            self.requests.append(recorded)
            if self._script:
                return self._script.popleft()
        # Nothing scripted: a non-retryable answer that makes the test fail loudly.
        return Scripted("status", status=418, body={"error": {"message": "nothing scripted"}})

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.stopping.set()  # wakes handlers still waiting out a delay
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join(timeout=5)


def _make_handler(server: LLMServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass  # keep test output clean

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
            item = server._next(recorded)
            if item.delay and server.stopping.wait(item.delay):
                self.close_connection = True
                return
            try:
                self._answer(item)
            except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
                self.close_connection = True  # the client gave up (a timeout test)

        def _answer(self, item: Scripted) -> None:
            if item.kind == "drop":
                self.close_connection = True
                return
            if item.kind == "malformed":
                payload = b'{"choices": [{"message": {"content": "oops"'
                content_type = "application/json"
            elif isinstance(item.body, str):
                payload = item.body.encode()
                content_type = "text/plain; charset=utf-8"
            else:
                payload = json.dumps(item.body).encode()
                content_type = "application/json"
            self.send_response(item.status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(payload)))
            for name, value in item.headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(payload)
            self.wfile.flush()

    return Handler


@pytest.fixture(autouse=True)
def _no_proxies(monkeypatch: pytest.MonkeyPatch) -> None:
    """httpx honours proxy variables: make sure loopback requests go straight to loopback."""
    for name in _PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")


@pytest.fixture
def llm_server() -> Iterator[LLMServer]:
    """A scripted OpenAI-compatible server on 127.0.0.1, shut down after the test."""
    server = LLMServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()


class SleepRecorder:
    """Stands in for `time.sleep`: records the backoff delays instead of waiting."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


@pytest.fixture
def sleeps() -> SleepRecorder:
    return SleepRecorder()


@pytest.fixture
def make_client(
    llm_server: LLMServer, sleeps: SleepRecorder
) -> Iterator[Callable[..., OpenAICompatBackend]]:
    """Build `OpenAICompatBackend`s aimed at `llm_server` (no real backoff waits); all are
    closed after the test."""
    made: list[OpenAICompatBackend] = []

    def factory(**options: Any) -> OpenAICompatBackend:
        options.setdefault("base_url", llm_server.url)
        options.setdefault("sleep", sleeps)
        options.setdefault("backoff_s", 0.01)
        options.setdefault("timeout_s", 5.0)
        options.setdefault("api_key_env", "AUTORECAP_TEST_NO_KEY")
        # The protocol is what these tests ask about: every message goes to the server, short
        # or not (a short message is its own recap by default).
        options.setdefault("own_recap_tokens", 0)
        backend = OpenAICompatBackend(**options)
        made.append(backend)
        return backend

    yield factory
    for backend in made:
        backend.close()


@pytest.fixture
def dead_port() -> int:
    """A loopback port with nothing listening on it (bound, read, closed)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port
