"""Where autorecap keeps everything of its own."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

HOME_ENV = "AUTORECAP_HOME"


def autorecap_home(*, create: bool = False) -> Path:
    """The data directory: `$AUTORECAP_HOME`, else the platform's per-user data directory.

    With `create=True` the directory is made if it is missing.
    """
    configured = os.environ.get(HOME_ENV, "").strip()
    home = (
        Path(configured).expanduser()
        if configured
        else Path(platformdirs.user_data_dir("autorecap", appauthor=False))
    )
    if create:
        home.mkdir(parents=True, exist_ok=True)
    return home


def backups_dir(chat_id: str) -> Path:
    """The folder that holds the rotating backups of one chat."""
    return autorecap_home() / "backups" / _safe_name(chat_id)


def _safe_name(name: str) -> str:
    # Chat ids are file names already, but a chat read from an odd path may carry separators.
    cleaned = name.replace(os.sep, "_").replace("/", "_").strip()
    return cleaned or "_"
