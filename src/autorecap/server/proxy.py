"""The memory proxy's chat state: which chat a request belongs to, reconciling the client's
messages with the stored chat, building the outgoing request, recording the reply.

Chats are kept in memory, one `Session` each, shared with the in-process recap worker (one
object per chat, one lock), and every change is saved to the store at once.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from autorecap.core.combined import COMBINED_KEY
from autorecap.core.model import Chat, Message
from autorecap.core.names import learn_names, names_from_request, names_known
from autorecap.core.pins import LONG_KEY
from autorecap.core.recall import RECALL_KEY
from autorecap.core.reconcile import Plan, plan
from autorecap.core.slots import SCENE_KEY, SHORT_KEY
from autorecap.jobs.handlers import enqueue_pipeline
from autorecap.jobs.queue import JobQueue
from autorecap.jobs.runner import Worker
from autorecap.profiles import Profiles, owner_settings_file
from autorecap.recap.backend import RecapBackend
from autorecap.server.access import owner_of
from autorecap.server.carry import carry_out, only_appends, outgoing_messages
from autorecap.server.echo import (
    Echo,
    ProxyError,
    client_messages,
    fingerprint,
    remember,
    repeat_of,
    request_messages,
    stored_pairs,
)
from autorecap.server.freshness import Freshness
from autorecap.server.heap import HeapKeeper
from autorecap.server.outside import Outside
from autorecap.server.traffic import Traffic
from autorecap.server.unsaved import Unsaved
from autorecap.server.wire import dumps, loads, parse_body
from autorecap.session import Session
from autorecap.settings import Settings
from autorecap.store.migrations import StaleChatError
from autorecap.store.sqlite import SQLiteStore

HEADER_CHAT = "x-autorecap-chat"
INJECTED_KEYS = (SCENE_KEY, SHORT_KEY, LONG_KEY, COMBINED_KEY, RECALL_KEY)
"""The slots whose text the proxy puts in, which a client may send back."""
log = logging.getLogger("autorecap.server")
SAVE_TRIES = 4
"""How often a save is tried again after reading in what another process saved first."""
ECHOES = 512
"""How many chats' last requests are kept for the fast path (`server.echo`)."""
__all__ = ["HEADER_CHAT", "ChatRegistry", "ProxyError", "Turn", "client_messages", "fingerprint"]


@dataclass
class Turn:
    """One request in progress: what goes upstream, and how to record the answer."""

    chat_id: str
    body: bytes
    """The request to send upstream."""
    stream: bool
    regenerate: int | None
    plan: Plan
    injected: list[str] = field(default_factory=list)
    touched: list[Message] = field(default_factory=list)
    """Messages this turn added or changed: the ones that need (new) recaps."""
    chat: Chat | None = None
    """The chat object the turn began on (a chat replaced meanwhile is another object)."""
    recorded: Message | None = None
    """The reply, once recorded."""

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The messages that go upstream (parsed from `body`)."""
        return list(loads(self.body)["messages"])

    settling: bool = False
    """`settle_later` was called (once is enough)."""
    refresh_due: bool = False
    """The memory refresh of the turn's events was left for later (`carry.only_appends`):
    the reply's event refreshes it, else `settle` does."""
    after: Message | None = None
    """The stored message the reply follows (the last one when the turn began), or, for a
    regeneration, the message the reply becomes a swipe of: the reply is recorded after the
    client has it, and other requests may have changed the chat meanwhile."""


