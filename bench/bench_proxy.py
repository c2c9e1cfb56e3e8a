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
  upstream that answers like a model (first token after 200 ms, then 20 more 20 ms apart). The
  same clients go, block by block (2 requests each), to the upstream directly, through a relay
  that does no memory work (`loopback.py relay`: the floor of any relay in this stack on this
  machine), through the proxy, and (streaming) through the proxy with its recap queue paused;
  the blocks take turns, in a rotating order, so that slow and fast moments of the machine fall
  on all of them alike.

And the time to first byte of a streamed answer while the in-process worker has recap jobs to
run, against the same with the queue paused: back to back with the instant upstream, and in the
paced load.

Each added latency is given twice: the client's times compared as they are, and "outside the
upstream", the same less the time the upstream says it spent on each request (from having read
it to its last chunk). The second leaves out the upstream's own jitter, which under load is
milliseconds (its sleeps overrun).

The upstream, the relay, the proxy and this client each run in their own process (as they would
in use), all on this machine's 2 cores. BENCH_PROXY_CLIENTS (default "1,100"; "" for none) picks
the burst client counts; BENCH_PROXY_PACED_BLOCKS (default 3) sets the paced blocks per target,
0 skips the paced load. BENCH_PROXY_WORKER=process runs the recap jobs in an `autorecap worker`
process beside a proxy without a worker of its own (`serve --no-worker`), at the niceness
BENCH_PROXY_WORKER_NICE (default 10); the proxy's CPU figures then leave the worker out.
The recall tier is on, as by default; BENCH_PROXY_RECALL=0 turns it off for every chat.
"""

from __future__ import annotations

import asyncio
import gc
import os
import random
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, NamedTuple

import httpx
import orjson

from _common import percentile, report
from autorecap.jobs.queue import JobQueue
from autorecap.store.sqlite import SQLiteStore
from autorecap.testing import generate_chat
from loopback import MODEL_LIKE

N_MESSAGES = 1000
CLIENTS = tuple(int(n) for n in os.environ.get("BENCH_PROXY_CLIENTS", "1,100").split(",") if n)
BLOCKS = int(os.environ.get("BENCH_PROXY_PACED_BLOCKS", "3"))
WORKER = os.environ.get("BENCH_PROXY_WORKER", "thread")
WORKER_NICE = int(os.environ.get("BENCH_PROXY_WORKER_NICE", "10"))
RECALL = os.environ.get("BENCH_PROXY_RECALL", "1") != "0"
LOOPBACK = str(Path(__file__).with_name("loopback.py"))
THINK_S = (1.0, 3.0)


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


def quiet_heap() -> None:
    """Freeze what this client holds (the chats, 100 x 1,000 messages) before a block: its own
    garbage collector then walks only what the block makes, and its pauses (which would fall on
    whichever target is being measured) stay short."""
    gc.collect()
    gc.freeze()


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
    quiet_heap()
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
    quiet_heap()
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
    first: int = 0,
) -> list[Timing]:
    """Each client on its own: think (THINK_S, the same draws for a given seed), send, read
    the answer, keep the reply; `rounds` times, numbered from `first`. The upstream answers
    like a model."""
    quiet_heap()
    times: list[Timing] = []
    limits = httpx.Limits(max_connections=200, max_keepalive_connections=200)
    draws = random.Random(seed)
    thinks = [[draws.uniform(*THINK_S) for _ in range(rounds)] for _ in ids]
    async with httpx.AsyncClient(timeout=900, limits=limits) as client:

        async def chat(chat_id: str, messages: list[dict[str, str]], waits: list[float]) -> None:
            url = completions_url(base, chat_id, proxied)
            for round_number, wait in enumerate(waits, start=first):
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
    upstream_port, relay_port, proxy_port = free_port(), free_port(), free_port()
    processes: list[subprocess.Popen[bytes]] = []
    with tempfile.TemporaryDirectory() as folder:
        db = Path(folder) / "proxy.db"
        env = {**os.environ, "AUTORECAP_HOME": folder}
        if not RECALL:  # no search on each turn's reply path
            cli = [python, "-c", "from autorecap.cli import main; main()"]
            off = [*cli, "settings", "set", "recall_enabled", "false"]
            subprocess.run(off, env=env, check=True)
        upstream_url = f"http://127.0.0.1:{upstream_port}/v1"
        launch = (
            "import uvicorn\n"
            "from autorecap.server.app import ServerConfig, create_app\n"
            f"app = create_app(ServerConfig(upstream={upstream_url!r}, db={str(db)!r},"
            f" worker={WORKER == 'thread'}))\n"
            f"uvicorn.run(app, host='127.0.0.1', port={proxy_port}, log_level='warning',"
            " timeout_keep_alive=600)\n"
        )
        try:
            for command in (
                [LOOPBACK, "upstream", str(upstream_port)],
                [LOOPBACK, "relay", upstream_url, str(relay_port)],
                ["-c", launch],
            ):
                processes.append(subprocess.Popen([python, *command], env=env))
            urls = {
                "direct": upstream_url,
                "relay": f"http://127.0.0.1:{relay_port}",
                "proxy": f"http://127.0.0.1:{proxy_port}",
            }
            wait_until_up(f"{upstream_url}/x", processes[0])
            wait_until_up(f"{urls['relay']}/x", processes[1])
            wait_until_up(f"{urls['proxy']}/openapi.json", processes[2])
            if WORKER == "process":  # `serve --no-worker` with `autorecap worker` beside it
                worker = [python, "-c", "from autorecap.cli import main; main()", "worker"]
                processes.append(
                    subprocess.Popen(
                        [*worker, "--db", str(db)],
                        env=env,
                        stdout=subprocess.DEVNULL,
                        preexec_fn=lambda: os.nice(WORKER_NICE),
                    )
                )
            run(urls, db, processes[2].pid)
        finally:
            for process in processes:
                process.terminate()
            for process in processes:
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    process.kill()
    print(
        "targets at 100 clients: added p50 <= 3 ms, p99 <= 15 ms with the recall tier off"
        " (BENCH_PROXY_RECALL=0); on (the default) its search comes on top (bench_recall.py:"
        " p50 <= 5 ms, p99 <= 20 ms); TTFB unchanged while recaps run"
    )


def added(direct: list[Timing], proxied: list[Timing], at: int) -> dict[str, float]:
    """Added p50 and p99 (ms) of the `at` field of the timings (`Timing._fields`): the
    proxied percentile less the direct one."""
    figures = {}
    for name, pct in (("p50", 50), ("p99", 99)):
        plain = percentile([t[at] for t in direct], pct)
        figures[name] = round((percentile([t[at] for t in proxied], pct) - plain) * 1e3, 2)
    return figures


def run(urls: dict[str, str], db: Path, proxy_pid: int) -> None:
    proxy_url, upstream_url = urls["proxy"], urls["direct"]
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
    if BLOCKS:
        paced(urls, db, proxy_pid)


def paced(urls: dict[str, str], db: Path, proxy_pid: int) -> None:
    """100 clients each on their own, with a model-like upstream, going block by block to each
    target in turn (see the module docstring)."""
    ids = [f"paced-{n}" for n in range(100)]
    chats = {"proxy": [history(chat_id) for chat_id in ids]}
    # The proxy learns the chats (with the model the clients then keep using: a request that
    # changes anything before the history, the model included, is reconciled in full).
    asyncio.run(measure(urls["proxy"], chats["proxy"], 1, False, True, ids, MODEL_LIKE))
    chats["direct"] = [list(m) for m in chats["proxy"]]
    chats["relay"] = [list(m) for m in chats["proxy"]]
    store = SQLiteStore(db)
    queue = JobQueue(store)
    figures: dict[str, object] = {"jobs queued at the start": queue.counts()["queued"]}
    results: dict[str, list[Timing]] = {}
    for stream in (False, True):
        label = "streaming" if stream else "not streaming"
        targets = ["direct", "relay", "proxy"] + (["proxy, queue paused"] if stream else [])
        times: dict[str, list[Timing]] = {target: [] for target in targets}
        cpu = 0.0
        jobs = 0
        for block in range(BLOCKS):
            for target in targets[block % len(targets) :] + targets[: block % len(targets)]:
                paused = target == "proxy, queue paused"
                if paused:
                    queue.pause()
                    time.sleep(1.0)  # the job in progress finishes
                name = target.split(",")[0]
                before = cpu_seconds(proxy_pid), queue.counts()["done"]
                times[target] += asyncio.run(
                    measure_paced(
                        urls[name],
                        chats[name],
                        2,
                        stream,
                        name != "direct",
                        ids,
                        seed=block * 2 + stream,
                        first=block * 2,
                    )
                )
                if paused:
                    queue.resume()
                elif name == "proxy":
                    cpu += cpu_seconds(proxy_pid) - before[0]
                    jobs += queue.counts()["done"] - before[1]
        figures[f"{label}: recap jobs done meanwhile"] = jobs
        figures[f"{label}: proxy process CPU per request ms (worker included)"] = round(
            cpu / len(times["proxy"]) * 1e3, 2
        )
        direct = times["direct"]
        for target, suffix in (("proxy", ""), ("relay", ", a relay with no memory work")):
            for name, value in added(direct, times[target], 0).items():
                figures[f"{label}: added {name} ms{suffix}"] = value
            for name, value in added(direct, times[target], 2).items():
                figures[f"{label}: added {name} ms, outside the upstream{suffix}"] = value
        figures[f"{label}: direct p50 ms"] = round(
            percentile([t.total for t in direct], 50) * 1e3, 2
        )
        results.update({f"{target} {label}": found for target, found in times.items()})
    store.close()
    sets = {
        "recaps running": results["proxy streaming"],
        "queue paused": results["proxy, queue paused streaming"],
        "direct": results["direct streaming"],
        "relay": results["relay streaming"],
    }
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
    main()
