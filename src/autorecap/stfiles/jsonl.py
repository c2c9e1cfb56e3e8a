"""Read and write SillyTavern chat files (JSONL) without losing a byte.

Reading keeps the bytes of every line. Writing puts back, byte for byte, every line whose data is
unchanged, and writes a changed line as SillyTavern would (`JSON.stringify`: compact, non-ASCII
as is, key order kept). BOM, line ends and the trailing newline survive; blank lines and (in
lenient mode) malformed lines are kept verbatim where they were. Writes are atomic.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from pathlib import Path
from typing import Any

from autorecap.core.jsjson import dumps_canonical, js_bytes_from_canonical, loads_strict
from autorecap.core.model import Chat, FileLayout, KeptLine, Message
from autorecap.errors import ChatFileError, LineProblem
from autorecap.stfiles.atomic import atomic_write

BOM = b"\xef\xbb\xbf"
CHAT_SUFFIX = ".jsonl"


def chat_id_for(path: Path) -> str:
    """SillyTavern's chat id of a file: its name without `.jsonl`."""
    name = path.name
    return name[: -len(CHAT_SUFFIX)] if name.endswith(CHAT_SUFFIX) else name


def read_chat(path: str | Path, *, lenient: bool = False) -> Chat:
    """Read a SillyTavern chat file.

    A malformed line is an error naming the file and the line (the header is line 1). With
    `lenient=True` such lines are kept verbatim (`chat.kept_lines`) and written back in place.
    """
    file_path = Path(path)
    data = _read_bytes(file_path)
    return parse_chat(data, chat_id=chat_id_for(file_path), path=file_path, lenient=lenient)


def write_chat(chat: Chat, path: str | Path | None = None, *, backups: int = 0) -> Path:
    """Write `chat` to `path` (default: the file it was read from) atomically.

    The file is written to a temporary file beside the target, fsynced and renamed over it, so an
    interrupted write leaves the previous file intact. With `backups=N` the file being replaced is
    first copied into `$AUTORECAP_HOME/backups/<chat id>/`, keeping the newest N copies.
    Returns the path written.
    """
    target = Path(path) if path is not None else chat.path
    if target is None:
        raise ChatFileError(
            f"chat {chat.id!r} was not read from a file, so there is nowhere to write it back: "
            "pass a path to write_chat"
        )
    data = serialize_chat(chat)
    atomic_write(target, data, backups=backups, backup_name=chat.id or chat_id_for(target))
    return target


def parse_chat(
    data: bytes, *, chat_id: str, path: Path | None = None, lenient: bool = False
) -> Chat:
    """Parse the bytes of a chat file (see `read_chat`)."""
    shown = str(path) if path is not None else chat_id
    layout = FileLayout(from_file=True)
    if data.startswith(BOM):
        layout.bom = True
        data = data[len(BOM) :]
    if not data.strip():
        raise ChatFileError(
            f'"{shown}" is empty: a SillyTavern chat file starts with a header line; '
            "check that this is the right file",
            path=shown,
        )
    lines: list[tuple[bytes, bytes | None]] = list(_split_lines(data))
    layout.final_eol = lines[-1][1] or b""
    layout.default_eol = _default_eol(lines)
    # A last line with no real line end (none, or a bare CR) gets the file's usual one should
    # it stop being last (a message appended); one that ends in a newline keeps it.
    if lines[-1][1] not in (b"\n", b"\r\n"):
        lines[-1] = (lines[-1][0], None)

    chat = Chat(chat_id=chat_id, path=path, header={})
    chat.layout = layout
    problems: list[LineProblem] = []

    header_raw, header_eol = lines[0]
    layout.header_raw = header_raw
    layout.header_eol = header_eol
    header, reason = _parse_object(header_raw)
    if header is None:
        problems.append(LineProblem(1, f"the header {reason}"))
        layout.header_valid = False
        layout.header_had_metadata = False
    else:
        chat.header = header
        layout.header_had_metadata = "chat_metadata" in header
        metadata = header.get("chat_metadata")
        if "chat_metadata" in header and not isinstance(metadata, dict):
            problems.append(
                LineProblem(
                    1, f"the header's chat_metadata is {json_type(metadata)}, not an object"
                )
            )

    messages = chat.messages
    for offset, (raw, eol) in enumerate(lines[1:]):
        line_no = offset + 2
        if not raw.strip():
            layout.kept.append(_kept(line_no, raw, eol, "", messages))
            continue
        obj, reason = _parse_object(raw)
        if obj is None:
            problems.append(LineProblem(line_no, f"message line {reason}"))
            layout.kept.append(_kept(line_no, raw, eol, reason, messages))
            continue
        message = Message(obj)
        message._raw = raw
        message._eol = eol
        message._chat = chat
        message._line = line_no
        messages.append(message)
    layout.original_messages = list(messages)

    if problems and not lenient:
        first = problems[0]
        more = f" (and {len(problems) - 1} more bad line(s))" if len(problems) > 1 else ""
        raise ChatFileError(
            f'line {first.line} of "{shown}": {first.message}{more}. Fix the line (`autorecap '
            "check FILE` lists every bad line), or give --lenient to keep bad lines as they are",
            path=shown,
            problems=tuple(problems),
        )
    return chat


