"""`autorecap check`: every problem in a chat file, found without changing anything."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autorecap.core.data import LEGACY_NAMESPACE, NAMESPACE
from autorecap.core.dates import parse_send_date
from autorecap.core.model import Chat, Message
from autorecap.errors import ChatFileError, LineProblem
from autorecap.stfiles.jsonl import json_type, read_chat


@dataclass
class CheckReport:
    """What `check_chat_file` found in one file."""

    path: Path
    problems: list[LineProblem] = field(default_factory=list)
    chat: Chat | None = None

    @property
    def errors(self) -> list[LineProblem]:
        """Problems that make a strict read refuse the file."""
        return [p for p in self.problems if p.severity == "error"]

    @property
    def warnings(self) -> list[LineProblem]:
        """Oddities that are read and kept, but worth knowing about."""
        return [p for p in self.problems if p.severity == "warning"]

    @property
    def ok(self) -> bool:
        """True when the file has no errors (warnings allowed)."""
        return not self.errors

    def describe_format(self) -> str:
        """One line about the file's form: header kind, size, line ends, BOM, final newline."""
        chat = self.chat
        if chat is None:
            return "unreadable"
        layout = chat.layout
        if not layout.header_valid:
            kind = "unreadable header"
        elif next(iter(chat.header), None) == "chat_metadata":
            kind = "SillyTavern >= 1.14 header"
        else:
            kind = "SillyTavern <= 1.13 header"
        if layout.header_valid and not layout.header_had_metadata:
            kind += " without chat_metadata"
        ends = "CRLF" if layout.default_eol == b"\r\n" else "LF"
        parts = [
            kind,
            f"{len(chat.messages)} message{'' if len(chat.messages) == 1 else 's'}",
            f"{ends} line ends",
            "BOM" if layout.bom else "no BOM",
            "trailing newline" if layout.final_eol else "no trailing newline",
        ]
        if chat.is_group:
            parts.insert(1, "group chat")
        return ", ".join(parts)


def check_chat_file(path: str | Path) -> CheckReport:
    """Read `path` leniently and list every problem, line by line. Nothing is written."""
    file_path = Path(path)
    report = CheckReport(path=file_path)
    try:
        chat = read_chat(file_path, lenient=True)
    except ChatFileError as error:
        report.problems.append(LineProblem(0, str(error)))
        return report
    report.chat = chat
    problems = report.problems
    if chat.layout.header_raw is not None and not chat.layout.header_valid:
        problems.append(LineProblem(1, "the header is not a valid JSON object (kept as-is)"))
    else:
        problems.extend(_header_problems(chat))
    for kept in chat.layout.kept:
        if kept.reason:
            problems.append(LineProblem(kept.line, f"message line {kept.reason} (kept as-is)"))
        else:
            problems.append(LineProblem(kept.line, "blank line (kept as-is)", "warning"))
    for message in chat.messages:
        problems.extend(
            LineProblem(message._line, text, "warning") for text in _message_oddities(message)
        )
    problems.sort(key=lambda p: (p.line, p.severity != "error"))
    return report


def _header_problems(chat: Chat) -> Iterable[LineProblem]:
    header = chat.header
    raw = chat.layout.header_raw or b""
    for key in _duplicate_keys(raw):
        yield LineProblem(
            1, f"the header has the key {key!r} twice; only the last one is read", "warning"
        )
    metadata = header.get("chat_metadata")
    if "chat_metadata" in header and not isinstance(metadata, dict):
        yield LineProblem(1, "the header's chat_metadata is not an object")
    if "mes" in header and "chat_metadata" not in header and "user_name" not in header:
        yield LineProblem(
            1,
            "line 1 looks like a message, but SillyTavern reads line 1 as the header: the file "
            "may be missing its header line",
            "warning",
        )


def _message_oddities(message: Message) -> Iterable[str]:
    for key in _duplicate_keys(message._raw or b""):
        yield (
            f"the key {key!r} appears twice; only the last one is read, and the other is lost "
            "if the line is rewritten"
        )
    if "mes" not in message:
        yield "no 'mes' (message text); read as empty"
    elif not isinstance(message["mes"], str):
        yield f"'mes' is {json_type(message['mes'])}, not text; read as {message.text!r}"
    if "name" in message and not isinstance(message["name"], str):
        yield f"'name' is {json_type(message['name'])}, not text"
    for flag in ("is_user", "is_system"):
        if flag in message and not isinstance(message[flag], bool):
            yield f"'{flag}' is {json_type(message[flag])}, not true/false"
    extra = message.get("extra", {})
    if extra is None:
        yield "'extra' is null; read as empty (recap data will create it)"
    elif not isinstance(extra, dict):
        yield f"'extra' is {json_type(extra)}, not an object: recap data cannot be stored here"
    else:
        namespace = extra.get(NAMESPACE)
        if namespace is not None and not isinstance(namespace, dict):
            yield f"extra.{NAMESPACE} is {json_type(namespace)}, not an object"
        if LEGACY_NAMESPACE in extra:
            yield (
                f"recap data under the old key extra.{LEGACY_NAMESPACE}; it is read as is and "
                f"moves to extra.{NAMESPACE} on the next write to this message"
            )
    if "send_date" in message and parse_send_date(message["send_date"]) is None:
        yield f"'send_date' {message['send_date']!r} is not a date form SillyTavern writes"
    yield from _swipe_oddities(message)


def _swipe_oddities(message: Message) -> Iterable[str]:
    if "swipes" not in message:
        return
    swipes = message["swipes"]
    if not isinstance(swipes, list):
        yield f"'swipes' is {json_type(swipes)}, not a list"
        return
    swipe_id = message.get("swipe_id")
    if "swipe_id" not in message:
        yield "has 'swipes' but no 'swipe_id'"
    elif message.swipe_id is None:
        yield f"'swipe_id' is {json_type(swipe_id)}, not a whole number"
    elif not 0 <= message.swipe_id < len(swipes):
        yield f"'swipe_id' {swipe_id} is out of range: there are {len(swipes)} swipe(s)"
    elif swipes[message.swipe_id] != message.get("mes"):
        yield f"'mes' differs from the active swipe (swipes[{swipe_id}])"
    swipe_info = message.get("swipe_info")
    if swipe_info is not None:
        if not isinstance(swipe_info, list):
            yield f"'swipe_info' is {json_type(swipe_info)}, not a list"
        elif len(swipe_info) != len(swipes):
            yield (
                f"'swipe_info' has {len(swipe_info)} entries for {len(swipes)} swipe(s); "
                "recap data is not synced to swipes without an entry"
            )


def _duplicate_keys(raw: bytes) -> list[str]:
    if not raw or raw.count(b'":') < 2:
        return []
    duplicates: list[str] = []

    def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen and key not in duplicates:
                duplicates.append(key)
            seen.add(key)
        return dict(pairs)

    try:
        json.loads(raw.decode("utf-8"), object_pairs_hook=hook)
    except ValueError:
        return []
    return duplicates
