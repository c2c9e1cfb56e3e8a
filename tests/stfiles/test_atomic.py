"""Atomic writes (temp file, fsync, rename) and rotating backups."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from autorecap import ChatFileError, read_chat, set_data, write_chat
from autorecap.paths import backups_dir

HEADER = b'{"chat_metadata":{},"user_name":"unused","character_name":"unused"}'
ORIGINAL = HEADER + b'\n{"name":"A","mes":"one"}'


@pytest.fixture
def chat_file(tmp_path: Path) -> Path:
    path = tmp_path / "story.jsonl"
    path.write_bytes(ORIGINAL)
    return path


def _changed(path: Path, text: str = "recap") -> bytes:
    chat = read_chat(path)
    set_data(chat.messages[0], "memory", text)
    write_chat(chat)
    return path.read_bytes()


def test_write_replaces_the_file_and_leaves_no_temp_file(chat_file: Path) -> None:
    written = _changed(chat_file)
    assert b'"auto_recap_memory":{"memory":"recap"}' in written
    assert sorted(p.name for p in chat_file.parent.iterdir()) == ["story.jsonl"]


@pytest.mark.parametrize("failing", ["fsync", "replace", "write"])
def test_a_failed_write_leaves_the_previous_file_intact(
    chat_file: Path, monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    chat = read_chat(chat_file)
    set_data(chat.messages[0], "memory", "never lands")

    def boom(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    if failing == "write":
        real_fdopen = os.fdopen

        class HalfWritten:
            """Writes half the data to the temp file, then the disk fills up."""

            def __init__(self, fd: int, mode: str) -> None:
                self.inner = real_fdopen(fd, mode)

            def __enter__(self) -> HalfWritten:
                return self

            def __exit__(self, *exc: object) -> None:
                self.inner.close()

            def write(self, data: bytes) -> None:
                self.inner.write(data[: len(data) // 2])
                boom()

        monkeypatch.setattr(os, "fdopen", HalfWritten)
    else:
        monkeypatch.setattr(os, failing, boom)
    with pytest.raises(ChatFileError) as caught:
        write_chat(chat)
    assert "No space left on device. The previous file is unchanged" in str(caught.value)
    monkeypatch.undo()
    assert chat_file.read_bytes() == ORIGINAL
    assert sorted(p.name for p in chat_file.parent.iterdir()) == ["story.jsonl"]


def test_an_interrupt_mid_write_also_cleans_up(
    chat_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chat = read_chat(chat_file)
    set_data(chat.messages[0], "memory", "x")

    def interrupted(fd: int) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "fsync", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_chat(chat)
    monkeypatch.undo()
    assert chat_file.read_bytes() == ORIGINAL
    assert len(list(chat_file.parent.iterdir())) == 1


def test_error_target_folder_missing(tmp_path: Path, chat_file: Path) -> None:
    chat = read_chat(chat_file)
    with pytest.raises(ChatFileError, match=r"the folder .* does not exist; create it first"):
        write_chat(chat, tmp_path / "missing" / "story.jsonl")


def test_error_negative_backups(chat_file: Path) -> None:
    with pytest.raises(ChatFileError, match="backups must be 0 or more"):
        write_chat(read_chat(chat_file), backups=-1)


def test_a_symlinked_chat_stays_a_symlink(tmp_path: Path, chat_file: Path) -> None:
    link = tmp_path / "link.jsonl"
    link.symlink_to(chat_file)
    chat = read_chat(link)
    set_data(chat.messages[0], "memory", "through the link")
    write_chat(chat)
    assert link.is_symlink()
    assert b"through the link" in chat_file.read_bytes()


def test_rotating_backups_keep_the_newest_n(chat_file: Path, home: Path) -> None:
    versions = [ORIGINAL]
    for i in range(5):
        chat = read_chat(chat_file)
        set_data(chat.messages[0], "memory", f"version {i}")
        write_chat(chat, backups=3)
        versions.append(chat_file.read_bytes())
    folder = backups_dir("story")
    assert folder.is_relative_to(home)
    kept = sorted(folder.iterdir())
    assert len(kept) == 3
    # The backups are the files that were replaced, oldest first: versions 1..3 (0-based 1, 2, 3).
    assert [p.read_bytes() for p in kept] == versions[2:5]


def test_no_backup_of_a_new_file(tmp_path: Path, chat_file: Path) -> None:
    chat = read_chat(chat_file)
    write_chat(chat, tmp_path / "fresh.jsonl", backups=2)
    assert not backups_dir("story").exists()


def test_error_target_is_a_folder(tmp_path: Path, chat_file: Path) -> None:
    chat = read_chat(chat_file)
    folder = tmp_path / "out.jsonl"
    folder.mkdir()
    with pytest.raises(ChatFileError, match=r"it is a folder; give a file name"):
        write_chat(chat, folder)
    assert folder.is_dir()
    assert list(folder.iterdir()) == []
