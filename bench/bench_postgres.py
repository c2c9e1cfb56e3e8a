"""PostgreSQL against SQLite, in the same run, on this machine (2 cores). Figures, never asserted.

- One changed message persisted (a recap saved into a 1,000-message chat): p50 and p99, SQLite
  as the server saves (synchronous=NORMAL) and durable (FULL), PostgreSQL durable (fsync and
  synchronous commit on), over its Unix socket.
- Jobs per second through the queue: the offline pipeline of 8 chats of 250 messages, by one and
  by two `autorecap worker` processes.
- A turn through the proxy: the added latency at 100 paced clients (think 1-3 s, an upstream
  that answers like a model, chats of 1,000 messages, each new to the server at the start, so
  that 100,000 message recaps are queued; `bench_proxy.py` explains the load), with one server
  and its own worker on SQLite and on PostgreSQL, one server and a worker process, and two
  servers (the clients split between them) with the recap queue paused and with two worker
  processes (at niceness 10). On this one machine every process shares the same two cores:
  what a worker process takes, the servers lack, as they would not on machines of their own.

The PostgreSQL server is started for the run in a temporary folder (`autorecap.testing.
postgres`). BENCH_PG_PACED_BLOCKS (default 2; 0 skips the proxy part) sets the paced blocks.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psycopg

from _common import percentile, report
from autorecap import set_data
from autorecap.jobs import JobQueue, enqueue_pipeline
from autorecap.settings import Settings
from autorecap.store import ChatStore, open_store
from autorecap.store.base import Db
from autorecap.testing import generate_chat
from autorecap.testing.postgres import PostgresServer
from bench_proxy import (
    LOOPBACK,
    MODEL_LIKE,
    Timing,
    added,
    free_port,
    history,
    measure,
    measure_paced,
    wait_until_up,
)

BLOCKS = int(os.environ.get("BENCH_PG_PACED_BLOCKS", "2"))
WORKER_NICE = int(os.environ.get("BENCH_PG_WORKER_NICE", "10"))
CLI = [sys.executable, "-c", "from autorecap.cli import main; main()"]


def persist(store: ChatStore, label: str, figures: dict[str, object]) -> None:
    store.import_chat(generate_chat(1000, seed=3, chat_id="persist"))
    chat = store.load_chat("persist")
    times = []
    for number in range(400):
        message = chat.messages[number % 1000]
        set_data(message, "memory", f"Recap number {number}: Mira hid the astrolabe.")
        start = time.perf_counter()
        store.save(chat, changed=[message])
        times.append(time.perf_counter() - start)
    for name, pct in (("p50", 50), ("p99", 99)):
        figures[f"one changed message persisted {name} ms, {label}"] = round(
            percentile(times, pct) * 1e3, 3
        )


def jobs_per_second(db: str, workers: int, home: str) -> tuple[int, float]:
    store = open_store(db)
    queue = JobQueue(store)
    for number in range(8):
        store.import_chat(generate_chat(250, seed=number, chat_id=f"jobs-{number}"))
        enqueue_pipeline(queue, store.load_chat(f"jobs-{number}"), Settings())
    env = {**os.environ, "AUTORECAP_HOME": home}
    started = [
        subprocess.Popen([*CLI, "worker", "--db", db], env=env, stdout=subprocess.DEVNULL)
        for _ in range(workers)
    ]
    try:
        while queue.counts()["running"] == 0 and queue.counts()["done"] == 0:
            time.sleep(0.005)
        start = time.perf_counter()
        while True:
            counts = queue.counts()
            if counts["queued"] == 0 and counts["running"] == 0:
                break
            time.sleep(0.01)
        elapsed = time.perf_counter() - start
        done = queue.counts()["done"]
    finally:
        for process in started:
            process.terminate()
        for process in started:
            process.wait(30)
        store.close()
    return done, done / elapsed


def paced_turns(
    db: str,
    servers: int,
    workers: int,
    home: str,
    label: str,
    figures: dict[str, object],
    *,
    paused: bool = False,
) -> None:
    """100 paced clients through `servers` proxies, against the upstream directly; the recaps
    made by `workers` worker processes (0: each server's own worker), or none (`paused`)."""
    env = {**os.environ, "AUTORECAP_HOME": home}
    if paused:
        subprocess.run([*CLI, "jobs", "pause", "--db", db], env=env, check=True)
    upstream_port = free_port()
    upstream_url = f"http://127.0.0.1:{upstream_port}/v1"
    processes = [subprocess.Popen([sys.executable, LOOPBACK, "upstream", str(upstream_port)])]
    ports = [free_port() for _ in range(servers)]
    try:
        wait_until_up(f"{upstream_url}/x", processes[0])
        for port in ports:
            command = [*CLI, "serve", "--db", db, "--upstream", upstream_url, "--port", str(port)]
            if workers:
                command.append("--no-worker")
            processes.append(subprocess.Popen(command, env=env, stderr=subprocess.DEVNULL))
        for port, process in zip(ports, processes[1:], strict=True):
            wait_until_up(f"http://127.0.0.1:{port}/openapi.json", process)
        if workers:
            for _ in range(workers):
                processes.append(
                    subprocess.Popen(
                        [*CLI, "worker", "--db", db],
                        env=env,
                        stdout=subprocess.DEVNULL,
                        # On its own machine a worker would not take the servers' cores; here
                        # it gives way to them, as bench_proxy.py's worker process does.
                        preexec_fn=lambda: os.nice(WORKER_NICE),
                    )
                )
        ids = [f"paced-{n}" for n in range(100)]
        by_server = [[i for n, i in enumerate(ids) if n % servers == s] for s in range(servers)]
        chats = {i: history(i) for i in ids}

        def run(
            these: dict[str, list[dict[str, str]]], proxied: bool, block: int, stream: bool
        ) -> list[Timing]:
            async def all_servers() -> list[Timing]:
                parts = await asyncio.gather(
                    *(
                        measure_paced(
                            f"http://127.0.0.1:{port}" if proxied else upstream_url,
                            [these[i] for i in group],
                            2,
                            stream,
                            proxied,
                            group,
                            seed=block * 2 + stream,
                            first=block * 2,
                        )
                        for port, group in zip(ports, by_server, strict=True)
                    )
                )
                return [timing for part in parts for timing in part]

            return asyncio.run(all_servers())

        # Each server learns its clients' chats (100,000 messages stored, their recaps queued).
        for port, group in zip(ports, by_server, strict=True):
            asyncio.run(
                measure(
                    f"http://127.0.0.1:{port}",
                    [chats[i] for i in group],
                    1,
                    False,
                    True,
                    group,
                    MODEL_LIKE,
                )
            )
        # Measured once the servers have saved what they learnt (100,000 messages, their
        # recap jobs queued): a turn in a steady state, not behind that import.
        store = open_store(db)
        try:
            expected = sum(len(m) - 1 for m in chats.values())  # the system prompt aside
            deadline = time.monotonic() + 600
            while store.read(_message_count) < expected and time.monotonic() < deadline:
                time.sleep(0.5)
        finally:
            store.close()
        direct_chats = {i: list(m) for i, m in chats.items()}
        for stream in (False, True):
            kind = "streaming" if stream else "not streaming"
            times: dict[str, list[Timing]] = {"direct": [], "proxy": []}
            for block in range(BLOCKS):
                for target in ("direct", "proxy") if block % 2 == 0 else ("proxy", "direct"):
                    proxied = target == "proxy"
                    times[target] += run(chats if proxied else direct_chats, proxied, block, stream)
            for name, value in added(times["direct"], times["proxy"], 0).items():
                figures[f"{kind}: added {name} ms, {label}"] = value
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()


def _message_count(db: Db) -> int:
    return int(db.execute("SELECT count(*) FROM messages").fetchone()[0])


def main() -> None:
    figures: dict[str, object] = {}
    with tempfile.TemporaryDirectory() as folder, PostgresServer(durable=True) as server:
        home = folder
        os.environ["AUTORECAP_HOME"] = home
        sqlite_normal = open_store(str(Path(folder) / "normal.db"), durable=False)
        sqlite_full = open_store(str(Path(folder) / "full.db"))
        postgres = open_store(server.create_database("persist"))
        try:
            persist(sqlite_normal, "SQLite (NORMAL)", figures)
            persist(sqlite_full, "SQLite (FULL)", figures)
            persist(postgres, "PostgreSQL", figures)
        finally:
            for store in (sqlite_normal, sqlite_full, postgres):
                store.close()
        report("store: one changed message persisted, PostgreSQL against SQLite", figures)

        figures = {}
        for workers in (1, 2):
            for label, db in (
                ("SQLite", str(Path(folder) / f"jobs-{workers}.db")),
                ("PostgreSQL", server.create_database(f"jobs_{workers}")),
            ):
                done, rate = jobs_per_second(db, workers, home)
                figures[f"jobs/s, {workers} worker(s), {label}"] = round(rate, 1)
                figures[f"jobs done, {workers} worker(s), {label}"] = done
        report("queue: jobs per second, offline pipeline, PostgreSQL against SQLite", figures)

        if BLOCKS:
            figures = {}
            for label, servers, workers, paused in (
                ("1 server, SQLite", 1, 0, False),
                ("1 server, PostgreSQL", 1, 0, False),
                ("1 server + 1 worker process, PostgreSQL", 1, 1, False),
                ("2 servers, recaps paused, PostgreSQL", 2, 0, True),
                ("2 servers + 2 worker processes, PostgreSQL", 2, 2, False),
            ):
                db = (
                    str(Path(folder) / f"paced-{servers}-{workers}.db")
                    if "SQLite" in label
                    else server.create_database(f"paced_{servers}_{workers}_{int(paused)}")
                )
                paced_turns(db, servers, workers, home, label, figures, paused=paused)
            report("proxy: added latency, paced, 100 clients, PostgreSQL against SQLite", figures)
            with psycopg.connect(server.url) as conn:
                size = conn.execute("SELECT pg_database_size('paced_2_2_0')").fetchone()
            if size:
                print(f"PostgreSQL database after the two-server run: {size[0] / 1e6:.0f} MB")


if __name__ == "__main__":
    main()
