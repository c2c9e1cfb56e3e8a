"""autorecap: long-chat memory for LLM roleplay, on SillyTavern chat files.

The public API is what `__all__` lists; everything else is internal.
"""

from autorecap.autosave import OpenChat, open_chat
from autorecap.core.data import (
    INCLUDED,
    NAMESPACE,
    clear_memory,
    edit_memory,
    get_data,
    get_memory,
    get_previous_swipe_memory,
    has_data,
    select_swipe,
    set_data,
    update_data,
)
from autorecap.core.events import Event, ManualClock
from autorecap.core.memory import RefreshResult, refresh_memory
from autorecap.core.model import Chat, Message
from autorecap.core.slots import ExtensionPrompts, Position, Role
from autorecap.core.tokens import TOKENIZERS, TokenCounter, count_tokens
from autorecap.errors import (
    AutorecapError,
    ChatFileError,
    LineProblem,
    MessageDataError,
    TokenizerError,
)
from autorecap.paths import autorecap_home
from autorecap.profiles import Profiles
from autorecap.sample import sample_chat_path
from autorecap.session import Session, SessionError
from autorecap.settings import Settings, SettingsError, chat_enabled
from autorecap.stfiles.check import CheckReport, check_chat_file
from autorecap.stfiles.jsonl import read_chat, write_chat
from autorecap.store import ChatStore, SQLiteStore, StoreError, open_store

__version__ = "0.1.0"

__all__ = [
    "INCLUDED",
    "NAMESPACE",
    "TOKENIZERS",
    "AutorecapError",
    "Chat",
    "ChatFileError",
    "ChatStore",
    "CheckReport",
    "Event",
    "ExtensionPrompts",
    "LineProblem",
    "ManualClock",
    "Message",
    "MessageDataError",
    "OpenChat",
    "Position",
    "Profiles",
    "RefreshResult",
    "Role",
    "SQLiteStore",
    "Session",
    "SessionError",
    "Settings",
    "SettingsError",
    "StoreError",
    "TokenCounter",
    "TokenizerError",
    "__version__",
    "autorecap_home",
    "chat_enabled",
    "check_chat_file",
    "clear_memory",
    "count_tokens",
    "edit_memory",
    "get_data",
    "get_memory",
    "get_previous_swipe_memory",
    "has_data",
    "open_chat",
    "open_store",
    "read_chat",
    "refresh_memory",
    "sample_chat_path",
    "select_swipe",
    "set_data",
    "update_data",
    "write_chat",
]
