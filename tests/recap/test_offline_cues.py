"""The offline scene cues read on their own: where a scene is said to happen."""

from __future__ import annotations

import pytest

from autorecap.recap.offline.cues import place_of


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
