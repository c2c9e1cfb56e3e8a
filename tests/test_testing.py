"""The seeded chat generator (`autorecap.testing`): determinism, SillyTavern shapes, and the
ground truth (scenes, planted facts) that evaluations rely on."""

from __future__ import annotations

import itertools
import re
import statistics
from datetime import datetime
from typing import Any

import pytest

from autorecap.core.data import NAMESPACE
from autorecap.core.model import Chat, Message
from autorecap.stfiles.jsonl import parse_chat, serialize_chat
from autorecap.testing import GeneratedChat, PlantedFact, Scene, generate, generate_chat

ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
# Words that announce a jump in time, as scene openings do ("Two days later", "By nightfall").
TIME_CUE = re.compile(
    r"\b(later|morning|evening|night|nightfall|dawn|dusk|noon|midnight|first light|afternoon|"
    r"next day)\b",
    re.IGNORECASE,
)
USER_KEYS = ["name", "is_user", "is_system", "send_date", "mes", "extra"]
CHARACTER_KEYS = [
    *USER_KEYS,
    "gen_started",
    "gen_finished",
    "swipe_id",
    "swipes",
    "swipe_info",
]
GROUP_CHARACTER_KEYS = [
    *USER_KEYS,
    "gen_started",
    "gen_finished",
    "force_avatar",
    "original_avatar",
    "swipe_id",
    "swipes",
    "swipe_info",
]
SWIPE_INFO_KEYS = ["send_date", "gen_started", "gen_finished", "extra"]


@pytest.fixture(scope="module")
def medium() -> GeneratedChat:
    return generate(2000, seed=11, with_recaps=True)


@pytest.fixture(scope="module")
def medium_group() -> GeneratedChat:
    return generate(2000, seed=12, group=True, with_recaps=True)


@pytest.fixture(scope="module")
def large() -> GeneratedChat:
    return generate(10_000, seed=13)


def texts_of(message: dict[str, Any]) -> list[str]:
    """The active text and every swipe of a message."""
    return [message["mes"], *message.get("swipes", ())]


