"""Running recap jobs: the worker, and the jobs that make up the pipeline.

Kinds of job:
- `message_recap` (target: a message id): recap one message;
- `detect_scenes`: find scene breaks after the last one, then queue the scene work;
- `scene_recap` (target: the id of the message that ends the scene): recap one scene;
- `running_recap`: fold the closed scenes into the running recap.

`detect_scenes` waits for the message recaps queued with it, and `running_recap` for the scene
recaps. A message recap whose input (text, backend, prompt) did not change since it last
succeeded changes nothing and calls no LLM. Each job's effect and its completion are saved in one
transaction. Several jobs run at once (`concurrency`); LLM calls happen outside any lock, while
the chat's data and the store are written by one thread at a time.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager as ContextManager
from contextlib import contextmanager
from typing import Any

from autorecap.core.model import Chat, Message
from autorecap.core.names import character_key_of
from autorecap.errors import AutorecapError
from autorecap.jobs.context import ChatMovedError, WorkerStats
from autorecap.jobs.handlers import HANDLERS
from autorecap.jobs.queue import Job, JobQueue
from autorecap.jobs.refusals import NotSentError, Refusals
from autorecap.pacing import pausing
from autorecap.profiles import Profiles, profiles_of
from autorecap.recap.backend import LLMError, RecapBackend
from autorecap.settings import Settings
from autorecap.store.base import Db
from autorecap.store.migrations import StaleChatError, UnknownChatError

log = logging.getLogger("autorecap.jobs")
SLICE_S = 0.02
"""How long a job runs without pausing once it has waited `patience_s` for requests."""
LLM_KINDS = frozenset({"message_recap", "scene_recap", "running_recap"})
"""The kinds of job that may call an LLM (scene detection by cues calls none)."""
STALE_TRIES = 4
"""How often a job runs again at once when another process saved its chat first."""


class JobCancelledError(AutorecapError):
    """A job cancelled while it ran: it stops before changing anything."""


class Worker:
    """Takes jobs from the queue and runs them until the queue is empty (or it is stopped)."""

    def __init__(
        self,
        queue: JobQueue,
        backend_for: Callable[[Settings], RecapBackend],
        *,
        profiles: Profiles | None = None,
        profiles_for: Callable[[str], Profiles] | None = None,
        settings: Settings | None = None,
        concurrency: int = 1,
        idle_sleep: float = 0.2,
        chat_source: Callable[[str], Chat] | None = None,
        chat_lock: Callable[[str], ContextManager[Any]] | None = None,
        settings_source: Callable[[Chat], Settings] | None = None,
        yield_to: Callable[[], bool] | None = None,
        patience_s: float = 1.0,
        wanted: Callable[[str], bool] | None = None,
        on_chat_released: Callable[[str], None] | None = None,
        on_idle: Callable[[], None] | None = None,
        after_job: Callable[[], None] | None = None,
        on_stale: Callable[[str], object] | None = None,
        on_saved: Callable[[Chat, list[Message], bool], None] | None = None,
    ) -> None:
        self.queue = queue
        self.store = queue.store
        self.backend_for = backend_for
        self.profiles = profiles
        self.profiles_for = profiles_for
        """The settings file of a chat, by its id (with API keys on, its owner's); else
        `profiles`, else the installation's."""
        self.fixed_settings = settings
        self.concurrency = max(1, concurrency)
        self.idle_sleep = idle_sleep
        self.stats = WorkerStats()
        self._chats: dict[str, Chat] = {}
        self._settings: dict[str, Settings] = {}
        self._settings_version = 0
        self._backends: dict[str, RecapBackend] = {}
        # A server shares its in-memory chats (and their lock) with its worker: one object per
        # chat, so that neither overwrites the other's changes with an old copy.
        self.chat_source = chat_source
        self.settings_source = settings_source
        self._chat_lock = chat_lock
        self.yield_to = yield_to
        """While it answers True (requests are being answered), take no new job, for up to
        `patience_s` at a time: recaps still progress under constant traffic."""
        self.patience_s = patience_s
        self.wanted = wanted
        """True while a request waits for a chat's lock: a job holding it does not pause."""
        self.on_chat_released = on_chat_released
        """Called with a chat's id as a job is about to release its lock, the lock still held
        (a server refreshes the chat's memory there, as the seeds do after a recap)."""
        self.on_idle = on_idle
        """Called when there is no job to take (before waiting for one, or stopping)."""
        self.after_job = after_job
        """Called after each job, no chat's lock held."""
        self.on_stale = on_stale
        """Called with a chat's id when a job's save was refused because another process
        saved the chat first (a server reads what changed into its copy there)."""
        self.on_saved = on_saved
        """Called after a job saved a chat (`save`), its lock still held, with the messages
        saved and whether the header was: a server need not save them again."""
        self._local = threading.local()  # per worker thread: the chats it holds, its slice
        self._lock = threading.RLock()
        self.stop_event = threading.Event()
        self._running: set[int] = set()
        self._running_lock = threading.Lock()  # not the chat lock: LLM calls may hold that
        self._data_version: tuple[int, int] | None = None
        self.refusals = Refusals(queue.clock)

    # --- the loop ------------------------------------------------------------------------------

    def run(self, *, until_empty: bool = True, chat_id: str | None = None) -> WorkerStats:
        """Work until no job is queued or running (`until_empty`), or until `stop()`."""
        threads = [
            threading.Thread(
                target=self._loop,
                args=(until_empty, chat_id),
                daemon=True,
                name=f"autorecap-worker-{n}",
            )
            for n in range(self.concurrency)
        ]
        beat_stop = threading.Event()
        heartbeat = threading.Thread(
            target=self._heartbeat, args=(beat_stop,), daemon=True, name="autorecap-heartbeat"
        )
        heartbeat.start()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        beat_stop.set()
        heartbeat.join(timeout=10)
        for backend in self._backends.values():
            backend.close()
        return self.stats

    def stop(self) -> None:
        """Finish the jobs in progress, take no new ones."""
        self.stop_event.set()

    def _heartbeat(self, stop: threading.Event) -> None:
        """Renew the leases of the jobs in progress, so that a long LLM call is not taken for
        a dead worker."""
        while not stop.wait(max(0.05, self.queue.lease_s / 3)):
            with self._running_lock:
                running = list(self._running)
            try:
                self.queue.renew(running)
            except AutorecapError as error:  # pragma: no cover - the store went away
                log.warning("could not renew job leases: %s", error)

    def _loop(self, until_empty: bool, chat_id: str | None) -> None:
        while not self.stop_event.is_set():
            waited_until = time.monotonic() + self.patience_s
            while (
                self.yield_to is not None
                and self.yield_to()
                and not self.stop_event.is_set()
                and time.monotonic() < waited_until
            ):
                time.sleep(0.002)  # requests go first: recaps are never on the reply path
            job = self.queue.claim()
            if job is None:
                if self.on_idle is not None:
                    self.on_idle()
                if until_empty and self.queue.paused:
                    log.info("the queue is paused: stopping")
                    return
                counts = self.queue.counts(chat_id)
                if until_empty and counts["queued"] == 0 and counts["running"] == 0:
                    return
                self.stop_event.wait(self.idle_sleep)
                continue
            with self._running_lock:
                self._running.add(job.id)
            try:
                self.execute(job)
            finally:
                with self._running_lock:
                    self._running.discard(job.id)
            if self.after_job is not None:
                self.after_job()

    def execute(self, job: Job) -> None:
        """Run one claimed job and record its outcome."""
        try:
            handler = HANDLERS[job.kind]
        except KeyError:
            self.queue.fail(job, f"unknown job kind {job.kind!r}")
            return
        held = self.refusals.holding(job) if job.kind in LLM_KINDS else None
        if held is not None:
            self.record_failure(job, held)
            return
        try:
            self.check_cancel(job)
            with pausing(self._pause):
                for attempt in range(STALE_TRIES):
                    try:
                        handler(self, job)
                        break
                    except StaleChatError:
                        # Another process saved the chat meanwhile: read what it changed, then
                        # run the job again on that (it usually finds its work done or still
                        # to do, and saves this time). Forgotten also when the job gives up:
                        # the copy holds its unsaved recaps, which would pass for saved ones
                        # when the job runs again (it would find nothing to do).
                        self.forget(job.chat_id)
                        if attempt == STALE_TRIES - 1:
                            raise
                    except ChatMovedError:
                        if attempt == STALE_TRIES - 1:
                            raise
        except UnknownChatError:
            log.info("job %s (%s): its chat was deleted; nothing to do", job.id, job.label)
            self.queue.complete(job)
            return
        except AutorecapError as error:
            self.record_failure(job, error)
            return
        except Exception as error:
            log.exception("job %s (%s) crashed", job.id, job.label)
            self.queue.fail(job, f"internal error: {type(error).__name__}: {error}")
            return
        with self._lock:
            self.stats.done += 1

    # --- chats and settings ----------------------------------------------------------------------

    @contextmanager
    def holding(self, jobs: Sequence[Job]) -> Iterator[None]:
        """Jobs a handler claimed besides its own (`JobQueue.claim_siblings`): their leases
        are renewed with the worker's own while it works on them."""
        with self._running_lock:
            self._running.update(j.id for j in jobs)
        try:
            yield
        finally:
            with self._running_lock:
                self._running.difference_update(j.id for j in jobs)

    def record_failure(self, job: Job, error: AutorecapError) -> None:
        """Record a job's failure (retried later, or failed for good) and count it. An LLM's
        answer that is no recap, or a refusal of the request itself (a 400, a 401), was asked
        again by the backend already: queued again, each try cost as much for the same answer
        (a model that will not recap cost 20 times the chat)."""
        final = isinstance(error, LLMError) and not error.retryable
        state = self.queue.fail(job, str(error), final=final)
        if final and not isinstance(error, NotSentError):
            self.refusals.refused(job.chat_id, error)
        with self._lock:
            if state == "failed":
                self.stats.failed += 1
                self.stats.errors.append(f"{job.label}: {error}")
            else:
                self.stats.retried += 1
        # A job not sent says what its chat's first refusals said already: not again loudly.
        level = logging.INFO if isinstance(error, NotSentError) else logging.WARNING
        log.log(level, "job %s (%s) failed: %s; now %s", job.id, job.label, error, state)

    def record_done(self) -> None:
        """Count a job done by a handler besides its own."""
        with self._lock:
            self.stats.done += 1

    def llm_answered(self, chat_id: str) -> None:
        """A recap came back for the chat: the LLM answers it (`Refusals`)."""
        self.refusals.answered(chat_id)

    def check_cancel(self, job: Job) -> None:
        """Stop a job that was cancelled while it ran, before it changes anything (the
        failure is recorded as `cancelled`)."""
        if self.queue.cancel_requested(job):
            raise JobCancelledError(f"job {job.id} was cancelled")

    @contextmanager
    def chat_lock(self, chat_id: str) -> Iterator[None]:
        """The lock that guards one chat's in-memory copy (the server's, when it shares its
        chats; else the worker's own)."""
        lock = self._chat_lock(chat_id) if self._chat_lock is not None else self._lock
        with lock:
            holding = self._holding()
            holding.append((chat_id, lock))
            try:
                yield
                if self.on_chat_released is not None:
                    self.on_chat_released(chat_id)
            finally:
                holding.pop()

    def _holding(self) -> list[tuple[str, Any]]:
        """The chats whose lock this thread holds, with their locks, in the order it took
        them."""
        holding: list[tuple[str, Any]] | None = getattr(self._local, "holding", None)
        if holding is None:
            holding = self._local.holding = []
        return holding

    def _held(self) -> list[str]:
        """The chats whose lock this thread holds."""
        return [chat_id for chat_id, _ in self._holding()]

    def save(
        self,
        chat: Chat,
        *,
        changed: Sequence[Message] = (),
        header: bool = False,
        also: Callable[[Db], None] | None = None,
    ) -> None:
        """A job's save of its chat (its lock held), told to `on_saved`."""
        self.store.save(chat, changed=changed, header=header, also=also)
        if self.on_saved is not None:
            self.on_saved(chat, list(changed), header)

    def _pause(self, step_aside: bool = True) -> None:
        """A job's pause point (`autorecap.pacing`). While requests are being answered, wait,
        for up to `patience_s`, then run on for `SLICE_S` before pausing again, so that recaps
        progress under constant traffic. A job that holds a chat lets go of it while it waits,
        and at once when a request waits for it (`_step_aside`): no request waits for a job."""
        busy = self.yield_to
        if busy is None:
            return
        held = self._held()
        if held and step_aside and self._wanted(held):
            self._step_aside(busy)
            return
        if time.monotonic() < getattr(self._local, "run_until", 0.0) or not busy():
            return
        if held and step_aside:
            self._step_aside(busy)
            return
        waited_until = time.monotonic() + self.patience_s
        while busy() and not self.stop_event.is_set():
            if held and self._wanted(held):
                return  # a copy being made: finish it rather than make the request wait
            if time.monotonic() >= waited_until:
                self._local.run_until = time.monotonic() + SLICE_S
                return
            time.sleep(0.002)

    def _wanted(self, chat_ids: list[str]) -> bool:
        return self.wanted is not None and any(self.wanted(c) for c in chat_ids)

    def _step_aside(self, busy: Callable[[], bool]) -> None:
        """Let go of the chats this thread holds while requests are answered or want them (up
        to `patience_s`), then take them back. Appended and edited messages are fine (a job's
        results stand as if they had come a moment later); removed or moved ones, or a chat
        replaced, are a `ChatMovedError`."""
        holding = list(self._holding())
        held = [chat_id for chat_id, _ in holding]
        shapes = [self._shape(chat_id) for chat_id in held]
        for _, lock in reversed(holding):
            lock.release()
        try:
            waited_until = time.monotonic() + self.patience_s
            while not self.stop_event.is_set() and (self._wanted(held) or busy()):
                if time.monotonic() >= waited_until:
                    self._local.run_until = time.monotonic() + SLICE_S
                    break
                time.sleep(0.002)
        finally:
            for _, lock in holding:
                lock.acquire()
        for chat_id, (chat, messages, reshaped) in zip(held, shapes, strict=True):
            now, now_messages, now_reshaped = self._shape(chat_id)
            if now is not chat or now_messages is not messages or now_reshaped != reshaped:
                raise ChatMovedError(
                    f"chat {chat_id!r}: messages were removed or moved during a recap job; "
                    "it runs again"
                )

    def _shape(self, chat_id: str) -> tuple[Chat, list[Message], int]:
        chat = self.chat(chat_id)
        return chat, chat.messages, chat.messages.reshaped

    def chat(self, chat_id: str) -> Chat:
        """The chat, loaded once; what another process saved since is read in (`pull`) when
        the database changed, and a chat whose messages were added or removed elsewhere is
        loaded again."""
        if self.chat_source is not None:
            return self.chat_source(chat_id)
        with self._lock:
            version = (self.store.data_version(), self.store.structure_version)
            if version != self._data_version:
                if self._data_version is None or version[1] != self._data_version[1]:
                    self._chats.clear()  # this connection reshaped a chat: read them again
                changed = self.store.changed_chats()  # PostgreSQL names them; else: all
                for known, copy in list(self._chats.items()):
                    if changed is not None and known not in changed:
                        continue
                    pulled = self.store.pull(copy)
                    if pulled.reshaped or pulled.gone:
                        del self._chats[known]
                self._data_version = version
            chat = self._chats.get(chat_id)
            if chat is None:
                chat = self._chats[chat_id] = self.store.load_chat(chat_id)
            return chat

    def forget(self, chat_id: str) -> None:
        """A save of the chat was refused (another process saved it first): drop this
        worker's copy (the server's chats read the changes in instead: `on_stale`)."""
        if self.on_stale is not None:
            self.on_stale(chat_id)
            return
        with self._lock:
            self._chats.pop(chat_id, None)

    def settings_for(self, chat: Chat) -> Settings:
        if self.settings_source is not None:
            return self.settings_source(chat)
        with self._lock:
            version = self.queue.store.settings_version()
            if version != self._settings_version:
                # Settings saved to a store that keeps them (another machine's change): the
                # chats' settings are read again.
                self._settings.clear()
                self._settings_version = version
            found = self._settings.get(chat.id)
            if found is None:
                if self.fixed_settings is not None:
                    found = self.fixed_settings
                else:
                    if self.profiles_for is not None:
                        profiles = self.profiles_for(chat.id)
                    else:
                        if self.profiles is None:
                            self.profiles = profiles_of("", self.queue.store)
                        profiles = self.profiles
                    profiles.reload()
                    found = profiles.settings_for(chat.id, character_key_of(chat))
                self._settings[chat.id] = found
            return found

    def backend(self, settings: Settings) -> RecapBackend:
        key = settings.model_dump_json()
        with self._lock:
            backend = self._backends.get(key)
            if backend is None:
                backend = self._backends[key] = self.backend_for(settings)
            return backend
