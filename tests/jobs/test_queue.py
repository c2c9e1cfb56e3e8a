"""The persistent job queue: order, dedup, dependencies, retries with backoff, leases, completion
in the effect's transaction, cancel/retry/pause, and its tables (migration 2). Time is a fake
clock the tests move by hand."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from autorecap.core.data import get_data, set_data
from autorecap.jobs.queue import MAX_BACKOFF_S, STATES, Job, JobError, JobQueue
from autorecap.store import ChatStore, open_store
from autorecap.store.migrations import MIGRATIONS, apply_migrations, schema_version
from autorecap.store.sqlite import SQLiteStore
from autorecap.testing import generate

BACKOFF = 10.0
LEASE = 30.0


class FakeClock:
    """A clock that only moves when the test says so."""

    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def store(db_url: str) -> Iterator[ChatStore]:
    """The queue's store: SQLite, and PostgreSQL."""
    opened = open_store(db_url, durable=False)
    yield opened
    opened.close()


def make_queue(store: ChatStore, clock: FakeClock, name: str = "worker-a") -> JobQueue:
    queue = JobQueue(store, clock=clock, backoff_s=BACKOFF, lease_s=LEASE)
    queue.worker_name = name
    return queue


@pytest.fixture
def queue(store: ChatStore, clock: FakeClock) -> JobQueue:
    return make_queue(store, clock)


def claim(queue: JobQueue) -> Job:
    job = queue.claim()
    assert job is not None, f"nothing claimable; counts {queue.counts()}"
    return job


def column(store: ChatStore, job_id: int, name: str) -> object:
    row = store.run(
        lambda db: db.execute(f"SELECT {name} FROM jobs WHERE id = ?", (job_id,)).fetchone()
    )
    return row[0]


# --- the schema ------------------------------------------------------------------------------


def test_the_sqlite_jobs_tables_come_from_migrations_2_and_3(tmp_path: Path) -> None:
    path = tmp_path / "empty.db"
    db = sqlite3.connect(path, isolation_level=None)
    assert schema_version(db) == 0
    assert apply_migrations(db, until=1) == [1]
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert "jobs" not in tables
    assert apply_migrations(db, until=2) == [2]
    assert schema_version(db) == 2
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"jobs", "job_deps", "job_results", "queue_state"} <= tables
    assert apply_migrations(db, until=3) == [3]  # the lookup index of a chat's jobs
    indexes = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert "jobs_by_chat" in indexes
    plan = db.execute(
        "EXPLAIN QUERY PLAN SELECT id FROM jobs WHERE kind = 'k' AND chat_id = 'c' "
        "AND target IN (1, 2) AND state IN ('queued', 'running')"
    ).fetchall()
    assert any("jobs_by_chat" in str(row) for row in plan)
    db.close()
    fresh = SQLiteStore(tmp_path / "fresh.db")  # an empty database goes straight to the latest
    assert fresh.run(schema_version) == MIGRATIONS[-1].number
    assert JobQueue(fresh).counts() == dict.fromkeys(STATES, 0)
    fresh.close()


# --- order, dedup, dependencies, pause ----------------------------------------------------------


def test_claims_highest_priority_first_then_fifo(queue: JobQueue, clock: FakeClock) -> None:
    low = queue.enqueue("running_recap", "c", priority=0)
    high_1 = queue.enqueue("message_recap", "c", 1, priority=30)
    mid = queue.enqueue("detect_scenes", "c", priority=20)
    high_2 = queue.enqueue("message_recap", "c", 2, priority=30)
    claimed = [claim(queue) for _ in range(4)]
    assert [j.id for j in claimed] == [high_1, high_2, mid, low]
    assert all(j.state == "running" and j.attempts == 1 for j in claimed)
    assert queue.get(high_1).state == "running"
    assert column(queue.store, high_1, "worker") == "worker-a"
    assert column(queue.store, high_1, "lease_until") == clock.now + LEASE
    assert queue.claim() is None