def when(message: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(message["send_date"].replace("Z", "+00:00"))


# -- determinism and sizes ---------------------------------------------------------------------


@pytest.mark.parametrize("group", [False, True])
def test_same_arguments_give_identical_bytes(group: bool) -> None:
    first = generate(400, seed=5, group=group, with_recaps=True)
    second = generate(400, seed=5, group=group, with_recaps=True)
    assert serialize_chat(first.chat) == serialize_chat(second.chat)
    assert first.scenes == second.scenes
    assert first.facts == second.facts


def test_generate_chat_is_generate_dot_chat() -> None:
    chat = generate_chat(300, seed=9, with_recaps=True)
    assert isinstance(chat, Chat)
    assert serialize_chat(chat) == serialize_chat(generate(300, seed=9, with_recaps=True).chat)
    assert chat.id == "generated-300-9"


def test_generate_chat_keeps_its_old_keywords() -> None:
    chat = generate_chat(
        60, seed=2, with_recaps=True, user="Ada", character="Brother Ivel", chat_id="my-chat"
    )
    assert chat.id == "my-chat"
    names = {m.name for m in chat.messages}
    assert {"Ada", "Brother Ivel"} <= names
    assert all(m["name"] == "Ada" for m in chat.messages if m.is_user)


def test_different_seeds_differ() -> None:
    a, b = generate(300, seed=1), generate(300, seed=2)
    assert serialize_chat(a.chat) != serialize_chat(b.chat)
    assert [m["mes"] for m in a.chat.messages] != [m["mes"] for m in b.chat.messages]
    assert [f.answer for f in a.facts] != [f.answer for f in b.facts]


@pytest.mark.parametrize("n", [0, 1, 2, 3, 100])
def test_sizes(n: int) -> None:
    generated = generate(n, seed=4, with_recaps=True)
    assert len(generated.chat) == n
    assert len(generated.chat.messages) == n
    if n == 0:
        assert generated.scenes == []
        assert generated.facts == []
        assert generated.scene_ends == []
    else:
        assert generated.scenes[0].start == 0
        assert generated.scenes[-1].end == n - 1
    parsed = parse_chat(serialize_chat(generated.chat), chat_id="x")
    assert len(parsed.messages) == n


def test_ten_thousand_messages(large: GeneratedChat) -> None:
    assert len(large.chat) == 10_000
    assert len(large.scenes) > 100
    # (1, 3) facts per scene of at least 12 messages: nothing ran out.
    assert len(large.scenes) <= len(large.facts) <= 3 * len(large.scenes)
    assert {f.scene for f in large.facts} == set(range(len(large.scenes)))


def test_round_trip_is_byte_exact(medium: GeneratedChat, medium_group: GeneratedChat) -> None:
    for generated in (medium, medium_group, generate(500, seed=3)):
        data = serialize_chat(generated.chat)
        parsed = parse_chat(data, chat_id=generated.chat.id)
        assert serialize_chat(parsed) == data
        assert [dict(m) for m in parsed.messages] == [dict(m) for m in generated.chat.messages]
        assert parsed.header == generated.chat.header
        assert data.count(b"\n") == len(generated.chat)  # no trailing newline, like ST


# -- message shapes ----------------------------------------------------------------------------


def test_field_shapes(medium: GeneratedChat) -> None:
    messages = medium.chat.messages
    kinds = {"user": 0, "character": 0, "narrator": 0, "hidden": 0, "swiped": 0}
    for message in messages:
        assert isinstance(message, Message)
        assert isinstance(message["mes"], str)
        assert message["mes"].strip() == message["mes"]
        assert message["mes"]
        if message["is_system"]:
            kinds["hidden"] += 1
            assert list(message) == USER_KEYS
            assert message["is_user"] is True
            assert message["mes"].startswith("(OOC: ")
            assert message["mes"].endswith(")")
            assert message["extra"] == {}
        elif message["is_user"]:
            kinds["user"] += 1
            assert list(message) == USER_KEYS
            assert message["name"] == "Tomas"
        elif message.is_narrator:
            kinds["narrator"] += 1
            assert list(message) == USER_KEYS
            assert message["name"] == "Narrator"
            assert set(message["extra"]) == {"type", NAMESPACE}
        else:
            kinds["character"] += 1
            assert list(message) == CHARACTER_KEYS
            assert message["name"] == "Captain Mira"
            assert message["extra"]["api"] == "openai"
            assert message["extra"]["model"] == "some-model-v1"
            swipes = message["swipes"]
            swipe_id = message["swipe_id"]
            assert len(swipes) in (1, 2, 3)
            assert 0 <= swipe_id < len(swipes)
            assert message["mes"] == swipes[swipe_id]
            assert len(set(swipes)) == len(swipes)
            info = message["swipe_info"]
            assert len(info) == len(swipes)
            for entry in info:
                assert list(entry) == SWIPE_INFO_KEYS
                assert entry["gen_started"] < entry["gen_finished"] == entry["send_date"]
                assert entry["extra"]["api"] == "openai"
            active = info[swipe_id]
            assert message["send_date"] == active["send_date"]
            assert message["gen_started"] == active["gen_started"]
            assert message["gen_finished"] == active["gen_finished"]
            starts = [entry["gen_started"] for entry in info]
            assert starts == sorted(starts)
            if len(swipes) > 1:
                kinds["swiped"] += 1
    assert kinds["user"] > 600
    assert kinds["character"] > 600
    assert 40 <= kinds["narrator"] <= 300
    assert 10 <= kinds["hidden"] <= 90
    assert 40 <= kinds["swiped"] <= 250
    assert not medium.chat.is_group


def test_swipe_times_stay_before_the_next_message(medium: GeneratedChat) -> None:
    messages = medium.chat.messages
    for message, following in itertools.pairwise(messages):
        for entry in message.get("swipe_info", ()):
            assert entry["gen_finished"] < following["send_date"]


def test_dates_are_iso_and_strictly_increasing(medium: GeneratedChat) -> None:
    messages = medium.chat.messages
    for message in messages:
        assert ISO.match(message["send_date"]), message["send_date"]
        assert message.send_time is not None
    times = [when(m) for m in messages]
    assert all(a < b for a, b in itertools.pairwise(times))
    # A scene change is a longer pause than the pauses inside scenes.
    starts = {scene.start for scene in medium.scenes}
    gaps_at_breaks = [
        (times[i] - times[i - 1]).total_seconds() for i in range(1, len(times)) if i in starts
    ]
    gaps_inside = [
        (times[i] - times[i - 1]).total_seconds() for i in range(1, len(times)) if i not in starts
    ]
    assert min(gaps_at_breaks) > statistics.median(gaps_inside)
    assert statistics.median(gaps_at_breaks) > 10 * statistics.median(gaps_inside)


def test_messages_are_varied_prose(medium: GeneratedChat) -> None:
    texts = [m["mes"] for m in medium.chat.messages]
    assert len(set(texts)) == len(texts)  # no two messages alike at n <= 2000
    assert all(a != b for a, b in itertools.pairwise(texts))
    characters = [m for m in medium.chat.messages if not m.is_user and not m.is_narrator]
    users = [m for m in medium.chat.messages if m.is_user and not m.is_system]
    with_actions = sum(bool(re.search(r"\*[^*]+\*", m["mes"])) for m in characters)
    assert with_actions / len(characters) > 0.9
    assert all('"' in m["mes"] for m in characters)  # everyone speaks
    char_lengths = [len(m["mes"]) for m in characters]
    user_lengths = [len(m["mes"]) for m in users]
    assert statistics.mean(user_lengths) < statistics.mean(char_lengths)
    assert min(char_lengths) < 150 < 400 < max(char_lengths)
    assert min(user_lengths) < 60
    assert max(user_lengths) > 150
    for text in texts:
        assert "lorem" not in text.lower()
        assert "SCENE" not in text
        assert "---" not in text
        assert "{" not in text
        assert "}" not in text


def test_group_chat_avatars(medium_group: GeneratedChat) -> None:
    chat = medium_group.chat
    assert chat.is_group
    assert chat.id == "generated-group-2000-12"
    speakers = set()
    for message in chat.messages:
        if message.is_user or message.is_narrator:
            assert "original_avatar" not in message
            assert "force_avatar" not in message
            continue
        name = message["name"]
        speakers.add(name)
        assert list(message) == GROUP_CHARACTER_KEYS
        assert message["original_avatar"] == f"{name}.png"
        assert message["force_avatar"] == f"characters/{name}.png"
        assert message.character_key == f"{name}.png"
    assert "Captain Mira" in speakers
    assert 2 <= len(speakers) <= 3
    counts = [sum(m["name"] == s for m in chat.messages) for s in speakers]
    assert min(counts) > 200  # everyone gets a real share of the lines


@pytest.mark.parametrize("seed", range(6))
def test_group_chats_have_two_or_three_characters(seed: int) -> None:
    chat = generate(150, seed=seed, group=True).chat
    speakers = {m["name"] for m in chat.messages if not m.is_user and not m.is_narrator}
    assert 2 <= len(speakers) <= 3


# -- scenes ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n", "seed", "scene_length"), [(2000, 1, (12, 40)), (777, 2, (5, 9)), (50, 3, (1, 3))]
)
def test_scenes_are_contiguous_and_cover_the_chat(
    n: int, seed: int, scene_length: tuple[int, int]
) -> None:
    generated = generate(n, seed=seed, scene_length=scene_length)
    scenes = generated.scenes
    assert scenes[0].start == 0
    assert scenes[-1].end == n - 1
    for scene, following in itertools.pairwise(scenes):
        assert following.start == scene.end + 1
        assert following.place != scene.place
    low, high = scene_length
    for scene in scenes[:-1]:
        assert low <= scene.end - scene.start + 1 <= high
    assert scenes[-1].end - scenes[-1].start + 1 in range(1, high + 1)
    for scene in scenes:
        assert isinstance(scene, Scene)
        assert scene.title
        assert scene.place
    assert generated.scene_ends == [scene.end for scene in scenes[:-1]]


