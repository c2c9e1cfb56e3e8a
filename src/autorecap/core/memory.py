"""`refresh_memory()` and its stages (seeds 000-003): auto-hide, `chat_enabled()`, inclusion
flags, the running recap through its template, the opt-in short-term and long-term tiers, and
the extension prompt slots.

The seed recomputes everything on every refresh and re-tokenizes a growing concatenation, which
is quadratic in the chat's length. Here the result is the same (SPEC-NOTES §4.2) but:
- token counts are cached per text, and the count of a join is the sum of its parts' counts plus
  one per `\\n` separator, so the budget walk is linear;
- flags are written only where they change (a missing flag reads as None, like a null one);
- a `MemoryState` remembers what the last refresh found, so a refresh after one new message only
  walks the messages whose recaps fit the budget, not the whole chat.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from autorecap.core import combined, running
from autorecap.core.autohide import HideChange, apply_auto_hide, hide_boundary, is_visible_break
from autorecap.core.combined import COMBINED_KEY
from autorecap.core.data import INCLUDED, get_data, get_memory, set_data
from autorecap.core.model import Chat, Message
from autorecap.core.pins import LONG_KEY, long_term_text
from autorecap.core.slots import SCENE_KEY, SHORT_KEY, ExtensionPrompts, Position
from autorecap.core.tokens import TokenCounter
from autorecap.settings import Settings, chat_enabled


def short_token_limit(settings: Settings) -> int:
    """Seed 003's `get_short_token_limit()`: a percent of the context, or an absolute count."""
    if settings.message_recap_context_type == "percent":
        return settings.context_size * settings.message_recap_context_limit // 100
    return settings.message_recap_context_limit


def check_message_exclusion(
    message: Message | None,
    settings: Settings,
    counter: TokenCounter,
    group_id: str | None = None,
) -> bool:
    """Seed 002's `check_message_exclusion()`: True when the message may be recapped and
    included; the eight criteria in the seed's order."""
    if message is None:
        return False
    if get_data(message, "is_auto_recap_system_memory"):
        return False
    if get_data(message, "exclude"):
        return False
    if not settings.include_user_messages and message.get("is_user"):
        return False
    if message.get("is_thoughts"):  # the Stepped Thinking extension's messages
        return False
    if not settings.include_system_messages and message.get("is_system"):
        return False
    if not settings.include_narrator_messages and message.is_narrator:
        return False
    if not character_enabled(message.character_key, settings, group_id):
        return False
    threshold = settings.message_length_threshold
    if threshold > 0:
        text = message.get("mes")
        # SillyTavern's getTokenCount counts strings only: anything else is 0 tokens.
        tokens = counter.count(text) if isinstance(text, str) else 0
        if tokens < threshold:
            return False
    return True


def character_enabled(key: str, settings: Settings, group_id: str | None) -> bool:
    """False for a character disabled in this group chat (`disabled_group_characters`)."""
    if group_id is None:
        return True
    disabled = settings.disabled_group_characters.get(group_id)
    return not disabled or key not in disabled


@dataclass
class MemoryState:
    """What the last refresh of one chat found, so that the next one can be incremental.

    Derived data only: throwing it away (`invalidate`) costs one full refresh, never correctness.
    """

    valid: bool = False
    break_ids: set[int] = field(default_factory=set)
    """`id()` of the messages that are visible scene breaks."""
    breaks: list[int] = field(default_factory=list)
    """Their indexes, in order."""
    hidden_upto: int = -1
    """The auto-hide boundary last applied (-1: nothing hidden by auto-hide)."""
    hide_count: int = -2
    """The `auto_hide_scene_count` it was applied with."""
    message_count: int = 0
    anchor: Message | None = None
    """The message that was last when the state was taken: if it moved, the list changed."""
    included: dict[int, Message] = field(default_factory=dict)
    """Messages whose `include` flag is set, by `id()`."""
    touched: dict[int, Message] = field(default_factory=dict)
    """Messages changed from outside since the last refresh (rechecked next time)."""
    settings_seen: Settings | None = None
    """A copy of the settings the state was computed with (any change means a full refresh)."""
    recapped: list[int] = field(default_factory=list)
    """Indexes of the messages that have a recap, ascending: the only ones the inclusion walk
    needs to visit (a message without a recap is never included)."""
    list_version: int = 0
    """`chat.messages.version` when the state was taken: it grows by one per append."""
    positions: dict[int, int] = field(default_factory=dict)
    """`id()` of every message -> its index (the list only grows while the state is valid)."""
    walk_due: bool = True
    """Whether the inclusion walk must run again. It reads only the recapped messages, so after
    a refresh that saw no recap come or go and no message changed from outside (say, a new
    message without a recap), the last walk's flags and result stand."""
    walked_group: str | None = None
    """The group the last walk checked disabled characters against."""

    def invalidate(self) -> None:
        """Forget everything: the next refresh is a full one."""
        self.valid = False
        self.touched.clear()

    def touch(self, message: Message | None) -> None:
        """A message changed outside refresh_memory(). None (the header, or the message list)
        needs nothing here: the next refresh sees from the list itself whether messages were
        only appended (see `_prepare`), and the header is read afresh every time."""
        if message is not None and self.valid:
            self.touched[id(message)] = message