def test_a_duplicate_enqueue_while_waiting_returns_the_same_job(queue: JobQueue) -> None:
    first = queue.enqueue("message_recap", "c", 7)
    assert queue.enqueue("message_recap", "c", 7, priority=99) == first
    whole_chat = queue.enqueue("detect_scenes", "c")
    assert queue.enqueue("detect_scenes", "c") == whole_chat  # target None matches too
    others = {
        queue.enqueue("message_recap", "c", 8),
        queue.enqueue("message_recap", "other", 7),
        queue.enqueue("scene_recap", "c", 7),
    }
    assert len(others) == 3
    assert first not in others
    assert whole_chat not in others
    assert len(queue.list()) == 5
    job = claim(queue)
    assert job.id == first
    assert queue.enqueue("message_recap", "c", 7) == first  # running: still the same job
    queue.complete(job)
    again = queue.enqueue("message_recap", "c", 7)  # finished: a new job
    assert again != first
    assert queue.get(again).state == "queued"


def test_a_target_queued_once_takes_its_ended_job_but_not_a_cancelled_one(
    queue: JobQueue,
) -> None:
    """`once`: a message whose job (another server's) saw its text gets no second one, even
    when that job ended since; a cancelled job did not do its work."""
    done = queue.enqueue("message_recap", "c", 7)
    queue.complete(claim(queue))
    cancelled = queue.enqueue("message_recap", "c", 8)
    queue.cancel(cancelled)
    ids = queue.enqueue_many("message_recap", "c", [7, 8, 9], once={7, 8, 9})
    assert ids[0] == done
    assert cancelled not in ids
    assert len(set(ids)) == 3
    assert [queue.get(i).state for i in ids] == ["done", "queued", "queued"]
    assert queue.enqueue_many("message_recap", "c", [7])[0] != done  # not named: a new job


def test_a_job_waits_until_every_dependency_is_finished(queue: JobQueue) -> None:
    dep_a = queue.enqueue("message_recap", "c", 1, max_retries=0)
    dep_b = queue.enqueue("message_recap", "c", 2, max_retries=0)
    waiting = queue.enqueue("detect_scenes", "c", priority=100, depends_on=[dep_a, dep_b, dep_a])
    job_a = claim(queue)
    assert job_a.id == dep_a  # the higher priority job is not ready
    queue.complete(job_a)
    job_b = claim(queue)
    assert job_b.id == dep_b
    assert queue.claim() is None  # dep_b still running
    assert queue.fail(job_b, "broken") == "failed"  # failed counts as finished
    job = claim(queue)
    assert job.id == waiting


def test_a_duplicate_enqueue_adds_its_dependencies(queue: JobQueue) -> None:
    dep = queue.enqueue("message_recap", "c", 1)
    waiting = queue.enqueue("detect_scenes", "c")
    assert queue.enqueue("detect_scenes", "c", depends_on=[dep]) == waiting
    assert claim(queue).id == dep
    assert queue.claim() is None


def test_a_paused_queue_claims_nothing_until_resumed(queue: JobQueue) -> None:
    job_id = queue.enqueue("message_recap", "c", 1)
    assert not queue.paused
    queue.pause()
    queue.pause()  # twice is fine
    assert queue.paused
    assert queue.claim() is None
    assert queue.get(job_id).state == "queued"
    assert queue.counts()["queued"] == 1
    queue.resume()
    assert not queue.paused
    assert claim(queue).id == job_id


# --- retries ---------------------------------------------------------------------------------


def test_fail_retries_with_exponential_backoff_then_fails_for_good(
    queue: JobQueue, clock: FakeClock
) -> None:
    job_id = queue.enqueue("message_recap", "c", 1, max_retries=3)
    for attempt in range(1, 4):
        job = claim(queue)
        assert (job.id, job.attempts) == (job_id, attempt)
        assert queue.fail(job, f"error {attempt}") == "queued"
        stored = queue.get(job_id)
        wait = BACKOFF * 2 ** (attempt - 1)
        assert stored.state == "queued"
        assert stored.error == f"error {attempt}"
        assert stored.not_before == clock.now + wait
        assert stored.finished_at is None
        clock.advance(wait - 0.01)
        assert queue.claim() is None  # not before its retry time
        clock.advance(0.01)
    job = claim(queue)
    assert job.attempts == 4
    assert queue.fail(job, "the last straw") == "failed"  # max_retries retries spent
    stored = queue.get(job_id)
    assert (stored.state, stored.attempts, stored.error) == ("failed", 4, "the last straw")
    assert stored.finished_at == clock.now
    clock.advance(10_000)
    assert queue.claim() is None