def test_scene_starts_announce_time_and_place(large: GeneratedChat) -> None:
    messages = large.chat.messages
    starts = {scene.start for scene in large.scenes}
    for number, scene in enumerate(large.scenes):
        opening = messages[scene.start]
        assert not opening.is_user
        assert scene.place in opening["mes"]
        if number:
            assert TIME_CUE.search(opening["mes"]), opening["mes"]
    middle = [m for i, m in enumerate(messages) if i not in starts and not m.is_system]
    cued = sum(bool(TIME_CUE.search(m["mes"])) for m in middle)
    assert cued / len(middle) < 0.05
    narrated = sum(messages[s.start].is_narrator for s in large.scenes[1:])
    assert narrated / (len(large.scenes) - 1) > 0.4  # "often a narrator message"


def test_place_names_recur_inside_their_scenes(large: GeneratedChat) -> None:
    messages = large.chat.messages
    mentions = 0
    for scene in large.scenes:
        inside = [messages[i]["mes"] for i in range(scene.start + 1, scene.end + 1)]
        mentions += sum(scene.place in text for text in inside)
    assert mentions / len(messages) > 0.2


def words(texts: list[str]) -> set[str]:
    return {w for text in texts for w in re.findall(r"[a-z']{4,}", text.lower())}


def overlap(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b)


