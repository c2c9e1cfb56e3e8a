"""Automatic scene detection as messages arrive and when a chat opens (issue: scenes), and
`scenes hide/show` from the command line."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from autorecap import get_data, read_chat
from autorecap.core import running
from autorecap.core.events import ManualClock
from autorecap.core.scenes import break_indexes
from autorecap.recap.offline.engine import OfflineBackend
from autorecap.recapper import MessageRecapper
from autorecap.sample import sample_chat_path
from autorecap.session import Session
from autorecap.settings import Settings
from autorecap.testing import generate
from tests.test_cli import run


def test_scene_breaks_are_found_when_a_chat_opens_with_auto_scene_break_on_load() -> None:
    generated = generate(200, seed=4)
    session = Session(
        generated.chat, clock=ManualClock(), settings=Settings(auto_scene_break_on_load=True)
    )
    MessageRecapper(session, OfflineBackend())
    found = break_indexes(generated.chat.messages)
    ends = generated.scene_ends
    hits = [end for end in ends if any(abs(f - end) <= 2 for f in found)]
    extra = [f for f in found if not any(abs(f - end) <= 2 for end in ends)]
    assert len(hits) >= len(ends) - 1, (found, ends)
    assert len(extra) <= 2, (found, ends)
    assert running.versions(generated.chat)  # scenes recapped and folded in


def test_no_detection_on_load_by_default() -> None:
    generated = generate(200, seed=4)
    session = Session(generated.chat, clock=ManualClock(), settings=Settings())
    MessageRecapper(session, OfflineBackend())
    assert break_indexes(generated.chat.messages) == []


def test_new_messages_bring_new_scene_breaks() -> None:
    generated = generate(120, seed=6)
    settings = Settings(auto_scene_break_on_load=True, auto_scene_break_message_offset=0)
    session = Session(generated.chat, clock=ManualClock(), settings=settings)
    recapper = MessageRecapper(session, OfflineBackend())
    before = break_indexes(generated.chat.messages)
    first_new = len(generated.chat.messages)
    session.receive("*Two days later, at the Glass Market.* Mira haggles over 340 crowns.")
    for i in range(12):
        session.receive(f"Mira points at the stall with the spyglasses, the {i}th one today.")
    assert recapper.run_pending() == 13
    after = break_indexes(generated.chat.messages)
    assert len(after) == len(before) + 1
    assert after[-1] == first_new - 1  # the scene ended just before the time jump


def test_new_messages_do_not_detect_when_the_setting_is_off() -> None:
    generated = generate(120, seed=6)
    settings = Settings(auto_scene_break_on_new_message=False)
    session = Session(generated.chat, clock=ManualClock(), settings=settings)
    recapper = MessageRecapper(session, OfflineBackend())
    session.receive("*Two days later, at the Glass Market.* Mira haggles over 340 crowns.")
    recapper.run_pending()
    assert break_indexes(generated.chat.messages) == []


def test_scenes_hide_and_show_from_the_command_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "sample.jsonl"
    shutil.copyfile(sample_chat_path(), path)
    assert run(capsys, "scenes", str(path), "mark", "24", "Port Anvil")[0] == 0
    assert run(capsys, "scenes", str(path), "hide", "24")[0] == 0
    assert get_data(read_chat(path).messages[24], "scene_break_visible") is False
    assert run(capsys, "scenes", str(path), "show", "24")[0] == 0
    assert get_data(read_chat(path).messages[24], "scene_break_visible") is True
    code, _, err = run(capsys, "scenes", str(path), "hide", "25")
    assert code == 1
    assert "not a scene break" in err
