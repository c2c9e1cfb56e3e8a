"""Chats and messages, shaped the way SillyTavern stores them.

A `Message` *is* the JSON object of one chat line (a `dict` subclass), so every field SillyTavern
or another extension wrote, known or not, stays where it was. Typed properties read the common
fields and coerce the odd types real files contain (`mes` as a number, `extra` as null).

A `Chat` is a header object and a list of messages. It also remembers how its file looked (the
original bytes of every line, line ends, BOM, lines it could not parse) so that
`autorecap.stfiles` can write an unchanged chat back byte for byte. That bookkeeping is private;
code that uses a chat only sees `chat.header`, `chat.metadata` and `chat.messages`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, SupportsIndex

from autorecap.core.dates import day_first, numeric, parse_send_date
from autorecap.core.jsjson import js_number

NARRATOR_TYPE = "narrator"
"""`extra.type` of a narrator message (SillyTavern's `system_message_types.NARRATOR`)."""


class Message(dict[str, Any]):
    """One chat message: the JSON object of its line, with typed views of the usual fields."""

    __slots__ = ("_base", "_chat", "_eol", "_id", "_line", "_raw", "_rev")

    _raw: bytes | None
    _eol: bytes | None
    _chat: Chat | None
    _line: int
    _id: int | None
    _rev: int | None
    """The store revision of this message's row as this copy last read or wrote it (None: not
    known, the row is written whatever it holds)."""
    _base: dict[str, Any] | None
    """The extension data as last saved, kept from its first change since (None: unchanged)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._raw = None
        self._eol = None
        self._chat = None
        self._line = 0
        self._id = None
        self._rev = None
        self._base = None

    @property
    def name(self) -> str:
        """The speaker's name (`""` when missing)."""
        value = self.get("name")
        return value if isinstance(value, str) else _js_string(value)

    @property
    def text(self) -> str:
        """`mes` as text: a number is written out as JavaScript would, null or missing is `""`."""
        value = self.get("mes")
        return value if isinstance(value, str) else _js_string(value)

    @property
    def is_user(self) -> bool:
        """True for the user's (persona's) messages."""
        return bool(self.get("is_user"))

    @property
    def is_system(self) -> bool:
        """True for hidden messages: `is_system` is what SillyTavern's `/hide` sets."""
        return bool(self.get("is_system"))

    is_hidden = is_system

    @property
    def extra(self) -> dict[str, Any] | None:
        """The `extra` object, or None when it is missing, null or not an object."""
        value = self.get("extra")
        return value if isinstance(value, dict) else None

    @property
    def is_narrator(self) -> bool:
        """True for narrator messages (`extra.type == "narrator"`)."""
        extra = self.extra
        return extra is not None and extra.get("type") == NARRATOR_TYPE

    @property
    def character_key(self) -> str:
        """The character a message belongs to: `original_avatar` in group chats, else `name`."""
        avatar = self.get("original_avatar")
        return avatar if isinstance(avatar, str) and avatar else self.name

    @property
    def swipe_id(self) -> int | None:
        """The active swipe's index, or None when the message has no usable `swipe_id`."""
        value = self.get("swipe_id")
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    @property
    def swipes(self) -> list[Any] | None:
        """The swipe texts, or None when the message has no `swipes` list."""
        value = self.get("swipes")
        return value if isinstance(value, list) else None

    @property
    def send_time(self) -> datetime | None:
        """`send_date` as a datetime, whichever form it uses; a date in numbers ("08/05/2023")
        is read the way its chat writes them (`Chat.day_first`)."""
        value = self.get("send_date")
        chat = self._chat
        return parse_send_date(
            value, day_first=numeric(value) and chat is not None and chat.day_first
        )

    @property
    def chat(self) -> Chat | None:
        """The chat this message belongs to, if any."""
        return self._chat

    @property
    def id(self) -> int | None:
        """The message's stable id in the store (None until the message is stored). It never
        changes: not through edits, recaps, or deletions of other messages."""
        return self._id

    @property
    def line(self) -> int:
        """The line it was read from (the header is line 1); 0 for a message made in memory."""
        return self._line

    def __repr__(self) -> str:
        return f"Message({dict.__repr__(self)})"


class MessageList(list[Message]):
    """`chat.messages`: a list that counts its changes of structure (`version`), so that a save
    knows in O(1) whether messages were added, removed or moved."""

    __slots__ = ("adopted", "adopted_count", "grown_only", "reshaped", "version")

    def __init__(self, items: Iterable[Message] = ()) -> None:
        super().__init__(items)
        self.version = 0
        self.reshaped = 0
        """How many changes other than appends it has had: the same count later, and the items
        that were there then are still there, in the same places."""
        self.adopted = -1
        """`version` when every item was last made a message of the chat (`Chat.adopt_all`)."""
        self.adopted_count = 0
        """How many items there were then."""
        self.grown_only = False
        """Only appends since then: the items before `adopted_count` need no second look."""

    def _changed(self) -> None:
        self.version += 1
        self.reshaped += 1
        self.grown_only = False

    def _grown(self) -> None:
        self.version += 1

    def append(self, item: Message) -> None:
        super().append(item)
        self._grown()

    def extend(self, items: Iterable[Message]) -> None:
        super().extend(items)
        self._grown()

    def insert(self, index: SupportsIndex, item: Message) -> None:
        super().insert(index, item)
        self._changed()

    def pop(self, index: SupportsIndex = -1) -> Message:
        item = super().pop(index)
        self._changed()
        return item

    def remove(self, item: Message) -> None:
        super().remove(item)
        self._changed()

    def clear(self) -> None:
        super().clear()
        self._changed()

    def sort(self, *args: Any, **kwargs: Any) -> None:
        super().sort(*args, **kwargs)
        self._changed()

    def reverse(self) -> None:
        super().reverse()
        self._changed()

    def __setitem__(self, index: Any, value: Any) -> None:
        super().__setitem__(index, value)
        self._changed()

    def __delitem__(self, index: Any) -> None:
        super().__delitem__(index)
        self._changed()

    def __iadd__(self, items: Iterable[Message]) -> MessageList:  # type: ignore[override,misc]
        super().__iadd__(items)
        self._grown()
        return self

    def __imul__(self, times: SupportsIndex) -> MessageList:
        super().__imul__(times)
        self._changed()
        return self


@dataclass
class KeptLine:
    """A line of a chat file that is not a message but must be written back as it was.

    Malformed lines (read leniently) and blank lines are kept here, anchored after the message
    that preceded them, so a round trip puts them back in place.
    """

    line: int
    """Line number in the file it was read from (the header is line 1)."""
    raw: bytes
    """The line's bytes, without its line end."""
    reason: str
    """Why it is not a message; `""` for a blank line."""
    after: Message | None = None
    """The message it followed; None when it came right after the header."""
    after_index: int = -1
    """Index of that message in the chat as read (-1: right after the header)."""
    eol: bytes | None = None


@dataclass
class FileLayout:
    """How a chat file looked on disk: what a byte-exact write needs besides the data."""

    bom: bool = False
    default_eol: bytes = b"\n"
    final_eol: bytes = b""
    header_raw: bytes | None = None
    header_eol: bytes | None = None
    header_had_metadata: bool = True
    header_valid: bool = True
    from_file: bool = False
    """Read from a chat file, or imported from one: its running recap belongs to it
    (SPEC-NOTES §4.8), whatever chat id the recap storage names."""
    kept: list[KeptLine] = field(default_factory=list)
    original_messages: list[Message] = field(default_factory=list)


@dataclass
class ChatRevs:
    """Which store revisions an in-memory chat reflects (a store bumps a revision at each save,
    so that a copy can tell what another process changed since: `ChatStore.pull`). None: not
    known (a chat not read from a store), nothing is checked."""

    synced: int | None = None
    """Every change up to this revision is in this copy."""
    header: int | None = None
    """The header's revision."""
    order: int | None = None
    """The message list's revision (messages added, removed or moved)."""
    header_base: str | None = None
    """The header as stored at `header` (JSON): what a three-way merge of the header compares
    with."""


class Chat:
    """A SillyTavern chat: a header and messages.

    - `chat.id` is the chat id: the file name without `.jsonl`, as in SillyTavern.
    - `chat.header` is the header object (line 1); `chat.metadata` its `chat_metadata`.
    - `chat.messages[i]` is message `i` (0-based; the header is not a message).
    """

    def __init__(
        self,
        messages: Iterable[dict[str, Any]] = (),
        *,
        header: dict[str, Any] | None = None,
        chat_id: str = "",
        path: Path | None = None,
    ) -> None:
        self.header: dict[str, Any] = (
            header
            if header is not None
            else {"chat_metadata": {}, "user_name": "unused", "character_name": "unused"}
        )
        self.id = chat_id
        self.path = path
        self._messages = MessageList()
        self.layout = FileLayout()
        self.revs = ChatRevs()
        """The store revisions this copy was read or written at (`autorecap.store`)."""
        self._day_first: tuple[int, bool] | None = None
        """`day_first` and the message list's version it was read at."""
        self.listeners: list[Callable[[Message | None], None]] = []
        """Called after autorecap's data API changes a message of this chat (None: the header
        or the message list): how autosave and the memory caches learn of changes."""
        for message in messages:
            self.append(message)

    @property
    def messages(self) -> MessageList:
        """The messages, in order (a list: append, insert, delete as with any list)."""
        return self._messages

    @messages.setter
    def messages(self, value: Iterable[Message]) -> None:
        replacement = MessageList(value)
        replacement.version = self._messages.version + 1
        self._messages = replacement

    @property
    def day_first(self) -> bool:
        """Whether this chat writes dates in numbers day first ("13/05/2023"; see
        `dates.day_first`). Read again when messages come or go, until a date tells."""
        known = self._day_first
        version = self._messages.version
        if known is not None and (known[0] == version or known[0] < 0):
            return known[1]
        found = day_first(m.get("send_date") for m in self._messages)
        # A date that tells holds for good (version -1); until one does, each change reads again.
        self._day_first = (-1 if found is not None else version, bool(found))
        return bool(found)

    @property
    def metadata(self) -> dict[str, Any]:
        """`chat_metadata`, created empty (and left out of the file while empty) when missing."""
        value = self.header.get("chat_metadata")
        if isinstance(value, dict):
            return value
        if value is None and "chat_metadata" not in self.header:
            created: dict[str, Any] = {}
            self.header["chat_metadata"] = created
            return created
        raise TypeError(f"chat {self.id!r}: chat_metadata is {type(value).__name__}, not an object")

    @property
    def user_name(self) -> str:
        """The header's `user_name` (`"unused"` in files of SillyTavern 1.14 and later)."""
        return str(self.header.get("user_name", ""))

    @property
    def character_name(self) -> str:
        """The header's `character_name` (`"unused"` in files of SillyTavern 1.14 and later)."""
        return str(self.header.get("character_name", ""))

    @property
    def is_group(self) -> bool:
        """True for group chats: stored under `group chats/`, or with `original_avatar` set."""
        if self.path is not None and self.path.parent.name == "group chats":
            return True
        return any("original_avatar" in message for message in self.messages)

    @property
    def kept_lines(self) -> list[KeptLine]:
        """Lines kept verbatim because they are blank or could not be parsed (lenient reads)."""
        return list(self.layout.kept)

    def append(self, message: dict[str, Any]) -> Message:
        """Add a message at the end and return it (as a `Message` owned by this chat)."""
        adopted = self.adopt(message)
        self.messages.append(adopted)
        return adopted

    def adopt(self, message: dict[str, Any]) -> Message:
        """Return `message` as a `Message` that belongs to this chat, without inserting it."""
        adopted = message if isinstance(message, Message) else Message(message)
        adopted._chat = self
        return adopted

    def adopt_all(self) -> None:
        """Turn plain dicts put straight into `chat.messages` into messages of this chat (a
        list unchanged since the last call is not walked again, one only appended to since is
        walked from where it grew)."""
        messages = self._messages
        if messages.adopted == messages.version:
            return
        start = messages.adopted_count if messages.grown_only else 0
        for index in range(start, len(messages)):
            message = messages[index]
            if not isinstance(message, Message) or message._chat is not self:
                messages[index] = self.adopt(message)
        messages.adopted = messages.version
        messages.adopted_count = len(messages)
        messages.grown_only = True

    def __len__(self) -> int:
        return len(self.messages)

    def __repr__(self) -> str:
        return f"Chat(id={self.id!r}, messages={len(self.messages)})"

    def notify_change(self, message: Message | None) -> None:
        """Tell the listeners (autosave, memory caches) that `message` (or, with None, the
        header or the message list) changed."""
        for listener in self.listeners:
            listener(message)


def _js_string(value: Any) -> str:
    """`String(value)` for JSON values, with null and missing as `""`."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return js_number(value)
    return str(value)