def test_vocabulary_shifts_at_scene_breaks(large: GeneratedChat) -> None:
    texts = [m["mes"] for m in large.chat.messages]
    across, within = [], []
    for scene, following in zip(large.scenes, large.scenes[1:], strict=False):
        if scene.end - scene.start < 16 or following.end - following.start < 8:
            continue
        before = words(texts[scene.end - 7 : scene.end + 1])
        earlier = words(texts[scene.end - 15 : scene.end - 7])
        after = words(texts[following.start : following.start + 8])
        across.append(overlap(before, after))
        within.append(overlap(earlier, before))
    assert len(across) > 100
    assert statistics.mean(within) > 1.3 * statistics.mean(across)


# -- facts -------------------------------------------------------------------------------------


def count_occurrences(messages: list[Message], answers: list[str]) -> dict[str, int]:
    """How often each answer occurs as a substring of any text of the chat (swipes included).

    Exact, but faster than searching the whole chat for every answer: an answer with a digit can
    only occur in a text with a digit, and any answer only in a text containing its first word.
    """
    texts = [t for m in messages for t in texts_of(m)]
    with_digits = [t for t in texts if re.search(r"\d", t)]
    by_first_word: dict[str, list[str]] = {}
    for answer in answers:
        first = answer.split()[0]
        if first not in by_first_word and not re.search(r"\d", answer):
            by_first_word[first] = [t for t in texts if first in t]
    counts = {}
    for answer in answers:
        haystack = with_digits if re.search(r"\d", answer) else by_first_word[answer.split()[0]]
        counts[answer] = sum(t.count(answer) for t in haystack)
    return counts


def assert_facts_hold(generated: GeneratedChat, facts_per_scene: tuple[int, int]) -> None:
    messages = generated.chat.messages
    facts = generated.facts
    answers = [f.answer for f in facts]
    assert len(set(answers)) == len(answers)
    assert len({f.question for f in facts}) == len(facts)
    assert len({f.index for f in facts}) == len(facts)
    occurrences = count_occurrences(messages, answers)
    for fact in facts:
        assert isinstance(fact, PlantedFact)
        message = messages[fact.index]
        scene = generated.scenes[fact.scene]
        assert scene.start < fact.index <= scene.end  # never the scene's opening message
        assert not message.is_system
        assert fact.answer in fact.text
        assert fact.text in message["mes"]
        assert fact.question.endswith("?")
        assert fact.answer not in fact.question
        own = sum(text.count(fact.answer) for text in texts_of(message))
        assert own >= 1
        assert occurrences[fact.answer] == own, fact
        for other in texts_of(message)[1:]:
            if other != message["mes"]:
                assert fact.answer not in other  # only the active swipe states it
    low, high = facts_per_scene
    for number, scene in enumerate(generated.scenes):
        count = sum(f.scene == number for f in facts)
        assert count <= high
        if scene.end - scene.start >= high + 1:
            assert count >= low


@pytest.mark.parametrize("group", [False, True])
def test_facts_are_planted_once_and_only_once(
    group: bool, medium: GeneratedChat, medium_group: GeneratedChat
) -> None:
    generated = medium_group if group else medium
    assert len(generated.facts) > 100
    assert_facts_hold(generated, (1, 3))


def test_facts_in_a_ten_thousand_message_chat(large: GeneratedChat) -> None:
    assert_facts_hold(large, (1, 3))
    kinds = {
        "code": r"^\d{4}$",
        "price": r"^\d{3} crowns$",
        "date": r"^\d\dth of [A-Z][a-z]+$",
        "name or place": r"^[A-Z][a-z]+ [A-Z][a-z]+$",
    }
    for pattern in kinds.values():
        assert any(re.match(pattern, f.answer) for f in large.facts), pattern


def test_chatter_has_no_digits(large: GeneratedChat) -> None:
    fact_messages = {f.index for f in large.facts}
    for index, message in enumerate(large.chat.messages):
        if index not in fact_messages:
            assert not any(re.search(r"\d", t) for t in texts_of(message)), message["mes"]


