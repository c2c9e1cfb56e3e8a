"""The offline scene cues read on their own: where a scene is said to happen, datelines, and
send dates that tell nothing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from autorecap.core.model import Chat
from autorecap.core.scenes import break_indexes
from autorecap.evaluation.corpus import from_generated, proxy_view
from autorecap.recap.detection import detect_scene_breaks
from autorecap.recap.offline.cues import (
    THRESHOLD,
    UNDATED_THRESHOLD,
    Turn,
    pick_scene_starts,
    score_scene_starts,
    threshold_for,
)
from autorecap.recap.offline.engine import OfflineBackend
from autorecap.recap.offline.places import place_of
from autorecap.settings import Settings
from autorecap.testing import generate


@pytest.mark.parametrize(
    ("texts", "place"),
    [
        (["We met again in Porto, by the river."], "Porto"),
        (["*The rain follows them down Weir Street.*"], "Weir Street"),
        (["They wait at the fish market for the boat."], "the fish market"),
        (["We wait at the train station until the last bus leaves."], "the train station"),
        (["They meet in the car park behind the mill."], "the car park"),
        (["She picks up the kitchen knife and turns it over."], ""),
        (["Nobody says where they are."], ""),
        # A time is no place, and neither is a lot of something.
        (["We met in May, back when it rained."], ""),
        (["See you at Christmas!"], ""),
        (["I ate a lot of cake at the party."], ""),
        (["Dinner at Spring Street tonight."], "Spring Street"),
        (["We met at The Rusty Anchor, as always."], "The Rusty Anchor"),
        (["They landed in The Hague on Monday."], "The Hague"),
        (["Mass at All Saints was long."], "All Saints"),
    ],
)
def test_the_place_of_a_scene(texts: list[str], place: str) -> None:
    assert place_of(texts) == place


@pytest.mark.parametrize(
    "text",
    [
        "Plus interest, at Mrs. Perch's rate, which I calculate at three dollars.",
        "She left it with Dr. Faust for the night.",
        "He stayed at Father Mulcahy's after Mass.",
    ],
)
def test_a_person_after_a_title_is_no_place(text: str) -> None:
    assert place_of([text]) == ""


def test_a_speaker_is_no_place() -> None:
    assert place_of(["Tea at Ansel's, then home."], ["Ansel"]) == ""


def test_a_sentence_after_a_gesture_is_no_place() -> None:
    """With the asterisks gone, "*in from outside* What's going on?" reads "outside What's":
    a word like "What's" names no place."""
    text = "*having heard her tone from outside* What's going on? Sister?"
    assert place_of([text]) == ""


FILLER = "The bay is dark except for the office light, and the coffee has gone cold again. " * 3


def _cues_after_a_scene(opening: str) -> tuple[str, ...]:
    """The cues of a narrated message that opens with `opening`, after one of a scene."""
    turns = [Turn("*Dana hands over the keys.* " + FILLER), Turn(opening + FILLER)]
    return score_scene_starts(turns)[0].cues


@pytest.mark.parametrize(
    "opening",
    [
        "*Station 6, 4:50 a.m. ",
        "*Thursday the sixteenth, two in the afternoon, and the union hall smells of coffee. ",
        "*Christmas Eve. ",
        "Calloway County Courthouse, Friday, November 17th, 9:20 a.m. ",
        "November comes in cold. ",
    ],
)
def test_a_dateline_opening_narration_starts_a_scene(opening: str) -> None:
    assert "time" in _cues_after_a_scene(opening)


@pytest.mark.parametrize(
    "opening",
    [
        "*By the second evening the sea is only a memory. ",
        "On the second day in the dunes the wind dies completely. ",
        "*Two days out of Tel Ruzza the sand gives way to salt. ",
        "*Three nights into the erg, the days have blurred together. ",
        "Past midnight, a camel screams. ",
        "*By midmorning we have led the caravan into the hollow. ",
    ],
)
def test_the_time_a_journey_has_taken_opens_a_scene(opening: str) -> None:
    """A story on the road says how far on it is ("the second evening", "three nights into
    the erg") instead of how much later: with no dates (the proxy's view), that is the cue."""
    assert "time" in _cues_after_a_scene(opening)


@pytest.mark.parametrize(
    "opening",
    [
        "*Monday morning on Tallow Street. ",
        "Ten minutes to midnight. I had the tire iron out of the trunk. ",
        "*A quarter to nine, and the bar is empty. ",
        "Half past seven and the fog is in. ",
    ],
)
def test_a_day_and_its_part_or_a_time_in_words_is_a_time_cue(opening: str) -> None:
    assert "time" in _cues_after_a_scene(opening)


@pytest.mark.parametrize(
    "message",
    [
        "Two days from now we ride for the coast. ",
        "*The second day of a feast is the worst. ",
        "Two to Carrowmere. How much? ",
        "Sunday I think we should go. ",
        "Sunday night I think we should go. ",
        "Friday night works for me. ",
        "Two to a bunk, the crew sleeps in shifts. ",
        "Three to seven, five is ideal. ",
        "Past the end of the pier, the water turns black. ",
        "In the last year I've lost two brothers. ",
        "On the last day of school, you told me. ",
    ],
)
def test_a_plan_or_a_remark_about_a_day_is_no_time_jump(message: str) -> None:
    assert "time" not in _cues_after_a_scene(message)


@pytest.mark.parametrize(
    "message",
    [
        "*April was still laughing when she handed him the second apple.* " + FILLER,
        "*She pulls the Christmas sweater tighter around her shoulders.* " + FILLER,
        "*He glances at his watch. 4:15. Plenty of time before the ferry.* " + FILLER,
        "*You may first want to check the rigging,* she says. " + FILLER,
        "friday the 15th if the varnish dries",
        '"The bus leaves at 4:50 a.m. sharp," she says. ' + FILLER,
    ],
)
def test_a_date_in_a_chat_message_in_speech_or_in_passing_is_not_a_dateline(message: str) -> None:
    turns = [Turn("when can you come?"), Turn(message)]
    assert "time" not in score_scene_starts(turns)[0].cues


def test_in_a_chat_of_speech_alone_a_long_line_is_speech_not_narration() -> None:
    """Dialogue-only roleplay has no quotes to set its speech apart: a long line that names
    a date reports it ("arrived the first of October") and sets no scene's time, and a time
    phrase counts as it does in quoted speech."""
    report = (
        "The Corriente, arrived the first of October from Havana. Forty crates, declared as "
        "sewing machines, consigned to Halvorsen Import, and the duty paid in cash the same "
        "afternoon by a man who signed with an initial I could not read."
    )
    talk = [
        Turn(f"line {i} of plain talk, no quotes", "Vic" if i % 2 else "Ilse") for i in range(30)
    ]
    narrated = [Turn(f"*{t.text}* she says.", t.speaker) for t in talk]
    plain = score_scene_starts([*talk, Turn(report, "Ilse")])[-1]
    assert "time" not in plain.cues
    assert "time" in score_scene_starts([*narrated, Turn(report, "Ilse")])[-1].cues
    later = Turn("Three days later. Did you find him?", "Ilse")
    spoken, written = (score_scene_starts([*chat, later])[-1] for chat in (talk, narrated))
    assert "time" in spoken.cues
    assert spoken.score < written.score


def _at(*seconds: float) -> list[Turn]:
    start = datetime(2024, 5, 8, 13, 56, tzinfo=UTC)
    return [Turn(f"message {i}", time=start + timedelta(seconds=s)) for i, s in enumerate(seconds)]


def test_dates_that_tell_nothing_count_as_none() -> None:
    """A history the proxy received in one request is stamped with the moment it arrived:
    its scenes are found as in a chat with no dates at all."""
    assert threshold_for([Turn("a"), Turn("b")]) == UNDATED_THRESHOLD
    assert threshold_for(_at(0, 0, 0.001, 0.001, 0.002)) == UNDATED_THRESHOLD
    assert threshold_for(_at(0, 0, 0, 0, 86_400, 86_400)) == THRESHOLD  # sessions a day apart
    assert threshold_for(_at(0, 20, 45, 80, 130)) == THRESHOLD  # a live chat
    # Through the proxy: a history with no dates, then the few messages dated as they passed.
    start = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)
    history = [Turn(f"message {i}") for i in range(60)]
    live = [Turn("asked", time=start), Turn("answered", time=start + timedelta(seconds=9))]
    assert threshold_for([*history, *live]) == UNDATED_THRESHOLD


