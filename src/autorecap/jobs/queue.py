"""A persistent job queue for recap work, kept in the store's SQLite database.

Jobs have priorities and dependencies (a running-recap combine waits for its scene recap; a
job whose dependency ended, done or failed, may run: the pipeline's stages cope with a missing
recap),
are retried with exponential backoff up to their `max_retries`, then end `failed` with their
error. A failing job never delays others: only jobs that are ready (not waiting for a retry
time or an unfinished dependency) are claimed, highest priority first. A claim is a lease: a
worker that dies mid-job loses it when the lease runs out and another worker takes the job over.
A job's effect and its completion are written in one transaction, so each job completes once.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from autorecap.errors import AutorecapError
from autorecap.store.base import ChatStore, Db
from autorecap.store.sql import in_parts

STATES = ("queued", "running", "done", "failed", "cancelled")
LEASE_S = 60.0
MAX_BACKOFF_S = 300.0


class JobError(AutorecapError):
    """A job id that does not exist, or an action its state does not allow."""


@dataclass(frozen=True)
class Job:
    """One unit of recap work."""

    id: int
    kind: str
    chat_id: str
    target: int | None
    priority: int
    state: str
    attempts: int
    max_retries: int
    not_before: float
    error: str | None
    progress: float
    note: str | None
    created_at: float
    updated_at: float
    finished_at: float | None

    @property
    def label(self) -> str:
        """`kind chat [(message id N)]`, for lists and logs: a stored message's id, which is
        not its place in the chat (the API's `target_index`)."""
        suffix = f" (message id {self.target})" if self.target is not None else ""
        return f"{self.kind} {self.chat_id}{suffix}"


_COLUMNS = (
    "id, kind, chat_id, target, priority, state, attempts, max_retries, not_before, error, "
    "progress, note, created_at, updated_at, finished_at"
)


class JobQueue:
    """The queue, in the same database (and behind the same writer lock) as the chats."""

    def __init__(
        self,
        store: ChatStore,
        *,
        clock: Callable[[], float] = time.time,
        backoff_s: float = 2.0,
        lease_s: float = LEASE_S,
    ) -> None:
        self.store = store
        self.clock = clock
        self.backoff_s = backoff_s
        self.lease_s = lease_s
        self.worker_name = f"{socket.gethostname()}:{os.getpid()}"
        # Workers on several machines claim at once on PostgreSQL: each locks the rows it
        # takes and passes over those another has locked. SQLite has one writer at a time.
        self._skip_locked = " FOR UPDATE OF j SKIP LOCKED" if store.dialect == "postgresql" else ""

    # --- adding --------------------------------------------------------------------------------

    def enqueue(
        self,
        kind: str,
        chat_id: str,
        target: int | None = None,
        *,
        priority: int = 0,
        max_retries: int = 5,
        depends_on: Iterable[int] = (),
    ) -> int:
        """Add a job (or return the id of the same job already waiting)."""
        return self.enqueue_many(
            kind,
            chat_id,
            [target],
            priority=priority,
            max_retries=max_retries,
            depends_on=depends_on,
        )[0]

    def enqueue_many(
        self,
        kind: str,
        chat_id: str,
        targets: Sequence[int | None],
        *,
        priority: int = 0,
        max_retries: int = 5,
        depends_on: Iterable[int] = (),
        once: Collection[int] = (),
    ) -> list[int]:
        """Add a job of this kind for each target (or take the same job already waiting), in
        one transaction: a turn's or a whole chat's at once. Returns their ids, in order.
        `once`: targets that take the job they had even when it ended (done or failed, not
        cancelled): messages whose every job saw their text (`ProxyChats._settle`)."""
        if not targets:
            return []
        now = self.clock()
        deps = sorted(set(depends_on))

        def work(db: Db) -> list[int]:
            if self.store.dialect == "postgresql":
                # Servers queue a chat's jobs at once: one at a time per chat and kind, so
                # that the second finds the first's.
                db.execute(
                    "SELECT pg_advisory_xact_lock(hashtextextended(?, 0))",
                    (f"{kind}\x1f{chat_id}",),
                )
            waiting = _waiting(db, kind, chat_id, targets)
            if once:
                # Looked for under the same lock as the insert: a job another server queued
                # for the same message, even one done since, is found.
                again = sorted(
                    {t for t in targets if t is not None and t in once and t not in waiting}
                )
                had = _jobs_by_target(db, kind, chat_id, again, "AND state <> 'cancelled'")
                waiting.update(had.items())
            ids: list[int] = []
            for target in targets:
                job_id = waiting.get(target)
                if job_id is None:
                    job_id = waiting[target] = db.execute(
                        "INSERT INTO jobs (kind, chat_id, target, priority, max_retries, "
                        "created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id",
                        (kind, chat_id, target, priority, max_retries, now, now),
                    ).fetchone()[0]
                ids.append(job_id)
            db.executemany(
                "INSERT INTO job_deps (job_id, depends_on) VALUES (?, ?) ON CONFLICT DO NOTHING",
                [(job_id, dep) for job_id in ids for dep in deps if dep != job_id],
            )
            return ids

        result: list[int] = self.store.run(work)
        return result

    # --- working -------------------------------------------------------------------------------

    def claim(self) -> Job | None:
        """Take the next ready job (None when none is ready or the queue is paused)."""
        now = self.clock()

        def work(db: Db) -> Job | None:
            if _paused(db):
                return None
            # A worker that died leaves its job running with an expired lease: take it back.
            db.execute(
                "UPDATE jobs SET state = CASE WHEN cancel_requested <> 0 THEN 'cancelled' "
                "ELSE 'queued' END, worker = NULL WHERE state = 'running' AND lease_until < ?",
                (now,),
            )
            row = db.execute(
                f"""SELECT {_COLUMNS} FROM jobs j
                    WHERE state = 'queued' AND not_before <= ?
                      AND NOT EXISTS (
                        SELECT 1 FROM job_deps d JOIN jobs p ON p.id = d.depends_on
                        WHERE d.job_id = j.id AND p.state IN ('queued', 'running'))
                    ORDER BY priority DESC, id LIMIT 1{self._skip_locked}""",
                (now,),
            ).fetchone()
            if row is None:
                return None
            db.execute(
                "UPDATE jobs SET state = 'running', worker = ?, lease_until = ?, "
                "attempts = attempts + 1, updated_at = ? WHERE id = ?",
                (self.worker_name, now + self.lease_s, now, row[0]),
            )
            job = _job(row)
            return Job(**{**job.__dict__, "state": "running", "attempts": job.attempts + 1})

        result: Job | None = self.store.run(work)
        return result

    def claim_siblings(self, job: Job, limit: int) -> list[Job]:
        """Take up to `limit` more ready jobs of the same kind and chat as `job` (oldest first),
        so that one LLM call can do their work together. Each is then this worker's, as if
        claimed one by one."""
        now = self.clock()
        if limit <= 0:
            return []

        def work(db: Db) -> list[Job]:
            rows = db.execute(
                f"""SELECT {_COLUMNS} FROM jobs j
                    WHERE state = 'queued' AND kind = ? AND chat_id = ? AND not_before <= ?
                      AND id != ?
                      AND NOT EXISTS (
                        SELECT 1 FROM job_deps d JOIN jobs p ON p.id = d.depends_on
                        WHERE d.job_id = j.id AND p.state IN ('queued', 'running'))
                    ORDER BY id LIMIT ?{self._skip_locked}""",
                (job.kind, job.chat_id, now, job.id, limit),
            ).fetchall()
            db.executemany(
                "UPDATE jobs SET state = 'running', worker = ?, lease_until = ?, "
                "attempts = attempts + 1, updated_at = ? WHERE id = ? AND state = 'queued'",
                [(self.worker_name, now + self.lease_s, now, row[0]) for row in rows],
            )
            taken = [_job(row) for row in rows]
            return [
                Job(**{**t.__dict__, "state": "running", "attempts": t.attempts + 1}) for t in taken
            ]

        result: list[Job] = self.store.run(work)
        return result

    def release(self, jobs: Iterable[Job]) -> None:
        """Give back jobs this worker claimed and did not run (queued again, the attempt not
        counted)."""
        ids = [j.id for j in jobs]
        if not ids:
            return
        now = self.clock()
        self.store.run(
            lambda db: db.executemany(
                "UPDATE jobs SET state = 'queued', worker = NULL, attempts = attempts - 1, "
                "updated_at = ? WHERE id = ? AND state = 'running' AND worker = ?",
                [(now, job_id, self.worker_name) for job_id in ids],
            )
        )

    def finish(self, db: Db, job: Job, *, input_hash: str | None = None) -> None:
        """Mark `job` done (call it inside the transaction that writes the job's effect). A
        worker that lost the job (its lease ran out and another worker took it) raises
        `JobError`, which rolls that transaction back: the job's effect lands once."""
        now = self.clock()
        cursor = db.execute(
            "UPDATE jobs SET state = 'done', error = NULL, progress = 1, finished_at = ?, "
            "updated_at = ?, worker = NULL WHERE id = ? AND state = 'running' AND worker = ?",
            (now, now, job.id, self.worker_name),
        )
        if cursor.rowcount != 1:
            raise JobError(f"job {job.id} was taken over by another worker; its result is dropped")
        if input_hash is not None:
            db.execute(
                "INSERT INTO job_results (kind, chat_id, target, input_hash) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (kind, chat_id, target) "
                "DO UPDATE SET input_hash = excluded.input_hash",
                (job.kind, job.chat_id, -1 if job.target is None else job.target, input_hash),
            )

    def complete(self, job: Job, *, input_hash: str | None = None) -> None:
        """Mark a job done that wrote nothing of its own."""
        self.store.run(lambda db: self.finish(db, job, input_hash=input_hash))

    def fail(self, job: Job, error: str, *, final: bool = False) -> str:
        """Record a failure: retried later (exponential backoff), or `failed` for good once
        `max_retries` retries are spent (at once when `final`). Returns the job's new
        state."""
        now = self.clock()

        def work(db: Db) -> str:
            row = db.execute(
                "SELECT attempts, max_retries, cancel_requested, state, worker FROM jobs "
                "WHERE id = ?",
                (job.id,),
            ).fetchone()
            attempts, max_retries, cancelled, current, owner = row
            if current != "running" or owner != self.worker_name:
                return str(current)  # another worker owns the job now: leave it alone
            if cancelled:
                state, not_before = "cancelled", 0.0
            elif final or attempts > max_retries:
                state, not_before = "failed", 0.0
            else:
                state = "queued"
                not_before = now + min(MAX_BACKOFF_S, self.backoff_s * 2 ** (attempts - 1))
            db.execute(
                "UPDATE jobs SET state = ?, error = ?, not_before = ?, worker = NULL, "
                "updated_at = ?, finished_at = ? WHERE id = ?",
                (state, error, not_before, now, now if state != "queued" else None, job.id),
            )
            return state

        result: str = self.store.run(work)
        return result

    def last_input(self, job: Job) -> str | None:
        """The input hash of this job's last success (idempotence)."""
        row = self.store.run(
            lambda db: db.execute(
                "SELECT input_hash FROM job_results WHERE kind = ? AND chat_id = ? AND target = ?",
                (job.kind, job.chat_id, -1 if job.target is None else job.target),
            ).fetchone()
        )
        return str(row[0]) if row else None

    def renew(self, job_ids: Iterable[int]) -> None:
        """Extend the leases of jobs this worker is running (its heartbeat)."""
        ids = list(job_ids)
        if not ids:
            return
        until = self.clock() + self.lease_s
        self.store.run(
            lambda db: db.executemany(
                "UPDATE jobs SET lease_until = ? WHERE id = ? AND worker = ? AND state = 'running'",
                [(until, job_id, self.worker_name) for job_id in ids],
            )
        )

    def set_progress(self, job: Job, progress: float, note: str | None = None) -> None:
        """Report how far a running job is (0 to 1)."""
        now = self.clock()
        self.store.run(
            lambda db: db.execute(
                "UPDATE jobs SET progress = ?, note = ?, updated_at = ?, lease_until = ? "
                "WHERE id = ?",
                (progress, note, now, now + self.lease_s, job.id),
            )
        )

    def cancel_requested(self, job: Job) -> bool:
        """True when someone cancelled a job while it ran."""
        row = self.store.run(
            lambda db: db.execute(
                "SELECT cancel_requested FROM jobs WHERE id = ?", (job.id,)
            ).fetchone()
        )
        return bool(row and row[0])

    # --- managing ------------------------------------------------------------------------------

    def get(self, job_id: int) -> Job:
        if not -(2**63) <= job_id < 2**63:  # more than SQLite's integers hold: no such job
            raise JobError(f"no job {job_id}: `autorecap jobs list` shows the jobs")
        row = self.store.run(
            lambda db: db.execute(f"SELECT {_COLUMNS} FROM jobs WHERE id = ?", (job_id,)).fetchone()
        )
        if row is None:
            raise JobError(f"no job {job_id}: `autorecap jobs list` shows the jobs")
        return _job(row)

    def list(
        self,
        *,
        states: Iterable[str] = STATES,
        chat_id: str | None = None,
        chat_prefix: str | None = None,
        newest_first: bool = False,
        limit: int | None = None,
    ) -> list[Job]:
        """Jobs in these states, oldest first (or newest first), of one chat or of the chats
        whose id starts with `chat_prefix` (one API key's chats: `alice/`)."""
        wanted = tuple(states)
        if not wanted:
            return []
        marks = ",".join("?" * len(wanted))
        sql = f"SELECT {_COLUMNS} FROM jobs WHERE state IN ({marks})"
        params: list[Any] = list(wanted)
        if chat_id is not None:
            sql += " AND chat_id = ?"
            params.append(chat_id)
        if chat_prefix:
            sql += " AND substr(chat_id, 1, ?) = ?"
            params.extend((len(chat_prefix), chat_prefix))
        sql += " ORDER BY id DESC" if newest_first else " ORDER BY id"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        rows = self.store.run(lambda db: db.execute(sql, params).fetchall())
        return [_job(row) for row in rows]

    def last_id(self) -> int:
        """The newest job's id (0 when there is none)."""
        row = self.store.run(lambda db: db.execute("SELECT MAX(id) FROM jobs").fetchone())
        return int(row[0] or 0)

    def counts(
        self, chat_id: str | None = None, *, chat_prefix: str | None = None
    ) -> dict[str, int]:
        """How many jobs are in each state (of one chat, or of the chats under a prefix)."""
        sql = "SELECT state, COUNT(*) FROM jobs"
        params: tuple[Any, ...] = ()
        if chat_id is not None:
            sql += " WHERE chat_id = ?"
            params = (chat_id,)
        elif chat_prefix:
            sql += " WHERE substr(chat_id, 1, ?) = ?"
            params = (len(chat_prefix), chat_prefix)
        rows = self.store.run(lambda db: db.execute(sql + " GROUP BY state", params).fetchall())
        found = dict.fromkeys(STATES, 0)
        found.update({state: count for state, count in rows})
        return found

    def retry(self, job_id: int) -> None:
        """Queue a failed or cancelled job again, with fresh retries."""
        job = self.get(job_id)
        if job.state not in ("failed", "cancelled"):
            raise JobError(f"job {job_id} is {job.state}: only failed or cancelled jobs retry")
        self._requeue("id = ?", (job_id,))

    def retry_failed(self, chat_id: str | None = None) -> int:
        """Queue every failed job (of one chat) again, with fresh retries; how many."""
        if chat_id is None:
            return self._requeue("state = 'failed'", ())
        return self._requeue("state = 'failed' AND chat_id = ?", (chat_id,))

    def _requeue(self, where: str, params: tuple[Any, ...]) -> int:
        now = self.clock()
        rows = self.store.run(
            lambda db: db.execute(
                "UPDATE jobs SET state = 'queued', attempts = 0, not_before = 0, error = NULL, "
                f"cancel_requested = 0, finished_at = NULL, updated_at = ? WHERE {where} "
                "RETURNING id",
                (now, *params),
            ).fetchall()
        )
        return len(rows)

    def cancel(self, job_id: int) -> str:
        """Cancel a queued job at once, or a running one when it next checks. Returns what
        happened ("cancelled" or "cancelling")."""
        job = self.get(job_id)
        if job.state in ("done", "failed", "cancelled"):
            raise JobError(f"job {job_id} is already {job.state}")
        now = self.clock()
        if job.state == "queued":
            self.store.run(
                lambda db: db.execute(
                    "UPDATE jobs SET state = 'cancelled', finished_at = ?, updated_at = ? "
                    "WHERE id = ?",
                    (now, now, job_id),
                )
            )
            return "cancelled"
        self.store.run(
            lambda db: db.execute("UPDATE jobs SET cancel_requested = 1 WHERE id = ?", (job_id,))
        )
        return "cancelling"

    def prune(self, older_than_s: float) -> int:
        """Delete the jobs that ended done or cancelled more than `older_than_s` ago (their
        dependencies with them); failed jobs stay until retried or cancelled, and a message's
        last recap input stays (`job_results`), so that nothing is recapped again. Returns how
        many went."""
        before = self.clock() - older_than_s

        def work(db: Db) -> int:
            ended = "state IN ('done', 'cancelled') AND finished_at < ?"
            db.execute(
                f"DELETE FROM job_deps WHERE job_id IN (SELECT id FROM jobs WHERE {ended}) "
                f"OR depends_on IN (SELECT id FROM jobs WHERE {ended})",
                (before, before),
            )
            return int(db.execute(f"DELETE FROM jobs WHERE {ended}", (before,)).rowcount)

        result: int = self.store.run(work)
        return result

    def pause(self) -> None:
        """Stop workers from taking new jobs (running ones finish)."""
        self.store.run(
            lambda db: db.execute(
                "INSERT INTO queue_state (key, value) VALUES ('paused', '1') "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value"
            )
        )

    def resume(self) -> None:
        """Let workers take jobs again."""
        self.store.run(lambda db: db.execute("DELETE FROM queue_state WHERE key = 'paused'"))

    @property
    def paused(self) -> bool:
        result: bool = self.store.run(_paused)
        return result


def _waiting(
    db: Db, kind: str, chat_id: str, targets: Sequence[int | None]
) -> dict[int | None, int]:
    """The jobs of this kind and chat waiting (queued or running) for any of `targets`, by
    target: `target IN (...)` or `IS NULL`, which both stores answer from the jobs_by_chat
    index (PostgreSQL reads the whole table for `IS NOT DISTINCT FROM`)."""
    found: dict[int | None, int] = {}
    waiting = "AND state IN ('queued', 'running')"
    if None in targets:
        row = db.execute(
            f"SELECT id FROM jobs WHERE kind = ? AND chat_id = ? AND target IS NULL {waiting}",
            (kind, chat_id),
        ).fetchone()
        if row is not None:
            found[None] = row[0]
    numbers = sorted({t for t in targets if t is not None})
    for target, job_id in _jobs_by_target(db, kind, chat_id, numbers, waiting).items():
        found[target] = job_id
    return found


def _jobs_by_target(
    db: Db, kind: str, chat_id: str, numbers: Sequence[int], states: str
) -> dict[int, int]:
    """A job of this kind and chat, in the `states` (an SQL condition), for each of the
    message ids `numbers` that has one: `target IN (...)`, in parts."""
    found: dict[int, int] = {}
    for marks, part in in_parts(numbers):
        rows = db.execute(
            f"SELECT target, id FROM jobs WHERE kind = ? AND chat_id = ? "
            f"AND target IN ({marks}) {states}",
            (kind, chat_id, *part),
        ).fetchall()
        found.update(dict(rows))
    return found


def _paused(db: Db) -> bool:
    row = db.execute("SELECT value FROM queue_state WHERE key = 'paused'").fetchone()
    return bool(row and row[0] == "1")


def _job(row: tuple[Any, ...]) -> Job:
    return Job(*row)