def serialize_chat(chat: Chat) -> bytes:
    """The bytes of `chat` as a SillyTavern chat file (see the module docstring)."""
    layout = chat.layout
    chat.adopt_all()
    entries: list[tuple[bytes, bytes | None]] = [(_header_bytes(chat), layout.header_eol)]
    kept_after = _anchor_kept_lines(chat) if layout.kept else {}
    for kept in kept_after.get(None, ()):
        entries.append((kept.raw, kept.eol))
    for message in chat.messages:
        entries.append((_message_bytes(message), message._eol))
        if kept_after:
            for kept in kept_after.get(id(message), ()):
                entries.append((kept.raw, kept.eol))

    parts: list[bytes] = [BOM] if layout.bom else []
    default_eol = layout.default_eol
    last = len(entries) - 1
    for index, (raw, eol) in enumerate(entries):
        parts.append(raw)
        if index == last:
            parts.append(layout.final_eol)
        else:
            parts.append(eol if eol else default_eol)
    return b"".join(parts)


def message_line(message: dict[str, Any]) -> bytes:
    """The line a message is written as: its original bytes when its data is unchanged, else
    `JSON.stringify` form."""
    return _message_bytes(message)


def _message_bytes(message: dict[str, Any]) -> bytes:
    raw = message._raw if isinstance(message, Message) else None
    return _object_bytes(message, raw)


def _object_bytes(value: dict[str, Any], raw: bytes | None) -> bytes:
    """`raw` when it still holds exactly `value`'s data, else `value` in `JSON.stringify` form."""
    canonical = dumps_canonical(value)
    written = js_bytes_from_canonical(canonical)
    if raw is None:
        return written
    # Lines SillyTavern wrote are already in that form: equal bytes need no parse to compare.
    return raw if written == raw or _same_data(canonical, raw) else written


def data_matches_raw(value: dict[str, Any], raw: bytes) -> bool:
    """True when the line `raw` still holds exactly `value`'s data (or is written identically)."""
    canonical = dumps_canonical(value)
    return js_bytes_from_canonical(canonical) == raw or _same_data(canonical, raw)


def _header_bytes(chat: Chat) -> bytes:
    layout = chat.layout
    header = chat.header
    if (
        not layout.header_had_metadata
        and isinstance(header.get("chat_metadata"), dict)
        and not header["chat_metadata"]
    ):
        # chat.metadata created an empty chat_metadata that the file never had: leave it out.
        header = {k: v for k, v in header.items() if k != "chat_metadata"}
    raw = layout.header_raw
    if not layout.header_valid:
        if not header:
            return raw or b""
        raise ChatFileError(
            f'line 1 of "{chat.path or chat.id}" (the header) is not valid JSON and was kept '
            "as-is, but the chat's metadata changed: fix line 1 before writing this chat",
            path=str(chat.path or chat.id),
        )
    return _object_bytes(header, raw)


