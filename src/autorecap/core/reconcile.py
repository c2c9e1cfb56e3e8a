"""Reconciling a client's message list with a stored chat (for the OpenAI-compatible proxy).

A chat frontend sends the whole history with every request; that list is the truth. This
module compares it with the chat as stored and says what changed, as operations the session
carries out (each firing the seeds' event):

- messages added at the end -> `append` (message_sent / message_received);
- the last reply missing, with a request for a new one -> `regenerate` (the new reply becomes a
  swipe of the stored message: message_swiped);
- a message whose text changed (same role, same place) -> `edit` (message_edited);
- messages missing, wherever they were -> `delete` (message_deleted), newest first so indexes
  stay valid; the messages around them keep their ids (the two lists are aligned, `difflib`).
  Messages added anywhere but at the end cannot be inserted: from the first of them on, the
  stored messages are deleted and the client's appended.

Messages that match keep their ids and recaps. The leading system messages are the main prompt
(not chat history); a message carrying our own injected memory is not chat history either.

A system message inside the history is a narrator message (SillyTavern sends its narrator's
messages with the `system` role) where it can be one: where the stored chat has it after the
same message, or after everything stored (new at the end). Elsewhere it is a prompt the
frontend placed among the messages, which the next request places again at the same distance
from the end: post-history instructions after the newest message, an author's note or
character's note at a depth. Such a prompt is sent on in its place but never stored: stored,
it would move every turn, and the messages after it would be deleted and added again, losing
their recaps and swipes. (A narrator message sent as the very last thing, right before a
generation, is taken for such a prompt.)

A frontend that fits a long chat to its context sends only the newest messages: a history that
begins, not with the stored chat's first messages, but with a run of later ones
(`window_start`) is that window, and the stored messages before it stay as they are.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple


class ClientMessage(NamedTuple):
    """One message as an OpenAI-style client sends it."""

    role: str
    content: str
    name: str = ""
    at: int = -1
    """Its index in the request's `messages` (-1 when it does not come from a request)."""


@dataclass(frozen=True)
class Op:
    """One change to apply to the stored chat."""

    kind: str
    """`append`, `edit` or `delete`."""
    index: int = -1
    """The stored message (edit, delete)."""
    message: ClientMessage | None = None
    """The client's message (append, edit)."""


@dataclass
class Plan:
    """What a request means for the stored chat."""

    system: list[ClientMessage] = field(default_factory=list)
    """The leading system block: the main prompt."""
    history: list[ClientMessage] = field(default_factory=list)
    """The client's chat history (without the system block and our own injections)."""
    ops: list[Op] = field(default_factory=list)
    regenerate: int | None = None
    """Index of the stored reply that the coming answer becomes a new swipe of."""
    carries_injection: bool = False
    """The client's prompt already holds our memory (never inject it twice)."""
    prompts: list[tuple[int, ClientMessage]] = field(default_factory=list)
    """System messages inside the history that are prompts, not chat messages (see the module
    docstring), each with the number of `history` messages before it: sent on in place."""
    offset: int = 0
    """The stored messages before the client's history (a frontend that sends only the newest
    messages): `history[i]` is stored message `offset + i`."""

    @property
    def unchanged(self) -> bool:
        return not self.ops and self.regenerate is None


def _same(role: str, content: str, message: ClientMessage) -> bool:
    return role == message.role and (
        content == message.content or content.strip() == message.content.strip()
    )


def split_request(
    messages: Sequence[ClientMessage], injected: Sequence[str] = ()
) -> tuple[list[ClientMessage], list[ClientMessage], bool]:
    """(system block, history, whether our injection was found). `injected` are the texts we
    inject (non-empty ones are looked for in system messages). A system message that carries
    our memory is kept with the system block (it is sent on) and never taken for history."""
    markers = [text.strip() for text in injected if text and text.strip()]
    system: list[ClientMessage] = []
    history: list[ClientMessage] = []
    carries = False
    in_block = True
    for message in messages:
        ours = message.role == "system" and any(marker in message.content for marker in markers)
        if ours:  # the client already sends our memory: it goes upstream, but is no history
            carries = True
            system.append(message)
            continue
        if in_block and message.role == "system":
            system.append(message)
            continue
        in_block = False
        history.append(message)
    return system, history, carries


