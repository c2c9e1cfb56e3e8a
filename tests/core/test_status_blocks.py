"""A card's status block is left out of what recaps and recall read, and its place and day are
read (`autorecap.core.status_blocks`)."""

from __future__ import annotations

import pytest

from autorecap.core.out_of_character import in_character
from autorecap.core.status_blocks import status_fields, where_and_when, without_status

EMOJI = "\n\n---\n📍 Location: The Rusty Anchor\n🕐 Time: Day 3, evening\n❤️ Affection: 35/100"
FENCED = "\n\n```\n[Location: Old Mill Road | Time: Day 2, night | Mood: tense | HP: 80/100]\n```"
HTML = (
    "\n\n<details><summary>Status</summary>Location: The chapel crypt<br>"
    "Time: Day 4, morning<br>Affection: 40/100</details>"
)
TITLED = "**Status**\nLocation: Harbour office\nTime: May 8, dawn\n\n"
PLAIN = "\n\nLocation: Harbour office\nTime: May 8, dawn\nMood: grim"
TABLE = (
    "\n\n| Location | Time | Mood | HP |\n|:---|---|---|---:|\n| Tavern | Day 3, evening | Tense "
    "| 80/100 |"
)
TABLE_ROWS = (
    "\n\n| Stat | Value |\n|---|---|\n| **Location** | Tavern |\n| Time | Day 3 |\n"
    "| Affection | 35/100 |"
)
HTML_TABLE = (
    "\n\n<table><tr><td>Location</td><td>The Rusty Anchor</td></tr>"
    "<tr><td>Time</td><td>Day 3, evening</td></tr><tr><td>Affection</td><td>35/100</td></tr>"
    "</table>"
)
HTML_TITLED = (
    "\n<table>\n<tr><th>Location</th><th>Time</th><th>HP</th></tr>\n"
    "<tr><td>The Rusty Anchor</td><td>Day 3, evening</td><td>80/100</td></tr>\n</table>"
)
HTML_CELLS = (
    "\n<table><tr><td>📍 Location: The Rusty Anchor</td></tr><tr><td>🕐 Time: Day 3, evening"
    "</td></tr><tr><td>❤️ Affection: 35/100</td></tr></table>"
)
KEYLESS = "\n\n📍 The Rusty Anchor | 🕐 Day 3, evening | ❤️ 35/100"
KEYLESS_LINES = "\n\n📍 The Rusty Anchor\n🕐 Day 3, evening\n❤️ 35/100"


@pytest.mark.parametrize(
    ("text", "story"),
    [
        ('*She pours the ale.* "Three coppers."' + EMOJI, '*She pours the ale.* "Three coppers."'),
        ("He nods." + FENCED, "He nods."),
        ("He nods." + HTML, "He nods."),
        (TITLED + "The gulls scream over the water.", "The gulls scream over the water."),
        ("The gulls scream." + PLAIN, "The gulls scream."),
        ("*She smiles*\n\n---\nLocation: Inn\nTime: Night\nMood: calm", "*She smiles*"),
        ("Okay!\n\nHP: 80/100\nMP: 20/50", "Okay!"),  # two gauges
        # a Markdown table: a row of values under its keys, or a key and a value per row
        ("He nods." + TABLE, "He nods."),
        ("He nods." + TABLE_ROWS, "He nods."),
        # an HTML table: a key and a value per row, or a row of values under its titles
        ("He nods." + HTML_TABLE, "He nods."),
        ("He nods." + HTML_TITLED, "He nods."),
        ("He nods." + HTML_CELLS, "He nods."),  # a row of one cell is its text
        # emoji standing for the keys
        ("He nods." + KEYLESS, "He nods."),
        ("He nods." + KEYLESS_LINES, "He nods."),
    ],
)
def test_a_status_block_before_or_after_a_reply_is_left_out(text: str, story: str) -> None:
    assert without_status(text) == story
    assert in_character(text).strip() == story