def test_backoff_is_capped(store: ChatStore, clock: FakeClock) -> None:
    queue = JobQueue(store, clock=clock, backoff_s=100.0)
    job_id = queue.enqueue("message_recap", "c", 1, max_retries=9)
    for _ in range(3):  # waits of 100, 200, then 400 capped
        queue.fail(claim(queue), "again")
        clock.advance(queue.get(job_id).not_before - clock.now)
    assert queue.get(job_id).attempts == 3
    assert queue.get(job_id).not_before - queue.get(job_id).updated_at == MAX_BACKOFF_S


def test_max_retries_zero_fails_at_the_first_error(queue: JobQueue) -> None:
    job_id = queue.enqueue("message_recap", "c", 1, max_retries=0)
    assert queue.fail(claim(queue), "no") == "failed"
    assert queue.get(job_id).state == "failed"


def test_a_failing_job_never_blocks_other_ready_jobs(queue: JobQueue, clock: FakeClock) -> None:
    bad = queue.enqueue("message_recap", "c", 1, priority=50)
    good_1 = queue.enqueue("message_recap", "c", 2)
    good_2 = queue.enqueue("message_recap", "c", 3)
    job = claim(queue)
    assert job.id == bad
    assert queue.fail(job, "flaky") == "queued"
    for expected in (good_1, good_2):
        job = claim(queue)
        assert job.id == expected
        queue.complete(job)
    assert queue.claim() is None
    clock.advance(BACKOFF)
    assert claim(queue).id == bad


# --- leases and completion -------------------------------------------------------------------


def test_an_expired_lease_is_claimed_again_by_another_worker(
    store: ChatStore, clock: FakeClock
) -> None:
    first = make_queue(store, clock, "worker-a")
    second = make_queue(store, clock, "worker-b")
    job_id = first.enqueue("message_recap", "c", 1)
    assert claim(first).id == job_id
    clock.advance(LEASE - 1)
    assert second.claim() is None  # the lease still holds
    clock.advance(1.5)
    taken = claim(second)
    assert (taken.id, taken.attempts, taken.state) == (job_id, 2, "running")
    assert column(store, job_id, "worker") == "worker-b"
    second.complete(taken)
    assert first.get(job_id).state == "done"
    assert second.claim() is None


def test_set_progress_keeps_the_lease(store: ChatStore, clock: FakeClock) -> None:
    first = make_queue(store, clock, "worker-a")
    second = make_queue(store, clock, "worker-b")
    job_id = first.enqueue("detect_scenes", "c")
    job = claim(first)
    clock.advance(LEASE - 1)
    first.set_progress(job, 0.5, "halfway")
    clock.advance(LEASE - 1)
    assert second.claim() is None
    stored = first.get(job_id)
    assert (stored.progress, stored.note) == (0.5, "halfway")


def test_finish_lands_in_the_same_transaction_as_the_effect(
    queue: JobQueue, store: ChatStore, clock: FakeClock
) -> None:
    chat = generate(5, seed=1, chat_id="c").chat
    store.import_chat(chat)
    chat = store.load_chat("c")
    message = chat.messages[2]
    job_id = queue.enqueue("message_recap", "c", message.id)
    job = claim(queue)

    set_data(message, "memory", "not saved")

    def finish_then_break(db: sqlite3.Connection) -> None:
        queue.finish(db, job, input_hash="never")
        raise RuntimeError("the disk went away")

    with pytest.raises(RuntimeError):
        store.save(chat, changed=[message], also=finish_then_break)
    assert queue.get(job_id).state == "running"  # neither the effect nor the completion landed
    assert get_data(store.load_chat("c").messages[2], "memory") is None
    assert queue.last_input(job) is None

    set_data(message, "memory", "saved")
    clock.advance(5)
    store.save(chat, changed=[message], also=lambda db: queue.finish(db, job, input_hash="h1"))
    done = queue.get(job_id)
    assert (done.state, done.progress, done.error) == ("done", 1.0, None)
    assert done.finished_at == clock.now
    assert column(store, job_id, "worker") is None
    assert get_data(store.load_chat("c").messages[2], "memory") == "saved"
    assert queue.last_input(job) == "h1"


