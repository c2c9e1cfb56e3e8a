"""The jobs of the pipeline, as the worker runs them (see `autorecap.jobs.runner`), and how a
chat's pipeline is queued."""

from __future__ import annotations

import hashlib
import json
import time
import weakref
from collections.abc import Callable, Collection, Sequence
from typing import Any

from autorecap.core.data import get_data, get_memory, read_namespace
from autorecap.core.model import Chat, Message
from autorecap.core.scenes import last_break, scenes
from autorecap.core.tokens import get_counter
from autorecap.errors import AutorecapError
from autorecap.jobs.context import ChatMovedError, JobContext
from autorecap.jobs.queue import Job, JobQueue
from autorecap.jobs.snapshot import ChangedMeanwhileError, Snapshot
from autorecap.pacing import pause
from autorecap.recap import (
    detect_scene_breaks,
    recap_scenes,
    scene_recap_due,
    update_running_recap,
)
from autorecap.recap.backend import Failure, RecapBackend, RecapResult
from autorecap.recap.combined_recap import update_combined_recap
from autorecap.recap.messages import batches, build_request, needs_recap, store_result
from autorecap.settings import Settings
from autorecap.store.base import Db
from autorecap.store.migrations import StaleChatError

MESSAGE_PRIORITY = 30
DETECT_PRIORITY = 20
SCENE_PRIORITY = 10
RUNNING_PRIORITY = 0
BATCH_MOST = 40
"""Message jobs one handler takes together when its backend recaps several per call."""
SAVE_PART = 100
"""How many changed messages a job saves in one transaction."""


def enqueue_pipeline(
    queue: JobQueue,
    chat: Chat,
    settings: Settings,
    only: Sequence[Message] | None = None,
    *,
    once: Collection[int] = (),
) -> list[int]:
    """Queue the whole pipeline for a stored chat: a recap job for every message that needs
    one (or, with `only`, for those messages: what a turn of the proxy added or changed), and
    scene detection after them (which queues the scene work). Returns the job ids. `once`: the
    message ids that get no new job when they ever had one (`JobQueue.enqueue_many`)."""
    counter = get_counter(settings.tokenizer)
    query = (
        "SELECT target, input_hash FROM job_results WHERE kind = 'message_recap' AND chat_id = ?"
    )
    params: list[Any] = [chat.id]
    targets: list[int] = []
    if only is not None:  # a turn's few messages: not the whole chat's results
        targets = [m.id for m in only if m.id is not None]
        query += f" AND target IN ({','.join('?' * len(targets))})"
        params += targets
    done: dict[int, str] = (
        queue.store.run(lambda db: dict(db.execute(query, params).fetchall()))
        if only is None or targets  # `IN ()` is no SQL to PostgreSQL
        else {}
    )
    wanted: list[int | None] = []
    for message in chat.messages if only is None else only:
        if message.id is None:
            continue
        needed = needs_recap(message, settings, counter)
        if not needed and message.id in done:  # recapped here before: was the text edited?
            needed = done[message.id] != _input_hash(message, settings.recap_backend, settings)
        if needed:
            wanted.append(message.id)
    ids = queue.enqueue_many(
        "message_recap",
        chat.id,
        wanted,
        priority=MESSAGE_PRIORITY,
        max_retries=settings.max_retries,
        once=once,
    )
    ids.append(
        queue.enqueue(
            "detect_scenes",
            chat.id,
            priority=DETECT_PRIORITY,
            max_retries=settings.max_retries,
            depends_on=ids,
        )
    )
    return ids


# --- the jobs ------------------------------------------------------------------------------------


