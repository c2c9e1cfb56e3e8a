"""Running scene recap versions, stored in `chat_metadata` (SPEC-NOTES §1, §4.7, §4.8).

`chat_metadata["auto_recap_running_scene_recaps"] = {chat_id, current_version, versions: [...]}`
where each version is `{version, timestamp (ms), content, scene_count, excluded_count,
prev_scene_index, new_scene_index}`. Version numbers are unique and increasing; editing adds a
version; selecting changes which version is injected; deleting messages removes the versions
whose scene is gone and falls back to the newest valid one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from autorecap.core.data import get_data
from autorecap.core.model import Chat
from autorecap.errors import AutorecapError

STORAGE_KEY = "auto_recap_running_scene_recaps"
SET_ASIDE_PREFIX = "auto_recap_running_scene_recaps_from_"
"""Storage of another chat, kept aside instead of deleted (SPEC-NOTES §4.8)."""


class RunningRecapError(AutorecapError):
    """A running recap version that does not exist, or storage that cannot be read."""


def storage(chat: Chat, *, create: bool = False, key: str = STORAGE_KEY) -> dict[str, Any] | None:
    """The chat's running recap storage (None when there is none and `create` is False);
    `key`: another versioned recap's storage (the combined recap's)."""
    metadata = chat.metadata
    value = metadata.get(key)
    if isinstance(value, dict):
        value.setdefault("versions", [])
        return value
    if not create:
        return None
    if value is not None:
        raise RunningRecapError(f"chat_metadata.{key} is not an object; fix or remove it first")
    created: dict[str, Any] = {"chat_id": chat.id, "current_version": 0, "versions": []}
    metadata[key] = created
    return created


def versions(chat: Chat, *, key: str = STORAGE_KEY) -> list[dict[str, Any]]:
    """Every version, oldest first (by version number)."""
    store = storage(chat, key=key)
    if store is None:
        return []
    found = [v for v in store["versions"] if isinstance(v, dict)]
    return sorted(found, key=lambda v: _number(v))


def current(chat: Chat, *, key: str = STORAGE_KEY) -> dict[str, Any] | None:
    """The version that is injected: `current_version`, else the newest (of versions with the
    same number, the first stored, as in `versions()` order). One pass, no sort: this runs at
    every memory refresh."""
    store = storage(chat, key=key)
    if store is None:
        return None
    wanted = store.get("current_version")
    newest: dict[str, Any] | None = None
    newest_number = 0
    for version in store["versions"]:
        if not isinstance(version, dict):
            continue
        number = _number(version)
        if number == wanted:
            return version
        if newest is None or number >= newest_number:  # the last of the highest, as sorted
            newest, newest_number = version, number
    return newest


def covered_upto(chat: Chat) -> int:
    """The last message index of the scenes the current version holds (-1: no version)."""
    version = current(chat)
    if version is None:
        return -1
    index = version.get("new_scene_index")
    return index if isinstance(index, int) and not isinstance(index, bool) else -1


def injection_text(
    chat: Chat, template: str, *, key: str = STORAGE_KEY, placeholder: str = "{{running_recap}}"
) -> str:
    """Seed 000's `get_running_recap_injection()`: the current recap through the template;
    `""` when there is no recap; the raw content when the template is blank. `key` and
    `placeholder`: another versioned recap's (the combined recap's)."""
    version = current(chat, key=key)
    content = version.get("content") if version is not None else None
    if not content:
        return ""
    if not template.strip():
        return str(content)
    return template.replace(placeholder, str(content))


def add_version(
    chat: Chat,
    content: str,
    *,
    scene_count: int,
    excluded_count: int,
    prev_scene_index: int,
    new_scene_index: int,
    now_ms: int,
) -> dict[str, Any]:
    """Add a version (it becomes the current one) and return it."""
    return add_versioned(
        chat,
        content,
        now_ms=now_ms,
        scene_count=scene_count,
        excluded_count=excluded_count,
        prev_scene_index=prev_scene_index,
        new_scene_index=new_scene_index,
    )


def add_versioned(
    chat: Chat, content: str, *, now_ms: int, key: str = STORAGE_KEY, **facts: Any
) -> dict[str, Any]:
    """Add a version of the recap stored under `key`, with `facts` beside its content (it
    becomes the current one), and return it."""
    store = storage(chat, create=True, key=key)
    assert store is not None
    number = max((_number(v) for v in versions(chat, key=key)), default=-1) + 1
    version = {"version": number, "timestamp": now_ms, "content": content, **facts}
    store["versions"].append(version)
    store["current_version"] = number
    chat.notify_change(None)
    return version


def select_version(chat: Chat, number: int, *, key: str = STORAGE_KEY) -> dict[str, Any]:
    """Make version `number` the injected one."""
    version = _find(chat, number, key)
    store = storage(chat, key=key)
    assert store is not None
    store["current_version"] = number
    chat.notify_change(None)
    return version


def edit_version(chat: Chat, content: str, *, now_ms: int) -> dict[str, Any]:
    """Replace the current recap's text: a new version with the same scene facts."""
    base = current(chat)
    if base is None:
        raise RunningRecapError("there is no running recap to edit yet")
    return add_version(
        chat,
        content,
        scene_count=int(base.get("scene_count", 0) or 0),
        excluded_count=int(base.get("excluded_count", 0) or 0),
        prev_scene_index=int(base.get("prev_scene_index", 0) or 0),
        new_scene_index=int(base.get("new_scene_index", 0) or 0),
        now_ms=now_ms,
    )