class ChatRegistry:
    """The proxy's chats: loaded once, kept in memory, one lock per chat.

    A turn changes the in-memory chat on the reply path (`begin`, then `record`) and saves it
    afterwards (`settle`, on the saver thread): the client holds the whole history and sends it
    again with its next request, so nothing it sent can be lost while a save is pending. The
    API changes chats with `edit()`, which saves on the way out.
    """

    def __init__(
        self,
        store: SQLiteStore,
        queue: JobQueue,
        *,
        profiles: Profiles | None = None,
        context_size: int | None = None,
        queue_recaps: bool = True,
        keys_on: bool = False,
    ) -> None:
        self.store = store
        self.queue = queue
        self.profiles = profiles or Profiles()
        self.keys_on = keys_on
        self.context_size = context_size
        self.queue_recaps = queue_recaps
        self._owner_profiles: dict[str, Profiles] = {"": self.profiles}
        self._guard = threading.Lock()  # the dictionaries below, never held for long
        self._locks: dict[str, threading.RLock] = {}
        self._sessions: dict[str, Session] = {}
        self._unsaved: dict[str, Unsaved] = {}
        self._echoes: dict[str, Echo] = {}
        self.freshness = Freshness(self._sessions, self._guard, self.hold, self._save)
        """The worker's memory refreshes (`server.freshness`)."""
        self.outside = Outside(self)
        """What other processes save to the store, read into these chats (`server.outside`)."""
        self.fast = True
        """Recognise a chat's next request from its last one (`server.echo`); off, every
        request is reconciled in full (the tests compare the two)."""
        self.fast_turns = 0
        """Requests reconciled by the fast path."""
        self.refresh_later = True
        """Leave a fast turn's memory refresh for after the request is sent when it cannot
        change what is sent (`carry.only_appends`); off, it is on the reply path (the
        benchmark's baseline)."""
        self.traffic = Traffic()
        # What the server and the worker ask of the traffic (`server.traffic`).
        self.answering = self.traffic.answering
        self.wanting = self.traffic.wanting
        self.wanted = self.traffic.wanted
        self.busy = self.traffic.busy
        self.quiet_for = self.traffic.quiet_for
        self._open_turns = 0
        self._turns_closed = threading.Condition(self._guard)
        self._saver = ThreadPoolExecutor(1, thread_name_prefix="autorecap-saver")
        self.heap: HeapKeeper | None = None
        """The server's garbage collector schedule: told of chats loaded and dropped."""

    # --- the chats ---------------------------------------------------------------------------

    def profiles_for(self, owner: str) -> Profiles:
        """An owner's settings file: the installation's own when access control is off, else
        `$AUTORECAP_HOME/users/<owner>/settings.json`, so no key changes another's settings."""
        with self._guard:
            found = self._owner_profiles.get(owner)
            if found is None:
                found = Profiles(owner_settings_file(owner))
                self._owner_profiles[owner] = found
            return found

    def chat_lock(self, chat_id: str) -> threading.RLock:
        """The lock of one chat: held by a request, an API call or a recap job while it reads
        or changes that chat. Other chats are not held up."""
        with self._guard:
            lock = self._locks.get(chat_id)
            if lock is None:
                lock = self._locks[chat_id] = threading.RLock()
            return lock

    @contextlib.contextmanager
    def hold(self, chat_id: str) -> Iterator[None]:
        """The chat's lock, for the proxy's own work (requests, the API, saves): counted as
        wanted meanwhile, so that a recap job holding it lets go of it (`Worker._pause`).
        The worker takes `chat_lock` itself."""
        with self.wanting(chat_id), self.chat_lock(chat_id):
            yield

    def chat(self, chat_id: str) -> Chat:
        """The in-memory chat (shared with the worker). A chat that is not stored (deleted
        meanwhile) is an `UnknownChatError`, never created again."""
        return self.session(chat_id, create=False).chat

    def settings_of(self, chat: Chat) -> Settings:
        """The settings a chat runs with (its owner's profiles)."""
        return self.session(chat.id, create=False).settings

    def session(self, chat_id: str, *, create: bool = True) -> Session:
        """The chat's session, loaded once; a chat seen for the first time is created (only
        the proxy's requests do that: `create=False` for everyone else)."""
        session = self._sessions.get(chat_id)
        if session is not None:
            return session
        with self.hold(chat_id):
            session = self._sessions.get(chat_id)
            if session is not None:
                return session
            if not self.store.has_chat(chat_id):
                if not create:
                    raise self.store._unknown(chat_id)
                self.store.import_chat(Chat(chat_id=chat_id), chat_id=chat_id)
            chat = self.store.load_chat(chat_id)
            unsaved = Unsaved()
            chat.listeners.append(unsaved.remember)
            owner = owner_of(chat_id, self.keys_on)
            session = Session(chat, profiles=self.profiles_for(owner), indexed_in=self.store)
            with self._guard:
                self._unsaved[chat_id] = unsaved
                self._sessions[chat_id] = session
            self._save(chat_id)
            if self.heap is not None:
                self.heap.loaded(chat_id)
            return session

    def _save(self, chat_id: str) -> None:
        """Write what changed (the chat's lock held): the changed messages' rows, the header
        when it changed, the message list when messages were added or removed."""
        session = self._sessions.get(chat_id)
        if session is None:  # dropped meanwhile
            return
        unsaved = self._unsaved[chat_id]
        version = session.chat.messages.version
        structure = version != unsaved.list_version
        header = unsaved.header
        if not (unsaved.messages or structure or header):
            return
        changed = list(unsaved.messages.values())
        unsaved.messages.clear()
        unsaved.header = False
        for attempt in range(SAVE_TRIES):
            try:
                self.store.save(session.chat, changed=changed, header=header, structure=structure)
                break
            except StaleChatError:
                # Another process (a recap worker, the command line) saved the chat first:
                # read what it changed in, keeping this copy's changes, and save again.
                if attempt == SAVE_TRIES - 1 or not self.outside.pull(chat_id, changed, header):
                    raise
        unsaved.list_version = version

    def _read_in_and_save(self, chat_id: str) -> None:
        """A recap job's save was refused (another process saved the chat first): read the
        changes in, keeping the job's, and save both, before the job runs again."""
        with self.hold(chat_id):
            if self.outside.pull(chat_id):
                self._save(chat_id)

    # --- a turn ------------------------------------------------------------------------------

    def begin(self, chat_id: str, raw: bytes, body: dict[str, Any] | None = None) -> Turn:
        """Reconcile the request (`raw`: its body as sent; `body`: the same, parsed, when the
        caller has it) with the chat, firing the seeds' events, and build what goes upstream:
        hidden messages dropped, the memory placed, unless the client carries it. Nothing is
        saved here (see `settle`)."""
        if body is None and chat_id not in self._echoes:
            body = parse_body(raw)  # a request that cannot be read creates no chat
        if body is not None:
            request_messages(body)
        with self.hold(chat_id):
            session = self.session(chat_id)
            chat = session.chat
            unsaved = self._unsaved[chat_id]
            injected = [session.slots.value(key) for key in INJECTED_KEYS]
            echo = self._echoes.pop(chat_id, None)
            changed = unsaved.take_touched()
            repeat = None
            if self.fast and self.context_size is None:
                repeat = repeat_of(echo, chat, raw, injected, changed)
            made = None
            touched: list[Message] = []
            later = False
            if repeat is not None:
                result = repeat.plan
                # The usual turn (a new message) leaves the memory as it is: its refresh is
                # not on the reply path.
                later = self.refresh_later and only_appends(session, result)
                touched = carry_out(session, result, refresh=not later)
                changed.update(unsaved.take_touched())
                if later and session.settings.recall_enabled:
                    # The refresh waits until after the reply, but the newest message asks now
                    # (a refresh that ran here filled the slot already).
                    session.recall_into_slot()
                made = repeat.outgoing(chat, session.slots, changed)
            if made is not None and repeat is not None:
                content, echo = made
                stream = repeat.stream
                self.fast_turns += 1
            else:  # the full way (also when a repeat did not line up: its plan is carried out)
                if later:
                    session.refresh_if_stale()
                    later = False
                body = body if body is not None else parse_body(raw)
                sent = request_messages(body)
                result = plan(stored_pairs(chat.messages), client_messages(body), injected=injected)
                # A new chat's first request (always this full way): SillyTavern sends no
                # names, its prompt has them. Later requests keep what the chat has, so that
                # the fast way and this one store the same.
                if not chat.messages and not names_known(chat):
                    learn_names(
                        chat,
                        *names_from_request(
                            [m.content for m in result.system],
                            [(m.role, m.content, m.name) for m in result.history],
                        ),
                    )
                touched += carry_out(session, result)  # its refresh fills the recall slot
                outgoing = dict(body)
                outgoing["messages"] = outgoing_messages(session, result, sent, self.context_size)
                content = dumps(outgoing)
                stream = bool(body.get("stream"))
                echo = remember(chat, raw, sent, result) if self.fast else None
            self._keep_echo(chat_id, echo)  # changes are watched from here on
            turn = Turn(
                chat_id, content, stream, result.regenerate, result, injected, touched, chat
            )
            turn.refresh_due = later
            if result.regenerate is not None:
                turn.after = chat.messages[result.regenerate]
            elif chat.messages:
                turn.after = chat.messages[-1]
            with self._guard:
                self._open_turns += 1
            return turn

    def _keep_echo(self, chat_id: str, echo: Echo | None) -> None:
        self._unsaved[chat_id].watch(echo is not None)
        if echo is None:
            return
        self._echoes[chat_id] = echo
        while len(self._echoes) > ECHOES:  # the least recently used goes
            gone = next(iter(self._echoes))
            self._echoes.pop(gone)
            if gone in self._unsaved:
                self._unsaved[gone].watch(False)

    def record(self, turn: Turn, reply: str) -> None:
        """Put the answer into the in-memory chat: a new message, or a new swipe of the
        regenerated one (nothing when the reply did not arrive whole)."""
        if not reply:
            return
        with self.hold(turn.chat_id):
            session = self._sessions.get(turn.chat_id)
            if session is None or session.chat is not turn.chat:
                log.info(
                    "chat %r was deleted or replaced during a request: reply not kept", turn.chat_id
                )
                return
            turn.recorded = self._record(session, turn, reply)
            if turn.recorded is not None:
                session.refresh_if_stale()

    def _record(self, session: Session, turn: Turn, reply: str) -> Message | None:
        """Where the reply goes, now that other requests may have changed the chat since the
        turn began: usually right after the message it follows, the last one."""
        messages = session.chat.messages
        anchor = _position(messages, turn.after) if turn.after is not None else -1
        if turn.regenerate is not None:
            if anchor is None:
                log.info(
                    "chat %r: the regenerated reply is gone, new answer not kept", turn.chat_id
                )
                return None
            return session.swipe(anchor, text=reply)
        if anchor is None or anchor == len(messages) - 1:  # its predecessor gone: at the end
            return session.receive(reply)
        following = messages[anchor + 1]
        if following.is_user or following.is_narrator:
            # The client's next request came first, without this reply: its list is the truth.
            log.info("chat %r moved on without the reply: not kept", turn.chat_id)
            return None
        if following.text.strip() == reply.strip():
            return None  # the client's next request came first and carried it
        return session.swipe(anchor + 1, text=reply)  # another answer for the same place

    def settle(self, turn: Turn) -> None:
        """Save the turn's changes and queue recap jobs for the messages it added or changed."""
        try:
            self._settle(turn)
        finally:
            with self._guard:
                self._open_turns -= 1
                self._turns_closed.notify_all()

    def _settle(self, turn: Turn) -> None:
        with self.hold(turn.chat_id):
            session = self._sessions.get(turn.chat_id)
            if session is None or session.chat is not turn.chat:
                return  # deleted or replaced meanwhile: its successor is saved on its own
            if turn.refresh_due:  # no reply came to refresh the memory
                session.refresh_if_stale()
            self._save(turn.chat_id)
            touched = [*turn.touched, *([turn.recorded] if turn.recorded is not None else [])]
            if not self.queue_recaps or not touched:
                return
            enqueue_pipeline(self.queue, session.chat, session.settings, touched)

    def settle_later(self, turn: Turn) -> None:
        """`settle` on the saver thread, off the reply path; saves stay in order."""
        if turn.settling:
            return
        turn.settling = True
        future = self._saver.submit(self.settle, turn)
        future.add_done_callback(_log_failure)

    def finish(self, turn: Turn, reply: str) -> None:
        """`record` and `settle` at once."""
        self.record(turn, reply)
        self.settle(turn)

    def flush(self, timeout: float = 30.0) -> None:
        """Wait until the turns begun so far are recorded and saved (a turn whose answer is
        still streaming is waited for, up to `timeout`)."""
        with self._guard:
            self._turns_closed.wait_for(lambda: self._open_turns <= 0, timeout)
        self._saver.submit(lambda: None).result(timeout)

    def close(self) -> None:
        """Wait for pending saves."""
        self._saver.shutdown(wait=True)

    def worker(self, backend_for: Callable[[Settings], RecapBackend], **options: Any) -> Worker:
        """A recap worker on these chats: it shares their in-memory copies, their locks and
        their owners' settings, and holds back while requests are being answered."""
        return Worker(
            self.queue,
            backend_for,
            chat_source=self.chat,
            chat_lock=self.chat_lock,
            settings_source=self.settings_of,
            yield_to=self.busy,
            wanted=self.wanted,
            on_chat_released=self.freshness.after_job,
            after_job=self.freshness.catch_up,
            on_idle=self.freshness.refresh_stale,
            on_stale=self._read_in_and_save,
            on_saved=self._saved_by_job,
            **options,
        )

    def _saved_by_job(self, chat: Chat, messages: list[Message], header: bool) -> None:
        """A recap job saved these (the chat's lock held, so they are saved as they are now):
        the next turn's save leaves them out."""
        unsaved = self._unsaved.get(chat.id)
        session = self._sessions.get(chat.id)
        if unsaved is not None and session is not None and session.chat is chat:
            unsaved.saved(messages, header)

    def idle(self) -> bool:
        """True when no request is open: none being answered, none waiting for its upstream."""
        return self._open_turns <= 0 and not self.busy()

    def known(self, chat_id: str) -> bool:
        """True for a chat in memory or in the store."""
        return chat_id in self._sessions or self.store.has_chat(chat_id)

    def memory_text(self, chat_id: str) -> str:
        """The chat's memory as text (its injected slots, refreshed), for prompts that are one
        string: the running recap, then the short-term recaps and what the newest message
        recalls when those tiers are on."""
        with self.hold(chat_id):
            session = self.session(chat_id, create=False)
            session.refresh()
            parts = [session.slots.value(key) for key in INJECTED_KEYS]
            return "\n".join(part for part in parts if part and part.strip())

    def sessions(self) -> list[str]:
        with self._guard:
            return sorted(self._sessions)

    # --- for the REST API ----------------------------------------------------------------------

    @contextlib.contextmanager
    def edit(self, chat_id: str) -> Iterator[Session]:
        """The chat's session, with its lock held; whatever changed is saved on the way out.
        `chat_id` is the store's id (`Scope.internal`). An unknown chat is an error, not a new
        chat: only the proxy creates chats on first sight."""
        with self.hold(chat_id):
            session = self.session(chat_id, create=False)
            try:
                yield session
            finally:
                self._save(chat_id)

    def drop(self, chat_id: str) -> None:
        """Forget the in-memory copy of a chat (after it was deleted or replaced in the store)."""
        with self.hold(chat_id), self._guard:
            session = self._sessions.pop(chat_id, None)
            self._unsaved.pop(chat_id, None)
            self._echoes.pop(chat_id, None)
        if session is not None:
            session.chat.listeners.clear()
            if self.heap is not None:
                self.heap.dropped(chat_id)


def _position(messages: list[Message], wanted: Message | None) -> int | None:
    """The index of the message object `wanted`, searched from the end (where it usually
    is); None when it is no longer there."""
    for index in range(len(messages) - 1, -1, -1):
        if messages[index] is wanted:
            return index
    return None


def _log_failure(future: Future[None]) -> None:
    error = future.exception()
    if error is not None:
        log.error("saving a chat failed: %s", error)
