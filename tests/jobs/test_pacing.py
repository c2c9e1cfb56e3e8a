"""Pause points (autorecap/pacing.py): a long job waits while requests are answered, letting go of
the chat it holds meanwhile, and lets a request that waits for that chat have it at once; after
`patience_s` it runs on, so recaps progress."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from autorecap import pacing
from autorecap.core import running
from autorecap.core.data import get_data
from autorecap.core.model import Chat
from autorecap.jobs import JobQueue, Worker, enqueue_pipeline, handlers
from autorecap.jobs.context import ChatMovedError
from autorecap.recap.offline.engine import OfflineBackend
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
    with pacing.pausing(lambda step_aside: calls.append(1)):
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


def shared_worker(tmp_path: Path, **options: object) -> tuple[Worker, Chat, threading.RLock]:
    """A worker that shares a stored chat and its lock with the test, as with the server."""
    store = SQLiteStore(tmp_path / "store.db")
    store.import_chat(generate_chat(20, seed=1, chat_id="c"))
    chat = store.load_chat("c")
    lock = threading.RLock()
    worker = Worker(
        JobQueue(store),
        lambda settings: OfflineBackend(),
        settings=Settings(),
        chat_source=lambda chat_id: chat,
        chat_lock=lambda chat_id: lock,
        **options,  # type: ignore[arg-type]
    )
    return worker, chat, lock


def take(lock: threading.RLock, then: Callable[[], object] = lambda: None) -> threading.Thread:
    """Another thread (a request) takes the lock, does `then`, lets go."""

    def request() -> None:
        with lock:
            then()

    thread = threading.Thread(target=request, daemon=True)
    thread.start()
    return thread


def busy_worker(tmp_path: Path) -> tuple[threading.Event, Worker, Chat, threading.RLock]:
    """A shared worker (`shared_worker`) with requests in flight until `busy` is cleared."""
    busy = threading.Event()
    busy.set()
    return busy, *shared_worker(tmp_path, yield_to=busy.is_set, patience_s=30.0)


def test_a_job_lets_go_of_its_chat_while_it_pauses(tmp_path: Path) -> None:
    busy, worker, chat, lock = busy_worker(tmp_path)
    appended = threading.Event()

    def job() -> None:
        with pacing.pausing(worker._pause), worker.chat_lock("c"):
            pacing.pause()
            assert worker._held() == ["c"]

    thread = threading.Thread(target=job, daemon=True)
    thread.start()
    request = take(lock, lambda: (chat.append({"mes": "new", "is_user": True}), appended.set()))
    assert appended.wait(10)  # the request got the chat while the job paused
    request.join(10)
    busy.clear()
    thread.join(10)
    assert not thread.is_alive()  # an appended message is no reason to stop


def test_a_request_waiting_for_the_chat_gets_it_at_the_next_pause_point(tmp_path: Path) -> None:
    """No traffic to pause for, but a request waits for the job's chat: the job lets go of it
    at once and takes it back when the request is done."""
    wanting: set[str] = set()
    worker, _chat, lock = shared_worker(
        tmp_path, yield_to=lambda: False, wanted=wanting.__contains__, patience_s=30.0
    )
    order: list[str] = []
    with pacing.pausing(worker._pause), worker.chat_lock("c"):
        wanting.add("c")
        request = take(lock, lambda: (order.append("request"), wanting.discard("c")))
        time.sleep(0.2)
        assert order == []  # the job still holds the chat
        pacing.pause()
        order.append("job goes on")
        assert lock._is_owned()  # type: ignore[attr-defined]
    request.join(10)
    assert order == ["request", "job goes on"]
    assert worker._held() == []


def test_a_message_removed_while_the_job_let_go_stops_the_job(tmp_path: Path) -> None:
    busy, worker, chat, lock = busy_worker(tmp_path)
    failed: list[BaseException] = []
    holding = threading.Event()

    def job() -> None:
        try:
            with pacing.pausing(worker._pause), worker.chat_lock("c"):
                holding.set()
                pacing.pause()
        except ChatMovedError as error:
            failed.append(error)

    thread = threading.Thread(target=job, daemon=True)
    thread.start()
    # The request comes once the job holds the chat (else it could remove the message before
    # the job began, and the job would start on the chat as it is).
    assert holding.wait(10)
    take(lock, lambda: (chat.messages.remove(chat.messages[3]), busy.clear())).join(10)
    thread.join(10)
    assert len(failed) == 1
    assert "removed or moved" in str(failed[0])
    assert worker._held() == []


def test_a_copy_in_progress_keeps_its_chat(tmp_path: Path) -> None:
    """`pause(step_aside=False)`: the job waits for the traffic, holding the chat."""
    busy, worker, _chat, lock = busy_worker(tmp_path)
    got = threading.Event()

    def job() -> None:
        with pacing.pausing(worker._pause), worker.chat_lock("c"):
            pacing.pause(step_aside=False)
            assert not got.is_set()

    thread = threading.Thread(target=job, daemon=True)
    thread.start()
    time.sleep(0.1)
    request = take(lock, got.set)
    assert not got.wait(0.3)
    busy.clear()
    thread.join(10)
    assert got.wait(10)
    request.join(10)


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


def test_a_job_whose_chat_was_reshaped_while_it_let_go_runs_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Scene detection pauses (requests in flight) and lets go of the chat; a request deletes a
    message meanwhile: the detection's positions are wrong now, so it runs again at once, on
    the chat as it is, and succeeds."""
    busy = threading.Event()
    worker, chat, lock = shared_worker(tmp_path, yield_to=busy.is_set, patience_s=30.0)
    queue = worker.queue
    enqueue_pipeline(queue, chat, Settings())
    runs: list[int] = []
    detect = handlers.detect_scene_breaks

    def detect_once_disturbed(target: Chat, *args: Any, **options: Any) -> list[int]:
        runs.append(len(target.messages))
        if len(runs) == 1:  # the job holds the chat: a request comes for it
            busy.set()
            take(lock, lambda: (target.messages.remove(target.messages[5]), busy.clear()))
        return detect(target, *args, **options)

    monkeypatch.setattr(handlers, "detect_scene_breaks", detect_once_disturbed)
    stats = worker.run(until_empty=True)
    assert runs == [20, 19]  # begun on 20 messages, run again on the 19 left
    assert stats.failed == 0
    assert stats.retried == 0
    assert queue.counts()["failed"] == 0
    assert all(get_data(m, "auto_scene_break_checked") for m in chat.messages[:10])
