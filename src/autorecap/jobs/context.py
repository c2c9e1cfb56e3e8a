"""What a job's handler is given to work with (`JobContext`: the worker that runs it, as far as
the handlers see it), and what a worker counts. Imports only the queue and the layers below, so
that the handlers need not import the worker that imports them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Protocol

from autorecap.core.model import Chat, Message
from autorecap.errors import AutorecapError
from autorecap.jobs.queue import Job, JobQueue
from autorecap.recap.backend import RecapBackend
from autorecap.settings import Settings
from autorecap.store.base import Db


class ChatMovedError(AutorecapError):
    """While a job had let go of its chat (`Worker._pause`), messages were removed or moved, or
    the chat was replaced: the positions it worked with are wrong now. Or the worker's copy of
    the chat is behind another process's save (a job's message is in the store, not in the
    copy). The copy is read again and the job runs again at once."""


@dataclass
class WorkerStats:
    """What a worker did."""

    done: int = 0
    failed: int = 0
    retried: int = 0
    llm_skipped: int = 0
    errors: list[str] = field(default_factory=list)


class JobContext(Protocol):
    """The worker, as a handler uses it (`jobs.runner.Worker` is the one there is)."""

    queue: JobQueue
    stats: WorkerStats
    chat_source: Callable[[str], Chat] | None

    def chat(self, chat_id: str) -> Chat: ...

    def settings_for(self, chat: Chat) -> Settings: ...

    def backend(self, settings: Settings) -> RecapBackend: ...

    def chat_lock(self, chat_id: str) -> AbstractContextManager[None]: ...

    def holding(self, jobs: Sequence[Job]) -> AbstractContextManager[None]: ...

    def save(
        self,
        chat: Chat,
        *,
        changed: Sequence[Message] = (),
        header: bool = False,
        also: Callable[[Db], None] | None = None,
    ) -> None: ...

    def check_cancel(self, job: Job) -> None: ...

    def forget(self, chat_id: str) -> None: ...

    def record_failure(self, job: Job, error: AutorecapError) -> None: ...

    def record_done(self) -> None: ...

    def llm_answered(self, chat_id: str) -> None: ...