def test_a_history_received_at_once_finds_the_breaks_of_the_undated_chat() -> None:
    corpus = proxy_view(from_generated(generate(300, seed=3), "narrated", "generated"))
    undated = [Turn(m.text, m.name) for m in corpus.chat.messages]
    now = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)
    stamped = [
        Turn(m.text, m.name, time=now + timedelta(milliseconds=i // 50))
        for i, m in enumerate(corpus.chat.messages)
    ]

    def starts(turns: list[Turn]) -> list[int]:
        return pick_scene_starts(
            score_scene_starts(turns),
            count=len(turns),
            minimum_length=10,
            threshold=threshold_for(turns),
        )

    assert starts(undated)
    assert starts(stamped) == starts(undated)


def test_a_group_chat_through_the_proxy_finds_the_breaks_of_the_named_chat() -> None:
    """SillyTavern sends a group's messages as "Name: text" from `assistant`: the cues read
    the speakers from there, so the proxy's copy finds what the named chat (with no dates)
    does."""
    corpus = from_generated(generate(300, seed=1, group=True), "group", "generated")
    named = Chat(chat_id="named", header={"chat_metadata": {}})
    for message in corpus.chat.messages:
        if not message.is_hidden:
            named.append({k: v for k, v in message.items() if k != "send_date"})
    proxied = proxy_view(corpus).chat
    character = next(m for m in named.messages if not m.is_user and not m.is_narrator)
    assert any(m.text.startswith(f"{character.name}: ") for m in proxied.messages)
    settings = Settings()
    for chat in (named, proxied):
        detect_scene_breaks(chat, OfflineBackend(), settings)
    assert break_indexes(named.messages)
    assert break_indexes(proxied.messages) == break_indexes(named.messages)


def _two_taking_turns(count: int, again_at: tuple[int, ...]) -> list[Turn]:
    """A chat of two that takes turns, except where one speaks twice running."""
    turns: list[Turn] = []
    speaker = "Mara"
    for index in range(count):
        if index not in again_at:
            speaker = "Tobi" if speaker == "Mara" else "Mara"
        turns.append(Turn(f"plain words number {index} about the same things", speaker))
    return turns


def test_one_speaker_again_in_a_chat_that_takes_turns_is_a_cue() -> None:
    """Who speaks twice running opens a new conversation (or narrates a new scene) where the
    two otherwise take turns; it is not enough alone, but it adds to a weaker cue."""
    turns = _two_taking_turns(60, again_at=(30,))
    scored = {c.index: c for c in score_scene_starts(turns)}
    assert "again" in scored[30].cues
    assert scored[30].score < THRESHOLD  # alone it is no break
    assert not any("again" in c.cues for i, c in scored.items() if i != 30)


def test_speaking_again_tells_nothing_where_it_is_ordinary() -> None:
    """A texting chat where a third of the messages follow the sender's own, and a group
    chat: speaking again is no cue there."""
    texting = _two_taking_turns(60, again_at=tuple(range(3, 60, 3)))
    assert not any("again" in c.cues for c in score_scene_starts(texting))
    group = [Turn("plain words about the same things", name) for name in ["A", "B", "C"] * 20]
    group[31] = Turn("plain words about the same things", group[30].speaker)
    assert not any("again" in c.cues for c in score_scene_starts(group))


def test_a_speaker_who_only_looks_in_leaves_a_chat_of_two() -> None:
    """A chat of two where a ship's captain speaks twice on the radio is still a chat of two:
    its undated threshold and its turn-taking cue hold; three who each carry the chat are a
    group."""
    turns = _two_taking_turns(80, again_at=(40,))
    turns[20] = Turn("Pelican Grey here, we see your beacon.", "Pelican Grey")
    turns[60] = Turn("Pelican Grey again, docking in ten.", "Pelican Grey")
    assert threshold_for(turns) == UNDATED_THRESHOLD
    assert "again" in {c.index: c for c in score_scene_starts(turns)}[40].cues
    group = [Turn("plain words about the same things", name) for name in ["A", "B", "C"] * 20]
    assert threshold_for(group) == THRESHOLD


@pytest.mark.parametrize(
    "goodbye", ["got to go, there's a queue", "they're calling me up. speak later", "x", "gtg"]
)
def test_a_goodbye_answered_in_a_few_words_then_the_same_one_again_starts_a_session(
    goodbye: str,
) -> None:
    """Texting seen through the proxy has no dates: "speak later" / "x", then the one who said
    "x" writing again, is the next day's conversation, a session of its own however close the
    last scene start is."""
    turns = _two_taking_turns(60, again_at=(31,))
    turns[29] = Turn(goodbye, turns[29].speaker)
    turns[30] = Turn("x", turns[30].speaker)
    turns[31] = Turn("omg guess what, the surgeon called", turns[30].speaker)
    scored = {c.index: c for c in score_scene_starts(turns)}
    assert {"closing", "again", "news"} <= set(scored[31].cues)
    assert scored[31].session
    turns[27] = Turn("* * *\nThe next morning, three days after the storm.", turns[27].speaker)
    starts = pick_scene_starts(score_scene_starts(turns), count=60, minimum_length=10)
    assert {27, 31} <= set(starts)


@pytest.mark.parametrize(
    "answer",
    ["you too? how long is the queue going to be", "see, that is exactly what I meant earlier"],
)
def test_a_goodbye_answered_at_length_or_with_a_question_is_no_goodbye(answer: str) -> None:
    turns = _two_taking_turns(60, again_at=(31,))
    turns[29] = Turn("got to go, there's a queue", turns[29].speaker)
    turns[30] = Turn(answer, turns[30].speaker)
    turns[31] = Turn("omg guess what, the surgeon called", turns[30].speaker)
    scored = {c.index: c for c in score_scene_starts(turns)}
    assert "closing" in scored[30].cues  # the goodbye itself is one
    assert "closing" not in scored[31].cues
    assert not scored[31].session


@pytest.mark.parametrize(
    "agreed",
    [
        "Too many times. Nine o'clock.",
        "Then we meet at the big clock at three.",
        "Tomorrow, your lunch hour, my office.",
        "Fine. Meet me by the ferry gate.",
    ],
)
def test_a_meeting_agreed_just_before_is_a_cue(agreed: str) -> None:
    """An undated dialogue goes where the two just agreed to meet: the message after the plan's
    answer has the cue (the answer itself is the same scene: "You promise?"); it is not
    enough alone."""
    turns = _two_taking_turns(60, again_at=())
    turns[29] = Turn(agreed, turns[29].speaker)
    scored = {c.index: c for c in score_scene_starts(turns)}
    assert [i for i in range(27, 35) if "plan" in scored[i].cues] == [31]
    assert scored[31].score < threshold_for(turns)


@pytest.mark.parametrize(
    "said",
    [
        "It was a long time ago, and I was one of them.",
        "Nice to meet you.",
        "At one point he stopped and looked back.",
        "Keep your eyes at three of the guards.",
    ],
)
def test_talk_of_time_that_sets_no_meeting_is_no_plan(said: str) -> None:
    turns = _two_taking_turns(60, again_at=())
    turns[29] = Turn(said, turns[29].speaker)
    assert not any("plan" in c.cues for c in score_scene_starts(turns))


def test_a_plan_in_the_middle_of_a_scene_is_no_goodbye() -> None:
    """ "We have to go before then." plans; it takes no leave of the other."""
    turns = _two_taking_turns(60, again_at=())
    turns[29] = Turn("They change at midnight. We have to go before then.", turns[29].speaker)
    assert "closing" not in {c.index: c for c in score_scene_starts(turns)}[30].cues


def test_a_models_thinking_before_a_reply_hides_no_cue_and_makes_none() -> None:
    """A reasoning model's thoughts left in its replies (an undated chat, as the proxy sees
    it): "The next morning" after them still opens a scene, and a time phrase inside them
    opens none."""

    def chat(thinking: bool) -> Chat:
        seen = proxy_view(from_generated(generate(300, seed=3), "narrated", "generated")).chat
        for message in seen.messages:
            if thinking and not message.is_user:
                message["mes"] = (
                    "<think>\nThe next morning? No. Three days later? Keep the scene going.\n"
                    "</think>\n\n" + message.text
                )
        return seen

    plain = detect_scene_breaks(chat(False), OfflineBackend(), Settings())
    assert plain
    assert detect_scene_breaks(chat(True), OfflineBackend(), Settings()) == plain
