"""How the SQL stores turn chats into rows and back: the JSON they keep and the layout of a
file."""

from __future__ import annotations

import json
from typing import Any

from autorecap.core.jsjson import dumps_canonical
from autorecap.core.model import FileLayout, Message
from autorecap.stfiles.jsonl import data_matches_raw


def changed_message_json(message: Message) -> str | None:
    raw = message._raw
    if raw is not None and data_matches_raw(message, raw):
        return None
    return storable(message)


def storable(value: dict[str, Any]) -> str:
    text = dumps_canonical(value)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates cannot be stored as TEXT; escape them
        text = json.dumps(value, ensure_ascii=True, separators=(",", ":"), allow_nan=False)
    return text


def layout_json(layout: FileLayout) -> str:
    return json.dumps(
        {
            "bom": layout.bom,
            "default_eol": layout.default_eol.decode("ascii"),
            "final_eol": layout.final_eol.decode("ascii"),
            "header_eol": (layout.header_eol or b"").decode("ascii"),
            "header_had_metadata": layout.header_had_metadata,
            "header_valid": layout.header_valid,
            "from_file": layout.from_file,
        }
    )


def layout_from_json(text: str) -> FileLayout:
    data = json.loads(text)
    return FileLayout(
        bom=data["bom"],
        default_eol=data["default_eol"].encode("ascii"),
        final_eol=data["final_eol"].encode("ascii"),
        header_eol=data["header_eol"].encode("ascii") or None,
        header_had_metadata=data["header_had_metadata"],
        header_valid=data["header_valid"],
        from_file=bool(data.get("from_file", False)),
    )


def index_at_or_before(positions: list[int], after_pos: int) -> int:
    index = -1
    for i, pos in enumerate(positions):
        if pos <= after_pos:
            index = i
        else:
            break
    return index


def changed_header_json(value: dict[str, Any], raw: bytes | None, layout: FileLayout) -> str | None:
    """The header's JSON to store, or None when the header line as read still says it."""
    if raw is not None and layout.header_valid and data_matches_raw(value, raw):
        return None
    if raw is not None and not layout.header_valid and not value:
        return None
    return storable(value)
