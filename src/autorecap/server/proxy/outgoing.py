"""Where the memory is put in: the full path's outgoing messages are the request's own (every
field kept), hidden messages left out, the memory's slots placed among them by SillyTavern's
rules (`core.prompt`). The fast path does the same on the request's bytes
(`proxy.repeats.Repeat.outgoing`)."""

from __future__ import annotations

from typing import Any

from autorecap.core.prompt import HistoryItem, assemble_chat
from autorecap.core.reconcile import ClientMessage, Plan
from autorecap.core.slots import ExtensionPrompts
from autorecap.session import Session


def outgoing_messages(
    session: Session, result: Plan, sent: list[dict[str, Any]], context_size: int | None
) -> list[dict[str, Any]]:
    """The request's own messages (all their fields kept), hidden ones left out, with the
    memory placed among them."""
    hidden = {i for i, m in enumerate(session.chat.messages) if m.get("is_system")}
    history = [
        HistoryItem(
            message.role,
            message.content,
            message.name,
            index in hidden,
            index,
            source=_as_sent(message, sent),
        )
        # a frontend that sent only the newest messages: history[i] is stored message offset + i
        for index, message in enumerate(result.history, start=result.offset)
    ]
    system = [
        sent[m.at] if m.at >= 0 else {"role": m.role, "content": m.content} for m in result.system
    ]
    # When the client already carries our memory, nothing is injected a second time.
    slots = ExtensionPrompts() if result.carries_injection else session.slots
    built = assemble_chat(
        system, history, slots, session.counter, context_size=context_size, count=False
    )
    if not result.prompts:
        return built.messages
    return _with_prompts(built.messages, history, result.prompts, sent)


def _as_sent(message: ClientMessage, sent: list[dict[str, Any]]) -> dict[str, Any]:
    return (
        sent[message.at] if message.at >= 0 else {"role": message.role, "content": message.content}
    )


def _with_prompts(
    messages: list[dict[str, Any]],
    history: list[HistoryItem],
    prompts: list[tuple[int, ClientMessage]],
    sent: list[dict[str, Any]],
) -> list[dict[str, Any]]:
    """The prompts the client placed among its messages put back where they were: each just
    before the message it preceded (or at the end), once the memory is in, so that a depth
    counts chat messages as SillyTavern counts them."""
    out = list(messages)
    where = {id(message): at for at, message in enumerate(out)}
    for place, prompt in reversed(prompts):  # the last first: the places before it hold
        following = (where.get(id(item.source)) for item in history[place:])
        at = next((found for found in following if found is not None), len(out))
        out.insert(at, _as_sent(prompt, sent))
    return out
