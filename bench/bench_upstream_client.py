"""The proxy's upstream HTTP client, aiohttp configured as `autorecap.server.proxy.upstream`
sets it up, against httpx (the other well-kept asyncio client), in the same run: 200 KB chat
completions (a chat of 1,000 messages) sent one after another to the loopback upstream
(`loopback.py upstream`, its own process), the answer read whole. Wall time and this process's
CPU per request, median of rounds that take turns between the clients.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx
import orjson

from _common import report
from autorecap.server.proxy.upstream import Upstream
from bench_proxy import free_port, history, wait_until_up

LOOPBACK = str(Path(__file__).with_name("loopback.py"))
REQUESTS = int(os.environ.get("BENCH_CLIENT_REQUESTS", "300"))
ROUNDS = 5
HEADERS = {"Content-Type": "application/json", "Accept-Encoding": "identity"}

Send = Callable[[], Awaitable[bytes]]


async def measure(send: Send) -> tuple[float, float]:
    """(wall s, CPU s) per request over REQUESTS requests."""
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(REQUESTS):
        await send()
    return (time.perf_counter() - wall) / REQUESTS, (time.process_time() - cpu) / REQUESTS


async def run(base: str, body: bytes) -> dict[str, tuple[float, float]]:
    upstream = Upstream(base, base, timeout_s=60)
    await upstream.open()
    session = upstream._session
    assert session is not None
    plain = httpx.AsyncClient(timeout=60)

    async def with_aiohttp() -> bytes:
        assert session is not None
        async with session.post(f"{base}/chat/completions", data=body, headers=HEADERS) as answer:
            return await answer.read()

    async def with_httpx() -> bytes:
        response = await plain.post(f"{base}/chat/completions", content=body, headers=HEADERS)
        return response.content

    senders: dict[str, Send] = {"aiohttp (the proxy's)": with_aiohttp, "httpx": with_httpx}
    rounds: dict[str, list[tuple[float, float]]] = {name: [] for name in senders}
    try:
        for send in senders.values():  # warm up: connections open, code paths hot
            for _ in range(30):
                assert b"choices" in await send()
        for _ in range(ROUNDS):
            for name, send in senders.items():
                rounds[name].append(await measure(send))
    finally:
        await upstream.close()
        await plain.aclose()
    return {
        name: (statistics.median(w for w, _ in found), statistics.median(c for _, c in found))
        for name, found in rounds.items()
    }


def main() -> None:
    port = free_port()
    upstream = subprocess.Popen([sys.executable, LOOPBACK, "upstream", str(port)])
    try:
        base = f"http://127.0.0.1:{port}/v1"
        wait_until_up(f"{base}/x", upstream)
        body = orjson.dumps({"model": "m", "messages": history("client"), "stream": False})
        try:
            import uvloop

            found = uvloop.run(run(base, body))
        except ImportError:
            found = asyncio.run(run(base, body))
    finally:
        upstream.terminate()
        upstream.wait(timeout=30)
    ours_wall, ours_cpu = found["aiohttp (the proxy's)"]
    figures: dict[str, object] = {"request body KB": round(len(body) / 1024)}
    for name, (wall, cpu) in found.items():
        figures[f"{name}: wall us per request"] = round(wall * 1e6)
        figures[f"{name}: CPU us per request"] = round(cpu * 1e6)
        if name == "httpx":
            figures[f"{name}: wall ratio to aiohttp"] = round(wall / ours_wall, 2)
            figures[f"{name}: CPU ratio to aiohttp"] = round(cpu / ours_cpu, 2)
    report(
        "upstream HTTP client: sequential 200 KB chat completions to a loopback upstream", figures
    )


if __name__ == "__main__":
    main()
