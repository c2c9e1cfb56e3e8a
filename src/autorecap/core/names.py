"""Who speaks in a chat: the user's and the character's names, and the key profiles bind to."""

from __future__ import annotations

from autorecap.core.model import Chat


def user_name_of(chat: Chat) -> str:
    """The user's name in a chat (from its messages, else the header)."""
    for message in reversed(chat.messages):
        if message.is_user and message.name:
            return message.name
    name = chat.user_name
    return name if name and name != "unused" else "User"


def character_name_of(chat: Chat) -> str:
    """The character's name in a chat (from its messages, else the header)."""
    for message in reversed(chat.messages):
        if (
            not message.is_user
            and not message.is_narrator
            and not message.is_hidden
            and message.name
        ):
            return message.name
    name = chat.character_name
    return name if name and name != "unused" else "Assistant"


def character_key_of(chat: Chat) -> str | None:
    """The key profiles are bound to: the first character's avatar (group) or name."""
    for message in chat.messages:
        if not message.is_user and not message.is_narrator and message.name:
            return message.character_key
    name = chat.character_name
    return name if name and name != "unused" else None
