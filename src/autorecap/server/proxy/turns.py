"""A request's turn on its chat: the client's messages reconciled with the stored chat (the
seeds' events fired), the outgoing request built (`begin`), the reply recorded (`record`, placed
by `proxy.replies`), and the whole turn saved and its recap jobs queued (`settle`).

May import `server.chats`, the rest of `server.proxy` but `routes`, and the services below.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from autorecap.core.data import get_data
from autorecap.core.model import Chat, Message
from autorecap.core.names import learn_names, names_from_request, names_known
from autorecap.core.reconcile import ClientMessage, Plan, plan, split_request, window_start
from autorecap.jobs.handlers import enqueue_pipeline
from autorecap.jobs.queue import JobQueue
from autorecap.server.chats.registry import INJECTED_KEYS, ChatRegistry
from autorecap.server.proxy.changes import carry_out, only_appends
from autorecap.server.proxy.matching import (
    client_messages,
    request_messages,
    steady,
    stored_pairs,
)
from autorecap.server.proxy.outgoing import outgoing_messages
from autorecap.server.proxy.repeats import Echo, remember, repeat_of
from autorecap.server.proxy.replies import place_reply
from autorecap.server.proxy.request_json import dumps, loads, parse_body
from autorecap.session import Session
from autorecap.store.base import ChatStore
from autorecap.store.migrations import StaleChatError

log = logging.getLogger("autorecap.server")
STORED_CANDIDATES = 3
"""The chats saved last that a request with only the newest messages of a chat not open is
compared with (`ProxyChats.continued`)."""
ECHOES = 512
"""How many chats' last requests are kept for the fast path (`proxy.repeats`)."""


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
    new: set[int] = field(default_factory=set)
    """Those of `touched` and the reply (by `id()`) that had no id yet when the turn placed
    them: any job for one was queued after a save that had the turn's text (`_settle`)."""
    raw: bytes = b""
    """The client's request as it came (read again to replay the turn: `_replay`)."""
    reply: str = ""
    """The answer, once whole."""
    replayed: bool = False
    """Done again on the chat as another server saved it (`ProxyChats._replay`)."""

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


