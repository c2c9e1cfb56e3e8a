"""Storage of chats: the `ChatStore` interface, its SQLite backend (the embedded default) and
its PostgreSQL backend (several servers and workers on one database), and `open_store`, which
picks one from `--db`."""

from autorecap.store.base import ChatInfo, ChatStore
from autorecap.store.location import open_store
from autorecap.store.migrations import StoreError
from autorecap.store.sqlite import SQLiteStore

__all__ = ["ChatInfo", "ChatStore", "SQLiteStore", "StoreError", "open_store"]
