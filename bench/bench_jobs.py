"""The job queue: jobs per second with the offline engine on a 1,000-message chat, and the
queue's overhead against running the same pipeline directly, in the same run. Then the steady
state of the proxy: turns on a recapped chat of 1,000 messages (a user message and a reply
each), their jobs run by the server's worker, against the whole pipeline called directly on the
same chat after each turn. Figures and ratios, never asserted."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import orjson

from _common import report
from autorecap.core.tokens import get_counter
from autorecap.jobs import JobQueue, Worker, enqueue_pipeline
from autorecap.profiles import Profiles
from autorecap.recap.offline.engine import OfflineBackend
from autorecap.recap.pipeline import run_pipeline
from autorecap.server.proxy.turns import ProxyChats
from autorecap.settings import Settings
from autorecap.store import SQLiteStore
from autorecap.testing import generate

N_MESSAGES = 1000
TURNS = 50


def main() -> None:
    settings = Settings()
    counter = get_counter()
    chat = generate(N_MESSAGES, seed=8).chat
    start = time.perf_counter()
    run_pipeline(chat, OfflineBackend(counter), settings, counter, now_ms=0)
    direct_s = time.perf_counter() - start

    with tempfile.TemporaryDirectory() as folder:
        store = SQLiteStore(Path(folder) / "jobs.db")
        fresh = generate(N_MESSAGES, seed=8).chat
        store.import_chat(fresh)
        queue = JobQueue(store)
        start = time.perf_counter()
        enqueue_pipeline(queue, store.load_chat(fresh.id), settings)
        enqueue_s = time.perf_counter() - start
        worker = Worker(queue, lambda _: OfflineBackend(counter), settings=settings)
        start = time.perf_counter()
        stats = worker.run()
        work_s = time.perf_counter() - start
        again = time.perf_counter()
        enqueue_pipeline(queue, store.load_chat(fresh.id), settings)
        Worker(queue, lambda _: OfflineBackend(counter), settings=settings).run()
        again_s = time.perf_counter() - again
        store.close()

    queued_s = enqueue_s + work_s
    report(
        "job queue, offline engine, 1,000 messages",
        {
            "jobs done": stats.done,
            "jobs per second": stats.done / work_s,
            "enqueue s": enqueue_s,
            "queue (enqueue + work) s": queued_s,
            "direct pipeline s (same work, no queue)": direct_s,
            "queue overhead (ratio to direct)": queued_s / direct_s,
            "second run, nothing changed s": again_s,
        },
    )


def turns() -> None:
    """The server's worker on the jobs of one turn after another (see the module docstring)."""
    settings = Settings()
    counter = get_counter()
    generated = generate(N_MESSAGES, seed=8).chat
    history: list[dict[str, str]] = [{"role": "system", "content": "You are Captain Mira."}]
    for message in generated.messages:
        role = "user" if message.is_user else "assistant"
        history.append({"role": role, "content": message.text})
    lines = [m.text for m in generated.messages[-2 * TURNS :]]  # the story's own kind of text

    with tempfile.TemporaryDirectory() as folder:
        store = SQLiteStore(Path(folder) / "turns.db")
        registry = ProxyChats(store, JobQueue(store), profiles=Profiles(Path(folder) / "s.json"))
        worker = registry.worker(lambda _: OfflineBackend(counter))

        def turn(user: str, reply: str) -> None:
            history.append({"role": "user", "content": user})
            body = orjson.dumps({"model": "m", "messages": history})
            begun = registry.begin("story", body)
            registry.record(begun, reply)
            registry.settle(begun)
            history.append({"role": "assistant", "content": reply})

        turn("Where were we?", "At the harbour of Ilmar.")  # the first turn: 1,000 new messages
        worker.run()
        before = registry.queue.counts()["done"]
        queued_s = 0.0
        for number in range(TURNS):
            turn(lines[2 * number], lines[2 * number + 1])
            start = time.perf_counter()
            worker.run()
            queued_s += time.perf_counter() - start
        jobs = registry.queue.counts()["done"] - before
        registry.close()
        store.close()

    chat = generate(N_MESSAGES, seed=8).chat
    backend = OfflineBackend(counter)
    run_pipeline(chat, backend, settings, counter, now_ms=0)
    direct_s = 0.0
    for number in range(TURNS):
        for index, text in enumerate(lines[2 * number : 2 * number + 2]):
            chat.messages.append(chat.adopt({"name": "x", "is_user": index == 0, "mes": text}))
        start = time.perf_counter()
        run_pipeline(chat, backend, settings, counter, now_ms=0)
        direct_s += time.perf_counter() - start
    report(
        f"server worker, steady state: {TURNS} turns on a recapped chat of 1,000 messages",
        {
            "jobs per turn": jobs / TURNS,
            "worker ms per turn": queued_s / TURNS * 1e3,
            "direct pipeline ms per turn (whole chat, no queue)": direct_s / TURNS * 1e3,
            "ratio to direct": queued_s / direct_s,
        },
    )


if __name__ == "__main__":
    main()
    turns()
