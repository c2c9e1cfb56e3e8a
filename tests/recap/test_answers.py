"""Reading LLM answers (`autorecap.recap.answers`): labels, refusals, numbered lines."""

from __future__ import annotations

import pytest

from autorecap.recap.answers import (
    BadAnswerError,
    check_recap,
    new_scene,
    numbered_lines,
    prompt_labels,
)
from autorecap.settings import DEFAULT_MESSAGE_RECAP_PROMPT, DEFAULT_SCENE_RECAP_PROMPT

LABELS = prompt_labels(DEFAULT_MESSAGE_RECAP_PROMPT)
MESSAGE = (
    "Mira pays Harrow Vane forty crowns for the chart of the Cinder Line, and promises the "
    "rest once the Kestrel is back from Port Anvil."
)


def test_the_labels_of_the_default_prompts_are_found() -> None:
    assert LABELS == ["Earlier messages", "Message from"]
    assert prompt_labels(DEFAULT_SCENE_RECAP_PROMPT) == []  # its labels sit inside sentences


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        ("", "no recap"),
        ("  \n ", "no recap"),
        ("(none)", "no recap"),
        ("N/A.", "no recap"),
        ("Earlier messages:\n(none)", "label 'Earlier messages'"),
        ("Message from Captain Mira:\nShe paid.", "label 'Message from'"),
        ("Tomas: (none)", "placeholder"),
        (MESSAGE, "copied the message"),
        (f"Here it is: {MESSAGE.lower()}", "copied the message"),
    ],
)
def test_answers_that_are_not_recaps_are_refused(answer: str, why: str) -> None:
    with pytest.raises(BadAnswerError, match=why):
        check_recap(answer, labels=LABELS, sources=[MESSAGE])


def test_a_recap_is_accepted_and_stripped() -> None:
    answer = "  Mira paid Harrow Vane 40 crowns for the Cinder Line chart.\n"
    assert check_recap(answer, labels=LABELS, sources=[MESSAGE]) == answer.strip()


def test_a_short_message_may_be_its_own_recap() -> None:
    assert check_recap("Mira left.", labels=LABELS, sources=["Mira left."]) == "Mira left."


def test_numbered_lines_in_the_usual_forms() -> None:
    answer = (
        "Here are the notes:\n[1] Mira paid.\n2. Vane left\n  for Port Anvil.\n(3) -\n[5] Late."
    )
    assert numbered_lines(answer) == {
        1: "Mira paid.",
        2: "Vane left for Port Anvil.",
        3: "-",
        5: "Late.",
    }


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("NEW SCENE: Dawn at the docks.", ("Dawn at the docks.", True)),
        ("new scene - Dawn at the docks.", ("Dawn at the docks.", True)),
        ("Dawn at the docks, a new scene.", ("Dawn at the docks, a new scene.", False)),
    ],
)
def test_a_new_scene_mark_is_taken_off(line: str, expected: tuple[str, bool]) -> None:
    assert new_scene(line) == expected