def delete_version(chat: Chat, number: int) -> None:
    """Delete version `number`; when it was the current one, the newest left takes over."""
    version = _find(chat, number)
    store = storage(chat)
    assert store is not None
    store["versions"] = [v for v in store["versions"] if v is not version]
    _fall_back(store)
    chat.notify_change(None)


def shift_after_deletion(chat: Chat, deleted_index: int) -> None:
    """Message `deleted_index` was removed: later message indexes move down by one, and a
    version whose scene ended on the deleted message loses its scene (index -1)."""
    store = storage(chat)
    if store is None:
        return
    for version in store["versions"]:
        if not isinstance(version, dict):
            continue
        for key in ("prev_scene_index", "new_scene_index"):
            index = version.get(key)
            if not isinstance(index, int) or isinstance(index, bool):
                continue
            if index == deleted_index and key == "new_scene_index":
                version[key] = -1
            elif index > deleted_index:
                version[key] = index - 1


def cleanup_invalid(chat: Chat, is_scene_end: Callable[[int], bool] | None = None) -> list[int]:
    """Remove versions whose scene no longer exists (seed 002, `cleanup_invalid_running_recaps`);
    fall back to the newest valid one. Returns the removed version numbers."""
    store = storage(chat)
    if store is None:
        return []
    count = len(chat.messages)
    check = is_scene_end or (lambda index: bool(get_data(chat.messages[index], "scene_break")))
    removed: list[int] = []
    kept: list[Any] = []
    for version in store["versions"]:
        index = version.get("new_scene_index") if isinstance(version, dict) else None
        valid = isinstance(index, int) and 0 <= index < count and check(index)
        if valid:
            kept.append(version)
        else:
            removed.append(_number(version) if isinstance(version, dict) else -1)
    if removed:
        store["versions"] = kept
        _fall_back(store)
        chat.notify_change(None)
    return removed


def adopt_chat_id(chat: Chat, *, from_file: bool) -> str | None:
    """Make the storage belong to this chat (SPEC-NOTES §4.8); returns a warning, if any.

    Opening a file counts as an import: the storage adopts the file's chat id (a renamed or
    copied file keeps its recaps). In the store, a branch (`main_chat` set) adopts the id; any
    other mismatch sets the old storage aside under another key, starts empty, and warns.
    """
    store = storage(chat)
    if store is None:
        return None
    owner = store.get("chat_id")
    if owner == chat.id:
        return None
    if from_file or not owner or chat.metadata.get("main_chat"):
        store["chat_id"] = chat.id
        chat.notify_change(None)
        return None
    aside = f"{SET_ASIDE_PREFIX}{owner}"
    counter = 2
    while aside in chat.metadata:  # never overwrite storage set aside before
        aside = f"{SET_ASIDE_PREFIX}{owner}_{counter}"
        counter += 1
    chat.metadata[aside] = store
    chat.metadata[STORAGE_KEY] = {"chat_id": chat.id, "current_version": 0, "versions": []}
    chat.notify_change(None)
    return (
        f"the running recap in chat {chat.id!r} belonged to chat {owner!r}; it was kept aside "
        f"under chat_metadata.{aside} and this chat starts with an empty running recap"
    )


def _find(chat: Chat, number: int, key: str = STORAGE_KEY) -> dict[str, Any]:
    for version in versions(chat, key=key):
        if _number(version) == number:
            return version
    known = ", ".join(str(_number(v)) for v in versions(chat, key=key)) or "none yet"
    what = "running recap" if key == STORAGE_KEY else "combined recap"
    raise RunningRecapError(f"no {what} version {number}: the versions are {known}")


def _fall_back(store: dict[str, Any]) -> None:
    numbers = [_number(v) for v in store["versions"] if isinstance(v, dict)]
    if store.get("current_version") not in numbers:
        store["current_version"] = max(numbers) if numbers else 0


def _number(version: dict[str, Any]) -> int:
    value = version.get("version")
    return value if isinstance(value, int) and not isinstance(value, bool) else -1
