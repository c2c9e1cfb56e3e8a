"""The proxy's added latency against calling the loopback upstream directly, in the same run:
p50 and p99, streaming and not, 1 and 100 concurrent clients, chats of 1,000 messages (each
request appends one user message to its chat's full history, as a frontend does); and the time
to first byte of a streamed answer while the in-process worker has recap jobs to run, against the
same with the queue paused. Figures, never asserted.

The upstream, the proxy and this client each run in their own process (as they would in use),
all on this machine's 2 cores. BENCH_PROXY_CLIENTS (default "1,100") picks the client counts.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

from _common import percentile, report
from autorecap.jobs.queue import JobQueue
from autorecap.store.sqlite import SQLiteStore
from autorecap.testing import generate_chat

N_MESSAGES = 1000
CLIENTS = tuple(int(n) for n in os.environ.get("BENCH_PROXY_CLIENTS", "1,100").split(","))
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
    """A fake LLM server that reads the request as a real one would and answers at once."""

    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if body.get("stream"):
            head = (
                b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n"
            )
            self.wfile.write(head)
            for chunk in CHUNKS:
                self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
            self.wfile.write(b"0\r\n\r\n")
        else:
            head = (
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                + f"Content-Length: {len(ANSWER)}\r\n\r\n".encode()
            )
            self.wfile.write(head + ANSWER)

    def log_message(self, *args: object) -> None:
        return


def run_upstream(port: int) -> None:
    UpstreamServer(("127.0.0.1", port), Upstream).serve_forever()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_until_up(url: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"{url}: the process exited with {process.returncode}")
        try:
            httpx.get(url, timeout=1)
            return
        except httpx.HTTPError:
            time.sleep(0.1)
    raise SystemExit(f"{url} did not come up in 60 s")


def history(chat_id: str) -> list[dict[str, str]]:
    chat = generate_chat(N_MESSAGES, seed=hash(chat_id) % 1000, chat_id=chat_id)
    items = [{"role": "system", "content": "You are Captain Mira."}]
    for message in chat.messages:
        role = "user" if message.is_user else "assistant"
        items.append({"role": role, "content": message.text})
    return items


async def one(client: httpx.AsyncClient, url: str, body: dict[str, Any]) -> tuple[float, float]:
    """(time to the whole answer, time to its first byte)."""
    start = time.perf_counter()
    first = 0.0
    if body.get("stream"):
        async with client.stream("POST", url, json=body) as response:
            async for _ in response.aiter_raw():
                if not first:
                    first = time.perf_counter() - start
    else:
        response = await client.post(url, json=body)
        response.raise_for_status()
    total = time.perf_counter() - start
    return total, first or total


async def measure(
    base: str,
    chats: list[list[dict[str, str]]],
    rounds: int,
    stream: bool,
    proxied: bool,
    ids: list[str],
) -> list[tuple[float, float]]:
    times: list[tuple[float, float]] = []
    limits = httpx.Limits(max_connections=200, max_keepalive_connections=200)
    async with httpx.AsyncClient(timeout=900, limits=limits) as client:
        for round_number in range(rounds):
            tasks = []
            for chat_id, messages in zip(ids, chats, strict=True):
                messages.append({"role": "user", "content": f"Round {round_number}, {chat_id}."})
                url = (
                    f"{base}/c/{chat_id}/v1/chat/completions"
                    if proxied
                    else f"{base}/chat/completions"
                )
                body = {"model": "m", "messages": list(messages), "stream": stream}
                tasks.append(one(client, url, body))
            times.extend(await asyncio.gather(*tasks))
            for messages in chats:  # the reply, as the client would keep it
                messages.append({"role": "assistant", "content": "Aye."})
    return times


def main() -> None:
    python = sys.executable
    upstream_port, proxy_port = free_port(), free_port()
    processes: list[subprocess.Popen[bytes]] = []
    with tempfile.TemporaryDirectory() as folder:
        db = Path(folder) / "proxy.db"
        env = {**os.environ, "AUTORECAP_HOME": folder}
        try:
            processes.append(
                subprocess.Popen([python, __file__, "upstream", str(upstream_port)], env=env)
            )
            upstream_url = f"http://127.0.0.1:{upstream_port}/v1"
            launch = (
                "import uvicorn\n"
                "from autorecap.server.app import ServerConfig, create_app\n"
                f"app = create_app(ServerConfig(upstream={upstream_url!r}, db={str(db)!r}))\n"
                f"uvicorn.run(app, host='127.0.0.1', port={proxy_port}, log_level='warning',"
                " timeout_keep_alive=600)\n"
            )
            processes.append(subprocess.Popen([python, "-c", launch], env=env))
            proxy_url = f"http://127.0.0.1:{proxy_port}"
            wait_until_up(f"{proxy_url}/openapi.json", processes[1])
            wait_until_up(f"{upstream_url}/x", processes[0])
            run(proxy_url, upstream_url, db)
        finally:
            for process in processes:
                process.terminate()
            for process in processes:
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    process.kill()
    print(
        "targets at 100 clients: added p50 <= 2 ms, p99 <= 10 ms; TTFB unchanged while recaps run"
    )


def run(proxy_url: str, upstream_url: str, db: Path) -> None:
    for clients in CLIENTS:
        figures: dict[str, object] = {}
        ids = [f"bench-{clients}-{n}" for n in range(clients)]
        base_chats = [history(chat_id) for chat_id in ids]
        rounds = 40 if clients == 1 else 4
        for stream in (False, True):
            label = f"{'streaming' if stream else 'not streaming'}"
            # Warm up: the proxy learns each chat (the first request stores 1,000 messages and
            # queues their recap jobs, which the in-process worker then runs).
            warm = [list(m) for m in base_chats]
            asyncio.run(measure(proxy_url, warm, 1, stream, True, ids))
            direct = asyncio.run(
                measure(upstream_url, [list(m) for m in warm], rounds, stream, False, ids)
            )
            proxied = asyncio.run(measure(proxy_url, warm, rounds, stream, True, ids))
            for name, pct in (("p50", 50), ("p99", 99)):
                plain = percentile([t for t, _ in direct], pct)
                added = (percentile([t for t, _ in proxied], pct) - plain) * 1e3
                figures[f"{label}: added {name} ms"] = round(added, 2)
            figures[f"{label}: direct p50 ms"] = round(
                percentile([t for t, _ in direct], 50) * 1e3, 2
            )
        report(f"proxy: added latency, {clients} client(s), chats of 1,000 messages", figures)
    ttfb(proxy_url, db)


def ttfb(proxy_url: str, db: Path) -> None:
    """Time to first byte of a streamed answer while recap jobs run, and with the queue
    paused, on a chat the worker has a backlog for."""
    store = SQLiteStore(db)
    queue = JobQueue(store)
    figures: dict[str, object] = {}
    chats = [history("bench-ttfb")]
    asyncio.run(measure(proxy_url, chats, 1, True, True, ["bench-ttfb"]))  # queues 1,000 jobs
    backlog = queue.counts()["queued"]
    running = asyncio.run(measure(proxy_url, chats, 40, True, True, ["bench-ttfb"]))
    left = queue.counts()["queued"]
    queue.pause()
    time.sleep(1.0)  # the job in progress finishes
    paused = asyncio.run(measure(proxy_url, chats, 40, True, True, ["bench-ttfb"]))
    queue.resume()
    store.close()
    first_running = [f for _, f in running]
    first_paused = [f for _, f in paused]
    figures["jobs queued when measuring"] = backlog
    figures["jobs queued after"] = left
    figures["TTFB p50 ms, recaps running"] = round(percentile(first_running, 50) * 1e3, 2)
    figures["TTFB p50 ms, queue paused"] = round(percentile(first_paused, 50) * 1e3, 2)
    figures["TTFB p99 ms, recaps running"] = round(percentile(first_running, 99) * 1e3, 2)
    figures["TTFB p99 ms, queue paused"] = round(percentile(first_paused, 99) * 1e3, 2)
    report("proxy: time to first byte while recap jobs run (1 client, 1,000 messages)", figures)


if __name__ == "__main__":
    if sys.argv[1:2] == ["upstream"]:
        run_upstream(int(sys.argv[2]))
    else:
        main()