@dataclass
class RefreshResult:
    """What one `refresh_memory()` did."""

    text: str
    """The scene injection text it registered (the seed's return value)."""
    enabled: bool
    included: list[Message] = field(default_factory=list)
    """Messages in short-term memory, oldest first."""
    hide_changes: list[HideChange] = field(default_factory=list)
    flags_written: int = 0
    full: bool = False
    short_text: str = ""


def refresh_memory(
    chat: Chat,
    settings: Settings,
    slots: ExtensionPrompts,
    counter: TokenCounter,
    *,
    state: MemoryState | None = None,
    group_id: str | None = None,
) -> RefreshResult:
    """Seed 000's `refresh_memory()`, stage by stage. With a `state`, only what can have changed
    since the last refresh is recomputed."""
    state = state if state is not None else MemoryState()
    full = _prepare(chat, settings, state)
    # 1. auto-hide (seed 003)
    hide_changes = _auto_hide(chat, settings, state)
    # 2. chat_enabled(): when disabled, the slot is set to "" and "" is returned (seed 000)
    if not chat_enabled(settings, chat.id):
        slots.set(SCENE_KEY, "", Position.IN_PROMPT, 0)
        for key in (SHORT_KEY, LONG_KEY, COMBINED_KEY):
            if key in slots:
                slots.set(key, "", Position.IN_PROMPT, 0)
        state.touched.clear()
        return RefreshResult("", False, hide_changes=hide_changes, full=full)
    # 3. inclusion flags (seed 002)
    included, written = update_inclusion_flags(chat.messages, settings, counter, state, group_id)
    state.valid = True
    # 4-5. the running recap through its template, registered in its slot
    text = running.injection_text(chat, settings.running_scene_recap_template)
    place_in_slot(slots, SCENE_KEY, text, settings, "running_scene_recap")
    # the short-term tier (SPEC-NOTES §4.4): opt-in
    short_text = ""
    if settings.message_recap_injection_enabled:
        short_text = short_term_text(included, settings.message_recap_template)
    if settings.message_recap_injection_enabled or SHORT_KEY in slots:
        place_in_slot(slots, SHORT_KEY, short_text, settings, "message_recap")
    # the long-term tier (seed 003): the pinned recaps, opt-in
    long_text = ""
    if settings.long_term_enabled:
        long_text, _ = long_term_text(
            chat.messages, settings.long_term_template, settings.long_term_max_tokens, counter
        )
    if settings.long_term_enabled or LONG_KEY in slots:
        place_in_slot(slots, LONG_KEY, long_text, settings, "long_term")
    # the combined recap (seed 003): opt-in
    combined_text = ""
    if settings.combined_recap_enabled:
        combined_text = combined.injection_text(chat, settings.combined_recap_template)
    if settings.combined_recap_enabled or COMBINED_KEY in slots:
        place_in_slot(slots, COMBINED_KEY, combined_text, settings, "combined_recap")
    return RefreshResult(text, True, included, hide_changes, written, full, short_text)


TIERS = ("running_scene_recap", "message_recap", "long_term", "combined_recap", "recall")
"""The tiers whose placement is a setting each: `{tier}_position`, `_depth`, `_scan`, `_role`."""


def place_in_slot(
    slots: ExtensionPrompts, key: str, text: str, settings: Settings, tier: str
) -> None:
    """Register `text` in `key`'s slot where `tier`'s settings put it (an empty text stays in
    its slot and is skipped at assembly)."""
    assert tier in TIERS, tier
    slots.set(
        key,
        text,
        getattr(settings, f"{tier}_position"),
        getattr(settings, f"{tier}_depth"),
        getattr(settings, f"{tier}_scan"),
        getattr(settings, f"{tier}_role"),
    )


def short_term_text(included: Sequence[Message], template: str) -> str:
    """The included message recaps, oldest first, one per line, through the template."""
    memories = "\n".join(get_memory(m) for m in included)
    if not memories:
        return ""
    if not template.strip():
        return memories
    return template.replace("{{memories}}", memories)


