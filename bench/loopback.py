"""The loopback servers of the proxy benchmark, each run as its own process:

- `python loopback.py upstream PORT`: a fake LLM server (see `Upstream`);
- `python loopback.py relay UPSTREAM_URL PORT`: a relay that does no memory work, uvicorn and
  the proxy's own upstream connection (`autorecap.server.proxy.upstream`) and nothing else. What it
  adds to a reply is what any relay in this stack adds on this machine: the floor the proxy's
  figures stand on.
"""

from __future__ import annotations

import json
import socket
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import orjson
from starlette.types import Receive, Scope, Send

MODEL_LIKE = "model-like"
"""The `model` that makes the upstream answer like a model: first token after FIRST_S, then
TOKENS more, TOKEN_S apart (the whole answer at the end when not streaming)."""
FIRST_S = 0.2
TOKENS = 20
TOKEN_S = 0.02
ANSWER = json.dumps(
    {
        "id": "x",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "Aye."},
                "finish_reason": "stop",
            }
        ],
    }
).encode()
CHUNKS = [
    b'data: {"choices":[{"index":0,"delta":{"content":"Aye"}}]}\n\n',
    b'data: {"choices":[{"index":0,"delta":{"content":"."}}]}\n\n',
    b"data: [DONE]\n\n",
]


class UpstreamServer(ThreadingHTTPServer):
    request_queue_size = 1024  # 100 clients at once: http.server's default backlog is 5
    daemon_threads = True


class Upstream(BaseHTTPRequestHandler):
    """A fake LLM server that reads the request as a real one would and answers at once (or
    like a model, see MODEL_LIKE). Each answer says how long the upstream spent on it, from
    having read the request to its last chunk: a `span` field, or an SSE comment `: span FIRST
    TOTAL` before `[DONE]`."""

    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers["Content-Length"]))
        received = time.perf_counter()
        body = orjson.loads(raw)
        model_like = body.get("model") == MODEL_LIKE
        if model_like:
            time.sleep(FIRST_S)
        if body.get("stream"):
            head = (
                b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n"
            )
            self.wfile.write(head)
            chunks = CHUNKS if not model_like else [CHUNKS[0]] * TOKENS + CHUNKS
            first = 0.0
            for number, chunk in enumerate(chunks):
                if model_like and 0 < number <= TOKENS:
                    time.sleep(TOKEN_S)
                if number == len(chunks) - 1:  # before [DONE]: the span, as an SSE comment
                    chunk = f": span {first:.6f} {time.perf_counter() - received:.6f}\n\n".encode()
                    chunk += CHUNKS[-1]
                self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                self.wfile.flush()
                first = first or time.perf_counter() - received
            self.wfile.write(b"0\r\n\r\n")
        else:
            if model_like:
                time.sleep(TOKENS * TOKEN_S)
            span = time.perf_counter() - received
            answer = ANSWER[:-1] + f', "span": [{span:.6f}, {span:.6f}]}}'.encode()
            head = (
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                + f"Content-Length: {len(answer)}\r\n\r\n".encode()
            )
            self.wfile.write(head + answer)

    def do_GET(self) -> None:  # a liveness check
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        return


def run_upstream(port: int) -> None:
    UpstreamServer(("127.0.0.1", port), Upstream).serve_forever()


def run_relay(upstream_url: str, port: int) -> None:
    """Every POST goes to the upstream's chat completions, the answer relayed as the proxy
    relays it; any GET answers `{}` (a liveness check)."""
    import uvicorn

    from autorecap.server.proxy.upstream import Upstream as Relay

    relay = Relay(upstream_url, upstream_url, timeout_s=600)

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await relay.close()
            await send({"type": "lifespan.shutdown.complete"})
            return
        pieces = []
        while True:
            message = await receive()
            pieces.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        if scope["method"] != "POST":
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"{}"})
            return
        body = b"".join(pieces)
        headers = {"Content-Type": "application/json"}
        # The benchmark's bodies end with their `stream` field: no parse (a 200 KB parse would
        # cost more than the relaying).
        stream = body.endswith(b'"stream":true}')
        response = await relay.forward("POST", "chat/completions", body, headers, stream=stream)
        await response(scope, receive, send)

    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", timeout_keep_alive=600)


if __name__ == "__main__":
    if sys.argv[1:2] == ["upstream"]:
        run_upstream(int(sys.argv[2]))
    elif sys.argv[1:2] == ["relay"]:
        run_relay(sys.argv[2], int(sys.argv[3]))
    else:
        raise SystemExit("usage: loopback.py upstream PORT | relay UPSTREAM_URL PORT")
