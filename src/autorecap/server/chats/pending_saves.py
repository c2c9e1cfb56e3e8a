"""What of a chat the proxy keeps in memory is not saved yet (`server.proxy`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from autorecap.core.model import Message


@dataclass
class Unsaved:
    """What of one open chat is not saved yet (fed by the chat's change listener)."""

    messages: dict[int, Message] = field(default_factory=dict)
    """Changed messages, by `id()`."""
    header: bool = True
    list_version: int = -1
    """`chat.messages.version` at the last save (-1: the list was never saved from here)."""

    touched: dict[int, Message] = field(default_factory=dict)
    """Messages changed since the chat's echo was made (`server.echo`), by `id()`."""
    watching: bool = False
    """The chat has an echo: `touched` is kept."""

    def remember(self, message: Message | None) -> None:
        if message is not None:
            self.messages[id(message)] = message
            if self.watching:
                self.touched[id(message)] = message
        else:
            self.header = True

    def watch(self, on: bool) -> None:
        self.watching = on
        self.touched = {}

    def saved(self, messages: list[Message], header: bool) -> None:
        """These were saved as they are now (by a recap job): not to be saved again."""
        for message in messages:
            self.messages.pop(id(message), None)
        if header:
            self.header = False

    def take_touched(self) -> dict[int, Message]:
        """The messages changed since the last call."""
        touched = self.touched
        self.touched = {}
        return touched
