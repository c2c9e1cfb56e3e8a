"""Where one owner's settings document (`autorecap.profiles`) is kept: a file in
`$AUTORECAP_HOME` (one machine, the SQLite default), or a row of a store that keeps settings
(PostgreSQL: every machine on the database reads the same).

Each place answers cheaply whether the document changed since it was last read or written
(`changed`), and refuses a write over a change it has not read (`SettingsConflictError`), so two
processes changing settings at once do not undo each other.

`settings_documents` and `put_settings` move every owner's settings from one installation to
another (`autorecap store copy`).

May import: paths, store (its interface and errors), stfiles.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Protocol

from autorecap.paths import autorecap_home
from autorecap.stfiles.atomic import atomic_write
from autorecap.store.base import ChatStore
from autorecap.store.migrations import SettingsConflictError, StoreError

SETTINGS_FILE = "settings.json"


def owner_settings_file(owner: str) -> Path:
    """The settings file of one API key's owner (`autorecap serve --keys-file`): the
    installation's own when `owner` is "" (access control off), else
    `$AUTORECAP_HOME/users/<owner>/settings.json`."""
    if not owner:
        return autorecap_home() / SETTINGS_FILE
    return autorecap_home() / "users" / owner / SETTINGS_FILE


def owner_label(owner: str) -> str:
    """Whose settings, as messages say it: "the owner 'alice'", or "the installation"."""
    return f"the owner {owner!r}" if owner else "the installation"


class SettingsPlace(Protocol):
    where: str
    """The place as messages name it."""
    remedy: str
    """What to do when what is there cannot be read."""

    def read(self) -> str | None:
        """The document (None: none saved yet)."""

    def changed(self) -> bool:
        """True when the document may have changed since it was last read or written."""

    def write(self, text: str) -> None:
        """Replace the document, unless it changed since it was last read (then
        `SettingsConflictError`: read it again)."""


class SettingsFile:
    """A settings file, replaced atomically: a change is seen from its size, time and inode
    (each write is a new file)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.where = f'the settings file "{path}"'
        self.remedy = "fix it, or move it away to start from the defaults"
        self._seen: tuple[int, int, int] | None = None
        self._read = False

    def _stamp(self) -> tuple[int, int, int] | None:
        try:
            found = os.stat(self.path)
        except FileNotFoundError:
            return None
        return (found.st_mtime_ns, found.st_size, found.st_ino)

    def read(self) -> str | None:
        self._read = True
        self._seen = self._stamp()
        if self._seen is None:
            return None
        try:
            return self.path.read_text(encoding="utf-8")
        except FileNotFoundError:  # removed between the look and the read
            self._seen = None
            return None

    def changed(self) -> bool:
        return not self._read or self._stamp() != self._seen

    def write(self, text: str) -> None:
        if self.changed():
            raise SettingsConflictError(f"{self.where} was changed meanwhile")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(self.path, text.encode("utf-8"))
        self._seen = self._stamp()


class StoredSettings:
    """One owner's row in a store that keeps settings (`ChatStore.keeps_settings`). Whether it
    changed is a number in memory on PostgreSQL (its notices), so looking costs nothing."""

    def __init__(self, store: ChatStore, owner: str) -> None:
        self.store = store
        self.owner = owner
        name = getattr(store, "name", "the store")
        self.where = f"the settings of {owner_label(owner)} in {name}"
        self.remedy = (
            "fix that row of the settings table, or delete it to start from the defaults "
            f"(DELETE FROM settings WHERE owner = '{owner}')"
        )
        self._rev: int | None = None
        self._version: int | None = None

    def read(self) -> str | None:
        self._version = self.store.settings_version()  # before: a save meanwhile is seen next
        found = self.store.read_settings(self.owner)
        if found is None:
            self._rev = None
            return None
        text, self._rev = found
        return text

    def changed(self) -> bool:
        return self._version is None or self.store.settings_version() != self._version

    def write(self, text: str) -> None:
        self._rev = self.store.write_settings(self.owner, text, self._rev)


class GivenSettings:
    """A settings document in hand (one `store copy` is about to move), to check it reads."""

    def __init__(self, text: str, where: str) -> None:
        self.text = text
        self.where = where
        self.remedy = "fix it at the source first, or copy with --no-settings"

    def read(self) -> str | None:
        return self.text

    def changed(self) -> bool:
        return False

    def write(self, text: str) -> None:
        raise StoreError(f"{self.where} cannot be changed here")


# --- moving settings between installations ---------------------------------------------------


def settings_documents(store: ChatStore) -> dict[str, str]:
    """Every owner's settings document as the installation on `store` keeps them: the store's
    rows when it keeps settings, else the files in `$AUTORECAP_HOME` (the installation's and
    each owner's under `users/`)."""
    if store.keeps_settings:
        found: dict[str, str] = {}
        for owner in store.settings_owners():
            row = store.read_settings(owner)
            if row is not None:
                found[owner] = row[0]
        return found
    files = {"": owner_settings_file("")}
    users = autorecap_home() / "users"
    if users.is_dir():
        files |= {
            d.name: owner_settings_file(d.name) for d in sorted(users.iterdir()) if d.is_dir()
        }
    return {
        owner: path.read_text(encoding="utf-8") for owner, path in files.items() if path.exists()
    }


def put_settings(store: ChatStore, documents: dict[str, str], *, check: bool = False) -> int:
    """Save `documents` (by owner) where the installation on `store` keeps settings. Settings
    already there are never replaced: the same text is left alone, other text is an error
    (`check=True` only looks, so a copy can refuse before it writes anything). Returns how
    many were saved."""
    saved = 0
    for owner, text in sorted(documents.items()):
        if store.keeps_settings:
            row = store.read_settings(owner)
            there = None if row is None else row[0]
            where = f"the target database's settings of {owner_label(owner)}"
        else:
            path = owner_settings_file(owner)
            there = path.read_text(encoding="utf-8") if path.exists() else None
            where = f'"{path}"'
        if there == text:
            continue
        if there is not None:
            raise StoreError(
                f"{where} already holds other settings: move them away first, or copy with "
                "--no-settings"
            )
        if check:
            continue
        place: SettingsPlace = (
            StoredSettings(store, owner)
            if store.keeps_settings
            else SettingsFile(owner_settings_file(owner))
        )
        place.read()
        place.write(text)
        saved += 1
    return saved
