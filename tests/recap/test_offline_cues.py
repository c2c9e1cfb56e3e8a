"""The offline scene cues read on their own: where a scene is said to happen."""

from __future__ import annotations

import pytest

from autorecap.recap.offline.cues import Turn, place_of, score_scene_starts


@pytest.mark.parametrize(
    ("texts", "place"),
    [
        (["We met again in Porto, by the river."], "Porto"),
        (["*The rain follows them down Weir Street.*"], "Weir Street"),
        (["They wait at the fish market for the boat."], "the fish market"),
        (["Nobody says where they are."], ""),
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


FILLER = "The bay is dark except for the office light, and the coffee has gone cold again. " * 3


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
    turns = [Turn("*Dana hands over the keys.* " + FILLER), Turn(opening + FILLER)]
    assert "time" in score_scene_starts(turns)[0].cues


@pytest.mark.parametrize(
    "message",
    [
        "friday the 15th if the varnish dries",
        '"The bus leaves at 4:50 a.m. sharp," she says. ' + FILLER,
    ],
)
def test_a_date_in_a_chat_message_or_in_speech_is_not_a_dateline(message: str) -> None:
    turns = [Turn("when can you come?"), Turn(message)]
    assert "time" not in score_scene_starts(turns)[0].cues
