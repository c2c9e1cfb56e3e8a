"""Notes out of character are left out of recaps (`autorecap.core.out_of_character`)."""

from __future__ import annotations

import pytest

from autorecap.core.out_of_character import in_character, without_tags, without_thoughts


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


@pytest.mark.parametrize(
    ("text", "story"),
    [
        (
            "<think>\nThe user wants the tavern. Keep it tense.\n</think>\n\nGus pours the ale.",
            "Gus pours the ale.",
        ),
        ("<thinking>plan: stay cold</thinking> She turns away.", "She turns away."),
        ('He nods. <!-- affection +2 --> "Fine."', 'He nods.   "Fine."'),
        ("<THINK>x</THINK>Done.", "Done."),
        # the opening tag was in the prefill or cut off; one name opens, another closes; nested
        ("Thinking hard...</think>She smiles.", "She smiles."),
        ("<thinking>plan</think>She nods.", "She nods."),
        ("<think>a <think>b</think> c</think>She nods.", "She nods."),
    ],
)
def test_a_models_thinking_left_in_its_reply_is_no_story(text: str, story: str) -> None:
    """A reasoning model's thoughts that SillyTavern did not parse out stay in the text: they
    are no part of what happened, for recaps, recall and the scene cues alike."""
    assert in_character(text) == story
    assert without_thoughts(text) == story


def test_a_message_that_is_only_thinking_keeps_it() -> None:
    assert without_thoughts("<think>only this</think>") == "<think>only this</think>"
    assert in_character("<think>only this</think>") == "<think>only this</think>"


@pytest.mark.parametrize(
    ("text", "story"),
    [
        ("<div style='color:#c33'>She draws her sword.</div>", "She draws her sword."),
        ('<p>"Forty crowns."</p><p>She waits.</p>', '"Forty crowns."\n\nShe waits.'),
        ("<b>Bold</b> move, <i>captain</i>.", "Bold move, captain."),
        ("<font color=gray>*Rain.*</font> Mira pays.", "*Rain.* Mira pays."),
        ("A<br>B<br/>C", "A\nB\nC"),
        ("<td>Name</td><td>Mira</td>", "Name\n\nMira"),
        # no tag: a heart, a comparison, a word in angle brackets, a quote mark of a reply
        ("I <3 you, and 3 < 4 > 2.", "I <3 you, and 3 < 4 > 2."),
        ("Hi <user>, welcome back. <sigh> The sign read <CLOSED>.", None),
        ("thin < she muttered.\nThe next morning they rode.\n> The letter: come alone.", None),
    ],
)
def test_a_styled_reply_is_read_as_its_words(text: str, story: str | None) -> None:
    assert in_character(text) == (story or text)
    assert without_tags(text) == (story or text)


def test_a_tracker_in_html_is_still_told_by_its_tags() -> None:
    """Tags are taken out after the status block: a tag is a tracker's mark."""
    text = "He nods.\n\n<div class='status'>Location: Inn<br>Time: Night</div>"
    assert in_character(text) == "He nods."
