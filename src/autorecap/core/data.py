"""The per-message data API of seed 004: `get_data`, `set_data` and their helpers.

Extension data lives under `message["extra"]["auto_recap_memory"]`. After every write the whole
namespace is copied into the active swipe's `swipe_info[swipe_id]["extra"]`, so each swipe keeps
its own recap (SPEC-NOTES §4.1). Data that older versions wrote under `auto_summarize_memory`
reads as if it were under `auto_recap_memory` and moves there on the first write to the message.

Writes to a message that belongs to a `Chat` notify it (`Chat.notify_change`), which is how an
open chat schedules its debounced save; a message with no chat is written to and nothing is saved
(seed 004, "Missing Chat Context").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypeGuard

from autorecap.core.model import Message
from autorecap.errors import MessageDataError

NAMESPACE = "auto_recap_memory"
"""`MODULE_NAME` of ST-Auto-Recap: the key under `extra` that holds its data."""
LEGACY_NAMESPACE = "auto_summarize_memory"
"""Where versions of the extension before the rename kept the same data."""
INCLUDED = "Recap of message(s)"
"""The `include` flag of a message whose recap is in short-term memory (seed 002)."""

RECAP_KEYS = ("memory", "error", "reasoning", "prefill")
"""The seed's keys of a message recap and what came with it (cleared together)."""
HINT_KEYS = ("scene_start",)
"""Ours, written with a recap when there is something to say (an LLM's "new scene" mark); cleared
with it, and only where present so that a cleared message holds what the seed's does."""


def get_data(message: Mapping[str, Any] | None, key: str) -> Any:
    """Read `key` from a message's namespace; None when the message, the namespace or the key is
    missing, and also when the stored value is null (`has_data` tells those apart)."""
    namespace = _read_namespace(message)
    return None if namespace is None else namespace.get(key)


def data_column(messages: Iterable[Mapping[str, Any]], key: str) -> list[Any]:
    """`get_data(message, key)` of every message, in one pass (a whole chat's worth, as scene
    lookups read it on every job)."""
    found: list[Any] = []
    for message in messages:
        namespace = _namespace_of(message.get("extra"))
        found.append(None if namespace is None else namespace.get(key))
    return found


def has_data(message: Mapping[str, Any] | None, key: str) -> bool:
    """True when `key` is stored on the message, even as null (seed 004, "Pattern 3")."""
    namespace = _read_namespace(message)
    return namespace is not None and key in namespace


def set_data(message: dict[str, Any] | None, key: str, value: Any) -> None:
    """Store `value` under `key` on the message, sync it to the active swipe, and notify the
    message's chat so that it gets saved.

    Raises `MessageDataError` when there is no message, or when its `extra` holds something other
    than an object (overwriting it would lose that data).
    """
    namespace = _writable_namespace(message, "set_data")
    namespace[key] = value
    _after_write(message, namespace)  # type: ignore[arg-type]


def update_data(message: dict[str, Any] | None, values: Mapping[str, Any]) -> None:
    """Store several keys at once: one swipe sync and one change notification for all of them."""
    namespace = _writable_namespace(message, "update_data")
    namespace.update(values)
    _after_write(message, namespace)  # type: ignore[arg-type]


def delete_data(message: dict[str, Any] | None, key: str) -> None:
    """Remove `key` from the message's namespace (and the active swipe's copy)."""
    if message is not None and not has_data(message, key):
        return
    namespace = _writable_namespace(message, "delete_data")
    if key in namespace:
        del namespace[key]
        _after_write(message, namespace)  # type: ignore[arg-type]


