"""The one interface every recap backend implements."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field

from autorecap.errors import AutorecapError


class LLMError(AutorecapError):
    """An LLM call that failed for good (after its retries). The message never holds a key."""

    http_status = 502

    def __init__(self, message: str, *, status: int | None = None, retryable: bool = False):
        super().__init__(message)
        self.status = status
        self.retryable = retryable


@dataclass(frozen=True)
class ContextMessage:
    """An earlier message shown with the one being recapped."""

    name: str
    text: str


@dataclass(frozen=True)
class RecapRequest:
    """What a message recap needs: the message, who wrote it, and what came before."""

    text: str
    name: str
    user: str = "User"
    char: str = "Assistant"
    context: tuple[ContextMessage, ...] = ()
    earlier_recaps: tuple[str, ...] = ()
    """Recaps of the messages just before, so that the offline engine can skip repeats."""
    max_tokens: int = 80


@dataclass
class RecapResult:
    """A recap, with what the backend said on the side."""

    memory: str
    reasoning: str | None = None
    prefill: str | None = None
    extras: dict[str, object] = field(default_factory=dict)


class RecapBackend(ABC):
    """Writes recaps. `name` says which backend it is (for logs and stored metadata)."""

    name: str = "backend"

    @abstractmethod
    def message_recap(self, request: RecapRequest) -> RecapResult:
        """The recap of one message. Raises `LLMError` when it cannot be made."""

    def close(self) -> None:  # noqa: B027 - optional: only backends holding resources need it
        """Release what the backend holds (HTTP connections)."""
