"""Scenes: breaks, names, and versioned scene recaps, kept where ST-Auto-Recap keeps them.

A scene ends on the message that carries `scene_break`; its data lives in that message's
namespace: `scene_break`, `scene_break_visible`, `scene_break_name`, `scene_break_collapsed`,
`scene_break_cause`, `auto_scene_break_checked`, `scene_recap_memory`, `scene_recap_versions`,
`scene_recap_current_index`, `scene_recap_hash`, `scene_recap_metadata`, `scene_recap_include`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from autorecap.core.data import data_column, delete_data, get_data, update_data
from autorecap.core.model import Message
from autorecap.errors import AutorecapError


class SceneError(AutorecapError):
    """A scene operation on a message that is not a scene break, or a bad version."""


@dataclass(frozen=True)
class Scene:
    """A run of messages that ends at a scene break (or, for the open scene, at the end)."""

    number: int
    start: int
    end: int
    """The message carrying the break (the last message of the open scene)."""
    closed: bool
    name: str
    recap: str

    @property
    def length(self) -> int:
        return self.end - self.start + 1


def is_break(message: Message) -> bool:
    """True when the message ends a scene."""
    return bool(get_data(message, "scene_break"))


def break_indexes(messages: Sequence[Message]) -> list[int]:
    """Indexes of every scene break, in order."""
    return [i for i, value in enumerate(data_column(messages, "scene_break")) if value]


def last_break(messages: Sequence[Message]) -> int:
    """The index of the last scene break (searched from the end), -1 when there is none."""
    for index in range(len(messages) - 1, -1, -1):
        if is_break(messages[index]):
            return index
    return -1


def scenes(messages: Sequence[Message]) -> list[Scene]:
    """The chat cut into scenes: one per break, plus the open scene after the last break."""
    found: list[Scene] = []
    start = 0
    for number, end in enumerate(break_indexes(messages)):
        message = messages[end]
        found.append(
            Scene(
                number,
                start,
                end,
                True,
                scene_name(message, number, start, end),
                str(get_data(message, "scene_recap_memory") or ""),
            )
        )
        start = end + 1
    if start < len(messages):
        found.append(Scene(len(found), start, len(messages) - 1, False, "", ""))
    return found


def scene_name(message: Message, number: int, start: int, end: int) -> str:
    """The break's name, else "Scene N (start-end)"."""
    name = get_data(message, "scene_break_name")
    return str(name) if name else f"Scene {number + 1} ({start}-{end})"


BREAK_CAUSES = ("cues", "llm", "length", "user")
"""Why a break is where it is (`scene_break_cause`): the offline cues found it, the LLM did,
the scene reached `scene_max_messages`/`scene_max_tokens` with no break, or the user put it."""


def mark_break(
    message: Message,
    name: str | None = None,
    *,
    visible: bool = True,
    cause: str | None = None,
) -> None:
    """Make `message` end a scene (`cause`: one of `BREAK_CAUSES`, kept as
    `scene_break_cause`)."""
    values: dict[str, Any] = {"scene_break": True, "scene_break_visible": visible}
    if name is not None:
        values["scene_break_name"] = name
    if cause is not None:
        values["scene_break_cause"] = cause
    update_data(message, values)


def unmark_break(message: Message) -> None:
    """Remove the break (its recap versions stay on the message, as the extension does)."""
    if not is_break(message):
        raise SceneError("that message is not a scene break")
    update_data(message, {"scene_break": False})


def rename_break(message: Message, name: str) -> None:
    """Name a scene."""
    if not is_break(message):
        raise SceneError("that message is not a scene break: mark it first")
    update_data(message, {"scene_break_name": name})


def set_visible(message: Message, visible: bool) -> None:
    """Show or hide a break (an invisible break does not count for auto-hide)."""
    if not is_break(message):
        raise SceneError("that message is not a scene break")
    update_data(message, {"scene_break_visible": visible})


def content_hash(messages: Sequence[Message]) -> str:
    """A short hash of a scene's texts: tells whether its recap is out of date."""
    digest = hashlib.sha256()
    for message in messages:
        digest.update(message.name.encode("utf-8", "surrogatepass"))
        digest.update(b"\x00")
        digest.update(message.text.encode("utf-8", "surrogatepass"))
        digest.update(b"\x01")
    return digest.hexdigest()[:16]


def recap_versions(message: Message) -> list[str]:
    """The scene recap's versions, oldest first."""
    versions = get_data(message, "scene_recap_versions")
    return [str(v) for v in versions] if isinstance(versions, list) else []


def add_recap_version(
    message: Message, text: str, *, scene_hash: str, metadata: dict[str, Any] | None = None
) -> int:
    """Add a scene recap version; it becomes the current one. Returns its index."""
    if not is_break(message):
        raise SceneError("a scene recap goes on the message that ends the scene: mark it first")
    versions = [*recap_versions(message), text]
    update_data(
        message,
        {
            "scene_recap_memory": text,
            "scene_recap_versions": versions,
            "scene_recap_current_index": len(versions) - 1,
            "scene_recap_hash": scene_hash,
            "scene_recap_metadata": dict(metadata or {}),
            "scene_recap_include": True,
        },
    )
    return len(versions) - 1


def select_recap_version(message: Message, index: int) -> str:
    """Make version `index` the scene's recap."""
    versions = recap_versions(message)
    if not 0 <= index < len(versions):
        raise SceneError(
            f"no scene recap version {index}: there are {len(versions)} (0 to {len(versions) - 1})"
            if versions
            else "this scene has no recap yet"
        )
    update_data(
        message, {"scene_recap_memory": versions[index], "scene_recap_current_index": index}
    )
    return versions[index]


def edit_recap(message: Message, text: str) -> int:
    """The user's own scene recap: a new version."""
    scene_hash = str(get_data(message, "scene_recap_hash") or "")
    return add_recap_version(message, text, scene_hash=scene_hash, metadata={"edited": True})


def clear_recap(message: Message) -> None:
    """Forget a scene's recap and its versions."""
    for key in (
        "scene_recap_memory",
        "scene_recap_versions",
        "scene_recap_current_index",
        "scene_recap_hash",
        "scene_recap_metadata",
    ):
        delete_data(message, key)
