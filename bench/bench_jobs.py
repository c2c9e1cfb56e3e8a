"""The job queue: jobs per second with the offline engine on a 1,000-message chat, and the
queue's overhead against running the same pipeline directly, in the same run. Figures and
ratios, never asserted."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from _common import report
from autorecap.core.tokens import get_counter
from autorecap.jobs import JobQueue, Worker, enqueue_pipeline
from autorecap.llm.offline import OfflineBackend
from autorecap.pipeline import run_pipeline
from autorecap.settings import Settings
from autorecap.store import SQLiteStore
from autorecap.testing import generate

N_MESSAGES = 1000


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


if __name__ == "__main__":
    main()