def separate_prompts(
    stored: Sequence[tuple[str, str]], history: Sequence[ClientMessage]
) -> tuple[list[ClientMessage], list[tuple[int, ClientMessage]], set[int]]:
    """(the history without the prompts among it, the prompts with their places, the stored
    narrator messages the client no longer sends where they were): see the module docstring.

    A system message's place is the number of chat messages before it. It is a stored
    narrator message when the stored chat has the same text at that place or later (messages
    before it may have been deleted since), or another text at the same place (edited); a
    prompt placed at a depth moves later as the chat grows (so a text stored elsewhere is never
    the edit: a note stored once, at a chat's first request, then moved next to an edited
    narrator message, leaves the edit to the other). A new one is a narrator message
    when it comes after the chat messages the stored chat begins with (nothing stored follows
    it)."""
    narrators: dict[str, list[tuple[int, int]]] = {}  # text -> [(place, stored index)]
    chat_messages: list[tuple[str, str]] = []
    for index, (role, text) in enumerate(stored):
        if role == "system":
            narrators.setdefault(text.strip(), []).append((len(chat_messages), index))
        else:
            chat_messages.append((role, text))
    if not any(m.role == "system" for m in history):
        stale = {index for found in narrators.values() for _, index in found}
        return list(history), [], stale
    said = [m for m in history if m.role != "system"]
    common = 0  # the chat messages the stored chat and the client's begin with alike
    while (
        common < len(said)
        and common < len(chat_messages)
        and _same(*chat_messages[common], said[common])
    ):
        common += 1
    last_said = max((i for i, m in enumerate(history) if m.role != "system"), default=-1)
    places: list[int] = []  # each history message's place (chat messages before it)
    place = 0
    for message in history:
        places.append(place)
        place += message.role != "system"
    matched: set[int] = set()
    narrated: set[int] = set()  # the history positions of stored narrator messages
    for position, message in enumerate(history):  # the same text at its place or later
        if message.role != "system" or position > last_said:
            continue
        stored_at = [
            index
            for at, index in narrators.get(message.content.strip(), [])
            if at >= places[position] and index not in matched
        ]
        if stored_at:
            matched.add(stored_at[0])
            narrated.add(position)
    unmatched = {
        at: index for found in narrators.values() for at, index in found if index not in matched
    }
    kept: list[ClientMessage] = []
    prompts: list[tuple[int, ClientMessage]] = []
    for position, message in enumerate(history):
        if message.role != "system" or position in narrated:
            kept.append(message)
        elif position > last_said:  # after the newest chat message: post-history instructions
            prompts.append((len(kept), message))
        elif places[position] in unmatched and message.content.strip() not in narrators:
            # a stored narrator message, edited (not a text stored elsewhere: that is a prompt
            # at a depth that has moved, and the edit is the other system message here)
            matched.add(unmatched.pop(places[position]))
            kept.append(message)
        elif places[position] >= common:
            kept.append(message)  # a new narrator message: nothing stored follows it
        else:
            prompts.append((len(kept), message))
    stale = {index for found in narrators.values() for _, index in found} - matched
    return kept, prompts, stale


WINDOW_RUN = 3
"""Messages in a row, at least, that a history must share with a later part of the stored chat
to be taken for a window on it (fewer when the history is shorter; never fewer than 2)."""


def plan(
    stored: Sequence[tuple[str, str]],
    messages: Sequence[ClientMessage],
    *,
    injected: Sequence[str] = (),
    generating: bool = True,
) -> Plan:
    """Compare the stored chat (`(role, text)` per message, oldest first) with a client's
    request. `generating`: the request asks for a new reply (a chat completion)."""
    system, history, carries = split_request(messages, injected)
    offset = window_start(stored, history)
    found = _plan(stored[offset:], system, history, carries, generating)
    if not offset:
        return found
    found.offset = offset
    found.ops = [
        op if op.kind == "append" else Op(op.kind, op.index + offset, op.message)
        for op in found.ops
    ]
    if found.regenerate is not None:
        found.regenerate += offset
    return found


def window_start(stored: Sequence[tuple[str, str]], history: Sequence[ClientMessage]) -> int:
    """Where in the stored chat the client's history begins: 0, unless the history does not
    begin as the stored chat does but its first chat messages (`WINDOW_RUN` of them, all but
    the newest) are a run of later stored ones; then the index of that run's first message
    (the latest such run)."""
    said = [m for m in history if m.role != "system"]
    chat = [(index, role, text) for index, (role, text) in enumerate(stored) if role != "system"]
    run = min(WINDOW_RUN, len(said) - 1)
    if run < 2 or len(chat) <= run or _same(chat[0][1], chat[0][2], said[0]):
        return 0
    for start in range(len(chat) - run, 0, -1):
        if all(_same(chat[start + k][1], chat[start + k][2], said[k]) for k in range(run)):
            return chat[start][0]
    return 0


