"""Open chats that save themselves (seed 004's debounced saves, SPEC-NOTES §4.11 and §4.13).

`open_chat(CHAT)` opens a chat file or a stored chat. Writes through autorecap's data API mark
it dirty and (re)start a debounce timer (1000 ms by default); when the timer fires, the changes
are saved where the chat came from: the file is rewritten atomically, or just the changed rows
are written to the store in one transaction. `flush()`, `close()`, leaving a `with` block and
interpreter exit save at once, so a write the caller was told about is never lost to a clean
exit. The CLI and the server also flush on SIGTERM and SIGINT (`install_signal_handlers`).

Edits made to message dicts or to `chat_metadata` directly (not through the data API) are found by
the full save that `close()` and exit do; call `touch(message)` (or `touch()` for the header and
the message list) to have the next debounced save include one.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import threading
import weakref
from collections.abc import Callable
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

from autorecap.core.model import Chat, Message
from autorecap.errors import AutorecapError
from autorecap.stfiles.jsonl import chat_id_for, read_chat, write_chat
from autorecap.store.base import ChatStore

DEFAULT_SAVE_DEBOUNCE_MS = 1000


class OpenChat:
    """A chat that saves itself back where it came from. See the module docstring."""

    def __init__(
        self,
        chat: Chat,
        *,
        store: ChatStore | None = None,
        path: Path | None = None,
        debounce_ms: int = DEFAULT_SAVE_DEBOUNCE_MS,
        backups: int = 0,
    ) -> None:
        if (store is None) == (path is None):
            raise ValueError("an open chat saves either to a store or to a file")
        self.chat = chat
        self.store = store
        self.path = path
        self.debounce_ms = debounce_ms
        self.backups = backups
        self.owns_store = False
        """True when `open_chat` opened the store for this chat (closing the chat closes it)."""
        self.saves = 0
        """How many saves actually wrote something (for tests and benchmarks)."""
        self._lock = threading.RLock()
        self._dirty: dict[int, Message] = {}
        self._header_dirty = False
        self._timer: threading.Timer | None = None
        self._closed = False
        self._saved_version = chat.messages.version
        chat.listeners.append(self._changed)
        _OPEN.add(self)

    # --- the chat ----------------------------------------------------------------------------

    @property
    def id(self) -> str:
        """The chat id."""
        return self.chat.id

    @property
    def messages(self) -> list[Message]:
        """The chat's messages (`chat.messages`)."""
        return self.chat.messages

    @property
    def metadata(self) -> dict[str, Any]:
        """The chat's `chat_metadata`."""
        return self.chat.metadata

    @property
    def dirty(self) -> bool:
        """True when changes wait for the debounced save (or a save is under way)."""
        with self._lock:  # a save in progress holds the lock: wait for it
            return bool(self._dirty) or self._header_dirty or self._timer is not None

    def touch(self, message: Message | None = None) -> None:
        """Mark a message (or, with None, the header and the message list) as changed."""
        self._changed(message)

    # --- saving ------------------------------------------------------------------------------

    def flush(self, *, full: bool = False) -> int:
        """Save pending changes now (with `full`, compare everything against what was saved).
        Returns the number of rows or files written."""
        with self._lock:
            self._cancel_timer()
            if self._closed:
                return 0
            dirty = list(self._dirty.values())
            self._dirty.clear()
            # The header (chat_metadata, with the running recap's versions) can be large: it is
            # written when marked changed (the data API does), and always on a full save.
            header = self._header_dirty or full
            self._header_dirty = False
            version_now = self.chat.messages.version
            structure = version_now != self._saved_version
            if not (dirty or header or structure or full):
                return 0
            try:
                written = self._write(dirty, header=header, structure=structure, full=full)
            except BaseException:
                # Nothing was saved: keep the changes pending for the next try.
                for message in dirty:
                    self._dirty.setdefault(id(message), message)
                self._header_dirty = self._header_dirty or header
                raise
            self._saved_version = version_now
            if written:
                self.saves += 1
            return written

    def close(self) -> None:
        """Save everything (a full save) and stop autosaving. Idempotent."""
        with self._lock:
            if self._closed:
                return
            try:
                # A file is rewritten whole anyway; a stored chat saves what changed (a full
                # save would put back old copies of rows a worker updated meanwhile).
                self.flush(full=self.store is None)
            finally:
                self._closed = True
                if self.owns_store and self.store is not None:
                    self.store.close()
                self._cancel_timer()
                if self._changed in self.chat.listeners:
                    self.chat.listeners.remove(self._changed)
                _OPEN.discard(self)

    def __enter__(self) -> OpenChat:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        where = f"store:{self.chat.id}" if self.store is not None else str(self.path)
        return f"OpenChat({where!r}, messages={len(self.chat.messages)}, dirty={self.dirty})"

    # --- internals ---------------------------------------------------------------------------

    def _write(self, dirty: list[Message], *, header: bool, structure: bool, full: bool) -> int:
        if self.store is not None:
            return self.store.save(
                self.chat, changed=dirty, header=header, structure=structure, full=full
            )
        assert self.path is not None
        write_chat(self.chat, self.path, backups=self.backups)
        return 1

    def _changed(self, message: Message | None) -> None:
        with self._lock:
            if self._closed:
                return
            if message is None:
                self._header_dirty = True
            else:
                self._dirty[id(message)] = message
            self._cancel_timer()
            if self.debounce_ms <= 0:
                self.flush()
                return
            timer = threading.Timer(self.debounce_ms / 1000, self._debounced_flush)
            timer.daemon = True
            self._timer = timer
            timer.start()

    def _debounced_flush(self) -> None:
        with self._lock:
            self._timer = None
            with contextlib.suppress(AutorecapError):
                # A failed background save keeps its changes pending; flush() or close() will
                # raise the error to the caller.
                self.flush()

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