def test_facts_are_spread_over_positions_and_speakers(large: GeneratedChat) -> None:
    messages = large.chat.messages
    speakers = {
        "user" if messages[f.index].is_user else
        "narrator" if messages[f.index].is_narrator else "character"
        for f in large.facts
    }  # fmt: skip
    assert speakers == {"user", "narrator", "character"}
    offsets = {f.index - large.scenes[f.scene].start for f in large.facts}
    assert len(offsets) > 20


def test_facts_per_scene_setting() -> None:
    generated = generate(1500, seed=8, facts_per_scene=(2, 2), scene_length=(10, 20))
    assert_facts_hold(generated, (2, 2))
    per_scene = [sum(f.scene == s for f in generated.facts) for s in range(len(generated.scenes))]
    assert set(per_scene) == {2}
    assert generate(300, seed=8, facts_per_scene=(0, 0)).facts == []


def test_fact_pools_running_out_is_graceful() -> None:
    # About 1,600 facts asked for: more distinct questions than the pools hold.
    generated = generate(3000, seed=1, scene_length=(4, 5), facts_per_scene=(3, 3))
    wanted = sum(min(3, s.end - s.start - 1) for s in generated.scenes)
    assert 1000 < len(generated.facts) < wanted
    assert_facts_hold(generated, (0, 3))


def test_participant_names_never_collide_with_answers() -> None:
    generated = generate(3000, seed=2, user="Harrow Vane", character="Captain Ysolde 4417")
    assert_facts_hold(generated, (1, 3))
    assert all("Harrow" not in f.answer and "Ysolde" not in f.answer for f in generated.facts)
    assert all(f.answer != "4417" for f in generated.facts)


# -- recaps ------------------------------------------------------------------------------------


def test_recaps_on_every_visible_message(medium: GeneratedChat) -> None:
    facts = {f.index: f for f in medium.facts}
    for index, message in enumerate(medium.chat.messages):
        if message.is_system:
            assert NAMESPACE not in message["extra"]
            continue
        recap = message["extra"][NAMESPACE]
        assert list(recap) == ["memory", "include"]
        assert recap["include"] is None
        memory = recap["memory"]
        assert isinstance(memory, str)
        assert memory[0].isupper()
        assert memory.endswith(".")
        assert "\n" not in memory
        assert len(memory) < 300
        if index in facts:
            assert facts[index].answer in memory
        info = message.get("swipe_info")
        if info is not None:
            for number, entry in enumerate(info):
                if number == message["swipe_id"]:
                    assert entry["extra"][NAMESPACE] == recap
                    assert entry["extra"][NAMESPACE] is not recap
                else:
                    assert NAMESPACE not in entry["extra"]
    memories = [m["extra"][NAMESPACE]["memory"] for m in medium.chat.messages if not m.is_system]
    assert len(set(memories)) > len(memories) / 2


def test_no_recaps_unless_asked() -> None:
    chat = generate(300, seed=6).chat
    assert b"auto_recap_memory" not in serialize_chat(chat)


# -- arguments ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "complaint"),
    [
        ({"scene_length": (0, 5)}, "scene_length"),
        ({"scene_length": (9, 5)}, "scene_length"),
        ({"facts_per_scene": (3, 1)}, "facts_per_scene"),
        ({"facts_per_scene": (-1, 1)}, "facts_per_scene"),
        ({"hidden_rate": 1.5}, "hidden_rate"),
        ({"swipe_rate": -0.1}, "swipe_rate"),
        ({"hidden_rate": 0.6, "narrator_rate": 0.6}, "must not exceed 1"),
        ({"user": " "}, "names must not be empty"),
    ],
)
def test_bad_arguments_are_refused(kwargs: dict[str, Any], complaint: str) -> None:
    with pytest.raises(ValueError, match=complaint):
        generate(10, **kwargs)


def test_negative_size_is_refused() -> None:
    with pytest.raises(ValueError, match="n_messages"):
        generate(-1)


def test_rates_can_be_turned_off() -> None:
    chat = generate(400, seed=3, hidden_rate=0.0, swipe_rate=0.0, narrator_rate=0.0).chat
    assert not any(m.is_system for m in chat.messages)
    assert all(len(m.get("swipes", [None])) == 1 for m in chat.messages)
    swiped = generate(400, seed=3, swipe_rate=1.0).chat
    characters = [m for m in swiped.messages if "swipes" in m]
    assert all(2 <= len(m["swipes"]) <= 3 for m in characters)
