"""Pause points (autorecap/pacing.py): a long job waits while requests are answered, unless a
request waits for the chat it holds; after `patience_s` it runs on, so recaps progress."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from autorecap import pacing
from autorecap.core import running
from autorecap.jobs import JobQueue, Worker, enqueue_pipeline
from autorecap.llm.offline import OfflineBackend
from autorecap.settings import Settings
from autorecap.store.sqlite import SQLiteStore
from autorecap.testing import generate_chat


def make_worker(tmp_path: Path, **options: object) -> Worker:
    store = SQLiteStore(tmp_path / "store.db")
    return Worker(
        JobQueue(store),
        lambda settings: OfflineBackend(),
        settings=Settings(),
        **options,  # type: ignore[arg-type]
    )


def test_pause_does_nothing_outside_a_worker() -> None:
    calls: list[int] = []
    pacing.pause()  # no hook: returns at once
    with pacing.pausing(lambda: calls.append(1)):
        pacing.pause()
        pacing.pause()
    pacing.pause()
    assert calls == [1, 1]


def test_a_pause_waits_while_requests_are_answered(tmp_path: Path) -> None:
    busy = threading.Event()
    busy.set()
    worker = make_worker(tmp_path, yield_to=busy.is_set, patience_s=30.0)
    finished = threading.Event()

    def job() -> None:
        with pacing.pausing(worker._pause):
            pacing.pause()
        finished.set()

    thread = threading.Thread(target=job, daemon=True)
    thread.start()
    assert not finished.wait(0.3)  # requests in flight: the job waits at its pause point
    busy.clear()
    assert finished.wait(10)
    thread.join(10)


def test_a_job_holding_a_wanted_chat_does_not_pause(tmp_path: Path) -> None:
    """A request waits for the chat's lock: pausing would only make it wait longer."""
    wanted: set[str] = {"c"}
    worker = make_worker(
        tmp_path, yield_to=lambda: True, wanted=wanted.__contains__, patience_s=30.0
    )
    started = time.monotonic()
    with pacing.pausing(worker._pause), worker.chat_lock("c"):
        pacing.pause()
    assert time.monotonic() - started < 5  # not the 30 s of patience
    assert worker._held() == []


def test_after_patience_the_job_runs_a_slice_without_pausing(tmp_path: Path) -> None:
    worker = make_worker(tmp_path, yield_to=lambda: True, patience_s=0.2)
    with pacing.pausing(worker._pause):
        started = time.monotonic()
        pacing.pause()  # waits for patience
        waited = time.monotonic() - started
        again = time.monotonic()
        pacing.pause()  # inside the slice: at once
        second = time.monotonic() - again
    assert waited >= 0.2
    assert second < waited


def test_a_long_running_recap_waits_for_a_quiet_moment(tmp_path: Path) -> None:
    """The offline running recap of a long chat (a fold of many scenes) makes no version while
    requests keep coming, and finishes once they stop. The worker shares its chat and lock
    with the test, as with the server."""
    busy = threading.Event()
    store = SQLiteStore(tmp_path / "store.db")
    queue = JobQueue(store)
    store.import_chat(generate_chat(400, seed=3, chat_id="long"))
    chat = store.load_chat("long")
    lock = threading.RLock()
    settings = Settings()
    worker = Worker(
        queue,
        lambda s: OfflineBackend(),
        settings=settings,
        chat_source=lambda chat_id: chat,
        chat_lock=lambda chat_id: lock,
        yield_to=busy.is_set,
        patience_s=60.0,
    )
    enqueue_pipeline(queue, chat, settings)
    folding = threading.Event()
    original = worker.execute
    before: list[int] = []

    def execute(job: object) -> None:
        if getattr(job, "kind", "") == "running_recap" and not folding.is_set():
            before.append(len(running.versions(chat)))
            busy.set()  # requests arrive as the fold starts
            folding.set()
        original(job)  # type: ignore[arg-type]

    worker.execute = execute  # type: ignore[method-assign]
    thread = threading.Thread(target=worker.run, kwargs={"until_empty": True}, daemon=True)
    thread.start()
    assert folding.wait(120), "the pipeline never reached the running recap"
    time.sleep(0.5)
    assert thread.is_alive()  # paused at its first pause point
    assert len(running.versions(chat)) == before[0]
    busy.clear()
    thread.join(120)
    assert not thread.is_alive()
    assert len(running.versions(store.load_chat("long"))) > before[0]
    store.close()


@pytest.mark.parametrize("holding", [False, True])
def test_held_chats_are_tracked_per_thread(tmp_path: Path, holding: bool) -> None:
    worker = make_worker(tmp_path)
    seen: list[list[str]] = []
    if holding:
        with worker.chat_lock("a"):
            seen.append(list(worker._held()))
            other = threading.Thread(target=lambda: seen.append(list(worker._held())))
            other.start()
            other.join()
    assert worker._held() == []
    assert seen == ([["a"], []] if holding else [])
