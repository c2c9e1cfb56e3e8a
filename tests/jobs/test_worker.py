"""The worker and the pipeline's jobs: a whole chat through the queue, idempotence, failures with
retries, concurrency, deleted messages, and a worker process SIGKILLed mid-job."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from autorecap.core import running
from autorecap.core.data import get_data, get_memory
from autorecap.core.model import Chat
from autorecap.core.scenes import break_indexes, recap_versions, scenes
from autorecap.jobs import JobQueue, Worker, WorkerStats, enqueue_pipeline
from autorecap.jobs.queue import Job, JobError
from autorecap.jobs.refusals import REFUSAL_PAUSE_S, REFUSALS_TO_STOP, Refusals
from autorecap.jobs.runner import STALE_TRIES
from autorecap.profiles import Profiles
from autorecap.recap.backend import LLMError, RecapRequest, RecapResult, SceneRecapRequest
from autorecap.recap.offline.engine import OfflineBackend
from autorecap.settings import Settings
from autorecap.store.migrations import StaleChatError
from autorecap.store.sqlite import SQLiteStore
from autorecap.testing import generate
from tests.recap.conftest import Recorded, Scripted
from tests.test_pipeline import (
    PROXY_VARIABLES,
    AnsweringServer,
    answer_everything,
    completion,
    kind_of,
    prompt_of,
)

REPO = Path(__file__).resolve().parents[2]


def wait_until(condition: Callable[[], bool], timeout: float = 20.0) -> bool:
    """Poll `condition` until it holds or `timeout` seconds pass (no duration is asserted)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return condition()


class CountingBackend(OfflineBackend):
    """The offline engine, counting message recaps per text and how many run at once; it can
    sleep in each call, and fail every call for one text."""

    def __init__(
        self, *, delay: float = 0.0, fail_on: str | None = None, retryable: bool = True
    ) -> None:
        super().__init__()
        self.delay = delay
        self.fail_on = fail_on
        self.retryable = retryable
        self.calls: Counter[str] = Counter()
        self.in_flight = 0
        self.max_in_flight = 0
        self._count_lock = threading.Lock()

    def message_recap(self, request: RecapRequest) -> RecapResult:
        with self._count_lock:
            self.calls[request.text] += 1
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.delay:
                time.sleep(self.delay)
            if request.text == self.fail_on:
                status = 503 if self.retryable else 400
                raise LLMError(
                    f"the LLM server answered {status} (scripted for this message)",
                    retryable=self.retryable,
                )
            return super().message_recap(request)
        finally:
            with self._count_lock:
                self.in_flight -= 1

    @property
    def total(self) -> int:
        return sum(self.calls.values())


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteStore]:
    opened = SQLiteStore(tmp_path / "w.db", synchronous="OFF")
    yield opened
    opened.close()


def stored_chat(store: SQLiteStore, n: int, seed: int = 1, chat_id: str = "story") -> Chat:
    store.import_chat(generate(n, seed=seed, chat_id=chat_id).chat)
    return store.load_chat(chat_id)


def run_worker(
    queue: JobQueue,
    backend: CountingBackend,
    *,
    settings: Settings | None = None,
    concurrency: int = 1,
) -> WorkerStats:
    """`Worker.run()` until the queue is empty, on a thread with a deadline (never a hang)."""
    worker = Worker(
        queue,
        lambda _: backend,
        settings=settings or Settings(),
        concurrency=concurrency,
        idle_sleep=0.01,
    )
    result: list[WorkerStats] = []
    thread = threading.Thread(target=lambda: result.append(worker.run()), daemon=True)
    thread.start()
    thread.join(timeout=30)
    if thread.is_alive():
        worker.stop()
        thread.join(timeout=10)
        pytest.fail(f"the worker did not finish: {queue.counts()}")
    return result[0]


def assert_all_done(queue: JobQueue) -> None:
    counts = queue.counts()
    assert counts["done"] == len(queue.list())
    assert counts == dict.fromkeys(counts, 0) | {"done": counts["done"]}


# --- the whole pipeline ----------------------------------------------------------------------


