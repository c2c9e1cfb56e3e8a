"""The memory proxy's chat state: which chat a request belongs to, reconciling the client's
messages with the stored chat, building the outgoing request, recording the reply.

Chats are kept in memory, one `Session` each, shared with the in-process recap worker (one
object per chat, one lock), and every change is saved to the store at once.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from autorecap.core.model import Chat, Message
from autorecap.core.prompt import HistoryItem, assemble_chat
from autorecap.core.reconcile import ClientMessage, Plan, plan
from autorecap.core.slots import SCENE_KEY, SHORT_KEY, ExtensionPrompts
from autorecap.errors import AutorecapError
from autorecap.jobs.queue import JobQueue
from autorecap.jobs.runner import enqueue_pipeline
from autorecap.paths import autorecap_home
from autorecap.profiles import SETTINGS_FILE, Profiles
from autorecap.server.access import owner_of
from autorecap.session import Session
from autorecap.store.sqlite import SQLiteStore

HEADER_CHAT = "x-autorecap-chat"


class ProxyError(AutorecapError):
    """A request the proxy cannot make sense of."""

    http_status = 400


def fingerprint(messages: Sequence[ClientMessage]) -> str:
    """A chat id from a request's opening (the system prompt and the first history message),
    which stays the same for the chat's whole life."""
    system = next((m.content for m in messages if m.role == "system"), "")
    first = next((m.content for m in messages if m.role != "system"), "")
    digest = hashlib.sha256(f"{system}\x00{first}".encode("utf-8", "surrogatepass"))
    return f"fp-{digest.hexdigest()[:16]}"


def client_messages(body: dict[str, Any]) -> list[ClientMessage]:
    """The request's messages as text (multi-part contents keep their text parts)."""
    raw = body.get("messages")
    if not isinstance(raw, list) or not raw:
        raise ProxyError("the request has no `messages` list: send an OpenAI chat completion")
    found: list[ClientMessage] = []
    for item in raw:
        if not isinstance(item, dict):
            raise ProxyError("every entry of `messages` must be an object with role and content")
        content = item.get("content")
        if isinstance(content, list):  # [{"type": "text", "text": ...}, {"type": "image_url"}]
            content = "\n".join(
                str(part.get("text", "")) for part in content if isinstance(part, dict)
            )
        found.append(
            ClientMessage(
                str(item.get("role", "user")), str(content or ""), str(item.get("name") or "")
            )
        )
    return found


@dataclass
class Turn:
    """One request in progress: what goes upstream, and how to record the answer."""

    chat_id: str
    messages: list[dict[str, Any]]
    regenerate: int | None
    plan: Plan
    injected: list[str] = field(default_factory=list)
    touched: list[Message] = field(default_factory=list)
    """Messages this turn added or changed: the ones that need (new) recaps."""


