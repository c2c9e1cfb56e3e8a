"""Running the pipeline on the queue for one chat, with progress: what `autorecap recap` does."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from autorecap.core import running
from autorecap.core.data import get_memory
from autorecap.core.model import Chat
from autorecap.core.scenes import break_indexes, recap_versions
from autorecap.jobs.handlers import enqueue_pipeline
from autorecap.jobs.queue import JobQueue
from autorecap.jobs.runner import Worker
from autorecap.recap.backend import RecapBackend
from autorecap.settings import Settings
from autorecap.store.base import ChatStore

STOP_WAIT_S = 2.0
"""How long an interrupted run waits for the job in hand before it gives up on it."""


@dataclass
class QueueRunStats:
    """What recapping one chat on the queue did (counted on the chat, before and after)."""

    message_recaps: int = 0
    breaks_found: int = 0
    scene_recaps: int = 0
    running_versions: int = 0
    failures: list[str] = field(default_factory=list)
    jobs_done: int = 0


def _snapshot(chat: Chat) -> tuple[int, int, int, int]:
    return (
        sum(1 for m in chat.messages if get_memory(m)),
        len(break_indexes(chat.messages)),
        sum(len(recap_versions(chat.messages[i])) for i in break_indexes(chat.messages)),
        len(running.versions(chat)),
    )


def recap_on_queue(
    store: ChatStore,
    chat_id: str,
    backend: RecapBackend,
    settings: Settings,
    *,
    backoff_s: float = 2.0,
    progress: Callable[[dict[str, tuple[int, int]]], None] | None = None,
) -> tuple[Chat, QueueRunStats]:
    """Queue the pipeline for a stored chat and work until its jobs are finished. Returns the
    chat as stored afterwards, and what changed. `progress` gets `{kind: (finished, total)}`."""
    queue = JobQueue(store, backoff_s=backoff_s)
    start_id = queue.last_id()
    before = store.load_chat(chat_id)
    first = _snapshot(before)
    enqueue_pipeline(queue, before, settings)
    worker = Worker(
        queue,
        lambda _: backend,
        settings=settings,
        concurrency=1 if backend.name == "offline" else settings.llm_concurrency,
        idle_sleep=0.05,
    )
    done = threading.Event()

    def work() -> None:
        try:
            worker.run(chat_id=chat_id)
        finally:
            done.set()

    thread = threading.Thread(target=work, name="autorecap-recap", daemon=True)
    thread.start()
    try:
        while not done.wait(0.1):
            if progress is not None:
                progress(_kind_progress(queue, chat_id, start_id))
    except KeyboardInterrupt:
        # No new job; the one in hand may end and be saved (a second interrupt, or a slow LLM
        # call, leaves it): what is saved stays, the rest stays queued.
        worker.stop()
        with contextlib.suppress(KeyboardInterrupt):
            done.wait(STOP_WAIT_S)
        raise
    thread.join()
    if progress is not None:
        progress(_kind_progress(queue, chat_id, start_id))
    after = store.load_chat(chat_id)
    last = _snapshot(after)
    stats = QueueRunStats(
        message_recaps=max(0, last[0] - first[0]),
        breaks_found=max(0, last[1] - first[1]),
        scene_recaps=max(0, last[2] - first[2]),
        running_versions=max(0, last[3] - first[3]),
        jobs_done=worker.stats.done,
    )
    positions = {m.id: i for i, m in enumerate(after.messages)}
    for job in queue.list(states=("failed",), chat_id=chat_id):
        if job.id <= start_id:
            continue  # a failure of an earlier run
        where = job.kind.replace("_", " ")
        if job.kind == "message_recap" and job.target in positions:
            where = f"message {positions[job.target]}"
        stats.failures.append(f"{where}: {job.error}")
    return after, stats


def _kind_progress(queue: JobQueue, chat_id: str, start_id: int) -> dict[str, tuple[int, int]]:
    totals: dict[str, list[int]] = {}
    for job in queue.list(chat_id=chat_id):
        if job.id <= start_id:
            continue
        entry = totals.setdefault(job.kind, [0, 0])
        entry[1] += 1
        if job.state in ("done", "failed", "cancelled"):
            entry[0] += 1
    return {kind: (finished, total) for kind, (finished, total) in totals.items()}
