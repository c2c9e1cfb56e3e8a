"""Carrying out a reconciled request on a chat's session: each change (a message added, edited,
deleted, swiped) fires the seeds' event, and the memory is refreshed once at the end."""

from __future__ import annotations

from autorecap.core.model import Message
from autorecap.core.reconcile import ClientMessage, Plan
from autorecap.session import Session


def carry_out(session: Session, result: Plan, *, refresh: bool = True) -> list[Message]:
    """Apply a plan's operations (each fires its event), refresh once at the end; the
    messages added or edited. `refresh=False`: the events fire without their refresh (the
    caller refreshes later: `only_appends`)."""
    chat = session.chat
    last = len(result.ops) - 1 if refresh else len(result.ops)
    newest = max((n for n, op in enumerate(result.ops) if op.kind == "append"), default=-1)
    touched: list[Message] = []
    for number, op in enumerate(result.ops):
        # A long history arriving at once (a new chat): one refresh at the end. Only the
        # newest message was written now; when the ones before it were, nobody said.
        dated = newest < 0 or number == newest
        apply_op(session, op.kind, op.index, op.message, quiet=number < last, dated=dated)
        if op.kind == "append":
            touched.append(chat.messages[-1])
        elif op.kind == "edit":
            touched.append(chat.messages[op.index])
    if result.ops and refresh:
        session.refresh_if_stale()  # the last operation's handler may have refreshed
    return touched


def only_appends(session: Session, result: Plan) -> bool:
    """True when carrying out `result` cannot change the chat's memory: it only appends new
    messages (which carry no recap, scene break or flag, and are never hidden), and the memory
    is up to date (nothing changed since its last refresh). Their refresh then finds what is
    in place already, and may come after the request has gone upstream."""
    return (
        result.regenerate is None
        and bool(result.ops)
        and all(op.kind == "append" for op in result.ops)
        and not session.stale
    )


def apply_op(
    session: Session,
    kind: str,
    index: int,
    message: ClientMessage | None,
    *,
    quiet: bool = False,
    dated: bool = True,
) -> None:
    """One reconciliation operation on the session (the seeds' event of each). `dated`: an
    added message is stamped with the moment it arrived (else it has no `send_date`)."""
    if kind == "delete":
        session.delete_message(index)
    elif kind == "edit" and message is not None:
        swipes = session.chat.messages[index].get("swipes")
        chosen = _swipe_with(swipes, message.content)
        if chosen is not None:  # the user swiped back to an earlier reply: the others stay
            session.swipe(index, to=chosen)
        else:
            session.edit_message(index, message.content)
    elif kind == "append" and message is not None:
        if message.role == "user":
            session.send(message.content, name=message.name or None, quiet=quiet, dated=dated)
        elif message.role == "assistant":
            session.receive(message.content, name=message.name or None, quiet=quiet, dated=dated)
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


def _swipe_with(swipes: object, text: str) -> int | None:
    """The index of the swipe whose text is `text` (as the client sends it), if any."""
    if not isinstance(swipes, list):
        return None
    wanted = text.strip()
    for number, swipe in enumerate(swipes):
        if isinstance(swipe, str) and swipe.strip() == wanted:
            return number
    return None
