"""Extension prompt slots: SillyTavern's `setExtensionPrompt` registry (SPEC-NOTES §3).

One slot per key; setting a key again replaces it; switching chats clears them all. An empty
value is kept in its slot and skipped when the prompt is assembled.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from enum import IntEnum


class Position(IntEnum):
    """SillyTavern's `extension_prompt_types` (SPEC-NOTES §1: the seeds' numbers are wrong)."""

    NONE = -1
    IN_PROMPT = 0
    IN_CHAT = 1
    BEFORE_PROMPT = 2


class Role(IntEnum):
    """SillyTavern's `extension_prompt_roles`."""

    SYSTEM = 0
    USER = 1
    ASSISTANT = 2


SCENE_KEY = "auto_recap_memory_scene"
"""The running scene recap's slot: `${MODULE_NAME}_scene`."""
SHORT_KEY = "auto_recap_memory_short"
"""The short-term message recaps' slot (SPEC-NOTES §4.4)."""


@dataclass(frozen=True)
class Slot:
    """One extension prompt: its text and where it goes."""

    value: str
    position: int
    depth: int
    scan: bool
    role: int


class ExtensionPrompts:
    """The slots of one chat, by key."""

    def __init__(self) -> None:
        self._slots: dict[str, Slot] = {}

    def set(
        self,
        key: str,
        value: str,
        position: int,
        depth: int,
        scan: bool = False,
        role: int = Role.SYSTEM,
    ) -> None:
        """`setExtensionPrompt(key, value, position, depth, scan, role)`: replace the slot."""
        self._slots[key] = Slot(str(value), int(position), int(depth), bool(scan), int(role))

    def get(self, key: str) -> Slot | None:
        """The slot for `key`, if set."""
        return self._slots.get(key)

    def value(self, key: str) -> str:
        """The text of `key`'s slot (`""` when unset)."""
        slot = self._slots.get(key)
        return slot.value if slot is not None else ""

    def clear(self) -> None:
        """Forget every slot (SillyTavern does this when the chat changes)."""
        self._slots.clear()

    def items(self) -> Iterator[tuple[str, Slot]]:
        """Every slot in key order (code-point sort, as assembly joins them)."""
        return iter(sorted(self._slots.items()))

    def __contains__(self, key: object) -> bool:
        return key in self._slots

    def __len__(self) -> int:
        return len(self._slots)

    def __repr__(self) -> str:
        return f"ExtensionPrompts({sorted(self._slots)})"