def test_the_pipeline_on_the_queue_recaps_a_stored_chat(store: SQLiteStore) -> None:
    generated = generate(60, seed=1, chat_id="story")
    store.import_chat(generated.chat)
    queue = JobQueue(store, backoff_s=0.01)
    chat = store.load_chat("story")
    ids = enqueue_pipeline(queue, chat, Settings())
    assert len(ids) == 61  # one per message, then scene detection
    assert [queue.get(i).kind for i in ids[:-1]] == ["message_recap"] * 60
    assert queue.get(ids[-1]).kind == "detect_scenes"
    backend = CountingBackend()
    stats = run_worker(queue, backend)
    assert_all_done(queue)
    assert (stats.failed, stats.retried, stats.errors) == (0, 0, [])
    after = store.load_chat("story")
    assert all(get_memory(m) for m in after.messages)
    assert not any(get_data(m, "error") for m in after.messages)
    assert backend.calls == Counter(m.text for m in after.messages)  # each message once
    assert break_indexes(after.messages) == generated.scene_ends
    closed = [s for s in scenes(after.messages) if s.closed]
    assert len(closed) == 2
    assert all(s.recap for s in closed)
    kinds = Counter(j.kind for j in queue.list())
    assert kinds == {"message_recap": 60, "detect_scenes": 1, "scene_recap": 2, "running_recap": 1}
    assert len(running.versions(after)) == 1  # the latest closed scene waits
    assert stats.done == len(queue.list())

    # Again, nothing changed: no LLM call at all.
    again = CountingBackend()
    enqueue_pipeline(queue, store.load_chat("story"), Settings())
    run_worker(queue, again)
    assert again.total == 0
    assert_all_done(queue)
    assert [get_memory(m) for m in store.load_chat("story").messages] == [
        get_memory(m) for m in after.messages
    ]


def test_a_requeued_unchanged_message_makes_no_llm_call(store: SQLiteStore) -> None:
    chat = stored_chat(store, 12)
    queue = JobQueue(store, backoff_s=0.01)
    enqueue_pipeline(queue, chat, Settings())
    run_worker(queue, CountingBackend())
    before = store.load_chat("story")
    target = before.messages[4]
    queue.enqueue("message_recap", "story", target.id)  # same input as its last success
    again = CountingBackend()
    stats = run_worker(queue, again)
    assert again.total == 0
    assert stats.llm_skipped == 1
    assert_all_done(queue)
    assert get_memory(store.load_chat("story").messages[4]) == get_memory(target)


def edit_text(store: SQLiteStore, index: int, text: str) -> Chat:
    chat = store.load_chat("story")
    chat.messages[index]["mes"] = text
    store.save(chat, changed=[chat.messages[index]])
    return store.load_chat("story")


NEW_TEXT = "Tomas hands Mira the brass key to Vault 77 and swears to keep the 300 crowns hidden."


def test_an_edited_message_gets_a_new_recap_from_a_requeued_job(store: SQLiteStore) -> None:
    chat = stored_chat(store, 12)
    queue = JobQueue(store, backoff_s=0.01)
    enqueue_pipeline(queue, chat, Settings())
    run_worker(queue, CountingBackend())
    before = store.load_chat("story")
    edited = edit_text(store, 5, NEW_TEXT)
    queue.enqueue("message_recap", "story", edited.messages[5].id)
    backend = CountingBackend()
    run_worker(queue, backend)
    assert backend.calls == Counter({NEW_TEXT: 1})
    after = store.load_chat("story")
    assert get_memory(after.messages[5]) != get_memory(before.messages[5])
    assert "Vault 77" in get_memory(after.messages[5])


def test_rerunning_the_pipeline_after_an_edit_regenerates_only_that_recap(
    store: SQLiteStore,
) -> None:
    """Was a bug: `enqueue_pipeline` queues only messages that `needs_recap()`, which is False for a
    message that already has a recap, so an edited message gets no job and keeps the recap of
    its old text (the runner's input-hash check that would redo it never runs)."""
    chat = stored_chat(store, 12)
    queue = JobQueue(store, backoff_s=0.01)
    enqueue_pipeline(queue, chat, Settings())
    run_worker(queue, CountingBackend())
    before = store.load_chat("story")
    edited = edit_text(store, 5, NEW_TEXT)
    enqueue_pipeline(queue, edited, Settings())
    backend = CountingBackend()
    run_worker(queue, backend)
    assert_all_done(queue)
    assert backend.calls == Counter({NEW_TEXT: 1})
    after = store.load_chat("story")
    assert "Vault 77" in get_memory(after.messages[5])
    for index, (old, new) in enumerate(zip(before.messages, after.messages, strict=True)):
        if index != 5:
            assert get_memory(new) == get_memory(old)


