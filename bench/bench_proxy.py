"""The proxy's added latency against calling the loopback upstream directly, in the same run,
chats of 1,000 messages (each request appends one user message to its chat's full history, as a
frontend does), streaming and not. Figures, never asserted.

Two loads:
- burst: 1 or 100 clients send at the same moment, round after round, to an upstream that
  answers at once; a round against the upstream directly, then the same through the proxy,
  alternately, so that both see the machine in the same state. With 100 clients this is a
  thundering herd on 2 cores shared by the client, the upstream and the proxy: it measures how
  fast the machine drains 100 x 200 KB requests, so the proxy's CPU per request (printed too)
  decides the figure.
- paced: 100 clients each on their own, with a think time between requests (1-3 s), to an
  upstream that answers like a model (first token after 200 ms, then 20 more 20 ms apart).

And the time to first byte of a streamed answer while the in-process worker has recap jobs to
run, against the same with the queue paused: back to back with the instant upstream, and paced
with the model-like one.

Each added latency is given twice: the client's times compared as they are, and "outside the
upstream", the same less the time the upstream says it spent on each request (from having read
it to its last chunk: the `span` field of its answer, or an SSE comment before `[DONE]`). The
second leaves out the upstream's own jitter, which under load is milliseconds (its sleeps overrun).

The upstream, the proxy and this client each run in their own process (as they would in use),
all on this machine's 2 cores. BENCH_PROXY_CLIENTS (default "1,100") picks the burst client
counts; BENCH_PROXY_PACED=0 skips the paced load.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, NamedTuple

import httpx
import orjson

from _common import percentile, report
from autorecap.jobs.queue import JobQueue
from autorecap.store.sqlite import SQLiteStore
from autorecap.testing import generate_chat

N_MESSAGES = 1000
CLIENTS = tuple(int(n) for n in os.environ.get("BENCH_PROXY_CLIENTS", "1,100").split(","))
PACED = os.environ.get("BENCH_PROXY_PACED", "1") != "0"
MODEL_LIKE = "model-like"
"""The `model` that makes the upstream answer like a model: first token after FIRST_S, then
TOKENS more, TOKEN_S apart (the whole answer at the end when not streaming)."""
FIRST_S = 0.2
TOKENS = 20
TOKEN_S = 0.02
THINK_S = (1.0, 3.0)
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


class Timing(NamedTuple):
    """One answer's times (s), as the client saw them, and the same less the time the upstream
    spent on it (from having read the request to its last chunk, as it reports): `outside` is
    what the HTTP hops cost, the proxy's included, without the upstream's own jitter."""

    total: float
    first: float
    outside: float
    outside_first: float


async def one(client: httpx.AsyncClient, url: str, body: dict[str, Any]) -> tuple[Timing, str]:
    """The answer's times, and the reply's text as a frontend would keep it."""
    start = time.perf_counter()
    first = 0.0
    content = orjson.dumps(body)
    headers = {"Content-Type": "application/json"}
    pieces: list[bytes] = []
    if body.get("stream"):
        async with client.stream("POST", url, content=content, headers=headers) as response:
            async for piece in response.aiter_raw():
                if not first:
                    first = time.perf_counter() - start
                pieces.append(piece)
        total = time.perf_counter() - start
        lines = b"".join(pieces).split(b"\n")
        text = "".join(
            orjson.loads(line[6:])["choices"][0]["delta"].get("content", "")
            for line in lines
            if line.startswith(b"data: {")
        )
        span_first, span = (
            float(v) for v in next(x for x in lines if x[:7] == b": span ")[7:].split()
        )
    else:
        response = await client.post(url, content=content, headers=headers)
        response.raise_for_status()
        total = first = time.perf_counter() - start
        answer = orjson.loads(response.content)
        text = answer["choices"][0]["message"]["content"]
        span_first, span = answer["span"]
    return Timing(total, first or total, total - span, (first or total) - span_first), text


def completions_url(base: str, chat_id: str, proxied: bool) -> str:
    """The chat completion URL: the proxy's for the chat, or the upstream's own."""
    return f"{base}/c/{chat_id}/v1/chat/completions" if proxied else f"{base}/chat/completions"


async def measure(
    base: str,
    chats: list[list[dict[str, str]]],
    rounds: int,
    stream: bool,
    proxied: bool,
    ids: list[str],
    model: str = "m",
) -> list[Timing]:
    """`rounds` rounds, each client sending its next request at the same moment."""
    limits = httpx.Limits(max_connections=200, max_keepalive_connections=200)
    async with httpx.AsyncClient(timeout=900, limits=limits) as client:
        times: list[Timing] = []
        for round_number in range(rounds):
            times += await burst(client, base, chats, round_number, stream, proxied, ids, model)
    return times


async def burst(
    client: httpx.AsyncClient,
    base: str,
    chats: list[list[dict[str, str]]],
    round_number: int,
    stream: bool,
    proxied: bool,
    ids: list[str],
    model: str = "m",
) -> list[Timing]:
    """One round: every client sends its chat's next request at once, then keeps the reply."""
    tasks = []
    for chat_id, messages in zip(ids, chats, strict=True):
        messages.append({"role": "user", "content": f"Round {round_number}, {chat_id}."})
        body = {"model": model, "messages": list(messages), "stream": stream}
        tasks.append(one(client, completions_url(base, chat_id, proxied), body))
    answers = await asyncio.gather(*tasks)
    times = []
    for messages, (timing, reply) in zip(chats, answers, strict=True):
        times.append(timing)
        messages.append({"role": "assistant", "content": reply})  # as a frontend keeps it
    return times


