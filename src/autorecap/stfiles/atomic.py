"""Atomic file replacement with optional rotating backups."""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import stat
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from autorecap.errors import ChatFileError
from autorecap.paths import backups_dir


def atomic_write(path: Path, data: bytes, *, backups: int = 0, backup_name: str = "") -> None:
    """Replace `path` with `data` so that a reader sees either the old file or the new one.

    The data goes to a temporary file in the same folder, is fsynced, and is renamed over the
    target; the folder is fsynced too. On any failure the temporary file is removed and the
    previous file is left as it was. A symlink is followed, so the link keeps pointing at the
    chat. With `backups > 0` the previous file is first copied to the backups folder.
    """
    target = Path(os.path.realpath(path))
    folder = target.parent
    if not folder.is_dir():
        raise ChatFileError(
            f'cannot write "{path}": the folder "{folder}" does not exist; create it first',
            path=str(path),
        )
    if target.is_dir():
        raise ChatFileError(
            f'cannot write "{path}": it is a folder; give a file name, such as "{path}/chat.jsonl"',
            path=str(path),
        )
    if backups < 0:
        raise ChatFileError(f"backups must be 0 or more, not {backups}")
    try:
        existing_mode = stat.S_IMODE(target.stat().st_mode) if target.exists() else None
        if backups and existing_mode is not None:
            _rotate_backup(target, backup_name or target.stem, backups)
        fd, temp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=folder)
    except OSError as error:
        raise _write_error(path, error) from None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temp_name, existing_mode if existing_mode is not None else _new_file_mode())
        os.replace(temp_name, target)
    except BaseException as error:
        with contextlib.suppress(OSError):
            os.unlink(temp_name)
        if isinstance(error, OSError):
            raise _write_error(path, error) from None
        raise
    _fsync_folder(folder)


def _write_error(path: Path, error: OSError) -> ChatFileError:
    reason = error.strerror or str(error)
    return ChatFileError(
        f'could not write "{path}": {reason}. The previous file is unchanged; free some space '
        "or fix the permissions and try again",
        path=str(path),
    )


def _new_file_mode() -> int:
    """0o666 less the umask. Read from /proc where it can be: `os.umask` changes it (for every
    thread, for a moment) to read it."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    umask = os.umask(0o022)
    os.umask(umask)
    return 0o666 & ~umask


def _fsync_folder(folder: Path) -> None:
    # Makes the rename itself durable; not every platform can open a folder for this.
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _rotate_backup(target: Path, name: str, keep: int) -> Path:
    folder = backups_dir(name)
    folder.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    counter = 0
    backup = folder / f"{name}.{stamp}-{counter:03d}.jsonl"
    while backup.exists():
        counter += 1
        backup = folder / f"{name}.{stamp}-{counter:03d}.jsonl"
    shutil.copyfile(target, backup)
    # Names carry a sortable UTC stamp, so name order is age order.
    existing = sorted(folder.glob(f"{glob.escape(name)}.*.jsonl"))
    for old in existing[:-keep]:
        with contextlib.suppress(OSError):
            old.unlink()
    return backup
