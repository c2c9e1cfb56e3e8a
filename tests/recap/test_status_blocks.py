"""A chat whose character prints a status block on every reply is recapped as if it had none,
and a status block that moves to another day or place is a scene cue."""

from __future__ import annotations

import copy
import re

from autorecap.core import running
from autorecap.core.data import get_data, get_memory
from autorecap.core.model import Chat
from autorecap.core.tokens import get_counter
from autorecap.recap import run_pipeline
from autorecap.recap.offline.cues import STATUS_DAY, STATUS_PLACE, Turn, score_scene_starts
from autorecap.recap.offline.engine import OfflineBackend
from autorecap.settings import Settings
from autorecap.testing import generate

STORY = "The bay is dark except for the office light, and the coffee has gone cold again. " * 3


def _recapped(chat: Chat) -> tuple[list[str], list[str], str]:
    """The chat's message recaps, scene recaps and running recap."""
    counter = get_counter()
    run_pipeline(chat, OfflineBackend(counter), Settings(), counter, now_ms=0)
    current = running.current(chat)
    scene_recaps = [get_data(m, "scene_recap_memory") for m in chat.messages]
    return (
        [get_memory(m) for m in chat.messages],
        [r for r in scene_recaps if isinstance(r, str)],
        str(current["content"]) if current else "",
    )


def _body(scene_recap: str) -> str:
    return re.sub(r"^\[[^\]]*\] ?", "", scene_recap)


def test_a_chat_with_a_status_block_on_every_reply_is_recapped_as_without_them() -> None:
    plain = generate(160, seed=3).chat
    tracked = copy.deepcopy(plain)
    for number, message in enumerate(tracked.messages):
        if not message.is_user and not message.is_narrator:
            # the same place and day throughout, a gauge that moves every reply
            message["mes"] = (
                f"{message.text}\n\n---\n📍 Location: The harbour office\n"
                f"🕐 Time: Day 1, evening\n❤️ Affection: {20 + number % 50}/100"
            )
    messages, scene_recaps, running_recap = _recapped(tracked)
    plain_messages, plain_scenes, _ = _recapped(plain)
    assert messages == plain_messages
    # the same scenes, said nearly the same (the header's length changes the room left), in
    # the place the status blocks give
    assert len(scene_recaps) == len(plain_scenes)
    for tracked_recap, plain_recap in zip(scene_recaps, plain_scenes, strict=True):
        words, plain_words = set(_body(tracked_recap).split()), set(_body(plain_recap).split())
        assert len(words & plain_words) >= 0.85 * len(plain_words), tracked_recap
    assert all(r.startswith("[") and "The harbour office]" in r for r in scene_recaps)
    assert running_recap, "no running recap"
    said = [*messages, *scene_recaps, running_recap]
    assert not any("Affection" in r or "/100" in r or "Location" in r for r in said)


def _status(place: str, day: str) -> str:
    return f"\n\n```\n[Location: {place} | Time: {day}, evening | Mood: calm]\n```"


def test_a_status_block_on_another_day_or_in_another_place_is_a_scene_cue() -> None:
    def cues(before: tuple[str, str], after: tuple[str, str]) -> dict[str, float]:
        turns = [
            Turn(STORY, status_place=before[0], status_day=before[1]),
            Turn(STORY, status_place=after[0], status_day=after[1]),
        ]
        found = score_scene_starts(turns)[0]
        return dict.fromkeys(found.cues, found.score)

    assert "time" in cues(("harbour", "day 2"), ("harbour", "day 3"))
    assert "place" in cues(("harbour", "day 2"), ("old mill", "day 2"))
    assert cues(("harbour", "day 2"), ("harbour", "day 2")) == {}
    # a message with no status block says nothing of the last one's
    assert "time" not in cues(("harbour", "day 2"), ("", ""))
    assert STATUS_PLACE < STATUS_DAY


def test_the_detector_reads_the_status_blocks_of_the_messages() -> None:
    from autorecap.core.scenes import break_indexes
    from autorecap.recap.detection import detect_scene_breaks

    rows = []
    for day in (1, 2, 3):
        for turn in range(14):
            user = turn % 2 == 0
            text = f"{STORY} Line {turn}."
            rows.append(
                {
                    "name": "Tomas" if user else "Mira",
                    "is_user": user,
                    "mes": text if user else text + _status("The harbour office", f"Day {day}"),
                }
            )
    chat = Chat(rows, chat_id="tracked")
    detect_scene_breaks(chat, OfflineBackend(), Settings())
    # the first reply of days 2 and 3 carries the new day (with no status block: no break)
    assert [i + 1 for i in break_indexes(chat.messages)] == [15, 29]