def _message_recap(worker: JobContext, job: Job) -> None:
    """Recap one message; with a backend that recaps several per call, the chat's other
    waiting message jobs too (`JobQueue.claim_siblings`), each finished on its own."""
    chat = worker.chat(job.chat_id)
    settings = worker.settings_for(chat)
    backend = worker.backend(settings)
    siblings = worker.queue.claim_siblings(job, BATCH_MOST - 1) if backend.batch_tokens > 0 else []
    with worker.holding(siblings):
        try:
            failures = _recap_messages(worker, [job, *siblings], chat, settings, backend)
        except BaseException as error:
            worker.queue.release(siblings)  # the primary job's failure is recorded for it
            if not isinstance(error, StaleChatError):  # (the worker reads that one again)
                # The recaps may be in the chat's copy and not saved (the save was undone:
                # a job taken over by another worker): read it again, or they would pass
                # for saved ones and the jobs run again would find nothing to do.
                worker.forget(job.chat_id)
            raise
    for other in siblings:
        if other.id in failures:
            worker.record_failure(other, failures[other.id])
        else:
            worker.record_done()
    if job.id in failures:
        raise failures[job.id]


def _recap_messages(
    worker: JobContext, jobs: list[Job], chat: Chat, settings: Settings, backend: RecapBackend
) -> dict[int, AutorecapError]:
    """The work of message jobs: recaps made (no lock held during LLM calls), stored and saved
    with the jobs' completions in one transaction. Returns the jobs that failed."""
    counter = get_counter(settings.tokenizer)
    chat_id = jobs[0].chat_id
    planned: list[tuple[Job, Message, str, int]] = []
    with worker.chat_lock(chat_id):
        indexes = [_index_of(chat, job.target) for job in jobs]
        for job, index in zip(jobs, indexes, strict=True):
            if index is None:
                _check_gone(worker, job)  # before any job is completed as gone
        for job, index in zip(jobs, indexes, strict=True):
            if index is None:  # the message was deleted: nothing to do
                worker.queue.complete(job)
                continue
            message = chat.messages[index]
            input_hash = _input_hash(message, backend.name, settings)
            has_recap = bool(get_memory(message)) and not get_data(message, "error")
            previous = worker.queue.last_input(job)
            if previous == input_hash and has_recap:
                worker.stats.llm_skipped += 1
                worker.queue.complete(job, input_hash=input_hash)
                continue
            edited = bool(get_data(message, "edited"))
            changed = previous is not None and previous != input_hash
            if not needs_recap(message, settings, counter, force=changed and not edited):
                worker.queue.complete(job, input_hash=input_hash)
                continue
            planned.append((job, message, input_hash, index))
        groups = batches(chat, [index for *_, index in planned], backend.batch_tokens, counter)
        requests = {
            index: build_request(chat, index, settings, counter)
            for group in groups
            for index in group
        }
    results: dict[int, RecapResult | AutorecapError] = {}
    for group in groups:  # no lock held: other jobs and requests go on meanwhile
        answers = backend.message_recaps([requests[index] for index in group])
        results.update(zip(group, answers, strict=True))
    for job, *_ in planned:
        worker.check_cancel(job)
    failures: dict[int, AutorecapError] = {}
    with worker.chat_lock(chat_id):
        # Another process may have changed the chat during the calls: apply to a fresh copy.
        if worker.chat(chat_id) is not chat and worker.chat_source is not None:
            raise ChangedMeanwhileError("the chat was replaced during the recap")
        live = worker.chat(chat_id)
        stored: list[tuple[Job, str]] = []
        changed_messages: list[Message] = []
        for job, _, input_hash, index in planned:
            now_index = _index_of(live, job.target)
            if now_index is None:
                _check_gone(worker, job)
                stored.append((job, ""))  # deleted meanwhile: done, nothing to store
                continue
            message = live.messages[now_index]
            result = results[index]
            if _input_hash(message, backend.name, settings) != input_hash:
                failures[job.id] = AutorecapError(
                    "the message changed during its recap; it is recapped again"
                )
                continue
            store_result(message, result)
            changed_messages.append(message)
            if isinstance(result, AutorecapError):
                failures[job.id] = result
            else:
                stored.append((job, input_hash))

        if any(input_hash for _, input_hash in stored):
            worker.llm_answered(chat_id)  # a recap came back (not only deleted messages)

        def finish(db: Db) -> None:
            for job, input_hash in stored:
                worker.queue.finish(db, job, input_hash=input_hash or None)

        worker.save(live, changed=changed_messages, also=finish)
    return failures