def test_each_run_queues_scene_work_only_for_the_scenes_that_need_it(store: SQLiteStore) -> None:
    """A turn of the proxy queues the pipeline again: its detection must not queue a recap of
    every scene recapped already, nor its running recap rewrite a header it did not change."""
    generated = generate(60, seed=1, chat_id="story")
    store.import_chat(generated.chat)
    queue = JobQueue(store, backoff_s=0.01)
    enqueue_pipeline(queue, store.load_chat("story"), Settings())
    run_worker(queue, CountingBackend())
    first = {job.id for job in queue.list()}
    recapped = store.load_chat("story")
    header_rev = recapped.revs.header

    def kinds_since(seen: set[int]) -> Counter[str]:
        return Counter(job.kind for job in queue.list() if job.id not in seen)

    enqueue_pipeline(queue, recapped, Settings())  # nothing changed
    run_worker(queue, CountingBackend())
    assert_all_done(queue)
    assert kinds_since(first) == {"detect_scenes": 1, "running_recap": 1}
    assert store.load_chat("story").revs.header == header_rev  # the header was not written

    # An edit inside the first scene: that scene alone is recapped again.
    seen = {job.id for job in queue.list()}
    end = generated.scene_ends[0]
    edited = edit_text(store, end - 1, NEW_TEXT)
    enqueue_pipeline(queue, edited, Settings())
    run_worker(queue, CountingBackend())
    assert_all_done(queue)
    assert kinds_since(seen) == {
        "message_recap": 1,
        "detect_scenes": 1,
        "scene_recap": 1,
        "running_recap": 1,
    }
    scene_job = next(j for j in queue.list() if j.id not in seen and j.kind == "scene_recap")
    after = store.load_chat("story")
    assert scene_job.target == after.messages[end].id
    assert len(recap_versions(after.messages[end])) == 2
    assert "Vault 77" in str(get_data(after.messages[end], "scene_recap_memory"))
    second = generated.scene_ends[1]
    assert recap_versions(after.messages[second]) == recap_versions(recapped.messages[second])


# --- failures --------------------------------------------------------------------------------


def test_a_job_that_always_fails_ends_failed_and_the_rest_finish(store: SQLiteStore) -> None:
    chat = stored_chat(store, 30, seed=4)
    bad = chat.messages[7]
    queue = JobQueue(store, backoff_s=0.01)
    settings = Settings(max_retries=2)
    enqueue_pipeline(queue, chat, settings)
    backend = CountingBackend(fail_on=bad.text)
    stats = run_worker(queue, backend, settings=settings)
    failed = queue.list(states=("failed",))
    assert [(j.kind, j.target) for j in failed] == [("message_recap", bad.id)]
    job = failed[0]
    assert job.attempts == 3  # max_retries + 1
    assert job.error == "the LLM server answered 503 (scripted for this message)"
    assert backend.calls[bad.text] == 3
    assert (stats.failed, stats.retried) == (1, 2)
    assert stats.errors == [f"message_recap story (message id {bad.id}): {job.error}"]
    others = [j for j in queue.list() if j.id != job.id]
    assert {j.state for j in others} == {"done"}
    assert {j.kind for j in others} >= {"detect_scenes", "running_recap"}
    after = store.load_chat("story")
    assert get_data(after.messages[7], "error") == job.error
    assert get_memory(after.messages[7]) == ""
    for index, message in enumerate(after.messages):
        if index != 7:
            assert get_memory(message)
            assert get_data(message, "error") is None
            assert backend.calls[message.text] == 1


