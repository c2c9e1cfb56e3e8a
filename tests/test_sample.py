"""The bundled sample chat: hand-written, about 200 messages, clear scenes, lossless."""

from __future__ import annotations

import itertools

from autorecap import read_chat, sample_chat_path
from autorecap.sample import sample_scenes
from autorecap.stfiles.jsonl import serialize_chat


def test_sample_chat_round_trips_and_has_the_promised_shape() -> None:
    path = sample_chat_path()
    chat = read_chat(path)
    assert serialize_chat(chat) == path.read_bytes()
    assert 195 <= len(chat.messages) <= 210
    assert sum(m.is_hidden for m in chat.messages) == 3
    assert sum(len(m.swipes or ()) > 1 for m in chat.messages) == 4
    assert any(m.is_narrator for m in chat.messages)
    assert len({m.text for m in chat.messages}) == len(chat.messages)
    times = [m.send_time for m in chat.messages]
    assert all(t is not None for t in times)
    assert times == sorted(times)  # type: ignore[type-var]


def test_sample_scenes_cover_the_chat_in_order() -> None:
    chat = read_chat(sample_chat_path())
    scenes = sample_scenes()
    assert len(scenes) >= 6
    assert scenes[0]["start"] == 0
    assert scenes[-1]["end"] == len(chat.messages) - 1
    for before, after in itertools.pairwise(scenes):
        assert after["start"] == before["end"] + 1
    assert all(scene["facts"] and scene["title"] for scene in scenes)