def _plan(
    stored: Sequence[tuple[str, str]],
    system: list[ClientMessage],
    history: list[ClientMessage],
    carries: bool,
    generating: bool,
) -> Plan:
    history, prompts, stale = separate_prompts(stored, history)
    if not stale:
        ops, regenerate = _changes(stored, history, generating)
        return Plan(system, history, ops, regenerate, carries, prompts)
    # Stored narrator messages the client no longer sends (a prompt stored before it was known
    # for one): deleted, and the rest reconciled as if they had never been there.
    kept = [i for i in range(len(stored)) if i not in stale]
    inner, regenerated = _changes([stored[i] for i in kept], history, generating)
    ops = [Op("edit", kept[op.index], op.message) for op in inner if op.kind == "edit"]
    deletes = stale | {kept[op.index] for op in inner if op.kind == "delete"}
    ops += [Op("delete", index=i) for i in sorted(deletes, reverse=True)]
    ops += [op for op in inner if op.kind == "append"]
    regenerate = None
    if regenerated is not None:  # its index once the deletions are made
        original = kept[regenerated]
        regenerate = original - sum(1 for i in deletes if i < original)
    return Plan(system, history, ops, regenerate, carries, prompts)


def _changes(
    stored: Sequence[tuple[str, str]], history: Sequence[ClientMessage], generating: bool
) -> tuple[list[Op], int | None]:
    """The operations that turn `stored` into `history`, and the reply regenerated. After
    the messages both begin with, the rest is aligned (`difflib`): messages missing from the
    client's list are deleted, changed ones edited in place, and the others keep their ids,
    wherever the change was (the last ones edited with more after them: edits, then appends).
    Messages added anywhere but at the end cannot be inserted: from the first of them on, the
    stored messages are deleted and the client's appended."""
    prefix = 0
    while (
        prefix < len(stored)
        and prefix < len(history)
        and _same(stored[prefix][0], stored[prefix][1], history[prefix])
    ):
        prefix += 1
    if prefix == len(stored):
        return [Op("append", message=m) for m in history[prefix:]], None
    if prefix == len(history):
        last = len(stored) - 1
        if generating and prefix == last and stored[last][0] == "assistant":
            return [], last  # the client dropped the last reply to get another one
        return [Op("delete", index=i) for i in range(last, prefix - 1, -1)], None
    ours = [(role, text.strip()) for role, text in stored[prefix:]]
    theirs = [(m.role, m.content.strip()) for m in history[prefix:]]
    edits: list[Op] = []
    deletes: list[int] = []
    appends: list[ClientMessage] = []
    matcher = difflib.SequenceMatcher(None, ours, theirs, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        same_roles = tag == "replace" and [r for r, _ in ours[i1:i2]] == [
            r for r, _ in theirs[j1:j2]
        ]
        if tag == "delete":
            deletes.extend(range(prefix + i1, prefix + i2))
        elif same_roles:
            edits.extend(
                Op("edit", index=prefix + i, message=history[prefix + j])
                for i, j in zip(range(i1, i2), range(j1, j2), strict=True)
            )
        elif i1 == len(ours):  # added at the end
            appends.extend(history[prefix + j1 : prefix + j2])
        elif (
            tag == "replace"
            and i2 == len(ours)
            and [r for r, _ in ours[i1:i2]] == [r for r, _ in theirs[j1 : j1 + i2 - i1]]
        ):  # the last messages edited, and more added after them (an edited reply, then a
            # new message; or a swipe chosen back)
            edits.extend(
                Op("edit", index=prefix + i, message=history[prefix + j1 + i - i1])
                for i in range(i1, i2)
            )
            appends.extend(history[prefix + j1 + i2 - i1 : prefix + j2])
        else:  # added before stored messages: they go, and the client's rest is appended
            deletes.extend(range(prefix + i1, len(stored)))
            edits = [op for op in edits if op.index < prefix + i1]
            appends = list(history[prefix + j1 :])
            break
    ops = [*edits, *(Op("delete", index=i) for i in sorted(set(deletes), reverse=True))]
    return ops + [Op("append", message=m) for m in appends], None
