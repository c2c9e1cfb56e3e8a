"""Eval scripts (`*.chat.txt`) are read into SillyTavern chats as the product would import them
(`autorecap.evaluation.corpus`)."""

from __future__ import annotations

from pathlib import Path

from autorecap.evaluation.corpus import read_script


def _script(tmp_path: Path, char: str, lines: list[str]) -> Path:
    path = tmp_path / "tiny.chat.txt"
    head = ["# title: tiny", "# style: narrated", "# user: Jules", f"# char: {char}"]
    body = ["# dates: st", "=== 2023-11-02 09:00", *lines, "--- questions", "Q: Who?", "A: Roz"]
    path.write_text("\n".join([*head, *body]), encoding="utf-8")
    return path


def test_narrator_lines_are_narrator_messages(tmp_path: Path) -> None:
    chat = read_script(
        _script(tmp_path, "Roz", ["Narrator: Snow falls.", "Jules: Hi.", "Roz: Hello, Jules."])
    ).chat
    assert [m.is_narrator for m in chat.messages] == [True, False, False]


def test_a_card_named_narrator_is_the_character(tmp_path: Path) -> None:
    """SillyTavern has many cards named "Narrator": their replies are the character's, not
    narrator messages of the `/sys` kind."""
    chat = read_script(
        _script(tmp_path, "Narrator", ["Jules: Hi.", "Narrator: You meet Roz. She nods."])
    ).chat
    reply = chat.messages[1]
    assert (reply.name, reply.is_narrator, reply.is_user) == ("Narrator", False, False)