def test_complete_and_last_input(queue: JobQueue) -> None:
    job_id = queue.enqueue("message_recap", "c", 4)
    job = claim(queue)
    assert queue.last_input(job) is None
    queue.complete(job, input_hash="abc")
    assert queue.get(job_id).state == "done"
    assert queue.last_input(job) == "abc"
    # The hash belongs to (kind, chat, target): a later job for the same message sees it.
    later_id = queue.enqueue("message_recap", "c", 4)
    assert later_id != job_id
    later = claim(queue)
    assert later.id == later_id
    assert queue.last_input(later) == "abc"
    queue.complete(later)  # no hash given: the last one stays
    assert queue.last_input(later) == "abc"
    chat_job_id = queue.enqueue("running_recap", "c")
    chat_job = claim(queue)
    assert chat_job.id == chat_job_id
    queue.complete(chat_job, input_hash="whole")
    assert queue.last_input(chat_job) == "whole"
    assert queue.last_input(later) == "abc"


# --- cancel, retry, get ----------------------------------------------------------------------


def test_cancel_a_queued_job_at_once(queue: JobQueue, clock: FakeClock) -> None:
    job_id = queue.enqueue("message_recap", "c", 1)
    assert queue.cancel(job_id) == "cancelled"
    stored = queue.get(job_id)
    assert stored.state == "cancelled"
    assert stored.finished_at == clock.now
    assert queue.claim() is None
    with pytest.raises(JobError, match=f"job {job_id} is already cancelled"):
        queue.cancel(job_id)


def test_cancel_a_running_job_when_it_next_checks(queue: JobQueue) -> None:
    job_id = queue.enqueue("message_recap", "c", 1, max_retries=5)
    job = claim(queue)
    assert not queue.cancel_requested(job)
    assert queue.cancel(job_id) == "cancelling"
    assert queue.cancel_requested(job)
    assert queue.get(job_id).state == "running"
    assert queue.fail(job, "stopped") == "cancelled"  # not retried, although retries remain
    stored = queue.get(job_id)
    assert (stored.state, stored.error) == ("cancelled", "stopped")
    assert stored.finished_at is not None
    assert queue.claim() is None


def test_cancel_of_a_finished_job_is_an_error(queue: JobQueue) -> None:
    done_id = queue.enqueue("message_recap", "c", 1)
    queue.complete(claim(queue))
    with pytest.raises(JobError, match=f"job {done_id} is already done"):
        queue.cancel(done_id)
    failed_id = queue.enqueue("message_recap", "c", 2, max_retries=0)
    queue.fail(claim(queue), "no")
    with pytest.raises(JobError, match=f"job {failed_id} is already failed"):
        queue.cancel(failed_id)


def test_retry_queues_a_failed_or_cancelled_job_afresh(queue: JobQueue, clock: FakeClock) -> None:
    failed_id = queue.enqueue("message_recap", "c", 1, max_retries=1)
    queue.fail(claim(queue), "one")
    assert queue.claim() is None  # backing off
    clock.advance(BACKOFF)
    assert queue.fail(claim(queue), "two") == "failed"
    queue.retry(failed_id)
    fresh = queue.get(failed_id)
    assert (fresh.state, fresh.attempts, fresh.error, fresh.not_before) == ("queued", 0, None, 0)
    assert fresh.finished_at is None
    job = claim(queue)
    assert job.id == failed_id
    assert queue.fail(job, "again") == "queued"  # fresh retries: one is left

    cancelled_id = queue.enqueue("message_recap", "c", 2)
    running = claim(queue)
    assert running.id == cancelled_id
    queue.cancel(cancelled_id)
    queue.fail(running, "stopped")
    queue.retry(cancelled_id)
    assert queue.get(cancelled_id).state == "queued"
    assert not queue.cancel_requested(running)


def test_retry_of_a_job_that_did_not_fail_is_an_error(queue: JobQueue) -> None:
    job_id = queue.enqueue("message_recap", "c", 1)
    with pytest.raises(JobError, match=f"job {job_id} is queued: only failed or cancelled"):
        queue.retry(job_id)
    job = claim(queue)
    with pytest.raises(JobError, match="is running"):
        queue.retry(job_id)
    queue.complete(job)
    with pytest.raises(JobError, match="is done"):
        queue.retry(job_id)


def test_unknown_job_ids_are_clear_errors(queue: JobQueue) -> None:
    message = "no job 404: `autorecap jobs list` shows the jobs"
    with pytest.raises(JobError) as raised:
        queue.get(404)
    assert str(raised.value) == message
    for action in (queue.cancel, queue.retry):
        with pytest.raises(JobError) as raised:
            action(404)
        assert str(raised.value) == message