@pytest.mark.parametrize(
    "text",
    [
        # A script of lines, a short list of what is carried, speech with a colon in it.
        "The list:\nMae: Hi!\nTom: Hey.\nRi: Yo.",
        "She checks the ledger.\nRope: 50 ft\nRations: 3 days",
        "Nothing to see: just prose here. Time: it flies.",
        'He reads it aloud.\nTo: the Harbourmaster\nFrom: "a friend"',
        "Mae: I'll take the left.\nTom: I'll take the right.\nMae: Go.",
        "<i>She whispers.</i> Come closer.",
        # What the story gives as a list keeps its text: no tracker keeps count of these.
        "You open your pack.\n\nGold: 47 coins\nRations: 3 days\nRope: 50 ft\nTorch: 2",
        "To: Captain Mira Vell\nFrom: Harbourmaster Oskar\nRe: The missing cargo\n\nMeet me.",
        "She lays out the file.\n\n**Suspect:** Marcus Reed\n**Motive:** Debt\n**Alibi:** None",
        "Her phone lights up.\n\nMira: we should go\nTom: not yet\nAnna: fine by me",
        "Remember the code.\n\n🔑 Code: 4471\n📍 Door: the blue one",
        "Name: Elara\nAge: 24\nClass: Ranger",
        # a meeting's time and place under a note: two of a tracker's fields and no mark
        "The meeting is set.\n\nTime: 8 p.m.\nPlace: The old chapel",
        "She whispers:\nLocation: cellar\nTime: midnight\nPassword: ash",
        # prose with colons and semicolons
        "He nods.\nShe had two rules: never lie; second rule: never steal",
        "ok so the plan: we sneak in through the cellar; the backup: tom waits outside",
        # a table the story gives, a plan in a text message, an emoji in a sentence
        "The price list:\n\n| Item | Price |\n|---|---|\n| Rope | 5 |\n| Torch | 2 |",
        "The schedule:\n\n| Time | Place |\n|---|---|\n| 9am | Dock |\n| 3pm | Mill |",
        "📍 Paris\n🕐 3pm\n\nsee you there!",
        "Found it ❤️\n📍 Paris",
        "He nods.\n\n| Location | Tavern |\n| Time | Day 3 |",
        # an HTML table the story gives, between its sentences or at the end (its tags are
        # its form, no tracker's mark, as a Markdown table's bars are)
        "The menu reads:\n<table><tr><td>Stew</td><td>4 coppers</td></tr>"
        "<tr><td>Ale</td><td>2 coppers</td></tr></table>\nShe orders the stew.",
        "She slides it across.\n\n<table><tr><th>Day</th><th>Time</th><th>Place</th></tr>"
        "<tr><td>Friday</td><td>9pm</td><td>Docks</td></tr></table>",
        "She hands me the note.\n<table><tr><td>Place</td><td>the old chapel</td></tr>"
        "<tr><td>Time</td><td>midnight</td></tr></table>",
        # a table or emoji lines with a tracker's keys but no mark besides their form: an
        # itinerary, feelings in a text, a plan
        "She slides it across.\n\n| Day | Time | Place |\n|---|---|---|\n| Friday | 9pm | Docks |",
        "see you tomorrow!\n😊 can't wait\n❤ love you so much\n💭 thinking of you",
        "She texts back:\n📍 Paris\n🕐 3pm\n📅 Friday",
        # English words that are keys in other languages
        "He checks the file.\nSuspect: Ortiz\nData: 40 GB\nLocal: yes\nHumor: none",
    ],
)
def test_what_is_no_status_block_stays(text: str) -> None:
    assert without_status(text) == text
    assert status_fields(text) == {}


def test_a_thought_in_a_sentence_is_a_field_of_the_block_and_prose_is_not() -> None:
    thought = (
        "\n\n---\n📍 Location: Inn\n💭 Thoughts: He looks tired. I hope he stays.\n🕐 Time: Night"
    )
    assert without_status("She smiles." + thought) == "She smiles."
    # a "Key:" before more words than a field holds is the story's
    prose = "Note: " + "the rain kept on and on over the roofs of the town " * 4
    assert without_status(prose + thought) == prose.strip()
    assert without_status(prose + "\nMood: calm\nWeather: rain\nTime: dusk") == prose.strip()


def test_the_fields_place_and_day_of_a_status_block() -> None:
    assert status_fields("x" + EMOJI) == {
        "location": "The Rusty Anchor",
        "time": "Day 3, evening",
        "affection": "35/100",
    }
    assert where_and_when("x" + EMOJI) == ("rusty anchor", "day 3")
    for block in (KEYLESS, KEYLESS_LINES):
        assert status_fields("x" + block) == status_fields("x" + EMOJI)
    assert status_fields("x" + TABLE) == {
        "location": "Tavern",
        "time": "Day 3, evening",
        "mood": "Tense",
        "hp": "80/100",
    }
    assert where_and_when("x" + TABLE_ROWS) == ("tavern", "day 3")
    for block in (HTML_TABLE, HTML_TITLED, HTML_CELLS):
        assert where_and_when("x" + block) == ("rusty anchor", "day 3")
    assert status_fields("x" + HTML_CELLS) == status_fields("x" + EMOJI)
    assert where_and_when("x" + FENCED) == ("old mill road", "day 2")
    assert where_and_when(TITLED + "x") == ("harbour office", "may 8")
    assert where_and_when("no status at all") == ("", "")
    # one day however it is written; a posture is no place; a birthday is no time
    assert where_and_when("x" + _status("Date: Monday, May 8")) == where_and_when(
        "x" + _status("Date: May 8 (Monday)")
    )
    block = _status("Position: straddling his lap\nLocation: Bedroom\nBirthday: June 3")
    assert where_and_when("x" + block) == ("bedroom", "")
    assert status_fields("x" + _status("Time: Morning (9 a.m.)"))["time"] == "Morning (9 a.m.)"


@pytest.mark.parametrize(
    ("text", "place", "day"),
    [
        (
            "Он кивает.\n\n📍 Локация: Таверна\n🕐 Время: День 3, вечер\n❤️ Отношения: 35/100",
            "таверна",
            "день 3",
        ),
        (
            "Il hoche la tête.\n\n[Lieu: L'auberge | Heure: Jour 3, soir | Humeur: tendu]",
            "l'auberge",
            "jour 3",
        ),
        ("彼は頷いた。\n\n場所：酒場\n時間：3日目、夜\n気分：緊張", "酒場", "3日目"),
        ("Er nickt.\n\nOrt: Die Mühle\nZeit: Tag 2\nStimmung: ruhig", "die mühle", "tag 2"),
        (
            "Ella asiente.\n\nUbicación: La posada\nHora: Día 3\nRopa: capa gris",
            "la posada",
            "día 3",
        ),
    ],
)
def test_a_status_block_in_another_language(text: str, place: str, day: str) -> None:
    assert without_status(text) == text.split("\n\n")[0]
    assert where_and_when(text) == (place, day)


def _status(fields: str) -> str:
    return f"\n\n```\nMood: calm\nWeather: rain\n{fields}\n```"


def test_a_message_that_is_only_a_status_block_keeps_its_text_as_its_recap() -> None:
    from autorecap.core.out_of_character import recapped_text

    text = "[Location: Inn | Time: Night]"
    assert without_status(text) == ""
    assert recapped_text(text) == text