class ChatRegistry:
    """The proxy's chats: loaded once, kept in memory, saved on every change."""

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
        self._owner_profiles: dict[str, Profiles] = {"": self.profiles}
        self.context_size = context_size
        self.queue_recaps = queue_recaps
        self.lock = threading.RLock()
        self._waiting = 0
        self._waiting_lock = threading.Lock()
        self._sessions: dict[str, Session] = {}
        self._dirty: dict[str, dict[int, Message]] = {}
        self._header_dirty: dict[str, bool] = {}
        self._saved_version: dict[str, int] = {}

    # --- the chats ---------------------------------------------------------------------------

    def profiles_for(self, owner: str) -> Profiles:
        """An owner's settings file: the installation's own when access control is off, else
        `$AUTORECAP_HOME/users/<owner>/settings.json`, so no key changes another's settings."""
        with self.lock:
            found = self._owner_profiles.get(owner)
            if found is None:
                found = Profiles(autorecap_home() / "users" / owner / SETTINGS_FILE)
                self._owner_profiles[owner] = found
            return found

    def chat(self, chat_id: str) -> Chat:
        """The in-memory chat (shared with the worker)."""
        return self.session(chat_id).chat

    def session(self, chat_id: str) -> Session:
        with self.lock:
            session = self._sessions.get(chat_id)
            if session is not None:
                return session
            if not self.store.has_chat(chat_id):
                self.store.import_chat(Chat(chat_id=chat_id), chat_id=chat_id)
            chat = self.store.load_chat(chat_id)
            dirty: dict[int, Message] = {}
            self._dirty[chat_id] = dirty
            self._header_dirty[chat_id] = True
            self._saved_version[chat_id] = -1

            def remember(message: Message | None) -> None:
                if message is not None:
                    dirty[id(message)] = message
                else:
                    self._header_dirty[chat_id] = True

            chat.listeners.append(remember)
            owner = owner_of(chat_id, self.keys_on)
            session = Session(chat, profiles=self.profiles_for(owner))
            self._sessions[chat_id] = session
            self._save(chat_id)
            return session

    def _save(self, chat_id: str) -> None:
        """Write what changed: the changed messages' rows, the header when it changed, the
        message list when messages were added or removed."""
        session = self._sessions[chat_id]
        dirty = self._dirty[chat_id]
        version = session.chat.messages.version
        structure = version != self._saved_version[chat_id]
        header = self._header_dirty[chat_id]
        if not (dirty or structure or header):
            return
        changed = list(dirty.values())
        dirty.clear()
        self._header_dirty[chat_id] = False
        self.store.save(session.chat, changed=changed, header=header, structure=structure)
        self._saved_version[chat_id] = version

    # --- a turn ------------------------------------------------------------------------------

    def begin(self, chat_id: str, body: dict[str, Any]) -> Turn:
        """Reconcile the request with the chat (firing the seeds' events) and build what goes
        upstream: hidden messages dropped, the memory placed, unless the client carries it."""
        incoming = client_messages(body)
        with self.request_lock():
            session = self.session(chat_id)
            chat = session.chat
            injected = [session.slots.value(SCENE_KEY), session.slots.value(SHORT_KEY)]
            stored = [(_role(m), m.text) for m in chat.messages]
            result = plan(stored, incoming, injected=injected, generating=True)
            last = len(result.ops) - 1
            touched: list[Message] = []
            for number, op in enumerate(result.ops):
                # A long history arriving at once (a new chat): one refresh at the end.
                self._apply(session, op.kind, op.index, op.message, quiet=number < last)
                if op.kind == "append":
                    touched.append(chat.messages[-1])
                elif op.kind == "edit":
                    touched.append(chat.messages[op.index])
            if result.ops:
                session.refresh()
            self._save(chat_id)
            outgoing = self._outgoing(session, result)
            # Recap jobs are queued when the reply is recorded (`finish`), off the reply path.
            return Turn(chat_id, outgoing, result.regenerate, result, injected, touched)

    def _apply(
        self,
        session: Session,
        kind: str,
        index: int,
        message: ClientMessage | None,
        *,
        quiet: bool = False,
    ) -> None:
        if kind == "delete":
            session.delete_message(index)
        elif kind == "edit" and message is not None:
            session.edit_message(index, message.content)
        elif kind == "append" and message is not None:
            if message.role == "user":
                session.send(message.content, name=message.name or None, quiet=quiet)
            elif message.role == "assistant":
                session.receive(message.content, name=message.name or None, quiet=quiet)
            else:  # a system note inside the history: a narrator message
                session.chat.append(
                    {
                        "name": message.name or "System",
                        "is_user": False,
                        "is_system": False,
                        "mes": message.content,
                        "extra": {"type": "narrator"},
                    }
                )
                session.chat.notify_change(session.chat.messages[-1])

    def _outgoing(self, session: Session, result: Plan) -> list[dict[str, Any]]:
        chat = session.chat
        history = [
            HistoryItem(
                message.role,
                message.content,
                message.name,
                hidden=index < len(chat.messages) and chat.messages[index].is_hidden,
                index=index,
            )
            for index, message in enumerate(result.history)
        ]
        system = [{"role": m.role, "content": m.content} for m in result.system]
        # When the client already carries our memory, nothing is injected a second time.
        slots = ExtensionPrompts() if result.carries_injection else session.slots
        built = assemble_chat(
            system, history, slots, session.counter, context_size=self.context_size
        )
        return built.messages

    def finish(self, turn: Turn, reply: str) -> None:
        """Record the answer: a new message, or a new swipe of the regenerated one."""
        with self.request_lock():
            if not reply:
                if self.queue_recaps and turn.plan.ops:
                    session = self.session(turn.chat_id)
                    enqueue_pipeline(self.queue, session.chat, session.settings, turn.touched)
                return
            session = self.session(turn.chat_id)
            if turn.regenerate is not None and turn.regenerate < len(session.chat.messages):
                recorded = session.swipe(turn.regenerate, text=reply)
            else:
                recorded = session.receive(reply)
            session.refresh()
            self._save(turn.chat_id)
            if self.queue_recaps:
                enqueue_pipeline(
                    self.queue, session.chat, session.settings, [*turn.touched, recorded]
                )

    @contextlib.contextmanager
    def request_lock(self) -> Iterator[None]:
        """The chat lock, taken for a request: the worker lets requests go first."""
        with self._waiting_lock:
            self._waiting += 1
        with self.lock:
            with self._waiting_lock:
                self._waiting -= 1
            yield

    def requests_waiting(self) -> bool:
        """True while a request waits for (or holds) the chat lock."""
        return self._waiting > 0

    def sessions(self) -> list[str]:
        with self.lock:
            return sorted(self._sessions)

    # --- for the REST API ----------------------------------------------------------------------

    @contextlib.contextmanager
    def edit(self, chat_id: str) -> Iterator[Session]:
        """The chat's session, with its lock held; whatever changed is saved on the way out.
        `chat_id` is the store's id (`Scope.internal`). An unknown chat is an error, not a new
        chat: only the proxy creates chats on first sight."""
        with self.request_lock():
            if chat_id not in self._sessions and not self.store.has_chat(chat_id):
                raise self.store._unknown(chat_id)
            session = self.session(chat_id)
            try:
                yield session
            finally:
                self._save(chat_id)

    def drop(self, chat_id: str) -> None:
        """Forget the in-memory copy of a chat (after it was deleted or replaced in the store)."""
        with self.lock:
            session = self._sessions.pop(chat_id, None)
            self._dirty.pop(chat_id, None)
            self._header_dirty.pop(chat_id, None)
            self._saved_version.pop(chat_id, None)
        if session is not None:
            session.chat.listeners.clear()


def _role(message: Message) -> str:
    if message.is_user:
        return "user"
    return "system" if message.is_narrator else "assistant"