def update_inclusion_flags(
    messages: Sequence[Message],
    settings: Settings,
    counter: TokenCounter,
    state: MemoryState | None = None,
    group_id: str | None = None,
) -> tuple[list[Message], int]:
    """Seed 002's `update_message_inclusion_flags()`: newest to oldest, skip excluded messages,
    include recaps while their join fits the short-term limit, and nothing older once one does
    not fit. Returns the included messages (oldest first) and the number of flags written.

    Only the walk up to the first recap that does not fit is needed: everything older is None.
    Messages flagged by earlier refreshes (`state.included`) that the walk did not reach are
    cleared; a full walk (no valid state) visits every message.
    """
    if state is not None and state.valid and not state.walk_due and state.walked_group == group_id:
        state.touched.clear()  # none of them is one the walk visits or clears
        return list(reversed(state.included.values())), 0
    limit = short_token_limit(settings)
    walk_all = state is None or not state.valid
    included: list[Message] = []
    visited: set[int] = set()
    written = 0
    total = 0
    reached = False
    order: Iterable[int] = range(len(messages) - 1, -1, -1)
    if state is not None and state.valid:
        order = reversed(state.recapped)
    for index in order:
        message = messages[index]
        if reached and not walk_all:
            break
        visited.add(id(message))
        wanted: str | None = None
        if not reached and check_message_exclusion(message, settings, counter, group_id):
            memory = get_memory(message)
            if memory:
                cost = counter.count(memory) + (1 if included else 0)
                if total + cost > limit:
                    reached = True
                else:
                    total += cost
                    wanted = INCLUDED
                    included.append(message)
        written += _write_flag(message, wanted)
    if state is not None:
        stale = [m for key, m in state.included.items() if key not in visited]
        stale += [m for key, m in state.touched.items() if key not in visited]
        for message in stale:
            written += _write_flag(message, None)
        state.included = {id(m): m for m in included}  # newest first
        state.touched.clear()
        state.walk_due = False
        state.walked_group = group_id
    included.reverse()
    return included, written


def _write_flag(message: Message, wanted: str | None) -> int:
    if get_data(message, "include") == wanted:
        return 0
    set_data(message, "include", wanted)
    return 1


def _prepare(chat: Chat, settings: Settings, state: MemoryState) -> bool:
    """Decide between a full and an incremental refresh; returns True for a full one."""
    messages = chat.messages
    count = len(messages)
    known = state.message_count
    version = getattr(messages, "version", None)
    if not (
        state.valid
        and settings == state.settings_seen
        and count >= known
        and (known == 0 or messages[known - 1] is state.anchor)
        and (version is None or version - state.list_version == count - known)
    ):
        state.valid = False
    else:
        # Messages changed from outside may have become (or stopped being) scene breaks.
        for message in state.touched.values():
            if is_visible_break(message) != (id(message) in state.break_ids):
                state.valid = False
                break
    if state.valid:
        # Only appended messages are new: check them for scene breaks and recaps.
        for index in range(known, count):
            message = messages[index]
            if is_visible_break(message):
                state.breaks.append(index)
                state.break_ids.add(id(message))
            state.positions[id(message)] = index
            if get_memory(message):
                state.recapped.append(index)
                state.walk_due = True
            if get_data(message, "include") is not None:
                state.touched[id(message)] = message
        for ident, message in state.touched.items():
            index = state.positions.get(ident, -1)
            if index < 0 or index >= count or messages[index] is not message:
                state.valid = False  # not where we thought: recompute everything
                break
            has_recap = bool(get_memory(message))
            if (
                _track_recap(state, index, has_recap)
                or has_recap
                or ident in state.included
                or get_data(message, "include") is not None
            ):
                state.walk_due = True  # else a message the walk never visits, nor clears
    state.list_version = version if version is not None else 0
    if state.valid:
        state.message_count = count
        state.anchor = messages[-1] if messages else None
        return False
    state.breaks = [i for i, m in enumerate(messages) if is_visible_break(m)]
    state.break_ids = {id(messages[i]) for i in state.breaks}
    state.recapped = [i for i, m in enumerate(messages) if get_memory(m)]
    state.positions = {id(m): i for i, m in enumerate(messages)}
    state.hidden_upto = -1
    state.hide_count = -2
    state.message_count = count
    state.anchor = messages[-1] if messages else None
    state.settings_seen = settings.model_copy(deep=True)
    state.walk_due = True
    return True


def _track_recap(state: MemoryState, index: int, has_recap: bool) -> bool:
    """Keep `state.recapped` right for a message whose recap may have come or gone; True
    when it did."""
    at = bisect.bisect_left(state.recapped, index)
    present = at < len(state.recapped) and state.recapped[at] == index
    if has_recap and not present:
        state.recapped.insert(at, index)
    elif present and not has_recap:
        del state.recapped[at]
    else:
        return False
    return True


def _auto_hide(chat: Chat, settings: Settings, state: MemoryState) -> list[HideChange]:
    messages = chat.messages
    covered = running.covered_upto(chat) if settings.auto_hide_only_recapped else None
    boundary = hide_boundary(state.breaks, settings.auto_hide_scene_count, covered)
    if state.hide_count == -2:
        changes = apply_auto_hide(messages, boundary)  # a full pass
    elif boundary == state.hidden_upto:
        changes = []
    else:
        low, high = sorted((boundary, state.hidden_upto))
        changes = apply_auto_hide(messages, boundary, start=low + 1, end=high + 1)
    state.hidden_upto = boundary
    state.hide_count = settings.auto_hide_scene_count
    return changes
