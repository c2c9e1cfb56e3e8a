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
        # What SmolLM2-135M answered through llama.cpp (bench/small_llm.py):
        ("Captain Mira Vale: 32", "too short"),
        ("Tomas: 68", "too short"),
        ('The first message: "Mira, I am not sure what to do with you."', "labelled the message"),
        ("35 messages: 20 The first message is a story", "labelled the message"),
        ("Message 3: Mira counts", "labelled the message"),
        ("Tomas: *I stand up and hold the map tube with my good hand.*", "went on with the chat"),
        ('"Ack, aye, aye, aye!"', "went on with the chat"),
        ("You are a helpful AI assistant named SmolLM", "spoke as itself"),
        ('"Mira Vale: *Ack, aye, aye, aye!*', "went on with the chat"),
        ('Tomas:\n"Sixty!" *I glance at the chart, and I see it is old.*', "went on with the chat"),
        ("The note is a single sentence, three hundred crowns.", "about the note"),
        ("I am Captain Mira Vale, a cartographer of the Guild.", "spoke as itself"),
        (
            "Mira: one or two short sentences in the past tense that say who did what",
            "instructions",
        ),
        ('A:\nTomas: "The map of the Cinder Line."', "went on with the chat"),
    ],
)
def test_answers_that_are_not_recaps_are_refused(answer: str, why: str) -> None:
    with pytest.raises(BadAnswerError, match=why):
        check_recap(answer, labels=LABELS, sources=[MESSAGE], prompt=DEFAULT_MESSAGE_RECAP_PROMPT)


def test_a_recap_is_accepted_and_stripped() -> None:
    answer = "  Mira paid Harrow Vane 40 crowns for the Cinder Line chart.\n"
    assert check_recap(answer, labels=LABELS, sources=[MESSAGE]) == answer.strip()


def test_a_short_message_may_be_its_own_recap() -> None:
    assert check_recap("Mira left.", labels=LABELS, sources=["Mira left."]) == "Mira left."


@pytest.mark.parametrize(
    "answer",
    [
        "Tomas agreed.",
        "Mira: paid 40 crowns.",
        "Messages were traded about the debt.",
        '"Yes," Tomas agreed, and paid Mira 40 crowns.',
        "The note is: Mira paid Vane.",
    ],
)
def test_short_recaps_and_ones_about_messages_are_accepted(answer: str) -> None:
    kept = check_recap(answer, labels=LABELS, prompt=DEFAULT_MESSAGE_RECAP_PROMPT)
    assert kept == answer.removeprefix("The note is: ")


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


def test_ten_words_in_a_row_of_a_long_message_are_a_copy() -> None:
    long_message = (
        f"{MESSAGE} Then she walks the length of the pier in the rain, counting the masts of the "
        "ships that will not sail before the storm has passed."
    )
    copied = "Mira: she walks the length of the pier in the rain, counting the masts."
    with pytest.raises(BadAnswerError, match="copied the message"):
        check_recap(copied, labels=LABELS, sources=[long_message])
    told = "Mira walked the pier in the rain and counted the masts."
    assert check_recap(told, labels=LABELS, sources=[long_message]) == told
