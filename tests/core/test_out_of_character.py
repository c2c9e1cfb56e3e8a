"""Notes out of character are left out of recaps (`autorecap.core.out_of_character`)."""

from __future__ import annotations

import pytest

from autorecap.core.out_of_character import in_character


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("(OOC: brb, dinner) She opens the gate.", "She opens the gate."),
        ("She nods. ((loving this)) Then she leaves.", "She nods. Then she leaves."),
        ("She nods. ((the (real) one)) Then she leaves.", "She nods. Then she leaves."),
        ("[ooc: nice post] The code is 4471.", "The code is 4471."),
        ("He waves.\nOOC: skip to the city?", "He waves."),
        ("He waves.\n// back tomorrow", "He waves."),
        ("(OOC: an unclosed note to the end", ""),
        # ... of its line, not of the message.
        ("(OOC: sorry for the wait\n\nShe walks to the cistern.", "She walks to the cistern."),
        # Not notes: a plain aside, a link, a word that holds "ooc".
        ("He smiles (a rare thing) and waves.", None),
        ("The map is at https://example.org/maps.", None),
        ("The Boocock brothers sing.", None),
        ("Ooc, the keeper said.", None),
    ],
)
def test_notes_out_of_character_are_left_out(text: str, kept: str | None) -> None:
    assert " ".join(in_character(text).split()) == (text if kept is None else kept)
