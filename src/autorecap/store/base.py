"""The `ChatStore` interface: what every storage backend provides, and `Db`, the connection
that the job queue's SQL runs on inside a store's transaction (`ChatStore.run`)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from autorecap.core.model import Chat, Message
from autorecap.store.migrations import StoreError


class Rows(Protocol):
    """What a statement gives back."""

    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


class Db(Protocol):
    """A connection inside a transaction, in the SQL both backends speak: `?` marks a
    parameter (see `autorecap.store.sql`)."""

    def execute(self, sql: str, params: Sequence[Any] = (), /) -> Rows: ...

    def executemany(self, sql: str, params: Iterable[Sequence[Any]], /) -> object: ...


@dataclass(frozen=True)
class ChatInfo:
    """One stored chat, as `list_chats` shows it."""

    id: str
    source: str | None
    created_at: float
    updated_at: float
    messages: int


@dataclass
class Pulled:
    """What `ChatStore.pull` brought into a chat."""

    messages: list[Message] = field(default_factory=list)
    """The messages whose content changed."""
    header: bool = False
    """The header (the running recap) changed."""
    reshaped: bool = False
    """Messages were added or removed elsewhere: nothing was merged, read the chat again."""
    gone: bool = False
    """The chat was deleted from the store."""

    def __bool__(self) -> bool:
        return bool(self.messages) or self.header or self.reshaped or self.gone


class ChatStore(ABC):
    """Where chats live between runs. SQLite is the embedded default; PostgreSQL serves
    several machines (`autorecap.store.open_store` picks one from a URL)."""

    dialect = "sqlite"
    """"sqlite" or "postgresql": the few places that differ (the job queue's claim) ask."""
    structure_version: int
    """Counts this store's changes to chats' message lists (caches key on it)."""

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
    def has_message(self, chat_id: str, message_id: int) -> bool:
        """True when the chat holds the message with this store id."""

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
        also: Callable[[Db], None] | None = None,
    ) -> int:
        """Persist changes of a loaded chat in one transaction: the `changed` messages' rows,
        the header when `header`, added/removed/reordered messages when `structure`, or
        everything when `full`; `also(db)` runs in the same transaction. Returns the number
        of rows written. A save from a copy that another process changed since is refused
        (`StaleChatError`): `pull`, then save again."""

    @abstractmethod
    def pull(
        self, chat: Chat, *, pending: Collection[Message] = (), header_pending: bool = False
    ) -> Pulled:
        """Bring into a copy read from this store what other processes saved since."""

    @abstractmethod
    def revisions(self, chat_ids: Collection[str] | None = None) -> dict[str, int]:
        """The stored chats' revisions (what `pull` compares with a copy's `revs.synced`): of
        `chat_ids`, or of every chat."""

    @abstractmethod
    def data_version(self) -> int:
        """A number that changes whenever another process (another connection) commits."""

    def changed_chats(self) -> set[str] | None:
        """The chats other processes saved since the last call, where the store knows (None:
        it does not; look at every chat whose `data_version` moved)."""
        return None

    @abstractmethod
    def run(self, work: Callable[[Db], Any]) -> Any:
        """Run `work(db)` in one write transaction."""

    @abstractmethod
    def read(self, work: Callable[[Db], Any]) -> Any:
        """Run `work(db)` on one consistent view of the store (no writes)."""

    @abstractmethod
    def after_copy(self) -> None:
        """Move the store's counters (revisions, ids) past rows copied in with theirs."""

    @abstractmethod
    def forget(self, chat_id: str) -> None:
        """Let go of what the store remembers of a chat whose copy in memory is gone."""

    # --- settings ------------------------------------------------------------------------------

    keeps_settings = False
    """Whether the settings live in this store, shared by every machine on it (PostgreSQL),
    rather than in files in `$AUTORECAP_HOME` (SQLite: one machine). See
    `autorecap.profiles.profiles_of`."""

    def read_settings(self, owner: str) -> tuple[str, int] | None:
        """An owner's settings document ("": the installation's) and its revision; None when
        none is saved."""
        raise StoreError("this store keeps no settings: they are in $AUTORECAP_HOME's files")

    def write_settings(self, owner: str, text: str, rev: int | None) -> int:
        """Replace an owner's settings document if it is still at `rev` (None: there is none
        yet); returns the new revision. Else `SettingsConflictError` (`store.migrations`): read
        it again."""
        raise StoreError("this store keeps no settings: they are in $AUTORECAP_HOME's files")

    def settings_owners(self) -> list[str]:
        """Every owner with a saved settings document."""
        return []

    def settings_version(self) -> int:
        """A number that moves whenever any connection saves settings (a cheap look first)."""
        return 0

    def search(self, chat_id: str, query: str, limit: int = 50) -> list[tuple[int, float]]:
        """The chat's messages that best match `query`, best first: (message id, score),
        higher is better. A store without a full-text index finds nothing."""
        return []

    @abstractmethod
    def close(self) -> None:
        """Release the backend's resources."""