async def alternating(
    proxy_url: str,
    upstream_url: str,
    chats: list[list[dict[str, str]]],
    rounds: int,
    stream: bool,
    ids: list[str],
    proxy_pid: int,
) -> tuple[list[Timing], list[Timing], float]:
    """(direct, proxied, the proxy process's CPU seconds during the proxied rounds): the same
    rounds against the upstream and through the proxy, one after the other round by round,
    so that both see the machine in the same state."""
    direct_chats = [list(m) for m in chats]
    direct: list[Timing] = []
    proxied: list[Timing] = []
    cpu = 0.0
    limits = httpx.Limits(max_connections=200, max_keepalive_connections=200)
    async with (
        httpx.AsyncClient(timeout=900, limits=limits) as to_upstream,
        httpx.AsyncClient(timeout=900, limits=limits) as to_proxy,
    ):
        for number in range(rounds):
            direct += await burst(
                to_upstream, upstream_url, direct_chats, number, stream, False, ids
            )
            before = cpu_seconds(proxy_pid)
            proxied += await burst(to_proxy, proxy_url, chats, number, stream, True, ids)
            cpu += cpu_seconds(proxy_pid) - before
    return direct, proxied, cpu


async def measure_paced(
    base: str,
    chats: list[list[dict[str, str]]],
    rounds: int,
    stream: bool,
    proxied: bool,
    ids: list[str],
    seed: int,
) -> list[Timing]:
    """Each client on its own: think (THINK_S, the same draws for a given seed), send, read
    the answer, keep the reply; `rounds` times. The upstream answers like a model."""
    times: list[Timing] = []
    limits = httpx.Limits(max_connections=200, max_keepalive_connections=200)
    draws = random.Random(seed)
    thinks = [[draws.uniform(*THINK_S) for _ in range(rounds)] for _ in ids]
    async with httpx.AsyncClient(timeout=900, limits=limits) as client:

        async def chat(chat_id: str, messages: list[dict[str, str]], waits: list[float]) -> None:
            url = completions_url(base, chat_id, proxied)
            for round_number, wait in enumerate(waits):
                await asyncio.sleep(wait)
                messages.append({"role": "user", "content": f"Paced {round_number}, {chat_id}."})
                body = {"model": MODEL_LIKE, "messages": list(messages), "stream": stream}
                timing, reply = await one(client, url, body)
                times.append(timing)
                messages.append({"role": "assistant", "content": reply})

        await asyncio.gather(*(chat(i, m, w) for i, m, w in zip(ids, chats, thinks, strict=True)))
    return times