def test_a_request_the_llm_refuses_fails_for_good_at_once(store: SQLiteStore) -> None:
    # The backend asked again already: queued again, each try would cost as much for the
    # same refusal (a 400, an answer that is no recap).
    chat = stored_chat(store, 30, seed=4)
    bad = chat.messages[7]
    queue = JobQueue(store, backoff_s=0.01)
    settings = Settings(max_retries=5)
    enqueue_pipeline(queue, chat, settings)
    backend = CountingBackend(fail_on=bad.text, retryable=False)
    stats = run_worker(queue, backend, settings=settings)
    [job] = queue.list(states=("failed",))
    assert (job.target, job.attempts, backend.calls[bad.text]) == (bad.id, 1, 1)
    assert (stats.failed, stats.retried) == (1, 0)
    assert job.error == "the LLM server answered 400 (scripted for this message)"


class RefusingBackend(CountingBackend):
    """Refuses (401) every message of the chats given, as a wrong key or model would."""

    def __init__(self, refused: set[str]) -> None:
        super().__init__()
        self.refused = refused

    def message_recap(self, request: RecapRequest) -> RecapResult:
        if request.text in self.refused:
            with self._count_lock:
                self.calls[request.text] += 1
            raise LLMError("the LLM server answered 401: invalid key")
        return super().message_recap(request)


def test_a_chat_whose_jobs_the_llm_refuses_stops_calling_it(store: SQLiteStore) -> None:
    """A key or model that refuses everything: after REFUSALS_TO_STOP refusals in a row the
    chat's other jobs fail without a call, saying why and what to do; another chat's jobs,
    which the LLM answers, go on."""
    refused_chat = stored_chat(store, 30, seed=4, chat_id="refused")
    other_chat = stored_chat(store, 20, seed=5, chat_id="answered")
    queue = JobQueue(store, backoff_s=0.01)
    settings = Settings(max_retries=5)
    enqueue_pipeline(queue, refused_chat, settings)
    enqueue_pipeline(queue, other_chat, settings)
    backend = RefusingBackend({m.text for m in refused_chat.messages})
    stats = run_worker(queue, backend, settings=settings)
    calls = sum(backend.calls[m.text] for m in refused_chat.messages)
    assert calls == REFUSALS_TO_STOP  # not one call per message (30)
    failed = [j for j in queue.list(states=("failed",)) if j.kind == "message_recap"]
    assert {j.chat_id for j in failed} == {"refused"}
    assert len(failed) == 30
    held = [j for j in failed if j.error.startswith("not sent:")]
    assert len(held) == 30 - REFUSALS_TO_STOP
    assert "refused this chat's last 3 calls (the LLM server answered 401: invalid key)" in (
        held[0].error
    )
    assert "autorecap jobs retry --failed" in held[0].error
    assert stats.failed >= 30
    answered = store.load_chat("answered")
    assert all(get_memory(m) for m in answered.messages)


class SceneRefusingBackend(CountingBackend):
    def scene_recap(self, request: SceneRecapRequest) -> RecapResult:
        raise LLMError("the LLM server answered 400: context too long")


def test_a_scene_recap_the_llm_refuses_fails_for_good_at_once(store: SQLiteStore) -> None:
    chat = stored_chat(store, 60, seed=4)
    queue = JobQueue(store, backoff_s=0.01)
    settings = Settings(max_retries=5)
    enqueue_pipeline(queue, chat, settings)
    run_worker(queue, SceneRefusingBackend(), settings=settings)
    failed = [j for j in queue.list(states=("failed",)) if j.kind == "scene_recap"]
    assert failed
    assert failed[0].attempts == 1  # not max_retries more calls for the same refusal
    assert failed[0].error.startswith("scene ")
    assert "context too long" in failed[0].error


def job_of(chat: str, *, queued: float = 0.0, retried: float | None = None) -> Job:
    at = queued if retried is None else retried
    return Job(
        1, "message_recap", chat, 1, 0, "running", 1, 3, 0.0, None, 0.0, None, queued, at, None
    )


