"""The bundled sample chat: a hand-written roleplay with clear scenes."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

_DATA = resources.files("autorecap") / "data"


def sample_chat_path() -> Path:
    """Path of the bundled sample chat (a SillyTavern JSONL file of about 200 messages)."""
    return Path(str(_DATA / "sample_chat.jsonl"))


def sample_scenes() -> list[dict[str, Any]]:
    """The sample chat's scenes: `title`, `start` and `end` message indexes, planted `facts`."""
    data = json.loads((_DATA / "sample_chat.scenes.json").read_text(encoding="utf-8"))
    scenes: list[dict[str, Any]] = data["scenes"]
    return scenes