# --- counts and lists ------------------------------------------------------------------------


def test_counts_and_list_filters(queue: JobQueue) -> None:
    assert queue.counts() == dict.fromkeys(STATES, 0)
    assert queue.last_id() == 0
    a1 = queue.enqueue("message_recap", "a", 1, max_retries=0)
    a2 = queue.enqueue("message_recap", "a", 2)
    a3 = queue.enqueue("message_recap", "a", 3)
    b1 = queue.enqueue("message_recap", "b", 1)
    queue.fail(claim(queue), "bad")  # a1
    queue.complete(claim(queue))  # a2
    queue.cancel(a3)
    assert queue.counts() == {"queued": 1, "running": 0, "done": 1, "failed": 1, "cancelled": 1}
    assert queue.counts("a") == {"queued": 0, "running": 0, "done": 1, "failed": 1, "cancelled": 1}
    assert queue.counts("nobody") == dict.fromkeys(STATES, 0)
    assert [j.id for j in queue.list()] == [a1, a2, a3, b1]
    assert [j.id for j in queue.list(states=("failed",))] == [a1]
    assert [j.id for j in queue.list(states=("queued", "done"))] == [a2, b1]
    assert [j.id for j in queue.list(chat_id="b")] == [b1]
    assert queue.list(states=("running",), chat_id="a") == []
    failed = queue.list(states=("failed",))[0]
    assert (failed.error, failed.label) == ("bad", "message_recap a (message id 1)")
    assert queue.get(b1).label == "message_recap b (message id 1)"
    assert queue.last_id() == b1


# --- cancel meets lease ----------------------------------------------------------------------


def test_a_cancelled_running_job_whose_worker_died_is_not_run_again(
    store: ChatStore, clock: FakeClock
) -> None:
    """Was a bug: `claim()` takes an expired lease back to `queued` without looking at
    `cancel_requested`, so a job the user cancelled while it ran is run again (and can end
    `done`) once its worker dies."""
    first = make_queue(store, clock, "worker-a")
    second = make_queue(store, clock, "worker-b")
    job_id = first.enqueue("message_recap", "c", 1)
    claim(first)
    assert first.cancel(job_id) == "cancelling"
    clock.advance(LEASE + 1)  # worker-a died without checking
    assert second.claim() is None
    assert second.get(job_id).state == "cancelled"


# --- pruning ------------------------------------------------------------------------------------


def test_prune_deletes_only_jobs_that_ended_long_enough_ago(
    queue: JobQueue, clock: FakeClock
) -> None:
    old_done = queue.enqueue("message_recap", "c", 1)
    old_cancelled = queue.enqueue("message_recap", "c", 2)
    failing = queue.enqueue("message_recap", "c", 3, max_retries=0)
    waiting = queue.enqueue("detect_scenes", "c", depends_on=[old_done])
    queue.complete(claim(queue), input_hash="h1")  # old_done
    queue.cancel(old_cancelled)
    queue.fail(claim(queue), "broken")  # failing: no retries left
    clock.advance(8 * 86400)
    recent = queue.enqueue("message_recap", "c", 4, priority=10)  # claimed before `waiting`
    queue.complete(claim(queue))
    assert queue.prune(7 * 86400) == 2
    left = {job.id: job.state for job in queue.list()}
    assert left == {failing: "failed", waiting: "queued", recent: "done"}
    assert queue.last_input(queue.get(recent)) is None
    # The message's last recap input stays: the recap is not made again for the same text.
    assert queue.store.read(
        lambda db: db.execute("SELECT input_hash FROM job_results WHERE target = 1").fetchone()
    ) == ("h1",)
    assert claim(queue).id == waiting  # its dependency gone, it runs
    assert queue.prune(7 * 86400) == 0


def test_jobs_prune_from_the_command_line(capsys: pytest.CaptureFixture[str], db_url: str) -> None:
    from tests.test_cli import run

    store = open_store(db_url)
    try:
        queue = JobQueue(store, clock=lambda: 1000.0)
        queue.enqueue("message_recap", "c", 1)
        queue.complete(claim(queue))
    finally:
        store.close()
    code, out, _ = run(capsys, "jobs", "prune", "--days", "0", "--db", db_url)
    assert code == 0
    assert "deleted 1 job(s) that ended more than 0 day(s) ago" in out
