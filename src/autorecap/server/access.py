"""Who is asking: API keys, and the chats each key owns.

Access control is off unless `autorecap serve --keys-file FILE` is given. The file holds one key
per line, `name: key` (or a bare key, named after its hash); `#` starts a comment. With keys on,
every request to the proxy and the API needs `Authorization: Bearer KEY` (or `X-Api-Key: KEY`),
and a key's chats live under its own name in the store: `alice/Captain Mira - ...`. A key never
sees, lists or changes another key's chats, settings or jobs.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

from fastapi import Request

from autorecap.errors import AutorecapError

_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


class AccessError(AutorecapError):
    """A request without a valid key, or a keys file that cannot be used."""

    http_status = 401


class ChatIdError(AutorecapError):
    """A chat id no URL can name."""

    http_status = 400


class NotYoursError(AutorecapError):
    """A chat id this key may not use."""

    http_status = 404


@dataclass(frozen=True)
class Scope:
    """The owner a request acts for. `owner` is "" when access control is off: then the
    store's chat ids are used as they are."""

    owner: str = ""

    def internal(self, chat_id: str) -> str:
        """The store's id for this owner's chat `chat_id`."""
        if not chat_id:
            raise NotYoursError("a chat id cannot be empty")
        if chat_id in (".", "..") or any(ord(c) < 32 for c in chat_id):
            raise ChatIdError(
                f"chat id {chat_id!r}: '.', '..' and control characters cannot be reached in "
                "a URL; choose another id"
            )
        if not self.owner:
            return chat_id
        if "/" in chat_id:
            raise NotYoursError(f"chat id {chat_id!r}: with API keys on, a chat id has no '/'")
        return f"{self.owner}/{chat_id}"

    def external(self, internal_id: str) -> str | None:
        """The id this owner knows a stored chat by, or None when the chat is not theirs."""
        if not self.owner:
            return internal_id
        prefix = f"{self.owner}/"
        return internal_id[len(prefix) :] if internal_id.startswith(prefix) else None

    def owns(self, internal_id: str) -> bool:
        return self.external(internal_id) is not None


def owner_of(internal_id: str, keys_on: bool) -> str:
    """The owner part of a stored chat id ("" when access control is off)."""
    if not keys_on or "/" not in internal_id:
        return ""
    return internal_id.split("/", 1)[0]


class KeyRing:
    """The keys file, read once at start-up."""

    def __init__(self, keys: dict[str, str]) -> None:
        if not keys:
            raise AccessError("the keys file has no keys: add lines such as `alice: sk-...`")
        self._by_digest = {_digest(key): name for key, name in keys.items()}

    def __len__(self) -> int:
        """How many keys the file holds."""
        return len(self._by_digest)

    @classmethod
    def from_file(cls, path: Path) -> KeyRing:
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as error:
            raise AccessError(f"cannot read the keys file {path}: {error.strerror}") from error
        keys: dict[str, str] = {}
        names: set[str] = set()
        for number, raw in enumerate(text.splitlines(), 1):
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            if ":" in line:
                name, key = (part.strip() for part in line.split(":", 1))
            else:
                key = line
                name = "key-" + _digest(key)[:10]
            # The name is a folder under users/: "." or ".." would be another owner's files.
            if not _NAME.match(name) or name.startswith("."):
                raise AccessError(
                    f"{path}, line {number}: the name {name!r} may use only letters, digits, "
                    "'_', '.' and '-' (at most 64), and may not start with '.'"
                )
            if len(key) < 8:
                raise AccessError(f"{path}, line {number}: a key must be at least 8 characters")
            if key in keys or name in names:
                raise AccessError(f"{path}, line {number}: the key or name {name!r} is repeated")
            keys[key] = name
            names.add(name)
        return cls(keys)

    def scope_for(self, key: str | None) -> Scope:
        """The owner of `key`; an `AccessError` when it is missing or unknown."""
        if not key:
            raise AccessError(
                "this server needs an API key: send `Authorization: Bearer KEY` "
                "(the openai client's api_key) or `X-Api-Key: KEY`"
            )
        digest = _digest(key)
        for known, name in self._by_digest.items():
            if hmac.compare_digest(known, digest):
                return Scope(name)
        raise AccessError("this API key is not in the server's keys file")


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def request_scope(request: Request) -> Scope:
    """The FastAPI dependency for "who is asking": `Scope("")` when the app has no keys,
    else the owner of the request's key (401 without a valid one)."""
    keyring: KeyRing | None = getattr(request.app.state, "keyring", None)
    if keyring is None:
        return Scope()
    auth = request.headers.get("authorization", "")
    key = auth[7:].strip() if auth[:7].lower() == "bearer " else ""
    return keyring.scope_for(key or request.headers.get("x-api-key"))


def header_text(value: str | None) -> str | None:
    """A header as the client meant it: UTF-8 (which Starlette reads as Latin-1), and
    percent-decoded (the proxy answers with ids percent-encoded: sent back, they name the same
    chat)."""
    if not value:
        return None
    with contextlib.suppress(UnicodeEncodeError, UnicodeDecodeError):
        value = value.encode("latin-1").decode("utf-8")
    return unquote(value)