def test_refusals_hold_a_chat_for_a_while_then_let_one_job_try() -> None:
    now = [100.0]
    refusals = Refusals(clock=lambda: now[0])
    for _ in range(REFUSALS_TO_STOP - 1):
        refusals.refused("a", LLMError("400"))
    assert refusals.holding(job_of("a")) is None  # not yet
    same = LLMError("400: the batch")
    refusals.refused("a", same)
    refusals.refused("a", same)  # a batch's jobs share one call's error: counted once
    held = refusals.holding(job_of("a"))
    assert held is not None
    assert f"last {REFUSALS_TO_STOP} calls" in str(held)
    assert refusals.holding(job_of("b")) is None  # per chat
    # A job queued again after the refusals (the user fixed the settings) is sent.
    assert refusals.holding(job_of("a", retried=now[0] + 1)) is None
    assert refusals.holding(job_of("a", retried=now[0] - 1)) is not None  # before: held
    now[0] += REFUSAL_PAUSE_S
    assert refusals.holding(job_of("a")) is None  # one job may try again...
    assert refusals.holding(job_of("a")) is not None  # ...and the others wait for its answer
    refusals.refused("a", LLMError("400 again"))
    assert refusals.holding(job_of("a")) is not None  # refused again: held again
    refusals.answered("a")
    assert refusals.holding(job_of("a")) is None


def test_jobs_retried_after_a_fix_are_sent_by_the_same_worker(store: SQLiteStore) -> None:
    chat = stored_chat(store, 12, seed=4, chat_id="fixed")
    queue = JobQueue(store, backoff_s=0.01)
    settings = Settings(max_retries=5)
    enqueue_pipeline(queue, chat, settings)
    backend = RefusingBackend({m.text for m in chat.messages})
    worker = Worker(queue, lambda _: backend, settings=settings, idle_sleep=0.01)
    worker.run()
    failed = queue.list(states=("failed",))
    assert any((j.error or "").startswith("not sent:") for j in failed)
    backend.refused = set()  # the key was fixed
    for job in failed:
        queue.retry(job.id)
    worker.run()
    assert queue.list(states=("failed",)) == []
    assert all(get_memory(m) for m in store.load_chat("fixed").messages)


def test_a_recap_whose_save_was_undone_is_made_again(store: SQLiteStore) -> None:
    """A job's save undone (the job was taken over by another worker meanwhile): its recaps
    were in the worker's copy of the chat, not in the store. Run again, the job must not take
    them for saved ones."""
    chat = stored_chat(store, 6, seed=3, chat_id="undone")
    queue = JobQueue(store, backoff_s=0.01)
    enqueue_pipeline(queue, chat, Settings())
    finish = queue.finish
    undone: list[int] = []

    def taken_over_once(db: Any, job: Job, **options: Any) -> None:
        if job.kind == "message_recap" and not undone:
            undone.append(job.id)
            raise JobError(f"job {job.id} was taken over by another worker; its result is dropped")
        finish(db, job, **options)

    queue.finish = taken_over_once  # type: ignore[method-assign]
    run_worker(queue, CountingBackend(), settings=Settings(max_retries=3))
    assert undone
    assert all(get_memory(m) for m in store.load_chat("undone").messages)