def _same_data(canonical: str, raw: bytes) -> bool:
    try:
        return dumps_canonical(loads_strict(raw.decode("utf-8"))) == canonical
    except ValueError:
        return False


def kept_line_anchor(chat: Chat, kept: KeptLine, present: Collection[int]) -> Message | None:
    """The message a kept line follows now: the one it followed when read, or, when that one
    was removed, the nearest earlier message still present (`present`: their `id()`s); None
    means right after the header."""
    original = chat.layout.original_messages
    for index in range(min(kept.after_index, len(original) - 1), -1, -1):
        if id(original[index]) in present:
            return original[index]
    return None


def _anchor_kept_lines(chat: Chat) -> dict[int | None, list[KeptLine]]:
    """Group kept lines by the message they now follow (None: right after the header)."""
    present = {id(message) for message in chat.messages}
    groups: dict[int | None, list[KeptLine]] = {}
    for kept in chat.layout.kept:
        anchor = kept_line_anchor(chat, kept, present)
        groups.setdefault(None if anchor is None else id(anchor), []).append(kept)
    return groups


def _kept(
    line_no: int, raw: bytes, eol: bytes | None, reason: str, messages: list[Message]
) -> KeptLine:
    after = messages[-1] if messages else None
    return KeptLine(
        line=line_no, raw=raw, reason=reason, after=after, after_index=len(messages) - 1, eol=eol
    )


def _split_lines(data: bytes) -> list[tuple[bytes, bytes]]:
    """Split on `\\n` only (U+2028 and friends may sit raw inside JSON strings), keeping each
    line's own line end: `\\r\\n`, `\\n`, or for the last line what the file ends with."""
    segments = data.split(b"\n")
    ends_with_newline = segments[-1] == b""
    if ends_with_newline:
        segments.pop()
    lines: list[tuple[bytes, bytes]] = []
    last = len(segments) - 1
    for index, segment in enumerate(segments):
        carriage = segment.endswith(b"\r")
        raw = segment[:-1] if carriage else segment
        if index == last and not ends_with_newline:
            eol = b"\r" if carriage else b""
        else:
            eol = b"\r\n" if carriage else b"\n"
        lines.append((raw, eol))
    return lines


def _default_eol(lines: list[tuple[bytes, bytes | None]]) -> bytes:
    for _, eol in lines:
        if eol in (b"\n", b"\r\n"):
            return eol
    return b"\n"


def _parse_object(raw: bytes) -> tuple[dict[str, Any] | None, str]:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        return None, f"is not valid UTF-8 (byte {error.start + 1})"
    try:
        value = loads_strict(text)
    except json.JSONDecodeError as error:
        return None, f"is not valid JSON ({error.msg} at column {error.colno})"
    except ValueError as error:
        return None, f"is not valid JSON ({error})"
    except RecursionError:
        return None, "is not valid JSON (nested too deeply)"
    if not isinstance(value, dict):
        return None, f"is {json_type(value)}, not a JSON object"
    return value, ""


def json_type(value: Any) -> str:
    """How a JSON value is named in error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return "an object"


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise ChatFileError(
            f'no chat file at "{path}": check the path (SillyTavern keeps chats in '
            "data/<user>/chats/<character>/)",
            path=str(path),
        ) from None
    except IsADirectoryError:
        raise ChatFileError(
            f'"{path}" is a folder, not a chat file: name one .jsonl file inside it',
            path=str(path),
        ) from None
    except PermissionError:
        raise ChatFileError(
            f'cannot read "{path}": permission denied; check the file\'s permissions',
            path=str(path),
        ) from None
    except OSError as error:
        raise ChatFileError(
            f'cannot read "{path}": {error.strerror or error}', path=str(path)
        ) from None
