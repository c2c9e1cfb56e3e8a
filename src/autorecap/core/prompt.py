"""Prompt assembly: where SillyTavern puts extension prompts (SPEC-NOTES §3).

From a main prompt, the chat history and the slots, build what SillyTavern would send:
- a chat-completion message list: BEFORE_PROMPT slots as their own messages before the main
  prompt block, IN_PROMPT slots right after it, IN_CHAT slots spliced into the history at their
  depth (`openai.js: populationInjectionPrompts`);
- a text-completion string: BEFORE_PROMPT text before the story string, IN_PROMPT text after
  it, IN_CHAT lines spliced into the chat lines (`script.js: doChatInject`).

Depth counts the messages that reach the prompt (hidden ones never do) from the end; at one
depth there is at most one message per role, in chat order assistant, user, system, each the
role's slot values joined with `\\n` in key order (`getExtensionPrompt`); deeper than the
history means the top of the history. Injected text is budgeted first, then the history is
filled newest to oldest within the context size, stopping at the first message that does not
fit; an injection whose depth falls in the dropped part goes to the top of what is kept.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from autorecap.core.model import Message
from autorecap.core.slots import ExtensionPrompts, Position, Role
from autorecap.core.tokens import TokenCounter

T = TypeVar("T")
ROLE_NAMES = {Role.SYSTEM: "system", Role.USER: "user", Role.ASSISTANT: "assistant"}
MESSAGE_OVERHEAD = 3
"""Tokens a chat-completion message costs beyond its content (role and separators)."""


@dataclass(slots=True)
class HistoryItem:
    """One message of the history as the assembler sees it (not frozen: a frozen dataclass is
    several times slower to make, and a long chat makes thousands per prompt)."""

    role: str
    """`user`, `assistant` or `system`."""
    content: str
    name: str = ""
    hidden: bool = False
    index: int = -1
    """Its index in the chat (-1 when it does not come from one)."""
    injected: bool = False
    source: dict[str, Any] | None = None
    """The message as a client sent it: sent on as it is (names, images, tool calls kept)."""


@dataclass
class AssembledPrompt:
    """A built prompt, and what went into it."""

    messages: list[dict[str, str]] = field(default_factory=list)
    text: str = ""
    tokens: int = 0
    injected_tokens: int = 0
    history_tokens: int = 0
    included: list[int] = field(default_factory=list)
    """Chat indexes of the history messages in the prompt."""
    dropped: list[int] = field(default_factory=list)
    """Chat indexes of visible messages left out for lack of room."""
    hidden: list[int] = field(default_factory=list)
    """Chat indexes of hidden messages (never in the prompt)."""
    injected: list[str] = field(default_factory=list)
    """Keys of the slots that were placed."""


def history_from_chat(messages: Sequence[Message], *, group: bool = False) -> list[HistoryItem]:
    """Chat messages as history items, the way SillyTavern's `setOpenAIMessages` sees them:
    the user is `user`, narrators are `system`, characters `assistant` (named in group chats)."""
    items: list[HistoryItem] = []
    for index, message in enumerate(messages):
        if message.is_user:
            role = "user"
        elif message.is_narrator:
            role = "system"
        else:
            role = "assistant"
        content = message.text
        if group and role == "assistant" and message.name:
            content = f"{message.name}: {content}"
        items.append(HistoryItem(role, content, message.name, message.is_hidden, index=index))
    return items


def extension_prompt(
    slots: ExtensionPrompts,
    position: int,
    depth: int | None = None,
    role: int | None = None,
    separator: str = "\n",
    wrap: bool = True,
) -> str:
    """SillyTavern's `getExtensionPrompt`: the non-empty values at a position (and depth and
    role), trimmed, in key order, joined; wrapped in separators when `wrap`."""
    values = [
        slot.value.strip()
        for _, slot in slots.items()
        if slot.position == position
        and slot.value
        and (depth is None or slot.depth == depth)
        and (role is None or slot.role == role)
    ]
    joined = separator.join(values)
    if wrap and joined:
        return f"{separator}{joined}{separator}"
    return joined


def assemble_chat(
    main_prompt: Sequence[dict[str, str]] | str,
    history: Sequence[HistoryItem],
    slots: ExtensionPrompts,
    counter: TokenCounter,
    *,
    context_size: int | None = None,
    reserve: int = 0,
    count: bool = True,
) -> AssembledPrompt:
    """Build a chat-completion message list (see the module docstring). `count=False` skips
    the token totals when there is no `context_size` to fit (the proxy's common case)."""
    if isinstance(main_prompt, str):
        main = [{"role": "system", "content": main_prompt}] if main_prompt else []
    else:
        main = [dict(m) for m in main_prompt]
    result = AssembledPrompt()
    before = _standalone(slots, Position.BEFORE_PROMPT, result)
    after = _standalone(slots, Position.IN_PROMPT, result)
    visible = _visible(history, result)
    in_chat = _in_chat_groups(slots, result)

    def cost(item: dict[str, str]) -> int:
        return counter.count(item["content"]) + MESSAGE_OVERHEAD

    fixed = sum(cost(m) for m in [*before, *main, *after])
    in_chat_cost = sum(cost({"content": text}) for _, group in in_chat for _, text in group)
    kept = _fill(
        visible,
        lambda item: counter.count(item.content) + MESSAGE_OVERHEAD,
        None if context_size is None else context_size - reserve - fixed - in_chat_cost,
        result,
    )
    spliced = _splice(kept, in_chat, _injected_item)
    history_messages = [
        item.source if item.source is not None else {"role": item.role, "content": item.content}
        for item in spliced
    ]
    result.messages = [*before, *main, *after, *history_messages]
    if not count and context_size is None:
        return result
    result.injected_tokens = sum(cost(m) for m in [*before, *after]) + in_chat_cost
    result.history_tokens = sum(counter.count(item.content) + MESSAGE_OVERHEAD for item in kept)
    result.tokens = sum(cost(m) for m in result.messages)
    return result


def assemble_messages(
    main_prompt: Sequence[T],
    history: Sequence[T],
    slots: ExtensionPrompts,
) -> list[T | dict[str, Any]]:
    """`assemble_chat(...).messages` with no context size to fit, on the client's messages as
    opaque items (`history`: the visible ones, oldest first; the proxy passes their indexes in
    the request): the result is those items with the injected messages (dicts) among them.
    The proxy's fast path, made without a `HistoryItem` per message."""
    result = AssembledPrompt()
    before: list[T | dict[str, Any]] = list(_standalone(slots, Position.BEFORE_PROMPT, result))
    after = _standalone(slots, Position.IN_PROMPT, result)
    in_chat = _in_chat_groups(slots, result)
    mixed: list[T | dict[str, Any]] = list(history)
    spliced = _splice(mixed, in_chat, _injected_message) if in_chat else mixed
    return [*before, *main_prompt, *after, *spliced]


def assemble_text(
    story_string: str,
    history: Sequence[HistoryItem],
    slots: ExtensionPrompts,
    counter: TokenCounter,
    *,
    user_name: str = "User",
    char_name: str = "Assistant",
    context_size: int | None = None,
    reserve: int = 0,
) -> AssembledPrompt:
    """Build a text-completion prompt string (see the module docstring).

    Each chat line is `Name: text\\n` (a system line has no name); the prompt ends with
    `char_name:` for the model to continue.
    """
    result = AssembledPrompt()
    before = extension_prompt(slots, Position.BEFORE_PROMPT).lstrip()
    after = extension_prompt(slots, Position.IN_PROMPT)
    for key, slot in slots.items():
        if slot.value.strip() and slot.position in (Position.BEFORE_PROMPT, Position.IN_PROMPT):
            result.injected.append(key)
    visible = _visible(history, result)
    in_chat = _in_chat_groups(slots, result, text_form=True)
    names = {"user": user_name, "assistant": char_name}

    def line(item: HistoryItem) -> str:
        # doChatInject / formatMessageHistoryItem: system (narrator) lines carry no name.
        if item.role == "system":
            return f"{item.content}\n"
        name = item.name if item.name and not item.injected else names.get(item.role, "")
        return f"{name}: {item.content}\n" if name else f"{item.content}\n"

    # renderStoryString: a story string that does not end with a newline gets one.
    story = story_string if not story_string or story_string.endswith("\n") else story_string + "\n"
    head = f"{before}{story}{after}"
    tail = f"{char_name}:"
    fixed = counter.count(head) + counter.count(tail)
    in_chat_lines = [
        line(HistoryItem(role, text, injected=True)) for _, group in in_chat for role, text in group
    ]
    injected_cost = (
        counter.count(before)
        + counter.count(after)
        + sum(counter.count(text) for text in in_chat_lines)
    )
    budget = None
    if context_size is not None:
        budget = context_size - reserve - fixed - sum(counter.count(t) for t in in_chat_lines)
    kept = _fill(visible, lambda item: counter.count(line(item)), budget, result)
    spliced = _splice(kept, in_chat, _injected_item)
    body = "".join(line(item) for item in spliced)
    result.text = f"{head}{body}{tail}"
    result.injected_tokens = injected_cost
    result.history_tokens = sum(counter.count(line(item)) for item in kept)
    result.tokens = counter.count(result.text)
    return result


# --- the steps -------------------------------------------------------------------------------


def _standalone(
    slots: ExtensionPrompts, position: int, result: AssembledPrompt
) -> list[dict[str, str]]:
    messages = []
    for key, slot in slots.items():
        text = slot.value.strip()
        if slot.position == position and text:
            messages.append({"role": ROLE_NAMES.get(Role(slot.role), "system"), "content": text})
            result.injected.append(key)
    return messages


def _visible(history: Sequence[HistoryItem], result: AssembledPrompt) -> list[HistoryItem]:
    visible = []
    for item in history:
        if item.hidden:
            result.hidden.append(item.index)
        else:
            visible.append(item)
    return visible


def _in_chat_groups(
    slots: ExtensionPrompts, result: AssembledPrompt, *, text_form: bool = False
) -> list[tuple[int, list[tuple[str, str]]]]:
    """Per depth (ascending), the injected messages in SillyTavern's push order (system, user,
    assistant): `[(depth, [(role, text), ...]), ...]`. Chat completion trims each joined text
    (`populationInjectionPrompts`), text completion only its start (`doChatInject`). Negative
    depths are never placed (SillyTavern asks for depths 0 and up)."""
    depths = sorted(
        {
            s.depth
            for _, s in slots.items()
            if s.position == Position.IN_CHAT and s.value and s.depth >= 0
        }
    )
    groups = []
    for depth in depths:
        group = []
        for role in (Role.SYSTEM, Role.USER, Role.ASSISTANT):
            joined = extension_prompt(slots, Position.IN_CHAT, depth, role, wrap=False)
            text = joined.lstrip() if text_form else joined.strip()
            if text:
                group.append((ROLE_NAMES[role], text))
        if group:
            groups.append((depth, group))
    for key, slot in slots.items():
        if slot.position == Position.IN_CHAT and slot.value.strip() and slot.depth >= 0:
            result.injected.append(key)
    return groups


def _fill(
    visible: list[HistoryItem],
    cost: Callable[[HistoryItem], int],
    budget: int | None,
    result: AssembledPrompt,
) -> list[HistoryItem]:
    """Newest to oldest while the budget lasts; stop at the first message that does not fit."""
    if budget is None:
        kept = list(visible)
    else:
        kept = []
        spent = 0
        stopped_at = -1
        for position in range(len(visible) - 1, -1, -1):
            item = visible[position]
            price = cost(item)
            if spent + price > budget:
                stopped_at = position
                break
            spent += price
            kept.append(item)
        kept.reverse()
        result.dropped = [item.index for item in visible[: stopped_at + 1]]
    result.included = [item.index for item in kept]
    return kept


def _injected_item(role: str, text: str) -> HistoryItem:
    return HistoryItem(role, text, injected=True)


def _injected_message(role: str, text: str) -> dict[str, Any]:
    return {"role": role, "content": text}


def _splice(
    kept: list[T],
    groups: list[tuple[int, list[tuple[str, str]]]],
    make: Callable[[str, str], T],
) -> list[T]:
    """`populationInjectionPrompts`: splice each depth's messages (`make(role, text)`) into the
    reversed history at `depth + already inserted`, then reverse back. Past the end means the
    top."""
    reversed_items = list(reversed(kept))
    inserted = 0
    for depth, group in groups:
        at = depth + inserted
        items = [make(role, text) for role, text in group]
        reversed_items[at:at] = items
        inserted += len(items)
    reversed_items.reverse()
    return reversed_items
