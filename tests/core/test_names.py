"""Speakers' names: read from a chat, and learnt from what a proxied request carries."""

from __future__ import annotations

import pytest

from autorecap.core.model import Chat, Message
from autorecap.core.names import (
    character_name_of,
    learn_names,
    names_from_prompt,
    names_from_request,
    names_known,
    spoken,
    user_name_of,
)


@pytest.mark.parametrize(
    ("prompt", "expected"),
    [
        # SillyTavern's default main prompt (chat completion)
        (
            "Write Seraphina's next reply in a fictional chat between Seraphina and Tomas.",
            ("Tomas", "Seraphina"),
        ),
        # ... and the rest of the prompt after it: a full stop ends a name
        (
            "Write Seraphina's next reply in a fictional chat between Seraphina and Tomas. "
            "Write 1 reply only in internet RP style.",
            ("Tomas", "Seraphina"),
        ),
        (
            "A fictional chat between Seraphina and Tomas. Seraphina's personality: kind.",
            ("Tomas", "Seraphina"),
        ),
        ("A chat between Dr. Faust and J.R. Hale. Be terse.", ("J.R. Hale", "Dr. Faust")),
        # a group chat: the characters, then the user; no one character speaks for all
        (
            "Write Mae's next reply in a fictional chat between Mae, Rook and Tomas.",
            ("Tomas", None),
        ),
        ("You are Mira, captain of the Heron.", (None, "Mira")),
        (
            "You're roleplaying as Élodie Marchand. You are talking to Jonah.",
            ("Jonah", "Élodie Marchand"),
        ),
        ("[Seraphina's personality: kind, stern]\nThe user is Tomas.", ("Tomas", "Seraphina")),
        ("A conversation between Ann and Bo.", ("Bo", "Ann")),
        ("Name: Kestrel\nA tired courier.", (None, "Kestrel")),
        ("Play Vos, a smuggler who owes money.", (None, "Vos")),
        # nothing that names anyone
        ("You are a helpful assistant.", (None, None)),
        ("You are an AI. Stay in character.", (None, None)),
        ("A chat between User and Assistant.", (None, None)),
        ("", (None, None)),
    ],
)
def test_names_from_a_system_prompt(prompt: str, expected: tuple[str | None, str | None]) -> None:
    assert names_from_prompt([prompt]) == expected


def test_name_fields_come_before_the_prompt() -> None:
    history = [("user", "Hi.", "Tom"), ("assistant", "Hello.", "Sera")]
    assert names_from_request(["You are Mira."], history) == ("Tom", "Sera")


def test_a_name_every_reply_opens_with_is_the_characters() -> None:
    history = [
        ("user", "We go north.", ""),
        ("assistant", "Seraphina: The path is steep.", ""),
        ("user", "Fine.", ""),
        ("assistant", "Seraphina: Then follow me.", ""),
    ]
    assert names_from_request([], history) == (None, "Seraphina")


def test_mixed_or_rare_openings_name_nobody() -> None:
    group = [
        ("assistant", "Bram: Ale!", ""),
        ("assistant", "Ysolde: Water.", ""),
        ("assistant", "Bram: More ale.", ""),
    ]
    assert names_from_request([], group) == (None, None)
    once = [("assistant", "Note: the door is shut.", ""), *[("assistant", "It rains.", "")] * 3]
    assert names_from_request([], once) == (None, None)


def stand_in_chat() -> Chat:
    chat = Chat(chat_id="c")
    chat.append({"name": "User", "is_user": True, "mes": "Hello."})
    chat.append({"name": "Assistant", "is_user": False, "mes": "Welcome."})
    return chat


def test_learnt_names_replace_the_stand_ins() -> None:
    chat = stand_in_chat()
    changed: list[object] = []
    chat.listeners.append(changed.append)
    assert not names_known(chat)
    assert learn_names(chat, "Tomas", "Seraphina")
    assert [m.name for m in chat.messages] == ["Tomas", "Seraphina"]
    assert (chat.user_name, chat.character_name) == ("Tomas", "Seraphina")
    assert (user_name_of(chat), character_name_of(chat)) == ("Tomas", "Seraphina")
    assert names_known(chat)
    assert None in changed  # the header is saved
    assert not learn_names(chat, "Someone", "Else")  # real names are never replaced


def test_one_side_can_be_learnt_alone() -> None:
    chat = stand_in_chat()
    assert learn_names(chat, None, "Seraphina")
    assert [m.name for m in chat.messages] == ["User", "Seraphina"]
    assert not names_known(chat)


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        # SillyTavern's group chat through the proxy: the character named before the text.
        ("Assistant", "Mae: We sail at dawn.", ("Mae", "We sail at dawn.")),
        ("Assistant", "Dr. Faust: Indeed.", ("Dr. Faust", "Indeed.")),
        ("Assistant", "Capt.: Report, sailor.", ("Capt", "Report, sailor.")),
        # The name said twice ("names in content" with a named message): said once.
        ("Seraphina", "Seraphina: Hello there.", ("Seraphina", "Hello there.")),
        # Not a speaker: a common word, a note, another name on a named message.
        ("Assistant", "Note: the bridge is out.", ("Assistant", "Note: the bridge is out.")),
        ("Assistant", "Chapter Two: the storm", ("Assistant", "Chapter Two: the storm")),
        ("Assistant", "Captain's Log: day 4", ("Assistant", "Captain's Log: day 4")),
        ("User", "OOC: skip to the city", ("User", "OOC: skip to the city")),
        ("Mae", "Rook: that's what he said.", ("Mae", "Rook: that's what he said.")),
        ("Assistant", "No prefix here.", ("Assistant", "No prefix here.")),
    ],
)
def test_who_speaks_a_message(name: str, text: str, expected: tuple[str, str]) -> None:
    assert spoken(Message({"name": name, "mes": text})) == expected
