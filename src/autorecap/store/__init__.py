"""Storage of chats: the `ChatStore` interface and its SQLite backend."""

from autorecap.store.base import ChatInfo, ChatStore
from autorecap.store.migrations import StoreError
from autorecap.store.sqlite import SQLiteStore

__all__ = ["ChatInfo", "ChatStore", "SQLiteStore", "StoreError"]
