"""Where the memory is put in: the full path's outgoing messages are the request's own (every
field kept), hidden messages left out, the memory's slots placed among them by SillyTavern's
rules (`core.prompt`). The fast path does the same on the request's bytes
(`proxy.repeats.Repeat.outgoing`)."""

from __future__ import annotations

from typing import Any

from autorecap.core.prompt import HistoryItem, assemble_chat
from autorecap.core.reconcile import Plan
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
            source=sent[message.at] if message.at >= 0 else None,
        )
        for index, message in enumerate(result.history)
    ]
    # The prompts the client placed among the messages go back where they were (the last
    # first, so that the places of the others hold).
    for place, prompt in reversed(result.prompts):
        source = sent[prompt.at] if prompt.at >= 0 else None
        history.insert(place, HistoryItem(prompt.role, prompt.content, source=source))
    system = [
        sent[m.at] if m.at >= 0 else {"role": m.role, "content": m.content} for m in result.system
    ]
    # When the client already carries our memory, nothing is injected a second time.
    slots = ExtensionPrompts() if result.carries_injection else session.slots
    built = assemble_chat(
        system, history, slots, session.counter, context_size=context_size, count=False
    )
    return built.messages
