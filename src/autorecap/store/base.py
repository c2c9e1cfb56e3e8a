"""The `ChatStore` interface: what every storage backend provides."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass

from autorecap.core.model import Chat, Message


@dataclass(frozen=True)
class ChatInfo:
    """One stored chat, as `list_chats` shows it."""

    id: str
    source: str | None
    created_at: float
    updated_at: float
    messages: int


class ChatStore(ABC):
    """Where chats live between runs. SQLite is the embedded default."""

    @abstractmethod
    def has_chat(self, chat_id: str) -> bool:
        """True when a chat with this id is stored."""

    @abstractmethod
    def list_chats(self) -> list[ChatInfo]:
        """Every stored chat, most recently changed first."""

    @abstractmethod
    def import_chat(
        self,
        chat: Chat,
        *,
        chat_id: str | None = None,
        replace: bool = False,
        source: str | None = None,
    ) -> ChatInfo:
        """Store `chat` under `chat_id` (default: its own id); an id already taken is an error
        unless `replace`. Each message gets a stable id."""

    @abstractmethod
    def load_chat(self, chat_id: str) -> Chat:
        """The stored chat, its messages carrying their ids."""

    @abstractmethod
    def export_chat(self, chat_id: str) -> bytes:
        """The chat as a SillyTavern file: byte for byte the imported file while unchanged."""

    @abstractmethod
    def delete_chat(self, chat_id: str) -> None:
        """Remove a chat and everything stored with it."""

    @abstractmethod
    def save(
        self,
        chat: Chat,
        *,
        changed: Iterable[Message] = (),
        header: bool = False,
        structure: bool = False,
        full: bool = False,
    ) -> int:
        """Persist changes of a loaded chat in one transaction: the `changed` messages' rows,
        the header when `header`, added/removed/reordered messages when `structure`, or
        everything when `full`. Returns the number of rows written."""

    def search(self, chat_id: str, query: str, limit: int = 50) -> list[tuple[int, float]]:
        """The chat's messages that best match `query`, best first: (message id, score),
        higher is better. A store without a full-text index finds nothing."""
        return []

    @abstractmethod
    def close(self) -> None:
        """Release the backend's resources."""
