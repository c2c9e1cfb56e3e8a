"""Global settings, named profiles and which chat or character uses which profile.

Kept in `$AUTORECAP_HOME/settings.json`, written atomically, or, on a store that keeps settings
(PostgreSQL), in the store, where every machine reads the same (`profiles_of`,
`autorecap.settings_places`). A profile stores only the settings it changes; the rest come from
the defaults. When a chat opens, its profile is the one bound to
the chat, else the one bound to its character, else the active profile (`Default` unless another
was loaded): seed 002's `auto_load_profile()`.
"""

from __future__ import annotations

import copy
import functools
import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from autorecap.paths import autorecap_home
from autorecap.settings import (
    GLOBAL_KEYS,
    Settings,
    SettingsError,
    make_settings,
    require_setting,
    validate_setting,
)
from autorecap.settings_places import (
    SETTINGS_FILE,
    SettingsFile,
    SettingsPlace,
    StoredSettings,
    owner_settings_file,
)
from autorecap.store.base import ChatStore
from autorecap.store.migrations import SettingsConflictError

DEFAULT_PROFILE = "Default"


def profiles_of(owner: str = "", store: ChatStore | None = None) -> Profiles:
    """An owner's settings ("": the installation's): in `store` when it keeps settings (every
    machine on it then runs with the same), else in the owner's file (`owner_settings_file`)."""
    if store is not None and store.keeps_settings:
        return Profiles(place=StoredSettings(store, owner))
    return Profiles(owner_settings_file(owner))


_FORMAT_VERSION = 1
CHANGE_TRIES = 3
"""A change is made again on the settings as read anew when another process saved first."""


def _empty() -> dict[str, Any]:
    return {
        "version": _FORMAT_VERSION,
        "global": {},
        "active_profile": DEFAULT_PROFILE,
        "profiles": {DEFAULT_PROFILE: {}},
        "chat_profiles": {},
        "character_profiles": {},
    }


F = TypeVar("F", bound=Callable[..., Any])