def open_chat(
    target: str | Path,
    *,
    store: ChatStore | None = None,
    debounce_ms: int = DEFAULT_SAVE_DEBOUNCE_MS,
    backups: int = 0,
    lenient: bool = False,
) -> OpenChat:
    """Open a chat file (a path) or a stored chat (its id) so that it saves itself.

    A path that exists is a file; otherwise `target` is looked up as a stored chat id in `store`
    (default: `$AUTORECAP_DB`, else the SQLite store in `$AUTORECAP_HOME`).
    """
    path = Path(target)
    if _looks_like_file(target, path):
        chat = read_chat(path, lenient=lenient)
        return OpenChat(chat, path=path, debounce_ms=debounce_ms, backups=backups)
    from autorecap.store.location import open_store

    backend = store if store is not None else open_store()
    if not backend.has_chat(str(target)):
        raise _not_found(target)
    opened = OpenChat(backend.load_chat(str(target)), store=backend, debounce_ms=debounce_ms)
    opened.owns_store = store is None
    return opened


def load_target(
    target: str | Path, *, store: ChatStore | None = None, lenient: bool = False
) -> tuple[Chat, bool]:
    """Read a chat file or a stored chat without opening it for saving; returns the chat and
    whether it came from a file."""
    path = Path(target)
    if _looks_like_file(target, path):
        return read_chat(path, lenient=lenient), True
    from autorecap.store.location import open_store

    backend = store if store is not None else open_store()
    if not backend.has_chat(str(target)):
        raise _not_found(target)
    return backend.load_chat(str(target)), False


def _not_found(target: str | Path) -> AutorecapError:
    return AutorecapError(
        f"{str(target)!r} is neither a chat file nor a stored chat: check the path, or "
        "store the file first with `autorecap import FILE` (`autorecap chats` lists them)"
    )


def target_chat_id(target: str | Path) -> str:
    """The chat id a target names: a file's name without `.jsonl`, or the stored chat's id."""
    path = Path(target)
    return chat_id_for(path) if _looks_like_file(target, path) else str(target)


def _looks_like_file(target: str | Path, path: Path) -> bool:
    if isinstance(target, Path) or path.exists():
        return True
    text = str(target)
    return text.endswith(".jsonl") or os.sep in text


# --- every open chat: exit and signal flushes --------------------------------------------------

_OPEN: weakref.WeakSet[OpenChat] = weakref.WeakSet()


def flush_all() -> list[str]:
    """Save every open chat now; return the errors met (as text), never raising."""
    problems: list[str] = []
    for open_chat_ in list(_OPEN):
        try:
            open_chat_.flush(full=True)
        except Exception as error:
            problems.append(f"{open_chat_.id}: {error}")
    return problems


atexit.register(flush_all)

_Handler = Callable[[int, FrameType | None], Any] | int | None


def install_signal_handlers(signals: tuple[int, ...] = (signal.SIGTERM, signal.SIGINT)) -> None:
    """Flush every open chat on these signals, then hand the signal to the handler that was
    installed before (uvicorn's, Python's KeyboardInterrupt, or the default action).

    Only for programs that own the process: the CLI and the server call it; the library does
    not (SPEC-NOTES §4.13).
    """
    for signum in signals:
        if signum in _INSTALLED:
            continue
        previous = signal.getsignal(signum)
        signal.signal(signum, _make_handler(signum, previous))
        _INSTALLED.add(signum)


_INSTALLED: set[int] = set()


def _make_handler(signum: int, previous: _Handler) -> Callable[[int, FrameType | None], None]:
    def handler(received: int, frame: FrameType | None) -> None:
        flush_all()
        if callable(previous):
            previous(received, frame)
        elif previous == signal.SIG_IGN:
            return
        else:  # the default action: terminate, as if we had never been here
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)

    return handler