def merge_stored_data(live: Message, stored: Mapping[str, Any]) -> bool:
    """Bring into `live` the extension data of `stored`, another copy of the same message that
    another process saved, key by key: a key changed here since the last save (`live._base`
    holds the data as it was then) keeps its value here, every other key takes the stored one.
    Fields outside the data stay as they are here. Notifies nobody (the caller decides what to
    tell). Returns whether anything changed."""
    ours = _read_namespace(live) or {}
    base = live._base if live._base is not None else ours
    theirs = _read_namespace(stored) or {}
    missing = object()
    wanted = {
        key: theirs.get(key, missing)
        for key in set(ours) | set(theirs)
        if ours.get(key, missing) == base.get(key, missing)
        and ours.get(key, missing) != theirs.get(key, missing)
    }
    if not wanted:
        return False
    namespace = _writable_namespace(live, "merge_stored_data")
    for key, value in wanted.items():
        for target in (namespace, live._base):  # the base too: these are as stored now
            if target is None:
                continue
            if value is missing:
                target.pop(key, None)
            else:
                target[key] = _copy_json(value)
    _sync_swipe(live, namespace)
    return True


def get_memory(message: Mapping[str, Any] | None) -> str:
    """The message's recap with its prefill in front (`""` when it has no recap)."""
    memory = get_data(message, "memory")
    if memory is None or memory == "":
        return ""
    prefill = get_data(message, "prefill")
    return f"{_as_text(prefill)}{_as_text(memory)}"


def edit_memory(message: dict[str, Any] | None, text: str) -> None:
    """Replace the recap with the user's text: clears error, reasoning and prefill, marks it
    `edited` so that regeneration leaves it alone. Writing the current text again changes
    nothing."""
    if message is None:
        _writable_namespace(message, "edit_memory")  # raises the no-message error
    if get_memory(message) == text:
        return
    update_data(
        message, {"memory": text, "error": None, "reasoning": None, "prefill": None, "edited": True}
    )


def cleared_recap(message: Mapping[str, Any] | None) -> dict[str, Any]:
    """The values that remove a message's recap (for `update_data`), `edited` reset."""
    values: dict[str, Any] = dict.fromkeys(RECAP_KEYS)
    values.update(dict.fromkeys(key for key in HINT_KEYS if has_data(message, key)))
    values["edited"] = False
    return values


def clear_memory(message: dict[str, Any] | None) -> None:
    """Remove the recap and everything about it (seed 004, "Pattern 5")."""
    update_data(message, cleared_recap(message) | {"exclude": False})


def get_previous_swipe_memory(message: Mapping[str, Any] | None, key: str) -> Any:
    """`key` as stored on the swipe before the active one; None when there is none."""
    if message is None:
        return None
    swipe_id = message.get("swipe_id")
    swipe_info = message.get("swipe_info")
    if not _is_index(swipe_id) or not isinstance(swipe_info, list):
        return None
    previous = swipe_id - 1
    if previous < 0 or previous >= len(swipe_info):
        return None
    entry = swipe_info[previous]
    extra = entry.get("extra") if isinstance(entry, dict) else None
    namespace = _namespace_of(extra)
    return None if namespace is None else namespace.get(key)


def select_swipe(message: dict[str, Any], swipe_id: int) -> None:
    """Make swipe `swipe_id` the active one, the way SillyTavern does when the user swipes to an
    existing swipe: `mes`, `send_date`, generation times and `extra` come from that swipe, so its
    own recap data is what `get_data` reads next (SPEC-NOTES §4.1: no stale data)."""
    swipes = message.get("swipes")
    if not isinstance(swipes, list) or not 0 <= swipe_id < len(swipes):
        count = len(swipes) if isinstance(swipes, list) else 0
        raise MessageDataError(
            f"swipe {swipe_id} does not exist: the message has {count} swipe(s) "
            f"(valid: 0 to {count - 1})"
            if count
            else f"swipe {swipe_id} does not exist: the message has no swipes"
        )
    message["swipe_id"] = swipe_id
    message["mes"] = swipes[swipe_id]
    swipe_info = message.get("swipe_info")
    entry = (
        swipe_info[swipe_id]
        if isinstance(swipe_info, list) and swipe_id < len(swipe_info)
        else None
    )
    if isinstance(entry, dict):
        for field in ("send_date", "gen_started", "gen_finished"):
            if field in entry:
                message[field] = entry[field]
        extra = entry.get("extra")
        message["extra"] = _copy_json(extra) if isinstance(extra, dict) else {}
    elif isinstance(message.get("extra"), dict):
        # No metadata for that swipe: keep other extensions' data, drop our stale recap.
        message["extra"].pop(NAMESPACE, None)
        message["extra"].pop(LEGACY_NAMESPACE, None)
    if isinstance(message, Message) and message._chat is not None:
        message._chat.notify_change(message)