def cpu_seconds(pid: int) -> float:
    """User and system CPU time a process has used so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


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
            run(proxy_url, upstream_url, db, processes[1].pid)
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


def added(direct: list[Timing], proxied: list[Timing], at: int) -> dict[str, float]:
    """Added p50 and p99 (ms) of the `at` field of the timings (`Timing._fields`): the
    proxied percentile less the direct one."""
    figures = {}
    for name, pct in (("p50", 50), ("p99", 99)):
        plain = percentile([t[at] for t in direct], pct)
        figures[name] = round((percentile([t[at] for t in proxied], pct) - plain) * 1e3, 2)
    return figures


def run(proxy_url: str, upstream_url: str, db: Path, proxy_pid: int) -> None:
    for clients in CLIENTS:
        figures: dict[str, object] = {}
        ids = [f"bench-{clients}-{n}" for n in range(clients)]
        base_chats = [history(chat_id) for chat_id in ids]
        rounds = 100 if clients == 1 else 8
        for stream in (False, True):
            label = f"{'streaming' if stream else 'not streaming'}"
            # Warm up: the proxy learns each chat (the first request stores 1,000 messages and
            # queues their recap jobs, which the in-process worker then runs).
            warm = [list(m) for m in base_chats]
            asyncio.run(measure(proxy_url, warm, 1, stream, True, ids))
            direct, proxied, cpu = asyncio.run(
                alternating(proxy_url, upstream_url, warm, rounds, stream, ids, proxy_pid)
            )
            for name, value in added(direct, proxied, 0).items():
                figures[f"{label}: added {name} ms"] = value
            for name, value in added(direct, proxied, 2).items():
                figures[f"{label}: added {name} ms, outside the upstream"] = value
            figures[f"{label}: direct p50 ms"] = round(
                percentile([t.total for t in direct], 50) * 1e3, 2
            )
            figures[f"{label}: proxy CPU per request ms (its worker included)"] = round(
                cpu / len(proxied) * 1e3, 2
            )
        report(
            f"proxy: added latency, burst, {clients} client(s), chats of 1,000 messages", figures
        )
    ttfb(proxy_url, db)
    if PACED:
        paced(proxy_url, upstream_url, db, proxy_pid)


def paced(proxy_url: str, upstream_url: str, db: Path, proxy_pid: int) -> None:
    """100 clients each on their own, with a model-like upstream (see the module docstring);
    then the streamed case again with the recap queue paused."""
    ids = [f"paced-{n}" for n in range(100)]
    chats = [history(chat_id) for chat_id in ids]
    rounds = 4
    # The proxy learns the chats (with the model the clients then keep using: a request that
    # changes anything before the history, the model included, is reconciled in full).
    asyncio.run(measure(proxy_url, chats, 1, False, True, ids, MODEL_LIKE))
    store = SQLiteStore(db)
    queue = JobQueue(store)
    figures: dict[str, object] = {"jobs queued at the start": queue.counts()["queued"]}
    results: dict[str, list[Timing]] = {}
    for seed, stream in enumerate((False, True)):
        label = "streaming" if stream else "not streaming"
        results[f"direct {label}"] = asyncio.run(
            measure_paced(upstream_url, [list(m) for m in chats], rounds, stream, False, ids, seed)
        )
        cpu = cpu_seconds(proxy_pid)
        done_before = queue.counts()["done"]
        results[label] = proxied = asyncio.run(
            measure_paced(proxy_url, chats, rounds, stream, True, ids, seed)
        )
        figures[f"{label}: recap jobs done meanwhile"] = queue.counts()["done"] - done_before
        figures[f"{label}: proxy process CPU per request ms (worker included)"] = round(
            (cpu_seconds(proxy_pid) - cpu) / len(proxied) * 1e3, 2
        )
        for name, value in added(results[f"direct {label}"], proxied, 0).items():
            figures[f"{label}: added {name} ms"] = value
        for name, value in added(results[f"direct {label}"], proxied, 2).items():
            figures[f"{label}: added {name} ms, outside the upstream"] = value
        figures[f"{label}: direct p50 ms"] = round(
            percentile([t.total for t in results[f"direct {label}"]], 50) * 1e3, 2
        )
    queue.pause()
    time.sleep(1.0)
    paused = asyncio.run(measure_paced(proxy_url, chats, rounds, True, True, ids, 1))
    queue.resume()
    store.close()
    sets = {"recaps running": results["streaming"], "queue paused": paused}
    sets["direct"] = results["direct streaming"]
    for field, suffix in (("first", ""), ("outside_first", ", outside the upstream")):
        for name, pct in (("p50", 50), ("p99", 99)):
            for label, timings in sets.items():
                value = percentile([getattr(t, field) for t in timings], pct)
                figures[f"TTFB {name} ms{suffix}, {label}"] = round(value * 1e3, 2)
    report(
        "proxy: added latency, paced, 100 clients, model-like upstream, chats of 1,000 messages",
        figures,
    )


def ttfb(proxy_url: str, db: Path) -> None:
    """Time to first byte of a streamed answer while recap jobs run, and with the queue
    paused, on a chat the worker has a backlog for."""
    store = SQLiteStore(db)
    queue = JobQueue(store)
    figures: dict[str, object] = {}
    chats = [history("bench-ttfb")]
    asyncio.run(measure(proxy_url, chats, 1, True, True, ["bench-ttfb"]))  # queues 1,000 jobs
    backlog = queue.counts()["queued"]
    running = asyncio.run(measure(proxy_url, chats, 100, True, True, ["bench-ttfb"]))
    left = queue.counts()["queued"]
    queue.pause()
    time.sleep(1.0)  # the job in progress finishes
    paused = asyncio.run(measure(proxy_url, chats, 100, True, True, ["bench-ttfb"]))
    queue.resume()
    store.close()
    first_running = [t.first for t in running]
    first_paused = [t.first for t in paused]
    figures["jobs queued when measuring"] = backlog
    figures["jobs queued after"] = left
    figures["TTFB p50 ms, recaps running"] = round(percentile(first_running, 50) * 1e3, 2)
    figures["TTFB p50 ms, queue paused"] = round(percentile(first_paused, 50) * 1e3, 2)
    figures["TTFB p99 ms, recaps running"] = round(percentile(first_running, 99) * 1e3, 2)
    figures["TTFB p99 ms, queue paused"] = round(percentile(first_paused, 99) * 1e3, 2)
    report(
        "proxy: time to first byte while recap jobs run (1 client back to back, 1,000 messages)",
        figures,
    )


if __name__ == "__main__":
    if sys.argv[1:2] == ["upstream"]:
        run_upstream(int(sys.argv[2]))
    else:
        main()