def test_a_recap_refused_by_every_save_is_made_again_later(
    store: SQLiteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every save refused (other processes saving first, STALE_TRIES times in a row): the job
    is queued again, and its recaps, left unsaved in the copy, are not taken for saved ones."""
    chat = stored_chat(store, 6, seed=3, chat_id="busy")
    queue = JobQueue(store, backoff_s=0.01)
    enqueue_pipeline(queue, chat, Settings())
    save = store.save
    refused: list[int] = []

    def refusing(*args: Any, **options: Any) -> Any:
        if len(refused) < STALE_TRIES:
            refused.append(1)
            raise StaleChatError("another process saved the chat first")
        return save(*args, **options)

    monkeypatch.setattr(store, "save", refusing)
    stats = run_worker(queue, CountingBackend(), settings=Settings(max_retries=3))
    assert len(refused) == STALE_TRIES
    assert stats.retried >= 1
    assert all(get_memory(m) for m in store.load_chat("busy").messages)


# --- concurrency -----------------------------------------------------------------------------


def test_several_recaps_run_at_once_and_the_chat_stays_consistent(store: SQLiteStore) -> None:
    chat = stored_chat(store, 24, seed=5)
    queue = JobQueue(store, backoff_s=0.01)
    enqueue_pipeline(queue, chat, Settings())
    backend = CountingBackend(delay=0.05)
    stats = run_worker(queue, backend, concurrency=4)
    assert 2 <= backend.max_in_flight <= 4
    assert_all_done(queue)
    assert stats.failed == 0
    after = store.load_chat("story")
    assert backend.calls == Counter(m.text for m in after.messages)  # each exactly once
    for message in after.messages:
        assert get_memory(message)
        assert get_data(message, "error") is None
    assert all(j.attempts == 1 for j in queue.list())


def test_a_live_worker_keeps_its_lease_during_a_long_call(store: SQLiteStore) -> None:
    """Was a bug: nothing renews a lease while a job runs (no handler calls `set_progress`, and
    there is no heartbeat), so a job whose LLM call takes longer than `lease_s` is taken over
    by another worker thread while its first worker is still alive: the same message is recapped
    twice. (Default lease 60 s, default llm_timeout_s 120 s with retries.)"""
    chat = stored_chat(store, 6, seed=6)
    queue = JobQueue(store, backoff_s=0.01, lease_s=0.2)
    enqueue_pipeline(queue, chat, Settings())
    backend = CountingBackend(delay=0.5)
    run_worker(queue, backend, concurrency=2)
    assert_all_done(queue)
    recapped_twice = [i for i, m in enumerate(chat.messages) if backend.calls[m.text] > 1]
    assert recapped_twice == []
    assert [j.attempts for j in queue.list()] == [1] * len(queue.list())


# --- a changing chat -------------------------------------------------------------------------


def test_a_message_deleted_after_its_job_was_queued(store: SQLiteStore) -> None:
    chat = stored_chat(store, 14, seed=7)
    queue = JobQueue(store, backoff_s=0.01)
    enqueue_pipeline(queue, chat, Settings())
    gone = chat.messages[6]
    del chat.messages[6]
    store.save(chat, structure=True)
    backend = CountingBackend()
    stats = run_worker(queue, backend)
    assert_all_done(queue)
    assert (stats.failed, stats.retried, stats.errors) == (0, 0, [])
    job = next(j for j in queue.list() if j.target == gone.id)
    assert (job.state, job.error) == ("done", None)
    assert gone.text not in backend.calls
    after = store.load_chat("story")
    assert gone.id not in {m.id for m in after.messages}
    assert all(get_memory(m) for m in after.messages)


def test_a_running_worker_sees_messages_added_after_it_started(store: SQLiteStore) -> None:
    """Was a bug: a worker caches each chat the first time it loads it (`Worker._chats`) and never
    reloads it, so a long-running `autorecap worker` treats a message added later as deleted:
    its job ends `done` and the message never gets a recap."""
    chat = stored_chat(store, 8, seed=8)
    queue = JobQueue(store, backoff_s=0.01)
    backend = CountingBackend()
    worker = Worker(queue, lambda _: backend, settings=Settings(), idle_sleep=0.01)
    thread = threading.Thread(target=worker.run, kwargs={"until_empty": False}, daemon=True)
    thread.start()
    try:
        enqueue_pipeline(queue, chat, Settings())
        assert wait_until(lambda: queue.counts()["done"] == len(queue.list()) > 8)
        chat = store.load_chat("story")
        chat.messages.append(
            chat.adopt({"name": "Tomas", "is_user": True, "mes": NEW_TEXT, "extra": {}})
        )
        store.save(chat, structure=True)
        chat = store.load_chat("story")
        enqueue_pipeline(queue, chat, Settings())
        assert wait_until(lambda: queue.counts()["done"] == len(queue.list()))
    finally:
        worker.stop()
        thread.join(timeout=10)
    assert backend.calls[NEW_TEXT] == 1
    assert "Vault 77" in get_memory(store.load_chat("story").messages[-1])


# --- a worker process killed mid-job -----------------------------------------------------------

SLOW = 0.3
FAST = 0.02
_MESSAGE = re.compile(r"Message from [^\n]*:\n(.*)\n\nAnswer with the note alone.\Z", re.S)


class PacedServer(AnsweringServer):
    """Answers every pipeline request validly after `delay` seconds; a message recap's answer
    is `Recap <n>.`, n being the request's number, so a stored recap names its request."""

    def __init__(self) -> None:
        super().__init__()
        self.delay = SLOW
        self.fallback = self._answer

    def _answer(self, request: Recorded) -> Scripted:
        if kind_of(request) == "message":
            with self._lock:
                number = next(i for i, r in enumerate(self.requests) if r is request)
            answer = completion(f"Recap {number}.")
        else:
            answer = answer_everything(request)
        return dataclasses.replace(answer, delay=self.delay)

    def message_requests(self) -> list[tuple[int, str]]:
        """(request number, message text) of every message recap request so far."""
        with self._lock:
            found = list(enumerate(self.requests))
        result = []
        for number, request in found:
            if kind_of(request) == "message":
                match = _MESSAGE.search(prompt_of(request))
                assert match is not None
                result.append((number, match.group(1)))
        return result


@pytest.fixture
def paced(monkeypatch: pytest.MonkeyPatch) -> Iterator[PacedServer]:
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    server = PacedServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()


@contextlib.contextmanager
def worker_process(home: Path, base_url: str) -> Iterator[subprocess.Popen[str]]:
    """`autorecap worker --once` against `base_url`, one job at a time, 1 s leases; killed (if
    still running) and its pipes closed when the block ends."""
    env = dict(os.environ, AUTORECAP_HOME=str(home), PYTHONPATH=str(REPO / "src"))
    process = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from autorecap.cli import main; main(sys.argv[1:])",
            "worker",
            "--once",
            "--concurrency",
            "1",
            "--backend",
            "openai",
            "--base-url",
            base_url,
            "--lease",
            "1",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        yield process
    finally:
        process.kill()
        process.communicate(timeout=30)


def test_a_worker_killed_mid_job_is_taken_over_and_every_job_runs_once(
    home: Path, paced: PacedServer
) -> None:
    store = SQLiteStore()  # the one in this test's AUTORECAP_HOME, as the workers use
    # One message per call, so that the job in flight is one message's (the workers read this
    # home's settings file).
    Profiles().set("llm_batch_tokens", 0)
    Profiles().set("llm_own_recap_tokens", 0)  # short messages too
    chat = stored_chat(store, 40, seed=2)
    text_of = {m.id: m.text for m in chat.messages}
    queue = JobQueue(store)
    enqueue_pipeline(queue, chat, Settings())

    def mid_call() -> bool:
        jobs = queue.list()
        done = [j for j in jobs if j.kind == "message_recap" and j.state == "done"]
        busy = [j for j in jobs if j.state == "running"]
        if len(done) < 3 or len(busy) != 1:
            return False
        return text_of[busy[0].target] in {t for _, t in paced.message_requests()}

    with worker_process(home, paced.url) as first:
        assert wait_until(mid_call), f"no job in flight; counts {queue.counts()}"
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=30)
    assert first.returncode == -signal.SIGKILL
    [interrupted] = queue.list(states=("running",))  # left behind, its lease running out
    assert interrupted.attempts == 1
    done_before = {j.target for j in queue.list(states=("done",))}
    assert done_before

    paced.delay = FAST
    with worker_process(home, paced.url) as second:
        output, errors = second.communicate(timeout=60)
    assert second.returncode == 0, errors

    jobs = queue.list()
    assert {j.state for j in jobs} == {"done"}, queue.counts()
    assert queue.get(interrupted.id).attempts == 2
    assert all(j.attempts == 1 for j in jobs if j.id != interrupted.id)

    requests = paced.message_requests()
    asked = Counter(text for _, text in requests)
    assert asked[text_of[interrupted.target]] == 2
    assert all(asked[text_of[t]] == 1 for t in done_before)
    assert asked == Counter(text_of.values()) + Counter({text_of[interrupted.target]: 1})

    last_request = {text: number for number, text in requests}
    after = store.load_chat(chat.id)
    for message in after.messages:  # one recap each: the answer to its last request
        assert get_data(message, "memory") == f"Recap {last_request[message.text]}."
        assert get_data(message, "error") is None
    closed = [s for s in scenes(after.messages) if s.closed]
    kinds = Counter(paced.kinds())
    assert len(closed) >= 1
    # The messages' short recaps together fit a scene recap: they are it, with no call.
    assert kinds["scene"] == 0
    for scene in closed:
        recaps = [get_data(m, "memory") for m in after.messages[scene.start : scene.end + 1]]
        assert all(f": {recap}" in scene.recap for recap in recaps)
    assert len(running.versions(after)) == len(closed) - 1
    assert kinds["combine"] == 0  # short scene lines are appended to the running recap
    assert f"{len(jobs) - len(done_before)} job(s) done" in output
