"""Auto-hide by scene count (seed 003; the exact rule is SPEC-NOTES §4.6).

With N = `auto_hide_scene_count` and the visible scene breaks at b1 < ... < bk: if k >= N >= 1,
every message with index <= b(k-N+1) is hidden; N = 0 hides everything up to and including the
last break; N = -1 turns auto-hide off. Hiding sets `is_system: true` and marks the message
`auto_hidden` in its namespace; a message auto-hide hid is unhidden (and unmarked) as soon as the
rule stops covering it; a message the user hid (no mark) is never touched.

Ours on top (`auto_hide_only_recapped`, on by default): the boundary never passes the last
message of the scenes the current running recap holds (`covered_upto`), so a message is hidden
only once its scene is in the memory that replaces it; while recaps lag or fail, it stays.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from autorecap.core.data import delete_data, get_data, set_data
from autorecap.core.model import Message

MARK = "auto_hidden"


def is_visible_break(message: Message) -> bool:
    """A scene break that counts for auto-hide: marked, and not made invisible."""
    return (
        bool(get_data(message, "scene_break"))
        and get_data(message, "scene_break_visible") is not False
    )


def visible_breaks(messages: Sequence[Message]) -> list[int]:
    """Indexes of the visible scene breaks, in order."""
    return [i for i, m in enumerate(messages) if is_visible_break(m)]


def hide_boundary(breaks: Sequence[int], scene_count: int, covered_upto: int | None = None) -> int:
    """The last index auto-hide hides (-1: none), per SPEC-NOTES §4.6, and never past
    `covered_upto` when it is given (the last message the running recap covers, -1: none)."""
    if scene_count < 0 or not breaks:
        return -1
    if scene_count == 0:
        boundary = breaks[-1]
    elif len(breaks) < scene_count:
        return -1
    else:
        boundary = breaks[len(breaks) - scene_count]
    return boundary if covered_upto is None else min(boundary, covered_upto)


@dataclass(frozen=True)
class HideChange:
    """One contiguous range whose hidden state changed (the seeds' batch /hide and /unhide)."""

    start: int
    end: int
    hidden: bool


def apply_auto_hide(
    messages: Sequence[Message], boundary: int, *, start: int = 0, end: int | None = None
) -> list[HideChange]:
    """Bring messages `start..end-1` in line with `boundary`: hide (and mark) those at or before
    it that are visible, unhide those after it that auto-hide hid. Returns the changed ranges."""
    stop = len(messages) if end is None else min(end, len(messages))
    changes: list[HideChange] = []
    for index in range(max(0, start), stop):
        message = messages[index]
        if index <= boundary:
            if message.is_hidden:
                continue
            # Mark first, then hide: a save in between leaves "marked but visible", which the
            # next pass repairs, never a hide that looks like the user's own.
            set_data(message, MARK, True)
            message["is_system"] = True
            _extend(changes, index, hidden=True)
        elif get_data(message, MARK):
            message["is_system"] = False
            delete_data(message, MARK)
            _extend(changes, index, hidden=False)
    return changes


def _extend(changes: list[HideChange], index: int, *, hidden: bool) -> None:
    last = changes[-1] if changes else None
    if last is not None and last.hidden == hidden and last.end == index - 1:
        changes[-1] = HideChange(last.start, index, hidden)
    else:
        changes.append(HideChange(index, index, hidden))