def _locked(method: F) -> F:
    """Run the method with the object's lock."""

    @functools.wraps(method)
    def wrapper(self: Profiles, *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            return method(self, *args, **kwargs)

    return wrapper  # type: ignore[return-value]


def _change(method: F) -> F:
    """A change (the method saves): made on the settings as saved now, and made again on them
    read anew when another process saved in between (`SettingsConflictError`). A change that
    fails otherwise is undone in memory too. A change made inside another (`set_chat_enabled`
    calls `set`) is part of it: the outer one reads and retries."""

    @functools.wraps(method)
    def wrapper(self: Profiles, *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            if self._changing:
                return method(self, *args, **kwargs)
            self._changing = True
            try:
                for attempt in range(CHANGE_TRIES):
                    self.reload()
                    before = copy.deepcopy(self._data)
                    try:
                        return method(self, *args, **kwargs)
                    except SettingsConflictError:
                        self._data = self._load()  # read anew: the change is made on them
                        if attempt == CHANGE_TRIES - 1:
                            raise SettingsError(
                                f"{self.place.where} kept changing while this change was "
                                "made: try again"
                            ) from None
                    except BaseException:
                        self._data = before  # not saved: not kept
                        raise
            finally:
                self._changing = False
            raise AssertionError("unreachable")

    return wrapper  # type: ignore[return-value]


class Profiles:
    """One owner's settings: global values, profiles and bindings, in a file (`path`) or
    another place (`place`). Every change is saved at once."""

    def __init__(self, path: Path | None = None, *, place: SettingsPlace | None = None) -> None:
        self._lock = threading.RLock()  # the server's threads share one object per owner
        if place is None:
            place = SettingsFile(path if path is not None else autorecap_home() / SETTINGS_FILE)
        self.place = place
        self.path = place.path if isinstance(place, SettingsFile) else None
        """The settings file (None when the settings are kept in the store)."""
        self._changing = False
        self.loads = 0
        """How many times the settings were read (what was made from older ones is stale)."""
        self._data = self._load()

    # --- reading -----------------------------------------------------------------------------

    @_locked
    def reload(self) -> bool:
        """Read the settings again if another process or object may have changed them (a
        cheap look first). True when they were read."""
        if not self.place.changed():
            return False
        self._data = self._load()
        return True

    @_locked
    def settings_for(self, chat_id: str = "", character_key: str | None = None) -> Settings:
        """The settings a chat runs with: its profile's values over the defaults, plus the
        global values."""
        profile = self.profile_for(chat_id, character_key)
        values = dict(self._data["profiles"].get(profile, {}))
        values.update(self._data["global"])
        return make_settings(values)

    @_locked
    def profile_for(self, chat_id: str = "", character_key: str | None = None) -> str:
        """Which profile a chat uses: bound to the chat, else to the character, else active."""
        profiles = self._data["profiles"]
        for name in (
            self._data["chat_profiles"].get(chat_id) if chat_id else None,
            self._data["character_profiles"].get(character_key) if character_key else None,
        ):
            if name in profiles:
                return str(name)
        return self.active_profile

    @property
    def active_profile(self) -> str:
        """The profile used when no binding applies, and the one `set` changes by default."""
        name = self._data.get("active_profile", DEFAULT_PROFILE)
        return name if name in self._data["profiles"] else DEFAULT_PROFILE

    @_locked
    def profile_names(self) -> list[str]:
        """Every profile, `Default` first."""
        names = sorted(self._data["profiles"])
        names.remove(DEFAULT_PROFILE)
        return [DEFAULT_PROFILE, *names]

    @_locked
    def profile_values(self, name: str) -> dict[str, Any]:
        """The values a profile sets (not the defaults it leaves alone)."""
        return dict(self._profile(name))

    @_locked
    def bindings(self) -> dict[str, dict[str, str]]:
        """`{"chats": {chat id: profile}, "characters": {character key: profile}}`."""
        return {
            "chats": dict(self._data["chat_profiles"]),
            "characters": dict(self._data["character_profiles"]),
        }

    @_locked
    def get(self, key: str, profile: str | None = None) -> Any:
        """A setting's effective value in a profile (default: the active one)."""
        require_setting(key)
        values = dict(self._profile(profile or self.active_profile))
        values.update(self._data["global"])
        return getattr(make_settings(values), key)

    # --- changing ----------------------------------------------------------------------------

    @_change
    def set(self, key: str, value: Any, profile: str | None = None) -> Any:
        """Set one setting (validated) in a profile, or globally for the global settings."""
        checked = validate_setting(key, value)
        if key in GLOBAL_KEYS:
            self._data["global"][key] = _jsonable(checked)
        else:
            self._profile(profile or self.active_profile)[key] = _jsonable(checked)
        self._save()
        return checked

    @_change
    def set_many(self, values: dict[str, Any], profile: str | None = None) -> dict[str, Any]:
        """Set several settings at once: every value is validated first, and the file is
        written once, so nothing is saved when one value is refused."""
        checked = {key: validate_setting(key, value) for key, value in values.items()}
        target = self._profile(profile or self.active_profile)
        for key, value in checked.items():
            (self._data["global"] if key in GLOBAL_KEYS else target)[key] = _jsonable(value)
        self._save()
        return checked

    @_change
    def reset(self, key: str, profile: str | None = None) -> None:
        """Back to the default value."""
        require_setting(key)
        target = (
            self._data["global"]
            if key in GLOBAL_KEYS
            else self._profile(profile or self.active_profile)
        )
        target.pop(key, None)
        self._save()

    @_change
    def set_chat_enabled(self, chat_id: str, enabled: bool | None) -> None:
        """Turn memory on or off for one chat; None removes the chat's own switch."""
        chats = dict(self._data["global"].get("chats_enabled", {}))
        if enabled is None:
            chats.pop(chat_id, None)
        else:
            chats[chat_id] = enabled
        self.set("chats_enabled", chats)

    @_change
    def save_profile(self, name: str, source: str | None = None) -> None:
        """Save a profile under `name`: a copy of `source` (default: the active profile)."""
        _check_name(name)
        self._data["profiles"][name] = dict(self._profile(source or self.active_profile))
        self._save()

    @_change
    def load_profile(self, name: str) -> None:
        """Make `name` the active profile."""
        self._profile(name)
        self._data["active_profile"] = name
        self._save()

    @_change
    def delete_profile(self, name: str) -> None:
        """Delete a profile and its bindings (`Default` cannot be deleted)."""
        if name == DEFAULT_PROFILE:
            raise SettingsError(
                f"the {DEFAULT_PROFILE!r} profile is the fallback and cannot be deleted"
            )
        self._profile(name)
        del self._data["profiles"][name]
        for table in ("chat_profiles", "character_profiles"):
            self._data[table] = {k: v for k, v in self._data[table].items() if v != name}
        if self._data.get("active_profile") == name:
            self._data["active_profile"] = DEFAULT_PROFILE
        self._save()

    @_change
    def bind(self, name: str, *, chat: str | None = None, character: str | None = None) -> None:
        """Use profile `name` for a chat or for every chat of a character."""
        self._profile(name)
        if (chat is None) == (character is None):
            raise SettingsError("bind a profile to exactly one of: a chat id, a character")
        table, target = (
            ("chat_profiles", chat) if chat is not None else ("character_profiles", character)
        )
        self._data[table][target] = name
        self._save()

    @_change
    def unbind(self, *, chat: str | None = None, character: str | None = None) -> bool:
        """Remove a chat's or a character's profile binding; False when there was none (and
        nothing is saved)."""
        removed = False
        if chat is not None:
            removed |= self._data["chat_profiles"].pop(chat, None) is not None
        if character is not None:
            removed |= self._data["character_profiles"].pop(character, None) is not None
        if removed:
            self._save()
        return removed

    # --- storage -----------------------------------------------------------------------------

    def _profile(self, name: str) -> dict[str, Any]:
        profile = self._data["profiles"].get(name)
        if profile is None:
            known = ", ".join(self.profile_names())
            raise SettingsError(f"no profile named {name!r}: the profiles are {known}")
        return profile  # type: ignore[no-any-return]

    def _load(self) -> dict[str, Any]:
        self.loads += 1
        where = self.place.where
        try:
            text = self.place.read()
            data = json.loads(text) if text is not None else None
        except (OSError, ValueError) as error:
            raise SettingsError(f"cannot read {where} ({error}); {self.place.remedy}") from None
        if data is None:
            return _empty()
        if not isinstance(data, dict) or not isinstance(data.get("profiles", {}), dict):
            raise SettingsError(f"{where} holds no autorecap settings; {self.place.remedy}")
        merged = _empty()
        merged.update(data)
        merged["profiles"].setdefault(DEFAULT_PROFILE, {})
        for name, values in merged["profiles"].items():
            try:
                make_settings({**values, **merged["global"]})
            except SettingsError as error:
                raise SettingsError(
                    f"{where}, profile {name!r}: {error}; {self.place.remedy}"
                ) from None
        return merged

    def document(self) -> str:
        """The settings as saved: the file's text (`autorecap store copy` moves it)."""
        with self._lock:
            return json.dumps(self._data, ensure_ascii=False, indent=2, sort_keys=True) + "\n"

    def _save(self) -> None:
        self.place.write(self.document())


def _check_name(name: str) -> None:
    if not name.strip() or len(name) > 100:
        raise SettingsError("a profile name must be 1 to 100 characters and not only spaces")


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value))