def read_namespace(message: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The message's extension data as stored (the legacy namespace when only that exists),
    or None; for reading only: write through `set_data`."""
    return _read_namespace(message)


def _read_namespace(message: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if message is None:
        return None
    return _namespace_of(message.get("extra"))


def _namespace_of(extra: Any) -> dict[str, Any] | None:
    if not isinstance(extra, dict):
        return None
    namespace = extra.get(NAMESPACE)
    if isinstance(namespace, dict):
        return namespace
    legacy = extra.get(LEGACY_NAMESPACE)
    return legacy if isinstance(legacy, dict) else None


def _writable_namespace(message: dict[str, Any] | None, caller: str) -> dict[str, Any]:
    if isinstance(message, Message) and message._rev is not None and message._base is None:
        # A stored message's first change since it was saved: keep the data as it was, so
        # that a save another process made meanwhile merges key by key (`merge_stored_data`).
        message._base = _copy_json(_read_namespace(message) or {})
    if message is None:
        raise MessageDataError(
            f"{caller} was given no message: pass the message object (for example "
            "chat.messages[i]) that the data belongs to"
        )
    extra = message.get("extra")
    if extra is None:
        extra = message["extra"] = {}
    elif not isinstance(extra, dict):
        raise MessageDataError(
            f"{caller}: this message's 'extra' is a {type(extra).__name__}, not an object, so "
            "recap data cannot be stored on it without losing that value; fix the message first"
        )
    namespace = extra.get(NAMESPACE)
    if isinstance(namespace, dict):
        legacy = extra.get(LEGACY_NAMESPACE)
        if isinstance(legacy, dict):
            # Both present: the current namespace wins, keys only the old one has move over.
            for key, value in legacy.items():
                namespace.setdefault(key, value)
            del extra[LEGACY_NAMESPACE]
        return namespace
    if namespace is not None:
        raise MessageDataError(
            f"{caller}: this message's extra.{NAMESPACE} is a {type(namespace).__name__}, not an "
            "object; fix or remove it first"
        )
    legacy = extra.pop(LEGACY_NAMESPACE, None)
    namespace = legacy if isinstance(legacy, dict) else {}
    extra[NAMESPACE] = namespace
    return namespace


def _after_write(message: dict[str, Any], namespace: dict[str, Any]) -> None:
    _sync_swipe(message, namespace)
    if isinstance(message, Message) and message._chat is not None:
        message._chat.notify_change(message)


def _sync_swipe(message: dict[str, Any], namespace: dict[str, Any]) -> None:
    """Copy the namespace into the active swipe's `swipe_info` entry."""
    swipe_info = message.get("swipe_info")
    if isinstance(swipe_info, list):
        swipe_id = message.get("swipe_id")
        if _is_index(swipe_id) and swipe_id < len(swipe_info):
            entry = swipe_info[swipe_id]
            if isinstance(entry, dict):
                swipe_extra = entry.get("extra")
                if not isinstance(swipe_extra, dict):
                    swipe_extra = entry["extra"] = {}
                swipe_extra.pop(LEGACY_NAMESPACE, None)
                swipe_extra[NAMESPACE] = _copy_json(namespace)


def _is_index(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _copy_json(value: Any) -> Any:
    """A deep copy of JSON data (dicts, lists, scalars): `structuredClone` for what we store."""
    if isinstance(value, dict):
        return {k: _copy_json(v) if isinstance(v, dict | list) else v for k, v in value.items()}
    if isinstance(value, list):
        return [_copy_json(v) if isinstance(v, dict | list) else v for v in value]
    return value


def _as_text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else str(value)