def _on_chat(
    worker: JobContext,
    job: Job,
    backend: RecapBackend,
    work: Callable[[Chat], list[str]],
    among: Callable[[Chat], Sequence[Message]] = lambda chat: chat.messages,
    state: Callable[[Message], object] = lambda message: None,
) -> tuple[Chat, list[Message], bool, list[str]]:
    """Run `work(chat)` and return (live chat, messages changed, header changed, failures).

    The offline engine is quick: it works on the live chat under its lock. An LLM may take
    minutes: it works on a copy with no lock held, so that requests for the chat never wait
    for it, and the changes are merged back under the lock (see `jobs.snapshot`). `among`:
    the messages the offline work may change, `state` what of them it changes (compared before
    and after); the header counts as changed."""
    chat = worker.chat(job.chat_id)
    if backend.name == "offline":
        with worker.chat_lock(job.chat_id):
            watched = list(among(chat))
            before = [state(m) for m in watched]
            failures = work(chat)
            changed = [m for m, was in zip(watched, before, strict=True) if state(m) != was]
            return chat, changed, True, failures
    with worker.chat_lock(job.chat_id):
        snapshot = Snapshot(chat)
    failures = work(snapshot.copy)
    worker.check_cancel(job)
    with worker.chat_lock(job.chat_id):
        if worker.chat(job.chat_id) is not chat:
            raise ChangedMeanwhileError("the chat was replaced during the recap; it is redone")
        changed, header = snapshot.merge(chat)
        return chat, changed, header, failures


def _break_state(message: Message) -> tuple[Any, ...]:
    """What scene detection changes on a message."""
    return (
        get_data(message, "scene_break"),
        get_data(message, "scene_break_visible"),
        get_data(message, "scene_break_name"),
        get_data(message, "auto_scene_break_checked"),
    )


def _scene_state(message: Message) -> str:
    """What scene work changes on a message (the offline path compares it before and after):
    its `scene_*` and `auto_scene_*` data."""
    value = read_namespace(message) or {}
    scene = {k: v for k, v in value.items() if k.startswith(("scene_", "auto_scene_"))}
    return json.dumps(scene, sort_keys=True, default=str) if scene else ""


def _detect_scenes(worker: JobContext, job: Job) -> None:
    chat = worker.chat(job.chat_id)
    settings = worker.settings_for(chat)
    backend = worker.backend(settings)

    def work(target: Chat) -> list[str]:
        detect_scene_breaks(target, backend, settings)
        return []

    # Detection changes only the messages after the last break (the offline path compares
    # those before and after, not the whole chat).
    chat, changed, _, _ = _on_chat(
        worker,
        job,
        backend,
        work,
        among=lambda live: live.messages[last_break(live.messages) + 1 :],
        state=_break_state,
    )
    with worker.chat_lock(job.chat_id):
        # The breaks are saved first (the scene jobs name their messages by store id), and
        # this job is done only after the jobs it leads to are queued: the queue never looks
        # empty in between. A first detection marks every message: saved a part at a time,
        # requests for the chat going first in between.
        for start in range(0, len(changed), SAVE_PART):
            if start:
                pause()
            worker.save(chat, changed=changed[start : start + SAVE_PART])
        scene_jobs = [
            worker.queue.enqueue(
                "scene_recap",
                chat.id,
                chat.messages[scene.end].id,
                priority=SCENE_PRIORITY,
                max_retries=settings.max_retries,
            )
            for scene in scenes(chat.messages)
            if scene.closed
            and chat.messages[scene.end].id is not None
            and scene_recap_due(chat, scene)  # not the scenes recapped already, every turn
        ]
        worker.queue.enqueue(
            "running_recap",
            chat.id,
            priority=RUNNING_PRIORITY,
            max_retries=settings.max_retries,
            depends_on=scene_jobs,
        )
        worker.queue.complete(job)


