"""Per chat, the LLM's refusals in a row: after a few, the chat's next jobs are not sent.

May import: errors, jobs.queue, recap.backend.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from autorecap.errors import AutorecapError
from autorecap.jobs.queue import Job
from autorecap.recap.backend import LLMError

REFUSALS_TO_STOP = 3
"""After this many calls in a row for one chat that the LLM refused for good, its next jobs
are not sent (`Refusals`)."""
REFUSAL_PAUSE_S = 300.0
"""...for this long: then one job is sent again, to see whether the LLM answers now."""


class NotSentError(LLMError):
    """A job not sent to the LLM, which refused the chat's jobs before it (`Refusals`)."""


class Refusals:
    """Per chat, the calls in a row that the LLM refused for good (a 400, a 401, answers that
    are no recap): a model or key that refuses everything refuses the next job too, and each
    costs a call. After `REFUSALS_TO_STOP` the chat's jobs fail without a call, saying why,
    until `REFUSAL_PAUSE_S` has passed; then one is sent, and an answer ends the pause. A job
    queued again after the last refusal (the user fixed the settings and retried it) is sent
    at once. Per chat: on a server each key's recaps may go to its own upstream. `clock`: the
    job queue's, to compare with its jobs' times."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self._lock = threading.Lock()
        self._chats: dict[str, tuple[int, AutorecapError | None, float]] = {}
        """chat id -> (refusals in a row, the last one, when it came or a job last tried)."""

    def refused(self, chat_id: str, error: AutorecapError) -> None:
        """Count a refusal; the jobs of one call (a batch of message recaps) share its
        error and count once."""
        with self._lock:
            count, last, _when = self._chats.get(chat_id, (0, None, 0.0))
            if error is not last:
                self._chats[chat_id] = (count + 1, error, self.clock())

    def answered(self, chat_id: str) -> None:
        with self._lock:
            self._chats.pop(chat_id, None)

    def holding(self, job: Job) -> NotSentError | None:
        """Why this job is not sent, or None to send it."""
        with self._lock:
            count, error, when = self._chats.get(job.chat_id, (0, None, 0.0))
            if count < REFUSALS_TO_STOP:
                return None
            if job.updated_at > job.created_at and job.updated_at >= when:
                return None  # queued again since the refusals: the user means it
            now = self.clock()
            if now - when >= REFUSAL_PAUSE_S:
                # The pause is over: this job tries, the others wait for its answer.
                self._chats[job.chat_id] = (count, error, now)
                return None
            return NotSentError(
                f"not sent: the LLM refused this chat's last {count} calls ({error}); fix the "
                "recap settings (model, key, base URL), then retry the failed jobs "
                "(`autorecap jobs retry --failed`, or Retry failed on the chat's page)"
            )