class ProxyChats(ChatRegistry):
    """The open chats, with the proxy's turns on them.

    A turn changes the in-memory chat on the reply path (`begin`, then `record`) and saves it
    afterwards (`settle`, on the saver thread): the client holds the whole history and sends it
    again with its next request, so nothing it sent can be lost while a save is pending.
    """

    def __init__(
        self,
        store: ChatStore,
        queue: JobQueue,
        *,
        context_size: int | None = None,
        **options: Any,
    ) -> None:
        super().__init__(store, queue, **options)
        self.context_size = context_size
        self._echoes: dict[str, Echo] = {}
        self.fast = True
        """Recognise a chat's next request from its last one (`proxy.repeats`); off, every
        request is reconciled in full (the tests compare the two)."""
        self.fast_turns = 0
        """Requests reconciled by the fast path."""
        self.refresh_later = True
        """Leave a fast turn's memory refresh for after the request is sent when it cannot
        change what is sent (`changes.only_appends`); off, it is on the reply path (the
        benchmark's baseline)."""
        self._open_turns = 0
        self._turning: dict[str, int] = {}
        """Turns open per chat."""
        self._turns_closed = threading.Condition(self._guard)
        self._saver = ThreadPoolExecutor(1, thread_name_prefix="autorecap-saver")
        self._aliases: dict[str, str] = {}
        """Fingerprints whose chat is stored under its earlier fingerprint (`continued`)."""
        self._openings: dict[str, str] = {}
        """The system block of each open chat's last request (a digest), most recent last:
        where to look for the chat that a request with only its newest messages continues."""
        self.seen_model = ""
        """The model the newest chat request read in full named: what recaps made by the
        upstream ask for, unless `llm_model` names one."""
        self.seen_key = ""
        """The upstream key the newest client sent (access control off, no server key): what
        recaps made by the upstream are sent with. In memory only: never saved or logged."""

    def begin(
        self,
        chat_id: str,
        raw: bytes,
        body: dict[str, Any] | None = None,
        *,
        by_opening: bool = False,
    ) -> Turn:
        """Reconcile the request (`raw`: its body as sent; `body`: the same, parsed, when the
        caller has it) with the chat, firing the seeds' events, and build what goes upstream:
        hidden messages dropped, the memory placed, unless the client carries it. Nothing is
        saved here (see `settle`).

        `by_opening`: the chat was named by its opening (`matching.fingerprint`), which
        another chat may share (SillyTavern's "Start new chat" with the same character, a
        branch): a request that parts from it early (`_parts_early`) is a turn of another
        chat of the same opening (`_sibling`), never a reason to delete this one's messages."""
        if body is None and chat_id not in self._echoes:
            body = parse_body(raw)  # a request that cannot be read creates no chat
        if body is not None:
            request_messages(body)
            model = body.get("model")
            if isinstance(model, str) and model:
                self.seen_model = model
        with self.hold(chat_id):
            session = self._in_step(chat_id)
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
                # The server's refreshes do not search (`ChatRegistry.session`): what this
                # turn's newest message recalls is searched here, once.
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
                if by_opening and _parts_early(result, len(chat.messages)):
                    sibling = self._sibling(chat_id, body, injected)
                    if sibling != chat_id:
                        return self.begin(sibling, raw, body)
                with self._guard:
                    self._openings.pop(chat_id, None)
                    self._openings[chat_id] = _opening(result.system)
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
                touched += carry_out(session, result)
                session.recall_into_slot()  # once, for this turn's newest message
                outgoing = dict(body)
                outgoing["messages"] = outgoing_messages(session, result, sent, self.context_size)
                content = dumps(outgoing)
                stream = bool(body.get("stream"))
                echo = remember(chat, raw, sent, result) if self.fast else None
            self._keep_echo(chat_id, echo)  # changes are watched from here on
            turn = Turn(
                chat_id, content, stream, result.regenerate, result, injected, touched, chat
            )
            turn.raw = raw
            turn.new = _new(touched)
            turn.refresh_due = later
            if result.regenerate is not None:
                turn.after = chat.messages[result.regenerate]
            elif chat.messages:
                turn.after = chat.messages[-1]
            with self._guard:
                self._open_turns += 1
                self._turning[chat_id] = self._turning.get(chat_id, 0) + 1
            return turn

    @property
    def begin_reads_store(self) -> bool:
        """Whether `begin` asks the database for other servers' saves (`_in_step`): then it
        runs off the event loop."""
        return self.store.dialect != "sqlite"

    def _in_step(self, chat_id: str) -> Session:
        """The chat's session, with what other servers saved read in first where several
        share the store (PostgreSQL): a client whose requests are spread over servers comes
        back to this one with a history that another one recorded. On SQLite other processes'
        saves are read in by `Outside.watch`."""
        if self.begin_reads_store and chat_id in self._sessions:
            # A reshaped chat is dropped (read again below); recaps read in are refreshed
            # into the memory off the reply path, as the worker's are.
            self.outside.pull(chat_id, refresh=False)
        return self.session(chat_id)

    def _replay(self, turn: Turn) -> Session | None:
        """Do a turn again on the chat as stored (read again): its request reconciled, its
        reply recorded. Its save was refused because another server added or removed
        messages first (the same client's request answered there too, or the one before it
        saved late); the client's list is the truth, as in `begin`. None when the chat was not
        read again for that reason (deleted, or replaced through the API: the turn's
        conversation is not this one)."""
        chat_id = turn.chat_id
        if turn.chat is None or not self.reshaped_elsewhere(chat_id, turn.chat):
            return None
        self._echoes.pop(chat_id, None)
        session = self.session(chat_id)
        chat = session.chat
        turn.replayed = True
        result = plan(
            stored_pairs(chat.messages),
            client_messages(parse_body(turn.raw)),
            injected=turn.injected,
        )
        later = (
            result.regenerate is None
            and bool(result.ops)
            and all(op.kind == "delete" for op in result.ops)
        )
        if later:
            # The request is a beginning of the stored chat: another server saved a later
            # request of the same client first (its list holds this turn and its reply).
            # Nothing of it is missing.
            turn.touched, turn.new, turn.chat, turn.recorded = [], set(), chat, None
            return session
        turn.touched = carry_out(session, result)
        turn.new = _new(turn.touched)
        same = result.regenerate is not None and chat.messages[result.regenerate].text == turn.reply
        if same:
            # Another server answered this very request with the same reply.
            turn.chat, turn.recorded = chat, None
            return session
        turn.chat, turn.regenerate, turn.recorded = chat, result.regenerate, None
        if turn.reply:
            after = chat.messages[result.regenerate] if result.regenerate is not None else None
            if after is None and chat.messages:
                after = chat.messages[-1]
            turn.recorded = place_reply(
                session, turn.reply, after=after, regenerate=result.regenerate
            )
            turn.new |= _new([turn.recorded])
        log.info("chat %r was changed by another server during a turn: the turn is redone", chat_id)
        return session

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
        turn.reply = reply
        with self.hold(turn.chat_id):
            session = self._sessions.get(turn.chat_id)
            if session is None or session.chat is not turn.chat:
                return  # read again (or deleted) meanwhile: `settle` does the turn again
            turn.recorded = place_reply(
                session, reply, after=turn.after, regenerate=turn.regenerate
            )
            turn.new |= _new([turn.recorded])
            if turn.recorded is not None:
                session.refresh_if_stale()

    def settle(self, turn: Turn) -> None:
        """Save the turn's changes and queue recap jobs for the messages it added or changed."""
        try:
            self._settle(turn)
        finally:
            with self._guard:
                self._open_turns -= 1
                left = self._turning.pop(turn.chat_id, 1) - 1
                if left:
                    self._turning[turn.chat_id] = left
                self._turns_closed.notify_all()

    def _settle(self, turn: Turn) -> None:
        with self.hold(turn.chat_id):
            session = self._sessions.get(turn.chat_id)
            if session is None or session.chat is not turn.chat:
                # Read again meanwhile: another server changed its messages (the turn is done
                # again on it), or it was deleted or replaced (the reply is not kept).
                replayed = self._replay(turn)
                if replayed is None:
                    log.info(
                        "chat %r was deleted or replaced during a request: reply not kept",
                        turn.chat_id,
                    )
                    return
                session = replayed
            if turn.refresh_due:  # no reply came to refresh the memory
                session.refresh_if_stale()
            try:
                self._save(turn.chat_id)
            except StaleChatError:
                if self._sessions.get(turn.chat_id) is session:
                    raise  # still refused after reading the changes in
                # Another server added or removed messages first (the chat was dropped to be
                # read again): the turn is done again on the stored chat, and saved.
                replayed = self._replay(turn)
                if replayed is None:
                    return
                session = replayed
                self._save(turn.chat_id)
            touched = [*turn.touched, *([turn.recorded] if turn.recorded is not None else [])]
            if not self.queue_recaps or not (touched or turn.replayed):
                return
            doubtful = turn.new
            if turn.replayed:
                # Done again: the stored chat's messages with no recap too. They may have been
                # saved by another server's save that queued nothing for them.
                own = {id(m) for m in touched}
                bare = [
                    m
                    for m in session.chat.messages
                    if m.id is not None and id(m) not in own and get_data(m, "memory") is None
                ]
                touched += bare
                doubtful = doubtful | {id(m) for m in bare}
            # A job for one of these that finished after the chat was read shows no recap in
            # this copy yet; one for a message this turn added may have been queued by another
            # server, redoing its own turn on the stored chat, since the message was saved (by
            # this save, or by an earlier one here that queued nothing for it: a turn settled
            # before this one, a refresh). Such a job saw the text: none is queued again.
            once = {m.id for m in touched if id(m) in doubtful and m.id is not None}
            enqueue_pipeline(self.queue, session.chat, session.settings, touched, once=once)

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

    def in_use(self, chat_id: str) -> bool:
        """A chat with a turn open (its reply on its way) is never let go."""
        return chat_id in self._turning

    def idle(self) -> bool:
        """True when no request is open: none being answered, none waiting for its upstream."""
        return self._open_turns <= 0 and not self.busy()

    def drop(self, chat_id: str) -> None:
        with self.hold(chat_id), self._guard:
            self._echoes.pop(chat_id, None)
            self._openings.pop(chat_id, None)
        super().drop(chat_id)

    def _sibling(self, chat_id: str, body: dict[str, Any], injected: list[str]) -> str:
        """The chat of the same opening as `chat_id` (`chat_id~2`, `~3`, ...) that the request
        continues, or the next free one of them: a new chat."""
        for number in range(2, SIBLINGS + 1):
            sibling = f"{chat_id}~{number}"
            if not self.known(sibling):
                return sibling
            with self.hold(sibling):
                stored = stored_pairs(self.session(sibling).chat.messages)
            found = plan(stored, client_messages(body), injected=injected)
            if not _parts_early(found, len(stored)):
                return sibling
        return f"{chat_id}~{SIBLINGS}"

    def is_open(self, chat_id: str) -> bool:
        """Whether the chat is in memory (no store read)."""
        return chat_id in self._sessions

    def alias_of(self, chat_id: str) -> str:
        """The id a chat found by `continued` under another id is stored under."""
        return self._aliases.get(chat_id, chat_id)

    def continued(
        self, chat_id: str, earlier: str, body: dict[str, Any], mine: Callable[[str], bool]
    ) -> str | None:
        """For a request whose chat is named by its opening (`matching.fingerprint`): the chat
        it continues when `chat_id` is not known yet, or None for a new chat.

        - `earlier`, the id the same opening had before fingerprints left out the speaker
          asked for (`matching.steady`), when a chat has it;
        - else, since a frontend that fits a long chat to its context sends only the newest
          messages (its opening changes every turn), the open chat (one that `mine` accepts)
          with the same system prompt whose newest messages the request holds
          (`reconcile.window_start`), else such a chat among the `STORED_CANDIDATES` saved
          last.

        Reads the store and waits for chats' locks: not for the event loop."""
        if self.known(chat_id):
            return None
        if earlier != chat_id and self.known(earlier):
            with self._guard:
                if len(self._aliases) > 10_000:
                    self._aliases.clear()
                self._aliases[chat_id] = earlier
            return earlier
        system, history, _ = split_request(client_messages(body))
        opening = _opening(system)
        with self._guard:
            for gone in [c for c in self._openings if c not in self._sessions]:
                del self._openings[gone]  # let go of meanwhile: looked for again once loaded
            candidates = [c for c, o in reversed(self._openings.items()) if o == opening]
        for candidate in candidates:
            if not mine(candidate):
                continue
            with self.hold(candidate):
                session = self._sessions.get(candidate)
                if session and window_start(stored_pairs(session.chat.messages), history):
                    return candidate
        if sum(1 for m in history if m.role != "system") < 3:
            return None  # too short to be a window (`window_start`): a new chat
        # Not open (the server restarted since, or let it go): the chats saved last.
        stored = sorted(
            (
                info
                for info in self.store.list_chats()
                if info.id not in self._sessions and info.messages > 1 and mine(info.id)
            ),
            key=lambda info: -info.updated_at,
        )
        for info in stored[:STORED_CANDIDATES]:
            chat = self.store.load_chat(info.id)
            if window_start(stored_pairs(chat.messages), history):
                return info.id
        return None


PARTING = 4
"""Stored messages, at least, that a request must leave out after the point where it parts
from a chat named by its opening for it to be another chat (and more than half the chat)."""
SIBLINGS = 20
"""Chats of one opening kept apart, at most."""


def _parts_early(result: Plan, stored: int) -> bool:
    """Whether a plan deletes at least `PARTING` stored messages after the point where the
    request parts from the chat, in the first half of the chat, and brings messages of its
    own: another conversation from the same opening, not a few messages taken back."""
    touched = [op.index for op in result.ops if op.kind in ("delete", "edit")]
    if not touched or not any(op.kind == "append" for op in result.ops) or result.offset:
        return False
    parted = min(touched)
    return stored - parted >= PARTING and parted < stored / 2


def _new(messages: Iterable[Message | None]) -> set[int]:
    """The `id()`s of those of `messages` that were never saved (no id yet)."""
    return {id(m) for m in messages if m is not None and m.id is None}


def _opening(system: list[ClientMessage]) -> str:
    """A digest of a request's system block."""
    text = "\x00".join(steady(m.content) for m in system)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _log_failure(future: Future[None]) -> None:
    error = future.exception()
    if error is not None:
        log.error("saving a chat failed: %s", error)