def _scene_recap(worker: JobContext, job: Job) -> None:
    chat = worker.chat(job.chat_id)
    settings = worker.settings_for(chat)
    counter = get_counter(settings.tokenizer)
    backend = worker.backend(settings)
    with worker.chat_lock(job.chat_id):
        index = _index_of(chat, job.target)
        if index is None:
            _check_gone(worker, job)
            worker.queue.complete(job)
            return

    def work(target: Chat) -> list[str]:
        failures: list[str] = []
        recap_scenes(target, backend, settings, counter, failures=failures, only_end=index)
        return failures

    chat, changed, _, failures = _on_chat(
        worker, job, backend, work, among=lambda live: [live.messages[index]], state=_scene_state
    )
    with worker.chat_lock(job.chat_id):
        if failures:
            raise _raised(failures[0])
        if changed:
            worker.llm_answered(job.chat_id)
        worker.save(chat, changed=changed, also=lambda db: worker.queue.finish(db, job))


def _running_recap(worker: JobContext, job: Job) -> None:
    chat = worker.chat(job.chat_id)
    settings = worker.settings_for(chat)
    counter = get_counter(settings.tokenizer)
    backend = worker.backend(settings)

    added = 0

    def work(target: Chat) -> list[str]:
        nonlocal added
        failures: list[str] = []
        now_ms = int(time.time() * 1000)
        added = update_running_recap(
            target, backend, settings, counter, now_ms=now_ms, failures=failures
        )
        if settings.combined_recap_enabled:  # the message recaps have landed by now too
            added += update_combined_recap(
                target, backend, settings, counter, now_ms=now_ms, failures=failures
            )
        return failures

    chat, _, _, failures = _on_chat(worker, job, backend, work, among=lambda live: [])
    with worker.chat_lock(job.chat_id):
        if failures:  # keep the versions made so far; the job is retried for the rest
            worker.save(chat, header=True)
            raise _raised(failures[0])
        if not added:  # no scene to fold in (most turns): the header is as saved
            worker.queue.complete(job)
            return
        worker.llm_answered(job.chat_id)
        worker.save(chat, header=True, also=lambda db: worker.queue.finish(db, job))


def _raised(failure: str) -> AutorecapError:
    """The error a job fails with: a refusal by the LLM stays one (it fails for good)."""
    return failure.raised() if isinstance(failure, Failure) else AutorecapError(failure)


HANDLERS: dict[str, Callable[[JobContext, Job], None]] = {
    "message_recap": _message_recap,
    "detect_scenes": _detect_scenes,
    "scene_recap": _scene_recap,
    "running_recap": _running_recap,
}


_POSITIONS: weakref.WeakKeyDictionary[Chat, tuple[int, dict[int, int]]] = (
    weakref.WeakKeyDictionary()
)


def _check_gone(worker: JobContext, job: Job) -> None:
    """A job's message is not in the worker's copy of its chat: deleted (return), or added by
    another process after the copy was read (on PostgreSQL, another server's save is known a
    moment later): then the copy is read again and the job runs again (`ChatMovedError`)."""
    if job.target is None or not worker.queue.store.has_message(job.chat_id, job.target):
        return
    worker.forget(job.chat_id)
    raise ChatMovedError(
        f"chat {job.chat_id!r}: message {job.target} was saved elsewhere after this copy was "
        "read; it is read again"
    )


def _index_of(chat: Chat, message_id: int | None) -> int | None:
    """The index of the message with this store id (a map per chat, rebuilt when the message
    list changed or a message got its id since)."""
    if message_id is None:
        return None
    version = chat.messages.version
    cached = _POSITIONS.get(chat)
    if cached is not None and cached[0] == version:
        index = cached[1].get(message_id)
        if (
            index is not None
            and index < len(chat.messages)
            and chat.messages[index].id == message_id
        ):
            return index
    positions = {m.id: i for i, m in enumerate(chat.messages) if m.id is not None}
    _POSITIONS[chat] = (version, positions)
    return positions.get(message_id)


def _input_hash(message: Message, backend_name: str, settings: Settings) -> str:
    """What a message recap depends on: unchanged, the recap need not be made again."""
    digest = hashlib.sha256()
    for part in (
        message.name,
        message.text,
        backend_name,
        settings.message_recap_prompt,
        settings.message_recap_prefill,
        str(settings.message_recap_max_tokens),
        str(message.swipe_id),
        settings.llm_model if backend_name != "offline" else "",
    ):
        digest.update(part.encode("utf-8", "surrogatepass"))
        digest.update(b"\x00")
    return digest.hexdigest()[:24]
